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
    printcolumn(name = "Machines", type_ = "integer", json_path = ".status.machines"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyMachines"),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
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
    /// The Secret (in the pool's namespace) holding the join token under key `token`.
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
    /// Machines registered in the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machines: Option<i32>,
    /// Machines whose agent heartbeats and runs the wanted version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_machines: Option<i32>,
    /// Standard conditions (Ready, Progressing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}
