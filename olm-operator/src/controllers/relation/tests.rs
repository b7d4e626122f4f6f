//! The controller's wiring against a mocked API server: one reconcile reads
//! the stores and writes the Relation's bags and status, and only once; both
//! sides are in pods, so each also gets its ConfigMap of remote data, Role
//! and RoleBinding.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Client, ResourceExt};
use olm_api::{model::Relation, v1alpha1::ClusterServiceVersion};
use olm_testkit::mock_api::{Answer, MockApi};

use super::{Sources, reconcile};
use crate::{context::Context, stores::Cache};

const STATUS: &str = "PATCH /apis/model.olm-rs.dev/v1alpha1/namespaces/ns/relations/app-db/status";
const BAGS: [&str; 2] = [
    "PATCH /apis/model.olm-rs.dev/v1alpha1/namespaces/ns/databags/app-db.app",
    "PATCH /apis/model.olm-rs.dev/v1alpha1/namespaces/ns/databags/app-db.db",
];

/// Each side's ConfigMap, Role and RoleBinding, in sorted order.
const POD_SIDES: [&str; 6] = [
    "PATCH /api/v1/namespaces/ns/configmaps/app-db.app.remote",
    "PATCH /api/v1/namespaces/ns/configmaps/app-db.db.remote",
    "PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/ns/rolebindings/app-db.app.remote",
    "PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/ns/rolebindings/app-db.db.remote",
    "PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/ns/roles/app-db.app.remote",
    "PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/ns/roles/app-db.db.remote",
];

fn from<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("an object")
}

fn csv(package: &str, endpoints: &str) -> ClusterServiceVersion {
    from(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("{package}.v1.0.0"), "namespace": "ns",
            "labels": {format!("operators.coreos.com/{package}.ns"): ""},
            "annotations": {"olm-rs.dev/endpoints": endpoints}},
        "spec": {"displayName": package, "install": {"strategy": "deployment"}},
        "status": {"phase": "Succeeded"},
    }))
}

fn relation() -> Relation {
    from(serde_json::json!({
        "apiVersion": "model.olm-rs.dev/v1alpha1",
        "kind": "Relation",
        "metadata": {"name": "app-db", "namespace": "ns", "uid": "uid-r", "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"endpoints": [{"application": "app"}, {"application": "db", "endpoint": "db"}]},
    }))
}

fn api_server(relation: &Relation) -> (Client, MockApi) {
    let relation = serde_json::to_value(relation).expect("JSON");
    MockApi::new(move |request| {
        if !request.line.contains("/relations/") {
            // A server-side apply answers with the object applied.
            return Some(Answer::ok(request.body.clone()));
        }
        request
            .line
            .contains("/relations/")
            .then(|| Answer::ok(relation.clone()))
    })
}

#[tokio::test]
async fn a_reconcile_writes_the_status_once() {
    let sources = Sources {
        csvs: Cache::listed([
            csv("app", "requires: {db: {interface: postgresql}}"),
            csv("db", "provides: {db: {interface: postgresql}}"),
        ]),
        relations: Cache::listed([relation()]),
        machines: Cache::listed([]),
        databags: Cache::listed([]),
        configmaps: Cache::listed([]),
    };
    let (client, api) = api_server(&relation());
    let ctx = Arc::new(Context::for_tests(client));
    reconcile(Arc::new(relation()), ctx, sources.clone())
        .await
        .expect("a reconcile");
    let lines = api.lines();
    assert_eq!(lines[..2], BAGS);
    assert_eq!(lines.last().map(String::as_str), Some(STATUS));
    let mut pods: Vec<&str> = lines[2..lines.len() - 1].iter().map(String::as_str).collect();
    pods.sort_unstable();
    assert_eq!(pods, POD_SIDES);
    let data: ConfigMap = from(api.last_body(POD_SIDES[0]).expect("the ConfigMap"));
    assert_eq!(data.labels()["model.olm-rs.dev/endpoint"], "db");
    assert_eq!(data.owner_references()[0].uid, "uid-r");
    let bag: olm_api::model::Databag = from(api.last_body(BAGS[1]).expect("the bag"));
    assert_eq!(bag.spec.application, "db");
    assert_eq!(bag.owner_references()[0].uid, "uid-r");
    let body = api.last_body(STATUS).expect("the status");
    assert_eq!(body["status"]["conditions"][0]["reason"], "Related", "{body}");
    assert_eq!(body["status"]["endpoints"][1]["role"], "provides", "{body}");

    // With that status and those bags held, nothing is written again.
    let bags = BAGS.map(|line| from(api.last_body(line).expect("a bag")));
    let configmaps = [POD_SIDES[0], POD_SIDES[1]].map(|line| from(api.last_body(line).expect("a ConfigMap")));
    let sources = Sources {
        databags: Cache::listed(bags),
        configmaps: Cache::listed(configmaps),
        ..sources
    };
    let mut settled = relation();
    settled.status = Some(from(body["status"].clone()));
    let (client, api) = api_server(&settled);
    let ctx = Arc::new(Context::for_tests(client));
    reconcile(Arc::new(settled), ctx, sources)
        .await
        .expect("a reconcile");
    assert!(api.lines().is_empty(), "{:?}", api.lines());
}
