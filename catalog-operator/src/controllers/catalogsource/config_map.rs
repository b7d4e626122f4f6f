//! Reading a catalog from a ConfigMap in OLM's legacy format; reloaded when the
//! ConfigMap's resourceVersion changed.
//!
//! Whether it changed is read from the store of ConfigMap metadata; the
//! ConfigMap itself is read (a GET) only to load it: when the store shows a
//! version other than the one loaded, or does not show it (not synced yet, or
//! missing: the GET tells).

use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::Time};
use kube::{Api, ResourceExt, runtime::reflector::ObjectRef};
use olm_api::v1alpha1::{CatalogSourceReason, ConfigMapResourceReference};
use olm_catalog::Catalog;
use olm_resolver::model::CatalogId;

use super::{
    context::CatalogSourceContext,
    error::{Error, chain},
    observed::Observed,
};
use crate::{bundles::BundleSource, catalogs::CatalogContent};

/// Reads a ConfigMap catalog; reloads it when its resourceVersion changed.
pub(super) async fn read_config_map(
    ctx: &CatalogSourceContext,
    id: &CatalogId,
    priority: i32,
    name: &str,
    now: &Time,
) -> Result<Observed, Error> {
    let runtime = ctx.clients.get(id);
    let loaded = ctx
        .shared
        .catalogs
        .get(id)
        .is_some_and(|s| s.content.is_some() && s.is_healthy());
    let listed = ctx
        .shared
        .stores
        .config_maps
        .get(&ObjectRef::new(name).within(&id.namespace));
    if let Some(listed) = listed
        && loaded
        && runtime.config_map_version.is_some()
        && runtime.config_map_version == listed.resource_version()
    {
        let reference = ConfigMapResourceReference {
            name: name.to_owned(),
            namespace: id.namespace.clone(),
            uid: listed.uid(),
            resource_version: listed.resource_version(),
            last_update_time: None,
        };
        return Ok(ready(reference, false, runtime.config_map_left_out));
    }
    load_config_map(ctx, id, priority, name, now).await
}

/// Loads the ConfigMap catalog (a GET of the ConfigMap: its content is the
/// catalog) into the catalog store.
async fn load_config_map(
    ctx: &CatalogSourceContext,
    id: &CatalogId,
    priority: i32,
    name: &str,
    now: &Time,
) -> Result<Observed, Error> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.shared.client.clone(), &id.namespace);
    let config_map = api.get_opt(name).await.map_err(|source| Error::Read {
        what: format!("ConfigMap {name}"),
        namespace: id.namespace.clone(),
        name: id.name.clone(),
        source,
    })?;
    let Some(config_map) = config_map else {
        let message = format!(
            "ConfigMap {name} does not exist in namespace {}: create it or fix spec.configMap",
            id.namespace
        );
        let changed = ctx
            .shared
            .catalogs
            .set_unhealthy(id, priority, message.clone(), now);
        return Ok(unreachable(None, message, changed));
    };
    let version = config_map.resource_version();
    let mut runtime = ctx.clients.get(id);
    let mut reference = ConfigMapResourceReference {
        name: name.to_owned(),
        namespace: id.namespace.clone(),
        uid: config_map.uid(),
        resource_version: version.clone(),
        last_update_time: None,
    };
    let loaded = ctx
        .shared
        .catalogs
        .get(id)
        .is_some_and(|s| s.content.is_some() && s.is_healthy());
    if loaded && runtime.config_map_version == version {
        return Ok(ready(reference, false, runtime.config_map_left_out));
    }
    match parse(&config_map, &id.namespace, name) {
        Ok(parsed) => {
            let source = BundleSource::ConfigMap {
                client: ctx.shared.client.clone(),
                name: name.to_owned(),
            };
            let describe = ctx.shared.options.describe();
            let content =
                CatalogContent::described(id.clone(), parsed.catalog, parsed.problems, source, describe);
            let changed = ctx.shared.catalogs.set_loaded(id, priority, content, now);
            runtime.config_map_version = version;
            runtime.config_map_left_out = parsed.left_out.clone();
            ctx.clients.put(id, runtime);
            reference.last_update_time = Some(now.clone());
            Ok(ready(reference, changed, parsed.left_out))
        }
        Err(message) => {
            let changed = ctx
                .shared
                .catalogs
                .set_unhealthy(id, priority, message.clone(), now);
            Ok(unreachable(Some(reference), message, changed))
        }
    }
}

/// The catalog of a ConfigMap.
#[derive(Debug)]
struct Parsed {
    /// The catalog, without the bundles left out.
    catalog: Catalog,
    /// Warnings of the render and the bundles left out, in words.
    problems: Vec<String>,
    /// The bundles left out as invalid, each with why, on one line.
    left_out: Option<String>,
}

/// The catalog in `config_map` (named `name` in `namespace`), or why it is not
/// a valid catalog. As OLM: an invalid bundle is left out and reported; the rest serves.
fn parse(config_map: &ConfigMap, namespace: &str, name: &str) -> Result<Parsed, String> {
    let text = serde_json::to_string(config_map).unwrap_or_default();
    let path = format!("configmap {namespace}/{name}");
    let rendered = olm_catalog::configmap::parse_str(&path, &text)
        .map_err(|e| format!("ConfigMap {name} is not a valid catalog: {}", chain(&e)))?;
    let left_out = (!rendered.left_out.is_empty()).then(|| {
        rendered
            .left_out
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    });
    let mut problems = rendered.render.warnings;
    problems.extend(rendered.left_out.iter().map(ToString::to_string));
    Ok(Parsed {
        catalog: rendered.render.catalog,
        problems,
        left_out,
    })
}

/// A ConfigMap catalog that is serving.
fn ready(reference: ConfigMapResourceReference, changed: bool, left_out: Option<String>) -> Observed {
    Observed::Ready {
        address: None,
        config_map: Some(reference),
        registry_service: None,
        changed,
        left_out,
    }
}

/// A ConfigMap catalog that cannot be read: missing (no reference) or invalid.
fn unreachable(reference: Option<ConfigMapResourceReference>, message: String, changed: bool) -> Observed {
    Observed::Unreachable {
        address: None,
        config_map: reference,
        registry_service: None,
        reason: CatalogSourceReason::ConfigMap,
        message,
        changed,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn config_map(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ConfigMap::default()
        }
    }

    /// A ConfigMap that is no catalog is reported with its name and why.
    #[test]
    fn an_invalid_config_map_says_why() {
        let cases: &[(&str, ConfigMap)] = &[
            ("no data", ConfigMap::default()),
            ("no package", config_map(&[("packages", "[]")])),
            (
                "data that does not parse",
                config_map(&[("packages", "{not: [yaml")]),
            ),
        ];
        for (case, config_map) in cases {
            let error = parse(config_map, "team", "catalog").expect_err(case);
            assert!(
                error.starts_with("ConfigMap catalog is not a valid catalog: "),
                "{case}: {error}"
            );
        }
    }
}
