//! The agent's Machine and its heartbeat Lease.
//!
//! - [`register`]: creates or re-adopts the Machine `<pool>-<id>` (server-side
//!   apply of its spec: the name is the identity, so a restarted agent finds the
//!   same Machine and never makes a second one).
//! - [`desired_status`]: the status the agent reports; [`write_status`] applies it
//!   only when it differs from what the Machine says, which also brings `Ready`
//!   back to `True` after olm-operator marked the machine lost.
//! - [`heartbeat`]: the Lease `<pool>-<id>`, renewed with a one-field patch.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::coordination::v1::Lease,
    apimachinery::pkg::apis::meta::v1::{MicroTime, Time},
    jiff::Timestamp,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use olm_api::substrate::{
    AGENT_FIELD_MANAGER, JOIN_TOKEN_ID, MACHINE_READY, Machine, MachineStatus, REASON_AGENT_RUNNING,
    UnitStatus,
};
use olm_runtime::conditions::{self, ConditionReason, ConditionType, Status};
use serde::{Deserialize, Serialize};

use crate::host::HostFacts;

/// Who this agent is: saved in the state directory at first registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    /// The pool's (and the Machine's) namespace.
    pub namespace: String,
    /// The pool.
    pub pool: String,
    /// The Machine's name, `<pool>-<node name or external id>`.
    pub machine: String,
    /// The node, for a machine in the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The external id, for a machine joined from outside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    /// The id of the join token the machine registered with, kept on its
    /// Machine (annotation `substrate.olm-rs.dev/join-token-id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join_token_id: Option<String>,
}

struct Ready;

impl ConditionType for Ready {
    fn as_str(&self) -> &'static str {
        MACHINE_READY
    }
}

struct AgentRunning;

impl ConditionReason for AgentRunning {
    fn as_str(&self) -> &'static str {
        REASON_AGENT_RUNNING
    }
}

fn patch_params() -> PatchParams {
    PatchParams::apply(AGENT_FIELD_MANAGER).force()
}

/// The Machine's spec as the agent applies it.
pub fn machine_spec(identity: &Identity) -> serde_json::Value {
    let mut spec = serde_json::json!({ "pool": identity.pool });
    if let Some(node) = &identity.node_name {
        spec["nodeName"] = node.clone().into();
    }
    if let Some(id) = &identity.external_id {
        spec["externalId"] = id.clone().into();
    }
    let mut metadata = serde_json::json!({ "name": identity.machine, "namespace": identity.namespace });
    if let Some(id) = &identity.join_token_id {
        metadata["annotations"] = serde_json::json!({ JOIN_TOKEN_ID: id });
    }
    serde_json::json!({
        "apiVersion": Machine::api_version(&()),
        "kind": Machine::kind(&()),
        "metadata": metadata,
        "spec": spec,
    })
}

/// Creates the Machine, or re-adopts the one of the same name.
pub async fn register(api: &Api<Machine>, identity: &Identity) -> Result<Machine, kube::Error> {
    api.patch(
        &identity.machine,
        &patch_params(),
        &Patch::Apply(machine_spec(identity)),
    )
    .await
}

/// What the agent reports, given the Machine's current status (for the Ready
/// condition's transition time): `None` when the current status already says it all.
pub fn desired_status(
    facts: &HostFacts,
    units: &BTreeMap<String, UnitStatus>,
    registered_at: &Time,
    observed: Option<&MachineStatus>,
    now: &Time,
) -> Option<MachineStatus> {
    let mut conditions = observed.and_then(|s| s.conditions.clone()).unwrap_or_default();
    let ready_changed = conditions::set_condition(
        &mut conditions,
        Ready,
        Status::True,
        AgentRunning,
        &format!(
            "agent {} is running and renews its Lease",
            env!("CARGO_PKG_VERSION")
        ),
        None,
        now,
    );
    let ready = conditions.into_iter().find(|c| c.type_ == MACHINE_READY);
    let desired = MachineStatus {
        addresses: Some(facts.addresses.clone()),
        os: Some(facts.os.clone()),
        architecture: Some(facts.architecture.clone()),
        kernel_version: facts.kernel_version.clone(),
        agent_version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        last_heartbeat: Some(registered_at.clone()),
        units: Some(units.values().cloned().collect()),
        conditions: ready.map(|r| vec![r]),
    };
    let same = observed.is_some_and(|o| {
        !ready_changed
            && o.addresses == desired.addresses
            && o.os == desired.os
            && o.architecture == desired.architecture
            && o.kernel_version == desired.kernel_version
            && o.agent_version == desired.agent_version
            && o.last_heartbeat == desired.last_heartbeat
            && o.units.as_deref().unwrap_or_default() == desired.units.as_deref().unwrap_or_default()
    });
    (!same).then_some(desired)
}

/// The units' statuses as `machine` last reported them, for the units whose
/// state is on disk (`on_disk`: unit name to its CSV). A restarted agent starts
/// from these, so that the Machine keeps reporting its units until each unit's
/// task reports again: an empty list would tell the cluster they are gone.
pub fn last_reported(machine: &Machine, on_disk: &BTreeMap<String, String>) -> BTreeMap<String, UnitStatus> {
    let reported = machine
        .status
        .as_ref()
        .and_then(|s| s.units.as_deref())
        .unwrap_or_default();
    on_disk
        .iter()
        .filter_map(|(unit, csv)| {
            let status = reported.iter().find(|status| &status.csv == csv)?;
            Some((unit.clone(), status.clone()))
        })
        .collect()
}

/// Applies `status` to the Machine.
pub async fn write_status(
    api: &Api<Machine>,
    identity: &Identity,
    status: &MachineStatus,
) -> Result<(), kube::Error> {
    let body = serde_json::json!({
        "apiVersion": Machine::api_version(&()),
        "kind": Machine::kind(&()),
        "metadata": { "name": identity.machine, "namespace": identity.namespace },
        "status": status,
    });
    api.patch_status(&identity.machine, &patch_params(), &Patch::Apply(body))
        .await
        .map(|_| ())
}

/// How often the Lease is renewed: a quarter of its duration, at most 10 s.
pub fn renew_interval(lease_duration: Duration) -> Duration {
    (lease_duration / 4).clamp(Duration::from_secs(1), Duration::from_secs(10))
}

/// Takes (or re-takes) the machine's Lease: its whole spec, owned by the Machine.
pub async fn take_lease(
    api: &Api<Lease>,
    machine: &Machine,
    lease_duration: Duration,
) -> Result<(), kube::Error> {
    let name = machine.name_any();
    let now = MicroTime(Timestamp::now());
    let owner = machine.controller_owner_ref(&()).map(|mut owner| {
        owner.controller = Some(false);
        owner
    });
    let body = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": { "name": name, "namespace": machine.namespace(), "ownerReferences": owner.into_iter().collect::<Vec<_>>() },
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": lease_duration.as_secs(),
            "acquireTime": now,
            "renewTime": now,
        },
    });
    api.patch(&name, &patch_params(), &Patch::Apply(body))
        .await
        .map(|_| ())
}

/// Renews the Lease: only `renewTime` changes.
pub async fn renew_lease(api: &Api<Lease>, name: &str) -> Result<(), kube::Error> {
    let body = serde_json::json!({ "spec": { "renewTime": MicroTime(Timestamp::now()) } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use olm_api::substrate::WorkloadState;

    use super::*;

    fn facts() -> HostFacts {
        HostFacts {
            addresses: vec!["10.0.0.5".into()],
            os: "linux".into(),
            architecture: "amd64".into(),
            kernel_version: Some("6.8.0".into()),
        }
    }

    #[test]
    fn the_status_is_written_only_when_it_changes() {
        let t0 = conditions::now();
        let units = BTreeMap::from([(
            "demo".to_owned(),
            UnitStatus {
                csv: "demo.v1".into(),
                version: "1.0.0".into(),
                state: WorkloadState::Active,
                message: None,
                application: Some("demo".into()),
                leader: true,
            },
        )]);
        let first = desired_status(&facts(), &units, &t0, None, &t0).expect("nothing written yet");
        assert_eq!(first.conditions.as_ref().unwrap()[0].status, "True");
        assert_eq!(desired_status(&facts(), &units, &t0, Some(&first), &t0), None);

        let mut lost = first.clone();
        let ready = &mut lost.conditions.as_mut().unwrap()[0];
        ready.status = "Unknown".into();
        ready.reason = "AgentLost".into();
        let back = desired_status(&facts(), &units, &t0, Some(&lost), &t0).expect("Ready back to True");
        assert_eq!(back.conditions.unwrap()[0].reason, "AgentRunning");

        let mut changed = units.clone();
        changed.get_mut("demo").unwrap().state = WorkloadState::Error;
        assert!(desired_status(&facts(), &changed, &t0, Some(&first), &t0).is_some());
    }

    #[test]
    fn the_spec_names_the_pool_and_the_identity() {
        let identity = Identity {
            namespace: "apps".into(),
            pool: "edge".into(),
            machine: "edge-node-1".into(),
            node_name: Some("node-1".into()),
            external_id: None,
            join_token_id: None,
        };
        let spec = machine_spec(&identity);
        assert_eq!(
            spec["spec"],
            serde_json::json!({"pool": "edge", "nodeName": "node-1"})
        );
        assert_eq!(spec["metadata"].get("annotations"), None);
        let joined = Identity {
            machine: "edge-ext-1".into(),
            node_name: None,
            external_id: Some("ext-1".into()),
            join_token_id: Some("5f1c".into()),
            ..identity
        };
        let spec = machine_spec(&joined);
        assert_eq!(
            spec["spec"],
            serde_json::json!({"pool": "edge", "externalId": "ext-1"})
        );
        assert_eq!(
            spec["metadata"]["annotations"],
            serde_json::json!({"substrate.olm-rs.dev/join-token-id": "5f1c"})
        );
        assert_eq!(spec["kind"], "Machine");
        assert_eq!(renew_interval(Duration::from_secs(40)), Duration::from_secs(10));
        assert_eq!(renew_interval(Duration::from_secs(8)), Duration::from_secs(2));
    }

    #[test]
    fn a_restart_starts_from_the_units_last_reported_that_are_still_on_disk() {
        let unit = |csv: &str| UnitStatus {
            csv: csv.into(),
            version: "2.0.0".into(),
            state: WorkloadState::Active,
            message: Some("serving".into()),
            application: None,
            leader: false,
        };
        let spec = || olm_api::substrate::MachineSpec {
            pool: "edge".into(),
            node_name: Some("a".into()),
            external_id: None,
        };
        let mut machine = Machine::new("edge-a", spec());
        machine.status = Some(MachineStatus {
            units: Some(vec![unit("demo.v2"), unit("gone.v1")]),
            ..MachineStatus::default()
        });
        // The unit named after its first CSV now runs demo.v2; "new" was never reported.
        let on_disk = BTreeMap::from([
            ("demo.v1".to_owned(), "demo.v2".to_owned()),
            ("new".to_owned(), "new.v1".to_owned()),
        ]);
        let seeded = last_reported(&machine, &on_disk);
        assert_eq!(seeded, BTreeMap::from([("demo.v1".to_owned(), unit("demo.v2"))]));
        assert!(last_reported(&Machine::new("edge-a", spec()), &on_disk).is_empty());
    }
}
