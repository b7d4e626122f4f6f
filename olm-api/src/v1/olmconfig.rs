//! `OLMConfig` (`v1`): the cluster-scoped singleton `cluster` that switches
//! OLM's optional features.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// The name of the one OLMConfig that is read.
pub const OLM_CONFIG_NAME: &str = "cluster";

/// The condition type on the OLMConfig that says whether copied CSVs are off.
pub const DISABLED_COPIED_CSVS: &str = "DisabledCopiedCSVs";

/// The spec of the OLMConfig.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OLMConfig",
    plural = "olmconfigs",
    status = "OlmConfigStatus",
    category = "olm",
    derive = "PartialEq",
    doc = "OLMConfig configures OLM; the one named `cluster` is read."
)]
#[serde(rename_all = "camelCase")]
pub struct OlmConfigSpec {
    /// Optional features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
}

/// OLM's optional features.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// When true, operators that serve all namespaces get no copied CSVs.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "disableCopiedCSVs"
    )]
    pub disable_copied_csvs: Option<bool>,
    /// How often the package server syncs (a duration); kept for compatibility.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_server_sync_interval: Option<String>,
    /// olm-rs's own (OLM ignores it): when true, a failed upgrade of any
    /// Subscription is rolled back to the revision before by itself, unless
    /// the Subscription's annotation `olm-rs.dev/auto-rollback` says `"false"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_rollback: Option<bool>,
    /// olm-rs's own: how long a new CSV may take to reach Succeeded before its
    /// upgrade counts as failed (a duration such as `10m`; 10 minutes when
    /// unset), unless the Subscription's annotation
    /// `olm-rs.dev/auto-rollback-deadline` says otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_rollback_deadline: Option<String>,
}

/// The status of the OLMConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OlmConfigStatus {
    /// Conditions, e.g. [`DISABLED_COPIED_CSVS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}

impl OLMConfig {
    /// Whether copied CSVs are switched off for all-namespace operators.
    pub fn copied_csvs_disabled(&self) -> bool {
        self.spec
            .features
            .as_ref()
            .and_then(|f| f.disable_copied_csvs)
            .unwrap_or(false)
    }

    /// Whether failed upgrades are rolled back by default.
    pub fn auto_rollback(&self) -> bool {
        self.spec
            .features
            .as_ref()
            .and_then(|f| f.auto_rollback)
            .unwrap_or(false)
    }

    /// The default deadline of an upgrade, as written (a duration).
    pub fn auto_rollback_deadline(&self) -> Option<&str> {
        self.spec.features.as_ref()?.auto_rollback_deadline.as_deref()
    }
}
