//! Leader election on a `coordination.k8s.io/v1` Lease, with fenced leadership.
//!
//! Every replica of a binary keeps its watches and caches warm; only the holder of
//! the binary's Lease writes. [`LeaderElector::spawn`] runs the election in one task
//! and hands back a [`Leadership`] handle (cheap to clone, one per controller) and an
//! [`ElectionTask`] that the binary must await beside its controllers: if the task
//! ever ends before shutdown, the process should exit.
//!
//! ## Fencing
//!
//! Other replicas judge the lease by their own clocks: a holder is gone once the
//! Lease has not changed for `leaseDurationSeconds` since they first saw its current
//! version. The holder, in turn, stops believing in its own leadership
//! `renew_deadline` after the *start* of its last successful renewal
//! ([`leading_until`]). Since the renewal was sent before the API server stored it and
//! before anyone else could observe it, and `renew_deadline < lease_duration`, the
//! holder's leadership ends at least `lease_duration - renew_deadline` before any
//! other replica may take the Lease. [`Leadership::is_leader`] reads the clock on every
//! call, so a replica whose renewals hang or fail stops writing on time even if the
//! election task is stuck or dead.
//!
//! ## Writes to the Lease
//!
//! Every write is a `replace` with the `resourceVersion` that was read (optimistic
//! concurrency), or a `create` when the Lease is absent, so two replicas can never
//! both succeed in claiming it. On shutdown the holder first stops leading locally,
//! then releases the Lease (no holder, `leaseDurationSeconds: 1`) so that a standby
//! takes over as soon as its watch of the Lease sees the release, instead of
//! waiting for the lease to expire.

mod args;
mod elector;
pub mod owner;

use std::time::Duration;

use tokio::{sync::watch, time::Instant};

pub use args::{LeaderElectionArgs, default_identity, parse_duration};
pub use elector::{ElectionTask, LeaderElector};

/// The defaults: fast failover. Standbys watch the Lease, so they see each
/// renewal when it happens. After a crash a standby takes over once the lease
/// has gone unrenewed for its duration (8 to 12 s after the crash, as it checks
/// for expiry every retry period); after a clean shutdown the lease is released
/// and a standby takes it at once. The leader stops writing 5 s before any
/// standby could take over; an API server outage longer than the renew deadline
/// makes it step down until it can renew again.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(10);
/// See [`DEFAULT_LEASE_DURATION`].
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(5);
/// See [`DEFAULT_LEASE_DURATION`].
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    /// The timings or names do not make a safe election.
    #[error("invalid leader election settings: {0}")]
    InvalidConfig(String),
    /// The election task panicked or was aborted.
    #[error("the leader election task ended abnormally")]
    TaskFailed(#[source] tokio::task::JoinError),
}

/// How one elector takes part in the election of one Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Name of the Lease (one per binary).
    pub name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// This replica's identity, written as `holderIdentity`; unique among replicas.
    pub identity: String,
    /// How long other replicas wait, after the Lease last changed, before taking it.
    /// Written as `leaseDurationSeconds` (rounded up to whole seconds).
    pub lease_duration: Duration,
    /// How long after the start of its last successful renewal the holder still acts
    /// as leader. Must be shorter than `lease_duration`.
    pub renew_deadline: Duration,
    /// How often to renew (as holder) or to try to acquire (as standby).
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// A config with the default timings.
    pub fn new(name: impl Into<String>, namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        LeaseConfig {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// Checks that the settings make a safe election:
    /// `0 < retry_period < renew_deadline < lease_duration`, `lease_duration` of at
    /// least one second, and non-empty names.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        let fail = |why: String| Err(LeaderElectionError::InvalidConfig(why));
        if self.name.is_empty() || self.namespace.is_empty() || self.identity.is_empty() {
            return fail("the lease name, lease namespace and identity must not be empty".into());
        }
        if self.retry_period.is_zero() {
            return fail("the retry period must be positive".into());
        }
        if self.lease_duration < Duration::from_secs(1) {
            return fail(format!(
                "the lease duration ({:?}) must be at least one second: the Lease stores whole seconds",
                self.lease_duration
            ));
        }
        if self.renew_deadline >= self.lease_duration {
            return fail(format!(
                "the renew deadline ({:?}) must be shorter than the lease duration ({:?}), \
                 or a leader that cannot renew may still write after another replica took over",
                self.renew_deadline, self.lease_duration
            ));
        }
        if self.retry_period >= self.renew_deadline {
            return fail(format!(
                "the retry period ({:?}) must be shorter than the renew deadline ({:?}), \
                 or a leader gets no second try to renew",
                self.retry_period, self.renew_deadline
            ));
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written to the Lease: the duration rounded up.
    pub fn lease_duration_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(secs).unwrap_or(i32::MAX)
    }
}

/// This replica's view of the election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderState {
    /// Election is off (`--leader-elect=false`): this process is the only writer.
    Standalone,
    /// This replica holds the Lease and may write until `until`, unless it renews
    /// before then (see [`leading_until`]).
    Leading {
        /// When leadership ends without a further successful renewal.
        until: Instant,
    },
    /// Another replica holds the Lease (`holder`), or nobody does yet (`None`), or
    /// this replica lost it.
    Following {
        /// The holder last seen on the Lease, if any.
        holder: Option<String>,
    },
}

impl LeaderState {
    /// Whether this state allows writing at `now`.
    pub fn is_leader_at(&self, now: Instant) -> bool {
        match self {
            LeaderState::Standalone => true,
            LeaderState::Leading { until } => holds_at(*until, now),
            LeaderState::Following { .. } => false,
        }
    }

    /// Whether two states differ in more than the renewal deadline (what watchers of
    /// the state are woken for).
    fn differs_in_kind(&self, other: &LeaderState) -> bool {
        match (self, other) {
            (LeaderState::Standalone, LeaderState::Standalone) => false,
            (LeaderState::Leading { .. }, LeaderState::Leading { .. }) => false,
            (LeaderState::Following { holder: a }, LeaderState::Following { holder: b }) => a != b,
            _ => true,
        }
    }
}

/// The instant a holder stops acting as leader after a renewal that *started* at
/// `renew_started` succeeded: `renew_started + renew_deadline`.
pub fn leading_until(renew_started: Instant, renew_deadline: Duration) -> Instant {
    renew_started + renew_deadline
}

/// Whether leadership that lasts until `until` still holds at `now` (it ends at
/// `until` exactly).
pub fn holds_at(until: Instant, now: Instant) -> bool {
    now < until
}

/// Whether a standby may take a Lease held by someone else: the Lease has not changed
/// for `lease_duration` since `observed_at`, when this replica first saw its current
/// version (client-go's rule, free of clock skew between replicas).
pub fn lease_expired(observed_at: Instant, lease_duration: Duration, now: Instant) -> bool {
    now >= observed_at + lease_duration
}

/// A handle on this replica's leadership: cheap to clone, one per controller.
///
/// Gate every write on [`is_leader`](Leadership::is_leader) (the
/// [`crate::apply`] helpers do), and use [`subscribe`](Leadership::subscribe) or
/// [`lost`](Leadership::lost) to start or stop leader-only work.
#[derive(Clone, Debug)]
pub struct Leadership {
    rx: watch::Receiver<LeaderState>,
}

impl Leadership {
    /// Leadership without election: always the leader. For `--leader-elect=false`
    /// and for tests.
    pub fn standalone() -> Self {
        let (_tx, rx) = watch::channel(LeaderState::Standalone);
        Leadership { rx }
    }

    /// A handle on states published by `tx` (used by the elector, and by tests that
    /// drive leadership by hand).
    pub fn from_receiver(rx: watch::Receiver<LeaderState>) -> Self {
        Leadership { rx }
    }

    /// Whether this replica may write now. False as soon as the renew deadline has
    /// passed without a successful renewal, whatever the election task is doing.
    pub fn is_leader(&self) -> bool {
        self.rx.borrow().is_leader_at(Instant::now())
    }

    /// When the current leadership ends unless renewed: `Some` while leading,
    /// `None` when standalone (it never ends) and when not leading.
    pub fn deadline(&self) -> Option<Instant> {
        match *self.rx.borrow() {
            LeaderState::Leading { until } if holds_at(until, Instant::now()) => Some(until),
            _ => None,
        }
    }

    /// The current state.
    pub fn state(&self) -> LeaderState {
        self.rx.borrow().clone()
    }

    /// A receiver of state changes. It is woken when leadership is gained or lost
    /// or the holder changes, not on every renewal; note that a `Leading` state may
    /// expire by the clock before the election task publishes the loss.
    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.rx.clone()
    }

    /// Waits until this replica leads. Returns false if the election ended without
    /// that happening (the task stopped).
    pub async fn acquired(&mut self) -> bool {
        loop {
            if self.is_leader() {
                return true;
            }
            if self.rx.changed().await.is_err() {
                return self.is_leader();
            }
        }
    }

    /// Waits until this replica no longer leads (by the clock or by the election
    /// task). Never resolves for a standalone replica.
    pub async fn lost(&mut self) {
        loop {
            let state = self.rx.borrow_and_update().clone();
            match state {
                LeaderState::Standalone => std::future::pending::<()>().await,
                LeaderState::Following { .. } => return,
                LeaderState::Leading { until } => {
                    if !holds_at(until, Instant::now()) {
                        return;
                    }
                    tokio::select! {
                        () = tokio::time::sleep_until(until) => {
                            // Loop: a renewal may have moved `until` without waking us.
                            if !self.is_leader() {
                                return;
                            }
                        }
                        changed = self.rx.changed() => {
                            if changed.is_err() {
                                // The task is gone: leadership lasts until `until` at most.
                                tokio::time::sleep_until(until).await;
                                return;
                            }
                        }
                    }
                }
            }
        }
    }
}

impl Leadership {
    /// One item each time this replica starts leading (at once if it leads now, and
    /// once for a standalone replica): give it to every controller's
    /// `reconcile_all_on`, so that a new leader looks at every object again. A term
    /// ends when leadership is lost, by the clock or by the election; the stream
    /// ends when the election task is gone without this replica leading.
    pub fn terms(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        futures::stream::unfold((self.clone(), false), |(mut leadership, leading)| async move {
            if leading {
                leadership.lost().await;
            }
            leadership.acquired().await.then_some(((), (leadership, true)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaseConfig {
        LeaseConfig::new("olm-operator", "olm", "pod-a")
    }

    #[test]
    fn defaults_are_valid_and_fast() {
        let c = config();
        c.validate().unwrap();
        assert_eq!(c.lease_duration, Duration::from_secs(10));
        assert_eq!(c.renew_deadline, Duration::from_secs(5));
        assert_eq!(c.retry_period, Duration::from_secs(2));
        assert_eq!(c.lease_duration_seconds(), 10);
    }

    #[test]
    fn unsafe_timings_are_refused() {
        let mut c = config();
        c.renew_deadline = c.lease_duration;
        assert!(
            c.validate().is_err(),
            "renew deadline must be below the lease duration"
        );
        let mut c = config();
        c.retry_period = c.renew_deadline;
        assert!(
            c.validate().is_err(),
            "retry period must be below the renew deadline"
        );
        let mut c = config();
        c.retry_period = Duration::ZERO;
        assert!(c.validate().is_err());
        let mut c = config();
        c.lease_duration = Duration::from_millis(900);
        c.renew_deadline = Duration::from_millis(500);
        c.retry_period = Duration::from_millis(100);
        assert!(c.validate().is_err(), "sub-second lease");
        let mut c = config();
        c.identity.clear();
        assert!(c.validate().is_err());
    }

    #[test]
    fn lease_seconds_round_up() {
        let mut c = config();
        c.lease_duration = Duration::from_millis(2500);
        assert_eq!(c.lease_duration_seconds(), 3);
    }

    #[test]
    fn leadership_ends_at_the_renew_deadline_after_the_renewal_started() {
        let renewed = Instant::now();
        let deadline = Duration::from_secs(10);
        let until = leading_until(renewed, deadline);
        assert!(holds_at(until, renewed));
        assert!(holds_at(until, renewed + Duration::from_millis(9999)));
        assert!(
            !holds_at(until, renewed + deadline),
            "leadership ends at the deadline exactly"
        );
        assert!(!holds_at(until, renewed + Duration::from_secs(11)));
    }

    #[test]
    fn a_holder_stops_before_any_standby_may_take_over() {
        // The worst case for the standby: it observed the renewal at the very moment the
        // holder sent it. Any later observation only widens the gap.
        let c = config();
        let renewal_sent = Instant::now();
        let until = leading_until(renewal_sent, c.renew_deadline);
        let first_takeover = renewal_sent + c.lease_duration;
        assert!(!lease_expired(renewal_sent, c.lease_duration, until));
        assert!(lease_expired(renewal_sent, c.lease_duration, first_takeover));
        assert!(!holds_at(until, first_takeover));
        assert!(
            first_takeover - until >= Duration::from_secs(5),
            "the margin covers pauses and drift"
        );
    }

    #[test]
    fn standby_expiry_is_measured_from_its_own_observation() {
        let seen = Instant::now();
        let d = Duration::from_secs(15);
        assert!(!lease_expired(seen, d, seen + Duration::from_secs(14)));
        assert!(lease_expired(seen, d, seen + d));
    }

    #[test]
    fn states_allow_writes_as_expected() {
        let now = Instant::now();
        assert!(LeaderState::Standalone.is_leader_at(now));
        assert!(
            LeaderState::Leading {
                until: now + Duration::from_secs(1)
            }
            .is_leader_at(now)
        );
        assert!(!LeaderState::Leading { until: now }.is_leader_at(now));
        assert!(
            !LeaderState::Following {
                holder: Some("b".into())
            }
            .is_leader_at(now)
        );
    }

    #[test]
    fn renewals_alone_do_not_wake_watchers() {
        let now = Instant::now();
        let a = LeaderState::Leading { until: now };
        let b = LeaderState::Leading {
            until: now + Duration::from_secs(2),
        };
        assert!(!a.differs_in_kind(&b));
        assert!(a.differs_in_kind(&LeaderState::Following { holder: None }));
        let f = |h: &str| LeaderState::Following {
            holder: Some(h.into()),
        };
        assert!(f("x").differs_in_kind(&f("y")));
        assert!(!f("x").differs_in_kind(&f("x")));
    }

    #[tokio::test(start_paused = true)]
    async fn is_leader_turns_false_by_the_clock_alone() {
        let until = Instant::now() + Duration::from_secs(10);
        let (tx, rx) = watch::channel(LeaderState::Leading { until });
        let leadership = Leadership::from_receiver(rx);
        assert!(leadership.is_leader());
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(leadership.is_leader());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(
            !leadership.is_leader(),
            "no renewal was published: leadership must end"
        );
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn lost_resolves_at_the_deadline_and_on_demotion() {
        let start = Instant::now();
        let (tx, rx) = watch::channel(LeaderState::Leading {
            until: start + Duration::from_secs(10),
        });
        let mut leadership = Leadership::from_receiver(rx);
        leadership.lost().await;
        assert_eq!(Instant::now() - start, Duration::from_secs(10));

        // A renewal moves the deadline without waking anyone; `lost` must follow it.
        let start = Instant::now();
        tx.send_replace(LeaderState::Leading {
            until: start + Duration::from_secs(10),
        });
        let renew = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            tx.send_if_modified(|s| {
                *s = LeaderState::Leading {
                    until: Instant::now() + Duration::from_secs(10),
                };
                false
            });
        };
        tokio::join!(leadership.lost(), renew);
        assert_eq!(Instant::now() - start, Duration::from_secs(15));

        let mut other = Leadership::from_receiver(tx.subscribe());
        tx.send_replace(LeaderState::Leading {
            until: Instant::now() + Duration::from_secs(60),
        });
        let demote = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            tx.send_replace(LeaderState::Following {
                holder: Some("b".into()),
            });
        };
        let start = Instant::now();
        tokio::join!(other.lost(), demote);
        assert_eq!(Instant::now() - start, Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn acquired_waits_for_leadership_and_reports_a_dead_election() {
        let (tx, rx) = watch::channel(LeaderState::Following { holder: None });
        let mut leadership = Leadership::from_receiver(rx);
        let promote = async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            tx.send_replace(LeaderState::Leading {
                until: Instant::now() + Duration::from_secs(10),
            });
        };
        let (acquired, ()) = tokio::join!(leadership.acquired(), promote);
        assert!(acquired);

        tx.send_replace(LeaderState::Following { holder: None });
        drop(tx);
        assert!(!leadership.acquired().await);
        assert!(Leadership::standalone().acquired().await);
    }

    #[tokio::test(start_paused = true)]
    async fn terms_start_at_each_gain_of_leadership() {
        use futures::StreamExt;

        let (tx, rx) = watch::channel(LeaderState::Following { holder: None });
        let leadership = Leadership::from_receiver(rx);
        async fn next(
            terms: &mut (impl futures::Stream<Item = ()> + Unpin),
        ) -> Result<Option<()>, tokio::time::error::Elapsed> {
            tokio::time::timeout(Duration::from_secs(60), terms.next()).await
        }
        let mut terms = Box::pin(leadership.terms());
        assert!(next(&mut terms).await.is_err(), "following: no term yet");

        tx.send_replace(LeaderState::Leading {
            until: Instant::now() + Duration::from_secs(10),
        });
        assert_eq!(next(&mut terms).await, Ok(Some(())), "the first term");
        // Renewals continue the term; a lapse by the clock ends it, and a later
        // renewal starts a new one.
        tx.send_if_modified(|s| {
            *s = LeaderState::Leading {
                until: Instant::now() + Duration::from_secs(100),
            };
            false
        });
        assert!(next(&mut terms).await.is_err(), "still the same term");
        tokio::time::advance(Duration::from_secs(100)).await;
        assert!(next(&mut terms).await.is_err(), "lapsed: no term");
        tx.send_replace(LeaderState::Leading {
            until: Instant::now() + Duration::from_secs(10),
        });
        assert_eq!(
            next(&mut terms).await,
            Ok(Some(())),
            "a second term after a lapse"
        );

        tx.send_replace(LeaderState::Following { holder: None });
        drop(tx);
        assert_eq!(next(&mut terms).await, Ok(None), "the election is gone");

        let mut standalone = Box::pin(Leadership::standalone().terms());
        assert_eq!(next(&mut standalone).await, Ok(Some(())), "one term, at once");
        assert!(next(&mut standalone).await.is_err(), "and no other");
    }
}
