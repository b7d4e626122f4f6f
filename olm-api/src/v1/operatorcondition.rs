//! `OperatorCondition` (`v1`): still served; the storage version is
//! [`crate::v2::OperatorCondition`], which adds `spec.conditions`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{schema, v2::OverrideCondition};

/// The spec of a `v1` OperatorCondition.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OperatorCondition",
    plural = "operatorconditions",
    namespaced,
    status = "OperatorConditionStatus",
    shortname = "condition",
    category = "olm",
    derive = "PartialEq",
    doc = "OperatorCondition (v1) conveys the state of an operator to OLM; an admin may override it."
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionSpec {
    /// The service accounts of the CSV's Deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_accounts: Option<Vec<String>>,
    /// The Deployments of the CSV.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployments: Option<Vec<String>>,
    /// Conditions set by an admin; they win over what the operator reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<OverrideCondition>")]
    pub overrides: Option<Vec<OverrideCondition>>,
}

/// The conditions of a `v1` OperatorCondition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionStatus {
    /// The conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}
