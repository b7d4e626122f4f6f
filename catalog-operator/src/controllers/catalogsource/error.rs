//! The errors of the CatalogSource controller, and how an error reads in a status.

use olm_runtime::{ErrorClass, ReconcileError, apply::WriteError, classify};

/// Errors of the CatalogSource controller. Problems of the catalog itself (down,
/// malformed, invalid spec) are not errors: they are reported in its status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CatalogSource has no namespace or name (never from the API server).
    #[error("the CatalogSource has no namespace")]
    NoNamespace,
    /// The registry objects or the status could not be written.
    #[error(
        "failed to write the registry objects or the status of CatalogSource {namespace}/{name}: \
         it is retried; check catalog-operator's RBAC if it keeps failing"
    )]
    Apply {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// A registry object could not be encoded (a bug).
    #[error("failed to encode a registry object of CatalogSource {namespace}/{name}")]
    Encode {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: serde_json::Error,
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
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace | Error::Encode { .. } => "invalid",
            Error::Apply { .. } | Error::Read { .. } => "api",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace | Error::Encode { .. } => ErrorClass::Terminal,
            Error::Apply { source, .. } => source.class(),
            Error::Read { source, .. } => classify(source),
        }
    }
}

pub(crate) use crate::chain;
