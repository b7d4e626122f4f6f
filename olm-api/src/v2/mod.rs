//! `operators.coreos.com/v2`: OperatorCondition (its storage version; `v1` is
//! still served, see [`crate::v1::OperatorCondition`]).

mod operatorcondition;

pub use operatorcondition::*;
