//! The API types of olm-rs: OLM's `operators.coreos.com` kinds and our own
//! `substrate.olm-rs.dev` and `model.olm-rs.dev` kinds, with the enums, labels and annotations they use.
//! No client code lives here.
//!
//! - [`v1alpha1`]: ClusterServiceVersion, InstallPlan, Subscription, CatalogSource.
//! - [`v1`]: OperatorGroup (and its still-served `v1alpha2` form), OLMConfig, Operator.
//! - [`v2`]: OperatorCondition (its `v1` form is in [`v1`]).
//! - [`substrate`]: MachinePool and Machine.
//! - [`model`]: the operator model's kinds (`model.olm-rs.dev`): Relation, Action.
//! - [`packages`]: the PackageManifest aggregated API (not a CRD).
//! - [`actions`]: the actions (day-2 operations) a CSV declares, with their parameter schemas.
//! - [`endpoints`]: the relation endpoints a CSV declares (`provides`, `requires`, `peers`).
//! - [`relation_data`]: how an operator in pods asks for its relations' remote data (env or mount).
//! - [`labels`]: well-known labels and annotations.
//! - [`crds`]: every CustomResourceDefinition, as the generator writes them to `crds/`.
//! - [`manifest`]: reading these objects from YAML or JSON files with errors that name the file and field.

// Several `printcolumn(...)` entries in one `#[kube(...)]` each carry a
// `type_`; clippy takes those for one repeated attribute.
#![allow(clippy::duplicated_attributes)]

pub mod actions;
pub mod crds;
pub mod declaration;
pub mod endpoints;
pub mod labels;
pub mod manifest;
pub mod model;
pub mod packages;
pub mod relation_data;
pub mod replicas;
pub mod schema;
pub mod substrate;
pub mod v1;
pub mod v1alpha1;
pub mod v2;

/// The API group of OLM's kinds.
pub const OPERATORS_GROUP: &str = "operators.coreos.com";
