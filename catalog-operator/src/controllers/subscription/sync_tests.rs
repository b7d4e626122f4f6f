//! The wiring of a namespace sync against a mocked API server: what one sync
//! writes, in order (a new plan created by its deterministic name, then its
//! status, then the Subscription's status with the plan's UID); that a sync
//! whose writes are live in the stores writes nothing; that a create refused
//! because the name is taken (by that plan, not in the store yet, or by a plan
//! installing something else) leaves the Subscription's status alone; and that
//! the unpack policy is read from the OperatorGroup store.

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

/// The API server: a new InstallPlan is created as UID `uid-plan` unless
/// `taken` names the plan that holds its name already (then HTTP 409), and the
/// status written to it (a JSON Patch bound to that UID) returns it with that
/// status; every other write returns what it was sent.
fn api_server(taken: Option<&str>) -> (Client, MockApi) {
    let taken = taken.map(str::to_owned);
    let created: Arc<Mutex<serde_json::Value>> = Arc::default();
    MockApi::new(move |request: &Request| {
        let mut plan = created.lock().expect("not poisoned");
        if request.line == format!("POST {PLANS}") {
            if taken.as_deref() == request.body["metadata"]["name"].as_str() {
                return Some(Answer::failure(409, "AlreadyExists"));
            }
            *plan = request.body.clone();
            plan["metadata"]["uid"] = "uid-plan".into();
            plan["metadata"]["generation"] = 1.into();
            return Some(Answer::ok(plan.clone()));
        }
        let name = plan["metadata"]["name"].as_str().unwrap_or("none").to_owned();
        (request.line == format!("PATCH {PLANS}/{name}/status")).then(|| {
            plan["status"] = plan_status(&request.body);
            Answer::ok(plan.clone())
        })
    })
}

/// The status a JSON Patch bound to an object's UID writes.
fn plan_status(patch: &serde_json::Value) -> serde_json::Value {
    let ops = patch.as_array().expect("a JSON Patch");
    assert!(
        ops.iter()
            .any(|op| op["op"] == "test" && op["path"] == "/metadata/uid" && op["value"] == "uid-plan"),
        "the plan's status goes only onto the plan created: {patch}"
    );
    let add = ops.iter().find(|op| op["path"] == "/status").expect("the status");
    add["value"].clone()
}

/// A context over `client` whose stores hold `subscriptions` and `plans`, and
/// whose catalogs hold the demo catalog as `team/demo`.
fn context(client: Client, subscriptions: Vec<Subscription>, plans: Vec<InstallPlan>) -> SubscriptionContext {
    let stores = Stores {
        subscriptions: olm_testkit::stores::listed(subscriptions),
        install_plans: olm_testkit::stores::listed(plans),
        ..Stores::empty()
    };
    context_of(client, stores)
}

/// A context over `client` with `stores`, whose catalogs hold the demo
/// catalog as `team/demo`.
fn context_of(client: Client, stores: Stores) -> SubscriptionContext {
    let metrics = olm_runtime::metrics::Metrics::new().expect("metrics");
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
    let mut plan = mock.last_body(&format!("POST {PLANS}")).expect("a plan created");
    let name = plan["metadata"]["name"].as_str().expect("a name").to_owned();
    plan["metadata"]["uid"] = "uid-plan".into();
    let status = mock
        .last_body(&format!("PATCH {PLANS}/{name}/status"))
        .expect("its status");
    plan["status"] = plan_status(&status);
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

/// Subscription `db` of the demo package, as created (UID `uid-db`).
fn new_subscription() -> Subscription {
    let mut new = Arc::unwrap_or_clone(subscription("db", "demo-db", Approval::Automatic));
    new.metadata.uid = Some("uid-db".into());
    new
}

/// The name and UID the status of `subscription` refers to its plan by, in
/// `installPlanRef` and in the older `installplan`.
fn plan_reference(subscription: &Subscription) -> [(Option<String>, Option<String>); 2] {
    let status = subscription.status.as_ref().expect("a status");
    let reference = status.install_plan_ref.as_ref().expect("installPlanRef");
    let legacy = status.install.as_ref().expect("installplan");
    [
        (reference.name.clone(), reference.uid.clone()),
        (Some(legacy.name.clone()), Some(legacy.uuid.clone())),
    ]
}

#[tokio::test]
async fn a_sync_creates_the_plan_by_its_name_then_its_status_and_a_synced_namespace_writes_nothing() {
    let new = new_subscription();
    let (client, mock) = api_server(None);
    let ctx = context(client, vec![new.clone()], Vec::new());
    sync_namespace(&ctx, "team").await.expect("synced");
    let (subscription, plan) = written(&mock, new.clone());
    let name = plan.name_any();
    assert_eq!(
        mock.lines(),
        [
            format!("POST {PLANS}"),
            format!("PATCH {PLANS}/{name}/status"),
            format!("PATCH {SUBSCRIPTIONS}/db/status"),
        ],
        "one create, by name"
    );
    assert!(
        name.strip_prefix("install-")
            .is_some_and(|suffix| suffix.len() == 5
                && suffix
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())),
        "OLM's shape: {name}"
    );
    assert_eq!(plan.metadata.generate_name, None);
    assert_eq!(plan.spec.cluster_service_version_names, ["demo-db.v1.1.0"]);
    let uid = (Some(name.clone()), Some("uid-plan".to_owned()));
    assert_eq!(
        plan_reference(&subscription),
        [uid.clone(), uid],
        "the status refers to the plan created, by its UID too"
    );

    // The same sync again, its stores not showing the plan yet: the same plan
    // by the same name, whose create is refused; nothing else is written.
    let (client, lagging) = api_server(Some(&name));
    let ctx = context(client, vec![subscription.clone()], Vec::new());
    let again = sync_namespace(&ctx, "team").await.expect("synced");
    assert_eq!(lagging.lines(), [format!("POST {PLANS}")]);
    assert_eq!(
        lagging.last_body(&format!("POST {PLANS}")).unwrap()["metadata"]["name"],
        name
    );
    assert!(again.is_some(), "planned again soon");

    // A new replica whose stores hold what was written: nothing to write.
    let (client, again) = api_server(None);
    let ctx = context(client, vec![subscription], vec![plan]);
    sync_namespace(&ctx, "team").await.expect("synced");
    assert_eq!(again.writes(), [], "a synced namespace writes nothing");
}

#[tokio::test]
async fn a_subscription_never_refers_to_a_plan_of_its_name_that_installs_something_else() {
    let new = new_subscription();
    // What the sync would name its plan.
    let (client, mock) = api_server(None);
    sync_namespace(&context(client, vec![new.clone()], Vec::new()), "team")
        .await
        .expect("synced");
    let (_, planned) = written(&mock, new.clone());
    let name = planned.name_any();

    // Another plan holds that name (an older one, recreated), which the store
    // does not show yet: the create is refused, and neither that plan's
    // status nor the Subscription's is written.
    let (client, taken) = api_server(Some(&name));
    let ctx = context(client, vec![new.clone()], Vec::new());
    let action = sync_namespace(&ctx, "team").await.expect("synced");
    assert_eq!(taken.lines(), [format!("POST {PLANS}")]);
    assert!(action.is_some(), "planned again soon");

    // Once the store shows it, the new plan gets another name, and the
    // Subscription refers to that one.
    let mut other = planned.clone();
    other.spec.cluster_service_version_names = vec!["demo-db.v1.0.0".into()];
    other.spec.generation = Some(0);
    other.status = None;
    let (client, mock) = api_server(Some(&name));
    let ctx = context(client, vec![new.clone()], vec![other]);
    sync_namespace(&ctx, "team").await.expect("synced");
    let (subscription, plan) = written(&mock, new);
    assert_ne!(plan.name_any(), name);
    assert_eq!(plan.spec.cluster_service_version_names, ["demo-db.v1.1.0"]);
    let reference = (Some(plan.name_any()), Some("uid-plan".to_owned()));
    assert_eq!(plan_reference(&subscription), [reference.clone(), reference]);
}

#[tokio::test]
async fn the_unpack_policy_is_read_from_the_store_of_operator_groups() {
    use kube::{api::ObjectMeta, core::PartialObjectMetaExt};
    use olm_api::v1::OperatorGroup;

    use crate::images::unpack::{DEFAULT_TIMEOUT, TIMEOUT_ANNOTATION};

    let group = |namespace: &str, name: &str| {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            annotations: Some([(TIMEOUT_ANNOTATION.to_owned(), "90s".to_owned())].into()),
            ..ObjectMeta::default()
        }
        .into_response_partial::<OperatorGroup>()
    };
    // The OperatorGroups of the store → the unpack timeout of namespace `team`.
    let cases = [
        (vec![group("team", "og")], std::time::Duration::from_secs(90)),
        (vec![group("ops", "og")], DEFAULT_TIMEOUT),
        (vec![group("team", "a"), group("team", "b")], DEFAULT_TIMEOUT),
    ];
    for (groups, timeout) in cases {
        let (client, mock) = MockApi::echo();
        let stores = Stores {
            subscriptions: olm_testkit::stores::listed(vec![new_subscription()]),
            operator_groups: olm_testkit::stores::listed(groups.clone()),
            ..Stores::empty()
        };
        let ctx = context_of(client, stores);
        let inputs = super::read_namespace(&ctx, "team").expect("a Subscription");
        let names: Vec<_> = groups.iter().map(|g| g.metadata.name.clone()).collect();
        assert_eq!(inputs.unpack_policy.timeout, timeout, "{names:?}");
        assert_eq!(mock.lines(), Vec::<String>::new(), "read from the store alone");
    }
}
