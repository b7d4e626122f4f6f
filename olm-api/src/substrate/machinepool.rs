//! `MachinePool`: a set of machines that run the olm-rs agent.

use std::collections::BTreeMap;

use k8s_openapi::{api::core::v1::Toleration, apimachinery::pkg::apis::meta::v1::Condition};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// The spec of a MachinePool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "substrate.olm-rs.dev",
    version = "v1alpha1",
    kind = "MachinePool",
    plural = "machinepools",
    namespaced,
    status = "MachinePoolStatus",
    shortname = "mp",
    category = "olm",
    derive = "PartialEq",
    doc = "MachinePool is a set of machines on which operators run software through the olm-rs agent.",
    printcolumn(name = "Desired", type_ = "integer", json_path = ".status.desiredMachines"),
    printcolumn(name = "Machines", type_ = "integer", json_path = ".status.machines"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyMachines"),
    printcolumn(name = "Lost", type_ = "integer", json_path = ".status.lostMachines"),
    printcolumn(name = "Agent", type_ = "string", json_path = ".spec.agent.version"),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].reason"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type=='Degraded')].message"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolSpec {
    /// Nodes of the cluster whose labels match join the pool; the agent runs on
    /// them as a DaemonSet. Without a selector, only machines joined from
    /// outside the cluster are members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of the agent pods, so they can run on tainted nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// The agent to run on each machine.
    pub agent: AgentSpec,
    /// Lets machines outside the cluster join the pool with a token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalJoin>,
    /// How a new agent version is rolled out across the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<AgentUpgrade>,
    /// How many units each application on the pool runs, by application (the
    /// package of its CSV, as `kubectl olm status` names it): that many ready
    /// machines of the pool get a unit, spread over zones, existing units
    /// staying put. An application not named here runs a unit on every
    /// machine of the pool. `kubectl olm scale APP N` sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<BTreeMap<String, u32>>,
}

/// The agent of a MachinePool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
    /// The agent's container image.
    pub image: String,
    /// The agent version the pool should run; changing it rolls the agents.
    pub version: String,
}

/// Joining machines from outside the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalJoin {
    /// The Secret (in the pool's namespace) where olm-operator keeps the pool's
    /// join token, under key `token`. A token admits one machine: once that
    /// machine runs on its own credentials, the Secret holds a new token.
    pub token_secret_name: String,
}

/// How agents are upgraded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentUpgrade {
    /// How many machines may be upgrading at once (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_unavailable: Option<i32>,
}

/// The observed state of a MachinePool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Machines the pool should have: the nodes its selector matches, plus
    /// the machines joined from outside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_machines: Option<i32>,
    /// Machines registered in the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machines: Option<i32>,
    /// Machines whose agent heartbeats and reports Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_machines: Option<i32>,
    /// Machines whose heartbeat Lease expired (agent lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_machines: Option<i32>,
    /// The names of the lost machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<Vec<String>>,
    /// How many machines run each agent version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_versions: Option<Vec<AgentVersionCount>>,
    /// Every API server endpoint of the cluster (`https://host:port`), for
    /// agents to fail over between.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_endpoints: Option<Vec<String>>,
    /// Where the units of each application scaled in `spec.units` go, by
    /// application: the agents run those units on these machines only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applications: Option<Vec<ApplicationPlacement>>,
    /// Standard conditions (Ready, Progressing, Degraded, and Scaled while
    /// `spec.units` names an application).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}

/// Where the units of one scaled application go, and how many it has.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationPlacement {
    /// The application.
    pub application: String,
    /// The units asked for (`spec.units`).
    pub desired_units: u32,
    /// The units the pool's machines report now.
    pub units: u32,
    /// The machines that run its units (fewer than `desiredUnits` when the
    /// pool has too few ready machines).
    #[serde(default)]
    pub machines: Vec<String>,
}

/// How many machines of a pool run one agent version.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentVersionCount {
    /// The agent version.
    pub version: String,
    /// How many machines run it.
    pub machines: i32,
}

/// The condition types of a MachinePool.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum MachinePoolConditionType {
    /// Every desired machine is registered, heartbeats and runs the wanted agent version.
    Ready,
    /// Agents are being rolled out or machines are still registering.
    Progressing,
    /// Something needs attention: lost machines, no matching node, a bad join.
    Degraded,
    /// Every application scaled in `spec.units` has a machine for each unit.
    Scaled,
}

impl MachinePoolConditionType {
    /// The condition type as written in `status.conditions[].type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::Progressing => "Progressing",
            Self::Degraded => "Degraded",
            Self::Scaled => "Scaled",
        }
    }
}

/// The reasons of a MachinePool's conditions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum MachinePoolReason {
    /// Every desired machine is ready.
    AllMachinesReady,
    /// Some desired machines are not registered or not ready yet.
    MachinesNotReady,
    /// The agent DaemonSet is rolling out a new version.
    AgentRollout,
    /// Nothing is changing.
    Stable,
    /// The node selector matches no node of the cluster.
    NoMatchingNodes,
    /// Some machines' heartbeat Leases expired.
    MachinesLost,
    /// A join token was used once already and no longer admits a machine.
    JoinTokenUsed,
    /// The pool's spec cannot be acted on (e.g. neither a selector nor external joins).
    InvalidSpec,
    /// Nothing is wrong.
    AsExpected,
    /// Every scaled application has a ready machine for each unit it asks for.
    ScaleMet,
    /// Some scaled application asks for more units than the pool has ready machines.
    NotEnoughMachines,
}

impl MachinePoolReason {
    /// The reason as written in `status.conditions[].reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllMachinesReady => "AllMachinesReady",
            Self::MachinesNotReady => "MachinesNotReady",
            Self::AgentRollout => "AgentRollout",
            Self::Stable => "Stable",
            Self::NoMatchingNodes => "NoMatchingNodes",
            Self::MachinesLost => "MachinesLost",
            Self::JoinTokenUsed => "JoinTokenUsed",
            Self::InvalidSpec => "InvalidSpec",
            Self::AsExpected => "AsExpected",
            Self::ScaleMet => "ScaleMet",
            Self::NotEnoughMachines => "NotEnoughMachines",
        }
    }
}
