//! `OperatorCondition` (`v1`): still served; the storage version is
//! [`crate::v2::OperatorCondition`], which adds `spec.conditions`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The status is the same in both versions: only `spec.conditions` is new in `v2`.
pub use crate::v2::OperatorConditionStatus;
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
