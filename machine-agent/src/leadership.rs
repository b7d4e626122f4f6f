//! Application leaders: of the units of an application on the pool's machines,
//! exactly one leads, through the application's leader Lease
//! ([`olm_api::model::leader_lease`]).
//!
//! Each agent, for every application that has a ready unit on its machine (a
//! unit installed and not being removed: a *candidate*), looks at the Lease
//! every [`tick`] and takes one [`Step`] ([`step`], pure):
//!
//! - no Lease: create it, holding it;
//! - held by this machine: renew it;
//! - held by another machine and not renewed for its duration (that machine is
//!   lost, or its unit went): take it over;
//! - held by another machine and alive: follow.
//!
//! Writes carry the `resourceVersion` read, so when two agents race only one
//! wins. A machine leads from a successful write until the Lease's duration
//! after the read that preceded it, measured on its own monotonic clock: if it
//! cannot renew (the API server is unreachable), it stops leading before any
//! other machine can take over. `is-leader` answers true only while at least
//! half the duration is left ([`Leadership::confirms`]), so a true answer holds
//! for that long.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api,
    api::{PostParams, ResourceExt},
};
use olm_api::{
    model::{LEADER_OF_LABEL, leader_lease},
    substrate::POOL_LABEL,
};
use olm_runtime::{ErrorClass, Shutdown, classify};
use tokio::sync::watch;

/// The applications this machine leads, each until when (its own clock).
pub type Leading = BTreeMap<String, Instant>;

/// What the units of this machine and the leader loop share.
#[derive(Clone)]
pub struct Leadership {
    /// Unit → application, for the units ready to lead (installed, not being removed).
    pub candidates: watch::Sender<BTreeMap<String, String>>,
    /// The applications this machine leads, and until when.
    pub leading: watch::Sender<Leading>,
    /// The applications whose leader this machine knows: its last look at
    /// their Lease succeeded (it leads, or another machine does).
    pub decided: watch::Sender<BTreeSet<String>>,
    /// How long a Lease lasts without renewal.
    pub duration: Duration,
}

impl Leadership {
    /// Nobody leads yet; Leases last `duration`.
    pub fn new(duration: Duration) -> Self {
        Leadership {
            candidates: watch::Sender::new(BTreeMap::new()),
            leading: watch::Sender::new(Leading::new()),
            decided: watch::Sender::new(BTreeSet::new()),
            duration,
        }
    }

    /// Whether this machine leads `application` now.
    pub fn leads(&self, application: &str) -> bool {
        self.leading
            .borrow()
            .get(application)
            .is_some_and(|until| *until > Instant::now())
    }

    /// Whether this machine knows who leads `application` (itself or another).
    pub fn decided(&self, application: &str) -> bool {
        self.decided.borrow().contains(application)
    }

    /// Whether this machine leads `application` for at least half the Lease's
    /// duration more: what `is-leader` answers.
    pub fn confirms(&self, application: &str) -> bool {
        self.leading
            .borrow()
            .get(application)
            .is_some_and(|until| until.saturating_duration_since(Instant::now()) >= self.duration / 2)
    }

    /// Says whether unit `unit` is a candidate to lead `application` (`None`: it is not).
    pub fn set_candidate(&self, unit: &str, application: Option<&str>) {
        self.candidates.send_if_modified(|all| match application {
            Some(application) if all.get(unit).map(String::as_str) != Some(application) => {
                all.insert(unit.to_owned(), application.to_owned());
                true
            }
            Some(_) => false,
            None => all.remove(unit).is_some(),
        });
    }
}

/// What an agent does with an application's leader Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// There is none: create it, holding it.
    Create,
    /// This machine holds it: renew it.
    Renew,
    /// Another machine held it but has not renewed it in time: take it.
    TakeOver,
    /// Another machine holds it.
    Follow(String),
}

/// The step machine `me` takes, given the Lease as read at wall-clock time `now`.
pub fn step(lease: Option<&Lease>, me: &str, now: Timestamp) -> Step {
    let Some(lease) = lease else {
        return Step::Create;
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    if holder == me {
        return Step::Renew;
    }
    let renewed = spec.renew_time.or(spec.acquire_time).map(|t| t.0);
    let duration = SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or_default().into());
    match renewed {
        Some(renewed) if !holder.is_empty() && renewed + duration >= now => Step::Follow(holder),
        _ => Step::TakeOver,
    }
}

/// The Lease of `application` as machine `me` of `pool` writes it at `now`:
/// `previous` renewed or taken over, or a new one.
pub fn lease(
    application: &str,
    pool: &str,
    me: &str,
    duration: Duration,
    now: Timestamp,
    previous: Option<&Lease>,
) -> Lease {
    let previous_spec = previous.and_then(|l| l.spec.clone()).unwrap_or_default();
    let renewing = previous_spec.holder_identity.as_deref() == Some(me);
    let transitions = previous_spec.lease_transitions.unwrap_or_default();
    let labels = BTreeMap::from([
        (LEADER_OF_LABEL.to_owned(), application.to_owned()),
        (POOL_LABEL.to_owned(), pool.to_owned()),
    ]);
    Lease {
        metadata: ObjectMeta {
            name: Some(leader_lease(application)),
            labels: Some(labels),
            resource_version: previous.and_then(|l| l.resource_version()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(me.to_owned()),
            lease_duration_seconds: Some(i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)),
            acquire_time: if renewing {
                previous_spec.acquire_time
            } else {
                Some(MicroTime(now))
            },
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(if renewing || previous.is_none() {
                transitions
            } else {
                transitions + 1
            }),
            ..LeaseSpec::default()
        }),
    }
}

/// `lease` given up by machine `me`, when it holds it: no holder, so that
/// another candidate takes it at its next look instead of waiting for it
/// to expire. Pure.
pub fn released(lease: &Lease, me: &str) -> Option<Lease> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(me) {
        return None;
    }
    let mut released = lease.clone();
    released.metadata.managed_fields = None;
    if let Some(spec) = released.spec.as_mut() {
        spec.holder_identity = None;
        spec.renew_time = None;
        spec.acquire_time = None;
    }
    Some(released)
}

/// How often an agent looks at each Lease: an eighth of its duration, so that a
/// lost leader is replaced soon after its Lease expires (at least every 10 s).
pub fn tick(duration: Duration) -> Duration {
    (duration / 8).clamp(Duration::from_millis(500), Duration::from_secs(10))
}

/// Runs the leader elections of machine `me` of `pool` until shutdown.
pub async fn run(leases: Api<Lease>, leadership: Leadership, me: String, pool: String, shutdown: Shutdown) {
    let mut candidates = leadership.candidates.subscribe();
    loop {
        let applications: BTreeSet<String> = candidates.borrow_and_update().values().cloned().collect();
        // An application this machine led and no longer runs a unit of
        // (scaled away, removed): its Lease is given up at once.
        let dropped: Vec<String> = leadership
            .leading
            .borrow()
            .keys()
            .filter(|a| !applications.contains(*a))
            .cloned()
            .collect();
        for application in &dropped {
            release(&leases, application, &me).await;
        }
        let mut leading = Leading::new();
        let mut decided = BTreeSet::new();
        for application in &applications {
            let started = Instant::now();
            match elect(&leases, application, &pool, &me, leadership.duration).await {
                Ok(true) => {
                    leading.insert(application.clone(), started + leadership.duration);
                    decided.insert(application.clone());
                }
                Ok(false) => {
                    decided.insert(application.clone());
                }
                Err(error) => {
                    if leadership.decided(application) {
                        decided.insert(application.clone());
                    }
                    tracing::warn!(application, %error, class = %classify(&error), "cannot renew or read the leader Lease");
                    // Keep what was held: it lapses by itself.
                    if let Some(until) = leadership.leading.borrow().get(application) {
                        leading.insert(application.clone(), *until);
                    }
                }
            }
        }
        let now = Instant::now();
        leading.retain(|_, until| *until > now);
        leadership.leading.send_if_modified(|held| {
            let changed = held.keys().ne(leading.keys());
            for application in leading.keys().filter(|a| !held.contains_key(*a)) {
                tracing::info!(application, machine = me, "this machine leads the application");
            }
            *held = leading;
            changed
        });
        leadership.decided.send_if_modified(|known| {
            let changed = *known != decided;
            *known = decided;
            changed
        });
        tokio::select! {
            () = tokio::time::sleep(tick(leadership.duration)) => {}
            changed = candidates.changed() => if changed.is_err() { return },
            () = shutdown.signaled() => return,
        }
    }
}

/// Gives up `application`'s Lease when machine `me` holds it. A failure is
/// only logged: the Lease then lapses by itself.
async fn release(api: &Api<Lease>, application: &str, me: &str) {
    let name = leader_lease(application);
    let released = match api.get_opt(&name).await {
        Ok(lease) => lease.as_ref().and_then(|l| released(l, me)),
        Err(error) => {
            tracing::warn!(application, %error, "cannot read the leader Lease to give it up; it lapses by itself");
            return;
        }
    };
    let Some(released) = released else {
        return;
    };
    match api.replace(&name, &PostParams::default(), &released).await {
        Ok(_) => tracing::info!(
            application,
            machine = me,
            "this machine gave up leading the application"
        ),
        Err(error) => {
            tracing::warn!(application, %error, "cannot give up the leader Lease; it lapses by itself");
        }
    }
}

/// One look at `application`'s Lease: whether this machine holds it after.
async fn elect(
    api: &Api<Lease>,
    application: &str,
    pool: &str,
    me: &str,
    duration: Duration,
) -> Result<bool, kube::Error> {
    let name = leader_lease(application);
    let current = api.get_opt(&name).await?;
    let now = Timestamp::now();
    let written = match step(current.as_ref(), me, now) {
        Step::Follow(_) => return Ok(false),
        Step::Create => {
            let lease = lease(application, pool, me, duration, now, None);
            api.create(&PostParams::default(), &lease).await
        }
        Step::Renew | Step::TakeOver => {
            let lease = lease(application, pool, me, duration, now, current.as_ref());
            api.replace(&name, &PostParams::default(), &lease).await
        }
    };
    match written {
        Ok(_) => Ok(true),
        // Another machine wrote first: it leads, this one follows.
        Err(error) if classify(&error) == ErrorClass::Conflict => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    fn held(holder: &str, renewed: i64) -> Lease {
        let mut lease = lease("db", "edge", holder, Duration::from_secs(10), at(renewed), None);
        lease.metadata.resource_version = Some("7".into());
        lease
    }

    #[test]
    fn a_lease_is_given_up_only_by_its_holder_and_then_taken_over() {
        let lease = held("edge-a", 10);
        let given_up = released(&lease, "edge-a").expect("edge-a holds it");
        let spec = given_up.spec.as_ref().unwrap();
        assert_eq!(
            (spec.holder_identity.as_ref(), spec.renew_time.as_ref()),
            (None, None)
        );
        assert_eq!(
            given_up.metadata.resource_version,
            lease.metadata.resource_version
        );
        assert_eq!(released(&lease, "edge-b"), None, "only the holder gives it up");
        // Another candidate takes it at its next look, long before it would expire.
        assert_eq!(step(Some(&given_up), "edge-b", at(11)), Step::TakeOver);
    }

    #[test]
    fn each_lease_state_gives_its_step() {
        assert_eq!(step(None, "edge-a", at(0)), Step::Create);
        assert_eq!(step(Some(&held("edge-a", 0)), "edge-a", at(100)), Step::Renew);
        assert_eq!(
            step(Some(&held("edge-b", 0)), "edge-a", at(10)),
            Step::Follow("edge-b".into())
        );
        assert_eq!(step(Some(&held("edge-b", 0)), "edge-a", at(11)), Step::TakeOver);
        let mut released = held("edge-b", 0);
        released.spec.as_mut().unwrap().holder_identity = None;
        assert_eq!(step(Some(&released), "edge-a", at(1)), Step::TakeOver);
        let mut empty = held("edge-b", 0);
        empty.spec = None;
        assert_eq!(step(Some(&empty), "edge-a", at(1)), Step::TakeOver);
    }

    #[test]
    fn a_lease_is_renewed_in_place_and_a_takeover_counts_a_transition() {
        let duration = Duration::from_secs(10);
        let first = lease("db", "edge", "edge-a", duration, at(0), None);
        assert_eq!(first.metadata.name.as_deref(), Some("db.leader"));
        assert_eq!(first.labels()[LEADER_OF_LABEL], "db");
        assert_eq!(first.labels()[POOL_LABEL], "edge");
        let spec = first.spec.clone().unwrap();
        assert_eq!(spec.lease_transitions, Some(0));
        assert_eq!(spec.lease_duration_seconds, Some(10));

        let previous = held("edge-a", 0);
        let renewed = lease("db", "edge", "edge-a", duration, at(5), Some(&previous));
        let spec = renewed.spec.unwrap();
        assert_eq!(renewed.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(spec.acquire_time, previous.spec.as_ref().unwrap().acquire_time);
        assert_eq!(spec.renew_time, Some(MicroTime(at(5))));
        assert_eq!(spec.lease_transitions, Some(0));

        let taken = lease("db", "edge", "edge-b", duration, at(20), Some(&previous));
        let spec = taken.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("edge-b"));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(20))));
        assert_eq!(spec.lease_transitions, Some(1));
    }

    #[test]
    fn candidates_and_leading_are_shared() {
        let leadership = Leadership::new(Duration::from_secs(10));
        leadership.set_candidate("db.v1", Some("db"));
        leadership.set_candidate("web.v1", Some("web"));
        leadership.set_candidate("web.v1", None);
        assert_eq!(
            *leadership.candidates.borrow(),
            BTreeMap::from([("db.v1".to_owned(), "db".to_owned())])
        );
        assert!(!leadership.leads("db"));
        let now = Instant::now();
        leadership.leading.send_replace(Leading::from([
            ("db".to_owned(), now + Duration::from_secs(9)),
            ("web".to_owned(), now + Duration::from_secs(2)),
        ]));
        assert!(leadership.leads("db") && leadership.confirms("db"));
        // Leading, but with too little left to promise it.
        assert!(leadership.leads("web") && !leadership.confirms("web"));
    }

    #[test]
    fn the_tick_is_an_eighth_of_the_lease_within_bounds() {
        assert_eq!(tick(Duration::from_secs(8)), Duration::from_secs(1));
        assert_eq!(tick(Duration::from_secs(2)), Duration::from_millis(500));
        assert_eq!(tick(Duration::from_secs(600)), Duration::from_secs(10));
    }
}
