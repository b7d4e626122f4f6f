//! The election task: acquire, renew and release one Lease.

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::PostParams,
    runtime::{WatchStreamExt, watcher},
};
use tokio::{
    sync::{Notify, watch},
    task::JoinHandle,
    time::Instant,
};
use tracing::{debug, info, warn};

use super::{LeaderElectionError, LeaderState, Leadership, LeaseConfig, leading_until, lease_expired};
use crate::{backoff::TriggerBackoff, metrics::LeaderMetrics};

/// Runs the election of one Lease for this replica. See the [module docs](super).
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    metrics: Option<LeaderMetricsHandle>,
    owner: Option<OwnerReference>,
}

impl LeaderElector {
    /// An elector for `config.name` in `config.namespace`; fails on unsafe settings.
    pub fn new(client: Client, config: LeaseConfig) -> Result<Self, LeaderElectionError> {
        config.validate()?;
        Ok(LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            metrics: None,
            owner: None,
        })
    }

    /// Makes `owner` (the binary's Deployment, see [`super::owner`]) an owner of the
    /// Lease, so that the Lease goes when the Deployment does.
    pub fn with_owner(mut self, owner: Option<OwnerReference>) -> Self {
        self.owner = owner;
        self
    }

    /// Records leadership in `metrics` (`olm_leader` and `olm_leader_transitions_total`,
    /// labelled with the Lease name).
    pub fn with_metrics(mut self, metrics: &LeaderMetrics) -> Self {
        self.metrics = Some(LeaderMetricsHandle::new(metrics, &self.config.name));
        self
    }

    /// Starts the election. It runs until `shutdown` resolves; it then stops leading
    /// and releases the Lease if it held it.
    ///
    /// Hold the returned [`ElectionTask`] and await it beside the controllers: the
    /// process should exit if it ends first.
    pub fn spawn<F>(self, shutdown: F) -> (Leadership, ElectionTask)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (tx, rx) = watch::channel(LeaderState::Following { holder: None });
        if let Some(metrics) = &self.metrics {
            metrics.set_leader(false);
        }
        let run = Run {
            api: self.api,
            config: self.config,
            metrics: self.metrics,
            owner: self.owner,
            tx,
            held: None,
            observed: None,
        };
        let handle = tokio::spawn(run.run(shutdown));
        (
            Leadership::from_receiver(rx),
            ElectionTask { handle: Some(handle) },
        )
    }
}

/// The election task of a [`LeaderElector`], or nothing when election is off.
#[derive(Debug)]
pub struct ElectionTask {
    handle: Option<JoinHandle<()>>,
}

impl ElectionTask {
    /// No task (election off): [`finished`](Self::finished) never resolves.
    pub fn none() -> Self {
        ElectionTask { handle: None }
    }

    /// Waits until the election task ends: `Ok` once it stopped after shutdown, an
    /// error if it panicked or was aborted. Cancel-safe, so it can sit in a
    /// `select!` loop. Never resolves if there is no task, or once it has resolved.
    pub async fn finished(&mut self) -> Result<(), LeaderElectionError> {
        let Some(handle) = self.handle.as_mut() else {
            return std::future::pending().await;
        };
        let result = handle.await;
        self.handle = None;
        result.map_err(LeaderElectionError::TaskFailed)
    }

    /// Waits until the task has ended after shutdown (the Lease is released); at once
    /// when there is no task, or it already ended.
    pub async fn stopped(self) -> Result<(), LeaderElectionError> {
        match self.handle {
            None => Ok(()),
            Some(handle) => handle.await.map_err(LeaderElectionError::TaskFailed),
        }
    }

    /// Aborts the task at once (it does not release the Lease). For tests that
    /// simulate a crash.
    pub fn abort(&self) {
        if let Some(handle) = &self.handle {
            handle.abort();
        }
    }
}

/// Watches the Lease `name`; the returned `Notify` is woken at each change. The
/// watch stops when the guard is dropped (also when the election task is
/// aborted).
fn watch_lease(api: Api<Lease>, name: &str) -> (Arc<Notify>, AbortOnDrop) {
    let changed = Arc::new(Notify::new());
    let notify = changed.clone();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let task = tokio::spawn(
        watcher(api, config)
            .backoff(TriggerBackoff::default())
            .for_each(move |event| {
                if event.is_ok() {
                    notify.notify_one();
                }
                std::future::ready(())
            }),
    );
    (changed, AbortOnDrop(task))
}

/// Aborts a task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What to do with a Lease as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// We hold it: renew.
    Renew,
    /// It is free, released or expired: take it.
    Acquire,
    /// Someone else holds it and it has not expired.
    Wait { holder: String },
}

/// Decides what to do with a Lease read at `now`, whose current version this replica
/// first saw at `observed_at`. `default_duration` applies when the Lease names none.
pub(crate) fn decide(
    spec: Option<&LeaseSpec>,
    identity: &str,
    observed_at: Instant,
    now: Instant,
    default_duration: Duration,
) -> Decision {
    let holder = spec
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty());
    match holder {
        None => Decision::Acquire,
        Some(holder) if holder == identity => Decision::Renew,
        Some(holder) => {
            let duration = spec
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map_or(default_duration, Duration::from_secs);
            if lease_expired(observed_at, duration, now) {
                Decision::Acquire
            } else {
                Decision::Wait {
                    holder: holder.to_owned(),
                }
            }
        }
    }
}

/// The result of one attempt to acquire or renew.
#[derive(Debug)]
enum Attempt {
    /// We hold the Lease, renewed by a write that started at the attempt's start.
    Holding,
    /// Someone else holds it.
    HeldBy(String),
    /// Our writes kept conflicting with others'; nothing is known.
    Contended,
}

struct Run {
    api: Api<Lease>,
    config: LeaseConfig,
    metrics: Option<LeaderMetricsHandle>,
    owner: Option<OwnerReference>,
    tx: watch::Sender<LeaderState>,
    /// The Lease as we last wrote it, while we hold it.
    held: Option<Lease>,
    /// The resourceVersion of the Lease we last saw, and when we first saw it.
    observed: Option<(String, Instant)>,
}

impl Run {
    async fn run<F: Future<Output = ()>>(mut self, shutdown: F) {
        let mut shutdown = std::pin::pin!(shutdown);
        info!(
            lease = %self.config.name,
            namespace = %self.config.namespace,
            identity = %self.config.identity,
            "starting leader election"
        );
        let (lease_changed, _watching) = watch_lease(self.api.clone(), &self.config.name);
        loop {
            self.expire_if_due();
            let started = Instant::now();
            // An attempt may not outlive our leadership, so that a hung API call
            // cannot delay the loss being published.
            let mut bound = started + self.config.renew_deadline;
            if let LeaderState::Leading { until } = *self.tx.borrow() {
                bound = bound.min(until);
            }
            let attempt = tokio::select! {
                () = &mut shutdown => break,
                attempt = tokio::time::timeout_at(bound, self.try_acquire_or_renew(started)) => attempt,
            };
            match attempt {
                Ok(Ok(Attempt::Holding)) => {
                    self.publish(LeaderState::Leading {
                        until: leading_until(started, self.config.renew_deadline),
                    });
                }
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    self.held = None;
                    self.publish(LeaderState::Following { holder: Some(holder) });
                }
                Ok(Ok(Attempt::Contended)) => debug!(lease = %self.config.name, "lease write conflicted"),
                Ok(Err(error)) => warn!(
                    lease = %self.config.name,
                    error = &error as &dyn std::error::Error,
                    "failed to acquire or renew the lease"
                ),
                Err(_) => warn!(lease = %self.config.name, "acquiring or renewing the lease timed out"),
            }
            self.expire_if_due();
            // A standby also looks again as soon as the Lease changes: a released
            // Lease is taken at once, and a renewal is seen when it happens.
            let following = matches!(*self.tx.borrow(), LeaderState::Following { .. });
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep_until(started + self.config.retry_period) => {}
                () = lease_changed.notified(), if following => {}
            }
        }
        self.step_down_and_release().await;
    }

    /// Publishes the loss of leadership if the renew deadline has passed.
    fn expire_if_due(&mut self) {
        let lapsed = matches!(*self.tx.borrow(), LeaderState::Leading { until } if Instant::now() >= until);
        if lapsed {
            warn!(
                lease = %self.config.name,
                "could not renew the lease before the renew deadline: no longer leading"
            );
            self.publish(LeaderState::Following { holder: None });
        }
    }

    async fn try_acquire_or_renew(&mut self, started: Instant) -> Result<Attempt, kube::Error> {
        // Two tries: a conflict on the first means our copy was stale (someone wrote,
        // or our previous write landed after we gave up on it); read and decide again.
        for _ in 0..2 {
            let current = match self.held.clone() {
                Some(lease) => Some(lease),
                None => self.api.get_opt(&self.config.name).await?,
            };
            let Some(current) = current else {
                let lease = self.claimed(None);
                match self.api.create(&PostParams::default(), &lease).await {
                    Ok(created) => {
                        self.hold(created, started);
                        return Ok(Attempt::Holding);
                    }
                    Err(kube::Error::Api(status)) if status.is_already_exists() => continue,
                    Err(error) => return Err(error),
                }
            };
            // Observed now, after the read: a later instant only delays expiry.
            let observed_at = self.observe(&current, Instant::now());
            let decision = decide(
                current.spec.as_ref(),
                &self.config.identity,
                observed_at,
                Instant::now(),
                self.config.lease_duration,
            );
            if let Decision::Wait { holder } = decision {
                return Ok(Attempt::HeldBy(holder));
            }
            let desired = self.claimed(Some(current));
            match self
                .api
                .replace(&self.config.name, &PostParams::default(), &desired)
                .await
            {
                Ok(written) => {
                    self.hold(written, started);
                    return Ok(Attempt::Holding);
                }
                Err(kube::Error::Api(status)) if status.is_conflict() => {
                    self.held = None;
                    continue;
                }
                Err(kube::Error::Api(status)) if status.is_not_found() => {
                    // Deleted under us: create it on the next try.
                    self.held = None;
                    continue;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(Attempt::Contended)
    }

    /// Notes the version of a Lease we read; returns when we first saw that version.
    fn observe(&mut self, lease: &Lease, now: Instant) -> Instant {
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        match &self.observed {
            Some((seen, at)) if *seen == version => *at,
            _ => {
                self.observed = Some((version, now));
                now
            }
        }
    }

    fn hold(&mut self, lease: Lease, started: Instant) {
        if let Some(version) = lease.metadata.resource_version.clone() {
            self.observed = Some((version, started));
        }
        self.held = Some(lease);
    }

    /// `current` (or a new Lease) claimed by us: acquired if someone else held it,
    /// renewed otherwise.
    fn claimed(&self, current: Option<Lease>) -> Lease {
        let now = MicroTime(Timestamp::now());
        let mut lease = current.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.config.name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: None,
        });
        if let Some(owner) = &self.owner
            && lease.metadata.owner_references.is_none()
        {
            lease.metadata.owner_references = Some(vec![owner.clone()]);
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let ours = spec.holder_identity.as_deref() == Some(self.config.identity.as_str());
        if !ours {
            spec.holder_identity = Some(self.config.identity.clone());
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        spec.lease_duration_seconds = Some(self.config.lease_duration_seconds());
        spec.renew_time = Some(now);
        lease
    }

    fn publish(&mut self, state: LeaderState) {
        let previous = self.tx.borrow().clone();
        let was_leading = matches!(previous, LeaderState::Leading { .. });
        let leading = matches!(state, LeaderState::Leading { .. });
        match (&previous, &state) {
            (_, LeaderState::Leading { .. }) if !was_leading => {
                info!(lease = %self.config.name, "now leading")
            }
            (LeaderState::Leading { .. }, LeaderState::Following { holder: Some(holder) }) => {
                info!(lease = %self.config.name, %holder, "no longer leading: another replica holds the lease")
            }
            (LeaderState::Leading { .. }, _) if !leading => {
                info!(lease = %self.config.name, "no longer leading")
            }
            (LeaderState::Following { holder: old }, LeaderState::Following { holder: Some(new) })
                if old.as_ref() != Some(new) =>
            {
                info!(lease = %self.config.name, holder = %new, "following the lease holder")
            }
            _ => {}
        }
        if was_leading != leading
            && let Some(metrics) = &self.metrics
        {
            metrics.set_leader(leading);
            metrics.transition();
        }
        self.tx.send_if_modified(|current| {
            let wake = current.differs_in_kind(&state);
            *current = state;
            wake
        });
    }

    /// On shutdown: stop leading first (no write may follow the release), then give
    /// the Lease up so a standby takes over at once.
    async fn step_down_and_release(mut self) {
        let was_leading = matches!(*self.tx.borrow(), LeaderState::Leading { .. });
        self.publish(LeaderState::Following { holder: None });
        let Some(mut lease) = self.held.take() else {
            info!(lease = %self.config.name, "leader election stopped");
            return;
        };
        if !was_leading {
            // Our copy may be stale; a conflict below would say so, but a lapsed holder
            // has nothing to hand over that expiry will not.
            debug!(lease = %self.config.name, "releasing a lease whose renewal had lapsed");
        }
        let now = MicroTime(Timestamp::now());
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.acquire_time = Some(now.clone());
            spec.renew_time = Some(now);
        }
        let params = PostParams::default();
        let release = self.api.replace(&self.config.name, &params, &lease);
        match tokio::time::timeout(self.config.renew_deadline, release).await {
            Ok(Ok(_)) => info!(lease = %self.config.name, "released the lease"),
            Ok(Err(error)) => warn!(
                lease = %self.config.name,
                error = &error as &dyn std::error::Error,
                "failed to release the lease; standbys take over when it expires"
            ),
            Err(_) => warn!(
                lease = %self.config.name,
                "releasing the lease timed out; standbys take over when it expires"
            ),
        }
    }
}

/// The leader metrics of one Lease.
#[derive(Clone)]
pub(crate) struct LeaderMetricsHandle {
    leader: prometheus::IntGauge,
    transitions: prometheus::IntCounter,
}

impl LeaderMetricsHandle {
    pub(crate) fn new(metrics: &LeaderMetrics, lease: &str) -> Self {
        LeaderMetricsHandle {
            leader: metrics.leader.with_label_values(&[lease]),
            transitions: metrics.transitions.with_label_values(&[lease]),
        }
    }

    pub(crate) fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    fn transition(&self) {
        self.transitions.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, seconds: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: seconds,
            ..LeaseSpec::default()
        }
    }

    const D: Duration = Duration::from_secs(15);

    #[test]
    fn a_free_or_released_lease_is_taken_at_once() {
        let now = Instant::now();
        assert_eq!(decide(None, "a", now, now, D), Decision::Acquire);
        assert_eq!(
            decide(Some(&spec(None, Some(15))), "a", now, now, D),
            Decision::Acquire
        );
        assert_eq!(
            decide(Some(&spec(Some(""), Some(1))), "a", now, now, D),
            Decision::Acquire
        );
    }

    #[test]
    fn our_own_lease_is_renewed() {
        let now = Instant::now();
        assert_eq!(
            decide(Some(&spec(Some("a"), Some(15))), "a", now, now, D),
            Decision::Renew
        );
    }

    #[test]
    fn another_holder_is_waited_for_until_its_lease_expires_on_our_clock() {
        let seen = Instant::now();
        let s = spec(Some("b"), Some(5));
        let wait = Decision::Wait { holder: "b".into() };
        assert_eq!(
            decide(Some(&s), "a", seen, seen + Duration::from_secs(4), D),
            wait
        );
        assert_eq!(
            decide(Some(&s), "a", seen, seen + Duration::from_secs(5), D),
            Decision::Acquire
        );
        // Without a duration on the Lease, ours applies.
        let s = spec(Some("b"), None);
        assert_eq!(
            decide(Some(&s), "a", seen, seen + Duration::from_secs(14), D),
            wait
        );
        assert_eq!(decide(Some(&s), "a", seen, seen + D, D), Decision::Acquire);
    }
}
