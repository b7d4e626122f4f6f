//! The API's answers: discovery, list, get, Table output for `kubectl get`,
//! and Kubernetes `Status` errors. Pure: a request's method, path, query and
//! `Accept` header in, an [`Answer`] out.

use std::collections::BTreeMap;

use olm_api::packages::{self, PackageManifest};
use serde_json::{Value, json};

use super::selector::{LabelSelector, SelectorError, name_of_field_selector};

/// What to answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A JSON body with an HTTP status code.
    Json(u16, Value),
    /// A stream of watch events.
    Watch(Query),
    /// The `icon` subresource of PackageManifest `name` in `namespace`.
    Icon {
        /// The namespace.
        namespace: String,
        /// The PackageManifest.
        name: String,
    },
}

/// A list or watch request.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The namespace, or all.
    pub namespace: Option<String>,
    /// Only this name (`metadata.name` field selector).
    pub name: Option<String>,
    /// The label selector.
    pub selector: LabelSelector,
    /// How to write objects.
    pub format: Format,
    /// The resource version the client has seen, if any.
    pub resource_version: Option<String>,
}

impl Query {
    /// Whether `manifest` is asked for.
    pub fn matches(&self, manifest: &PackageManifest) -> bool {
        let empty = BTreeMap::new();
        self.name
            .as_ref()
            .is_none_or(|n| manifest.metadata.name.as_ref() == Some(n))
            && self
                .selector
                .matches(manifest.metadata.labels.as_ref().unwrap_or(&empty))
    }
}

/// How objects are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// As themselves.
    Object,
    /// As a `meta.k8s.io/v1` Table (`kubectl get`), each row with the object's
    /// metadata (`Metadata`), the whole object, or nothing.
    Table(RowObject),
}

/// What a Table row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowObject {
    /// Nothing.
    None,
    /// A PartialObjectMetadata (the default).
    Metadata,
    /// The whole object.
    Object,
}

/// Reads the format from the `Accept` header and `includeObject`.
pub fn format(accept: &str, include_object: Option<&str>) -> Format {
    let wants_table = accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"));
    if !wants_table {
        return Format::Object;
    }
    Format::Table(match include_object {
        Some("None") => RowObject::None,
        Some("Object") => RowObject::Object,
        _ => RowObject::Metadata,
    })
}

/// The subresource that serves a package's icon.
pub const ICON: &str = "icon";

/// The `/apis/<group>` and `/apis/<group>/v1` prefix.
fn group_path() -> String {
    format!("/apis/{}", packages::GROUP)
}

/// Routes a request. `list` gives the PackageManifests of a namespace (or all)
/// and the resource version they are at; `now` (Unix seconds) ages Table rows.
pub fn answer(
    method: &str,
    path: &str,
    query: &BTreeMap<String, String>,
    accept: &str,
    list: impl Fn(Option<&str>) -> (Vec<PackageManifest>, String),
    now: i64,
) -> Answer {
    if method != "GET" {
        return status(
            405,
            "MethodNotAllowed",
            &format!("{method} is not supported: PackageManifests are read-only"),
        );
    }
    let group = group_path();
    let version = format!("{group}/{}", packages::VERSION);
    match path.trim_end_matches('/') {
        "/apis" => return Answer::Json(200, group_list()),
        p if p == group => return Answer::Json(200, api_group()),
        p if p == version => return Answer::Json(200, resource_list()),
        _ => {}
    }
    let Some(rest) = path.strip_prefix(&format!("{version}/")) else {
        return not_found_path(path);
    };
    let segments: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    let (namespace, name) = match segments[..] {
        [packages::PLURAL] => (None, None),
        ["namespaces", ns, packages::PLURAL] => (Some(ns), None),
        ["namespaces", ns, packages::PLURAL, name] => (Some(ns), Some(name)),
        ["namespaces", ns, packages::PLURAL, name, ICON] => {
            return Answer::Icon {
                namespace: ns.to_owned(),
                name: name.to_owned(),
            };
        }
        _ => return not_found_path(path),
    };
    let format = format(accept, query.get("includeObject").map(String::as_str));
    let watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    if let Some(name) = name {
        let (manifests, _) = list(namespace);
        return match manifests
            .into_iter()
            .find(|m| m.metadata.name.as_deref() == Some(name))
        {
            Some(manifest) => Answer::Json(200, render(vec![manifest], format, None, now, false)),
            None => not_found(name),
        };
    }
    let selector = match LabelSelector::parse(query.get("labelSelector").map(String::as_str).unwrap_or("")) {
        Ok(selector) => selector,
        Err(e) => return bad_request(&e),
    };
    let name = match name_of_field_selector(query.get("fieldSelector").map(String::as_str).unwrap_or("")) {
        Ok(name) => name,
        Err(e) => return bad_request(&e),
    };
    let query = Query {
        namespace: namespace.map(str::to_owned),
        name,
        selector,
        format,
        resource_version: query.get("resourceVersion").cloned().filter(|v| !v.is_empty()),
    };
    if watch {
        return Answer::Watch(query);
    }
    let (manifests, resource_version) = list(query.namespace.as_deref());
    let items = manifests.into_iter().filter(|m| query.matches(m)).collect();
    Answer::Json(200, render(items, format, Some(&resource_version), now, true))
}

/// The namespace and package of a plan's path
/// (`/apis/<group>/v1/namespaces/<ns>/packagemanifests/<package>/plan`).
pub fn plan_path(path: &str) -> Option<(&str, &str)> {
    let rest = path
        .strip_prefix("/apis/")?
        .strip_prefix(packages::GROUP)?
        .strip_prefix('/')?
        .strip_prefix(packages::VERSION)?
        .strip_prefix('/')?;
    match rest.trim_end_matches('/').split('/').collect::<Vec<_>>()[..] {
        [
            "namespaces",
            ns,
            packages::PLURAL,
            name,
            packages::PLAN_SUBRESOURCE,
        ] if !ns.is_empty() && !name.is_empty() => Some((ns, name)),
        _ => None,
    }
}

fn bad_request(e: &SelectorError) -> Answer {
    status(400, "BadRequest", &e.to_string())
}

fn not_found_path(path: &str) -> Answer {
    status(
        404,
        "NotFound",
        &format!("the server could not find the requested resource {path}"),
    )
}

/// The `NotFound` answer for PackageManifest `name`.
pub fn not_found(name: &str) -> Answer {
    status_with(
        404,
        "NotFound",
        &format!("packagemanifests.{} \"{name}\" not found", packages::GROUP),
        json!({"name": name, "group": packages::GROUP, "kind": packages::PLURAL}),
    )
}

/// A `Status` failure.
pub fn status(code: u16, reason: &str, message: &str) -> Answer {
    status_with(code, reason, message, Value::Null)
}

fn status_with(code: u16, reason: &str, message: &str, details: Value) -> Answer {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if !details.is_null() {
        body["details"] = details;
    }
    Answer::Json(code, body)
}

fn group_json() -> Value {
    let gv = json!({"groupVersion": packages::API_VERSION, "version": packages::VERSION});
    json!({"name": packages::GROUP, "versions": [gv.clone()], "preferredVersion": gv})
}

fn group_list() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_json()]})
}

fn api_group() -> Value {
    let mut group = group_json();
    group["kind"] = json!("APIGroup");
    group["apiVersion"] = json!("v1");
    group
}

fn resource_list() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": packages::API_VERSION,
        "resources": [{
            "name": packages::PLURAL,
            "singularName": packages::SINGULAR,
            "namespaced": true,
            "kind": packages::KIND,
            "verbs": ["get", "list", "watch"],
            "categories": ["olm"],
        }, {
            // As the API server lists a subresource served by a connecter
            // (OLM's `LogoStorage`): its kind is the parent's, its verb GET's.
            "name": format!("{}/{ICON}", packages::PLURAL),
            "singularName": "",
            "namespaced": true,
            "kind": packages::KIND,
            "verbs": ["get"],
        }, {
            "name": format!("{}/{}", packages::PLURAL, packages::PLAN_SUBRESOURCE),
            "singularName": "",
            "namespaced": true,
            "group": packages::GROUP,
            "version": packages::VERSION,
            "kind": packages::PLAN_KIND,
            "verbs": ["create"],
        }],
    })
}

/// Objects as a list (or one object), or as a Table.
pub fn render(
    items: Vec<PackageManifest>,
    format: Format,
    resource_version: Option<&str>,
    now: i64,
    as_list: bool,
) -> Value {
    match format {
        Format::Object if as_list => json!({
            "kind": packages::LIST_KIND,
            "apiVersion": packages::API_VERSION,
            "metadata": {"resourceVersion": resource_version.unwrap_or_default()},
            "items": items,
        }),
        Format::Object => items
            .into_iter()
            .next()
            .map(|m| serde_json::to_value(m).unwrap_or_default())
            .unwrap_or_default(),
        Format::Table(row_object) => table(&items, row_object, resource_version, now),
    }
}

/// OLM's columns: Name, Catalog (the CatalogSource's display name), Age.
fn table(
    items: &[PackageManifest],
    row_object: RowObject,
    resource_version: Option<&str>,
    now: i64,
) -> Value {
    let rows: Vec<Value> = items
        .iter()
        .map(|m| {
            let age = m
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| human_duration(now - t.0.as_second()))
                .unwrap_or_else(|| "<unknown>".to_owned());
            let mut row = json!({"cells": [
                m.metadata.name.clone().unwrap_or_default(),
                m.status.catalog_source_display_name,
                age,
            ]});
            match row_object {
                RowObject::None => {}
                RowObject::Metadata => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": m.metadata,
                    });
                }
                RowObject::Object => row["object"] = serde_json::to_value(m).unwrap_or_default(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version.unwrap_or_default()},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Catalog", "type": "string", "format": "", "description": "The source catalog for this package", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp of the CatalogSource.", "priority": 0},
        ],
        "rows": rows,
    })
}

/// A duration as `kubectl get` shows ages (`45s`, `3m20s`, `5h`, `2d3h`, `1y20d`).
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        return if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = m / 60;
    if h < 8 {
        return if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    let d = h / 24;
    if h < 24 * 8 {
        return if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        };
    }
    if h < 24 * 365 * 2 {
        return format!("{d}d");
    }
    let y = d / 365;
    if h < 24 * 365 * 8 && d % 365 != 0 {
        return format!("{y}y{}d", d % 365);
    }
    format!("{y}y")
}
