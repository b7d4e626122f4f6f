//! `operators.coreos.com/v1`: OperatorGroup, and the still-served form of OperatorCondition.

pub mod operatorcondition;
mod operatorgroup;

pub use operatorcondition::OperatorCondition;
pub use operatorgroup::*;
