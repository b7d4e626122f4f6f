//! The controllers of olm-operator, one module each.

pub mod action;
pub mod copiedcsv;
pub mod csv;
pub mod machinepool;
pub mod operator;
pub mod operatorgroup;
pub mod relation;
