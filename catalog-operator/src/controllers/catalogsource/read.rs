//! Reading a catalog into the store: a registry at an address (health check, then
//! a full load when due), or a ConfigMap.

use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::Time};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::{
    CatalogSource, CatalogSourceReason, ConfigMapResourceReference, RegistryServiceStatus,
};
use olm_resolver::model::CatalogId;
use tokio::time::Instant;

use super::{CatalogSourceContext, Error, Runtime, SourceSpec, validate::SourceKind};
use crate::{
    bundles::BundleSource,
    catalogs::CatalogContent,
    registry::client::{ClientError, RegistryClient},
};

/// What reading the catalog found.
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    /// The catalog was read (now or earlier, and it still answers).
    Ready {
        /// The registry's address, for gRPC sources.
        address: Option<String>,
        /// The ConfigMap read, for ConfigMap sources.
        config_map: Option<ConfigMapResourceReference>,
        /// The Service of the registry Pod, for image sources.
        registry_service: Option<RegistryServiceStatus>,
        /// Whether the state changed or the content was reloaded now.
        changed: bool,
        /// What the catalog serves without, in words: bundles of a ConfigMap left out as
        /// invalid, each with why.
        left_out: Option<String>,
    },
    /// The registry Pod is not serving yet.
    Starting {
        /// The address it will serve on.
        address: Option<String>,
        /// The Service of the registry Pod.
        registry_service: Option<RegistryServiceStatus>,
        /// What it waits for.
        message: String,
    },
    /// The catalog could not be read.
    Unreachable {
        /// The registry's address, for gRPC sources.
        address: Option<String>,
        /// The ConfigMap, for ConfigMap sources, if it was found.
        config_map: Option<ConfigMapResourceReference>,
        /// The Service of the registry Pod, for image sources.
        registry_service: Option<RegistryServiceStatus>,
        /// OLM's reason.
        reason: CatalogSourceReason,
        /// Why, in words.
        message: String,
        /// Whether this is news (the catalog was healthy or never read before).
        changed: bool,
    },
    /// The spec names no usable source.
    Invalid {
        /// OLM's reason.
        reason: CatalogSourceReason,
        /// Why, in words.
        message: String,
    },
}

impl Observed {
    /// Whether the catalog is READY.
    pub fn is_ready(&self) -> bool {
        matches!(self, Observed::Ready { .. })
    }
}

/// The message of an error and its causes, on one line.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// What [`read`] returns: what was found, when the image was polled now (image
/// catalogs), and how an image catalog is served.
pub(super) type ReadResult = (Observed, Option<Time>, Option<super::status::Serving>);

/// Reads the catalog `id` as `spec` says and records the result in the store.
pub(super) async fn read(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
    spec: &SourceSpec,
    now: &Time,
) -> Result<ReadResult, Error> {
    let priority = source.spec.priority.unwrap_or(0);
    match &spec.kind {
        SourceKind::Invalid(message) => {
            ctx.shared
                .catalogs
                .set_unhealthy(id, priority, message.clone(), now);
            let invalid = Observed::Invalid {
                reason: CatalogSourceReason::SpecInvalid,
                message: message.clone(),
            };
            Ok((invalid, None, None))
        }
        SourceKind::Address(address) => {
            let observed = read_registry(ctx, id, priority, address, spec, None, now).await;
            Ok((observed, None, None))
        }
        SourceKind::Image(image) => {
            let (observed, polled, serving) = super::image::read(ctx, source, id, image, spec, now).await?;
            Ok((observed, polled, Some(serving)))
        }
        SourceKind::ConfigMap(name) => Ok((read_config_map(ctx, id, priority, name, now).await?, None, None)),
    }
}

/// Checks the registry at `address` and loads its content when due.
pub(super) async fn read_registry(
    ctx: &CatalogSourceContext,
    id: &CatalogId,
    priority: i32,
    address: &str,
    spec: &SourceSpec,
    registry_service: Option<RegistryServiceStatus>,
    now: &Time,
) -> Observed {
    let unreachable = |message: String, changed: bool, registry_service: Option<RegistryServiceStatus>| {
        Observed::Unreachable {
            address: Some(address.to_owned()),
            config_map: None,
            registry_service,
            reason: CatalogSourceReason::RegistryServer,
            message,
            changed,
        }
    };
    let mut runtime = ctx.clients.get(id);
    let mut client = match &runtime.client {
        Some(client) if client.address() == address => client.clone(),
        _ => match RegistryClient::new(address) {
            Ok(client) => {
                runtime.loaded_at = None;
                client
            }
            Err(e) => {
                let message = chain(&e);
                let changed = ctx
                    .shared
                    .catalogs
                    .set_unhealthy(id, priority, message.clone(), now);
                return unreachable(message, changed, registry_service);
            }
        },
    };
    runtime.client = Some(client.clone());
    let result = check_and_load(ctx, id, priority, &mut client, spec, &mut runtime, now).await;
    ctx.clients.put(id, runtime);
    match result {
        Ok(changed) => Observed::Ready {
            address: Some(address.to_owned()),
            config_map: None,
            registry_service,
            changed,
            left_out: None,
        },
        Err(e) => {
            let message = chain(&e);
            let changed = ctx
                .shared
                .catalogs
                .set_unhealthy(id, priority, message.clone(), now);
            if changed {
                tracing::warn!(catalog = %id, error = %message, "catalog is unhealthy");
            }
            unreachable(message, changed, registry_service)
        }
    }
}

/// Health check, then a full load if the content is missing, stale, or from
/// before an outage. Returns whether anything changed.
async fn check_and_load(
    ctx: &CatalogSourceContext,
    id: &CatalogId,
    priority: i32,
    client: &mut RegistryClient,
    spec: &SourceSpec,
    runtime: &mut Runtime,
    now: &Time,
) -> Result<bool, ClientError> {
    client.check_health().await?;
    let state = ctx.shared.catalogs.get(id);
    let due = runtime
        .loaded_at
        .is_none_or(|at| at.elapsed() >= spec.poll_interval);
    let needs_load = due
        || state
            .as_ref()
            .is_none_or(|s| s.content.is_none() || !s.is_healthy());
    if !needs_load {
        return Ok(ctx.shared.catalogs.set_healthy(id, now));
    }
    let describe = ctx.shared.options.describe();
    let loaded = client.load_listing(describe).await?;
    runtime.loaded_at = Some(Instant::now());
    let (packages, bundles) = (loaded.catalog.packages.len(), loaded.catalog.bundles.len());
    let source = BundleSource::Registry(Box::new(client.clone()));
    let content = CatalogContent::described(id.clone(), loaded.catalog, loaded.problems, source, describe)
        .with_head_csvs(loaded.head_csvs);
    for problem in content.problems.iter().take(20) {
        tracing::debug!(catalog = %id, "{problem}");
    }
    let changed = ctx.shared.catalogs.set_loaded(id, priority, content, now);
    if changed {
        tracing::info!(catalog = %id, packages, bundles, "catalog loaded");
    }
    Ok(changed)
}

/// Reads a ConfigMap catalog; reloads it when its resourceVersion changed.
async fn read_config_map(
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
