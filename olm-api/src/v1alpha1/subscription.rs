//! `Subscription`: a wish to have a package installed from a catalog channel
//! and kept up to date.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{
        Affinity, EnvFromSource, EnvVar, ObjectReference, ResourceRequirements, Toleration, Volume,
        VolumeMount,
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, Time},
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Approval, ConditionStatus};

/// The spec of a Subscription.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "Subscription",
    plural = "subscriptions",
    namespaced,
    status = "SubscriptionStatus",
    shortname = "sub",
    shortname = "subs",
    category = "olm",
    derive = "PartialEq",
    doc = "Subscription keeps an operator installed from a catalog channel and up to date.",
    printcolumn(
        name = "Package",
        type_ = "string",
        json_path = ".spec.name",
        description = "The package subscribed to"
    ),
    printcolumn(
        name = "Source",
        type_ = "string",
        json_path = ".spec.source",
        description = "The catalog source for the specified package"
    ),
    printcolumn(
        name = "Channel",
        type_ = "string",
        json_path = ".spec.channel",
        description = "The channel of updates to subscribe to"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionSpec {
    /// The CatalogSource to install from.
    #[serde(rename = "source")]
    pub catalog_source: String,
    /// The namespace of that CatalogSource.
    #[serde(rename = "sourceNamespace")]
    pub catalog_source_namespace: String,
    /// The package to install.
    #[serde(rename = "name")]
    pub package: String,
    /// The channel to follow; the package's default channel when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The CSV to install first, instead of the channel head.
    #[serde(rename = "startingCSV", default, skip_serializing_if = "Option::is_none")]
    pub starting_csv: Option<String>,
    /// Whether InstallPlans run by themselves or wait for approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_approval: Option<Approval>,
    /// Settings merged into the operator's Deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<SubscriptionConfig>,
}

/// Settings that a Subscription merges into the Deployments of its operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionConfig {
    /// Selects the pods to configure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Node selector for the operator's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations for the operator's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Compute resources of the operator's containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Sources of environment variables for the operator's containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// Environment variables for the operator's containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Volumes added to the operator's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    /// Volume mounts added to the operator's containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    /// Affinity of the operator's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Annotations added to the operator's Deployments and pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// Where a Subscription stands with respect to its channel.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum SubscriptionState {
    /// The installed CSV is the newest one the catalog knows.
    AtLatestKnown,
    /// An InstallPlan to upgrade exists and is being worked on.
    UpgradePending,
    /// A newer CSV exists in the channel.
    UpgradeAvailable,
    /// The upgrade failed.
    UpgradeFailed,
}

/// The condition types of a Subscription (OLM's "abnormal-true" polarity).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum SubscriptionConditionType {
    /// Some CatalogSources that resolution uses are unhealthy.
    CatalogSourcesUnhealthy,
    /// The referenced InstallPlan is missing.
    InstallPlanMissing,
    /// The referenced InstallPlan is pending.
    InstallPlanPending,
    /// The referenced InstallPlan failed.
    InstallPlanFailed,
    /// Resolution failed; the message says why.
    ResolutionFailed,
    /// The subscribed bundle is deprecated.
    BundleDeprecated,
    /// The subscribed channel is deprecated.
    ChannelDeprecated,
    /// The subscribed package is deprecated.
    PackageDeprecated,
    /// Some deprecation applies.
    Deprecated,
    /// A bundle image of the Subscription's InstallPlan is being pulled and unpacked.
    BundleUnpacking,
    /// A bundle image of the Subscription's InstallPlan could not be pulled or is not a
    /// bundle; the message names the image and the cause.
    BundleUnpackFailed,
    /// kstatus: True exactly when Argo CD would call the Subscription Healthy.
    Ready,
    /// kstatus: present (True) only while an install or upgrade is under way.
    Reconciling,
    /// kstatus: present (True) only when no progress is possible without a change
    /// (Argo CD's Degraded).
    Stalled,
    /// olm-rs's own: present while the Subscription asks for a rollback
    /// (annotation `olm-rs.dev/rollback-to`): True once the revision asked
    /// for is installed again and its CSV Succeeded (the Subscription is held
    /// there until the annotation is removed), False while it is on its way
    /// or when it is refused (the reason says why, the message what to do).
    RolledBack,
    /// olm-rs's own: present (True) while automatic rollback is on for the
    /// Subscription and its deadline (annotation
    /// `olm-rs.dev/auto-rollback-deadline`, or OLMConfig's
    /// `spec.features.autoRollbackDeadline`) cannot be read: the message names
    /// where it is written and why, and the default deadline applies.
    AutoRollbackInvalid,
}

/// Why a Subscription condition has its status: OLM's reason strings, plus ours
/// for the kstatus conditions (Ready, Reconciling, Stalled).
///
/// OLM's CRD keeps the reason an open string and other OLM versions write
/// reasons this list lacks, so an unknown reason is kept as it is
/// ([`SubscriptionConditionReason::Other`]) rather than refused.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum SubscriptionConditionReason {
    /// Every catalog the Subscription uses is healthy.
    AllCatalogSourcesHealthy,
    /// A catalog the Subscription uses is unhealthy.
    UnhealthyCatalogSourceFound,
    /// No set of bundles meets the Subscription's constraints.
    ConstraintsNotSatisfiable,
    /// The InstallPlan waits for approval.
    RequiresApproval,
    /// The InstallPlan is being applied.
    Installing,
    /// The InstallPlan failed.
    InstallComponentFailed,
    /// Something the Subscription installs or keeps is deprecated.
    Deprecated,
    /// The installed CSV is the newest the catalog offers.
    AtLatestKnown,
    /// An upgrade or install is under way.
    UpgradePending,
    /// The install or upgrade failed.
    UpgradeFailed,
    /// The InstallPlan the Subscription refers to no longer exists.
    ReferencedInstallPlanNotFound,
    /// Resolution succeeded, but a bundle the Subscription prefers (a newer version) cannot be
    /// taken, most often because an installed operator needs the package as it is (olm-rs's own,
    /// on ResolutionFailed with status False).
    UpgradeHeldBack,
    /// A bundle image is being unpacked (on BundleUnpacking).
    UnpackingInProgress,
    /// A bundle image could not be unpacked (on BundleUnpackFailed).
    BundleUnpackFailed,
    /// The revision asked for is being installed again (on RolledBack, False).
    RollingBack,
    /// The revision asked for is installed again and held (on RolledBack, True).
    RolledBack,
    /// Refused: no recorded revision has the name or number asked for.
    RevisionNotFound,
    /// Refused: the revision lacks objects that did not fit in it (`spec.omitted`).
    RevisionIncomplete,
    /// Refused: a manifest of the revision cannot be read back.
    RevisionCorrupt,
    /// Refused: a CRD of the revision does not declare a version that objects are
    /// stored in (`status.storedVersions`).
    StoredVersionsDropped,
    /// Refused: existing custom resources of a CRD the revision changes do not
    /// validate against the revision's schema for their version.
    CustomResourcesInvalid,
    /// Refused while an InstallPlan of the Subscription is still applying.
    UpgradeInFlight,
    /// Refused: an installed operator of the namespace needs the current version
    /// (a package range, an API or an `olm.constraint`) that the revision does not meet.
    RollbackBreaksDependents,
    /// The automatic rollback's deadline cannot be read (on AutoRollbackInvalid).
    DeadlineUnreadable,
    /// A reason written by someone else, kept as it is.
    Other(String),
}

impl SubscriptionConditionReason {
    /// Every reason olm-rs writes.
    pub const KNOWN: [SubscriptionConditionReason; 24] = [
        Self::AllCatalogSourcesHealthy,
        Self::UnhealthyCatalogSourceFound,
        Self::ConstraintsNotSatisfiable,
        Self::RequiresApproval,
        Self::Installing,
        Self::InstallComponentFailed,
        Self::Deprecated,
        Self::AtLatestKnown,
        Self::UpgradePending,
        Self::UpgradeFailed,
        Self::ReferencedInstallPlanNotFound,
        Self::UpgradeHeldBack,
        Self::UnpackingInProgress,
        Self::BundleUnpackFailed,
        Self::RollingBack,
        Self::RolledBack,
        Self::RevisionNotFound,
        Self::RevisionIncomplete,
        Self::RevisionCorrupt,
        Self::StoredVersionsDropped,
        Self::CustomResourcesInvalid,
        Self::UpgradeInFlight,
        Self::RollbackBreaksDependents,
        Self::DeadlineUnreadable,
    ];

    /// The reason as written in the condition.
    pub fn as_str(&self) -> &str {
        match self {
            Self::AllCatalogSourcesHealthy => "AllCatalogSourcesHealthy",
            Self::UnhealthyCatalogSourceFound => "UnhealthyCatalogSourceFound",
            Self::ConstraintsNotSatisfiable => "ConstraintsNotSatisfiable",
            Self::RequiresApproval => "RequiresApproval",
            Self::Installing => "Installing",
            Self::InstallComponentFailed => "InstallComponentFailed",
            Self::Deprecated => "Deprecated",
            Self::AtLatestKnown => "AtLatestKnown",
            Self::UpgradePending => "UpgradePending",
            Self::UpgradeFailed => "UpgradeFailed",
            Self::ReferencedInstallPlanNotFound => "ReferencedInstallPlanNotFound",
            Self::UpgradeHeldBack => "UpgradeHeldBack",
            Self::UnpackingInProgress => "UnpackingInProgress",
            Self::BundleUnpackFailed => "BundleUnpackFailed",
            Self::RollingBack => "RollingBack",
            Self::RolledBack => "RolledBack",
            Self::RevisionNotFound => "RevisionNotFound",
            Self::RevisionIncomplete => "RevisionIncomplete",
            Self::RevisionCorrupt => "RevisionCorrupt",
            Self::StoredVersionsDropped => "StoredVersionsDropped",
            Self::CustomResourcesInvalid => "CustomResourcesInvalid",
            Self::UpgradeInFlight => "UpgradeInFlight",
            Self::RollbackBreaksDependents => "RollbackBreaksDependents",
            Self::DeadlineUnreadable => "DeadlineUnreadable",
            Self::Other(reason) => reason,
        }
    }
}

impl From<String> for SubscriptionConditionReason {
    fn from(reason: String) -> Self {
        Self::KNOWN
            .into_iter()
            .find(|known| known.as_str() == reason)
            .unwrap_or(Self::Other(reason))
    }
}

impl From<SubscriptionConditionReason> for String {
    fn from(reason: SubscriptionConditionReason) -> Self {
        match reason {
            SubscriptionConditionReason::Other(reason) => reason,
            known => known.as_str().to_owned(),
        }
    }
}

impl std::fmt::Display for SubscriptionConditionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One condition of a Subscription.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCondition {
    /// The condition type.
    #[serde(rename = "type")]
    pub type_: SubscriptionConditionType,
    /// True, False or Unknown.
    pub status: ConditionStatus,
    /// Why, one CamelCase word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub reason: Option<SubscriptionConditionReason>,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the condition was last checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// The observed state of a Subscription.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The CSV the Subscription is moving to.
    #[serde(rename = "currentCSV", default, skip_serializing_if = "Option::is_none")]
    pub current_csv: Option<String>,
    /// The CSV installed by the Subscription.
    #[serde(rename = "installedCSV", default, skip_serializing_if = "Option::is_none")]
    pub installed_csv: Option<String>,
    /// The latest InstallPlan (deprecated form; see `installPlanRef`).
    #[serde(rename = "installplan", default, skip_serializing_if = "Option::is_none")]
    pub install: Option<InstallPlanReference>,
    /// Where the Subscription stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SubscriptionState>,
    /// Why the Subscription is in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The generation of the InstallPlan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_generation: Option<i64>,
    /// The latest InstallPlan that contains the current CSV.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_ref: Option<ObjectReference>,
    /// The health of the CatalogSources resolution uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_health: Option<Vec<SubscriptionCatalogHealth>>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<SubscriptionCondition>>,
    /// When the status was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
}

/// A reference to an InstallPlan (deprecated form).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanReference {
    /// The InstallPlan's API version.
    pub api_version: String,
    /// The InstallPlan's kind.
    pub kind: String,
    /// The InstallPlan's name.
    pub name: String,
    /// The InstallPlan's UID.
    pub uuid: String,
}

/// The health of one CatalogSource, as a Subscription sees it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCatalogHealth {
    /// The CatalogSource.
    pub catalog_source_ref: ObjectReference,
    /// When the health last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
    /// Whether the CatalogSource is healthy.
    pub healthy: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_keep_olms_strings_and_unknown_ones() {
        for reason in SubscriptionConditionReason::KNOWN {
            let json = serde_json::to_value(&reason).unwrap();
            assert_eq!(json, serde_json::json!(reason.as_str()));
            assert_eq!(
                serde_json::from_value::<SubscriptionConditionReason>(json).unwrap(),
                reason
            );
        }
        assert_eq!(
            SubscriptionConditionReason::ConstraintsNotSatisfiable.as_str(),
            "ConstraintsNotSatisfiable"
        );
        let other: SubscriptionConditionReason =
            serde_json::from_value(serde_json::json!("CatalogSourcesAdded")).unwrap();
        assert_eq!(
            other,
            SubscriptionConditionReason::Other("CatalogSourcesAdded".into())
        );
        assert_eq!(
            serde_json::to_value(&other).unwrap(),
            serde_json::json!("CatalogSourcesAdded")
        );
    }
}
