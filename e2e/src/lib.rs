//! End-to-end tests of olm-rs; they need the cluster named by `KUBECONFIG` (see `hack/cluster.sh`).
//!
//! The harness they use is the `olm-testkit` crate (a client, CRDs, a namespace per test, waits,
//! the binaries as processes). What is only e2e's lives here: [`inprocess`] runs the
//! catalog-operator's registry server and controllers inside a test; [`images`] builds and
//! pushes bundle and catalog images; [`bundle_catalogs`] serves their catalogs to a test's
//! catalog-operator; [`bench`] is what the bench binaries read alike; [`milestones`] is where an install's time goes; [`rollbacks`] reads rollbacks back.

pub mod api_service;
pub mod bench;
pub mod bundle_catalogs;
pub mod chaos;
pub mod images;
pub mod inprocess;
pub mod kubectl;
pub mod milestones;
pub mod rollbacks;
