//! The controller's wiring against a mocked API server: a Succeeded CSV's
//! plan is read once and its revision created; with that revision held,
//! nothing is read or written; an older revision beyond the limit is removed.

use std::sync::Arc;

use kube::Client;
use olm_api::{
    model::OperatorRevision,
    v1alpha1::{ClusterServiceVersion, InstallPlan, Subscription},
};
use olm_runtime::{Leadership, apply::Writer};
use olm_testkit::mock_api::{Answer, MockApi, Request};
use serde_json::json;

use super::{decide::tests::fixtures::*, reconcile};
use crate::{
    catalogs::CatalogStore,
    controllers::{Context, Options, Stores, trim},
    metrics::CatalogMetrics,
};

const PLAN: &str = "GET /apis/operators.coreos.com/v1alpha1/namespaces/team/installplans/install-2";
const CREATE: &str = "POST /apis/model.olm-rs.dev/v1alpha1/namespaces/team/operatorrevisions";
const REMOVE_V0: &str = "DELETE /apis/model.olm-rs.dev/v1alpha1/namespaces/team/operatorrevisions/db.v0";

fn context(client: Client, stores: Stores) -> Arc<Context> {
    let metrics = olm_runtime::metrics::Metrics::new().expect("metrics");
    Arc::new(Context::new(
        client,
        Writer::new(
            Leadership::standalone(),
            olm_runtime::apply::FIELD_MANAGER_CATALOG,
        ),
        CatalogStore::new(),
        stores,
        Options::default(),
        CatalogMetrics::register(metrics.registry()).expect("metrics"),
        metrics.reconcile.clone(),
    ))
}

/// The stores: the Subscription, its CSV db.v2 Succeeded, the plan that
/// applied it (trimmed, as the store keeps it) and the revisions `revisions`.
fn stores(revisions: Vec<OperatorRevision>) -> Stores {
    let mut stored = plan("install-2", 2, "db.v2");
    trim::install_plan(&mut stored);
    Stores {
        subscriptions: olm_testkit::stores::listed([subscription(None)]),
        csvs: olm_testkit::stores::listed::<ClusterServiceVersion>([csv("db.v2", "Succeeded")]),
        install_plans: olm_testkit::stores::listed::<InstallPlan>([stored]),
        revisions: olm_testkit::stores::listed(revisions),
        ..Stores::empty()
    }
}

fn api_server() -> (Client, MockApi) {
    let whole = serde_json::to_value(plan("install-2", 2, "db.v2")).expect("JSON");
    MockApi::new(move |request: &Request| match request.line.as_str() {
        PLAN => Some(Answer::ok(whole.clone())),
        CREATE => {
            let mut created = request.body.clone();
            created["metadata"]["uid"] = "uid-new".into();
            Some(Answer::ok(created))
        }
        REMOVE_V0 => Some(Answer::ok(
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        )),
        _ => None,
    })
}

#[tokio::test]
async fn a_succeeded_csv_is_recorded_once_and_the_oldest_revision_goes() {
    let sub: Subscription = subscription(None);
    let held = vec![revision("db.v0", 1, "uid-0"), revision("db.v1", 2, "uid-1")];
    let (client, api) = api_server();
    reconcile(Arc::new(sub.clone()), context(client, stores(held)))
        .await
        .expect("a reconcile");
    assert_eq!(api.lines(), [PLAN, CREATE, REMOVE_V0]);
    let body = api.last_body(CREATE).expect("the revision");
    assert_eq!(body["metadata"]["name"], "db.v2", "{body}");
    assert_eq!(body["spec"]["revision"], 3, "{body}");
    assert_eq!(
        body["spec"]["objects"][0]["kind"], "CustomResourceDefinition",
        "{body}"
    );
    assert_eq!(
        body["spec"]["objects"][1]["manifest"]["kind"], "ClusterServiceVersion",
        "{body}"
    );

    // Once recorded (and the oldest gone), nothing is read or written.
    let held = vec![revision("db.v1", 2, "uid-1"), revision("db.v2", 3, "uid-2")];
    let (client, api) = api_server();
    reconcile(Arc::new(sub), context(client, stores(held)))
        .await
        .expect("a reconcile");
    assert!(api.lines().is_empty(), "{:?}", api.lines());
}

const REVISION_V1: &str = "GET /apis/model.olm-rs.dev/v1alpha1/namespaces/team/operatorrevisions/db.v1";
const CRD: &str = "GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/dbs.demo.io";
const APPLY_CRD: &str = "PATCH /apis/apiextensions.k8s.io/v1/customresourcedefinitions/dbs.demo.io";
const APPLY_CSV: &str =
    "PATCH /apis/operators.coreos.com/v1alpha1/namespaces/team/clusterserviceversions/db.v1";
const REMOVE_V2: &str =
    "DELETE /apis/operators.coreos.com/v1alpha1/namespaces/team/clusterserviceversions/db.v2";
const STATUS: &str = "PATCH /apis/operators.coreos.com/v1alpha1/namespaces/team/subscriptions/db/status";

/// A rollback's requests: the revision and its CRD are read live, the
/// current CSV removed, then (once it is gone) the CRD and CSV applied from
/// the revision, and the Subscription's status written after them.
#[tokio::test]
async fn a_rollback_reads_the_revision_removes_the_current_csv_then_installs_it() {
    use super::rollback::tests::{live_crd, whole};

    let mut sub = subscription(None);
    sub.metadata
        .annotations
        .get_or_insert_default()
        .insert("olm-rs.dev/rollback-to".into(), "db.v1".into());
    let revision_json = serde_json::to_value(whole(&["v1"])).expect("JSON");
    let crd_json = live_crd(&["v1"]).1;
    let sub_json = serde_json::to_value(&sub).expect("JSON");
    let api_server = move || {
        let (revision_json, crd_json, sub_json) = (revision_json.clone(), crd_json.clone(), sub_json.clone());
        MockApi::new(move |request: &Request| match request.line.as_str() {
            REVISION_V1 => Some(Answer::ok(revision_json.clone())),
            CRD => Some(Answer::ok(crd_json.clone())),
            APPLY_CRD | APPLY_CSV => Some(Answer::ok(request.body.clone())),
            STATUS => {
                let mut written = sub_json.clone();
                written["status"] = request.body["status"].clone();
                Some(Answer::ok(written))
            }
            REMOVE_V2 => Some(Answer::ok(
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            )),
            _ => None,
        })
    };
    let revisions = || vec![revision("db.v1", 1, "uid-1"), revision("db.v2", 2, "uid-2")];
    let with_csvs = |csvs: Vec<ClusterServiceVersion>| Stores {
        subscriptions: olm_testkit::stores::listed([sub.clone()]),
        csvs: olm_testkit::stores::listed(csvs),
        revisions: olm_testkit::stores::listed(revisions()),
        ..Stores::empty()
    };

    // db.v2 is installed: it goes first.
    let (client, api) = api_server();
    reconcile(
        Arc::new(sub.clone()),
        context(client, with_csvs(vec![csv("db.v2", "Succeeded")])),
    )
    .await
    .expect("a reconcile");
    assert_eq!(api.lines(), [REVISION_V1, CRD, REMOVE_V2, STATUS]);

    // Once it is gone: the CRD and CSV of the revision, then the status.
    let (client, api) = api_server();
    reconcile(Arc::new(sub.clone()), context(client, with_csvs(vec![])))
        .await
        .expect("a reconcile");
    assert_eq!(api.lines(), [REVISION_V1, CRD, APPLY_CRD, APPLY_CSV, STATUS]);
    let status = api.last_body(STATUS).expect("a status");
    assert_eq!(status["status"]["installedCSV"], "db.v1", "{status}");
}
