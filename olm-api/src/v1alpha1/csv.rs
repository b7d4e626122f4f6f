//! `ClusterServiceVersion`: one version of an operator, and how to install it.
//!
//! Field names, optionality and enum strings follow OLM's
//! `operators.coreos.com/v1alpha1` API exactly, so every CSV written for OLM
//! reads and writes back unchanged. Parts that OLM leaves open (deployment
//! specs, descriptor values) stay opaque JSON.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::rbac::v1::PolicyRule,
    apimachinery::pkg::apis::meta::v1::{LabelSelector, Time},
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// The spec of a ClusterServiceVersion: everything OLM needs to install and
/// describe one version of an operator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    plural = "clusterserviceversions",
    namespaced,
    status = "ClusterServiceVersionStatus",
    shortname = "csv",
    shortname = "csvs",
    category = "olm",
    derive = "PartialEq",
    doc = "ClusterServiceVersion is one version of an operator: what it provides, what it needs, and how to install it.",
    printcolumn(
        name = "Display",
        type_ = "string",
        json_path = ".spec.displayName",
        description = "The name of the CSV"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.version",
        description = "The version of the CSV"
    ),
    printcolumn(
        name = "Replaces",
        type_ = "string",
        json_path = ".spec.replaces",
        description = "The name of a CSV that this one replaces"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase")
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionSpec {
    /// How to install the operator.
    pub install: NamedInstallStrategy,
    /// The operator's version (semantic version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// An optional release qualifier, distinguishing rebuilds of one version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// Maturity of the operator (alpha, beta, stable...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maturity: Option<String>,
    /// CRDs the operator owns and CRDs it requires.
    #[serde(
        rename = "customresourcedefinitions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub custom_resource_definitions: Option<CustomResourceDefinitions>,
    /// Aggregated APIs the operator owns and requires.
    #[serde(
        rename = "apiservicedefinitions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_service_definitions: Option<ApiServiceDefinitions>,
    /// Admission and conversion webhooks the operator serves.
    #[serde(
        rename = "webhookdefinitions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub webhook_definitions: Option<Vec<WebhookDescription>>,
    /// CRD conversion webhooks the operator serves.
    #[serde(
        rename = "conversionwebhookdefinitions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub conversion_webhook_definitions: Option<Vec<ConversionWebhookDescription>>,
    /// Built-in Kubernetes APIs the operator needs.
    #[serde(rename = "nativeAPIs", default, skip_serializing_if = "Option::is_none")]
    pub native_apis: Option<Vec<GroupVersionKind>>,
    /// The lowest Kubernetes version the operator runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_kube_version: Option<String>,
    /// The operator's human-readable name.
    pub display_name: String,
    /// A description of the operator, usually Markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Search keywords.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keywords: Option<Vec<String>>,
    /// The people who maintain the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintainers: Option<Vec<Maintainer>>,
    /// Who publishes the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AppLink>,
    /// Links to documentation, sources and the like.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<AppLink>>,
    /// Icons, base64-encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Vec<Icon>>,
    /// The install modes (OperatorGroup shapes) the operator supports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_modes: Option<Vec<InstallMode>>,
    /// The name of the CSV this one replaces in the upgrade graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Labels used to organise CSVs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Free-form annotations of the CSV spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Label selector for related resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// What to do with the operator's custom resources when the CSV is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupSpec>,
    /// CSV names this one skips in the upgrade graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skips: Option<Vec<String>>,
    /// Images the operator and its operands use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_images: Option<Vec<RelatedImage>>,
}

/// A group, version and kind, as `nativeAPIs` lists them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub struct GroupVersionKind {
    /// The API group; empty for the core group.
    pub group: String,
    /// The API version.
    pub version: String,
    /// The kind.
    pub kind: String,
}

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
}

impl MachineHook {
    /// Every hook, in the order of a unit's life.
    pub const ALL: [MachineHook; 7] = [
        Self::Install,
        Self::ConfigChanged,
        Self::Start,
        Self::Upgrade,
        Self::UpdateStatus,
        Self::Stop,
        Self::Remove,
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

/// CRDs a CSV owns and requires.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CustomResourceDefinitions {
    /// CRDs the operator owns (ships and manages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<Vec<CrdDescription>>,
    /// CRDs the operator needs some other operator to provide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<CrdDescription>>,
}

/// One CRD as a CSV describes it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdDescription {
    /// The CRD's name (`<plural>.<group>`).
    pub name: String,
    /// The API version of the kind.
    pub version: String,
    /// The kind.
    pub kind: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Kubernetes resources the custom resource creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<ApiResourceReference>>,
    /// UI hints for status fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_descriptors: Option<Vec<Descriptor>>,
    /// UI hints for spec fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_descriptors: Option<Vec<Descriptor>>,
    /// UI hints for actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_descriptors: Option<Vec<Descriptor>>,
}

impl CrdDescription {
    /// The API group of the CRD, from its name `<plural>.<group>`; empty when the
    /// name has no dot (the core group, which no CRD can have: the name is invalid).
    pub fn group(&self) -> &str {
        crd_group(&self.name)
    }
}

/// The API group in a CRD name `<plural>.<group>` (`widgets.example.com` →
/// `example.com`); empty when the name has no dot.
pub fn crd_group(name: &str) -> &str {
    name.split_once('.').map_or("", |(_, group)| group)
}

#[cfg(test)]
mod crd_name_tests {
    use super::crd_group;

    #[test]
    fn the_group_follows_the_first_dot() {
        assert_eq!(crd_group("widgets.example.com"), "example.com");
        assert_eq!(crd_group("a.b"), "b");
        assert_eq!(crd_group("widgets"), "");
    }
}

/// Aggregated APIs a CSV owns and requires.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ApiServiceDefinitions {
    /// APIServices the operator serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<Vec<ApiServiceDescription>>,
    /// APIServices the operator needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<ApiServiceDescription>>,
}

/// One aggregated API as a CSV describes it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDescription {
    /// The name (`<version>.<group>`).
    pub name: String,
    /// The API group.
    pub group: String,
    /// The API version.
    pub version: String,
    /// The kind.
    pub kind: String,
    /// The Deployment that serves the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    /// The container port the API is served on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Kubernetes resources the API creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<ApiResourceReference>>,
    /// UI hints for status fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_descriptors: Option<Vec<Descriptor>>,
    /// UI hints for spec fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_descriptors: Option<Vec<Descriptor>>,
    /// UI hints for actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_descriptors: Option<Vec<Descriptor>>,
}

/// A Kubernetes resource kind that a custom resource uses.
///
/// Every field is optional here although OLM's schema requires them:
/// published bundles omit them, and the list is only a UI hint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ApiResourceReference {
    /// The resource's plural name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The API version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A UI hint for one field of a custom resource (spec, status or action descriptor).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// The field's path.
    pub path: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Descriptor URNs such as `urn:alm:descriptor:com.tectonic.ui:text`.
    #[serde(rename = "x-descriptors", default, skip_serializing_if = "Option::is_none")]
    pub x_descriptors: Option<Vec<String>>,
    /// A default value, any JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::any_value")]
    pub value: Option<serde_json::Value>,
}

/// The kinds of webhook a CSV can declare.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum WebhookAdmissionType {
    /// A validating admission webhook.
    ValidatingAdmissionWebhook,
    /// A mutating admission webhook.
    MutatingAdmissionWebhook,
    /// A CRD conversion webhook (the older form; see `conversionwebhookdefinitions`).
    ConversionWebhook,
}

/// A webhook that the operator serves and OLM registers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDescription {
    /// The webhook's name.
    pub generate_name: String,
    /// The kind of webhook.
    #[serde(rename = "type")]
    pub type_: WebhookAdmissionType,
    /// The Deployment that serves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    /// The port of the Service OLM creates for it (default 443).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    /// The container's port, a number or a name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
    /// Admission rules (`admissionregistration.k8s.io/v1` RuleWithOperations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<k8s_openapi::api::admissionregistration::v1::RuleWithOperations>>,
    /// `Fail` or `Ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    /// `Exact` or `Equivalent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
    /// Selects the objects the webhook sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// `None`, `NoneOnDryRun`, `Some` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<String>,
    /// The call timeout in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// AdmissionReview versions the webhook accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_review_versions: Option<Vec<String>>,
    /// `Never` or `IfNeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
    /// The HTTP path of the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    /// CRDs converted by a `ConversionWebhook`.
    #[serde(rename = "conversionCRDs", default, skip_serializing_if = "Option::is_none")]
    pub conversion_crds: Option<Vec<String>>,
}

/// A CRD conversion webhook that the operator serves.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversionWebhookDescription {
    /// The webhook's name.
    pub generate_name: String,
    /// The Deployment that serves it.
    pub deployment_name: String,
    /// A URL to call instead of a Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The Service port (default 443).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    /// The container's port, a number or a name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
    /// The HTTP path of the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    /// The CRDs it converts.
    #[serde(rename = "conversionCRDs")]
    pub conversion_crds: Vec<String>,
    /// ConversionReview versions it accepts.
    pub conversion_review_versions: Vec<String>,
}

/// A maintainer of the operator.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Maintainer {
    /// The maintainer's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The maintainer's e-mail address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

/// A named link.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct AppLink {
    /// The link's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// An icon, base64-encoded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Icon {
    /// The image data, base64.
    #[serde(rename = "base64data")]
    pub data: String,
    /// The media type, e.g. `image/svg+xml`.
    #[serde(rename = "mediatype")]
    pub media_type: String,
}

/// An image the operator uses.
///
/// Both fields are optional here although OLM's schema requires them:
/// published bundles leave some out, and the list only feeds mirroring tools.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct RelatedImage {
    /// A name for the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The image reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// Whether OLM deletes the operator's custom resources with the CSV.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct CleanupSpec {
    /// Delete the custom resources when the CSV is deleted.
    pub enabled: bool,
}

/// The shapes of OperatorGroup an operator can run in.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub enum InstallModeType {
    /// The OperatorGroup targets its own namespace.
    OwnNamespace,
    /// The OperatorGroup targets one other namespace.
    SingleNamespace,
    /// The OperatorGroup targets several namespaces.
    MultiNamespace,
    /// The OperatorGroup targets all namespaces.
    AllNamespaces,
}

/// Whether an install mode is supported.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct InstallMode {
    /// The install mode.
    #[serde(rename = "type")]
    pub type_: InstallModeType,
    /// Whether the operator supports it.
    pub supported: bool,
}

/// The phases of a ClusterServiceVersion.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum CsvPhase {
    /// Accepted, but the install has not been attempted (often unmet requirements).
    Pending,
    /// Requirements met; the install strategy has not run yet.
    InstallReady,
    /// The install strategy is running.
    Installing,
    /// Installed and healthy.
    Succeeded,
    /// The install failed.
    Failed,
    /// The state could not be determined.
    Unknown,
    /// A newer CSV is taking over.
    Replacing,
    /// Replaced, and about to be deleted.
    Deleting,
}

/// Why a ClusterServiceVersion is in its phase (OLM's reason strings).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum CsvReason {
    /// Requirements have not been checked yet.
    RequirementsUnknown,
    /// A requirement is missing.
    RequirementsNotMet,
    /// All requirements are met.
    #[serde(rename = "AllRequirementsMet")]
    RequirementsMet,
    /// Another CSV owns a resource this one needs to own.
    OwnerConflict,
    /// A component of the install failed; it is retried.
    #[serde(rename = "InstallComponentFailed")]
    ComponentFailed,
    /// A component of the install failed and is not retried.
    #[serde(rename = "InstallComponentFailedNoRetry")]
    ComponentFailedNoRetry,
    /// The install strategy is invalid.
    #[serde(rename = "InvalidInstallStrategy")]
    InvalidStrategy,
    /// Waiting for the install to become healthy.
    #[serde(rename = "InstallWaiting")]
    Waiting,
    /// The install succeeded.
    #[serde(rename = "InstallSucceeded")]
    InstallSuccessful,
    /// The install did not become healthy in time.
    InstallCheckFailed,
    /// An installed component is unhealthy.
    ComponentUnhealthy,
    /// A newer CSV is replacing this one.
    BeingReplaced,
    /// A newer CSV has replaced this one.
    Replaced,
    /// The install must be redone.
    NeedsReinstall,
    /// Certificates must be rotated.
    NeedsCertRotation,
    /// A resource of an owned APIService is wrong.
    #[serde(rename = "APIServiceResourceIssue")]
    ApiServiceResourceIssue,
    /// Resources of an owned APIService must be reinstalled.
    #[serde(rename = "APIServiceResourcesNeedReinstall")]
    ApiServiceResourcesNeedReinstall,
    /// Installing an owned APIService failed.
    #[serde(rename = "APIServiceInstallFailed")]
    ApiServiceInstallFailed,
    /// This CSV is a copy in a target namespace.
    Copied,
    /// The install modes are invalid.
    InvalidInstallModes,
    /// The OperatorGroup selects no namespace.
    NoTargetNamespaces,
    /// The OperatorGroup's shape is not an install mode the CSV supports.
    UnsupportedOperatorGroup,
    /// The namespace has no OperatorGroup.
    NoOperatorGroup,
    /// The namespace has more than one OperatorGroup.
    TooManyOperatorGroups,
    /// Another OperatorGroup already provides the same APIs.
    InterOperatorGroupOwnerConflict,
    /// A static OperatorGroup's provided APIs cannot change.
    CannotModifyStaticOperatorGroupProvidedAPIs,
    /// The cluster changed under the CSV.
    DetectedClusterChange,
    /// A webhook description is invalid.
    InvalidWebhookDescription,
    /// The operator said it cannot be upgraded now.
    OperatorConditionNotUpgradeable,
    /// Waiting for custom resources to be cleaned up.
    #[serde(rename = "WaitingOnCleanup")]
    WaitingForCleanupToComplete,
}

/// The observed state of a ClusterServiceVersion.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionStatus {
    /// The current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<CsvPhase>,
    /// Why the CSV is in this phase, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the CSV is in this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CsvReason>,
    /// When the status was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the phase last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The history of phase transitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CsvCondition>>,
    /// The status of each requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirement_status: Option<Vec<RequirementStatus>>,
    /// When the certificates of owned APIServices and webhooks were last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_last_updated: Option<Time>,
    /// When those certificates rotate next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_rotate_at: Option<Time>,
    /// Progress of the cleanup of custom resources while the CSV is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupStatus>,
}

/// One entry in the phase history of a ClusterServiceVersion.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CsvCondition {
    /// The phase entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<CsvPhase>,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CsvReason>,
    /// When the entry was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the phase was entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// The state of one requirement or dependent.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum StatusReason {
    /// The requirement exists.
    Present,
    /// The requirement does not exist.
    NotPresent,
    /// The requirement exists but does not satisfy the CSV.
    PresentNotSatisfied,
    /// The CRD exists but is not Established.
    PresentNotAvailable,
    /// A dependent is satisfied.
    Satisfied,
    /// A dependent is not satisfied.
    NotSatisfied,
}

/// The status of one requirement of a CSV (a CRD, an API, a service account...).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequirementStatus {
    /// The requirement's API group.
    pub group: String,
    /// The requirement's API version.
    pub version: String,
    /// The requirement's kind.
    pub kind: String,
    /// The requirement's name.
    pub name: String,
    /// Whether it is there.
    pub status: StatusReason,
    /// Details.
    pub message: String,
    /// The requirement's UID, when it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Requirements of this requirement (e.g. a service account's permissions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependents: Option<Vec<DependentStatus>>,
}

/// The status of a requirement of a requirement.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct DependentStatus {
    /// The dependent's API group.
    pub group: String,
    /// The dependent's API version.
    pub version: String,
    /// The dependent's kind.
    pub kind: String,
    /// Whether it is satisfied.
    pub status: StatusReason,
    /// The dependent's UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Custom resources still waiting to be deleted while the CSV is deleted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupStatus {
    /// Custom resources blocked on finalizers, by group and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_deletion: Option<Vec<ResourceList>>,
}

/// Custom resources of one group and kind.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ResourceList {
    /// The API group.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The objects.
    pub instances: Vec<ResourceInstance>,
}

/// One custom resource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ResourceInstance {
    /// Its name.
    pub name: String,
    /// Its namespace; empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ClusterServiceVersion {
    /// The install modes this CSV declares as supported.
    pub fn supported_install_modes(&self) -> impl Iterator<Item = InstallModeType> + '_ {
        self.spec
            .install_modes
            .iter()
            .flatten()
            .filter(|mode| mode.supported)
            .map(|mode| mode.type_)
    }

    /// The CRDs this CSV owns.
    pub fn owned_crds(&self) -> &[CrdDescription] {
        self.spec
            .custom_resource_definitions
            .as_ref()
            .and_then(|crds| crds.owned.as_deref())
            .unwrap_or_default()
    }

    /// The CRDs this CSV requires from other operators.
    pub fn required_crds(&self) -> &[CrdDescription] {
        self.spec
            .custom_resource_definitions
            .as_ref()
            .and_then(|crds| crds.required.as_deref())
            .unwrap_or_default()
    }

    /// Drops what only people and consoles read (icon, descriptions, keywords,
    /// maintainers, links, provider, related images, the CRDs' and API services'
    /// descriptors): the fields no controller decides anything on. Caches keep
    /// CSVs this way, since an icon alone is often hundreds of kilobytes. Never
    /// write an object trimmed so back.
    pub fn drop_presentation(&mut self) {
        let spec = &mut self.spec;
        spec.icon = None;
        spec.description = None;
        spec.keywords = None;
        spec.maintainers = None;
        spec.links = None;
        spec.provider = None;
        spec.related_images = None;
        let crds = spec.custom_resource_definitions.iter_mut().flat_map(|crds| {
            crds.owned
                .iter_mut()
                .flatten()
                .chain(crds.required.iter_mut().flatten())
        });
        for crd in crds {
            crd.display_name = None;
            crd.description = None;
            crd.resources = None;
            crd.status_descriptors = None;
            crd.spec_descriptors = None;
            crd.action_descriptors = None;
        }
        let api_services = spec.api_service_definitions.iter_mut().flat_map(|apis| {
            apis.owned
                .iter_mut()
                .flatten()
                .chain(apis.required.iter_mut().flatten())
        });
        for api in api_services {
            api.display_name = None;
            api.description = None;
            api.resources = None;
            api.status_descriptors = None;
            api.spec_descriptors = None;
            api.action_descriptors = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_the_presentation_keeps_what_controllers_read() {
        let mut csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "db.v1.0.0", "namespace": "team", "annotations": {"a": "b"}},
            "spec": {
                "displayName": "DB",
                "description": "a long description",
                "icon": [{"base64data": "AAAA", "mediatype": "image/png"}],
                "keywords": ["db"],
                "version": "1.0.0",
                "replaces": "db.v0.9.0",
                "install": {"strategy": "deployment", "spec": {"deployments": []}},
                "installModes": [{"type": "OwnNamespace", "supported": true}],
                "customresourcedefinitions": {"owned": [{
                    "name": "dbs.demo.io", "version": "v1", "kind": "Database",
                    "description": "a database", "displayName": "Database",
                    "specDescriptors": [{"path": "size", "displayName": "Size"}],
                }]},
            },
        }))
        .expect("a valid CSV");
        let before = csv.clone();
        csv.drop_presentation();
        assert_eq!(csv.spec.icon, None);
        assert_eq!(csv.spec.description, None);
        assert_eq!(csv.spec.keywords, None);
        let owned = &csv.owned_crds()[0];
        assert_eq!(
            (owned.name.as_str(), owned.kind.as_str()),
            ("dbs.demo.io", "Database")
        );
        assert_eq!(owned.description, None);
        assert_eq!(owned.spec_descriptors, None);
        assert_eq!(csv.spec.install, before.spec.install);
        assert_eq!(csv.spec.install_modes, before.spec.install_modes);
        assert_eq!(csv.spec.replaces, before.spec.replaces);
        assert_eq!(csv.metadata, before.metadata);
    }
}
