//! `operators.coreos.com/v1`: OperatorGroup, OLMConfig, Operator, and the still-served form of OperatorCondition.

mod olmconfig;
mod operator;
pub mod operatorcondition;
mod operatorgroup;

pub use olmconfig::*;
pub use operator::*;
pub use operatorcondition::OperatorCondition;
pub use operatorgroup::*;
