//! Both halves of olm-rs together, as a user meets them: a Subscription to
//! demo-app becomes an InstallPlan (catalog-operator), whose CSVs become
//! running operators (olm-operator): demo-db first, as its dependency, then
//! demo-app, each Succeeded with its Deployment Available.

use std::{sync::Arc, time::Duration};

use e2e::inprocess::{Operator, Registry, demo_index};
use kube::{Api, Client};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{CatalogSource, ConnectivityState, InstallPlan, InstallPlanPhase, Subscription},
};
use olm_runtime::{Leadership, Parts, apply::FIELD_MANAGER_OLM};
use olm_testkit::{
    install_crds,
    objects::{DEMO_APP_INSTALL, STEP, apply_json, wait_installed},
    wait_for_within, with_namespace,
};
use serde_json::json;

#[tokio::test]
async fn a_subscription_ends_in_running_operators() {
    with_namespace("full", |client: Client, ns: String| async move {
        install_crds(&client).await;

        // The demo catalog, served over the registry API on loopback, and both
        // operators, in-process.
        let registry = Registry::start(demo_index(false), "127.0.0.1:0".parse().expect("an address")).await;
        let address = registry.addr.to_string();
        let catalog_operator = Operator::start(&client, &ns);
        let olm_parts =
            Parts::new(client.clone(), Leadership::standalone(), FIELD_MANAGER_OLM).expect("metrics");
        let ctx = Arc::new(olm_operator::context::Context::new(
            client.clone(),
            None,
            Arc::new(olm_operator::metrics::Metrics::register(&olm_parts.metrics).expect("metrics")),
            olm_parts.writer.clone(),
            olm_operator::context::Settings::default(),
        ));
        let olm_operator = tokio::spawn(olm_operator::controllers(&olm_parts, ctx));

        // What a user writes: an OperatorGroup, a CatalogSource and a Subscription.
        let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), &ns);
        apply_json(
            &groups,
            json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "demo", "namespace": ns}, "spec": {"targetNamespaces": [ns]}}),
        )
        .await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        apply_json(
            &sources,
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "demo", "namespace": ns},
            "spec": {"sourceType": "grpc", "address": address}}),
        )
        .await;
        wait_for_within(
            STEP,
            &sources,
            "demo",
            "CatalogSource demo is READY",
            |c: Option<&CatalogSource>| {
                c.and_then(|c| c.status.as_ref()?.connection_state.as_ref())
                    .is_some_and(|s| s.last_observed_state == ConnectivityState::Ready)
            },
        )
        .await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        apply_json(
            &subs,
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "demo-app", "namespace": ns},
            "spec": {"name": "demo-app", "channel": "stable", "source": "demo", "sourceNamespace": ns}}),
        )
        .await;

        // Subscription → InstallPlan → CSVs → Deployments.
        let sub = wait_for_within(
            STEP,
            &subs,
            "demo-app",
            "Subscription demo-app has an InstallPlan",
            |s: Option<&Subscription>| {
                s.and_then(|s| s.status.as_ref()?.install_plan_ref.as_ref())
                    .is_some()
            },
        )
        .await
        .expect("the Subscription");
        let plan_name = sub
            .status
            .and_then(|s| s.install_plan_ref)
            .and_then(|r| r.name)
            .expect("a plan name");
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        wait_for_within(
            STEP,
            &plans,
            &plan_name,
            "the InstallPlan is Complete",
            |p: Option<&InstallPlan>| {
                p.and_then(|p| p.status.as_ref())
                    .is_some_and(|s| s.phase == InstallPlanPhase::Complete)
            },
        )
        .await;
        wait_installed(&client, &ns, &DEMO_APP_INSTALL, STEP).await;
        let sub = subs.get("demo-app").await.expect("the Subscription");
        assert_eq!(
            sub.status.and_then(|s| s.installed_csv).as_deref(),
            Some("demo-app.v0.2.0"),
            "the Subscription records what it installed"
        );

        olm_parts.shutdown.trigger();
        let _ = tokio::time::timeout(Duration::from_secs(20), olm_operator).await;
        catalog_operator.stop().await;
        registry.stop().await;
    })
    .await;
}
