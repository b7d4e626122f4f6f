//! The harness against a real API server: a test's namespace is labelled and deleted when the
//! test passes, kept when it fails, and OLM's CRDs install.
//!
//! Run with `cargo test -p olm-testkit -- --ignored` and KUBECONFIG set (`hack/cluster.sh`).

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, ResourceExt, runtime::wait::conditions};
use olm_testkit::{NAMESPACE_LABEL, client, delete_namespace, install_crds, wait_for, with_namespace};

/// Where a test body leaves the name of its namespace for the checks after it.
type Seen = Arc<Mutex<Option<String>>>;

fn seen_name(seen: &Seen) -> String {
    seen.lock().unwrap().clone().expect("the test ran")
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_passed_tests_namespace_is_labelled_then_deleted() {
    let seen = Seen::default();
    let record = seen.clone();
    with_namespace("harness", |client, ns| async move {
        let namespace = Api::<Namespace>::all(client)
            .get(&ns)
            .await
            .expect("the namespace exists");
        assert_eq!(
            namespace.labels().get(NAMESPACE_LABEL).map(String::as_str),
            Some("harness")
        );
        *record.lock().unwrap() = Some(ns);
    })
    .await;
    let name = seen_name(&seen);
    let namespaces = Api::<Namespace>::all(client().await);
    let after = namespaces.get_opt(&name).await.expect("read the namespace");
    assert!(
        after.is_none_or(|n| n.metadata.deletion_timestamp.is_some()),
        "namespace {name} is being deleted"
    );
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_failed_tests_namespace_is_kept() {
    let seen = Seen::default();
    let record = seen.clone();
    let failed = tokio::spawn(with_namespace("harness-fail", |_, ns| async move {
        *record.lock().unwrap() = Some(ns);
        panic!("a failing test");
    }))
    .await;
    assert!(failed.is_err_and(|e| e.is_panic()), "the test's panic goes on");
    let name = seen_name(&seen);
    let client = client().await;
    let kept = Api::<Namespace>::all(client.clone())
        .get(&name)
        .await
        .expect("the namespace is kept");
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "{name} is not being deleted"
    );
    delete_namespace(&client, &name).await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn olms_crds_install_and_are_established() {
    let client = client().await;
    let crds = install_crds(&client).await;
    assert!(!crds.is_empty());
    let api = Api::all(client);
    for crd in crds {
        let name = crd.name_any();
        let established = wait_for(&api, &name, "the CRD exists", conditions::is_crd_established()).await;
        assert!(established.is_some(), "{name}");
    }
}
