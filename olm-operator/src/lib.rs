//! olm-operator: the controllers for ClusterServiceVersions and OperatorGroups.
//!
//! - [`controllers::csv`] installs a ClusterServiceVersion: it checks the
//!   OperatorGroup of its namespace, its install modes and its requirements,
//!   then server-side applies its service accounts, RBAC and Deployments and
//!   walks OLM's phases (Pending, InstallReady, Installing, Succeeded, and
//!   Replacing, Deleting on upgrades). Each reconcile runs the steps
//!   dereference → validate → build → apply → update_status, in one module each.
//! - [`controllers::operatorgroup`] keeps an OperatorGroup's
//!   `status.namespaces` and its `olm.providedAPIs` annotation.
//! - [`context::Context`] is what every reconcile gets; every write to the API
//!   server goes through its methods, so the shared runtime crate can take them
//!   over in one place.
//! - [`metrics::Metrics`] holds OLM's `csv_*` metrics and reconcile counters.
//! - [`run`] wires both controllers together until a shutdown signal; the
//!   binary's `main` only parses [`Args`] and calls it.

pub mod admin;
pub mod context;
pub mod controllers;
pub mod metrics;
mod run;

pub use run::{Args, run, run_controllers};
