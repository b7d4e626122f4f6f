//! The demo's client side (`hack/demo.sh` runs it once both operators and the
//! demo catalog's registry server are up): it installs the CRDs, creates a
//! CatalogSource for the demo catalog, an OperatorGroup and a Subscription to
//! demo-app, and shows each step until the operators are installed.
//!
//! Arguments: the registry server's address (`host:port`) and the namespace.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use olm_api::v1alpha1::{
    CatalogSource, ClusterServiceVersion, ConnectivityState, CsvPhase, InstallPlan, InstallPlanPhase,
    Subscription,
};
use olm_testkit::{FIELD_MANAGER, client, install_crds, is_deployment_available, wait_for_within};
use serde_json::json;

/// How long each step may take.
const STEP: Duration = Duration::from_secs(180);
const CATALOG: &str = "olm-rs-demo";
/// What the Subscription to demo-app installs: demo-db first, as its dependency.
const CSVS: [&str; 2] = ["demo-db.v1.1.0", "demo-app.v0.2.0"];

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let address = args.next().unwrap_or_else(|| "127.0.0.1:50051".to_owned());
    let namespace = args.next().unwrap_or_else(|| "demo".to_owned());
    let client = client().await;

    step("installing the CRDs of olm-rs");
    let crds = install_crds(&client).await;
    done(&format!("{} CRDs Established", crds.len()));
    prepare_namespace(&client, &namespace, &address).await;
    let plan_name = subscribe(&client, &namespace).await;
    show_install_plan(&client, &namespace, &plan_name).await;
    wait_for_operators(&client, &namespace).await;
    println!("\nolm-rs installed demo-app and its dependency demo-db from the demo catalog.");
}

/// The namespace with an OperatorGroup, and the demo CatalogSource at `address`, READY.
async fn prepare_namespace(client: &Client, namespace: &str, address: &str) {
    step(&format!(
        "namespace {namespace} with an OperatorGroup, and CatalogSource {CATALOG} at {address}"
    ));
    apply(
        client,
        None,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    )
    .await;
    let ns = Some(namespace);
    apply(
        client,
        ns,
        json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "demo", "namespace": namespace},
            "spec": {"targetNamespaces": [namespace]},
        }),
    )
    .await;
    apply(
        client,
        ns,
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": CATALOG, "namespace": namespace},
            "spec": {"sourceType": "grpc", "address": address, "displayName": "olm-rs demo operators",
                     "publisher": "olm-rs", "updateStrategy": {"registryPoll": {"interval": "30s"}}},
        }),
    )
    .await;
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
    wait_for_within(
        STEP,
        &catalogs,
        CATALOG,
        "the CatalogSource is READY",
        |c: Option<&CatalogSource>| {
            c.and_then(|c| c.status.as_ref()?.connection_state.as_ref())
                .is_some_and(|s| s.last_observed_state == ConnectivityState::Ready)
        },
    )
    .await;
    done("the catalog is READY");
}

/// Subscribes to demo-app and returns the name of the InstallPlan it resolves to.
async fn subscribe(client: &Client, namespace: &str) -> String {
    step("subscribing to demo-app (channel stable, automatic approval)");
    apply(
        client,
        Some(namespace),
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "demo-app", "namespace": namespace},
            "spec": {"name": "demo-app", "channel": "stable", "source": CATALOG, "sourceNamespace": namespace,
                     "installPlanApproval": "Automatic"},
        }),
    )
    .await;
    let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    let subscription = wait_for_within(
        STEP,
        &subscriptions,
        "demo-app",
        "the Subscription has an InstallPlan",
        |s: Option<&Subscription>| {
            s.and_then(|s| s.status.as_ref()?.install_plan_ref.as_ref())
                .is_some()
        },
    )
    .await
    .expect("the Subscription exists");
    let plan_name = subscription
        .status
        .and_then(|s| s.install_plan_ref)
        .and_then(|r| r.name)
        .expect("an InstallPlan reference has a name");
    done(&format!("resolved: InstallPlan {plan_name}"));
    plan_name
}

/// Waits for InstallPlan `plan_name` to complete, and shows its steps.
async fn show_install_plan(client: &Client, namespace: &str, plan_name: &str) {
    step(&format!("InstallPlan {plan_name} creates the CRDs and CSVs"));
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let plan = wait_for_within(
        STEP,
        &plans,
        plan_name,
        "the InstallPlan is Complete",
        |p: Option<&InstallPlan>| {
            p.and_then(|p| p.status.as_ref())
                .is_some_and(|s| s.phase == InstallPlanPhase::Complete)
        },
    )
    .await
    .expect("the InstallPlan exists");
    for step in plan.status.and_then(|s| s.plan).unwrap_or_default() {
        println!(
            "      {:<28} {:<26} {:?}",
            step.resource.kind, step.resource.name, step.status
        );
    }
    done("InstallPlan Complete");
}

/// Waits for each CSV to succeed and its Deployment to be available.
async fn wait_for_operators(client: &Client, namespace: &str) {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    for csv in CSVS {
        step(&format!("ClusterServiceVersion {csv} installs its Deployment"));
        wait_for_within(
            STEP,
            &csvs,
            csv,
            "the CSV is Succeeded",
            |c: Option<&ClusterServiceVersion>| {
                c.and_then(|c| c.status.as_ref()?.phase) == Some(CsvPhase::Succeeded)
            },
        )
        .await;
        let deployment = csv.split(".v").next().unwrap_or(csv);
        wait_for_within(
            STEP,
            &deployments,
            deployment,
            "the Deployment is Available",
            is_deployment_available(),
        )
        .await;
        done(&format!("{csv} Succeeded, Deployment {deployment} Available"));
    }
}

/// Server-side applies one object given as JSON.
async fn apply(client: &Client, namespace: Option<&str>, object: serde_json::Value) {
    let object = olm_testkit::dynamic(object, "a demo object");
    let name = object.metadata.name.clone().expect("named");
    let types = object.types.clone().expect("typed");
    let gvk = kube::api::GroupVersionKind::try_from(&types).expect("valid apiVersion");
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("the cluster does not serve {}: {e}", types.kind));
    let api: Api<kube::api::DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("cannot apply {} {name}: {e}", types.kind));
}

fn step(text: &str) {
    println!("==> {text}");
}

fn done(text: &str) {
    println!("    ok: {text}");
}
