//! What reading a catalog found, whatever its kind of source.

use olm_api::v1alpha1::{CatalogSourceReason, ConfigMapResourceReference, RegistryServiceStatus};

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
