//! `OperatorRevision`: what was installed for one version of an operator,
//! kept once its CSV reached Succeeded, so that it can be installed again
//! without the catalog (a rollback), as Juju keeps a charm's revisions.
//!
//! One object per CSV of a Subscription, named after the CSV, in the
//! Subscription's namespace and owned by it. It holds the manifests the
//! InstallPlan applied for that CSV: the CSV itself, its CRDs and the other
//! bundle objects.
//!
//! Size: the API server refuses an object over about 1.5 MiB, and a bundle's
//! CRDs can be large. A revision keeps each manifest inline (readable with
//! `kubectl get -o yaml`) while they all fit in [`CONTENT_BUDGET`] bytes;
//! beyond it the largest manifests are kept gzipped and base64-encoded
//! (`gzip`), largest first, until they fit; what still does not fit is named
//! in `omitted`, and such a revision is incomplete: it cannot be installed
//! again. Each manifest is one atomic field, so `managedFields` stays small.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// How many bytes of manifests (inline JSON or gzip+base64 text) a revision
/// holds at most: 1 MiB, which leaves room within the API server's ~1.5 MiB
/// for the object's metadata and the entries' names.
pub const CONTENT_BUDGET: usize = 1024 * 1024;

/// The spec of an OperatorRevision: written once, when it is recorded.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "model.olm-rs.dev",
    version = "v1alpha1",
    kind = "OperatorRevision",
    plural = "operatorrevisions",
    namespaced,
    shortname = "orev",
    category = "olm",
    derive = "PartialEq",
    status = "OperatorRevisionStatus",
    doc = "OperatorRevision keeps what was installed for one version of an operator, to install it again.",
    printcolumn(name = "Package", type_ = "string", json_path = ".spec.package"),
    printcolumn(name = "Revision", type_ = "integer", json_path = ".spec.revision"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version"),
    printcolumn(name = "CSV", type_ = "string", json_path = ".spec.clusterServiceVersion"),
    printcolumn(
        name = "Plan",
        type_ = "string",
        priority = 1,
        json_path = ".spec.installPlan"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorRevisionSpec {
    /// The package of the operator.
    pub package: String,
    /// The Subscription it was recorded for.
    pub subscription: String,
    /// Its number among the package's revisions in the namespace: one more
    /// than the highest recorded before it.
    #[schemars(range(min = 1))]
    pub revision: i64,
    /// The CSV that reached Succeeded.
    pub cluster_service_version: String,
    /// The CSV's `spec.version`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The InstallPlan that applied it.
    pub install_plan: String,
    /// The objects the InstallPlan applied for the CSV, in the plan's order.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub objects: Vec<RecordedObject>,
    /// Objects applied for the CSV that do not fit in the revision even
    /// gzipped: while any is named, the revision cannot be installed again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omitted: Vec<ObjectKey>,
}

/// The kind and name of an object.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectKey {
    /// API group (empty for the core group).
    #[serde(default)]
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

/// One object of a revision: its key and its manifest, inline or gzipped
/// (exactly one of `manifest` and `gzip`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordedObject {
    /// The object's kind and name.
    #[serde(flatten)]
    pub key: ObjectKey,
    /// The manifest, as applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::atomic_object")]
    pub manifest: Option<serde_json::Value>,
    /// The manifest's JSON, gzipped and base64-encoded, when it is kept so
    /// for size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gzip: Option<String>,
}

/// The observed state of an OperatorRevision: a subresource like every
/// olm-rs kind's, so that GitOps tools read it the same way. The recording
/// writes none: a revision is whole once created.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorRevisionStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Standard conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}
