//! `Relation`: a relation between two endpoints of installed operators (the
//! endpoints their CSVs declare, [`crate::endpoints`]), as Juju's
//! `juju integrate A B`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{endpoints::Role, schema};

/// The spec of a Relation: the two sides it joins.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "model.olm-rs.dev",
    version = "v1alpha1",
    kind = "Relation",
    plural = "relations",
    namespaced,
    status = "RelationStatus",
    shortname = "rel",
    category = "olm",
    derive = "PartialEq",
    doc = "Relation joins a provides and a requires endpoint of one interface of two installed operators.",
    printcolumn(name = "A", type_ = "string", json_path = ".spec.endpoints[0].application"),
    printcolumn(name = "B", type_ = "string", json_path = ".spec.endpoints[1].application"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].reason"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type=='Ready')].message"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct RelationSpec {
    /// The two sides of the relation, in any order: one resolves to a
    /// `provides` endpoint, the other to a `requires` endpoint of the same
    /// interface.
    #[schemars(length(min = 2, max = 2))]
    pub endpoints: Vec<ApplicationEndpoint>,
}

/// One side of a relation: an application and, optionally, its endpoint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationEndpoint {
    /// The application: the package of an installed operator (what
    /// `kubectl olm install` takes), or the name of its CSV.
    pub application: String,
    /// The endpoint of the application. Without it, the one endpoint of the
    /// application that fits the other side is taken; when several fit, the
    /// relation is ambiguous and names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The namespace of the application, when it is not the relation's own.
    /// Relating across namespaces needs an offer of the providing side,
    /// which olm-rs does not make yet: such a relation is refused (NeedsOffer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The observed state of a Relation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelationStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The endpoints the relation joins, as resolved; empty while it cannot
    /// be made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<ResolvedEndpoint>,
    /// Standard conditions: `Ready`, with the reason a relation cannot be made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}

/// One endpoint of a relation, as resolved from the CSV that declares it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedEndpoint {
    /// The application, as the spec names it.
    pub application: String,
    /// The namespace of the application.
    pub namespace: String,
    /// The CSV that declares the endpoint.
    pub csv: String,
    /// The endpoint's name.
    pub endpoint: String,
    /// Its role: provides or requires.
    #[schemars(with = "String")]
    pub role: Role,
    /// The interface it speaks.
    pub interface: String,
}

/// The condition types of a Relation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum RelationConditionType {
    /// The relation is made: both applications are installed and their
    /// endpoints fit.
    Ready,
}

impl RelationConditionType {
    /// The condition type as written in `status.conditions[].type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
        }
    }
}

/// The reasons of a Relation's `Ready` condition.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum RelationReason {
    /// The relation is made.
    Related,
    /// The spec cannot be acted on (not two endpoints).
    InvalidSpec,
    /// No CSV of the application is in the namespace, or none has succeeded.
    NotInstalled,
    /// The CSV's endpoint declaration cannot be read.
    InvalidDeclaration,
    /// The application declares no endpoint of that name.
    UnknownEndpoint,
    /// Several endpoints of the application fit the other side.
    AmbiguousEndpoint,
    /// The two endpoints speak different interfaces.
    InterfaceMismatch,
    /// The endpoints are not one provides and one requires (or one is peers).
    RolesNotComplementary,
    /// An endpoint already takes as many relations as its limit allows.
    OverLimit,
    /// The other side is in another namespace and offers nothing there.
    NeedsOffer,
}

impl RelationReason {
    /// Every reason.
    pub const ALL: [RelationReason; 10] = [
        Self::Related,
        Self::InvalidSpec,
        Self::NotInstalled,
        Self::InvalidDeclaration,
        Self::UnknownEndpoint,
        Self::AmbiguousEndpoint,
        Self::InterfaceMismatch,
        Self::RolesNotComplementary,
        Self::OverLimit,
        Self::NeedsOffer,
    ];

    /// The reason as written in `status.conditions[].reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Related => "Related",
            Self::InvalidSpec => "InvalidSpec",
            Self::NotInstalled => "NotInstalled",
            Self::InvalidDeclaration => "InvalidDeclaration",
            Self::UnknownEndpoint => "UnknownEndpoint",
            Self::AmbiguousEndpoint => "AmbiguousEndpoint",
            Self::InterfaceMismatch => "InterfaceMismatch",
            Self::RolesNotComplementary => "RolesNotComplementary",
            Self::OverLimit => "OverLimit",
            Self::NeedsOffer => "NeedsOffer",
        }
    }
}
