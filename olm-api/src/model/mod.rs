//! `model.olm-rs.dev/v1alpha1`: the operator model's own kinds, after Juju's:
//! for now the Relation, which joins two endpoints of installed operators.

mod relation;

pub use relation::*;

/// The API group of the operator model.
pub const GROUP: &str = "model.olm-rs.dev";
