//! The status of a MachinePool, and which machines are lost, computed from
//! what the reconcile read (pure).
//!
//! A machine is lost (Juju's agent-lost) when its heartbeat Lease expired,
//! `renewTime + leaseDurationSeconds < now`, or when it has no Lease at all
//! one lease duration after it registered. Lost machines count neither as
//! ready nor as registered-and-healthy; they are named in `status.lost`.
//!
//! Conditions:
//! - `Ready`: True (`AllMachinesReady`) when every desired machine is
//!   registered, heartbeats and reports Ready; False (`MachinesNotReady`,
//!   `NoMatchingNodes`) otherwise.
//! - `Progressing`: True (`AgentRollout`) while the agent DaemonSet rolls out,
//!   True (`MachinesNotReady`) while desired machines have not registered yet,
//!   False (`Stable`) otherwise.
//! - `Degraded`: True (`NoMatchingNodes`) when the node selector matches no
//!   node and no machine joined from outside; True (`MachinesLost`) while
//!   machines are lost; True (`JoinTokenUsed`) while machines that registered
//!   with a used join token stand; False (`AsExpected`) otherwise.
//! - `Scaled`, only while `spec.units` names an application: True
//!   (`ScaleMet`) when each scaled application has a ready machine for each
//!   unit, False (`NotEnoughMachines`) otherwise ([`super::placement`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use super::placement;
use k8s_openapi::{
    api::{apps::v1::DaemonSet, coordination::v1::Lease},
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::{SignedDuration, Timestamp},
};
use kube::ResourceExt;
use olm_api::substrate::{
    AgentVersionCount, ApplicationPlacement, Machine, MachinePool, MachinePoolConditionType,
    MachinePoolReason, MachinePoolStatus,
};
use olm_runtime::conditions::{ConditionReason, ConditionType, Status, find_condition, set_condition};

/// The Lease duration assumed when a Lease does not say (the agent's default).
pub const DEFAULT_LEASE_DURATION_SECONDS: i64 = 40;

/// The reason olm-operator gives a lost machine's `Ready` condition.
pub const AGENT_LOST: &str = "AgentLost";

/// A MachinePool condition type, for olm-runtime's condition helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolCondition(pub MachinePoolConditionType);

impl ConditionType for PoolCondition {
    fn as_str(&self) -> &'static str {
        self.0.as_str()
    }
}

/// A MachinePool condition reason, for olm-runtime's condition helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolReason(pub MachinePoolReason);

impl ConditionReason for PoolReason {
    fn as_str(&self) -> &'static str {
        self.0.as_str()
    }
}

/// The `Ready` condition type of a Machine.
#[derive(Clone, Copy, Debug)]
pub struct MachineReady;

impl ConditionType for MachineReady {
    fn as_str(&self) -> &'static str {
        "Ready"
    }
}

/// The reason of a lost machine's `Ready` condition.
#[derive(Clone, Copy, Debug)]
pub struct AgentLost;

impl ConditionReason for AgentLost {
    fn as_str(&self) -> &'static str {
        AGENT_LOST
    }
}

/// Everything the status is computed from.
#[derive(Clone, Debug, Default)]
pub struct Observed<'a> {
    /// The nodes the pool's selector matches (names); `None` without a selector.
    pub matching_nodes: Option<BTreeSet<String>>,
    /// The pool's machines, without the refused ones.
    pub machines: Vec<&'a Machine>,
    /// Machines refused for registering with a used join token, with why.
    pub refused: BTreeMap<String, String>,
    /// The Leases of the pool's namespace, by name.
    pub leases: BTreeMap<String, &'a Lease>,
    /// The agent DaemonSet, when the pool has one.
    pub daemonset: Option<&'a DaemonSet>,
    /// The API server endpoints to publish.
    pub endpoints: Vec<String>,
    /// The zone of each machine whose node (or Machine) carries one, by machine.
    pub zones: BTreeMap<String, String>,
}

/// When a machine's heartbeat expires (or expired): `renewTime + leaseDurationSeconds`,
/// or, without a Lease, one default lease duration after it registered.
pub fn heartbeat_deadline(machine: &Machine, lease: Option<&Lease>) -> Option<Timestamp> {
    match lease.and_then(|lease| lease.spec.as_ref()) {
        Some(spec) => {
            let renewed = spec
                .renew_time
                .as_ref()
                .map(|t| t.0)
                .or_else(|| spec.acquire_time.as_ref().map(|t| t.0))?;
            let duration = spec
                .lease_duration_seconds
                .map(i64::from)
                .unwrap_or(DEFAULT_LEASE_DURATION_SECONDS);
            renewed.checked_add(SignedDuration::from_secs(duration)).ok()
        }
        None => machine.metadata.creation_timestamp.as_ref().and_then(|t| {
            t.0.checked_add(SignedDuration::from_secs(DEFAULT_LEASE_DURATION_SECONDS))
                .ok()
        }),
    }
}

/// Whether `machine` is lost at `now`.
pub fn is_lost(machine: &Machine, lease: Option<&Lease>, now: Timestamp) -> bool {
    heartbeat_deadline(machine, lease).is_some_and(|deadline| deadline < now)
}

/// Whether the Machine's own `Ready` condition is True.
pub fn reports_ready(machine: &Machine) -> bool {
    machine
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| find_condition(c, MachineReady))
        .is_some_and(|c| c.status == "True")
}

/// Whether the Machine's `Ready` condition says already that it is lost.
pub fn marked_lost(machine: &Machine) -> bool {
    machine
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| find_condition(c, MachineReady))
        .is_some_and(|c| c.status == "Unknown" && c.reason == AGENT_LOST)
}

/// The `Ready` condition olm-operator writes on a lost machine.
pub fn lost_condition(machine: &Machine, deadline: Option<Timestamp>, now: &Time) -> Condition {
    let mut conditions = machine
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let since = deadline.map_or_else(|| "registration".to_owned(), |d| d.to_string());
    set_condition(
        &mut conditions,
        MachineReady,
        Status::Unknown,
        AgentLost,
        &format!("the agent stopped heartbeating: its Lease expired at {since}"),
        machine.metadata.generation,
        now,
    );
    conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("just set")
}

/// The machines of `observed` that are lost at `now`, by name.
pub fn lost_machines(observed: &Observed<'_>, now: Timestamp) -> Vec<String> {
    observed
        .machines
        .iter()
        .filter(|m| is_lost(m, observed.leases.get(&m.name_any()).copied(), now))
        .map(|m| m.name_any())
        .collect()
}

/// What the pool's conditions and counts are made of.
#[derive(Clone, Debug, Default, PartialEq)]
struct Tally {
    /// The lost machines, by name.
    lost: Vec<String>,
    /// Machines wanted: one per matching node and one per machine joined
    /// from outside.
    desired: usize,
    /// Machines registered.
    registered: usize,
    /// Machines neither lost nor reporting anything but Ready.
    ready: usize,
    /// Machines by agent version.
    versions: BTreeMap<String, i32>,
    /// The selector matches no node and no machine joined from outside.
    no_nodes: bool,
    /// The agent DaemonSet is rolling out.
    rolling: bool,
    /// The pool's node selector, as `key=value,...`.
    selector: String,
}

/// Counts the machines of `observed` at `now`.
fn tally(pool: &MachinePool, observed: &Observed<'_>, now: Timestamp) -> Tally {
    let lost = lost_machines(observed, now);
    let external = observed
        .machines
        .iter()
        .filter(|m| m.spec.node_name.is_none())
        .count();
    let ready = observed
        .machines
        .iter()
        .filter(|m| !lost.contains(&m.name_any()) && reports_ready(m))
        .count();
    let mut versions: BTreeMap<String, i32> = BTreeMap::new();
    for machine in &observed.machines {
        if let Some(version) = machine.status.as_ref().and_then(|s| s.agent_version.clone()) {
            *versions.entry(version).or_default() += 1;
        }
    }
    let selector = pool
        .spec
        .node_selector
        .as_ref()
        .map(|s| {
            s.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    Tally {
        lost,
        desired: observed.matching_nodes.as_ref().map_or(0, BTreeSet::len) + external,
        registered: observed.machines.len(),
        ready,
        versions,
        no_nodes: observed.matching_nodes.as_ref().is_some_and(BTreeSet::is_empty) && external == 0,
        rolling: observed.daemonset.is_some_and(rolling_out),
        selector,
    }
}

/// One condition's status, reason and message.
type Verdict = (Status, MachinePoolReason, String);

/// `Degraded`: no matching node, then lost machines, then refused joins.
fn degraded(tally: &Tally, refused: &BTreeMap<String, String>) -> Verdict {
    use MachinePoolReason as R;
    if tally.no_nodes {
        let message = format!(
            "the node selector {} matches no node, and no machine joined from outside",
            tally.selector
        );
        (Status::True, R::NoMatchingNodes, message)
    } else if !tally.lost.is_empty() {
        let message = format!("lost machines (Lease expired): {}", tally.lost.join(", "));
        (Status::True, R::MachinesLost, message)
    } else if !refused.is_empty() {
        let refusals: Vec<&str> = refused.values().map(String::as_str).collect();
        (Status::True, R::JoinTokenUsed, refusals.join("; "))
    } else {
        (Status::False, R::AsExpected, String::new())
    }
}

/// `Progressing`: the agent rolling out, then machines yet to register.
fn progressing(tally: &Tally, agent_version: &str) -> Verdict {
    use MachinePoolReason as R;
    if tally.rolling {
        let message = format!("rolling out agent version {agent_version}");
        (Status::True, R::AgentRollout, message)
    } else if tally.registered < tally.desired {
        let message = format!("{} of {} machines registered", tally.registered, tally.desired);
        (Status::True, R::MachinesNotReady, message)
    } else {
        (Status::False, R::Stable, String::new())
    }
}

/// `Ready`: every desired machine ready and none lost.
fn ready(tally: &Tally) -> Verdict {
    use MachinePoolReason as R;
    let (ready, desired) = (tally.ready, tally.desired);
    if tally.no_nodes {
        let message = format!("the node selector {} matches no node", tally.selector);
        (Status::False, R::NoMatchingNodes, message)
    } else if desired > 0 && ready >= desired && tally.lost.is_empty() {
        let message = format!("{ready} of {desired} machines ready");
        (Status::True, R::AllMachinesReady, message)
    } else {
        let message = format!("{ready} of {desired} machines ready, {} lost", tally.lost.len());
        (Status::False, R::MachinesNotReady, message)
    }
}

/// The status of `pool` given `observed`, at `now`.
pub fn compute(pool: &MachinePool, observed: &Observed<'_>, now: &Time) -> MachinePoolStatus {
    use MachinePoolConditionType as T;

    let generation = pool.metadata.generation;
    let tally = tally(pool, observed, now.0);
    let mut conditions = pool
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let verdicts = [
        (T::Degraded, degraded(&tally, &observed.refused)),
        (T::Progressing, progressing(&tally, &pool.spec.agent.version)),
        (T::Ready, ready(&tally)),
    ];
    let (applications, scaled) = scale(pool, observed, &tally);
    let verdicts = verdicts.into_iter().chain(scaled.map(|v| (T::Scaled, v)));
    if pool.spec.units.as_ref().is_none_or(BTreeMap::is_empty) {
        conditions.retain(|c| c.type_ != T::Scaled.as_str());
    }
    for (type_, (status, reason, message)) in verdicts {
        set_condition(
            &mut conditions,
            PoolCondition(type_),
            status,
            PoolReason(reason),
            &message,
            generation,
            now,
        );
    }

    let count = |n: usize| Some(i32::try_from(n).unwrap_or(i32::MAX));
    let Tally {
        lost,
        desired,
        registered,
        ready,
        versions,
        ..
    } = tally;
    MachinePoolStatus {
        observed_generation: generation,
        desired_machines: count(desired),
        machines: count(registered),
        ready_machines: count(ready),
        lost_machines: count(lost.len()),
        lost: (!lost.is_empty()).then_some(lost),
        agent_versions: (!versions.is_empty()).then(|| {
            versions
                .into_iter()
                .map(|(version, machines)| AgentVersionCount { version, machines })
                .collect()
        }),
        api_server_endpoints: (!observed.endpoints.is_empty()).then(|| observed.endpoints.clone()),
        applications: (!applications.is_empty()).then_some(applications),
        conditions: Some(conditions),
    }
}

/// The placement of the applications `spec.units` scales, and the `Scaled`
/// verdict ([`placement::applications`]).
fn scale(
    pool: &MachinePool,
    observed: &Observed<'_>,
    tally: &Tally,
) -> (Vec<ApplicationPlacement>, Option<Verdict>) {
    let Some(units) = pool.spec.units.as_ref() else {
        return (Vec::new(), None);
    };
    let machines: Vec<(&Machine, bool, Option<String>)> = observed
        .machines
        .iter()
        .map(|m| {
            let name = m.name_any();
            let ready = !tally.lost.contains(&name) && reports_ready(m);
            (*m, ready, observed.zones.get(&name).cloned())
        })
        .collect();
    placement::applications(units, &machines)
}

/// Whether the DaemonSet has not finished rolling out its current spec.
fn rolling_out(daemonset: &DaemonSet) -> bool {
    let Some(status) = daemonset.status.as_ref() else {
        return true;
    };
    status.observed_generation < daemonset.metadata.generation
        || status.updated_number_scheduled.unwrap_or(0) < status.desired_number_scheduled
        || status.number_unavailable.unwrap_or(0) > 0
}

/// When the next of the pool's live machines would turn lost, so the pool is
/// looked at again then.
pub fn next_expiry(observed: &Observed<'_>, now: Timestamp) -> Option<Timestamp> {
    observed
        .machines
        .iter()
        .filter_map(|m| heartbeat_deadline(m, observed.leases.get(&m.name_any()).copied()))
        .filter(|deadline| *deadline >= now)
        .min()
}

/// The machines of `observed` to mark lost now (lost at `now`, not marked
/// yet), each with the `Ready` condition it gets.
pub fn newly_lost<'a>(observed: &Observed<'a>, now: &Time) -> Vec<(&'a Machine, Condition)> {
    observed
        .machines
        .iter()
        .filter_map(|machine| {
            let lease = observed.leases.get(&machine.name_any()).copied();
            (is_lost(machine, lease, now.0) && !marked_lost(machine)).then(|| {
                (
                    *machine,
                    lost_condition(machine, heartbeat_deadline(machine, lease), now),
                )
            })
        })
        .collect()
}

/// How long until the pool is looked at again: a second after the next live
/// machine would turn lost, and at the latest after `resync`.
pub fn requeue_after(observed: &Observed<'_>, now: Timestamp, resync: Duration) -> Duration {
    next_expiry(observed, now)
        .map(|deadline| until(now, deadline) + Duration::from_secs(1))
        .map_or(resync, |d| d.min(resync))
}

fn until(now: Timestamp, then: Timestamp) -> Duration {
    Duration::try_from(then.duration_since(now)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::{
        api::coordination::v1::LeaseSpec,
        apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    };
    use olm_api::substrate::{AgentSpec, MachinePoolSpec};

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("a time")
    }

    fn pool(selector: bool) -> MachinePool {
        let mut pool = MachinePool::new(
            "edge",
            MachinePoolSpec {
                node_selector: selector.then(|| BTreeMap::from([("edge".to_owned(), "true".to_owned())])),
                tolerations: None,
                agent: AgentSpec {
                    image: "machine-agent".to_owned(),
                    version: "0.1.0".to_owned(),
                },
                external: None,
                upgrade: None,
                units: None,
            },
        );
        pool.metadata.namespace = Some("ops".to_owned());
        pool.metadata.generation = Some(2);
        pool
    }

    fn machine(node: &str, ready: bool) -> Machine {
        // Built from JSON so that fields the agent adds to Machine do not break it.
        serde_json::from_value(serde_json::json!({
            "apiVersion": "substrate.olm-rs.dev/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": format!("edge-{node}"), "namespace": "ops", "creationTimestamp": Time(at(0))},
            "spec": {"pool": "edge", "nodeName": node},
            "status": {
                "agentVersion": "0.1.0",
                "conditions": [{
                    "type": "Ready",
                    "status": if ready { "True" } else { "False" },
                    "reason": "Registered",
                    "message": "",
                    "lastTransitionTime": Time(at(0)),
                }],
            },
        }))
        .expect("a Machine")
    }

    #[test]
    fn a_scaled_application_is_placed_in_the_status_and_its_shortfall_named() {
        let (a, b, c) = (machine("a", true), machine("b", true), machine("c", false));
        let observed = Observed {
            matching_nodes: Some(["a".to_owned(), "b".to_owned(), "c".to_owned()].into()),
            machines: vec![&a, &b, &c],
            zones: BTreeMap::from([
                ("edge-a".to_owned(), "z1".to_owned()),
                ("edge-b".to_owned(), "z2".to_owned()),
            ]),
            ..Observed::default()
        };
        let scaled = |units: Option<u32>| {
            let mut pool = pool(true);
            pool.spec.units = units.map(|n| BTreeMap::from([("db".to_owned(), n)]));
            pool
        };
        let scaled_condition = |status: &MachinePoolStatus| {
            find_condition(
                status.conditions.as_deref().unwrap_or_default(),
                PoolCondition(MachinePoolConditionType::Scaled),
            )
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        };
        // Not scaled: no placement, no condition.
        let status = compute(&scaled(None), &observed, &Time(at(10)));
        assert_eq!(
            (status.applications.as_ref(), scaled_condition(&status)),
            (None, None)
        );
        // Two units on the two ready machines.
        let status = compute(&scaled(Some(2)), &observed, &Time(at(10)));
        let db = &status.applications.as_ref().expect("applications")[0];
        assert_eq!((db.desired_units, db.units), (2, 0));
        assert_eq!(db.machines, ["edge-a", "edge-b"]);
        let (state, reason, _) = scaled_condition(&status).expect("Scaled");
        assert_eq!((state.as_str(), reason.as_str()), ("True", "ScaleMet"));
        // Three: one short, named.
        let mut three = scaled(Some(3));
        three.status = Some(status);
        let status = compute(&three, &observed, &Time(at(20)));
        let (state, reason, message) = scaled_condition(&status).expect("Scaled");
        assert_eq!((state.as_str(), reason.as_str()), ("False", "NotEnoughMachines"));
        assert_eq!(message, "db asks for 3 units and the pool has 2 ready machines");
        // No longer scaled: the condition goes.
        let mut unscaled = scaled(None);
        unscaled.status = Some(status);
        assert_eq!(
            scaled_condition(&compute(&unscaled, &observed, &Time(at(30)))),
            None
        );
    }

    fn lease(name: &str, renewed: i64) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(name.to_owned()),
                lease_duration_seconds: Some(40),
                renew_time: Some(MicroTime(at(renewed))),
                ..LeaseSpec::default()
            }),
        }
    }

    fn condition(status: &MachinePoolStatus, type_: MachinePoolConditionType) -> &Condition {
        find_condition(
            status.conditions.as_deref().unwrap_or_default(),
            PoolCondition(type_),
        )
        .expect("set")
    }

    #[test]
    fn every_machine_heartbeating_and_ready_makes_the_pool_ready() {
        let (a, b) = (machine("a", true), machine("b", true));
        let (la, lb) = (lease("edge-a", 100), lease("edge-b", 100));
        let observed = Observed {
            matching_nodes: Some(["a".to_owned(), "b".to_owned()].into()),
            machines: vec![&a, &b],
            refused: BTreeMap::new(),
            leases: BTreeMap::from([("edge-a".to_owned(), &la), ("edge-b".to_owned(), &lb)]),
            daemonset: None,
            endpoints: vec!["https://127.0.0.1:6443".to_owned()],
            zones: BTreeMap::new(),
        };
        let status = compute(&pool(true), &observed, &Time(at(110)));
        assert_eq!(status.desired_machines, Some(2));
        assert_eq!(status.machines, Some(2));
        assert_eq!(status.ready_machines, Some(2));
        assert_eq!(status.lost_machines, Some(0));
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(
            status.agent_versions,
            Some(vec![AgentVersionCount {
                version: "0.1.0".to_owned(),
                machines: 2
            }])
        );
        assert_eq!(condition(&status, MachinePoolConditionType::Ready).status, "True");
        assert_eq!(
            condition(&status, MachinePoolConditionType::Degraded).status,
            "False"
        );
        assert_eq!(
            condition(&status, MachinePoolConditionType::Progressing).status,
            "False"
        );
        assert_eq!(status.api_server_endpoints.as_ref().map(Vec::len), Some(1));
    }

    #[test]
    fn an_expired_lease_makes_the_machine_lost_and_the_pool_degraded() {
        let (a, b) = (machine("a", true), machine("b", true));
        let (la, lb) = (lease("edge-a", 100), lease("edge-b", 50));
        let observed = Observed {
            matching_nodes: Some(["a".to_owned(), "b".to_owned()].into()),
            machines: vec![&a, &b],
            leases: BTreeMap::from([("edge-a".to_owned(), &la), ("edge-b".to_owned(), &lb)]),
            ..Observed::default()
        };
        // b renewed at 50, lasts 40 s: expired at 90 < 110.
        let status = compute(&pool(true), &observed, &Time(at(110)));
        assert_eq!(status.lost, Some(vec!["edge-b".to_owned()]));
        assert_eq!(status.lost_machines, Some(1));
        assert_eq!(status.ready_machines, Some(1));
        let degraded = condition(&status, MachinePoolConditionType::Degraded);
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", "MachinesLost")
        );
        assert!(degraded.message.contains("edge-b"), "{}", degraded.message);
        assert_eq!(
            condition(&status, MachinePoolConditionType::Ready).status,
            "False"
        );
        assert_eq!(next_expiry(&observed, at(110)), Some(at(140)));
    }

    #[test]
    fn a_selector_matching_no_node_is_named() {
        let observed = Observed {
            matching_nodes: Some(BTreeSet::new()),
            ..Observed::default()
        };
        let status = compute(&pool(true), &observed, &Time(at(0)));
        let degraded = condition(&status, MachinePoolConditionType::Degraded);
        assert_eq!(degraded.reason, "NoMatchingNodes");
        assert!(degraded.message.contains("edge=true"), "{}", degraded.message);
        assert_eq!(
            condition(&status, MachinePoolConditionType::Ready).reason,
            "NoMatchingNodes"
        );
    }

    #[test]
    fn an_unchanged_pool_computes_the_status_it_has() {
        let a = machine("a", true);
        let la = lease("edge-a", 100);
        let observed = Observed {
            matching_nodes: Some(["a".to_owned()].into()),
            machines: vec![&a],
            leases: BTreeMap::from([("edge-a".to_owned(), &la)]),
            ..Observed::default()
        };
        let mut pool = pool(true);
        pool.status = Some(compute(&pool, &observed, &Time(at(110))));
        assert_eq!(Some(compute(&pool, &observed, &Time(at(120)))), pool.status);
    }

    #[test]
    fn a_machine_refused_its_join_is_named_in_degraded_and_counted_nowhere_else() {
        let mut a = machine("a", true);
        (a.spec.node_name, a.spec.external_id) = (None, Some("a".to_owned()));
        let la = lease("edge-a", 100);
        let observed = Observed {
            machines: vec![&a],
            refused: BTreeMap::from([(
                "edge-x".to_owned(),
                "Machine edge-x registered with a join token that was used or replaced".to_owned(),
            )]),
            leases: BTreeMap::from([("edge-a".to_owned(), &la)]),
            ..Observed::default()
        };
        let status = compute(&pool(false), &observed, &Time(at(110)));
        assert_eq!((status.machines, status.ready_machines), (Some(1), Some(1)));
        let degraded = condition(&status, MachinePoolConditionType::Degraded);
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", "JoinTokenUsed")
        );
        assert!(degraded.message.contains("edge-x"), "{}", degraded.message);
        assert_eq!(condition(&status, MachinePoolConditionType::Ready).status, "True");
    }

    #[test]
    fn a_lost_machine_gets_ready_unknown_agent_lost() {
        let a = machine("a", true);
        let condition = lost_condition(&a, Some(at(90)), &Time(at(110)));
        assert_eq!(condition.status, "Unknown");
        assert_eq!(condition.reason, "AgentLost");
        assert!(!marked_lost(&a));
    }

    #[test]
    fn every_reason_and_type_is_valid() {
        use olm_runtime::conditions::{is_valid_condition_type, is_valid_reason};
        for type_ in [
            MachinePoolConditionType::Ready,
            MachinePoolConditionType::Progressing,
            MachinePoolConditionType::Degraded,
        ] {
            assert!(is_valid_condition_type(type_.as_str()));
        }
        for reason in [
            MachinePoolReason::AllMachinesReady,
            MachinePoolReason::MachinesNotReady,
            MachinePoolReason::AgentRollout,
            MachinePoolReason::Stable,
            MachinePoolReason::NoMatchingNodes,
            MachinePoolReason::MachinesLost,
            MachinePoolReason::JoinTokenUsed,
            MachinePoolReason::InvalidSpec,
            MachinePoolReason::AsExpected,
        ] {
            assert!(is_valid_reason(reason.as_str()));
        }
        assert!(is_valid_reason(AGENT_LOST));
    }

    #[test]
    fn only_machines_lost_and_not_yet_marked_are_marked() {
        let (live, lost) = (machine("a", true), machine("b", true));
        let mut marked = machine("c", true);
        let (la, lb, lc) = (lease("edge-a", 100), lease("edge-b", 50), lease("edge-c", 50));
        let now = Time(at(110));
        let condition = lost_condition(&marked, heartbeat_deadline(&marked, Some(&lc)), &now);
        marked.status.as_mut().expect("a status").conditions = Some(vec![condition]);
        let observed = Observed {
            machines: vec![&live, &lost, &marked],
            leases: BTreeMap::from([
                ("edge-a".to_owned(), &la),
                ("edge-b".to_owned(), &lb),
                ("edge-c".to_owned(), &lc),
            ]),
            ..Observed::default()
        };
        let marks = newly_lost(&observed, &now);
        let names: Vec<String> = marks.iter().map(|(m, _)| m.name_any()).collect();
        assert_eq!(names, vec!["edge-b".to_owned()]);
        assert_eq!(
            (marks[0].1.status.as_str(), marks[0].1.reason.as_str()),
            ("Unknown", AGENT_LOST)
        );
    }

    #[test]
    fn the_pool_is_looked_at_again_after_the_next_expiry_or_the_resync() {
        let a = machine("a", true);
        let la = lease("edge-a", 100);
        let with_lease = Observed {
            machines: vec![&a],
            leases: BTreeMap::from([("edge-a".to_owned(), &la)]),
            ..Observed::default()
        };
        let no_machine = Observed::default();
        let minute = Duration::from_secs(60);
        // (what, observed, now, resync, expected); a's Lease expires at 140.
        let cases: [(&str, &Observed<'_>, i64, Duration, Duration); 4] = [
            (
                "next expiry first",
                &with_lease,
                110,
                minute,
                Duration::from_secs(31),
            ),
            (
                "resync first",
                &with_lease,
                110,
                Duration::from_secs(5),
                Duration::from_secs(5),
            ),
            ("expired already", &with_lease, 150, minute, minute),
            ("no machine", &no_machine, 110, minute, minute),
        ];
        for (what, observed, now, resync, expected) in cases {
            assert_eq!(requeue_after(observed, at(now), resync), expected, "{what}");
        }
    }

    /// Two machines desired; `registered` of them registered, `ready` ready,
    /// `lost` lost.
    fn tally_of(registered: usize, ready: usize, lost: usize, no_nodes: bool, rolling: bool) -> Tally {
        Tally {
            lost: (0..lost).map(|i| format!("edge-{i}")).collect(),
            desired: 2,
            registered,
            ready,
            no_nodes,
            rolling,
            ..Tally::default()
        }
    }

    #[test]
    fn conditions_follow_their_precedence() {
        use MachinePoolReason as R;
        let refused = BTreeMap::from([("edge-x".to_owned(), "edge-x used a used token".to_owned())]);
        let none = BTreeMap::new();
        // (what, tally, refused, (Degraded, Progressing, Ready))
        let cases = [
            (
                "all ready",
                tally_of(2, 2, 0, false, false),
                &none,
                (R::AsExpected, R::Stable, R::AllMachinesReady),
            ),
            (
                "no nodes",
                tally_of(2, 2, 1, true, false),
                &refused,
                (R::NoMatchingNodes, R::Stable, R::NoMatchingNodes),
            ),
            (
                "lost",
                tally_of(2, 1, 1, false, false),
                &refused,
                (R::MachinesLost, R::Stable, R::MachinesNotReady),
            ),
            (
                "refused",
                tally_of(2, 2, 0, false, false),
                &refused,
                (R::JoinTokenUsed, R::Stable, R::AllMachinesReady),
            ),
            (
                "rolling",
                tally_of(1, 2, 0, false, true),
                &none,
                (R::AsExpected, R::AgentRollout, R::AllMachinesReady),
            ),
            (
                "registering",
                tally_of(1, 1, 0, false, false),
                &none,
                (R::AsExpected, R::MachinesNotReady, R::MachinesNotReady),
            ),
        ];
        for (what, tally, refused, expected) in cases {
            let reasons = (
                degraded(&tally, refused).1,
                progressing(&tally, "0.1.0").1,
                ready(&tally).1,
            );
            assert_eq!(reasons, expected, "{what}");
        }
    }
}
