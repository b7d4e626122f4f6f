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
    printcolumn(name = "Agent", type_ = "string", json_path = ".status.agentVersion"),
    printcolumn(name = "Heartbeat", type_ = "date", json_path = ".status.lastHeartbeat")
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The MachinePool (in the same namespace) the machine belongs to.
    pub pool: String,
    /// The cluster node the machine is, for machines inside the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
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
    /// The version of the running agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// When the agent last reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<Time>,
    /// The state of each operator's unit on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<Vec<UnitStatus>>,
    /// Standard conditions (Ready).
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
