//! `Machine`: one machine of a pool, written by its own agent.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// The spec of a Machine: which pool it belongs to.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "substrate.olm-rs.dev",
    version = "v1alpha1",
    kind = "Machine",
    plural = "machines",
    namespaced,
    status = "MachineStatus",
    shortname = "mach",
    category = "olm",
    derive = "PartialEq",
    doc = "Machine is one machine of a MachinePool, registered and kept up to date by its agent.",
    printcolumn(name = "Pool", type_ = "string", json_path = ".spec.pool"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].reason"
    ),
    printcolumn(name = "Address", type_ = "string", json_path = ".status.addresses[0]"),
    printcolumn(name = "OS", type_ = "string", json_path = ".status.os", priority = 1),
    printcolumn(
        name = "Arch",
        type_ = "string",
        json_path = ".status.architecture",
        priority = 1
    ),
    printcolumn(name = "Agent", type_ = "string", json_path = ".status.agentVersion"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The MachinePool (in the same namespace) the machine belongs to.
    pub pool: String,
    /// The cluster node the machine is, for machines inside the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The identity of a machine joined from outside the cluster (a lowercase DNS
    /// label, by default the host's machine-id or hostname).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
}

/// The observed state of a Machine, reported by its agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// The machine's network addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<String>>,
    /// The operating system, e.g. `linux`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// The CPU architecture, e.g. `amd64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// The kernel release, e.g. `6.8.0-45-generic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_version: Option<String>,
    /// The version of the running agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// When the agent last registered or re-adopted the machine. The heartbeat
    /// itself is the machine's Lease, so this is not refreshed per heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<Time>,
    /// The state of each operator's unit on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<Vec<UnitStatus>>,
    /// Standard conditions: `Ready` (the agent is alive; `Unknown` with reason
    /// `AgentLost` once its Lease expired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}

/// The state of one operator's software on one machine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitStatus {
    /// The ClusterServiceVersion the unit belongs to.
    pub csv: String,
    /// The version of that CSV the unit runs.
    pub version: String,
    /// The workload state.
    pub state: WorkloadState,
    /// What the workload says about its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The application the unit is of: the package of its CSV (the CSV's own
    /// name for a CSV of no package). Its units on the pool's machines elect
    /// one leader among them ([`crate::model::leader_lease`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    /// The unit leads its application: its machine holds the application's
    /// leader Lease.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leader: bool,
}

/// The workload states of a unit.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadState {
    /// Running and healthy.
    Active,
    /// Cannot proceed without a person or another operator acting.
    Blocked,
    /// Busy with work that makes it temporarily unavailable.
    Maintenance,
    /// Waiting for something outside its control.
    Waiting,
    /// A hook failed.
    Error,
}

impl WorkloadState {
    /// Every state, in the order `juju status` ranks them (worst last).
    pub const ALL: [WorkloadState; 5] = [
        WorkloadState::Active,
        WorkloadState::Maintenance,
        WorkloadState::Waiting,
        WorkloadState::Blocked,
        WorkloadState::Error,
    ];

    /// The string written to the API.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadState::Active => "active",
            WorkloadState::Blocked => "blocked",
            WorkloadState::Maintenance => "maintenance",
            WorkloadState::Waiting => "waiting",
            WorkloadState::Error => "error",
        }
    }

    /// Reads a state as written to the API (`active`, `blocked`, ...).
    pub fn parse(value: &str) -> Option<WorkloadState> {
        WorkloadState::ALL.into_iter().find(|s| s.as_str() == value)
    }
}

impl std::fmt::Display for WorkloadState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The condition type on a Machine that says whether its agent is alive.
pub const MACHINE_READY: &str = "Ready";
/// Reason of `Ready=True`: the agent registered and renews its Lease.
pub const REASON_AGENT_RUNNING: &str = "AgentRunning";
/// Reason of `Ready=Unknown`, set by olm-operator when the machine's Lease
/// expired (Juju's agent-lost).
pub const REASON_AGENT_LOST: &str = "AgentLost";

/// Where the agent's admin server (`/metrics`, `/healthz`, `/readyz`) listens by
/// default: loopback, on a port few programs use. The agent often runs in the
/// host's network namespace (a host-network DaemonSet pod, or a process on a
/// machine outside the cluster), where 0.0.0.0:8080 would clash with the
/// machine's own services and expose the agent on every interface.
pub const AGENT_ADMIN_ADDR: &str = "127.0.0.1:9740";

/// The environment variable that sets the agent's admin address (the
/// `--admin-addr` flag wins).
pub const AGENT_ADMIN_ADDR_ENV: &str = "OLM_ADMIN_ADDR";

/// The field manager of the agent's writes (Machine status, Lease).
pub const AGENT_FIELD_MANAGER: &str = "machine-agent";

/// Label on the effective-config ConfigMap of a machine CSV: the pool.
pub const POOL_LABEL: &str = "substrate.olm-rs.dev/pool";
/// Label on the effective-config ConfigMap of a machine CSV: the CSV's name.
pub const CSV_LABEL: &str = "substrate.olm-rs.dev/csv";

/// The name of the Machine (and of its heartbeat Lease) of a machine with
/// identity `id` (node name or external id) in `pool`: `<pool>-<id>`.
pub fn machine_name(pool: &str, id: &str) -> String {
    format!("{pool}-{id}")
}

/// The name of the ConfigMap that holds the effective config of machine CSV
/// `csv` (its default config overlaid with the Subscription's): `<csv>-config`.
pub fn effective_config_name(csv: &str) -> String {
    format!("{csv}-config")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_states_round_trip_as_serialized() {
        for state in WorkloadState::ALL {
            assert_eq!(WorkloadState::parse(state.as_str()), Some(state));
            assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
        }
    }

    #[test]
    fn names_follow_the_contract() {
        assert_eq!(machine_name("edge", "node-1"), "edge-node-1");
        assert_eq!(effective_config_name("demo.v1.0.0"), "demo.v1.0.0-config");
    }
}
