//! The olm-rs machine agent: one per machine of a MachinePool (a DaemonSet pod on
//! a cluster node, or a process on a machine joined from outside).
//!
//! - [`agent`]: `machine-agent run`, wiring the parts below on the shared runtime.
//! - [`join`]: joining a pool from outside the cluster with a join token.
//! - [`machine`]: registering the Machine, its status, the heartbeat Lease.
//! - [`units`]: the operators' units and their hooks.
//! - [`actions`]: running the actions that target the units.
//! - [`hook_tool`]: `machine-agent hook ...`, the hooks' way back to the agent.
//! - [`leadership`]: the leader of each application, through its leader Lease.
//! - [`relations`]: the relation hooks of units, and the relation hook tools.
//! - [`endpoints`], [`failover`]: every API server endpoint, and failing over between them.
//! - [`state`]: the state directory.
//! - [`csv_view`]: what the agent reads of a CSV.
//! - [`host`]: the host's facts.
//! - [`cli`]: the command line, and running it (the binary's `main`); [`run_args`]: the flags of `run`.

pub mod actions;
pub mod agent;
pub mod cli;
pub mod csv_view;
pub mod endpoints;
pub mod failover;
pub mod hook_tool;
pub mod host;
pub mod join;
pub mod leadership;
pub mod machine;
pub mod relations;
pub mod run_args;
pub mod state;
pub mod tool_format;
pub mod units;
