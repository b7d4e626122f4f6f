//! The CatalogSource controller: reads each catalog into the [`CatalogStore`] and
//! reports how the connection to it stands.
//!
//! A reconcile has the three steps of every reconciler:
//! 1. *read* ([`read`]): the spec, checked ([`validate`], pure); from the
//!    shared stores, the registry Pods and Services of an image catalog, its
//!    namespace's Pod Security enforcement and the metadata of a ConfigMap
//!    catalog's ConfigMap; and the catalog itself, by the only live requests of
//!    a reconcile (external reads): a registry's gRPC health check and load
//!    ([`grpc`]), a catalog image's pull with the pull Secrets it names
//!    ([`image`]), the gRPC read through the registry Pod that serves it, the
//!    GET that loads a ConfigMap that changed ([`config_map`]). What those
//!    find is recorded in the [`CatalogStore`], the content this controller
//!    keeps for resolution; the read changes no other shared state;
//! 2. *decide* ([`decide::decide`], pure, the time passed in): the registry
//!    objects to apply and remove, and the status ([`status::compute`]);
//! 3. *apply*: the runtime's one applier ([`Writer::perform`]), which skips
//!    registry objects whose live copy in the stores carries the desired hash
//!    and writes the status last. Only the leader writes; standbys read
//!    catalogs too, so that their store is warm when they take over.
//!
//! Then, a step of its own that changes shared state: the catalog's metrics, and
//! [`forget_deleted`] drops the catalogs whose CatalogSource is gone. The
//! watch's delete event forgets a deleted catalog at once ([`forget`]); this
//! sweep catches those whose delete event a restarted watch never sent.
//!
//! A reachable catalog is checked again every `catalog_health_interval`; its
//! content is reloaded every `updateStrategy.registryPoll.interval` and
//! whenever it comes back after an outage. An unreachable or malformed catalog
//! only marks itself unhealthy: the store keeps its last content and every
//! other catalog is untouched.
//!
//! [`CatalogStore`]: crate::catalogs::CatalogStore
//! [`Writer::perform`]: olm_runtime::apply::Writer

mod config_map;
mod context;
pub mod decide;
mod error;
mod grpc;
mod image;
mod observed;
pub mod read;
mod registry_pod;
pub mod status;
mod validate;

use std::{sync::Arc, time::Duration};

use kube::{Api, ResourceExt, runtime::controller::Action};
use olm_api::v1alpha1::CatalogSource;
use olm_resolver::model::CatalogId;
use olm_runtime::live::LiveStores;

pub use context::CatalogSourceContext;
pub use error::Error;
pub use validate::{SourceSpec, validate};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "catalogsource";

/// How soon a catalog is looked at again while a store it needs has not synced.
const UNTIL_SYNCED: Duration = Duration::from_secs(1);

/// Reconciles one CatalogSource: reads, decides, applies, then records.
pub async fn reconcile(source: Arc<CatalogSource>, ctx: Arc<CatalogSourceContext>) -> Result<Action, Error> {
    let shared = &ctx.shared;
    let _timer = shared.reconciles.start(CONTROLLER);
    let namespace = source.namespace().ok_or(Error::NoNamespace)?;
    let name = source.name_any();
    let id = CatalogId::new(name.clone(), namespace.clone());
    let now = olm_runtime::conditions::now();

    // Read.
    let spec = validate(&source.spec, shared.options.default_poll_interval);
    let Some(read) = read::read(&ctx, source, &id, spec, now).await? else {
        return Ok(Action::requeue(UNTIL_SYNCED));
    };

    // Decide.
    let decision =
        decide::decide(&read, shared.options.catalog_health_interval).map_err(|source| Error::Encode {
            namespace: namespace.clone(),
            name: name.clone(),
            source,
        })?;

    // Apply: the leader alone (a standby's decision holds no effect).
    if read.leading && !decision.effects.is_empty() {
        let api: Api<CatalogSource> = Api::namespaced(shared.client.clone(), &namespace);
        let live = LiveStores::new()
            .with(shared.stores.pods.clone())
            .with(shared.stores.services.clone());
        shared
            .writer
            .perform(&shared.client, &api, &decision.effects, &live)
            .await
            .map_err(|source| Error::Apply {
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
    }

    // Record: the metrics, and the catalogs whose CatalogSource is gone.
    shared
        .metrics
        .set_catalog_ready(&namespace, &name, decision.ready);
    forget_deleted(&ctx);
    Ok(decision
        .requeue
        .map_or_else(Action::await_change, Action::requeue))
}

/// Drops catalogs whose CatalogSource is gone from the store, with the
/// controller's state for them (after the decision: see the module docs).
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

#[cfg(test)]
mod tests;
