//! What the controller's reconciles get, and what it remembers of each catalog
//! between reconciles (registry clients, load times, how an image is served).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use olm_resolver::model::CatalogId;
use tokio::time::Instant;

use super::status::ServingReason;
use olm_registry::client::RegistryClient;

use crate::controllers::Context;

/// What the controller remembers of one catalog between reconciles.
#[derive(Clone)]
pub(super) struct Runtime {
    /// The client of the catalog's registry, for its current address.
    pub(super) client: Option<RegistryClient>,
    /// When the content was last loaded.
    pub(super) loaded_at: Option<Instant>,
    /// The resourceVersion of the ConfigMap last loaded.
    pub(super) config_map_version: Option<String>,
    /// The bundles that load of that ConfigMap left out, in words.
    pub(super) config_map_left_out: Option<String>,
    /// How the catalog image is served, for image catalogs.
    pub(super) image: Option<ImageState>,
}

/// Per-catalog state kept between reconciles (registry clients, load times).
#[derive(Default)]
pub(super) struct Clients {
    inner: Mutex<HashMap<CatalogId, Runtime>>,
}

impl Clients {
    fn lock(&self) -> MutexGuard<'_, HashMap<CatalogId, Runtime>> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn get(&self, id: &CatalogId) -> Runtime {
        self.lock().get(id).cloned().unwrap_or(Runtime {
            client: None,
            loaded_at: None,
            config_map_version: None,
            config_map_left_out: None,
            image: None,
        })
    }

    pub(super) fn put(&self, id: &CatalogId, runtime: Runtime) {
        self.lock().insert(id.clone(), runtime);
    }

    /// Forgets the catalogs for which `keep` is false.
    pub(super) fn retain(&self, mut keep: impl FnMut(&CatalogId) -> bool) {
        self.lock().retain(|id, _| keep(id));
    }
}

/// What the controller's reconciles get: the context every controller shares,
/// and this controller's own state (a registry client and load times per catalog).
pub struct CatalogSourceContext {
    /// What every controller shares.
    pub shared: Arc<Context>,
    pub(super) clients: Clients,
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

/// How one catalog image is served, as last decided.
#[derive(Clone, Debug)]
pub(super) struct ImageState {
    /// The image (`spec.image`) the decision is for.
    pub(super) image: String,
    /// The path chosen.
    pub(super) path: ImagePath,
    /// When the image was last pulled or its digest checked.
    pub(super) checked_at: Instant,
}

#[derive(Clone, Debug)]
pub(super) enum ImagePath {
    /// Served from memory; the content is of this digest.
    Memory { digest: String, message: String },
    /// Served by a registry Pod, for this reason.
    Pod { reason: ServingReason, message: String },
}
