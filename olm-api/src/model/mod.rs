//! `model.olm-rs.dev/v1alpha1`: the operator model's own kinds, after Juju's:
//! the Relation, which joins two endpoints of installed operators, the
//! Databags that carry each side's data in it, and the leader of an
//! application on machines.

mod databag;
mod leader;
mod relation;

pub use databag::*;
pub use leader::*;
pub use relation::*;

/// The API group of the operator model.
pub const GROUP: &str = "model.olm-rs.dev";
