//! catalog-operator's CatalogSources on a real control plane: a registry that
//! stops and returns, a catalog image run as a registry Pod behind a Service,
//! a ConfigMap catalog, and an unreachable catalog that only the Subscriptions
//! needing it notice.

mod common;

use e2e::inprocess::{Operator, Registry, demo_index};
use k8s_openapi::{
    api::core::v1::{ConfigMap, Pod, Service},
    apimachinery::pkg::api::resource::Quantity,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
    runtime::wait::conditions,
};
use olm_api::v1alpha1::{
    Approval, CatalogSource, ConditionStatus, ConnectivityState, GrpcPodConfig, SecurityConfig, SourceType,
    Subscription, SubscriptionConditionType,
};
use olm_testkit::{
    install_crds,
    objects::{catalog_is_ready, install_plan_of, subscription_at},
    repo_root, wait_for, with_namespace,
};

use common::*;

#[tokio::test]
async fn a_stopped_registry_marks_its_catalog_unhealthy_until_it_returns() {
    with_namespace("catdown", |client, ns| async move {
        let (registry, operator) = setup(&client, &ns, false).await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        create(&subs, &subscription("db", &ns, "demo-db", Approval::Automatic)).await;
        wait_for(
            &subs,
            "db",
            "Subscription db is AtLatestKnown",
            subscription_at("demo-db.v1.1.0"),
        )
        .await;

        let addr = registry.stop().await;
        let down = wait_for(
            &sources,
            "demo",
            "CatalogSource demo is in TRANSIENT_FAILURE",
            |s: Option<&CatalogSource>| connection(s) == Some(ConnectivityState::TransientFailure),
        )
        .await
        .unwrap();
        let status = down.status.unwrap();
        assert!(status.message.is_some_and(|m| !m.is_empty()));
        assert!(
            status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "False")
        );
        wait_for(
            &subs,
            "db",
            "Subscription db reports the unhealthy catalog",
            |sub: Option<&Subscription>| {
                sub.and_then(|s| condition(s, SubscriptionConditionType::CatalogSourcesUnhealthy))
                    .is_some_and(|(status, reason, _)| {
                        status == ConditionStatus::True && reason == "UnhealthyCatalogSourceFound"
                    })
            },
        )
        .await;

        let registry = Registry::start(demo_index(false), addr).await;
        wait_for(
            &sources,
            "demo",
            "CatalogSource demo is READY again",
            catalog_is_ready,
        )
        .await;
        wait_for(
            &subs,
            "db",
            "Subscription db sees the catalog healthy again",
            |sub: Option<&Subscription>| {
                sub.and_then(|s| condition(s, SubscriptionConditionType::CatalogSourcesUnhealthy))
                    .is_some_and(|(status, _, _)| status == ConditionStatus::False)
            },
        )
        .await;

        operator.stop().await;
        registry.stop().await;
    })
    .await;
}

#[tokio::test]
async fn an_image_catalog_runs_as_a_registry_pod_behind_a_service() {
    with_namespace("catimage", |client, ns| async move {
        install_crds(&client).await;
        let operator = Operator::start(&client, &ns).await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        let mut source = catalog_source("community", "");
        source.spec.address = None;
        source.spec.image = Some("quay.io/operatorhubio/catalog:latest".to_owned());
        source.spec.grpc_pod_config = Some(GrpcPodConfig {
            node_selector: Some([("type".to_owned(), "kwok".to_owned())].into()),
            security_context_config: Some(SecurityConfig::Restricted),
            memory_target: Some(Quantity("30Mi".to_owned())),
            ..GrpcPodConfig::default()
        });
        create(&sources, &source).await;

        let source = wait_for(
            &sources,
            "community",
            "CatalogSource community reports its registry service",
            |s: Option<&CatalogSource>| {
                s.and_then(|s| s.status.as_ref()?.registry_service.as_ref())
                    .is_some()
            },
        )
        .await
        .unwrap();
        let status = source.status.clone().unwrap();
        let registry = status.registry_service.unwrap();
        assert_eq!(registry.service_name.as_deref(), Some("community"));
        assert_eq!(registry.port.as_deref(), Some("50051"));
        // No container runs on the fake nodes: the registry is never reachable
        // here, and the catalog says so instead of blocking anything.
        let state = status.connection_state.unwrap();
        assert_eq!(state.address, Some(format!("community.{ns}.svc:50051")));
        assert!(matches!(
            state.last_observed_state,
            ConnectivityState::Connecting | ConnectivityState::TransientFailure
        ));

        let services: Api<Service> = Api::namespaced(client.clone(), &ns);
        let service = services.get("community").await.expect("the registry Service");
        assert_eq!(
            service.spec.unwrap().selector.unwrap()["olm.catalogSource"],
            "community"
        );
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let selector = ListParams::default().labels("olm.catalogSource=community");
        let listed = pods.list(&selector).await.unwrap().items;
        assert_eq!(listed.len(), 1, "one registry pod");
        let first = listed[0].name_any();
        let spec = listed[0].spec.clone().unwrap();
        assert_eq!(spec.node_selector.unwrap()["type"], "kwok");
        assert_eq!(spec.security_context.unwrap().run_as_non_root, Some(true));
        let container = &spec.containers[0];
        assert_eq!(
            container.image.as_deref(),
            Some("quay.io/operatorhubio/catalog:latest")
        );
        assert_eq!(
            container.resources.as_ref().unwrap().requests.as_ref().unwrap()["memory"],
            Quantity("30Mi".to_owned())
        );

        // A new image makes a new pod and the old one goes.
        sources
            .patch(
                "community",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"image": "quay.io/operatorhubio/catalog:v2"}})),
            )
            .await
            .unwrap();
        wait_for(
            &pods,
            &first,
            "the old registry pod is deleted",
            conditions::is_deleted(&listed[0].uid().unwrap()),
        )
        .await;
        let listed = pods.list(&selector).await.unwrap().items;
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(
            listed[0].spec.as_ref().unwrap().containers[0].image.as_deref(),
            Some("quay.io/operatorhubio/catalog:v2")
        );
        let serving = listed[0].name_any();

        // Polling a tag starts an update pod; the image did not change, so the
        // serving pod stays and the update pod goes.
        sources
            .patch(
                "community",
                &PatchParams::default(),
                &Patch::Merge(
                    serde_json::json!({"spec": {"updateStrategy": {"registryPoll": {"interval": "1s"}}}}),
                ),
            )
            .await
            .unwrap();
        wait_for(
            &sources,
            "community",
            "the catalog image is polled",
            |s: Option<&CatalogSource>| {
                s.and_then(|s| s.status.as_ref()?.latest_image_registry_poll.as_ref())
                    .is_some()
            },
        )
        .await;
        wait_for(
            &pods,
            &serving,
            "the serving pod stays after a poll",
            |pod: Option<&Pod>| pod.is_some(),
        )
        .await;

        // The pod and the service belong to the catalog: deleting it collects them.
        sources
            .delete("community", &DeleteParams::foreground())
            .await
            .unwrap();
        wait_for(
            &services,
            "community",
            "the registry Service is collected",
            conditions::is_deleted(&service_uid(&services).await),
        )
        .await;
        operator.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_configmap_catalog_serves_subscriptions() {
    with_namespace("catcm", |client, ns| async move {
        install_crds(&client).await;
        let operator = Operator::start(&client, &ns).await;
        let csv = olm_testkit::yaml_file(
            &repo_root()
                .join("e2e/fixtures/demo-tools/0.1.0/manifests/demo-tools.clusterserviceversion.yaml"),
        );
        let packages = serde_json::json!([{
            "packageName": "demo-tools",
            "defaultChannel": "stable",
            "channels": [{"name": "stable", "currentCSV": "demo-tools.v0.1.0"}],
        }]);
        let config_map: ConfigMap = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "tools-catalog"},
            "data": {
                "customResourceDefinitions": "[]",
                "clusterServiceVersions": serde_json::to_string(&[csv]).unwrap(),
                "packages": packages.to_string(),
            },
        }))
        .unwrap();
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        create(&config_maps, &config_map).await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        let mut source = catalog_source("tools", "");
        source.spec.source_type = SourceType::ConfigMap;
        source.spec.address = None;
        source.spec.config_map = Some("tools-catalog".to_owned());
        create(&sources, &source).await;
        let ready = wait_for(
            &sources,
            "tools",
            "CatalogSource tools is READY",
            catalog_is_ready,
        )
        .await
        .unwrap();
        let reference = ready.status.unwrap().config_map_resource.unwrap();
        assert_eq!(reference.name, "tools-catalog");
        assert!(reference.resource_version.is_some());

        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let mut sub = subscription("tools", &ns, "demo-tools", Approval::Automatic);
        sub.spec.catalog_source = "tools".to_owned();
        create(&subs, &sub).await;
        wait_for(
            &subs,
            "tools",
            "Subscription tools is AtLatestKnown",
            subscription_at("demo-tools.v0.1.0"),
        )
        .await;
        operator.stop().await;
    })
    .await;
}

#[tokio::test]
async fn an_unreachable_catalog_only_marks_the_subscriptions_that_need_it() {
    with_namespace("catisolate", |client, ns| async move {
        let (registry, operator) = setup(&client, &ns, false).await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        // Nothing listens on port 1.
        create(&sources, &catalog_source("nowhere", "127.0.0.1:1")).await;
        wait_for(
            &sources,
            "nowhere",
            "CatalogSource nowhere is in TRANSIENT_FAILURE",
            |s: Option<&CatalogSource>| connection(s) == Some(ConnectivityState::TransientFailure),
        )
        .await;

        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        create(&subs, &subscription("db", &ns, "demo-db", Approval::Automatic)).await;
        let mut lost = subscription("lost", &ns, "demo-tools", Approval::Automatic);
        lost.spec.catalog_source = "nowhere".to_owned();
        create(&subs, &lost).await;

        let db = wait_for(
            &subs,
            "db",
            "Subscription db installs from the healthy catalog",
            subscription_at("demo-db.v1.1.0"),
        )
        .await
        .unwrap();
        let (unhealthy, _, _) = condition(&db, SubscriptionConditionType::CatalogSourcesUnhealthy).unwrap();
        assert_eq!(
            unhealthy,
            ConditionStatus::False,
            "db does not need the unreachable catalog"
        );
        let health = db.status.unwrap().catalog_health.unwrap();
        assert_eq!(health.len(), 2, "both catalogs are listed");
        assert!(
            health
                .iter()
                .any(|h| h.catalog_source_ref.name.as_deref() == Some("nowhere") && !h.healthy)
        );

        let lost = wait_for(
            &subs,
            "lost",
            "Subscription lost reports its catalog",
            |sub: Option<&Subscription>| {
                sub.and_then(|s| condition(s, SubscriptionConditionType::CatalogSourcesUnhealthy))
                    .is_some_and(|(status, _, _)| status == ConditionStatus::True)
            },
        )
        .await
        .unwrap();
        let (_, _, message) = condition(&lost, SubscriptionConditionType::CatalogSourcesUnhealthy).unwrap();
        assert!(message.contains("nowhere"), "{message}");
        assert!(install_plan_of(&lost).is_none());

        operator.stop().await;
        registry.stop().await;
    })
    .await;
}
