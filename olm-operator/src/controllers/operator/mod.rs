//! The Operator controller: one cluster-scoped `Operator` per installed
//! package, named `<package>.<namespace>`, whose `status.components` lists
//! every object labelled `operators.coreos.com/<package>.<namespace>` (the
//! Subscription, InstallPlans, CSV, CRDs, Deployments, RBAC, Services,
//! Secrets, webhook configurations, APIServices, ...) with its status
//! conditions, as OLM's Operator API does. OLM's clients read it to list an
//! operator's operands and to uninstall it.
//!
//! A reconcile of one Operator name reads the Operator and lists its
//! components by label from the API server ([`components`]), decides with
//! [`decide::decide`], then applies: creates the Operator (server-side apply)
//! while components carry its label, also after a user deleted it; writes its
//! status when it changed; deletes it once the last component is gone.
//!
//! Reconciles are keyed by name, not by object, because an Operator that does
//! not exist (deleted by a user) must still be reconciled: [`run`] takes the
//! names to look at from a stream (the watches of [`crate::watches`]: every
//! component kind as metadata, and the Operators themselves, deletions
//! included), queues each name once, and reconciles one name at a time, each
//! [`SETTLE`] after it was first queued, so that the burst of changes an
//! install makes is one reconcile. It
//! remembers the names it has seen, to reconcile them all when this replica
//! starts leading and at each resync.

pub mod components;
pub mod decide;

use std::{
    collections::{BTreeSet, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{Stream, StreamExt};
use kube::Api;
use olm_api::v1::Operator;
use olm_runtime::{ErrorClass, ReconcileError, apply::WriteError, classify};
use tokio::{sync::mpsc, time::Instant};

use self::decide::Effect;
use crate::context::Context;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "operator";

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the Operator failed.
    #[error("cannot read Operator {name}")]
    Read {
        /// The Operator.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Listing its components failed.
    #[error("cannot list the components of Operator {name}")]
    List {
        /// The Operator.
        name: String,
        /// The cause.
        #[source]
        source: components::ListError,
    },
    /// Creating, updating or deleting the Operator failed.
    #[error("cannot write Operator {name}")]
    Write {
        /// The Operator.
        name: String,
        /// The cause.
        #[source]
        source: WriteError,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Read { .. } | Error::List { .. } => "dereference",
            Error::Write { .. } => "apply",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::Read { source, .. } => classify(source),
            Error::List { source, .. } => classify(&source.source),
            Error::Write { source, .. } => source.class(),
        }
    }
}

/// Reconciles the Operator `name`: read, decide, apply. Returns what was done.
pub async fn reconcile(name: &str, ctx: &Context) -> Result<Effect, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if !ctx.is_leader() {
        // The next leadership term reconciles every known name.
        return Ok(Effect::Nothing);
    }
    let api: Api<Operator> = Api::all(ctx.client.clone());
    let current = api.get_opt(name).await.map_err(|source| Error::Read {
        name: name.to_owned(),
        source,
    })?;
    let found = components::list(&ctx.client, &decide::label_key(name))
        .await
        .map_err(|source| Error::List {
            name: name.to_owned(),
            source,
        })?;
    let effect = decide::decide(name, current.as_ref(), &found);
    apply(ctx, &api, name, &effect)
        .await
        .map_err(|source| Error::Write {
            name: name.to_owned(),
            source,
        })?;
    Ok(effect)
}

async fn apply(ctx: &Context, api: &Api<Operator>, name: &str, effect: &Effect) -> Result<(), WriteError> {
    ctx.writer
        .perform(&ctx.client, api, &effect.effects(name), &())
        .await?;
    match effect {
        Effect::Nothing | Effect::Gone => {}
        Effect::Create(_) => tracing::info!(operator = name, "Operator created"),
        Effect::UpdateStatus(status) => {
            let refs = status
                .components
                .as_ref()
                .and_then(|c| c.refs.as_ref())
                .map_or(0, Vec::len);
            tracing::info!(operator = name, components = refs, "Operator status updated");
        }
        Effect::Delete => tracing::info!(
            operator = name,
            "Operator deleted: no component carries its label"
        ),
    }
    Ok(())
}

/// How soon a failed reconcile is tried again, or never (it waits for a change).
fn retry_after(error: &Error) -> Option<Duration> {
    if error.is_not_leader() {
        return None;
    }
    match error.class() {
        ErrorClass::Terminal => None,
        ErrorClass::Forbidden => Some(olm_runtime::reconcile::RETRY_FORBIDDEN),
        ErrorClass::Transient | ErrorClass::Conflict | ErrorClass::Gone => {
            Some(olm_runtime::reconcile::RETRY)
        }
    }
}

/// How long a name waits in the queue before its reconcile. An install
/// labels a dozen objects of an Operator within a second, each change naming
/// it again; while it waits they are one reconcile, not a dozen (each lists
/// every component kind from the API server, which would take the API
/// server's time from the install itself). What the Operator shows is at most
/// this much later.
pub const SETTLE: Duration = Duration::from_secs(1);

/// A queued name and when it may be reconciled.
pub type Queued = (String, Instant);

/// The names waiting for a reconcile, each queued at most once, and every name seen.
#[derive(Clone)]
pub struct Queue {
    pending: Arc<Mutex<HashSet<String>>>,
    known: Arc<Mutex<BTreeSet<String>>>,
    sender: mpsc::UnboundedSender<Queued>,
    settle: Duration,
}

impl Queue {
    /// An empty queue whose names wait `settle` each, and the receiving end
    /// they come out of, in the order they were queued.
    pub fn new(settle: Duration) -> (Self, mpsc::UnboundedReceiver<Queued>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let queue = Queue {
            pending: Arc::default(),
            known: Arc::default(),
            sender,
            settle,
        };
        (queue, receiver)
    }

    /// Queues `name` unless it is queued already, and remembers it.
    pub fn push(&self, name: String) {
        lock(&self.known).insert(name.clone());
        if lock(&self.pending).insert(name.clone()) {
            // The receiver lives as long as the controller: a send fails only once it stopped.
            let _ = self.sender.send((name, Instant::now() + self.settle));
        }
    }

    /// Queues every name seen so far.
    pub fn push_all(&self) {
        let names: Vec<String> = lock(&self.known).iter().cloned().collect();
        for name in names {
            self.push(name);
        }
    }

    /// Takes `name` out of the queue before it is reconciled, so that a change
    /// during the reconcile queues it again.
    fn taken(&self, name: &str) {
        lock(&self.pending).remove(name);
    }

    /// Forgets `name`: it has neither an Operator nor components.
    fn forget(&self, name: &str) {
        lock(&self.known).remove(name);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs the controller until `stopped`: queues the names `names` yields,
/// every known name on each of `terms` (a new leadership term) and at each
/// resync, and reconciles the queued names one at a time.
pub async fn run(
    ctx: Arc<Context>,
    names: impl Stream<Item = String> + Send + 'static,
    terms: impl Stream<Item = ()> + Send + 'static,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (queue, mut receiver) = Queue::new(SETTLE);
    let feeding = {
        let queue = queue.clone();
        let resync = ctx.settings.resync;
        async move {
            let resyncs = every(resync).map(|()| None);
            let terms = terms.map(|()| None);
            let names = names.map(Some);
            let mut all = std::pin::pin!(futures::stream::select(
                names,
                futures::stream::select(terms, resyncs)
            ));
            while let Some(next) = all.next().await {
                match next {
                    Some(name) => queue.push(name),
                    None => queue.push_all(),
                }
            }
        }
    };
    let working = async {
        // Names come out in the order queued, so each waits at most its own settle.
        while let Some((name, due)) = receiver.recv().await {
            tokio::time::sleep_until(due).await;
            queue.taken(&name);
            reconcile_queued(&ctx, &queue, &name).await;
        }
    };
    tokio::select! {
        () = stopped => {}
        () = feeding => {}
        () = working => {}
    }
    tracing::info!("Operator controller stopped");
}

/// Reconciles `name` and handles the outcome: forgets a name with nothing
/// left, retries a failure after a while.
async fn reconcile_queued(ctx: &Context, queue: &Queue, name: &str) {
    match reconcile(name, ctx).await {
        Ok(Effect::Delete | Effect::Gone) => queue.forget(name),
        Ok(_) => {}
        Err(error) => {
            ctx.metrics
                .runtime()
                .reconcile
                .error(CONTROLLER, error.category());
            tracing::warn!(
                operator = name,
                error = &error as &dyn std::error::Error,
                "reconcile failed"
            );
            if let Some(delay) = retry_after(&error) {
                let queue = queue.clone();
                let name = name.to_owned();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    queue.push(name);
                });
            }
        }
    }
}

/// A stream that yields every `period`, the first time after one period.
fn every(period: Duration) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(period).await;
        Some(((), ()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn next(receiver: &mut mpsc::UnboundedReceiver<Queued>) -> Option<String> {
        receiver.recv().await.map(|(name, _)| name)
    }

    #[tokio::test]
    async fn a_name_is_queued_once_until_it_is_taken() {
        let (queue, mut receiver) = Queue::new(Duration::ZERO);
        queue.push("a.ops".to_owned());
        queue.push("a.ops".to_owned());
        queue.push("b.ops".to_owned());
        assert_eq!(next(&mut receiver).await.as_deref(), Some("a.ops"));
        assert_eq!(next(&mut receiver).await.as_deref(), Some("b.ops"));
        assert!(receiver.try_recv().is_err(), "a.ops was queued once");
        queue.taken("a.ops");
        queue.push_all();
        assert_eq!(next(&mut receiver).await.as_deref(), Some("a.ops"));
        assert!(receiver.try_recv().is_err(), "b.ops is still queued");
        queue.taken("a.ops");
        queue.forget("a.ops");
        queue.push_all();
        assert!(
            receiver.try_recv().is_err(),
            "a.ops is forgotten, b.ops still queued"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_name_waits_to_settle_and_changes_meanwhile_are_one_reconcile() {
        let (queue, mut receiver) = Queue::new(SETTLE);
        let queued_at = Instant::now();
        queue.push("a.ops".to_owned());
        tokio::time::advance(Duration::from_millis(300)).await;
        queue.push("a.ops".to_owned());
        let (name, due) = receiver.recv().await.expect("queued");
        assert_eq!((name.as_str(), due), ("a.ops", queued_at + SETTLE));
        assert!(receiver.try_recv().is_err(), "the second change joined the first");
    }

    #[test]
    fn failures_are_retried_by_their_class() {
        let list = |code: u16| Error::List {
            name: "a.ops".to_owned(),
            source: components::ListError {
                kind: "Secret",
                selector: "operators.coreos.com/a.ops".to_owned(),
                source: kube::Error::Api(Box::new(kube::core::Status {
                    code,
                    ..Default::default()
                })),
            },
        };
        assert_eq!(retry_after(&list(503)), Some(olm_runtime::reconcile::RETRY));
        assert_eq!(
            retry_after(&list(403)),
            Some(olm_runtime::reconcile::RETRY_FORBIDDEN)
        );
        let lost = Error::Write {
            name: "a.ops".to_owned(),
            source: WriteError::NotLeader {
                kind: "Operator".to_owned(),
                name: "a.ops".to_owned(),
            },
        };
        assert_eq!(retry_after(&lost), None, "the next term reconciles everything");
    }
}
