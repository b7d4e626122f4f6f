//! `OperatorGroup`: the namespaces the operators of a namespace serve, and
//! the service account they are installed with.

use k8s_openapi::{
    api::core::v1::ObjectReference,
    apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time},
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// The spec of an OperatorGroup. Every field is optional: an empty spec
/// targets all namespaces, and a missing spec is defaulted to an empty one.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OperatorGroup",
    plural = "operatorgroups",
    namespaced,
    status = "OperatorGroupStatus",
    shortname = "og",
    category = "olm",
    derive = "PartialEq",
    doc = "OperatorGroup selects the namespaces that the operators installed in its namespace serve."
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupSpec {
    /// Selects the target namespaces by label. Ignored when `targetNamespaces` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The target namespaces, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub target_namespaces: Option<Vec<String>>,
    /// The service account whose permissions bound what operators of this group may install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Do not update the `olm.providedAPIs` annotation.
    #[serde(
        rename = "staticProvidedAPIs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub static_provided_apis: Option<bool>,
    /// How operators of this group are upgraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_strategy: Option<UpgradeStrategy>,
}

/// How operators of an OperatorGroup are upgraded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct UpgradeStrategy {
    /// The strategy.
    #[serde(default)]
    pub name: UpgradeStrategyName,
}

/// The upgrade strategies of an OperatorGroup.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum UpgradeStrategyName {
    /// A failed install must be fixed before the next upgrade.
    #[default]
    Default,
    /// A newer InstallPlan may supersede a failed one.
    TechPreviewUnsafeFailForward,
}

/// The observed state of an OperatorGroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupStatus {
    /// The `metadata.generation` this status was computed for (an olm-rs
    /// addition, for GitOps tools that wait on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The target namespaces; `[""]` means all namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub namespaces: Option<Vec<String>>,
    /// The service account named by the spec, once found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ObjectReference>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
    /// Standard conditions: OLM's `MultipleOperatorGroup` and
    /// `OperatorGroupServiceAccount`, and kstatus' `Ready`, `Reconciling` and `Stalled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}

/// The `v1alpha2` form of OperatorGroup, still served for old manifests.
pub mod v1alpha2 {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The spec of a `v1alpha2` OperatorGroup.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[kube(
        group = "operators.coreos.com",
        version = "v1alpha2",
        kind = "OperatorGroup",
        plural = "operatorgroups",
        namespaced,
        status = "super::OperatorGroupStatus",
        shortname = "og",
        category = "olm",
        derive = "PartialEq",
        doc = "OperatorGroup (v1alpha2) selects the namespaces that the operators of its namespace serve."
    )]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupSpec {
        /// Selects the target namespaces by label.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub selector: Option<LabelSelector>,
        /// The target namespaces, by name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub target_namespaces: Option<Vec<String>>,
        /// The service account used to install operators of this group.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_name: Option<String>,
        /// Do not update the `olm.providedAPIs` annotation.
        #[serde(
            rename = "staticProvidedAPIs",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        pub static_provided_apis: Option<bool>,
    }
}
