//! catalog-operator's Subscriptions on a real control plane: a registry
//! server on loopback serves the demo catalog and the controllers run
//! in-process, scoped to the test's namespace. Automatic and Manual plans,
//! dependencies, unsatisfiable groups, startingCSV, upgrades from a catalog
//! update, and a standby replica taking over.
//!
//! The CSVs' own install is olm-operator's job: these tests only check that the
//! InstallPlans create them (and the CRDs and other bundle objects).

mod common;

use std::{sync::Arc, time::Duration};

use e2e::inprocess::{Operator, Registry, demo_catalog, demo_index};
use k8s_openapi::{
    api::core::v1::ConfigMap, apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
};
use olm_api::v1alpha1::{
    Approval, CatalogSource, ClusterServiceVersion, ConditionStatus, InstallPlan, InstallPlanPhase,
    StepStatus, Subscription, SubscriptionConditionType, SubscriptionState,
};
use olm_catalog::ChannelEntry;
use olm_registry::server::RegistryIndex;
use olm_testkit::{
    install_crds,
    objects::{catalog_is_ready, install_plan_of, plan_in, subscription_at},
    wait_for, with_namespace,
};

use common::*;

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

/// The CSV of a Subscription at its latest goes (deleted by hand, or the
/// last of an uninstall while the package is subscribed again): the
/// Subscription is resolved again and its CSV installed anew, without waiting
/// for anything else to wake it.
#[tokio::test]
async fn a_subscription_whose_csv_is_deleted_installs_it_again() {
    with_namespace("catcsvgone", |client, ns| async move {
        let (registry, operator) = setup(&client, &ns, false).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        create(&subs, &subscription("db", &ns, "demo-db", Approval::Automatic)).await;
        wait_for(
            &subs,
            "db",
            "Subscription db is AtLatestKnown",
            subscription_at("demo-db.v1.1.0"),
        )
        .await;
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        let first = csvs.get("demo-db.v1.1.0").await.expect("the CSV").uid();
        csvs.delete("demo-db.v1.1.0", &DeleteParams::default())
            .await
            .expect("delete the CSV");
        wait_for(
            &csvs,
            "demo-db.v1.1.0",
            "the CSV is created again by a new InstallPlan",
            |csv: Option<&ClusterServiceVersion>| csv.is_some_and(|c| c.uid() != first),
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
async fn a_standby_replica_takes_over_and_finishes_the_work() {
    with_namespace("catha", |client, ns| async move {
        install_crds(&client).await;
        let registry = Registry::start(demo_index(true), "127.0.0.1:0".parse().unwrap()).await;
        let (a, a_leads) = Operator::start_elected(&client, &ns, "replica-a").await;
        let (b, b_leads) = Operator::start_elected(&client, &ns, "replica-b").await;
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
