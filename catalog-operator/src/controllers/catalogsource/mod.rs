//! The CatalogSource controller: reads each catalog into the [`CatalogStore`] and
//! reports how the connection to it stands.
//!
//! Pipeline per reconcile: [`validate`] the spec (pure) → read the catalog
//! ([`read`]: a gRPC health check and, when due, a full load; or the ConfigMap) →
//! record the result in the store → [`status::compute`] (pure) → write the status
//! when it changed. A reachable catalog is checked again every
//! `catalog_health_interval`; its content is reloaded every
//! `updateStrategy.registryPoll.interval` and whenever it comes back after an
//! outage. An unreachable or malformed catalog only marks itself unhealthy: the
//! store keeps its last content and every other catalog is untouched.

mod image;
mod read;
mod registry_pod;
pub mod status;
mod validate;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use kube::{Api, ResourceExt, runtime::controller::Action};
use olm_api::v1alpha1::CatalogSource;
use olm_resolver::model::CatalogId;
use olm_runtime::{ErrorClass, ReconcileError, apply::WriteError, classify};
use tokio::time::Instant;

pub use validate::{SourceSpec, parse_go_duration, validate};

use super::Context;
use crate::registry::client::RegistryClient;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "catalogsource";

/// Errors of the CatalogSource controller. Problems of the catalog itself (down,
/// malformed, invalid spec) are not errors: they are reported in its status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CatalogSource has no namespace or name (never from the API server).
    #[error("the CatalogSource has no namespace")]
    NoNamespace,
    /// The status could not be written.
    #[error("failed to write the status of CatalogSource {namespace}/{name}")]
    WriteStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// Reading the registry Pod, Service or ConfigMap failed.
    #[error("failed to read {what} for CatalogSource {namespace}/{name}")]
    Read {
        /// What was read.
        what: String,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Creating the registry Pod or Service failed.
    #[error("failed to create the registry {what} for CatalogSource {namespace}/{name}")]
    Registry {
        /// What was written.
        what: &'static str,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: WriteError,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace => "invalid",
            Error::WriteStatus { .. } | Error::Registry { .. } | Error::Read { .. } => "api",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace => ErrorClass::Terminal,
            Error::WriteStatus { source, .. } | Error::Registry { source, .. } => source.class(),
            Error::Read { source, .. } => classify(source),
        }
    }
}

/// What the controller remembers of one catalog between reconciles.
#[derive(Clone)]
pub(crate) struct Runtime {
    /// The client of the catalog's registry, for its current address.
    client: Option<RegistryClient>,
    /// When the content was last loaded.
    loaded_at: Option<Instant>,
    /// The resourceVersion of the ConfigMap last loaded.
    config_map_version: Option<String>,
    /// The bundles that load of that ConfigMap left out, in words.
    config_map_left_out: Option<String>,
    /// How the catalog image is served, for image catalogs.
    image: Option<image::ImageState>,
}

/// Per-catalog state kept between reconciles (registry clients, load times).
#[derive(Default)]
struct Clients {
    inner: Mutex<HashMap<CatalogId, Runtime>>,
}

impl Clients {
    fn lock(&self) -> MutexGuard<'_, HashMap<CatalogId, Runtime>> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn get(&self, id: &CatalogId) -> Runtime {
        self.lock().get(id).cloned().unwrap_or(Runtime {
            client: None,
            loaded_at: None,
            config_map_version: None,
            config_map_left_out: None,
            image: None,
        })
    }

    fn put(&self, id: &CatalogId, runtime: Runtime) {
        self.lock().insert(id.clone(), runtime);
    }

    /// Forgets the catalogs for which `keep` is false.
    fn retain(&self, mut keep: impl FnMut(&CatalogId) -> bool) {
        self.lock().retain(|id, _| keep(id));
    }
}

/// What the controller's reconciles get: the context every controller shares,
/// and this controller's own state (a registry client and load times per catalog).
pub struct CatalogSourceContext {
    /// What every controller shares.
    pub shared: Arc<Context>,
    clients: Clients,
}

impl CatalogSourceContext {
    /// The controller's context over `shared`, with fresh state.
    pub fn new(shared: Arc<Context>) -> Self {
        CatalogSourceContext {
            shared,
            clients: Clients::default(),
        }
    }
}

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
fn requeue_after(ctx: &Context, spec: &SourceSpec, observed: &read::Observed) -> Action {
    match observed {
        read::Observed::Invalid { .. } => Action::await_change(),
        read::Observed::Ready { .. } => {
            Action::requeue(ctx.options.catalog_health_interval.min(spec.poll_interval))
        }
        read::Observed::Unreachable { .. } | read::Observed::Starting { .. } => {
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
