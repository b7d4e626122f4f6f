//! Reading a catalog from an operator-registry gRPC server at an address: a
//! health check, then a full load when due.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{CatalogSourceReason, RegistryServiceStatus};
use olm_resolver::model::CatalogId;
use tokio::time::Instant;

use super::{
    context::{CatalogSourceContext, Runtime},
    error::chain,
    observed::Observed,
    validate::SourceSpec,
};
use olm_registry::client::{ClientError, RegistryClient};

use crate::{bundles::BundleSource, catalogs::CatalogContent};

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
    let loaded = client.load_listing(describe.head_csv_json()).await?;
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
