//! `ClusterServiceVersion`: one version of an operator, and how to install it.
//!
//! Field names, optionality and enum strings follow OLM's
//! `operators.coreos.com/v1alpha1` API exactly, so every CSV written for OLM
//! reads and writes back unchanged. Parts that OLM leaves open (deployment
//! specs, descriptor values) stay opaque JSON.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::NamedInstallStrategy;
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
