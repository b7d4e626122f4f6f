//! `Operator` (`v1`, cluster-scoped): one per installed package, named
//! `<package>.<namespace>`, listing the objects that make up the install.
//!
//! Its components are the objects labelled
//! `operators.coreos.com/<package>.<namespace>` (see
//! [`crate::labels::operator_label`]); `status.components.refs` references
//! each with its status conditions copied in. OLM's clients (the console,
//! `kubectl operator list-operands` and `uninstall`) read it to find what an
//! install consists of.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The spec of an Operator: empty, as in OLM.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "Operator",
    plural = "operators",
    status = "OperatorStatus",
    category = "olm",
    derive = "PartialEq",
    derive = "Default",
    doc = "Operator represents a cluster operator."
)]
pub struct OperatorSpec {}

/// The observed state of an Operator and its components.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OperatorStatus {
    /// The resources that compose the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Components>,
}

/// The resources that compose an operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Components {
    /// The label query that selects the operator's components.
    pub label_selector: LabelSelector,
    /// References to the operator's components, selected by `labelSelector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refs: Option<Vec<RichReference>>,
}

/// A reference to a component, with its status conditions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RichReference {
    /// The API version of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The kind of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The name of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The namespace of the component (none for cluster-scoped ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The UID of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The resource version referred to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// A part of the object, if the reference is to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
    /// The latest state of the component: its `status.conditions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<ComponentCondition>>,
}

/// One status condition of a component, as the component reports it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentCondition {
    /// The type of the condition.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The reason for the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The transition in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the condition was last probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the condition last went from one status to another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}
