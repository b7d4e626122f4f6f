//! The cluster behaves like a real one where olm-rs depends on it: its nodes stay Ready,
//! Deployments become Available on (fake) nodes, and the garbage collector removes objects whose
//! owner is gone.

use std::time::Duration;

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        coordination::v1::Lease,
        core::v1::{ConfigMap, Node, Pod},
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
    jiff::Timestamp,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    runtime::wait::conditions,
};
use olm_testkit::{
    FIELD_MANAGER, client, dynamic, install_crds, is_deployment_available, olm, wait_for, wait_for_within,
    with_namespace,
};
use serde_json::json;

/// The oldest Lease renewal a healthy node shows. A kubelet (or kwok) renews its node's Lease
/// every 10 s; the node lifecycle controller marks a node NotReady, and every Pod on it with it,
/// once neither its Lease nor its status has been renewed for 50 s.
const MAX_NODE_LEASE_AGE: Duration = Duration::from_secs(40);

/// Every node is Ready and heartbeats through its Lease in `kube-node-lease`. Without the Lease the
/// nodes flap NotReady each minute and Deployments lose their availability shortly after gaining it.
#[tokio::test]
async fn every_node_is_ready_with_a_fresh_lease() {
    let client = client().await;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list Nodes");
    assert!(!nodes.items.is_empty(), "the cluster has nodes");
    let leases = Api::<Lease>::namespaced(client, "kube-node-lease")
        .list(&ListParams::default())
        .await
        .expect("list Leases in kube-node-lease");
    let now = Timestamp::now();
    for node in &nodes.items {
        let name = node.name_any();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
        assert_eq!(
            ready.map(|c| c.status.as_str()),
            Some("True"),
            "node {name} is Ready: {ready:?}"
        );
        let renewed = leases
            .items
            .iter()
            .find(|lease| lease.name_any() == name)
            .and_then(|lease| lease.spec.as_ref()?.renew_time.as_ref())
            .unwrap_or_else(|| panic!("node {name} has a renewed Lease in kube-node-lease"));
        let age = now.duration_since(renewed.0).as_secs_f64();
        assert!(
            age <= MAX_NODE_LEASE_AGE.as_secs_f64(),
            "the Lease of node {name} was renewed {age:.0}s ago, more than {MAX_NODE_LEASE_AGE:?}"
        );
    }
}

#[tokio::test]
async fn deployment_becomes_available_on_fake_nodes() {
    with_namespace("deploy", |client, ns| async move {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let deployment: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": { "name": "pause" },
            "spec": {
                "replicas": 2,
                "selector": { "matchLabels": { "app": "pause" } },
                "template": {
                    "metadata": { "labels": { "app": "pause" } },
                    "spec": { "containers": [{ "name": "pause", "image": "registry.k8s.io/pause:3.10" }] }
                }
            }
        }))
        .expect("a Deployment");
        deployments
            .create(&PostParams::default(), &deployment)
            .await
            .expect("create Deployment pause");

        let deployment = wait_for(
            &deployments,
            "pause",
            "Deployment pause is Available",
            is_deployment_available(),
        )
        .await
        .expect("Deployment pause exists");
        let status = deployment.status.expect("an Available Deployment has a status");
        assert_eq!(status.ready_replicas, Some(2), "both replicas are ready");

        let pods: Api<Pod> = Api::namespaced(client, &ns);
        let pods = pods
            .list(&ListParams::default().labels("app=pause"))
            .await
            .expect("list Pods");
        assert_eq!(pods.items.len(), 2, "one Pod per replica");
        for pod in &pods.items {
            let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
            assert!(node.is_some(), "Pod {} is scheduled to a node", pod.name_any());
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            assert_eq!(phase, Some("Running"), "Pod {} runs", pod.name_any());
        }
    })
    .await;
}

fn config_map(name: &str, owner: Option<OwnerReference>) -> ConfigMap {
    let mut cm = ConfigMap {
        data: Some([("key".to_string(), "value".to_string())].into()),
        ..ConfigMap::default()
    };
    cm.metadata.name = Some(name.to_string());
    cm.metadata.owner_references = owner.map(|o| vec![o]);
    cm
}

#[tokio::test]
async fn config_map_is_collected_after_its_owner_is_deleted() {
    with_namespace("gc", |client, ns| async move {
        let config_maps: Api<ConfigMap> = Api::namespaced(client, &ns);
        let post = PostParams::default();
        let owner = config_maps
            .create(&post, &config_map("owner", None))
            .await
            .expect("create ConfigMap owner");
        let owned = config_maps
            .create(&post, &config_map("owned", owner.owner_ref(&())))
            .await
            .expect("create ConfigMap owned");
        // Not owned by anything: it must survive, so that what removes `owned` is the collector.
        config_maps
            .create(&post, &config_map("bystander", None))
            .await
            .expect("create ConfigMap bystander");

        config_maps
            .delete("owner", &DeleteParams::background())
            .await
            .expect("delete ConfigMap owner");
        let uid = owned.uid().expect("a created object has a uid");
        wait_for(
            &config_maps,
            "owned",
            "ConfigMap owned is garbage-collected",
            conditions::is_deleted(&uid),
        )
        .await;
        assert!(
            config_maps
                .get_opt("bystander")
                .await
                .expect("get bystander")
                .is_some(),
            "a ConfigMap without owner is left alone"
        );
    })
    .await;
}

/// OLM relies on this for everything a CSV or Subscription owns. The collector learns about a new
/// custom resource kind only when it re-reads discovery (every 30s), hence the longer deadline.
#[tokio::test]
async fn config_map_owned_by_a_subscription_is_collected() {
    with_namespace("gc-crd", |client, ns| async move {
        install_crds(&client).await;
        let subscriptions = olm::SUBSCRIPTION.api(&client, &ns);
        let subscription = dynamic(
            json!({
                "apiVersion": olm::SUBSCRIPTION.api_version(),
                "kind": olm::SUBSCRIPTION.kind,
                "metadata": { "name": "etcd" },
                "spec": { "name": "etcd", "source": "operatorhubio-catalog", "sourceNamespace": "olm" }
            }),
            "the Subscription",
        );
        let subscription = subscriptions
            .patch(
                "etcd",
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(&subscription),
            )
            .await
            .expect("apply Subscription etcd");
        let owner_ref = OwnerReference {
            api_version: olm::SUBSCRIPTION.api_version(),
            kind: olm::SUBSCRIPTION.kind.to_string(),
            name: subscription.name_any(),
            uid: subscription.uid().expect("a created object has a uid"),
            ..OwnerReference::default()
        };

        let config_maps: Api<ConfigMap> = Api::namespaced(client, &ns);
        let owned = config_maps
            .create(&PostParams::default(), &config_map("owned", Some(owner_ref)))
            .await
            .expect("create ConfigMap owned");
        subscriptions
            .delete("etcd", &DeleteParams::background())
            .await
            .expect("delete Subscription etcd");
        let uid = owned.uid().expect("a created object has a uid");
        wait_for_within(
            Duration::from_secs(120),
            &config_maps,
            "owned",
            "ConfigMap owned by a deleted Subscription is garbage-collected",
            conditions::is_deleted(&uid),
        )
        .await;
    })
    .await;
}
