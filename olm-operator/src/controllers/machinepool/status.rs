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

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    api::{apps::v1::DaemonSet, coordination::v1::Lease},
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::{SignedDuration, Timestamp},
};
use kube::ResourceExt;
use olm_api::substrate::{
    AgentVersionCount, Machine, MachinePool, MachinePoolConditionType, MachinePoolReason, MachinePoolStatus,
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

/// The status of `pool` given `observed`, at `now`.
pub fn compute(pool: &MachinePool, observed: &Observed<'_>, now: &Time) -> MachinePoolStatus {
    use MachinePoolConditionType as T;
    use MachinePoolReason as R;

    let generation = pool.metadata.generation;
    let lost = lost_machines(observed, now.0);
    let external = observed
        .machines
        .iter()
        .filter(|m| m.spec.node_name.is_none())
        .count();
    let desired = observed.matching_nodes.as_ref().map_or(0, BTreeSet::len) + external;
    let registered = observed.machines.len();
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

    let no_nodes = observed.matching_nodes.as_ref().is_some_and(BTreeSet::is_empty) && external == 0;
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
    let rolling = observed.daemonset.is_some_and(rolling_out);

    let mut conditions = pool
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut set = |type_: T, status: Status, reason: R, message: &str| {
        set_condition(
            &mut conditions,
            PoolCondition(type_),
            status,
            PoolReason(reason),
            message,
            generation,
            now,
        );
    };

    // Degraded.
    if no_nodes {
        set(
            T::Degraded,
            Status::True,
            R::NoMatchingNodes,
            &format!("the node selector {selector} matches no node, and no machine joined from outside"),
        );
    } else if !lost.is_empty() {
        set(
            T::Degraded,
            Status::True,
            R::MachinesLost,
            &format!("lost machines (Lease expired): {}", lost.join(", ")),
        );
    } else if !observed.refused.is_empty() {
        let refusals: Vec<&str> = observed.refused.values().map(String::as_str).collect();
        set(T::Degraded, Status::True, R::JoinTokenUsed, &refusals.join("; "));
    } else {
        set(T::Degraded, Status::False, R::AsExpected, "");
    }

    // Progressing.
    if rolling {
        set(
            T::Progressing,
            Status::True,
            R::AgentRollout,
            &format!("rolling out agent version {}", pool.spec.agent.version),
        );
    } else if registered < desired {
        set(
            T::Progressing,
            Status::True,
            R::MachinesNotReady,
            &format!("{registered} of {desired} machines registered"),
        );
    } else {
        set(T::Progressing, Status::False, R::Stable, "");
    }

    // Ready.
    if no_nodes {
        set(
            T::Ready,
            Status::False,
            R::NoMatchingNodes,
            &format!("the node selector {selector} matches no node"),
        );
    } else if desired > 0 && ready >= desired && lost.is_empty() {
        set(
            T::Ready,
            Status::True,
            R::AllMachinesReady,
            &format!("{ready} of {desired} machines ready"),
        );
    } else {
        set(
            T::Ready,
            Status::False,
            R::MachinesNotReady,
            &format!("{ready} of {desired} machines ready, {} lost", lost.len()),
        );
    }

    let count = |n: usize| Some(i32::try_from(n).unwrap_or(i32::MAX));
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
        conditions: Some(conditions),
    }
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
}
