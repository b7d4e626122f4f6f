//! The errors of the Subscription controller.

use olm_resolver::model::CatalogId;
use olm_runtime::{ErrorClass, ReconcileError, apply::WriteError, classify};

use crate::bundles::FetchError;

/// Errors of the Subscription controller. A group that cannot be resolved is not
/// an error: it is reported on its Subscriptions.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Subscription has no namespace (never from the API server).
    #[error("the Subscription has no namespace")]
    NoNamespace,
    /// A catalog the plan uses has no content now.
    #[error("catalog {catalog} has no content to plan bundle {bundle} from")]
    CatalogUnavailable {
        /// The catalog.
        catalog: CatalogId,
        /// The bundle.
        bundle: String,
    },
    /// A bundle image could not be pulled or is not a bundle.
    #[error("bundle {bundle} of catalog {catalog}: {source}")]
    Unpack {
        /// The catalog.
        catalog: CatalogId,
        /// The bundle.
        bundle: String,
        /// Why.
        #[source]
        source: crate::images::bundles::UnpackError,
    },
    /// A bundle's manifests could not be fetched from its registry.
    #[error("failed to fetch the manifests of bundle {bundle} from catalog {catalog}")]
    Fetch {
        /// The catalog.
        catalog: CatalogId,
        /// The bundle.
        bundle: String,
        /// Why.
        #[source]
        source: FetchError,
    },
    /// A write failed.
    #[error("failed to write {what}")]
    Write {
        /// What was written.
        what: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// A decided object could not be encoded for the API server (a bug).
    #[error("failed to encode {what}: report this as a bug")]
    Encode {
        /// What was encoded.
        what: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A read failed.
    #[error("failed to read {what}")]
    Read {
        /// What was read.
        what: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace => "invalid",
            Error::Encode { .. } => "internal",
            Error::CatalogUnavailable { .. } | Error::Fetch { .. } => "catalog",
            Error::Unpack { .. } => "bundle_image",
            Error::Write { .. } | Error::Read { .. } => "api",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace | Error::Encode { .. } => ErrorClass::Terminal,
            // The catalog may come back, or serve the bundle later.
            Error::CatalogUnavailable { .. } | Error::Fetch { .. } => ErrorClass::Transient,
            // Retried with backoff: a pull secret or the image may appear later.
            Error::Unpack { .. } => ErrorClass::Transient,
            Error::Write { source, .. } => source.class(),
            Error::Read { source, .. } => classify(source),
        }
    }
}
