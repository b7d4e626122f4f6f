//! `model.olm-rs.dev/v1alpha1`: the operator model's own kinds, after Juju's:
//! the Relation, which joins two endpoints of installed operators, and the
//! OperatorRevision, what was installed for one version of an operator.

mod relation;
mod revision;

pub use relation::*;
pub use revision::*;

/// The API group of the operator model.
pub const GROUP: &str = "model.olm-rs.dev";
