//! catalog-operator's InstallPlans on a real control plane: the CRD storage
//! check that refuses an unsafe upgrade, and a plan interrupted mid-way that
//! resumes from its recorded progress.

mod common;

use std::sync::Arc;

use e2e::inprocess::{Operator, Registry};
use k8s_openapi::{
    api::core::v1::ConfigMap, apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use olm_api::v1alpha1::{
    Approval, CatalogSource, ClusterServiceVersion, ConditionStatus, InstallPlan, InstallPlanPhase,
    StepStatus, Subscription, SubscriptionConditionType, SubscriptionState,
};
use olm_catalog::{Catalog, ChannelEntry};
use olm_registry::server::RegistryIndex;
use olm_testkit::{
    FIELD_MANAGER, install_crds,
    objects::{install_plan_of, plan_in},
    wait_for, with_namespace,
};

use common::*;

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
        let operator = Operator::start(&client, &ns).await;
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

        let operator = Operator::start(&client, &ns).await;
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
