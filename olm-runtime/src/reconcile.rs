//! One policy for failed reconciles, shared by every controller.
//!
//! A controller's error type implements [`ReconcileError`]: a metrics label and an
//! [`ErrorClass`] (usually from [`classify`](crate::classify) or
//! [`WriteError::class`]). The controller's `error_policy` is then one line:
//! [`error_policy`]`(CONTROLLER, &object, error, &metrics)`. It counts the error, says
//! nothing loud about writes that fencing refused ([`lost_leadership`]: the next
//! leadership term reconciles everything again), waits for a change when only a
//! change can help, and retries otherwise.

use std::time::Duration;

use kube::{Resource, runtime::controller::Action};

use crate::{apply::WriteError, errors::ErrorClass, metrics::ReconcileMetrics};

/// How soon a reconcile that failed for a transient reason is retried.
pub const RETRY: Duration = Duration::from_secs(5);

/// How soon a reconcile the API server refused as forbidden is retried: RBAC may
/// be granted at any time, and nothing announces it.
pub const RETRY_FORBIDDEN: Duration = Duration::from_secs(30);

/// The metrics label of errors that fencing refused or abandoned.
pub const NOT_LEADER: &str = "not_leader";

/// What the error policy needs to know of a controller's error.
pub trait ReconcileError: std::error::Error + 'static {
    /// A low-cardinality label for metrics (`api`, `catalog`, `build`, ...).
    fn category(&self) -> &'static str;

    /// What kind of failure this is; decides when to try again.
    fn class(&self) -> ErrorClass;

    /// Whether a write was refused or abandoned because this replica does not lead:
    /// by default, a fencing [`WriteError`] anywhere in the source chain.
    fn is_not_leader(&self) -> bool
    where
        Self: Sized,
    {
        lost_leadership(self)
    }
}

/// Whether `error`, or an error it was caused by, is a write that fencing refused
/// or abandoned because this replica does not lead (a typed [`WriteError`]
/// anywhere in the source chain).
pub fn lost_leadership(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(error) = current {
        let write = error
            .downcast_ref::<WriteError>()
            .or_else(|| error.downcast_ref::<Box<WriteError>>().map(AsRef::as_ref));
        if write.is_some_and(WriteError::is_not_leader) {
            return true;
        }
        current = error.source();
    }
    false
}

/// What to do after a failed reconcile of `controller`, as a pure decision.
pub fn action_for(lost_leadership: bool, class: ErrorClass) -> Action {
    if lost_leadership {
        // The next leadership term reconciles every object again.
        return Action::await_change();
    }
    match class {
        ErrorClass::Terminal => Action::await_change(),
        ErrorClass::Forbidden => Action::requeue(RETRY_FORBIDDEN),
        ErrorClass::Transient | ErrorClass::Conflict | ErrorClass::Gone => Action::requeue(RETRY),
    }
}

/// The error policy of every controller, for a reconcile of `object` that failed
/// with `error`: counts the error in
/// `olm_reconcile_errors_total{controller,category}`, logs it (at debug level when
/// this replica merely stopped leading), and decides with [`action_for`].
pub fn error_policy<K, E>(
    controller: &'static str,
    object: &K,
    error: &E,
    metrics: &ReconcileMetrics,
) -> Action
where
    K: Resource,
    E: ReconcileError,
{
    let not_leader = error.is_not_leader();
    let class = error.class();
    let (name, namespace) = (object.meta().name.as_deref(), object.meta().namespace.as_deref());
    if not_leader {
        metrics.error(controller, NOT_LEADER);
        tracing::debug!(
            controller,
            name,
            namespace,
            error = error as &dyn std::error::Error,
            "not leading: the write is left to the leader"
        );
    } else {
        metrics.error(controller, error.category());
        tracing::warn!(
            controller,
            name,
            namespace,
            category = error.category(),
            class = %class,
            error = error as &dyn std::error::Error,
            "reconcile failed"
        );
    }
    action_for(not_leader, class)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[derive(Debug, thiserror::Error)]
    enum Error {
        #[error("failed to write")]
        Write(#[source] WriteError),
        #[error("boxed")]
        Boxed(#[source] Box<WriteError>),
        #[error("invalid")]
        Invalid,
    }

    impl ReconcileError for Error {
        fn category(&self) -> &'static str {
            match self {
                Error::Write(_) | Error::Boxed(_) => "api",
                Error::Invalid => "invalid",
            }
        }

        fn class(&self) -> ErrorClass {
            match self {
                Error::Write(e) => e.class(),
                Error::Boxed(e) => e.class(),
                Error::Invalid => ErrorClass::Terminal,
            }
        }
    }

    fn not_leader() -> WriteError {
        WriteError::NotLeader {
            kind: "ConfigMap".into(),
            name: "c".into(),
        }
    }

    fn api(code: u16) -> WriteError {
        WriteError::Apply {
            kind: "ConfigMap".into(),
            name: "c".into(),
            source: kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..Default::default()
            })),
        }
    }

    #[test]
    fn fencing_is_found_anywhere_in_the_chain() {
        assert!(lost_leadership(&not_leader()));
        assert!(lost_leadership(&Error::Write(not_leader())));
        assert!(lost_leadership(&Error::Boxed(Box::new(not_leader()))));
        assert!(!lost_leadership(&Error::Write(api(500))));
        assert!(!lost_leadership(&Error::Invalid));
    }

    #[test]
    fn classes_decide_the_retry() {
        assert_eq!(action_for(true, ErrorClass::Transient), Action::await_change());
        assert_eq!(action_for(false, ErrorClass::Terminal), Action::await_change());
        assert_eq!(action_for(false, ErrorClass::Transient), Action::requeue(RETRY));
        assert_eq!(action_for(false, ErrorClass::Conflict), Action::requeue(RETRY));
        assert_eq!(action_for(false, ErrorClass::Gone), Action::requeue(RETRY));
        assert_eq!(
            action_for(false, ErrorClass::Forbidden),
            Action::requeue(RETRY_FORBIDDEN)
        );
    }

    #[test]
    fn the_policy_counts_by_category_and_fencing_apart() {
        let metrics = Metrics::new().unwrap();
        let reconciles = &metrics.reconcile;
        let cm = k8s_openapi::api::core::v1::ConfigMap::default();
        assert_eq!(
            error_policy("csv", &cm, &Error::Write(not_leader()), reconciles),
            Action::await_change()
        );
        assert_eq!(
            error_policy("csv", &cm, &Error::Write(api(403)), reconciles),
            Action::requeue(RETRY_FORBIDDEN)
        );
        assert_eq!(
            error_policy("csv", &cm, &Error::Write(api(503)), reconciles),
            Action::requeue(RETRY)
        );
        assert_eq!(
            error_policy("csv", &cm, &Error::Invalid, reconciles),
            Action::await_change()
        );
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&metrics.registry().gather())
            .unwrap();
        for (category, count) in [("not_leader", 1), ("api", 2), ("invalid", 1)] {
            let series =
                format!("olm_reconcile_errors_total{{category=\"{category}\",controller=\"csv\"}} {count}");
            assert!(text.contains(&series), "{series} in {text}");
        }
    }
}
