//! The controller's wiring against a mocked API server: what one reconcile
//! writes, in which order, and that a reconcile whose objects are live in the
//! stores writes nothing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use kube::{Client, core::PartialObjectMeta};
use olm_api::v1alpha1::{CatalogSource, CatalogSourceStatus};
use olm_runtime::{Leadership, apply::Writer};
use olm_testkit::{
    mock_api::{Answer, MockApi},
    stores::listed,
};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::{
    CatalogSourceContext,
    context::{ImagePath, ImageState, Runtime},
    reconcile,
    status::ServingReason,
};
use crate::{
    catalogs::CatalogStore,
    controllers::{Context, Options, Stores},
    metrics::CatalogMetrics,
};

const IMAGE: &str = "quay.io/operatorhubio/catalog:latest";
const SERVICE: &str = "PATCH /api/v1/namespaces/olm/services/community";
const POD: &str = "POST /api/v1/namespaces/olm/pods";
const STATUS: &str =
    "PATCH /apis/operators.coreos.com/v1alpha1/namespaces/olm/catalogsources/community/status";

fn from<K: DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("an object")
}

fn source() -> CatalogSource {
    from(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": "community", "namespace": "olm", "uid": "uid-1", "generation": 1},
        "spec": {"sourceType": "grpc", "image": IMAGE},
    }))
}

/// A mocked API server that answers the status write with `source`, and any
/// other write with what it was sent.
fn api_server(source: &CatalogSource) -> (Client, MockApi) {
    let answer = serde_json::to_value(source).expect("JSON");
    MockApi::new(move |request| {
        request
            .line
            .ends_with("/status")
            .then(|| Answer::ok(answer.clone()))
    })
}

/// The stores: the catalog, its namespace, and the registry `pods` and
/// `services` live.
fn stores(source: &CatalogSource, pods: Vec<Pod>, services: Vec<Service>) -> Stores {
    let namespace = from::<PartialObjectMeta<Namespace>>(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "olm"},
    }));
    Stores {
        catalog_sources: listed(vec![source.clone()]),
        pods: listed(pods),
        services: listed(services),
        namespaces: listed(vec![namespace]),
        ..Stores::empty()
    }
}

/// The controller's context over `client`, `stores` and `catalogs`, leading,
/// with the image already found to need a registry Pod (no pull in this test).
fn context(client: Client, stores: Stores, catalogs: &CatalogStore) -> Arc<CatalogSourceContext> {
    let registry = prometheus::Registry::new();
    let runtime_metrics = olm_runtime::metrics::Metrics::new().expect("metrics");
    let shared = Context::new(
        client,
        Writer::new(Leadership::standalone(), "catalog-operator"),
        catalogs.clone(),
        stores,
        Options::default(),
        CatalogMetrics::register(&registry).expect("metrics"),
        runtime_metrics.reconcile,
    );
    let ctx = CatalogSourceContext::new(Arc::new(shared));
    let id = olm_resolver::model::CatalogId::new("community", "olm");
    ctx.clients.put(
        &id,
        Runtime {
            client: None,
            loaded_at: None,
            config_map_version: None,
            config_map_left_out: None,
            image: Some(ImageState {
                image: IMAGE.to_owned(),
                path: ImagePath::Pod {
                    reason: ServingReason::NoFileBasedCatalog,
                    message: "a SQLite index image".to_owned(),
                },
                checked_at: Instant::now(),
            }),
        },
    );
    Arc::new(ctx)
}

/// The live copy of what `api` was sent with `line`: as the API server keeps it.
fn sent<K: DeserializeOwned>(api: &MockApi, line: &str, name: &str) -> K {
    let mut body = api.last_body(line).expect("sent");
    body["metadata"]["name"] = name.into();
    body["metadata"]["uid"] = format!("uid-{name}").into();
    from(body)
}

/// The status `api` was sent last.
fn written_status(api: &MockApi) -> CatalogSourceStatus {
    from(api.last_body(STATUS).expect("a status write")["status"].clone())
}

#[tokio::test]
async fn a_new_image_catalog_gets_its_service_and_pod_then_its_status_then_nothing() {
    // Nothing live: the Service, then the Pod, named after its spec; the
    // status waits for the Pod.
    let source = source();
    let catalogs = CatalogStore::new();
    let (client, first) = api_server(&source);
    let ctx = context(client, stores(&source, Vec::new(), Vec::new()), &catalogs);
    reconcile(Arc::new(source.clone()), ctx)
        .await
        .expect("reconciled");
    assert_eq!(first.lines(), [SERVICE, POD]);
    let pod = first.last_body(POD).expect("a Pod");
    let name = pod["metadata"]["name"].as_str().expect("a named Pod");
    assert!(
        name.starts_with("community-") && name.len() == "community-".len() + 10,
        "{name}"
    );
    assert!(
        pod["metadata"]["annotations"][olm_runtime::effects::DESIRED_HASH].is_string(),
        "{pod}"
    );

    // The Service and the Pod live (the Pod not Ready yet): only the status.
    let service: Service = sent(&first, SERVICE, "community");
    let pod: Pod = sent(&first, POD, "community-x1y2z");
    let (client, second) = api_server(&source);
    let live = stores(&source, vec![pod.clone()], vec![service.clone()]);
    reconcile(Arc::new(source.clone()), context(client, live, &catalogs))
        .await
        .expect("reconciled");
    assert_eq!(second.lines(), [STATUS]);
    let status = written_status(&second);
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(
        (ready.reason.as_str(), ready.message.as_str()),
        ("Connecting", "registry pod community-x1y2z is not ready yet")
    );

    // With that status written, a reconcile (a new leader's) writes nothing.
    let mut settled = source;
    settled.status = Some(status);
    let (client, third) = api_server(&settled);
    let live = stores(&settled, vec![pod], vec![service]);
    reconcile(Arc::new(settled), context(client, live, &catalogs))
        .await
        .expect("reconciled");
    assert!(third.writes().is_empty(), "{:?}", third.lines());
}

/// `pod` Ready, created at second `created`.
fn ready(mut pod: Pod, created: i64) -> Pod {
    let mut value = serde_json::to_value(&pod).expect("JSON");
    value["metadata"]["creationTimestamp"] = k8s_openapi::jiff::Timestamp::from_second(created)
        .expect("a time")
        .to_string()
        .into();
    value["status"] = serde_json::json!({"conditions": [{"type": "Ready", "status": "True"}]});
    pod = from(value);
    pod
}

#[tokio::test]
async fn an_outdated_pod_goes_once_the_new_one_is_ready_and_the_status_comes_last() {
    // Learn the registry objects from a first reconcile with nothing live.
    let source = source();
    let catalogs = CatalogStore::new();
    let (client, first) = api_server(&source);
    reconcile(
        Arc::new(source.clone()),
        context(client, stores(&source, Vec::new(), Vec::new()), &catalogs),
    )
    .await
    .expect("reconciled");
    let service: Service = sent(&first, SERVICE, "community");
    let current = ready(sent(&first, POD, "community-new"), 200);
    let mut outdated = ready(sent(&first, POD, "community-old"), 100);
    outdated.metadata.labels.get_or_insert_default().insert(
        super::registry_pod::POD_SPEC_HASH.to_owned(),
        "0123456789".to_owned(),
    );

    // The Service is live but changed by someone (no hash): it is applied again;
    // the outdated Pod goes; the status (the registry read through the new
    // Pod) comes last.
    let mut changed = service.clone();
    changed.metadata.annotations = None;
    let (client, api) = api_server(&source);
    let live = stores(&source, vec![outdated, current.clone()], vec![changed]);
    reconcile(Arc::new(source.clone()), context(client, live, &catalogs))
        .await
        .expect("reconciled");
    assert_eq!(
        api.lines(),
        [
            SERVICE,
            "DELETE /api/v1/namespaces/olm/pods/community-old",
            STATUS
        ]
    );
    let delete = api
        .last_body("DELETE /api/v1/namespaces/olm/pods/community-old")
        .expect("a delete");
    assert_eq!(
        delete["preconditions"]["uid"], "uid-community-old",
        "only that Pod"
    );
    let status = written_status(&api);
    assert_eq!(
        status
            .registry_service
            .as_ref()
            .and_then(|s| s.service_name.as_deref()),
        Some("community")
    );

    // Once the old Pod is gone and the status written: nothing, a second later
    // too (the catalog is still unreachable: no news, the same status).
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let mut settled = source;
    settled.status = Some(status);
    let (client, api) = api_server(&settled);
    let live = stores(&settled, vec![current], vec![service]);
    reconcile(Arc::new(settled), context(client, live, &catalogs))
        .await
        .expect("reconciled");
    assert!(api.writes().is_empty(), "{:?}", api.lines());
}
