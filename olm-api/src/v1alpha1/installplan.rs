//! `InstallPlan`: the resolved set of objects to create for one or more
//! Subscriptions, with its approval and the status of each step.

use k8s_openapi::{api::core::v1::ObjectReference, apimachinery::pkg::apis::meta::v1::Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConditionStatus;

/// The spec of an InstallPlan.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "InstallPlan",
    plural = "installplans",
    namespaced,
    status = "InstallPlanStatus",
    shortname = "ip",
    category = "olm",
    derive = "PartialEq",
    doc = "InstallPlan is a resolved set of objects to install for the Subscriptions of a namespace.",
    printcolumn(
        name = "CSV",
        type_ = "string",
        json_path = ".spec.clusterServiceVersionNames[0]",
        description = "The first CSV in the list of clusterServiceVersionNames"
    ),
    printcolumn(
        name = "Approval",
        type_ = "string",
        json_path = ".spec.approval",
        description = "The approval mode"
    ),
    printcolumn(name = "Approved", type_ = "boolean", json_path = ".spec.approved")
)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanSpec {
    /// The CatalogSource the plan was resolved from.
    #[serde(rename = "source", default, skip_serializing_if = "Option::is_none")]
    pub catalog_source: Option<String>,
    /// The namespace of that CatalogSource.
    #[serde(rename = "sourceNamespace", default, skip_serializing_if = "Option::is_none")]
    pub catalog_source_namespace: Option<String>,
    /// The CSVs the plan installs.
    #[serde(default)]
    pub cluster_service_version_names: Vec<String>,
    /// Whether the plan runs by itself or waits for approval.
    pub approval: Approval,
    /// Set to true to approve a Manual plan.
    #[serde(default)]
    pub approved: bool,
    /// The resolution generation of the namespace this plan belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

/// Whether an InstallPlan runs by itself or waits for a person.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum Approval {
    /// The plan is executed as soon as it is created.
    #[default]
    Automatic,
    /// The plan waits until `spec.approved` is true.
    Manual,
}

/// The phases of an InstallPlan.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum InstallPlanPhase {
    /// The steps are being worked out.
    Planning,
    /// A Manual plan waits for approval.
    RequiresApproval,
    /// The steps are being applied.
    Installing,
    /// Every step is done.
    Complete,
    /// The plan failed.
    Failed,
}

/// The condition types of an InstallPlan.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum InstallPlanConditionType {
    /// The plan's steps were resolved.
    Resolved,
    /// The plan's steps were applied.
    Installed,
    /// kstatus: True once the plan is Complete.
    Ready,
    /// kstatus: present (True) only while the plan is being applied.
    Reconciling,
    /// kstatus: present (True) only when the plan failed or cannot proceed.
    Stalled,
}

/// Why an InstallPlan condition has its status.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum InstallPlanConditionReason {
    /// The plan is not known yet.
    PlanUnknown,
    /// A check before installing failed.
    InstallCheckFailed,
    /// Dependencies conflict.
    #[serde(rename = "DependenciesConflict")]
    DependencyConflict,
    /// A step failed.
    #[serde(rename = "InstallComponentFailed")]
    ComponentFailed,
    /// A Manual plan waits for `spec.approved`.
    RequiresApproval,
    /// The steps are being applied.
    Installing,
    /// Every step was applied.
    Complete,
}

/// The observed state of an InstallPlan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanStatus {
    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The current phase.
    pub phase: InstallPlanPhase,
    /// Conditions of the plan as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<InstallPlanCondition>>,
    /// The CatalogSources the plan's content comes from.
    #[serde(default)]
    pub catalog_sources: Vec<String>,
    /// The steps, in the order they are applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<Step>>,
    /// Bundles whose content is still being unpacked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_lookups: Option<Vec<BundleLookup>>,
    /// The service account used for a scoped install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attenuated_service_account_ref: Option<ObjectReference>,
    /// The time at which the plan's first attempt started (used for retry timeouts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// A description of the last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One condition of an InstallPlan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanCondition {
    /// The condition type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<InstallPlanConditionType>,
    /// True, False or Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ConditionStatus>,
    /// When the condition was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<InstallPlanConditionReason>,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The state of one step of an InstallPlan.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum StepStatus {
    /// Not known yet.
    Unknown,
    /// The object does not exist yet.
    NotPresent,
    /// The object already existed.
    Present,
    /// The object was created or updated.
    Created,
    /// Waiting for the object's API to be served.
    #[serde(rename = "WaitingForApi")]
    WaitingForApi,
    /// The object's kind is not one an InstallPlan may create.
    UnsupportedResource,
}

/// One object an InstallPlan creates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Step {
    /// The CSV this step belongs to.
    pub resolving: String,
    /// The object.
    pub resource: StepResource,
    /// The step's state.
    pub status: StepStatus,
    /// Optional: whether the step is part of a bundle that can be skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// The object of one step.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct StepResource {
    /// The CatalogSource the object comes from.
    #[serde(rename = "sourceName")]
    pub catalog_source: String,
    /// That CatalogSource's namespace.
    #[serde(rename = "sourceNamespace")]
    pub catalog_source_namespace: String,
    /// The object's API group.
    pub group: String,
    /// The object's API version.
    pub version: String,
    /// The object's kind.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The object itself, as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

/// A request to pull and unpack the content of a bundle.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLookup {
    /// Where the bundle is, usually an image reference.
    pub path: String,
    /// The bundle's (CSV's) name.
    pub identifier: String,
    /// The CSV it replaces.
    pub replaces: String,
    /// The CatalogSource it was resolved from.
    pub catalog_source_ref: Option<ObjectReference>,
    /// Conditions of the lookup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<BundleLookupCondition>>,
    /// Properties of the bundle, as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<String>,
}

/// A condition of a bundle lookup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLookupCondition {
    /// The condition type, e.g. `BundleLookupPending` or `BundleLookupFailed`.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: ConditionStatus,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the condition was last probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}
