//! catalog-operator on a real control plane: a registry server (`catalog-operator
//! serve`, run in the test on 127.0.0.1) serves the demo catalog, and the
//! catalog-operator's controllers run in-process, scoped to the test's namespace.
//!
//! The CSVs' own install is olm-operator's job: these tests only check that the
//! InstallPlans create them (and the CRDs and other bundle objects).

use std::{sync::Arc, time::Duration};

use catalog_operator::registry::server::RegistryIndex;
use e2e::{
    FIELD_MANAGER,
    inprocess::{Operator, Registry, demo_catalog, demo_index},
    install_crds,
    objects::{catalog_is_ready, install_plan_of, plan_in, subscription_at},
    repo_root, wait_for, with_namespace,
};
use k8s_openapi::{
    api::core::v1::{ConfigMap, Pod, Service},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::api::resource::Quantity,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    runtime::wait::conditions,
};
use olm_api::v1alpha1::{
    Approval, CatalogSource, CatalogSourceSpec, ClusterServiceVersion, ConditionStatus, ConnectivityState,
    GrpcPodConfig, InstallPlan, InstallPlanPhase, RegistryPoll, SecurityConfig, SourceType, StepStatus,
    Subscription, SubscriptionConditionType, SubscriptionSpec, SubscriptionState, UpdateStrategy,
};
use olm_catalog::{Catalog, ChannelEntry};

fn catalog_source(name: &str, address: &str) -> CatalogSource {
    CatalogSource::new(
        name,
        CatalogSourceSpec {
            source_type: SourceType::Grpc,
            priority: None,
            config_map: None,
            address: Some(address.to_owned()),
            image: None,
            grpc_pod_config: None,
            update_strategy: None,
            secrets: None,
            display_name: Some("Demo".to_owned()),
            description: None,
            publisher: None,
            icon: None,
        },
    )
}

fn subscription(name: &str, namespace: &str, package: &str, approval: Approval) -> Subscription {
    subscription_from(name, namespace, package, approval, None)
}

fn subscription_from(
    name: &str,
    namespace: &str,
    package: &str,
    approval: Approval,
    starting_csv: Option<&str>,
) -> Subscription {
    let mut sub = Subscription::new(
        name,
        SubscriptionSpec {
            catalog_source: "demo".to_owned(),
            catalog_source_namespace: namespace.to_owned(),
            package: package.to_owned(),
            channel: Some("stable".to_owned()),
            starting_csv: starting_csv.map(str::to_owned),
            install_plan_approval: Some(approval),
            config: None,
        },
    );
    sub.metadata.namespace = Some(namespace.to_owned());
    sub
}

async fn create<K>(api: &Api<K>, object: &K) -> K
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(
        &PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        },
        object,
    )
    .await
    .unwrap_or_else(|e| panic!("create {}: {e}", object.meta().name.clone().unwrap_or_default()))
}

fn connection(source: Option<&CatalogSource>) -> Option<ConnectivityState> {
    source?
        .status
        .as_ref()?
        .connection_state
        .as_ref()
        .map(|c| c.last_observed_state)
}

fn condition(
    sub: &Subscription,
    type_: SubscriptionConditionType,
) -> Option<(ConditionStatus, String, String)> {
    sub.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status,
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

fn has_plan(sub: Option<&Subscription>) -> bool {
    sub.is_some_and(|s| install_plan_of(s).is_some())
}

/// Starts a registry, the operator and a READY CatalogSource `demo` in `namespace`.
async fn setup(client: &Client, namespace: &str, tools: bool) -> (Registry, Operator) {
    setup_polling(client, namespace, tools, None).await
}

/// [`setup`], with the CatalogSource polling its registry every `poll`.
async fn setup_polling(
    client: &Client,
    namespace: &str,
    tools: bool,
    poll: Option<&str>,
) -> (Registry, Operator) {
    install_crds(client).await;
    let registry = Registry::start(demo_index(tools), "127.0.0.1:0".parse().unwrap()).await;
    let operator = Operator::start(client, namespace);
    let sources: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
    let mut source = catalog_source("demo", &registry.addr.to_string());
    source.spec.update_strategy = poll.map(|interval| UpdateStrategy {
        registry_poll: Some(RegistryPoll {
            interval: Some(interval.to_owned()),
        }),
    });
    create(&sources, &source).await;
    wait_for(&sources, "demo", "CatalogSource demo is READY", catalog_is_ready).await;
    (registry, operator)
}

#[tokio::test]
async fn an_automatic_subscription_installs_its_dependency_first() {
    with_namespace("catsub", |client, ns| async move {
        let (registry, operator) = setup(&client, &ns, false).await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        let source = sources.get("demo").await.unwrap();
        let status = source.status.clone().unwrap();
        assert_eq!(
            status.connection_state.as_ref().and_then(|c| c.address.clone()),
            Some(registry.addr.to_string())
        );
        assert!(status.connection_state.unwrap().last_connect_time.is_some());

        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        create(&subs, &subscription("app", &ns, "demo-app", Approval::Automatic)).await;
        let sub = wait_for(&subs, "app", "Subscription app has an install plan", has_plan)
            .await
            .unwrap();
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        let name = install_plan_of(&sub).unwrap();
        let plan = wait_for(
            &plans,
            &name,
            &format!("InstallPlan {name} is Complete"),
            plan_in(InstallPlanPhase::Complete),
        )
        .await
        .unwrap();
        assert!(name.starts_with("install-"), "{name}");
        assert_eq!(plan.spec.approval, Approval::Automatic);
        assert_eq!(
            plan.spec.cluster_service_version_names,
            ["demo-db.v1.1.0", "demo-app.v0.2.0"],
            "the dependency comes first"
        );
        let owners: Vec<_> = plan.owner_references().iter().map(|o| o.name.clone()).collect();
        assert_eq!(owners, ["app"]);
        let steps = plan.status.as_ref().unwrap().plan.clone().unwrap();
        let order: Vec<_> = steps
            .iter()
            .map(|s| (s.resolving.as_str(), s.resource.kind.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                ("demo-db.v1.1.0", "CustomResourceDefinition"),
                ("demo-db.v1.1.0", "ClusterServiceVersion"),
                ("demo-db.v1.1.0", "Subscription"),
                ("demo-app.v0.2.0", "CustomResourceDefinition"),
                ("demo-app.v0.2.0", "ClusterServiceVersion"),
            ]
        );
        assert!(
            steps
                .iter()
                .all(|s| matches!(s.status, StepStatus::Created | StepStatus::Present)),
            "{steps:?}"
        );

        // The objects exist: CRDs, CSVs (with the bundle's properties), and the
        // Subscription made for the dependency.
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in ["databases.demo.olm-rs.dev", "webapps.demo.olm-rs.dev"] {
            crds.get(crd).await.unwrap_or_else(|e| panic!("CRD {crd}: {e}"));
        }
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        for csv in ["demo-db.v1.1.0", "demo-app.v0.2.0"] {
            let csv = csvs.get(csv).await.unwrap_or_else(|e| panic!("CSV {csv}: {e}"));
            assert!(
                csv.annotations()
                    .get("operatorframework.io/properties")
                    .is_some_and(|p| p.contains("olm.package")),
                "{csv:?}"
            );
        }
        let dependency = "demo-db-stable-demo-".to_owned() + &ns;
        let db = subs
            .get(&dependency)
            .await
            .unwrap_or_else(|e| panic!("Subscription {dependency}: {e}"));
        assert_eq!(db.spec.package, "demo-db");
        assert_eq!(db.spec.starting_csv.as_deref(), Some("demo-db.v1.1.0"));

        // Both Subscriptions settle at the latest known CSV, healthy for Argo CD and Flux.
        let app = wait_for(
            &subs,
            "app",
            "Subscription app is AtLatestKnown",
            subscription_at("demo-app.v0.2.0"),
        )
        .await
        .unwrap();
        let status = app.status.clone().unwrap();
        assert_eq!(status.current_csv.as_deref(), Some("demo-app.v0.2.0"));
        assert_eq!(status.install_plan_generation, plan.spec.generation);
        assert_eq!(status.observed_generation, app.metadata.generation);
        let (unhealthy, reason, _) =
            condition(&app, SubscriptionConditionType::CatalogSourcesUnhealthy).unwrap();
        assert_eq!(
            (unhealthy, reason.as_str()),
            (ConditionStatus::False, "AllCatalogSourcesHealthy")
        );
        assert_eq!(
            condition(&app, SubscriptionConditionType::Ready).map(|c| c.0),
            Some(ConditionStatus::True)
        );
        assert!(condition(&app, SubscriptionConditionType::InstallPlanPending).is_none());
        wait_for(
            &subs,
            &dependency,
            "the dependency's Subscription is AtLatestKnown",
            subscription_at("demo-db.v1.1.0"),
        )
        .await;

        // OLM's metric names, as /metrics serves them.
        let metrics = operator.metrics_text();
        for wanted in [
            format!("catalogsource_ready{{name=\"demo\",namespace=\"{ns}\"}} 1"),
            "catalog_source_count 1".to_owned(),
            "subscription_sync_total{approval=\"Automatic\",channel=\"stable\",installed=\"demo-app.v0.2.0\",name=\"app\",package=\"demo-app\"}".to_owned(),
            "olm_resolution_duration_seconds_count{outcome=\"succeeded\"}".to_owned(),
            "install_plan_count".to_owned(),
            "subscription_count".to_owned(),
            "olm_reconcile_total{controller=\"installplan\"}".to_owned(),
        ] {
            assert!(metrics.contains(&wanted), "{wanted} is missing from\n{metrics}");
        }

        // The plan is deleted after the install: the Subscription says so, in the
        // one way Argo CD does not count as Degraded, and stays Ready.
        let plan = install_plan_of(&app).expect("the Subscription names its plan");
        plans.delete(&plan, &DeleteParams::default()).await.unwrap();
        let missing = wait_for(
            &subs,
            "app",
            "Subscription app reports its plan missing",
            |s: Option<&Subscription>| {
                s.and_then(|s| condition(s, SubscriptionConditionType::InstallPlanMissing))
                    .is_some_and(|(status, _, _)| status == ConditionStatus::True)
            },
        )
        .await
        .unwrap();
        let (_, reason, message) = condition(&missing, SubscriptionConditionType::InstallPlanMissing).unwrap();
        assert_eq!(reason, "ReferencedInstallPlanNotFound");
        assert!(message.contains(&plan), "{message}");
        assert_eq!(
            condition(&missing, SubscriptionConditionType::Ready).map(|c| c.0),
            Some(ConditionStatus::True)
        );

        operator.stop().await;
        registry.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_manual_plan_waits_for_approval_while_an_unrelated_subscription_installs() {
    with_namespace("catmanual", |client, ns| async move {
        let (registry, operator) = setup(&client, &ns, true).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        create(&subs, &subscription("app", &ns, "demo-app", Approval::Manual)).await;
        create(
            &subs,
            &subscription("tools", &ns, "demo-tools", Approval::Automatic),
        )
        .await;

        let app = wait_for(&subs, "app", "Subscription app has an install plan", has_plan)
            .await
            .unwrap();
        let manual = install_plan_of(&app).unwrap();
        let plan = wait_for(
            &plans,
            &manual,
            "the Manual plan waits for approval",
            plan_in(InstallPlanPhase::RequiresApproval),
        )
        .await
        .unwrap();
        assert_eq!(plan.spec.approval, Approval::Manual);
        assert!(!plan.spec.approved);

        // The unrelated Subscription installs meanwhile, with a plan of its own.
        let tools = wait_for(
            &subs,
            "tools",
            "Subscription tools is AtLatestKnown",
            subscription_at("demo-tools.v0.1.0"),
        )
        .await
        .unwrap();
        let automatic = install_plan_of(&tools).unwrap();
        assert_ne!(automatic, manual, "independent groups get independent plans");
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let settings = config_maps
            .get("demo-tools-settings")
            .await
            .expect("the bundle's ConfigMap");
        assert!(
            settings
                .owner_references()
                .iter()
                .any(|o| o.kind == "ClusterServiceVersion" && o.name == "demo-tools.v0.1.0"),
            "the CSV owns its bundle's objects"
        );

        let app = wait_for(
            &subs,
            "app",
            "Subscription app shows the pending approval",
            |sub: Option<&Subscription>| {
                sub.and_then(|s| condition(s, SubscriptionConditionType::InstallPlanPending))
                    .is_some_and(|(status, reason, _)| {
                        status == ConditionStatus::True && reason == "RequiresApproval"
                    })
            },
        )
        .await
        .unwrap();
        assert_eq!(
            app.status.as_ref().unwrap().state,
            Some(SubscriptionState::UpgradePending)
        );
        let still = plans.get(&manual).await.unwrap();
        assert_eq!(still.status.unwrap().phase, InstallPlanPhase::RequiresApproval);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        assert!(
            csvs.get_opt("demo-app.v0.2.0").await.unwrap().is_none(),
            "nothing installed before approval"
        );

        plans
            .patch(
                &manual,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"approved": true}})),
            )
            .await
            .expect("approve the plan");
        wait_for(
            &plans,
            &manual,
            "the approved plan is Complete",
            plan_in(InstallPlanPhase::Complete),
        )
        .await;
        let app = wait_for(
            &subs,
            "app",
            "Subscription app is AtLatestKnown after approval",
            subscription_at("demo-app.v0.2.0"),
        )
        .await
        .unwrap();
        assert!(condition(&app, SubscriptionConditionType::InstallPlanPending).is_none());

        operator.stop().await;
        registry.stop().await;
    })
    .await;
}

#[tokio::test]
async fn an_unsatisfiable_subscription_explains_itself_while_another_installs() {
    with_namespace("catbroken", |client, ns| async move {
        let (registry, operator) = setup(&client, &ns, false).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        create(
            &subs,
            &subscription("broken", &ns, "demo-broken", Approval::Automatic),
        )
        .await;
        create(&subs, &subscription("db", &ns, "demo-db", Approval::Automatic)).await;

        let broken = wait_for(
            &subs,
            "broken",
            "Subscription broken fails to resolve",
            |sub: Option<&Subscription>| {
                sub.and_then(|s| condition(s, SubscriptionConditionType::ResolutionFailed))
                    .is_some_and(|(status, _, _)| status == ConditionStatus::True)
            },
        )
        .await
        .unwrap();
        let (_, reason, message) = condition(&broken, SubscriptionConditionType::ResolutionFailed).unwrap();
        assert_eq!(reason, "ConstraintsNotSatisfiable");
        assert!(
            message.contains("demo-missing"),
            "the explanation names the missing package: {message}"
        );
        assert!(
            !message.contains("constraints not satisfiable:"),
            "plain words, not solver clauses: {message}"
        );
        assert_eq!(
            condition(&broken, SubscriptionConditionType::Stalled).map(|c| c.0),
            Some(ConditionStatus::True),
            "Flux sees it Failed"
        );
        assert!(
            install_plan_of(&broken).is_none(),
            "no install plan for an unsatisfiable group"
        );

        wait_for(
            &subs,
            "db",
            "Subscription db is AtLatestKnown",
            subscription_at("demo-db.v1.1.0"),
        )
        .await;

        operator.stop().await;
        registry.stop().await;
    })
    .await;
}

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
async fn a_starting_csv_installs_first_and_then_upgrades() {
    with_namespace("catstart", |client, ns| async move {
        let (registry, operator) = setup(&client, &ns, false).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        create(
            &subs,
            &subscription_from("db", &ns, "demo-db", Approval::Automatic, Some("demo-db.v1.0.0")),
        )
        .await;
        let db = wait_for(
            &subs,
            "db",
            "Subscription db upgrades to the channel head",
            subscription_at("demo-db.v1.1.0"),
        )
        .await
        .unwrap();
        let mut all = plans.list(&Default::default()).await.unwrap().items;
        all.sort_by_key(|p| p.spec.generation);
        let installed: Vec<_> = all
            .iter()
            .map(|p| {
                (
                    p.spec.cluster_service_version_names.clone(),
                    p.status.as_ref().map(|s| s.phase),
                )
            })
            .collect();
        assert_eq!(
            installed,
            [
                (
                    vec!["demo-db.v1.0.0".to_owned()],
                    Some(InstallPlanPhase::Complete)
                ),
                (
                    vec!["demo-db.v1.1.0".to_owned()],
                    Some(InstallPlanPhase::Complete)
                ),
            ],
            "the starting CSV first, the upgrade in a plan of its own"
        );
        assert_eq!(install_plan_of(&db).as_deref(), Some(all[1].name_any().as_str()));
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        let upgraded = csvs.get("demo-db.v1.1.0").await.unwrap();
        assert_eq!(upgraded.spec.replaces.as_deref(), Some("demo-db.v1.0.0"));

        operator.stop().await;
        registry.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_catalog_update_upgrades_a_subscription_untouched() {
    with_namespace("catpoll", |client, ns| async move {
        let (registry, operator) = setup_polling(&client, &ns, false, Some("1s")).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        create(&subs, &subscription("db", &ns, "demo-db", Approval::Automatic)).await;
        wait_for(
            &subs,
            "db",
            "Subscription db is AtLatestKnown",
            subscription_at("demo-db.v1.1.0"),
        )
        .await;

        // The catalog gets a new head in the channel the Subscription follows.
        let mut catalog = demo_catalog(false);
        let stable = catalog
            .channels
            .iter_mut()
            .find(|c| c.package == "demo-db" && c.name == "stable")
            .expect("demo-db has a stable channel");
        stable.entries.push(ChannelEntry {
            name: "demo-db.v1.2.0".to_owned(),
            replaces: Some("demo-db.v1.1.0".to_owned()),
            skips: Vec::new(),
            skip_range: None,
        });
        registry.service.replace(Arc::new(RegistryIndex::new(catalog)));

        let db = wait_for(
            &subs,
            "db",
            "Subscription db upgrades to the new head",
            subscription_at("demo-db.v1.2.0"),
        )
        .await
        .unwrap();
        assert_eq!(db.status.unwrap().current_csv.as_deref(), Some("demo-db.v1.2.0"));
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        let upgraded = csvs.get("demo-db.v1.2.0").await.unwrap();
        assert_eq!(upgraded.spec.replaces.as_deref(), Some("demo-db.v1.1.0"));

        operator.stop().await;
        registry.stop().await;
    })
    .await;
}

#[tokio::test]
async fn an_image_catalog_runs_as_a_registry_pod_behind_a_service() {
    with_namespace("catimage", |client, ns| async move {
        install_crds(&client).await;
        let operator = Operator::start(&client, &ns);
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

async fn service_uid(services: &Api<Service>) -> String {
    match services.get_opt("community").await.unwrap() {
        Some(service) => service.uid().unwrap(),
        None => String::new(),
    }
}

/// A bundle for the tests' own catalogs: its manifests and the API it provides.
fn bundle(
    name: &str,
    package: &str,
    version: &str,
    objects: &[serde_json::Value],
    gvk: Option<(&str, &str, &str)>,
) -> olm_catalog::Bundle {
    use olm_catalog::{
        Property,
        property::{BundleObject, PackageProperty},
    };
    let mut properties = vec![Property::Package(PackageProperty {
        package_name: package.to_owned(),
        version: olm_catalog::Version::new(version),
        release: None,
    })];
    if let Some((group, version, kind)) = gvk {
        properties.push(Property::Gvk(olm_catalog::Gvk {
            group: group.to_owned(),
            kind: kind.to_owned(),
            version: version.to_owned(),
        }));
    }
    properties.extend(
        objects
            .iter()
            .map(|o| Property::BundleObject(BundleObject::from_json(&o.to_string()))),
    );
    olm_catalog::Bundle {
        name: name.to_owned(),
        package: package.to_owned(),
        image: String::new(),
        properties,
        related_images: Vec::new(),
    }
}

fn csv_manifest(
    name: &str,
    version: &str,
    replaces: Option<&str>,
    owned: Option<(&str, &str, &str)>,
) -> serde_json::Value {
    let mut csv = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": name},
        "spec": {
            "displayName": name,
            "version": version,
            "installModes": [{"type": "AllNamespaces", "supported": true}],
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
        },
    });
    if let Some(replaces) = replaces {
        csv["spec"]["replaces"] = replaces.into();
    }
    if let Some((crd, version, kind)) = owned {
        csv["spec"]["customresourcedefinitions"] =
            serde_json::json!({"owned": [{"name": crd, "version": version, "kind": kind}]});
    }
    csv
}

fn crd_manifest(group: &str, versions: &[&str]) -> serde_json::Value {
    let last = versions.len() - 1;
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": "Thing", "listKind": "ThingList", "plural": "things", "singular": "thing"},
            "scope": "Namespaced",
            "versions": versions.iter().enumerate().map(|(i, v)| serde_json::json!({
                "name": v,
                "served": true,
                "storage": i == last,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            })).collect::<Vec<_>>(),
        },
    })
}

#[tokio::test]
async fn an_upgrade_that_drops_a_stored_crd_version_fails_safely() {
    with_namespace("catcrd", |client, ns| async move {
        install_crds(&client).await;
        // A CRD group of this test's own: CRDs are cluster-wide.
        let group = format!("{ns}.e2e.olm-rs.dev");
        let crd_name = format!("things.{group}");
        let mut catalog = Catalog::default();
        catalog.packages.push(olm_catalog::Package {
            name: "demo-crd".to_owned(),
            default_channel: Some("stable".to_owned()),
            icon: None,
            description: None,
            properties: Vec::new(),
        });
        catalog.channels.push(olm_catalog::Channel {
            name: "stable".to_owned(),
            package: "demo-crd".to_owned(),
            entries: vec![
                ChannelEntry {
                    name: "demo-crd.v1.0.0".to_owned(),
                    ..ChannelEntry::default()
                },
                ChannelEntry {
                    name: "demo-crd.v2.0.0".to_owned(),
                    replaces: Some("demo-crd.v1.0.0".to_owned()),
                    ..ChannelEntry::default()
                },
            ],
            properties: Vec::new(),
        });
        catalog.bundles.push(bundle(
            "demo-crd.v1.0.0",
            "demo-crd",
            "1.0.0",
            &[
                crd_manifest(&group, &["v1"]),
                csv_manifest("demo-crd.v1.0.0", "1.0.0", None, Some((&crd_name, "v1", "Thing"))),
            ],
            Some((&group, "v1", "Thing")),
        ));
        catalog.bundles.push(bundle(
            "demo-crd.v2.0.0",
            "demo-crd",
            "2.0.0",
            &[
                crd_manifest(&group, &["v2"]),
                csv_manifest(
                    "demo-crd.v2.0.0",
                    "2.0.0",
                    Some("demo-crd.v1.0.0"),
                    Some((&crd_name, "v2", "Thing")),
                ),
            ],
            Some((&group, "v2", "Thing")),
        ));
        let registry = Registry::start(
            Arc::new(RegistryIndex::new(catalog)),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await;
        let operator = Operator::start(&client, &ns);
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        create(&sources, &catalog_source("demo", &registry.addr.to_string())).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        create(
            &subs,
            &subscription_from(
                "crd",
                &ns,
                "demo-crd",
                Approval::Automatic,
                Some("demo-crd.v1.0.0"),
            ),
        )
        .await;

        let failed = wait_for(
            &subs,
            "crd",
            "the upgrade that drops v1 fails",
            |sub: Option<&Subscription>| {
                sub.and_then(|s| s.status.as_ref())
                    .is_some_and(|s| s.state == Some(SubscriptionState::UpgradeFailed))
            },
        )
        .await
        .unwrap();
        let (status, _, message) = condition(&failed, SubscriptionConditionType::InstallPlanFailed).unwrap();
        assert_eq!(status, ConditionStatus::True);
        assert!(
            message.contains("v1") && message.contains("data loss"),
            "{message}"
        );
        assert_eq!(
            failed.status.as_ref().unwrap().installed_csv.as_deref(),
            Some("demo-crd.v1.0.0")
        );
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = crds.get(&crd_name).await.unwrap();
        let versions: Vec<_> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(versions, ["v1"], "the CRD was left as it was");
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        let plan = plans.get(&install_plan_of(&failed).unwrap()).await.unwrap();
        let plan_status = plan.status.unwrap();
        assert_eq!(plan_status.phase, InstallPlanPhase::Failed);
        assert!(
            plan_status
                .plan
                .unwrap()
                .iter()
                .all(|s| s.status == StepStatus::NotPresent)
        );

        operator.stop().await;
        registry.stop().await;
        let _ = crds.delete(&crd_name, &DeleteParams::default()).await;
    })
    .await;
}

#[tokio::test]
async fn an_interrupted_plan_resumes_from_its_recorded_progress() {
    with_namespace("catresume", |client, ns| async move {
        install_crds(&client).await;
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        // What a plan interrupted after its first steps left behind: the CSV, and
        // a ConfigMap whose step was applied but not yet recorded.
        let csv_manifest = csv_manifest("resume.v1.0.0", "1.0.0", None, None);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        csvs.create(&params, &serde_json::from_value(csv_manifest.clone()).unwrap())
            .await
            .unwrap();
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let config_map = |name: &str| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
        };
        config_maps
            .create(&params, &serde_json::from_value(config_map("applied")).unwrap())
            .await
            .unwrap();
        let step = |manifest: &serde_json::Value, status: &str| {
            let api_version = manifest["apiVersion"].as_str().unwrap();
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            serde_json::json!({
                "resolving": "resume.v1.0.0",
                "status": status,
                "resource": {
                    "sourceName": "demo", "sourceNamespace": ns,
                    "group": group, "version": version,
                    "kind": manifest["kind"], "name": manifest["metadata"]["name"],
                    "manifest": manifest.to_string(),
                },
            })
        };
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        let plan: InstallPlan = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "InstallPlan",
            "metadata": {"name": "install-resume"},
            "spec": {"clusterServiceVersionNames": ["resume.v1.0.0"], "approval": "Automatic", "approved": true},
        }))
        .unwrap();
        plans.create(&params, &plan).await.unwrap();
        plans
            .patch_status(
                "install-resume",
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(serde_json::json!({
                    "apiVersion": "operators.coreos.com/v1alpha1",
                    "kind": "InstallPlan",
                    "status": {
                        "phase": "Installing",
                        "catalogSources": ["demo"],
                        "plan": [
                            step(&csv_manifest, "Created"),
                            step(&config_map("applied"), "NotPresent"),
                            step(&config_map("fresh"), "NotPresent"),
                        ],
                    },
                })),
            )
            .await
            .unwrap();

        let operator = Operator::start(&client, &ns);
        let plan = wait_for(&plans, "install-resume", "the plan completes", plan_in(InstallPlanPhase::Complete))
            .await
            .unwrap();
        let steps: Vec<_> = plan.status.unwrap().plan.unwrap().iter().map(|s| s.status).collect();
        assert_eq!(steps, [StepStatus::Created, StepStatus::Present, StepStatus::Created]);
        for name in ["applied", "fresh"] {
            let cm = config_maps.get(name).await.unwrap();
            assert!(
                cm.owner_references().iter().any(|o| o.name == "resume.v1.0.0"),
                "{name} is owned by the CSV"
            );
        }
        operator.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_configmap_catalog_serves_subscriptions() {
    with_namespace("catcm", |client, ns| async move {
        install_crds(&client).await;
        let operator = Operator::start(&client, &ns);
        let csv = e2e::yaml_file(
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

#[tokio::test]
async fn a_standby_replica_takes_over_and_finishes_the_work() {
    with_namespace("catha", |client, ns| async move {
        install_crds(&client).await;
        let registry = Registry::start(demo_index(true), "127.0.0.1:0".parse().unwrap()).await;
        let (a, a_leads) = Operator::start_elected(&client, &ns, "replica-a");
        let (b, b_leads) = Operator::start_elected(&client, &ns, "replica-b");
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        create(&sources, &catalog_source("demo", &registry.addr.to_string())).await;
        wait_for(&sources, "demo", "CatalogSource demo is READY", catalog_is_ready).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        create(&subs, &subscription("db", &ns, "demo-db", Approval::Automatic)).await;
        wait_for(
            &subs,
            "db",
            "Subscription db is AtLatestKnown",
            subscription_at("demo-db.v1.1.0"),
        )
        .await;
        // Exactly one leads (waited for: on a loaded machine a leader may have
        // stepped down at its renew deadline, and the other not yet taken over).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while a_leads.is_leader() == b_leads.is_leader() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "exactly one replica leads"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // The leader goes away; the standby takes over and serves new work.
        let (leader, standby, standby_leads) = if a_leads.is_leader() {
            (a, b, b_leads)
        } else {
            (b, a, a_leads)
        };
        leader.stop().await;
        let mut watching = standby_leads.clone();
        assert!(
            tokio::time::timeout(Duration::from_secs(30), watching.acquired())
                .await
                .unwrap_or(false),
            "the standby leads within the lease duration"
        );
        create(
            &subs,
            &subscription("tools", &ns, "demo-tools", Approval::Automatic),
        )
        .await;
        wait_for(
            &subs,
            "tools",
            "Subscription tools installs under the new leader",
            subscription_at("demo-tools.v0.1.0"),
        )
        .await;
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        let all = plans.list(&Default::default()).await.unwrap().items;
        assert_eq!(
            all.len(),
            2,
            "one plan per install, none duplicated by two writers: {all:?}"
        );

        standby.stop().await;
        registry.stop().await;
    })
    .await;
}
