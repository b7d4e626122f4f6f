//! The wiring of a namespace sync against a mocked API server: what one sync
//! writes, in order, and that a sync whose writes are live in the stores
//! writes nothing.

use std::sync::{Arc, Mutex};

use kube::{Client, ResourceExt};
use olm_api::v1alpha1::{Approval, InstallPlan, Subscription};
use olm_runtime::{Leadership, apply::Writer};
use olm_testkit::mock_api::{Answer, MockApi, Request};

use super::{SubscriptionContext, resolve::tests::demo_store, resolve::tests::subscription, sync_namespace};
use crate::{
    controllers::{Context, Options, Stores},
    metrics::CatalogMetrics,
};

const PLANS: &str = "/apis/operators.coreos.com/v1alpha1/namespaces/team/installplans";
const SUBSCRIPTIONS: &str = "/apis/operators.coreos.com/v1alpha1/namespaces/team/subscriptions";

/// The API server: a new InstallPlan gets the name `install-abcde` (as
/// `generateName` would give it), and its status write returns it with that
/// status; every other write returns what it was sent.
fn api_server() -> (Client, MockApi) {
    let created: Arc<Mutex<serde_json::Value>> = Arc::default();
    MockApi::new(move |request: &Request| {
        let mut plan = created.lock().expect("not poisoned");
        if request.line == format!("POST {PLANS}") {
            *plan = request.body.clone();
            plan["metadata"]["name"] = "install-abcde".into();
            plan["metadata"]["uid"] = "uid-plan".into();
            plan["metadata"]["generation"] = 1.into();
            return Some(Answer::ok(plan.clone()));
        }
        (request.line == format!("PATCH {PLANS}/install-abcde/status")).then(|| {
            plan["status"] = request.body["status"].clone();
            Answer::ok(plan.clone())
        })
    })
}

/// A context over `client` whose stores hold `subscriptions` and `plans`, and
/// whose catalogs hold the demo catalog as `team/demo`.
fn context(client: Client, subscriptions: Vec<Subscription>, plans: Vec<InstallPlan>) -> SubscriptionContext {
    let metrics = olm_runtime::metrics::Metrics::new().expect("metrics");
    let stores = Stores {
        subscriptions: olm_testkit::stores::listed(subscriptions),
        install_plans: olm_testkit::stores::listed(plans),
        ..Stores::empty()
    };
    let shared = Context::new(
        client,
        Writer::new(Leadership::standalone(), "catalog-operator"),
        demo_store().0,
        stores,
        Options::default(),
        CatalogMetrics::register(metrics.registry()).expect("metrics"),
        metrics.reconcile.clone(),
    );
    SubscriptionContext::new(Arc::new(shared))
}

/// What the API server holds after `mock`'s writes: the plan created, with the
/// status written to it, and the Subscription with its status.
fn written(mock: &MockApi, mut subscription: Subscription) -> (Subscription, InstallPlan) {
    let plan_status = format!("PATCH {PLANS}/install-abcde/status");
    let mut plan = mock.last_body(&format!("POST {PLANS}")).expect("a plan created");
    plan["metadata"]["name"] = "install-abcde".into();
    plan["metadata"]["uid"] = "uid-plan".into();
    plan["status"] = mock.last_body(&plan_status).expect("its status")["status"].clone();
    let status = mock
        .last_body(&format!("PATCH {SUBSCRIPTIONS}/db/status"))
        .expect("a Subscription status")["status"]
        .clone();
    subscription.status = Some(serde_json::from_value(status).expect("a Subscription status"));
    subscription.metadata.resource_version = Some("2".into());
    (
        subscription,
        serde_json::from_value(plan).expect("an InstallPlan"),
    )
}

#[tokio::test]
async fn a_sync_writes_the_plan_then_the_status_and_a_synced_namespace_writes_nothing() {
    let mut new = Arc::unwrap_or_clone(subscription("db", "demo-db", Approval::Automatic));
    new.metadata.uid = Some("uid-db".into());
    let (client, mock) = api_server();
    let ctx = context(client, vec![new.clone()], Vec::new());
    sync_namespace(&ctx, "team").await.expect("synced");
    assert_eq!(
        mock.lines(),
        [
            format!("POST {PLANS}"),
            format!("PATCH {PLANS}/install-abcde/status"),
            format!("PATCH {SUBSCRIPTIONS}/db/status"),
        ]
    );
    let (subscription, plan) = written(&mock, new);
    assert_eq!(plan.spec.cluster_service_version_names, ["demo-db.v1.1.0"]);
    let reference = subscription
        .status
        .as_ref()
        .and_then(|s| s.install_plan_ref.as_ref());
    assert_eq!(
        reference.and_then(|r| r.name.as_deref()),
        Some(plan.name_any().as_str()),
        "the status refers to the plan"
    );

    // A new replica whose stores hold what was written: nothing to write.
    let (client, again) = api_server();
    let ctx = context(client, vec![subscription], vec![plan]);
    sync_namespace(&ctx, "team").await.expect("synced");
    assert_eq!(again.writes(), [], "a synced namespace writes nothing");
}
