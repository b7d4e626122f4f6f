//! `substrate.olm-rs.dev/v1alpha1`: MachinePool and Machine, the machine
//! substrate that lets operators drive software on machines, not only in pods.

mod join;
mod machine;
mod machinepool;

pub use join::*;
pub use machine::*;
pub use machinepool::*;

/// The API group of the machine substrate.
pub const GROUP: &str = "substrate.olm-rs.dev";
