//! The controller's wiring against a mocked API server: which requests one
//! reconcile sends, in which order, and that a plan with nothing to do sends
//! no write.

use std::sync::Arc;

use kube::{Client, runtime::controller::Action};
use olm_api::v1alpha1::{
    ClusterServiceVersion, InstallPlan, InstallPlanPhase, InstallPlanStatus, StepStatus,
};
use olm_runtime::{Leadership, apply::Writer};
use olm_testkit::mock_api::{Answer, MockApi, Request};
use serde_json::{Value, json};

use super::{reconcile, waits_for_api};
use crate::{
    catalogs::CatalogStore,
    controllers::{Context, Options, Stores},
    metrics::CatalogMetrics,
};

const STATUS: &str =
    "PATCH /apis/operators.coreos.com/v1alpha1/namespaces/team/installplans/install-1/status";
const CRD: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/dbs.demo.io";
const CSV: &str = "/apis/operators.coreos.com/v1alpha1/namespaces/team/clusterserviceversions/db.v1";
const DB_CONFIG: &str = "/api/v1/namespaces/team/configmaps/db-config";
const APP_CONFIG: &str = "/api/v1/namespaces/team/configmaps/app-config";

/// The plan `install-1` of namespace `team`: bundle db.v1 (a CRD, its CSV, a
/// ConfigMap) then bundle app.v1 (a ConfigMap), the steps in `steps`.
fn plan(phase: &str, approved: bool, steps: [&str; 4]) -> InstallPlan {
    let step = |bundle: &str,
                (group, version, kind, name): (&str, &str, &str, &str),
                status: &str,
                manifest: Value| {
        let api_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        let mut manifest = manifest;
        manifest["apiVersion"] = api_version.into();
        manifest["kind"] = kind.into();
        manifest["metadata"] = json!({"name": name});
        json!({
            "resolving": bundle, "status": status,
            "resource": {"sourceName": "demo", "sourceNamespace": "olm", "group": group,
                         "version": version, "kind": kind, "name": name,
                         "manifest": manifest.to_string()},
        })
    };
    let csv_spec = json!({"spec": {"displayName": "DB", "install": {"strategy": "deployment", "spec": {"deployments": []}}}});
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "InstallPlan",
        "metadata": {"name": "install-1", "namespace": "team", "uid": "uid-plan", "generation": 1},
        "spec": {"clusterServiceVersionNames": ["db.v1", "app.v1"], "approval": "Manual", "approved": approved},
        "status": {
            "phase": phase,
            "catalogSources": ["demo"],
            "plan": [
                step("db.v1", ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "dbs.demo.io"), steps[0],
                     json!({"spec": {"group": "demo.io"}})),
                step("db.v1", ("operators.coreos.com", "v1alpha1", "ClusterServiceVersion", "db.v1"), steps[1], csv_spec),
                step("db.v1", ("", "v1", "ConfigMap", "db-config"), steps[2], json!({"data": {"k": "db"}})),
                step("app.v1", ("", "v1", "ConfigMap", "app-config"), steps[3], json!({"data": {"k": "app"}})),
            ],
        },
    }))
    .expect("a valid InstallPlan")
}

/// The discovery document of `group_version` serving `(plural, kind, namespaced)`.
fn served(group_version: &str, resources: &[(&str, &str, bool)]) -> Answer {
    let resources: Vec<Value> = resources
        .iter()
        .map(|(plural, kind, namespaced)| {
            json!({"name": plural, "singularName": "", "namespaced": namespaced, "kind": kind,
                   "verbs": ["get", "list", "create", "patch"]})
        })
        .collect();
    Answer::ok(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                      "resources": resources}),
    )
}

/// An API server that serves the plan's kinds, holds none of its objects,
/// gives a written CSV the UID `uid-applied` and answers a status write with
/// `plan` carrying that status; it records every request.
fn api_server(plan: &InstallPlan) -> (Client, MockApi) {
    api_server_where(plan, |_| None)
}

/// [`api_server`], but answering as `first` says where it says anything.
fn api_server_where(
    plan: &InstallPlan,
    first: impl Fn(&Request) -> Option<Answer> + Send + Sync + 'static,
) -> (Client, MockApi) {
    let plan = serde_json::to_value(plan).expect("JSON");
    MockApi::new(move |request: &Request| first(request).or_else(|| answer(&plan, request)))
}

/// What [`api_server`] answers to `request`.
fn answer(plan: &Value, request: &Request) -> Option<Answer> {
    let (method, path) = request.line.split_once(' ').expect("METHOD /path");
    match (method, path) {
        ("GET", "/apis/apiextensions.k8s.io/v1") => Some(served(
            "apiextensions.k8s.io/v1",
            &[("customresourcedefinitions", "CustomResourceDefinition", false)],
        )),
        ("GET", "/apis/operators.coreos.com/v1alpha1") => Some(served(
            "operators.coreos.com/v1alpha1",
            &[("clusterserviceversions", "ClusterServiceVersion", true)],
        )),
        ("GET", "/api/v1") => Some(served("v1", &[("configmaps", "ConfigMap", true)])),
        ("GET", _) => Some(Answer::failure(404, "NotFound")),
        ("PATCH", CSV) => {
            let mut csv = request.body.clone();
            csv["metadata"]["uid"] = "uid-applied".into();
            Some(Answer::ok(csv))
        }
        ("PATCH", _) if request.line == STATUS => {
            let mut answer = plan.clone();
            answer["status"] = request.body["status"].clone();
            Some(Answer::ok(answer))
        }
        _ => None,
    }
}

/// A context on `client` whose stores hold `plan` and the CSVs `csvs`.
fn context(client: Client, plan: &InstallPlan, csvs: Vec<ClusterServiceVersion>) -> Arc<Context> {
    let metrics = olm_runtime::metrics::Metrics::new().expect("metrics");
    let stores = Stores {
        install_plans: olm_testkit::stores::listed([plan.clone()]),
        csvs: olm_testkit::stores::listed(csvs),
        ..Stores::empty()
    };
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

/// CSV `name` of namespace `team`, as the store holds it.
fn csv(name: &str, uid: &str) -> ClusterServiceVersion {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": "team", "uid": uid},
        "spec": {"displayName": name, "install": {"strategy": "deployment", "spec": {"deployments": []}}},
    }))
    .expect("a CSV")
}

/// The writes `api` received, as `METHOD /path`.
fn writes(api: &MockApi) -> Vec<String> {
    api.writes().into_iter().map(|r| r.line).collect()
}

/// The status of the `n`th status write `api` received.
fn status_written(api: &MockApi, n: usize) -> InstallPlanStatus {
    let body = api
        .requests()
        .into_iter()
        .filter(|r| r.line == STATUS)
        .nth(n)
        .expect("a status write")
        .body;
    serde_json::from_value(body["status"].clone()).expect("a status")
}

fn step_statuses(status: &InstallPlanStatus) -> Vec<StepStatus> {
    status.plan.iter().flatten().map(|s| s.status).collect()
}

#[tokio::test]
async fn an_approved_plan_applies_its_steps_in_stages_then_writes_its_status() {
    let plan = plan("RequiresApproval", true, ["NotPresent"; 4]);
    let (client, api) = api_server(&plan);
    // The CSV of bundle app.v1 is live already; that of db.v1 is a step.
    let ctx = context(client, &plan, vec![csv("app.v1", "uid-app")]);
    let action = reconcile(Arc::new(plan.clone()), ctx).await.expect("reconciled");
    assert_eq!(action, Action::await_change());
    assert_eq!(
        writes(&api),
        [
            // The CRDs, the CSVs, the rest of both bundles, then the end.
            format!("PATCH {CRD}"),
            format!("PATCH {CSV}"),
            format!("PATCH {DB_CONFIG}"),
            format!("PATCH {APP_CONFIG}"),
            STATUS.to_owned(),
        ]
    );
    let done = status_written(&api, 0);
    assert_eq!(done.phase, InstallPlanPhase::Complete);
    assert_eq!(step_statuses(&done), [StepStatus::Created; 4]);
    assert_eq!(done.observed_generation, Some(1));
    let owner =
        api.last_body(&format!("PATCH {DB_CONFIG}")).expect("sent")["metadata"]["ownerReferences"][0].clone();
    assert_eq!(
        (
            owner["kind"].as_str(),
            owner["name"].as_str(),
            owner["uid"].as_str()
        ),
        (Some("ClusterServiceVersion"), Some("db.v1"), Some("uid-applied")),
        "the bundle's objects are owned by the CSV the plan applied"
    );
    let owner = api.last_body(&format!("PATCH {APP_CONFIG}")).expect("sent")["metadata"]["ownerReferences"]
        [0]["uid"]
        .clone();
    assert_eq!(owner, "uid-app", "or by the CSV in the store");
}

#[tokio::test]
async fn a_resumed_plan_applies_only_what_is_left_owned_by_the_csv_in_the_store() {
    let plan = plan(
        "Installing",
        true,
        ["Present", "Created", "NotPresent", "NotPresent"],
    );
    let csvs = vec![csv("db.v1", "uid-stored"), csv("app.v1", "uid-app")];
    let (client, api) = api_server(&plan);
    reconcile(Arc::new(plan.clone()), context(client, &plan, csvs))
        .await
        .expect("reconciled");
    assert_eq!(
        writes(&api),
        [
            format!("PATCH {DB_CONFIG}"),
            format!("PATCH {APP_CONFIG}"),
            STATUS.to_owned()
        ]
    );
    assert!(
        !api.lines()
            .iter()
            .any(|line| line.contains("clusterserviceversions")),
        "the CSV's UID comes from the store: {:?}",
        api.lines()
    );
    let owner = api.last_body(&format!("PATCH {DB_CONFIG}")).expect("sent")["metadata"]["ownerReferences"][0]
        ["uid"]
        .clone();
    assert_eq!(owner, "uid-stored");
}

#[tokio::test]
async fn a_plan_with_nothing_to_do_sends_no_request() {
    for plan in [
        plan("Complete", true, ["Created"; 4]),
        plan(
            "Failed",
            true,
            ["Created", "NotPresent", "NotPresent", "NotPresent"],
        ),
        plan("RequiresApproval", false, ["NotPresent"; 4]),
    ] {
        let (client, api) = api_server(&plan);
        let action = reconcile(Arc::new(plan.clone()), context(client, &plan, Vec::new()))
            .await
            .expect("reconciled");
        assert_eq!(action, Action::await_change());
        assert_eq!(
            api.lines(),
            Vec::<String>::new(),
            "{:?}",
            plan.status.map(|s| s.phase)
        );
    }
}

#[tokio::test]
async fn a_step_whose_api_is_not_served_waits_and_looks_again() {
    let plan = plan(
        "Installing",
        true,
        ["Created", "Created", "Created", "NotPresent"],
    );
    // Discovery of the core group does not serve ConfigMaps (yet).
    let (client, api) = api_server_where(&plan, |request| {
        (request.line == "GET /api/v1").then(|| served("v1", &[]))
    });
    let action = reconcile(Arc::new(plan.clone()), context(client, &plan, Vec::new()))
        .await
        .expect("reconciled");
    assert_eq!(action, Action::requeue(super::decide::RETRY));
    assert_eq!(api.lines(), ["GET /api/v1", STATUS]);
    let waiting = status_written(&api, 0);
    assert_eq!(waiting.phase, InstallPlanPhase::Installing);
    assert_eq!(step_statuses(&waiting)[3], StepStatus::WaitingForApi);
    assert!(
        waiting
            .message
            .as_deref()
            .is_some_and(|m| m.contains("app-config")),
        "{:?}",
        waiting.message
    );
}

/// A refused step write: retried (a missing permission) or failing the plan
/// (an invalid object), recorded in the status naming the step (table).
#[tokio::test]
async fn a_refused_step_is_recorded_and_retried_or_fails_the_plan() {
    let cases = [
        (
            403,
            "Forbidden",
            InstallPlanPhase::Installing,
            Action::requeue(super::decide::RETRY),
        ),
        (422, "Invalid", InstallPlanPhase::Failed, Action::await_change()),
    ];
    for (code, reason, phase, then) in cases {
        let plan = plan(
            "Installing",
            true,
            ["Created", "Created", "Created", "NotPresent"],
        );
        let (client, api) = api_server_where(&plan, move |request| {
            (request.line == format!("PATCH {APP_CONFIG}")).then(|| Answer::failure(code, reason))
        });
        let ctx = context(client, &plan, vec![csv("app.v1", "uid-app")]);
        let action = reconcile(Arc::new(plan.clone()), ctx).await.expect("reconciled");
        assert_eq!(action, then, "{reason}");
        assert_eq!(
            writes(&api),
            [format!("PATCH {APP_CONFIG}"), STATUS.to_owned()],
            "{reason}"
        );
        let written = status_written(&api, 0);
        assert_eq!(written.phase, phase, "{reason}");
        let message = written.message.unwrap_or_default();
        assert!(
            message.contains("ConfigMap app-config") && message.contains(reason),
            "{reason}: {message}"
        );
    }
}

#[test]
fn only_an_installing_plan_with_a_step_waiting_for_its_api_waits_for_one() {
    let plan = |phase: &str, step: &str| -> InstallPlan {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "InstallPlan",
            "metadata": {"name": "install-1", "namespace": "team"},
            "spec": {"clusterServiceVersionNames": [], "approval": "Automatic", "approved": true},
            "status": {
                "phase": phase,
                "catalogSources": [],
                "plan": [{
                    "resolving": "db.v1.0.0",
                    "status": step,
                    "resource": {
                        "sourceName": "cat", "sourceNamespace": "olm", "group": "demo.io",
                        "version": "v1", "kind": "Database", "name": "db",
                    },
                }],
            },
        }))
        .expect("a valid InstallPlan")
    };
    assert!(waits_for_api(&plan("Installing", "WaitingForApi")));
    assert!(!waits_for_api(&plan("Installing", "Created")));
    assert!(!waits_for_api(&plan("Failed", "WaitingForApi")));
}

/// A CRD step serves the group its name ends with; other steps serve none
/// that a later stage must read discovery for again.
#[test]
fn a_crd_step_serves_the_group_of_its_name() {
    let step = |group: &str, kind: &str, name: &str| -> olm_api::v1alpha1::Step {
        serde_json::from_value(json!({
            "resolving": "db.v1", "status": "NotPresent",
            "resource": {"sourceName": "demo", "sourceNamespace": "olm", "group": group,
                         "version": "v1", "kind": kind, "name": name},
        }))
        .expect("a step")
    };
    let crd = step("apiextensions.k8s.io", "CustomResourceDefinition", "dbs.demo.io");
    assert_eq!(super::crd_group(&crd), Some("demo.io"));
    let config = step("", "ConfigMap", "db.config");
    assert_eq!(super::crd_group(&config), None);
}

/// The discovery requests `api` received.
fn discovery_reads(api: &MockApi) -> Vec<String> {
    let discovery = [
        "GET /api/v1",
        "GET /apis/apiextensions.k8s.io/v1",
        "GET /apis/operators.coreos.com/v1alpha1",
    ];
    api.lines()
        .into_iter()
        .filter(|line| discovery.contains(&line.as_str()))
        .collect()
}

#[tokio::test]
async fn discovery_is_read_once_and_kept_for_the_next_plans() {
    let plan = plan("Installing", true, ["NotPresent"; 4]);
    let (client, api) = api_server(&plan);
    let ctx = context(client, &plan, Vec::new());
    reconcile(Arc::new(plan.clone()), ctx.clone())
        .await
        .expect("reconciled");
    assert_eq!(discovery_reads(&api).len(), 3, "{:?}", api.lines());
    reconcile(Arc::new(plan.clone()), ctx.clone())
        .await
        .expect("reconciled");
    assert_eq!(
        discovery_reads(&api).len(),
        3,
        "the second pass reads none: {:?}",
        api.lines()
    );
    // A change of a CRD of a group drops the answers of that group only.
    ctx.discovered.forget_group("apiextensions.k8s.io");
    reconcile(Arc::new(plan.clone()), ctx).await.expect("reconciled");
    assert_eq!(
        discovery_reads(&api)[3..],
        ["GET /apis/apiextensions.k8s.io/v1".to_owned()],
        "{:?}",
        api.lines()
    );
}

#[tokio::test]
async fn a_kind_missing_from_kept_discovery_is_read_again_in_the_next_pass() {
    let plan = plan(
        "Installing",
        true,
        ["Created", "Created", "Created", "NotPresent"],
    );
    // The first discovery of the core group does not serve ConfigMaps; later ones do.
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let first_read = reads.clone();
    let (client, api) = api_server_where(&plan, move |request| {
        let first = request.line == "GET /api/v1"
            && first_read.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        first.then(|| served("v1", &[]))
    });
    let ctx = context(client, &plan, vec![csv("app.v1", "uid-app")]);
    reconcile(Arc::new(plan.clone()), ctx.clone())
        .await
        .expect("reconciled");
    assert_eq!(api.lines(), ["GET /api/v1", STATUS]);
    reconcile(Arc::new(plan.clone()), ctx).await.expect("reconciled");
    assert_eq!(
        discovery_reads(&api),
        ["GET /api/v1", "GET /api/v1"],
        "{:?}",
        api.lines()
    );
    assert!(
        writes(&api).contains(&format!("PATCH {APP_CONFIG}")),
        "{:?}",
        api.lines()
    );
}

#[tokio::test]
async fn the_objects_of_every_stage_are_read_before_the_first_write() {
    let plan = plan("Installing", true, ["NotPresent"; 4]);
    let (client, api) = api_server(&plan);
    reconcile(Arc::new(plan.clone()), context(client, &plan, Vec::new()))
        .await
        .expect("reconciled");
    let lines = api.lines();
    let first_write = lines
        .iter()
        .position(|line| line.starts_with("PATCH"))
        .expect("a write");
    for object in [CRD, CSV, DB_CONFIG, APP_CONFIG] {
        let read = lines.iter().position(|line| *line == format!("GET {object}"));
        assert!(
            read.is_some_and(|read| read < first_write),
            "GET {object} before any write: {lines:#?}"
        );
    }
    assert_eq!(
        lines
            .iter()
            .filter(|line| line.starts_with("GET /api/v1/namespaces"))
            .count(),
        2,
        "each object read once: {lines:#?}"
    );
}
