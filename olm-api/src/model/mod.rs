//! `model.olm-rs.dev/v1alpha1`: the operator model's own kinds, after Juju's:
//! the Relation, which joins two endpoints of installed operators, the
//! Databags that carry each side's data in it, the leader of an
//! application on machines, the OperatorRevision, what was installed for
//! one version of an operator, and the Action, which runs an action an
//! operator declares on its units.

mod action;
mod databag;
mod leader;
mod relation;
mod revision;

pub use action::*;
pub use databag::*;
pub use leader::*;
pub use relation::*;
pub use revision::*;

/// The API group of the operator model.
pub const GROUP: &str = "model.olm-rs.dev";
