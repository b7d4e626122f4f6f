//! `model.olm-rs.dev/v1alpha1`: the operator model's own kinds, after Juju's:
//! the Relation, which joins two endpoints of installed operators, and the
//! Action, which runs an action an operator declares on its units.

mod action;
mod relation;

pub use action::*;
pub use relation::*;

/// The API group of the operator model.
pub const GROUP: &str = "model.olm-rs.dev";
