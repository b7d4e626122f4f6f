//! The errors of the CatalogSource controller, and how an error reads in a status.

use olm_runtime::{ErrorClass, ReconcileError, apply::WriteError, classify};

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

pub(crate) use crate::chain;
