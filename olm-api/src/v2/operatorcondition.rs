//! `OperatorCondition` (`v2`): how an operator tells OLM about its state, and
//! how a cluster admin overrides what it says. OLM makes one per CSV, with the
//! CSV's name, and reads its `Upgradeable` condition before an upgrade.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// The condition type that, when `False`, holds back an upgrade of the operator.
pub const UPGRADEABLE: &str = "Upgradeable";

/// The spec of an OperatorCondition: what OLM fills in (service accounts and
/// Deployments of the CSV), what the operator reports (`conditions`), and what
/// an admin forces (`overrides`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v2",
    kind = "OperatorCondition",
    plural = "operatorconditions",
    namespaced,
    status = "OperatorConditionStatus",
    shortname = "condition",
    category = "olm",
    derive = "PartialEq",
    doc = "OperatorCondition conveys the state of an operator to OLM; an admin may override it."
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionSpec {
    /// The service accounts of the CSV's Deployments, which may update this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_accounts: Option<Vec<String>>,
    /// The Deployments of the CSV.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployments: Option<Vec<String>>,
    /// Conditions set by an admin; they win over what the operator reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<OverrideCondition>")]
    pub overrides: Option<Vec<OverrideCondition>>,
    /// Conditions reported by the operator; OLM copies them into the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}

/// A condition an admin forces. As a standard condition, except that
/// `lastTransitionTime` may be left out.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OverrideCondition {
    /// The condition type, e.g. `Upgradeable`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason.
    pub reason: String,
    /// Why, in words.
    pub message: String,
    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// The generation the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The conditions OLM has observed from the operator (in `v2`, its
/// `spec.conditions`), each stamped with the generation it was copied at. The
/// same in `v1`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionStatus {
    /// The conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}
