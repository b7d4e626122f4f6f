//! Writing objects as a user would, the OLM objects a test creates, and what it waits for on
//! them.

use std::{fmt::Debug, time::Duration};

use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease};
use kube::{
    Api, Client, Resource,
    api::{ListParams, Patch, PatchParams},
};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{
        Approval, CatalogSource, ClusterServiceVersion, ConnectivityState, CsvPhase, InstallPlan,
        InstallPlanPhase, InstallPlanStatus, StepStatus, Subscription, SubscriptionState,
    },
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;

use crate::{FIELD_MANAGER, is_deployment_available, wait_for, wait_for_within};

/// How long one step of an install (a catalog connecting, a CSV succeeding, a
/// Deployment rolling out) may take.
pub const STEP: Duration = Duration::from_secs(120);

/// What a Subscription to the demo catalog's demo-app installs: each CSV with
/// the Deployment it runs, its dependency first.
pub const DEMO_APP_INSTALL: [(&str, &str); 2] =
    [("demo-db.v1.1.0", "demo-db"), ("demo-app.v0.2.0", "demo-app")];

/// Server-side applies `object` with the tests' field manager, taking over fields another manager
/// holds; panics with its name on error.
pub async fn apply<K>(api: &Api<K>, object: &K) -> K
where
    K: Resource + Clone + Debug + DeserializeOwned + Serialize,
{
    let name = object.meta().name.clone().expect("objects to apply have names");
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| panic!("cannot apply {name}: {e}"))
}

/// [`apply`] for an object written as JSON of a typed kind.
pub async fn apply_json<K>(api: &Api<K>, object: serde_json::Value) -> K
where
    K: Resource + Clone + Debug + DeserializeOwned + Serialize,
{
    let object: K = serde_json::from_value(object).expect("a valid object");
    apply(api, &object).await
}

/// Lists the objects of `api` that match the label `selector` (all with `""`).
pub async fn list<K>(api: &Api<K>, selector: &str) -> Vec<K>
where
    K: Resource + Clone + Debug + DeserializeOwned,
{
    api.list(&ListParams::default().labels(selector))
        .await
        .unwrap_or_else(|e| panic!("list {selector}: {e}"))
        .items
}

/// A gRPC CatalogSource `name` reading the registry at `address`.
pub async fn grpc_catalog_source(api: &Api<CatalogSource>, name: &str, address: &str) -> CatalogSource {
    apply_json(
        api,
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "CatalogSource",
            "metadata": {"name": name},
            "spec": {"sourceType": "grpc", "address": address, "displayName": name},
        }),
    )
    .await
}

/// A Subscription `name` to `package` on `channel` of the CatalogSource
/// `source` of the namespace `source_namespace`.
pub async fn subscribe(
    api: &Api<Subscription>,
    name: &str,
    (source, source_namespace): (&str, &str),
    package: &str,
    channel: &str,
    approval: Approval,
) -> Subscription {
    apply_json(
        api,
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": name},
            "spec": {
                "source": source,
                "sourceNamespace": source_namespace,
                "name": package,
                "channel": channel,
                "installPlanApproval": approval,
            },
        }),
    )
    .await
}

/// A gRPC CatalogSource `name` in `namespace` for the registry at `address`,
/// once it is READY.
pub async fn ready_catalog_source(
    client: &Client,
    namespace: &str,
    name: &str,
    address: &str,
) -> CatalogSource {
    let sources: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
    grpc_catalog_source(&sources, name, address).await;
    wait_for_within(
        STEP,
        &sources,
        name,
        &format!("CatalogSource {name} is READY"),
        catalog_is_ready,
    )
    .await
    .expect("the CatalogSource exists")
}

/// What a user writes to install demo-app in `namespace`: an OperatorGroup
/// `global` and an Automatic Subscription `demo-app` to the catalog `source`
/// (name, namespace).
pub async fn subscribe_to_demo_app(client: &Client, namespace: &str, source: (&str, &str)) {
    global_operator_group(&Api::namespaced(client.clone(), namespace), "global").await;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    subscribe(
        &subs,
        "demo-app",
        source,
        "demo-app",
        "stable",
        Approval::Automatic,
    )
    .await;
}

/// Waits until the Subscription `name` names an InstallPlan; returns its name.
pub async fn wait_for_install_plan(subs: &Api<Subscription>, name: &str) -> String {
    let sub = wait_for_within(
        STEP,
        subs,
        name,
        &format!("Subscription {name} has an InstallPlan"),
        |s: Option<&Subscription>| s.and_then(install_plan_of).is_some(),
    )
    .await
    .expect("the Subscription exists");
    install_plan_of(&sub).expect("an InstallPlan")
}

/// Waits until each CSV of `operators` is Succeeded and the Deployment it
/// names is Available, in `namespace`; each may take `within`.
pub async fn wait_installed(client: &Client, namespace: &str, operators: &[(&str, &str)], within: Duration) {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    for (csv, deployment) in operators {
        wait_for_within(
            within,
            &csvs,
            csv,
            &format!("CSV {csv} is Succeeded"),
            csv_in(CsvPhase::Succeeded),
        )
        .await;
        wait_for_within(
            within,
            &deployments,
            deployment,
            &format!("Deployment {deployment} is Available"),
            is_deployment_available(),
        )
        .await;
    }
}

/// Waits until the CSV `name` is in `phase`, and returns it.
pub async fn wait_for_csv(
    api: &Api<ClusterServiceVersion>,
    name: &str,
    phase: CsvPhase,
) -> ClusterServiceVersion {
    wait_for(api, name, &format!("CSV {name} is {phase:?}"), csv_in(phase))
        .await
        .unwrap_or_else(|| panic!("the CSV {name} exists"))
}

/// Waits until the Subscription `name` has installed `csv`.
pub async fn wait_subscription_at(subs: &Api<Subscription>, name: &str, csv: &str) -> Subscription {
    wait_for(
        subs,
        name,
        &format!("Subscription {name} is at {csv}"),
        subscription_at(csv),
    )
    .await
    .expect("the Subscription exists")
}

/// The sorted names of the objects `api` lists.
pub async fn names<K>(api: &Api<K>) -> Vec<String>
where
    K: Resource + Clone + Debug + DeserializeOwned,
    K::DynamicType: Default,
{
    let mut names: Vec<String> = api
        .list(&Default::default())
        .await
        .unwrap_or_else(|e| panic!("list {}: {e}", K::plural(&Default::default())))
        .items
        .into_iter()
        .filter_map(|o| o.meta().name.clone())
        .collect();
    names.sort();
    names
}

/// How many steps of the plan are applied (Created or Present).
pub fn applied_steps(status: &InstallPlanStatus) -> usize {
    status
        .plan
        .iter()
        .flatten()
        .filter(|s| matches!(s.status, StepStatus::Created | StepStatus::Present))
        .count()
}

/// An OperatorGroup `name` targeting all namespaces.
pub async fn global_operator_group(api: &Api<OperatorGroup>, name: &str) -> OperatorGroup {
    apply_json(
        api,
        json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": name},
            "spec": {},
        }),
    )
    .await
}

/// The identity holding the Lease, if any.
pub fn lease_holder(lease: Option<&Lease>) -> Option<&str> {
    lease?.spec.as_ref()?.holder_identity.as_deref()
}

/// The CatalogSource has connected to its registry.
pub fn catalog_is_ready(source: Option<&CatalogSource>) -> bool {
    source
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.connection_state.as_ref())
        .is_some_and(|c| c.last_observed_state == ConnectivityState::Ready)
}

/// The Subscription has installed `csv` and knows of nothing newer.
pub fn subscription_at(csv: &str) -> impl Fn(Option<&Subscription>) -> bool + '_ {
    move |sub: Option<&Subscription>| {
        sub.and_then(|s| s.status.as_ref()).is_some_and(|s| {
            s.state == Some(SubscriptionState::AtLatestKnown) && s.installed_csv.as_deref() == Some(csv)
        })
    }
}

/// The name of the InstallPlan the Subscription points at, if any.
pub fn install_plan_of(sub: &Subscription) -> Option<String> {
    sub.status.as_ref()?.install_plan_ref.as_ref()?.name.clone()
}

/// The InstallPlan is in `phase`.
pub fn plan_in(phase: InstallPlanPhase) -> impl Fn(Option<&InstallPlan>) -> bool {
    move |plan: Option<&InstallPlan>| {
        plan.and_then(|p| p.status.as_ref())
            .is_some_and(|s| s.phase == phase)
    }
}

/// The CSV is in `phase`.
pub fn csv_in(phase: CsvPhase) -> impl Fn(Option<&ClusterServiceVersion>) -> bool {
    move |csv: Option<&ClusterServiceVersion>| {
        csv.and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.phase == Some(phase))
    }
}
