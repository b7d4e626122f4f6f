//! Why a MachinePool reconcile fails, and how a failed read or write is told.

use olm_runtime::{ErrorClass, ReconcileError, apply::WriteError, classify};

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The MachinePool has no namespace (it always should).
    #[error("the MachinePool has no namespace")]
    NoNamespace,
    /// Reading something the status is computed from failed.
    #[error("failed to read {what} for MachinePool {pool}")]
    Read {
        /// The pool.
        pool: String,
        /// What was read.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The join token Secret the pool names exists and was not made by olm-operator.
    #[error(
        "MachinePool {pool} names join token Secret {secret}, which exists and is no join token Secret (type substrate.olm-rs.dev/join-token): name another Secret, or delete it so that olm-operator makes it"
    )]
    ForeignJoinSecret {
        /// The pool.
        pool: String,
        /// The Secret.
        secret: String,
    },
    /// The API server issued a join token that is no JWT with an id and expiry.
    #[error("the join token issued for MachinePool {pool} carries no id (jti) and expiry (exp)")]
    UnreadableToken {
        /// The pool.
        pool: String,
    },
    /// Writing an agent object, a lost machine's condition or the status failed.
    #[error("failed to write {what} for MachinePool {pool}")]
    Write {
        /// The pool.
        pool: String,
        /// What was written.
        what: String,
        /// The cause (boxed: it is large, and the error of every reconcile).
        #[source]
        source: Box<WriteError>,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace | Error::ForeignJoinSecret { .. } => "invalid",
            Error::UnreadableToken { .. } | Error::Read { .. } => "dereference",
            Error::Write { .. } => "apply",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace | Error::ForeignJoinSecret { .. } => ErrorClass::Terminal,
            Error::UnreadableToken { .. } => ErrorClass::Transient,
            Error::Read { source, .. } => classify(source),
            Error::Write { source, .. } => source.class(),
        }
    }
}

/// How a failed read of `what` for pool `pool` is told.
pub fn read_error(pool: &str, what: &str) -> impl FnOnce(kube::Error) -> Error + use<> {
    let (pool, what) = (pool.to_owned(), what.to_owned());
    move |source| Error::Read { pool, what, source }
}

/// How a failed write of `what` for pool `pool` is told.
pub fn write_error(pool: &str, what: &str) -> impl FnOnce(WriteError) -> Error + use<> {
    let (pool, what) = (pool.to_owned(), what.to_owned());
    move |source| Error::Write {
        pool,
        what,
        source: Box::new(source),
    }
}
