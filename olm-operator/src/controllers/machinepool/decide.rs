//! What reconciling a MachinePool changes (pure), from what the reconcile
//! read: the agent's account and DaemonSet (pools with a node selector), the
//! joins of machines from outside (pools with `spec.external`: see
//! [`join`]), the `Ready` condition of each machine lost or refused, and the
//! pool's status, each only when it differs from what the cluster holds.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use k8s_openapi::{
    api::{apps::v1::DaemonSet, coordination::v1::Lease, core::v1::Secret},
    apimachinery::pkg::apis::meta::v1::Time,
};
use kube::ResourceExt;
use olm_api::substrate::{JOIN_TOKEN_SECRET_TYPE, Machine, MachinePool, MachinePoolStatus};
use olm_runtime::effects::{DESIRED_HASH, Desired, Effects, StatusWrite};

use super::{
    agent,
    error::Error,
    join::{self, Issued, Joined, Renewal},
    status::{self, Observed},
};

/// Everything a decision is made from.
#[derive(Clone, Debug)]
pub struct Read<'a> {
    /// The nodes the pool's selector matches (names); `None` without a selector.
    pub matching_nodes: Option<BTreeSet<String>>,
    /// The pool's Machines.
    pub machines: Vec<&'a Machine>,
    /// The Leases of the pool's namespace, by name.
    pub leases: BTreeMap<String, &'a Lease>,
    /// The live agent DaemonSet, when there is one.
    pub daemonset: Option<&'a DaemonSet>,
    /// The API server endpoints to publish.
    pub endpoints: Vec<String>,
    /// The pool's join token Secret, for a pool with `spec.external`.
    pub join_secret: Option<&'a Secret>,
    /// The names of the credentials Secrets of the pool's joined machines.
    pub credentials: BTreeSet<String>,
    /// The zone of each machine that has one, by machine.
    pub zones: BTreeMap<String, String>,
    /// The time of the decision.
    pub now: Time,
    /// How long a settled pool waits before it is looked at again.
    pub resync: Duration,
}

/// What one reconcile of a pool does.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The objects to apply, and the pool's status (written last).
    pub effects: Effects<MachinePoolStatus>,
    /// The join token to replace, and why: a Secret deleted and made again
    /// with a new token, which only the API server can issue.
    pub renew: Option<Renewal>,
    /// The `Ready` conditions of machines lost or refused, not yet marked.
    pub machines: Vec<StatusWrite<serde_json::Value>>,
    /// How long until the pool is looked at again.
    pub requeue: Duration,
}

/// The decision for `pool`, given what was `read`.
pub fn decide(pool: &MachinePool, read: &Read<'_>) -> Result<Decision, Error> {
    let mut effects = Effects::none();
    let daemonset = agent_objects(pool, &mut effects.objects);
    let joins = joins(pool, read, &mut effects.objects)?;
    let machines: Vec<&Machine> = read
        .machines
        .iter()
        .copied()
        .filter(|m| !joins.refused.contains_key(&m.name_any()))
        .collect();
    // A DaemonSet whose live copy is not as desired yet is rolling out.
    let rolling = daemonset.filter(|desired| read.daemonset.is_none_or(|live| !carries_hash(live, desired)));
    let observed = Observed {
        matching_nodes: read.matching_nodes.clone(),
        machines,
        refused: joins.refused.clone(),
        leases: read.leases.clone(),
        daemonset: rolling.as_ref().map(|(ds, _)| ds).or(read.daemonset),
        endpoints: read.endpoints.clone(),
        zones: read.zones.clone(),
    };
    let next = status::compute(pool, &observed, &read.now);
    if pool.status.as_ref() != Some(&next) {
        effects.status = Some(StatusWrite {
            name: pool.name_any(),
            status: next,
        });
    }
    let mut marks = joins.marks;
    marks.extend(
        status::newly_lost(&observed, &read.now)
            .into_iter()
            .map(|(machine, condition)| condition_write(machine, condition)),
    );
    let resync = if joins.admitting {
        join::ADMITTING_RECHECK
    } else {
        read.resync
    };
    Ok(Decision {
        effects,
        renew: joins.renew,
        machines: marks,
        requeue: status::requeue_after(&observed, read.now.0, resync),
    })
}

/// Adds the agent's ServiceAccount, Role, RoleBinding and DaemonSet of a pool
/// with a node selector to `objects`; returns the DaemonSet, as desired, with
/// its hash.
fn agent_objects(pool: &MachinePool, objects: &mut Vec<Desired>) -> Option<(DaemonSet, String)> {
    let daemonset = agent::daemonset(pool)?;
    objects.extend([
        owned(&agent::service_account(pool)),
        owned(&agent::role(pool)),
        owned(&agent::role_binding(pool)),
    ]);
    let desired = owned(&daemonset);
    let hash = hash_of(&desired);
    objects.push(desired);
    Some((daemonset, hash))
}

/// Whether the live `daemonset` carries the hash of the `desired` one.
fn carries_hash(live: &DaemonSet, desired: &(DaemonSet, String)) -> bool {
    live.annotations().get(DESIRED_HASH) == Some(&desired.1)
}

/// What the joins of a pool come to.
#[derive(Debug, Default)]
struct Joins {
    refused: BTreeMap<String, String>,
    marks: Vec<StatusWrite<serde_json::Value>>,
    renew: Option<Renewal>,
    admitting: bool,
}

/// Adds to `objects` what the joins of a pool with `spec.external` need (see
/// [`join::plan`]): the admitted machine's account and credentials, the join
/// token marked used, the joining account.
fn joins(pool: &MachinePool, read: &Read<'_>, objects: &mut Vec<Desired>) -> Result<Joins, Error> {
    let Some(external) = pool.spec.external.as_ref() else {
        return Ok(Joins::default());
    };
    let secret_name = &external.token_secret_name;
    if let Some(secret) = read.join_secret
        && secret.type_.as_deref() != Some(JOIN_TOKEN_SECRET_TYPE)
    {
        return Err(Error::ForeignJoinSecret {
            pool: pool.name_any(),
            secret: secret_name.clone(),
        });
    }
    let issued = read.join_secret.and_then(Issued::from_secret);
    let lease_names: BTreeSet<String> = read.leases.keys().cloned().collect();
    let joined: Vec<Joined> = read
        .machines
        .iter()
        .filter_map(|m| Joined::of(m, &read.credentials, &lease_names))
        .collect();
    let plan = join::plan(secret_name, issued.as_ref(), &joined, read.now.0);
    if let Some(admitted) = plan.admit.as_deref()
        && let Some(machine) = read.machines.iter().find(|m| m.name_any() == admitted)
    {
        let ((account, role, binding), secret) = join::machine_objects(pool, machine);
        objects.extend([owned(&account), owned(&role), owned(&binding), owned(&secret)]);
        if plan.mark_used
            && let (Some(issued), Some(token)) = (issued, read.join_secret.and_then(join::token_of))
        {
            let used = Issued {
                used_by: Some(admitted.to_owned()),
                used_at: Some(read.now.0),
                ..issued
            };
            let body = join::join_secret_body(pool, secret_name, &token, &used);
            objects.push(Desired::fields(&body).expect("a Secret serializes"));
        }
    }
    // The joining account may read the admitted machine's credentials until the token goes.
    let (account, role, binding) = join::joiner_objects(pool, plan.readable.as_deref());
    objects.extend([owned(&account), owned(&role), owned(&binding)]);
    let marks = plan
        .refused
        .iter()
        .filter_map(|(name, message)| {
            let machine = read.machines.iter().find(|m| &m.name_any() == name)?;
            let condition = join::refused_condition(machine, message, &read.now)?;
            Some(condition_write(machine, condition))
        })
        .collect();
    Ok(Joins {
        admitting: plan.readable.is_some(),
        refused: plan.refused,
        renew: plan.renew,
        marks,
    })
}

/// The status write of `machine`'s `condition`, the only status field
/// olm-operator writes on a Machine.
fn condition_write(
    machine: &Machine,
    condition: k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition,
) -> StatusWrite<serde_json::Value> {
    StatusWrite {
        name: machine.name_any(),
        status: serde_json::json!({ "conditions": [condition] }),
    }
}

/// `object`, owned whole by the controller.
fn owned<K>(object: &K) -> Desired
where
    K: kube::Resource<DynamicType = ()> + serde::Serialize,
{
    Desired::owned(object).expect("Kubernetes objects serialize")
}

/// The hash an owned object carries.
fn hash_of(desired: &Desired) -> String {
    desired
        .object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESIRED_HASH))
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        ByteString,
        api::coordination::v1::LeaseSpec,
        apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
        jiff::Timestamp,
    };
    use olm_api::substrate::{JOIN_TOKEN_ID, JOIN_TOKEN_KEY, JOIN_TOKEN_USED_BY};

    use super::*;

    /// jti "t1", exp 1800086400.
    const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJqdGkiOiAidDEiLCAiZXhwIjogMTgwMDA4NjQwMH0.c2ln";
    const MINUTE: Duration = Duration::from_secs(60);

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(1_800_000_000 + second).expect("a time"))
    }

    fn pool(spec: serde_json::Value) -> MachinePool {
        let mut pool = MachinePool::new("edge", serde_json::from_value(spec).expect("a spec"));
        pool.metadata.namespace = Some("ops".to_owned());
        pool.metadata.uid = Some("uid-1".to_owned());
        pool.metadata.generation = Some(1);
        pool
    }

    fn node_pool() -> MachinePool {
        pool(serde_json::json!({
            "nodeSelector": {"edge": "true"},
            "agent": {"image": "machine-agent", "version": "0.1.0"},
        }))
    }

    fn external_pool() -> MachinePool {
        pool(serde_json::json!({
            "agent": {"image": "machine-agent", "version": "0.1.0"},
            "external": {"tokenSecretName": "edge-join"},
        }))
    }

    fn machine(name: &str, node: Option<&str>, token: Option<&str>, created: i64) -> Machine {
        let mut machine: Machine = serde_json::from_value(serde_json::json!({
            "apiVersion": "substrate.olm-rs.dev/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": name, "namespace": "ops", "uid": format!("uid-{name}"),
                         "creationTimestamp": at(created)},
            "spec": {"pool": "edge", "nodeName": node, "externalId": token.map(|_| name)},
            "status": {"agentVersion": "0.1.0", "conditions": [{
                "type": "Ready", "status": "True", "reason": "Registered", "message": "",
                "lastTransitionTime": at(created),
            }]},
        }))
        .expect("a Machine");
        if let Some(token) = token {
            machine
                .annotations_mut()
                .insert(JOIN_TOKEN_ID.to_owned(), token.to_owned());
        }
        machine
    }

    fn lease(name: &str, renewed: i64) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                lease_duration_seconds: Some(40),
                renew_time: Some(MicroTime(at(renewed).0)),
                ..LeaseSpec::default()
            }),
        }
    }

    fn join_secret(used_by: Option<&str>) -> Secret {
        let mut annotations = BTreeMap::from([(JOIN_TOKEN_ID.to_owned(), "t1".to_owned())]);
        if let Some(machine) = used_by {
            annotations.insert(JOIN_TOKEN_USED_BY.to_owned(), machine.to_owned());
            annotations.insert(
                olm_api::substrate::JOIN_TOKEN_USED_AT.to_owned(),
                at(2).0.to_string(),
            );
        }
        Secret {
            metadata: ObjectMeta {
                name: Some("edge-join".to_owned()),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            type_: Some(JOIN_TOKEN_SECRET_TYPE.to_owned()),
            data: Some(BTreeMap::from([(
                JOIN_TOKEN_KEY.to_owned(),
                ByteString(TOKEN.as_bytes().to_vec()),
            )])),
            ..Secret::default()
        }
    }

    fn read<'a>(machines: &[&'a Machine], leases: &[&'a Lease], now: i64) -> Read<'a> {
        Read {
            matching_nodes: None,
            machines: machines.to_vec(),
            leases: leases.iter().map(|l| (l.name_any(), *l)).collect(),
            daemonset: None,
            endpoints: vec!["https://127.0.0.1:6443".to_owned()],
            join_secret: None,
            credentials: BTreeSet::new(),
            zones: BTreeMap::new(),
            now: at(now),
            resync: MINUTE,
        }
    }

    /// `Kind/name` of each object to apply.
    fn applied(decision: &Decision) -> Vec<String> {
        decision
            .effects
            .objects
            .iter()
            .map(|d| format!("{}/{}", d.resource.kind, d.name()))
            .collect()
    }

    fn reason(decision: &Decision, type_: &str) -> String {
        let status = &decision.effects.status.as_ref().expect("a status").status;
        let conditions = status.conditions.as_deref().unwrap_or_default();
        let condition = conditions.iter().find(|c| c.type_ == type_).expect("set");
        format!("{} {}", condition.status, condition.reason)
    }

    /// The conditions written on machines, as `machine: status reason`.
    fn marks(decision: &Decision) -> Vec<String> {
        decision
            .machines
            .iter()
            .map(|w| {
                let c = &w.status["conditions"][0];
                format!("{}: {} {}", w.name, c["status"], c["reason"]).replace('"', "")
            })
            .collect()
    }

    const AGENT: [&str; 4] = [
        "ServiceAccount/machine-agent-edge",
        "Role/machine-agent-edge",
        "RoleBinding/machine-agent-edge",
        "DaemonSet/machine-agent-edge",
    ];

    #[test]
    fn a_new_pool_of_nodes_gets_its_agent_and_rolls_it_out() {
        let mut read = read(&[], &[], 0);
        read.matching_nodes = Some(["a".to_owned()].into());
        let decision = decide(&node_pool(), &read).expect("a decision");
        assert_eq!(applied(&decision), AGENT);
        assert!(
            decision.effects.objects.iter().all(|d| {
                d.object
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(DESIRED_HASH))
            }),
            "the agent's objects are owned whole"
        );
        assert_eq!(reason(&decision, "Progressing"), "True AgentRollout");
        assert_eq!(reason(&decision, "Ready"), "False MachinesNotReady");
        let status = &decision.effects.status.as_ref().expect("a status").status;
        assert_eq!(
            status.api_server_endpoints.as_deref(),
            Some(&["https://127.0.0.1:6443".to_owned()][..])
        );
        assert_eq!((decision.renew, decision.machines.len()), (None, 0));
    }

    /// The live DaemonSet as the API server holds it once applied and rolled out.
    fn rolled_out(decision: &Decision) -> DaemonSet {
        let desired = decision
            .effects
            .objects
            .iter()
            .find(|d| d.resource.kind == "DaemonSet");
        let mut live: DaemonSet = serde_json::from_value(
            serde_json::to_value(&desired.expect("a DaemonSet").object).expect("JSON"),
        )
        .expect("a DaemonSet");
        live.metadata.generation = Some(1);
        live.status = serde_json::from_value(serde_json::json!({
            "observedGeneration": 1, "desiredNumberScheduled": 1, "updatedNumberScheduled": 1,
            "currentNumberScheduled": 1, "numberMisscheduled": 0, "numberReady": 1,
        }))
        .expect("a status");
        live
    }

    #[test]
    fn a_settled_pool_of_ready_machines_decides_no_status_write() {
        let a = machine("edge-a", Some("a"), None, 0);
        let la = lease("edge-a", 100);
        let pool = node_pool();
        let mut read = read(&[&a], &[&la], 110);
        read.matching_nodes = Some(["a".to_owned()].into());
        let first = decide(&pool, &read).expect("a decision");
        let live = rolled_out(&first);
        read.daemonset = Some(&live);
        let rolled = decide(&pool, &read).expect("a decision");
        assert_eq!(reason(&rolled, "Ready"), "True AllMachinesReady");
        assert_eq!(reason(&rolled, "Progressing"), "False Stable");
        let mut settled = pool.clone();
        settled.status = rolled.effects.status.map(|s| s.status);
        let again = decide(&settled, &read).expect("a decision");
        assert_eq!(
            applied(&again),
            AGENT,
            "applied unless the live copies carry the hash"
        );
        assert_eq!(again.effects.status, None);
        assert!(again.machines.is_empty());
        // a's Lease expires at 140: looked at again a second later.
        assert_eq!(again.requeue, Duration::from_secs(31));
    }

    #[test]
    fn a_silent_machine_is_marked_lost_once() {
        let (a, b) = (
            machine("edge-a", Some("a"), None, 0),
            machine("edge-b", Some("b"), None, 0),
        );
        let (la, lb) = (lease("edge-a", 100), lease("edge-b", 50));
        let mut read = read(&[&a, &b], &[&la, &lb], 110);
        read.matching_nodes = Some(["a".to_owned(), "b".to_owned()].into());
        let decision = decide(&node_pool(), &read).expect("a decision");
        assert_eq!(marks(&decision), ["edge-b: Unknown AgentLost"]);
        assert_eq!(reason(&decision, "Degraded"), "True MachinesLost");
        let mut marked = b.clone();
        marked.status.as_mut().expect("a status").conditions = Some(vec![
            serde_json::from_value(decision.machines[0].status["conditions"][0].clone())
                .expect("a condition"),
        ]);
        read.machines = vec![&a, &marked];
        assert!(
            decide(&node_pool(), &read)
                .expect("a decision")
                .machines
                .is_empty()
        );
    }

    #[test]
    fn a_selector_that_matches_no_node_is_named() {
        let mut read = read(&[], &[], 0);
        read.matching_nodes = Some(BTreeSet::new());
        let decision = decide(&node_pool(), &read).expect("a decision");
        assert_eq!(reason(&decision, "Degraded"), "True NoMatchingNodes");
        assert_eq!(reason(&decision, "Ready"), "False NoMatchingNodes");
    }

    const JOINER: [&str; 3] = [
        "ServiceAccount/machine-join.edge",
        "Role/machine-join.edge",
        "RoleBinding/machine-join.edge",
    ];

    #[test]
    fn an_external_pool_without_token_gets_its_joining_account_and_a_token() {
        let decision = decide(&external_pool(), &read(&[], &[], 0)).expect("a decision");
        assert_eq!(applied(&decision), JOINER);
        assert_eq!(decision.renew, Some(Renewal::Missing));
    }

    #[test]
    fn the_first_machine_of_a_token_is_admitted_and_the_second_refused() {
        let (a, b) = (
            machine("edge-a", None, Some("t1"), 1),
            machine("edge-b", None, Some("t1"), 2),
        );
        let secret = join_secret(None);
        let mut read = read(&[&a, &b], &[], 3);
        read.join_secret = Some(&secret);
        let decision = decide(&external_pool(), &read).expect("a decision");
        let mut expected = vec![
            "ServiceAccount/machine.edge-a",
            "Role/machine.edge-a",
            "RoleBinding/machine.edge-a",
            "Secret/edge-a-credentials",
            "Secret/edge-join",
        ];
        expected.extend(JOINER);
        assert_eq!(applied(&decision), expected);
        let used = &decision.effects.objects[4].object;
        assert_eq!(
            used.metadata.annotations.as_ref().expect("annotations")[JOIN_TOKEN_USED_BY],
            "edge-a"
        );
        assert_eq!(marks(&decision), ["edge-b: False JoinTokenUsed"]);
        assert_eq!(reason(&decision, "Degraded"), "True JoinTokenUsed");
        let status = &decision.effects.status.as_ref().expect("a status").status;
        assert_eq!(status.machines, Some(1), "the refused machine counts nowhere");
        assert_eq!(
            (decision.renew, decision.requeue),
            (None, join::ADMITTING_RECHECK)
        );
    }

    #[test]
    fn a_used_token_is_renewed_once_its_machine_heartbeats() {
        let a = machine("edge-a", None, Some("t1"), 1);
        let la = lease("edge-a", 3);
        let secret = join_secret(Some("edge-a"));
        let mut read = read(&[&a], &[&la], 4);
        read.join_secret = Some(&secret);
        read.credentials = ["edge-a-credentials".to_owned()].into();
        let decision = decide(&external_pool(), &read).expect("a decision");
        assert_eq!(applied(&decision), JOINER, "no credentials made again");
        assert_eq!(decision.renew, Some(Renewal::Used));
        assert!(decision.machines.is_empty());
    }

    #[test]
    fn a_join_secret_olm_operator_did_not_make_is_refused() {
        let mut foreign = join_secret(None);
        foreign.type_ = Some("Opaque".to_owned());
        let mut read = read(&[], &[], 0);
        read.join_secret = Some(&foreign);
        let error = decide(&external_pool(), &read).expect_err("a foreign Secret");
        assert!(matches!(error, Error::ForeignJoinSecret { .. }), "{error}");
        assert!(error.to_string().contains("edge-join"), "{error}");
    }
}
