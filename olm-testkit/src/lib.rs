//! The harness of olm-rs's cluster tests: the e2e tests and every crate's tests marked
//! `#[ignore = "needs a cluster"]` build on it. They need the cluster named by `KUBECONFIG` (see
//! `hack/cluster.sh`).
//!
//! - [`client`] connects to the cluster in `KUBECONFIG`, or fails saying how to start one;
//! - [`with_namespace`] runs a test in a fresh labelled namespace, deleted afterwards, or kept,
//!   with its objects dumped to stderr, when the test fails;
//! - [`wait_for`] waits for a condition on one object, [`eventually`] for any probe, both with a
//!   deadline;
//! - [`install_crds`] server-side applies the generated `crds/` and waits until they are
//!   Established;
//! - [`corpus_dir`] finds the corpus of real OLM packaging data;
//! - [`process`] builds and starts the binaries as child processes;
//! - [`identity`] gives the operators the ServiceAccounts and RBAC of `manifests/`, and finds
//!   the requests the API server refused them;
//! - [`mock_api`] is a mocked API server, for the tests of a reconcile's apply step and wiring;
//! - [`objects`] writes the OLM objects a user would and tells what state they are in.
//!
//! Starting an operator in-process stays with the tests of its crate: this crate depends on no
//! operator, so that the operators can use it in their own tests.

use std::path::{Path, PathBuf};

use kube::api::DynamicObject;

mod cluster;
mod crds;
pub mod identity;
mod kinds;
pub mod mock_api;
mod namespace;
pub mod objects;
pub mod process;
pub mod stores;
mod wait;

pub use cluster::{client, config};
pub use crds::{install_crd, install_crds, repo_crds};
pub use kinds::{OlmKind, olm};
pub use namespace::{
    NAMESPACE_LABEL, create_namespace, delete_namespace, dump_namespace, random_suffix, with_namespace,
    with_namespace_and_cleanup,
};
pub use objects::apply;
pub use wait::{
    TIMEOUT, eventually, is_deployment_available, poll_until, wait_for, wait_for_within, wait_gone,
};

/// The field manager of every write the tests make.
pub const FIELD_MANAGER: &str = "olm-rs-e2e";

/// Environment variable that overrides where the corpus is.
pub const CORPUS_ENV: &str = "OLM_RS_CORPUS";

/// The root of the repository.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the olm-testkit crate lives in the repository root")
        .to_path_buf()
}

/// The corpus of real OLM packaging data: `$OLM_RS_CORPUS`, or `../shared/corpus` next to the
/// repository (`hack/corpus.sh` assembles it from its public sources; `make test` runs it when
/// neither is there). Panics with an explanation when it is absent.
pub fn corpus_dir() -> PathBuf {
    let dir = match std::env::var_os(CORPUS_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => repo_root().join("../shared/corpus"),
    };
    assert!(
        dir.join("bundles").is_dir(),
        "the OLM corpus is not at {} (no bundles/ in it); set {CORPUS_ENV} to the corpus directory \
         (`make corpus` assembles one and prints where)",
        dir.display()
    );
    dir
}

/// Parses YAML (one document) into a JSON value, panicking with the file name on error.
///
/// A repeated mapping key keeps its last value, as in the Go YAML decoding OLM and kubectl use
/// (sigs.k8s.io/yaml): real CSVs have such keys, and OLM installs them.
pub fn yaml_file(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
    };
    serde_saphyr::from_str_with_options(&text, options)
        .unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// Turns a JSON value into a `DynamicObject`, panicking with `what` on error.
pub fn dynamic(value: serde_json::Value, what: &str) -> DynamicObject {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{what} is not a Kubernetes object: {e}"))
}
