//! The CatalogSource controller: reads each catalog into the [`CatalogStore`] and
//! reports how the connection to it stands.
//!
//! Pipeline per reconcile: [`validate`] the spec (pure) → read the catalog
//! ([`read`]: a gRPC health check and, when due, a full load ([`grpc`]); the
//! image in memory or through a registry Pod ([`image`], [`registry_pod`]); or
//! the ConfigMap ([`config_map`])) →
//! record the result in the store → [`status::compute`] (pure) → write the status
//! when it changed. A reachable catalog is checked again every
//! `catalog_health_interval`; its content is reloaded every
//! `updateStrategy.registryPoll.interval` and whenever it comes back after an
//! outage. An unreachable or malformed catalog only marks itself unhealthy: the
//! store keeps its last content and every other catalog is untouched.

mod config_map;
mod context;
mod error;
mod grpc;
mod image;
mod observed;
mod read;
mod registry_pod;
pub mod status;
mod validate;

use std::{sync::Arc, time::Duration};

use kube::{Api, ResourceExt, runtime::controller::Action};
use olm_api::v1alpha1::CatalogSource;
use olm_resolver::model::CatalogId;

pub use context::CatalogSourceContext;
pub use error::Error;
use observed::Observed;
pub use validate::{SourceSpec, validate};

use super::Context;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "catalogsource";

/// Reconciles one CatalogSource.
pub async fn reconcile(source: Arc<CatalogSource>, ctx: Arc<CatalogSourceContext>) -> Result<Action, Error> {
    let shared = &ctx.shared;
    let _timer = shared.reconciles.start(CONTROLLER);
    let namespace = source.namespace().ok_or(Error::NoNamespace)?;
    let name = source.name_any();
    let id = CatalogId::new(name.clone(), namespace.clone());
    let now = olm_runtime::conditions::now();
    let priority = source.spec.priority.unwrap_or(0);
    shared.catalogs.register(&id, priority, &now);
    forget_deleted(&ctx);

    let spec = validate(&source.spec, shared.options.default_poll_interval);
    let (observed, polled, serving) = read::read(&ctx, &source, &id, &spec, &now).await?;
    let ready = observed.is_ready();
    shared.metrics.set_catalog_ready(&namespace, &name, ready);

    let mut new_status = status::compute(&source, &spec, &observed, &now);
    if polled.is_some() {
        new_status.latest_image_registry_poll = polled;
    }
    status::set_serving(
        &mut new_status,
        serving.as_ref(),
        source.metadata.generation,
        &now,
    );
    // Standbys read catalogs too (their store is warm when they take over), but
    // only the leader reports.
    if source.status.as_ref() != Some(&new_status) && shared.writer.leadership().is_leader() {
        let api: Api<CatalogSource> = Api::namespaced(shared.client.clone(), &namespace);
        shared
            .writer
            .apply_status(&api, &name, &new_status)
            .await
            .map_err(|source| Error::WriteStatus {
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
    }
    Ok(requeue_after(shared, &spec, &observed))
}

/// How soon to look at the catalog again.
fn requeue_after(ctx: &Context, spec: &SourceSpec, observed: &Observed) -> Action {
    match observed {
        Observed::Invalid { .. } => Action::await_change(),
        Observed::Ready { .. } => {
            Action::requeue(ctx.options.catalog_health_interval.min(spec.poll_interval))
        }
        Observed::Unreachable { .. } | Observed::Starting { .. } => {
            Action::requeue(ctx.options.catalog_health_interval.min(Duration::from_secs(10)))
        }
    }
}

/// Drops catalogs whose CatalogSource is gone, with the controller's state for them.
fn forget_deleted(ctx: &CatalogSourceContext) {
    ctx.shared.forget_deleted_catalogs();
    let existing = ctx.shared.stores.catalog_sources.state();
    // A store that has not synced yet is empty: keep everything until it has.
    if existing.is_empty() {
        return;
    }
    ctx.clients.retain(|id| {
        existing.iter().any(|s| {
            s.metadata.name.as_deref() == Some(&id.name)
                && s.metadata.namespace.as_deref() == Some(&id.namespace)
        })
    });
}

/// Forgets one deleted CatalogSource at once (from the watch's delete event).
pub fn forget(ctx: &CatalogSourceContext, namespace: &str, name: &str) {
    let id = CatalogId::new(name, namespace);
    ctx.shared.forget_catalog(&id);
    ctx.clients.retain(|other| *other != id);
}

/// The error policy of the controller.
pub fn error_policy(source: Arc<CatalogSource>, error: &Error, ctx: Arc<CatalogSourceContext>) -> Action {
    olm_runtime::error_policy(CONTROLLER, source.as_ref(), error, &ctx.shared.reconciles)
}
