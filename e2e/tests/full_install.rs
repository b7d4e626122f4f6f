//! Both halves of olm-rs together, as a user meets them: a Subscription to
//! demo-app becomes an InstallPlan (catalog-operator), whose CSVs become
//! running operators (olm-operator): demo-db first, as its dependency, then
//! demo-app, each Succeeded with its Deployment Available.

use e2e::inprocess::DemoStack;
use kube::{Api, Client};
use olm_api::v1alpha1::{InstallPlan, InstallPlanPhase, Subscription};
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

        // The demo catalog, both operators, an OperatorGroup and a READY CatalogSource.
        let stack = DemoStack::start(&client, &ns).await;
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

        stack.stop().await;
    })
    .await;
}
