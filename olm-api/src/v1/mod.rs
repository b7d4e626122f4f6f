//! `operators.coreos.com/v1`: OperatorGroup.

mod operatorgroup;

pub use operatorgroup::*;
