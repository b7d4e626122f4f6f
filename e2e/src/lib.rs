//! End-to-end tests of olm-rs; they need the cluster named by `KUBECONFIG` (see `hack/cluster.sh`).
//!
//! The harness they use is the `olm-testkit` crate (a client, CRDs, a namespace per test, waits,
//! the binaries as processes). What is only e2e's lives here: [`inprocess`] runs the
//! catalog-operator's registry server and controllers inside a test.

pub mod bench;
pub mod bundle_catalogs;
pub mod images;
pub mod inprocess;
