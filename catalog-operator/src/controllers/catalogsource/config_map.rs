//! Reading a catalog from a ConfigMap in OLM's legacy format; reloaded when the
//! ConfigMap's resourceVersion changed.

use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::Time};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::{CatalogSourceReason, ConfigMapResourceReference};
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
        return Ok(Observed::Unreachable {
            address: None,
            config_map: None,
            registry_service: None,
            reason: CatalogSourceReason::ConfigMap,
            message,
            changed,
        });
    };
    let version = config_map.resource_version();
    let mut runtime = ctx.clients.get(id);
    let state = ctx.shared.catalogs.get(id);
    let mut reference = ConfigMapResourceReference {
        name: name.to_owned(),
        namespace: id.namespace.clone(),
        uid: config_map.uid(),
        resource_version: version.clone(),
        last_update_time: None,
    };
    let fresh = runtime.config_map_version == version
        && state
            .as_ref()
            .is_some_and(|s| s.content.is_some() && s.is_healthy());
    if fresh {
        return Ok(Observed::Ready {
            address: None,
            config_map: Some(reference),
            registry_service: None,
            changed: false,
            left_out: runtime.config_map_left_out,
        });
    }
    let text = serde_json::to_string(&config_map).unwrap_or_default();
    let path = format!("configmap {}/{name}", id.namespace);
    match olm_catalog::configmap::parse_str(&path, &text) {
        Ok(rendered) => {
            // As OLM: an invalid bundle is left out and reported; the rest serves.
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
            let source = BundleSource::ConfigMap {
                client: ctx.shared.client.clone(),
                name: name.to_owned(),
            };
            let content = CatalogContent::described(
                id.clone(),
                rendered.render.catalog,
                problems,
                source,
                ctx.shared.options.describe(),
            );
            let changed = ctx.shared.catalogs.set_loaded(id, priority, content, now);
            runtime.config_map_version = version;
            runtime.config_map_left_out = left_out.clone();
            ctx.clients.put(id, runtime);
            reference.last_update_time = Some(now.clone());
            Ok(Observed::Ready {
                address: None,
                config_map: Some(reference),
                registry_service: None,
                changed,
                left_out,
            })
        }
        Err(e) => {
            let message = format!("ConfigMap {name} is not a valid catalog: {}", chain(&e));
            let changed = ctx
                .shared
                .catalogs
                .set_unhealthy(id, priority, message.clone(), now);
            Ok(Observed::Unreachable {
                address: None,
                config_map: Some(reference),
                registry_service: None,
                reason: CatalogSourceReason::ConfigMap,
                message,
                changed,
            })
        }
    }
}
