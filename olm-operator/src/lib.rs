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
//! - [`controllers::operator`] keeps one cluster-scoped `Operator` per
//!   installed package (`<package>.<namespace>`), listing the objects labelled
//!   `operators.coreos.com/<package>.<namespace>` with their conditions, and
//!   removes it once none is left.
//! - [`context::Context`] is what every reconcile gets; every write to the API
//!   server goes through its methods and olm-runtime's fenced writer, so only
//!   the replica holding the Lease writes.
//! - [`metrics::Metrics`] holds OLM's `csv_*` metrics beside olm-runtime's
//!   reconcile, leader and write metrics.
//! - [`watches`] says which controller watches what: one shared watch per
//!   kind, whose [`stores`] the reconciles read.
//! - [`run()`] builds olm-runtime's `Runtime` (telemetry, leader election,
//!   the admin server, shutdown) and runs both [`controllers()`] on it until a
//!   shutdown signal; the binary's `main` only parses [`Args`] and calls it.

pub mod context;
pub mod controllers;
pub mod fields;
pub mod metrics;
mod run;
pub mod stores;
pub mod watches;

pub use run::{Args, LEASE_NAME, RunError, controllers, run};
