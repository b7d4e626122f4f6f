//! The install strategy of a ClusterServiceVersion (`spec.install`): OLM's
//! `deployment` strategy and olm-rs's `machine` strategy, with their details.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::PolicyRule;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// The install strategy of a CSV, with its details.
///
/// On the wire this is OLM's shape, `{strategy: <name>, spec: <details>}`;
/// the details' type follows the name, so a `machine` strategy cannot carry
/// deployment details or the other way round.
///
/// A `deployment` strategy without `spec` reads as one with no deployments,
/// as OLM accepts it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "strategy", content = "spec", from = "WireInstallStrategy")]
pub enum NamedInstallStrategy {
    /// Deployments plus their service accounts and RBAC (OLM's only strategy).
    #[serde(rename = "deployment")]
    Deployment(StrategyDetailsDeployment),
    /// Hooks run by the agents of a MachinePool (olm-rs).
    #[serde(rename = "machine")]
    Machine(StrategyDetailsMachine),
}

/// `spec.install` as read: the `deployment` details may be absent.
#[derive(Deserialize)]
#[serde(tag = "strategy", content = "spec")]
enum WireInstallStrategy {
    #[serde(rename = "deployment")]
    Deployment(Option<StrategyDetailsDeployment>),
    #[serde(rename = "machine")]
    Machine(StrategyDetailsMachine),
}

impl From<WireInstallStrategy> for NamedInstallStrategy {
    fn from(wire: WireInstallStrategy) -> Self {
        match wire {
            WireInstallStrategy::Deployment(details) => Self::Deployment(details.unwrap_or_default()),
            WireInstallStrategy::Machine(details) => Self::Machine(details),
        }
    }
}

impl NamedInstallStrategy {
    /// The strategy's name.
    pub fn name(&self) -> InstallStrategyName {
        match self {
            Self::Deployment(_) => InstallStrategyName::Deployment,
            Self::Machine(_) => InstallStrategyName::Machine,
        }
    }

    /// The details of a `deployment` strategy; `None` for other strategies.
    pub fn deployment(&self) -> Option<&StrategyDetailsDeployment> {
        match self {
            Self::Deployment(details) => Some(details),
            Self::Machine(_) => None,
        }
    }

    /// The details of a `deployment` strategy, to change; `None` for other strategies.
    pub fn deployment_mut(&mut self) -> Option<&mut StrategyDetailsDeployment> {
        match self {
            Self::Deployment(details) => Some(details),
            Self::Machine(_) => None,
        }
    }

    /// The details of a `machine` strategy; `None` for other strategies.
    pub fn machine(&self) -> Option<&StrategyDetailsMachine> {
        match self {
            Self::Machine(details) => Some(details),
            Self::Deployment(_) => None,
        }
    }
}

/// The schema of `spec.install`: structural, so `spec` lists the fields of
/// every strategy's details; a CEL rule states which are required for which
/// strategy, so the API server refuses a CSV the operators could not read.
impl JsonSchema for NamedInstallStrategy {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NamedInstallStrategy".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut properties = serde_json::Map::new();
        for details in [
            generator.subschema_for::<StrategyDetailsDeployment>(),
            generator.subschema_for::<StrategyDetailsMachine>(),
        ] {
            if let Some(serde_json::Value::Object(fields)) = details.get("properties") {
                properties.extend(fields.clone());
            }
        }
        schemars::json_schema!({
            "description": "How to install the operator: the strategy's name and its details.",
            "type": "object",
            "required": ["strategy"],
            "properties": {
                "strategy": {
                    "description": "The strategy's name: `deployment` in OLM, or `machine` in olm-rs.",
                    "type": "string",
                    "enum": ["deployment", "machine"],
                },
                "spec": {
                    "description": "The strategy's details; which fields apply depends on `strategy`.",
                    "type": "object",
                    "properties": properties,
                },
            },
            "x-kubernetes-validations": [
                {
                    "rule": "self.strategy != 'machine' || (has(self.spec) && has(self.spec.pool) && has(self.spec.hooks))",
                    "message": "the machine strategy needs spec.pool and spec.hooks",
                },
            ],
        })
    }
}

/// The kinds of install strategy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum InstallStrategyName {
    /// Deployments plus their service accounts and RBAC (OLM's only strategy).
    #[serde(rename = "deployment")]
    Deployment,
    /// Hooks run by the agents of a MachinePool (olm-rs).
    #[serde(rename = "machine")]
    Machine,
}

impl InstallStrategyName {
    /// The name as written in `spec.install.strategy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "deployment",
            Self::Machine => "machine",
        }
    }
}

/// The details of the `machine` install strategy: the operator's hooks run
/// by the agent of every machine of a pool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDetailsMachine {
    /// The MachinePool (in the CSV's namespace) whose machines run the operator.
    pub pool: String,
    /// Where the hooks come from.
    pub hooks: MachineHooks,
    /// The default config, overlaid by the Subscription's `spec.config.env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<BTreeMap<String, String>>,
    /// How long one hook may run before it is stopped and counted as failed (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub hook_timeout_seconds: Option<i64>,
    /// How often `update-status` runs (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub update_status_interval_seconds: Option<i64>,
    /// Whether the hooks need root on the machine (default false). Unprivileged
    /// hooks run as the agent's hook user (by default uid and gid 65534,
    /// nobody), which can use the unit's sandbox, its scripts and config and
    /// the hook tool, and nothing else of the agent's; privileged hooks run as
    /// root, and fail on an agent that does not run as root. Ask for root
    /// only when the hooks install packages, manage services or write outside
    /// their sandbox.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub privileged: bool,
}

impl StrategyDetailsMachine {
    /// The default hook timeout, in seconds.
    pub const DEFAULT_HOOK_TIMEOUT_SECONDS: i64 = 300;
    /// The default `update-status` interval, in seconds.
    pub const DEFAULT_UPDATE_STATUS_INTERVAL_SECONDS: i64 = 300;

    /// The hook timeout, with its default.
    pub fn hook_timeout_seconds(&self) -> i64 {
        self.hook_timeout_seconds
            .unwrap_or(Self::DEFAULT_HOOK_TIMEOUT_SECONDS)
    }

    /// The `update-status` interval, with its default.
    pub fn update_status_interval_seconds(&self) -> i64 {
        self.update_status_interval_seconds
            .unwrap_or(Self::DEFAULT_UPDATE_STATUS_INTERVAL_SECONDS)
    }
}

/// Where the hooks of a `machine` strategy come from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineHooks {
    /// The ConfigMap (in the CSV's namespace) whose data keys are hook names
    /// and whose values are the hook scripts.
    pub config_map: String,
}

/// The hooks of a machine unit, as named in the hooks ConfigMap.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MachineHook {
    /// Installs the software (required).
    Install,
    /// Applies a changed config.
    ConfigChanged,
    /// Starts the software (required).
    Start,
    /// Moves the software to a new version.
    Upgrade,
    /// Reports the workload's state, run periodically.
    UpdateStatus,
    /// Stops the software.
    Stop,
    /// Removes the software.
    Remove,
    /// The unit has become its application's leader (run after `install`,
    /// and whenever leadership comes to the unit later).
    LeaderElected,
}

impl MachineHook {
    /// Every hook, in the order of a unit's life.
    pub const ALL: [MachineHook; 8] = [
        Self::Install,
        Self::ConfigChanged,
        Self::Start,
        Self::Upgrade,
        Self::UpdateStatus,
        Self::Stop,
        Self::Remove,
        Self::LeaderElected,
    ];
    /// The hooks a hooks ConfigMap must have.
    pub const REQUIRED: [MachineHook; 2] = [Self::Install, Self::Start];

    /// The hook's name, the key in the hooks ConfigMap.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Install => "install",
            Self::ConfigChanged => "config-changed",
            Self::Start => "start",
            Self::Upgrade => "upgrade",
            Self::UpdateStatus => "update-status",
            Self::Stop => "stop",
            Self::Remove => "remove",
            Self::LeaderElected => "leader-elected",
        }
    }
}

impl std::fmt::Display for MachineHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The details of the `deployment` install strategy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDetailsDeployment {
    /// The Deployments to create.
    #[serde(rename = "deployments", default)]
    pub deployments: Vec<StrategyDeploymentSpec>,
    /// Namespaced permissions, granted in every target namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Vec<StrategyDeploymentPermissions>>,
    /// Cluster-wide permissions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_permissions: Option<Vec<StrategyDeploymentPermissions>>,
}

/// A Deployment to create, by name, with its spec.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct StrategyDeploymentSpec {
    /// The Deployment's name.
    pub name: String,
    /// The Deployment's `spec`, kept as written (an `apps/v1` DeploymentSpec).
    #[schemars(schema_with = "schema::open_object")]
    pub spec: serde_json::Value,
    /// Labels to put on the Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<BTreeMap<String, String>>,
}

/// RBAC rules granted to a service account of the operator.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDeploymentPermissions {
    /// The service account that gets the rules (created if missing).
    pub service_account_name: String,
    /// The rules.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}
