//! The controller's wiring against a mocked API server: one reconcile reads
//! the stores and queues the Action, writing its status once, onto the copy
//! it read; a finished Action past its retention is deleted.

use std::sync::Arc;

use kube::Client;
use olm_api::{model::Action, substrate::Machine, v1alpha1::ClusterServiceVersion};
use olm_testkit::mock_api::{Answer, MockApi};

use super::{Sources, reconcile};
use crate::{context::Context, stores::Cache};

const PATH: &str = "/apis/model.olm-rs.dev/v1alpha1/namespaces/ns/actions/backup-1";

fn from<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("an object")
}

fn csv() -> ClusterServiceVersion {
    from(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "db.v1.0.0", "namespace": "ns",
            "labels": {"operators.coreos.com/db.ns": ""},
            "annotations": {"olm-rs.dev/actions": "backup: {params: {path: {type: string}}, required: [path]}"}},
        "spec": {"displayName": "db", "install": {"strategy": "machine",
            "spec": {"pool": "edge", "hooks": {"configMap": "hooks"}}}},
        "status": {"phase": "Succeeded"},
    }))
}

fn machine() -> Machine {
    from(serde_json::json!({
        "apiVersion": "substrate.olm-rs.dev/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": "edge-a", "namespace": "ns"},
        "spec": {"pool": "edge"},
        "status": {"units": [{"csv": "db.v1.0.0", "version": "1.0.0", "state": "active"}]},
    }))
}

fn action() -> Action {
    from(serde_json::json!({
        "apiVersion": "model.olm-rs.dev/v1alpha1",
        "kind": "Action",
        "metadata": {"name": "backup-1", "namespace": "ns", "uid": "uid-a", "generation": 1,
            "resourceVersion": "41", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"operator": "db", "action": "backup", "params": {"path": "/srv"}},
    }))
}

fn sources(action: &Action) -> Sources {
    Sources {
        csvs: Cache::listed([csv()]),
        machines: Cache::listed([machine()]),
        actions: Cache::listed([action.clone()]),
        jobs: Cache::listed([]),
        pods: Cache::listed([]),
    }
}

fn api_server(action: &Action) -> (Client, MockApi) {
    let action = serde_json::to_value(action).expect("JSON");
    MockApi::new(move |request| {
        request
            .line
            .contains("/actions/")
            .then(|| Answer::ok(action.clone()))
    })
}

#[tokio::test]
async fn a_reconcile_queues_the_action_once_onto_the_copy_it_read() {
    let (client, api) = api_server(&action());
    let ctx = Arc::new(Context::for_tests(client));
    reconcile(Arc::new(action()), ctx, sources(&action()))
        .await
        .expect("a reconcile");
    let status_line = format!("PATCH {PATH}/status");
    assert_eq!(api.lines(), std::slice::from_ref(&status_line));
    let patch = api.last_body(&status_line).expect("the status");
    let tests: Vec<&serde_json::Value> = patch
        .as_array()
        .expect("a JSON Patch")
        .iter()
        .filter(|op| op["op"] == "test")
        .collect();
    assert_eq!(
        tests,
        [
            &serde_json::json!({"op": "test", "path": "/metadata/uid", "value": "uid-a"}),
            &serde_json::json!({"op": "test", "path": "/metadata/resourceVersion", "value": "41"}),
        ]
    );
    let status = &patch.as_array().unwrap().last().unwrap()["value"];
    assert_eq!(status["phase"], "pending", "{status}");
    assert_eq!(status["conditions"][0]["reason"], "Queued", "{status}");
    assert_eq!(status["tasks"][0]["unit"], "edge-a", "{status}");

    // With that status held, nothing is written again.
    let mut settled = action();
    settled.status = Some(from(status.clone()));
    let (client, api) = api_server(&settled);
    let ctx = Arc::new(Context::for_tests(client));
    reconcile(Arc::new(settled.clone()), ctx, sources(&settled))
        .await
        .expect("a reconcile");
    assert!(api.lines().is_empty(), "{:?}", api.lines());
}

#[tokio::test]
async fn a_finished_action_past_its_retention_is_deleted() {
    let mut done = action();
    done.status = Some(from(serde_json::json!({
        "observedGeneration": 1, "phase": "failed", "completedAt": "2026-01-01T00:00:00Z",
        "message": "refused",
        "conditions": [{"type": "Accepted", "status": "False", "reason": "NotInstalled",
            "message": "refused", "observedGeneration": 1,
            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    })));
    let (client, api) = api_server(&done);
    let mut ctx = Context::for_tests(client);
    ctx.settings.action_retention.age = std::time::Duration::from_secs(60);
    reconcile(Arc::new(done.clone()), Arc::new(ctx), sources(&done))
        .await
        .expect("a reconcile");
    assert_eq!(api.lines(), [format!("DELETE {PATH}")]);
    let body = api.last_body(&format!("DELETE {PATH}")).expect("delete options");
    assert_eq!(body["preconditions"]["uid"], "uid-a", "{body}");
}
