//! `operators.coreos.com/v1`: OperatorGroup, OLMConfig, and the still-served form of OperatorCondition.

mod olmconfig;
pub mod operatorcondition;
mod operatorgroup;

pub use olmconfig::*;
pub use operatorcondition::OperatorCondition;
pub use operatorgroup::*;
