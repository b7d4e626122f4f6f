//! The catalog-operator binary, as it runs in production, on a real control
//! plane: `catalog-operator serve` serves a real catalog from the corpus, and
//! `catalog-operator run` (scoped to the test's namespace) installs from it,
//! also when it is killed outright in the middle of an InstallPlan.
//!
//! The CSVs' own install is olm-operator's job; these tests check what the
//! InstallPlans create.

use std::{collections::BTreeSet, path::PathBuf, time::Duration};

use k8s_openapi::{
    api::core::v1::ResourceQuota,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::v1alpha1::{
    Approval, ClusterServiceVersion, InstallPlan, InstallPlanPhase, InstallPlanStatus, StepStatus,
    Subscription,
};
use olm_catalog::Catalog;
use olm_registry::server::RegistryIndex;
use olm_testkit::{
    corpus_dir, install_crds,
    objects::{
        applied_steps, install_plan_of, names, plan_in, ready_catalog_source, subscribe, subscription_at,
    },
    process::{Process, free_port},
    wait_for, wait_for_within, with_namespace,
};
use serde_json::json;

/// The corpus catalog whose bundles carry their manifests (`olm.bundle.object`),
/// so that they install without unpacking images.
fn bundle_object_catalog() -> PathBuf {
    let dir = corpus_dir().join("fbc/v4.16-bundle-object");
    assert!(
        dir.is_dir(),
        "the corpus catalog {} is missing: set {} to the corpus",
        dir.display(),
        olm_testkit::CORPUS_ENV
    );
    dir
}

/// How long a plan with many objects may take.
const SLOW: Duration = Duration::from_secs(180);

/// The corpus catalog, served by `catalog-operator serve`, a `catalog-operator
/// run` named `identity` watching `namespace`, and the READY CatalogSource
/// `corpus` there.
async fn serve_corpus(client: &Client, namespace: &str, identity: &str) -> (Catalog, Process, Process) {
    install_crds(client).await;
    let catalog_dir = bundle_object_catalog();
    let (catalog, _) = catalog_operator::source::load(&catalog_dir).expect("the corpus catalog loads");
    let port = free_port();
    let registry = Process::registry(&format!("{identity}-registry"), &catalog_dir, port);
    let operator = Process::catalog_operator(
        identity,
        "catalog-operator",
        namespace,
        Some(namespace),
        namespace,
    );
    ready_catalog_source(client, namespace, "corpus", &format!("127.0.0.1:{port}")).await;
    (catalog, registry, operator)
}

#[tokio::test]
async fn a_real_corpus_catalog_served_by_the_binary_installs_its_packages() {
    with_namespace("corpusbin", |client, ns| async move {
        let (catalog, _registry, _operator) = serve_corpus(&client, &ns, "catalog-operator").await;

        // kube-green: a CRD, a CSV, a ClusterRole and two Services, all from the catalog.
        let (subs, head, version) =
            subscribe_to_kube_green(&client, &ns, &catalog, Approval::Automatic).await;
        let sub = wait_for_within(
            SLOW,
            &subs,
            "kube-green",
            &format!("Subscription kube-green installs {head}"),
            subscription_at(&head),
        )
        .await
        .expect("the Subscription exists");
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        let plan_name = install_plan_of(&sub).expect("the Subscription names its InstallPlan");
        let plan = wait_for(
            &plans,
            &plan_name,
            "the InstallPlan is Complete",
            plan_in(InstallPlanPhase::Complete),
        )
        .await
        .expect("the InstallPlan exists");
        let steps = plan.status.and_then(|s| s.plan).unwrap_or_default();
        let kinds: BTreeSet<&str> = steps.iter().map(|s| s.resource.kind.as_str()).collect();
        for kind in [
            "ClusterServiceVersion",
            "CustomResourceDefinition",
            "ClusterRole",
            "Service",
        ] {
            assert!(kinds.contains(kind), "the plan has a {kind} step: {kinds:?}");
        }
        assert!(
            steps
                .iter()
                .all(|s| matches!(s.status, StepStatus::Created | StepStatus::Present)),
            "every step applied"
        );

        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = crds
            .get("sleepinfos.kube-green.com")
            .await
            .expect("the CRD is created");
        assert_eq!(crd.spec.names.kind, "SleepInfo");
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        let csv = csvs.get(&head).await.expect("the CSV is created");
        assert_eq!(csv.spec.version.as_deref(), Some(version.as_str()));
        println!(
            "corpus: kube-green installed {head} in {} steps: {kinds:?}",
            steps.len()
        );
    })
    .await;
}

#[tokio::test]
async fn a_killed_catalog_operator_finishes_the_plan_when_it_starts_again() {
    with_namespace("killplan", |client, ns| async move {
        let (catalog, _registry, mut operator) = serve_corpus(&client, &ns, "catalog-operator-1").await;

        // A Manual plan, so that the test knows when the install starts: at approval.
        let (subs, head, _) = subscribe_to_kube_green(&client, &ns, &catalog, Approval::Manual).await;
        let sub = wait_for_within(
            SLOW,
            &subs,
            "kube-green",
            "Subscription kube-green has an InstallPlan",
            |s: Option<&Subscription>| s.and_then(install_plan_of).is_some(),
        )
        .await
        .expect("the Subscription exists");
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        let plan_name = install_plan_of(&sub).expect("an InstallPlan");
        wait_for(
            &plans,
            &plan_name,
            "the InstallPlan waits for approval",
            plan_in(InstallPlanPhase::RequiresApproval),
        )
        .await;
        // Killed in the middle of the plan: a quota lets one of the bundle's two
        // Services in, so the plan applies its first steps and then keeps
        // retrying the last one.
        let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
        quotas
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "ResourceQuota",
                    "metadata": {"name": "one-service"},
                    "spec": {"hard": {"services": "1"}},
                }))
                .expect("a ResourceQuota"),
            )
            .await
            .expect("create the ResourceQuota");
        plans
            .patch(
                &plan_name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"approved": true}})),
            )
            .await
            .expect("approve the InstallPlan");
        let stuck = wait_for(
            &plans,
            &plan_name,
            "the InstallPlan is Installing with one step left",
            |p: Option<&InstallPlan>| {
                p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                    s.phase == InstallPlanPhase::Installing && applied_steps(s) + 1 == steps_of(s)
                })
            },
        )
        .await
        .and_then(|p| p.status)
        .expect("the InstallPlan");
        operator.kill();
        println!(
            "killed the catalog-operator with the plan Installing, {} of {} steps applied",
            applied_steps(&stuck),
            steps_of(&stuck)
        );
        quotas
            .delete("one-service", &Default::default())
            .await
            .expect("delete the ResourceQuota");

        // A new process (a new identity: the old lease must expire first) finishes it.
        let _restarted =
            Process::catalog_operator("catalog-operator-2", "catalog-operator", &ns, Some(&ns), &ns);
        let plan = wait_for_within(
            SLOW,
            &plans,
            &plan_name,
            "the InstallPlan completes after the restart",
            plan_in(InstallPlanPhase::Complete),
        )
        .await
        .expect("the InstallPlan exists");
        wait_for(
            &subs,
            "kube-green",
            &format!("Subscription kube-green is at {head}"),
            subscription_at(&head),
        )
        .await;
        let status = plan.status.expect("a status");
        assert_eq!(
            applied_steps(&status),
            steps_of(&status),
            "every step applied: {status:?}"
        );
        // Nothing duplicated: one plan, one CSV.
        assert_eq!(names(&plans).await, [plan_name]);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        assert_eq!(names(&csvs).await, [head]);
    })
    .await;
}

/// How many steps the plan has.
fn steps_of(status: &InstallPlanStatus) -> usize {
    status.plan.as_ref().map_or(0, Vec::len)
}

/// A Subscription `kube-green` to the alpha channel of the corpus catalog in
/// `namespace`; returns the Subscriptions' API and the name and version of the
/// channel's head.
async fn subscribe_to_kube_green(
    client: &Client,
    namespace: &str,
    catalog: &Catalog,
    approval: Approval,
) -> (Api<Subscription>, String, String) {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    let (head, version) = channel_head(catalog, "kube-green", "alpha");
    subscribe(
        &subs,
        "kube-green",
        ("corpus", namespace),
        "kube-green",
        "alpha",
        approval,
    )
    .await;
    (subs, head, version)
}

/// The name and version of the head of `package`'s channel `channel`, as the
/// registry API answers GetBundleForChannel.
fn channel_head(catalog: &Catalog, package: &str, channel: &str) -> (String, String) {
    let index = RegistryIndex::new(catalog.clone());
    let bundle = index
        .get_bundle_for_channel(package, channel)
        .unwrap_or_else(|e| panic!("{package} has a head in channel {channel}: {e}"));
    (bundle.csv_name, bundle.version)
}
