//! Whether the custom resources the cluster holds would still be valid under
//! a revision's CRDs (pure), beside [`super::safety`]'s stored versions: for
//! each CRD of the revision whose schema of a version it serves differs from
//! the live CRD's, every object of that version must validate against the
//! revision's schema, or the API server would refuse each write to it (the
//! operator's own status updates among them) once the rollback is done.
//!
//! The reconcile lists the objects of what [`to_check`] names, and
//! [`invalid`] validates them. The schemas are OpenAPI v3 as CRDs hold them;
//! they are checked as JSON Schema draft 4 (which OpenAPI v3's schema
//! object extends), with `nullable: true` read as allowing `null`; the
//! `x-kubernetes-*` extensions are left out (unknown fields are pruned, not
//! refused, by the API server, so the check never refuses them either).

use jsonschema::Validator;
use olm_api::model::OperatorRevision;
use serde_json::{Map, Value};

use super::content;

/// How many objects a refusal names, per CRD version.
pub const NAMED: usize = 5;

/// A CRD version whose objects [`invalid`] must see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToCheck {
    /// The CRD.
    pub crd: String,
    /// Its group.
    pub group: String,
    /// The version, served by both the revision's CRD and the live one.
    pub version: String,
    /// Its kind.
    pub kind: String,
    /// Its plural.
    pub plural: String,
}

/// The objects of one CRD version, as the API server lists them.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    /// The CRD.
    pub crd: String,
    /// The version they were listed in.
    pub version: String,
    /// The objects.
    pub objects: Vec<Value>,
}

/// Objects of a CRD version that the revision's schema rejects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidObjects {
    /// The CRD.
    pub crd: String,
    /// The version.
    pub version: String,
    /// The first [`NAMED`] objects, each as `namespace/name (why)`.
    pub objects: Vec<String>,
    /// How many objects are rejected in all.
    pub total: usize,
}

impl std::fmt::Display for InvalidObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} object(s) of CRD {} version {} do not validate against the revision's schema: {}",
            self.total,
            self.crd,
            self.version,
            self.objects.join(", ")
        )?;
        if self.total > self.objects.len() {
            write!(f, " and {} more", self.total - self.objects.len())?;
        }
        Ok(())
    }
}

/// The CRDs of `revision` the cluster holds (`live`, by name), as
/// `(name, the revision's manifest, the live one)`.
fn pairs<'a>(
    revision: &'a OperatorRevision,
    live: &'a [(String, Value)],
) -> impl Iterator<Item = (String, Value, &'a Value)> + 'a {
    revision
        .spec
        .objects
        .iter()
        .filter(|o| o.key.kind == "CustomResourceDefinition")
        .filter_map(move |o| {
            let (_, existing) = live.iter().find(|(name, _)| *name == o.key.name)?;
            Some((o.key.name.clone(), content::manifest(o).ok()?, existing))
        })
}

/// The versions `crd` serves, each with its schema (`Value::Null` when it
/// declares none).
fn served(crd: &Value) -> Vec<(String, Value)> {
    let spec = &crd["spec"];
    let shared = &spec["validation"]["openAPIV3Schema"];
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .filter_map(|v| {
            let name = v["name"].as_str()?.to_owned();
            let schema = match &v["schema"]["openAPIV3Schema"] {
                Value::Null => shared.clone(),
                schema => schema.clone(),
            };
            Some((name, schema))
        })
        .collect()
}

/// The CRD versions whose objects must be checked before `revision` goes in
/// over the live CRDs `live`: those both serve, where the revision's schema
/// differs from the live one.
pub fn to_check(revision: &OperatorRevision, live: &[(String, Value)]) -> Vec<ToCheck> {
    let mut out = Vec::new();
    for (name, old, existing) in pairs(revision, live) {
        let now = served(existing);
        for (version, schema) in served(&old) {
            let changed = now.iter().find(|(v, _)| *v == version).map(|(_, s)| *s != schema);
            if changed != Some(true) || schema.is_null() {
                continue;
            }
            let names = &old["spec"]["names"];
            out.push(ToCheck {
                crd: name.clone(),
                group: old["spec"]["group"].as_str().unwrap_or_default().to_owned(),
                version,
                kind: names["kind"].as_str().unwrap_or_default().to_owned(),
                plural: names["plural"].as_str().unwrap_or_default().to_owned(),
            });
        }
    }
    out
}

/// The objects of `listed` that `revision`'s schemas reject, per CRD
/// version, in `listed`'s order.
pub fn invalid(revision: &OperatorRevision, listed: &[Listed]) -> Vec<InvalidObjects> {
    let crds: Vec<(String, Value)> = revision
        .spec
        .objects
        .iter()
        .filter(|o| o.key.kind == "CustomResourceDefinition")
        .filter_map(|o| Some((o.key.name.clone(), content::manifest(o).ok()?)))
        .collect();
    listed
        .iter()
        .filter_map(|list| {
            let (_, crd) = crds.iter().find(|(name, _)| *name == list.crd)?;
            let (_, schema) = served(crd).into_iter().find(|(v, _)| *v == list.version)?;
            let rejected = rejected(&schema, &list.objects);
            (!rejected.is_empty()).then(|| InvalidObjects {
                crd: list.crd.clone(),
                version: list.version.clone(),
                total: rejected.len(),
                objects: rejected.into_iter().take(NAMED).collect(),
            })
        })
        .collect()
}

/// Each of `objects` that `schema` rejects, as `namespace/name (why)`; all
/// of them when the schema itself cannot be read.
fn rejected(schema: &Value, objects: &[Value]) -> Vec<String> {
    let validator: Result<Validator, String> =
        jsonschema::draft4::new(&draft4(schema)).map_err(|e| format!("its schema cannot be read: {e}"));
    objects
        .iter()
        .filter_map(|object| {
            let why = match &validator {
                Ok(validator) => {
                    let error = validator.iter_errors(object).next()?;
                    let at = error.instance_path().to_string();
                    if at.is_empty() {
                        error.to_string()
                    } else {
                        format!("{at}: {error}")
                    }
                }
                Err(unreadable) => unreadable.clone(),
            };
            Some(format!("{} ({why})", object_name(object)))
        })
        .collect()
}

/// `namespace/name`, or `name` for a cluster-scoped object.
fn object_name(object: &Value) -> String {
    let metadata = &object["metadata"];
    let name = metadata["name"].as_str().unwrap_or("(unnamed)");
    match metadata["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

/// An OpenAPI v3 schema as JSON Schema draft 4: `nullable: true` allows
/// `null` besides the type, and the `x-kubernetes-*` extensions go.
fn draft4(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: Map<String, Value> = map
                .iter()
                .filter(|(key, _)| !key.starts_with("x-kubernetes-") && *key != "nullable")
                .map(|(key, value)| (key.clone(), draft4_keyword(key, value)))
                .collect();
            if map.get("nullable") == Some(&Value::Bool(true))
                && let Some(Value::String(kind)) = out.get("type").cloned()
            {
                out.insert("type".to_owned(), Value::from(vec![kind, "null".to_owned()]));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The value of keyword `key` of a schema, its sub-schemas made draft 4.
fn draft4_keyword(key: &str, value: &Value) -> Value {
    match (key, value) {
        // Maps of names to schemas.
        ("properties" | "patternProperties" | "definitions", Value::Object(map)) => Value::Object(
            map.iter()
                .map(|(name, schema)| (name.clone(), draft4(schema)))
                .collect(),
        ),
        // Lists of schemas.
        ("allOf" | "anyOf" | "oneOf", Value::Array(list)) => Value::Array(list.iter().map(draft4).collect()),
        // One schema (or, for `items`, a list; for `additionalProperties`, a bool).
        ("items", Value::Array(list)) => Value::Array(list.iter().map(draft4).collect()),
        ("items" | "not" | "additionalProperties" | "additionalItems", schema) => draft4(schema),
        // Data, not schemas (`enum`, `default`, `example`, ...).
        (_, other) => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use olm_api::model::{ObjectKey, RecordedObject};
    use serde_json::json;

    use super::*;
    use crate::controllers::revision::decide::tests::fixtures::revision;

    /// CRD things.demo.io serving v1 with `size` of `kind` in its spec,
    /// and v2 alike when `both`.
    fn crd(kind: &str, both: bool) -> Value {
        let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": kind, "nullable": true},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}});
        let mut versions = vec![json!({"name": "v1", "served": true, "storage": true, "schema": schema})];
        if both {
            versions.push(json!({"name": "v2", "served": true, "storage": false, "schema": schema}));
        }
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "things.demo.io"},
               "spec": {"group": "demo.io", "scope": "Namespaced",
                        "names": {"kind": "Thing", "plural": "things"}, "versions": versions}})
    }

    fn with_crd(manifest: Value) -> OperatorRevision {
        let mut revision = revision("db.v1", 1, "u1");
        revision.spec.objects = vec![RecordedObject {
            key: ObjectKey {
                group: "apiextensions.k8s.io".into(),
                version: "v1".into(),
                kind: "CustomResourceDefinition".into(),
                name: "things.demo.io".into(),
            },
            manifest: Some(manifest),
            gzip: None,
        }];
        revision
    }

    fn thing(name: &str, size: Value) -> Value {
        json!({"apiVersion": "demo.io/v1", "kind": "Thing",
               "metadata": {"name": name, "namespace": "team", "uid": format!("uid-{name}")},
               "spec": {"size": size, "extra": {"anything": 1}}})
    }

    /// Which CRD versions are listed: those served by both whose schema changed.
    #[test]
    fn only_changed_schemas_of_versions_served_by_both_are_checked() {
        let check = |version: &str| ToCheck {
            crd: "things.demo.io".into(),
            group: "demo.io".into(),
            version: version.into(),
            kind: "Thing".into(),
            plural: "things".into(),
        };
        type Case<'a> = (&'a str, Value, Vec<(String, Value)>, Vec<ToCheck>);
        let cases: Vec<Case> = vec![
            (
                "the same schema",
                crd("integer", false),
                vec![("things.demo.io".into(), crd("integer", false))],
                vec![],
            ),
            (
                "a changed schema",
                crd("integer", false),
                vec![("things.demo.io".into(), crd("string", false))],
                vec![check("v1")],
            ),
            (
                "a version only the revision serves is not listed",
                crd("integer", true),
                vec![("things.demo.io".into(), crd("string", false))],
                vec![check("v1")],
            ),
            (
                "both versions changed",
                crd("integer", true),
                vec![("things.demo.io".into(), crd("string", true))],
                vec![check("v1"), check("v2")],
            ),
            ("not in the cluster", crd("integer", false), vec![], vec![]),
        ];
        for (case, old, live, want) in cases {
            assert_eq!(to_check(&with_crd(old), &live), want, "{case}");
        }
    }

    /// Which objects the revision's schema rejects, and how they are named.
    #[test]
    fn objects_the_old_schema_rejects_are_named_up_to_a_bound() {
        let revision = with_crd(crd("integer", false));
        let listed = |objects: Vec<Value>| {
            vec![Listed {
                crd: "things.demo.io".into(),
                version: "v1".into(),
                objects,
            }]
        };
        type Case<'a> = (&'a str, Vec<Value>, Option<(usize, Vec<&'a str>)>);
        let cases: Vec<Case> = vec![
            (
                "valid, null allowed by nullable",
                vec![thing("a", json!(3)), thing("b", Value::Null)],
                None,
            ),
            (
                "one invalid",
                vec![thing("a", json!(3)), thing("b", json!("large"))],
                Some((
                    1,
                    vec!["team/b (/spec/size: \"large\" is not of types \"null\", \"integer\")"],
                )),
            ),
            ("none", vec![], None),
        ];
        for (case, objects, want) in cases {
            let got = invalid(&revision, &listed(objects));
            let got = got
                .first()
                .map(|i| (i.total, i.objects.iter().map(String::as_str).collect::<Vec<_>>()));
            assert_eq!(got, want, "{case}");
        }

        // Many: the first five are named, the rest counted.
        let many: Vec<Value> = (0..8).map(|i| thing(&format!("t{i}"), json!("x"))).collect();
        let found = invalid(&revision, &listed(many));
        assert_eq!((found[0].total, found[0].objects.len()), (8, NAMED));
        let message = found[0].to_string();
        assert!(
            message.starts_with("8 object(s) of CRD things.demo.io version v1 do not validate"),
            "{message}"
        );
        assert!(message.ends_with(" and 3 more"), "{message}");
    }
}
