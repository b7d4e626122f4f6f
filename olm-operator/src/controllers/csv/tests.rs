//! The controller's wiring against a mocked API server: what one reconcile
//! of a CSV writes, and that a reconcile of an install whose objects are all
//! live, stamped and right in the stores writes nothing at all.
//!
//! The mocked API server keeps what it is sent: an apply is merged into the
//! object at its path (the status one into the object), a GET answers the
//! object kept there (a Deployment as rolled out and available), so that a
//! second reconcile reads what the first wrote, as it would from a cluster.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        apps::v1::Deployment,
        core::v1::{Secret, Service, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{Client, Resource, core::PartialObjectMeta};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, CsvPhase},
    v2::OperatorCondition,
};
use olm_testkit::mock_api::{Answer, MockApi};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{FINALIZER, crd_summary::CrdSummary, reconcile};
use crate::{
    context::Context,
    stores::{Cache, InstallStores, Stores},
};

const NAMESPACE: &str = "operators";
const CSV_PATH: &str =
    "/apis/operators.coreos.com/v1alpha1/namespaces/operators/clusterserviceversions/demo.v1.0.0";
const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";

/// What the mocked API server holds, by path.
type Objects = Arc<Mutex<BTreeMap<String, Value>>>;

/// A mocked API server holding `objects`; see the module's comment.
fn api_server(objects: &Objects) -> (Client, MockApi) {
    let objects = objects.clone();
    MockApi::new(move |request| {
        let (method, path) = request.line.split_once(' ').expect("METHOD /path");
        let mut objects = objects.lock().expect("not poisoned");
        match method {
            "GET" if path == "/version" => Some(Answer::ok(json!({
                "major": "1", "minor": "36", "gitVersion": "v1.36.3", "gitCommit": "", "gitTreeState": "clean",
                "buildDate": "", "goVersion": "", "compiler": "gc", "platform": "linux/amd64",
            }))),
            "GET" => Some(match objects.get(path) {
                Some(object) => Answer::ok(rolled_out(object.clone())),
                None => Answer::failure(404, "NotFound"),
            }),
            "PATCH" => {
                let path = path.strip_suffix("/status").unwrap_or(path);
                let object = objects.entry(path.to_owned()).or_insert_with(|| new_object(path));
                if stale(object, &request.body) {
                    return Some(Answer::failure(409, "Conflict"));
                }
                match &request.body {
                    Value::Array(operations) => add_finalizers(object, operations),
                    body => merge(object, body),
                }
                let version = &mut object["metadata"]["resourceVersion"];
                let next = version.as_str().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) + 1;
                *version = next.to_string().into();
                Some(Answer::ok(object.clone()))
            }
            _ => None,
        }
    })
}

/// Whether `sent` names a resourceVersion that `kept` no longer has: the
/// API server refuses such a write with a conflict.
fn stale(kept: &Value, sent: &Value) -> bool {
    let named = sent["metadata"]["resourceVersion"].as_str();
    named.is_some() && named != kept["metadata"]["resourceVersion"].as_str()
}

/// An object first written at `path`, as the API server makes it.
fn new_object(path: &str) -> Value {
    let name = path.rsplit('/').next().unwrap_or_default();
    json!({"metadata": {"uid": format!("uid-{name}"), "generation": 1}})
}

/// `object` as a GET answers it: a Deployment rolled out and available.
fn rolled_out(mut object: Value) -> Value {
    if object["kind"] == "Deployment" {
        object["status"] = json!({
            "observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
            "availableReplicas": 1,
            "conditions": [{"type": "Available", "status": "True"}],
        });
    }
    object
}

/// A server-side apply, roughly: the fields sent replace those kept; maps merge.
fn merge(kept: &mut Value, sent: &Value) {
    match (kept, sent) {
        (Value::Object(kept), Value::Object(sent)) => {
            for (key, value) in sent {
                merge(kept.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (kept, sent) => *kept = sent.clone(),
    }
}

/// The JSON patch that adds the finalizer.
fn add_finalizers(object: &mut Value, operations: &[Value]) {
    for operation in operations {
        let path = operation["path"].as_str().unwrap_or_default();
        if operation["op"] == "add" && path.starts_with("/metadata/finalizers") {
            let value = operation["value"].clone();
            object["metadata"]["finalizers"] = if value.is_array() { value } else { json!([value]) };
        }
    }
}

fn context(client: Client) -> Arc<Context> {
    Arc::new(Context::for_tests(client))
}

fn from<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("an object: {e}"))
}

/// A CSV of all namespaces whose Deployment serves a validating webhook, a
/// conversion webhook for the CRD it owns, and an APIService.
fn csv() -> Value {
    let rule = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]});
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "demo.v1.0.0", "namespace": NAMESPACE, "uid": "uid-demo.v1.0.0"},
        "spec": {
            "displayName": "Demo",
            "version": "1.0.0",
            "installModes": [
                {"type": "OwnNamespace", "supported": false}, {"type": "SingleNamespace", "supported": false},
                {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true},
            ],
            "customresourcedefinitions": {"owned": [
                {"name": "widgets.example.com", "version": "v1", "kind": "Widget"},
            ]},
            "apiservicedefinitions": {"owned": [
                {"name": "gadgets", "group": "gadgets.example.com", "version": "v1", "kind": "Gadget",
                 "deploymentName": "demo", "containerPort": 5443},
            ]},
            "webhookdefinitions": [
                {"generateName": "vwidget.example.com", "type": "ValidatingAdmissionWebhook",
                 "deploymentName": "demo", "containerPort": 443, "sideEffects": "None",
                 "admissionReviewVersions": ["v1"], "webhookPath": "/validate",
                 "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"],
                            "operations": ["CREATE"], "resources": ["widgets"]}]},
                {"generateName": "cwidget.example.com", "type": "ConversionWebhook",
                 "deploymentName": "demo", "containerPort": 443, "sideEffects": "None",
                 "admissionReviewVersions": ["v1"], "webhookPath": "/convert",
                 "conversionCRDs": ["widgets.example.com"]},
            ],
            "install": {"strategy": "deployment", "spec": {
                "permissions": [{"serviceAccountName": "demo", "rules": [rule]}],
                "clusterPermissions": [{"serviceAccountName": "demo", "rules": [rule]}],
                "deployments": [{"name": "demo", "spec": {
                    "selector": {"matchLabels": {"app": "demo"}},
                    "template": {
                        "metadata": {"labels": {"app": "demo"}},
                        "spec": {"serviceAccountName": "demo",
                                 "containers": [{"name": "manager", "image": "registry.k8s.io/pause:3.10"}]},
                    },
                }}],
            }},
        },
    })
}

/// The CRD the CSV owns, Established, as its bundle created it.
fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "uid": "uid-widgets"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]},
        "status": {"conditions": [{"type": "NamesAccepted", "status": "True"},
                                  {"type": "Established", "status": "True"}]},
    })
}

/// The OperatorGroup of all namespaces.
fn operator_group() -> OperatorGroup {
    from(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": NAMESPACE},
        "spec": {}, "status": {"namespaces": [""]},
    }))
}

/// The kept objects of `kind` (carrying `label`, when given), as `K`.
fn kept<K: DeserializeOwned>(objects: &Objects, kind: &str, label: Option<&str>) -> Vec<K> {
    let objects = objects.lock().expect("not poisoned");
    objects
        .values()
        .filter(|o| o["kind"] == kind)
        .filter(|o| label.is_none_or(|l| !o["metadata"]["labels"][l].is_null()))
        .map(|o| from(o.clone()))
        .collect()
}

/// Metadata caches of the kept objects of `K`'s kind (carrying `label`).
fn cache<K>(objects: &Objects, label: Option<&str>) -> Cache<PartialObjectMeta<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let kind = K::kind(&()).into_owned();
    Cache::listed(kept::<PartialObjectMeta<K>>(objects, &kind, label))
}

/// The kept Deployments labelled for a CSV as their store holds them: rolled
/// out and available, without their pod template.
fn deployments(objects: &Objects) -> Vec<Deployment> {
    let kept = kept::<Value>(objects, "Deployment", Some(olm_api::labels::OWNER_KIND));
    kept.into_iter()
        .map(|deployment| {
            let mut deployment: Deployment = from(rolled_out(deployment));
            crate::stores::trim_deployment(&mut deployment);
            deployment
        })
        .collect()
}

/// The stores holding `group` and, as a watch would show them, every object
/// the API server keeps.
fn stores(objects: &Objects, group: OperatorGroup) -> Stores {
    let owned = Some(olm_api::labels::OWNER_KIND);
    let managed = Some(super::operator_condition::OLM_MANAGED);
    let installs = InstallStores {
        deployments: Cache::listed(deployments(objects)),
        service_accounts: cache::<ServiceAccount>(objects, owned),
        roles: cache::<Role>(objects, owned),
        role_bindings: cache::<RoleBinding>(objects, owned),
        cluster_roles: cache::<ClusterRole>(objects, owned),
        cluster_role_bindings: cache::<ClusterRoleBinding>(objects, owned),
        condition_roles: cache::<Role>(objects, managed),
        condition_role_bindings: cache::<RoleBinding>(objects, managed),
        operator_conditions: Cache::listed(kept::<OperatorCondition>(objects, "OperatorCondition", None)),
        api_services: Cache::listed(kept::<APIService>(objects, "APIService", None)),
        crds: Cache::listed(kept::<CrdSummary>(objects, "CustomResourceDefinition", None)),
        secrets: cache::<Secret>(objects, owned),
        services: cache::<Service>(objects, owned),
        validating_webhooks: cache::<ValidatingWebhookConfiguration>(objects, owned),
        mutating_webhooks: cache::<MutatingWebhookConfiguration>(objects, owned),
        ..InstallStores::empty()
    };
    let mut stores = Stores::with_installs(installs);
    stores.operator_groups = Cache::listed([group]);
    stores
}

/// The CSV as the API server keeps it.
fn kept_csv(objects: &Objects) -> Arc<ClusterServiceVersion> {
    let csv = objects.lock().expect("not poisoned")[CSV_PATH].clone();
    Arc::new(from(csv))
}

fn is_write(line: &str) -> bool {
    ["PATCH ", "POST ", "PUT ", "DELETE "]
        .iter()
        .any(|method| line.starts_with(method))
}

/// The writes `api` received, in order, but the Events a phase change publishes.
fn writes(api: &MockApi) -> Vec<String> {
    api.lines()
        .into_iter()
        .filter(|line| is_write(line) && !line.ends_with("/events"))
        .collect()
}

/// Waits until `api` received `count` Events: they are published in the
/// background, and one published late would read as a write of a later pass.
async fn events_published(api: &MockApi, count: usize) {
    for _ in 0..500 {
        if api
            .lines()
            .iter()
            .filter(|line| line.ends_with("/events"))
            .count()
            >= count
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{count} Events were not published within 5 s: {:#?}", api.lines());
}

/// One reconcile of the CSV `objects` holds, with stores of what it holds.
async fn pass(objects: &Objects, ctx: &Arc<Context>) {
    reconcile(kept_csv(objects), ctx.clone(), stores(objects, operator_group()))
        .await
        .expect("reconciled");
}

#[tokio::test]
async fn a_csv_is_installed_and_then_a_right_install_gets_no_write() {
    let objects: Objects = Arc::default();
    objects
        .lock()
        .expect("not poisoned")
        .extend([(CSV_PATH.to_owned(), csv()), (CRD_PATH.to_owned(), crd())]);

    // A new CSV, nothing live: the finalizer first, then in the same pass the
    // OperatorCondition, the annotations, the serving objects, the install, the
    // webhooks and APIService, the status.
    let (client, api) = api_server(&objects);
    let ctx = context(client);
    pass(&objects, &ctx).await;
    assert_eq!(
        writes(&api).first(),
        Some(&format!("PATCH {CSV_PATH}")),
        "the finalizer first"
    );
    assert_eq!(
        kept_csv(&objects).metadata.finalizers,
        Some(vec![FINALIZER.to_owned()])
    );
    let written = writes(&api);
    let expected = [
        "PATCH /apis/operators.coreos.com/v2/namespaces/operators/operatorconditions/demo.v1.0.0",
        "PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/operators/roles/demo.v1.0.0",
        "PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/operators/rolebindings/demo.v1.0.0",
        &format!("PATCH {CSV_PATH}"),
        "PATCH /api/v1/namespaces/operators/secrets/demo-service-cert",
        "PATCH /api/v1/namespaces/operators/services/demo-service",
        "PATCH /api/v1/namespaces/operators/serviceaccounts/demo",
        "PATCH /apis/apps/v1/namespaces/operators/deployments/demo",
        &format!("PATCH {CRD_PATH}"),
        "PATCH /apis/apiregistration.k8s.io/v1/apiservices/v1.gadgets.example.com",
        &format!("PATCH {CSV_PATH}/status"),
    ];
    for line in expected {
        assert!(written.iter().any(|w| w == line), "{line} not in {written:#?}");
    }
    let csv_patches = written
        .iter()
        .filter(|w| **w == format!("PATCH {CSV_PATH}"))
        .count();
    assert_eq!(csv_patches, 2, "the finalizer and the annotations: {written:#?}");
    let position = |line: &str| written.iter().position(|w| w == line);
    assert!(
        position(expected[7]) < position(expected[9]),
        "the APIService after the Deployment: {written:#?}"
    );
    assert_eq!(
        written.last().map(String::as_str),
        Some(expected[10]),
        "the status last"
    );
    let status = kept_csv(&objects).status.clone().expect("a status");
    assert_eq!(status.phase, Some(CsvPhase::Installing), "{status:?}");
    let crd = objects.lock().expect("not poisoned")[CRD_PATH].clone();
    assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook");

    // Everything live and stamped, the Deployment available: the status alone.
    events_published(&api, 1).await;
    api.clear();
    pass(&objects, &ctx).await;
    assert_eq!(writes(&api), [format!("PATCH {CSV_PATH}/status")]);
    let status = kept_csv(&objects).status.clone().expect("a status");
    assert_eq!(status.phase, Some(CsvPhase::Succeeded), "{status:?}");

    // With that status too, as a new leader or a resync finds it: no write at all.
    events_published(&api, 1).await;
    api.clear();
    pass(&objects, &ctx).await;
    let any: Vec<String> = api.lines().into_iter().filter(|line| is_write(line)).collect();
    assert_eq!(any, Vec::<String>::new(), "{:#?}", api.lines());
    // Its CRD, Deployment and ServiceAccount come from the stores.
    let read_live = |line: &String| {
        [
            "/customresourcedefinitions/",
            "/deployments/",
            "/serviceaccounts/",
        ]
        .iter()
        .any(|path| line.contains(path))
    };
    assert!(!api.lines().iter().any(read_live), "{:#?}", api.lines());
}
