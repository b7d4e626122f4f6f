//! catalog-operator on a real control plane: a registry server (`catalog-operator
//! serve`, run in the test on 127.0.0.1) serves the demo catalog, and the
//! catalog-operator's controllers run in-process, scoped to the test's namespace.
//!
//! The CSVs' own install is olm-operator's job: these tests only check that the
//! InstallPlans create them (and the CRDs and other bundle objects).

use std::{net::SocketAddr, sync::Arc, time::Duration};

use catalog_operator::{
    controllers::Options,
    registry::server::{self, RegistryIndex, RegistryService},
    run::run_controllers,
};
use e2e::{FIELD_MANAGER, install_crds, repo_root, wait_for, with_namespace};
use futures::FutureExt;
use k8s_openapi::{
    api::core::v1::ConfigMap, apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::v1alpha1::{
    Approval, CatalogSource, CatalogSourceSpec, ClusterServiceVersion, ConditionStatus, ConnectivityState,
    InstallPlan, InstallPlanPhase, RegistryPoll, SourceType, StepStatus, Subscription,
    SubscriptionConditionType, SubscriptionSpec, SubscriptionState, UpdateStrategy,
};
use olm_catalog::{Catalog, ChannelEntry};
use olm_runtime::{
    Leadership, Readiness,
    apply::{FIELD_MANAGER_CATALOG, Writer},
    metrics::Metrics,
};
use tokio::{sync::oneshot, task::JoinHandle};

/// A registry server serving a catalog on loopback, as `catalog-operator serve` does.
struct Registry {
    addr: SocketAddr,
    service: RegistryService,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Registry {
    /// Serves `index` on `addr` (port 0: any free port).
    async fn start(index: Arc<RegistryIndex>, addr: SocketAddr) -> Registry {
        let listener = server::bind(addr).await.expect("bind the registry server");
        let addr = listener.local_addr().expect("the bound address");
        let (stop, stopped) = oneshot::channel::<()>();
        let service = RegistryService::new(index);
        let serving = service.clone();
        let task = tokio::spawn(async move {
            server::serve_service(listener, serving, async move {
                let _ = stopped.await;
            })
            .await
            .expect("the registry server runs");
        });
        Registry {
            addr,
            service,
            stop,
            task,
        }
    }

    /// Stops serving; returns the address it served on.
    async fn stop(self) -> SocketAddr {
        let _ = self.stop.send(());
        self.task.await.expect("the registry server stops");
        self.addr
    }
}

/// The demo catalog, and with `tools` also the unrelated `demo-tools` package.
fn demo_catalog(tools: bool) -> Catalog {
    let root = repo_root();
    let (mut catalog, _) =
        catalog_operator::source::load(&root.join("catalogs/demo-bundles")).expect("the demo catalog loads");
    if tools {
        let (extra, _) = catalog_operator::source::load(&root.join("e2e/fixtures/demo-tools"))
            .expect("the demo-tools fixture loads");
        catalog.extend(extra);
        catalog.sort();
    }
    catalog
}

fn demo_index(tools: bool) -> Arc<RegistryIndex> {
    Arc::new(RegistryIndex::new(demo_catalog(tools)))
}

/// The catalog-operator's controllers, in-process, watching only `namespace`.
struct Operator {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Operator {
    fn start(client: &Client, namespace: &str) -> Operator {
        let options = Options {
            global_catalog_namespace: namespace.to_owned(),
            namespace: Some(namespace.to_owned()),
            catalog_health_interval: Duration::from_secs(1),
            ..Options::default()
        };
        let writer = Writer::new(Leadership::standalone(), FIELD_MANAGER_CATALOG);
        let metrics = Metrics::new().expect("a metrics registry");
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        }
        .boxed();
        let client = client.clone();
        let task = tokio::spawn(async move {
            run_controllers(client, writer, options, metrics, Readiness::new(), shutdown)
                .await
                .expect("the controllers run");
        });
        Operator { stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(20), self.task).await;
    }
}

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

fn is_ready(source: Option<&CatalogSource>) -> bool {
    connection(source) == Some(ConnectivityState::Ready)
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

fn at_latest(csv: &'static str) -> impl Fn(Option<&Subscription>) -> bool {
    move |sub: Option<&Subscription>| {
        sub.and_then(|s| s.status.as_ref()).is_some_and(|s| {
            s.state == Some(SubscriptionState::AtLatestKnown) && s.installed_csv.as_deref() == Some(csv)
        })
    }
}

fn plan_name(sub: &Subscription) -> Option<String> {
    sub.status.as_ref()?.install_plan_ref.as_ref()?.name.clone()
}

fn has_plan(sub: Option<&Subscription>) -> bool {
    sub.is_some_and(|s| plan_name(s).is_some())
}

fn phase_is(phase: InstallPlanPhase) -> impl Fn(Option<&InstallPlan>) -> bool {
    move |plan: Option<&InstallPlan>| {
        plan.and_then(|p| p.status.as_ref())
            .is_some_and(|s| s.phase == phase)
    }
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
    wait_for(&sources, "demo", "CatalogSource demo is READY", is_ready).await;
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
        let name = plan_name(&sub).unwrap();
        let plan = wait_for(
            &plans,
            &name,
            &format!("InstallPlan {name} is Complete"),
            phase_is(InstallPlanPhase::Complete),
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
            at_latest("demo-app.v0.2.0"),
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
            at_latest("demo-db.v1.1.0"),
        )
        .await;

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
        let manual = plan_name(&app).unwrap();
        let plan = wait_for(
            &plans,
            &manual,
            "the Manual plan waits for approval",
            phase_is(InstallPlanPhase::RequiresApproval),
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
            at_latest("demo-tools.v0.1.0"),
        )
        .await
        .unwrap();
        let automatic = plan_name(&tools).unwrap();
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
            phase_is(InstallPlanPhase::Complete),
        )
        .await;
        let app = wait_for(
            &subs,
            "app",
            "Subscription app is AtLatestKnown after approval",
            at_latest("demo-app.v0.2.0"),
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
            plan_name(&broken).is_none(),
            "no install plan for an unsatisfiable group"
        );

        wait_for(
            &subs,
            "db",
            "Subscription db is AtLatestKnown",
            at_latest("demo-db.v1.1.0"),
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
            at_latest("demo-db.v1.1.0"),
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
        wait_for(&sources, "demo", "CatalogSource demo is READY again", is_ready).await;
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
            at_latest("demo-db.v1.1.0"),
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
        assert_eq!(plan_name(&db).as_deref(), Some(all[1].name_any().as_str()));
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
            at_latest("demo-db.v1.1.0"),
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
            at_latest("demo-db.v1.2.0"),
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
