//! Automatic rollback of a failed upgrade on a real control plane, with both
//! operators in-process: demo-db 1.1.0 is installed and recorded, then the
//! catalog offers 1.3.0, whose Deployment can never become available (its
//! Pod asks for a node that does not exist, and its progress deadline is 10
//! seconds, so the Deployment reports ProgressDeadlineExceeded and the CSV
//! goes Failed). With automatic rollback on, 1.1.0 comes back and 1.3.0 is
//! not tried again; with it off, 1.3.0 stays as OLM leaves it.

use std::{sync::Arc, time::Duration};

use e2e::{
    inprocess::{DemoStack, demo_catalog, demo_index},
    rollbacks::{plans_for, rolled_back},
};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, wait::Condition, watcher},
};
use olm_api::{
    model::OperatorRevision,
    v1alpha1::{ClusterServiceVersion, ConditionStatus, CsvPhase, InstallPlan, Subscription},
};
use olm_catalog::{Catalog, ChannelEntry, Property, property::BundleObject};
use olm_registry::server::RegistryIndex;
use olm_testkit::{
    install_crds, is_deployment_available,
    objects::{STEP, apply_json, csv_in, subscription_at, wait_installed},
    wait_for, wait_for_within, wait_gone, with_namespace,
};
use serde_json::{Value, json};

const GOOD: &str = "demo-db.v1.1.0";
const BAD: &str = "demo-db.v1.3.0";

/// The demo catalog with demo-db 1.3.0 at the head of `stable`: 1.1.0's
/// bundle, renamed, whose Deployment's Pod selects a node no cluster has.
fn catalog_with_bad_version() -> Catalog {
    let mut catalog = demo_catalog(false);
    let mut bad = catalog
        .bundles
        .iter()
        .find(|b| b.name == GOOD)
        .expect("the demo catalog has demo-db 1.1.0")
        .clone();
    bad.name = BAD.to_owned();
    for property in &mut bad.properties {
        match property {
            Property::Package(package) => package.version = olm_catalog::Version::new("1.3.0"),
            Property::BundleObject(object) => {
                let mut value = object.decode().expect("a bundle object");
                if value["kind"] == "ClusterServiceVersion" {
                    unschedulable(&mut value);
                    *object = BundleObject::from_json(&value.to_string());
                }
            }
            _ => {}
        }
    }
    catalog.bundles.push(bad);
    catalog
        .channels
        .iter_mut()
        .find(|c| c.package == "demo-db" && c.name == "stable")
        .expect("demo-db has a stable channel")
        .entries
        .push(ChannelEntry {
            name: BAD.to_owned(),
            replaces: Some(GOOD.to_owned()),
            skips: Vec::new(),
            skip_range: None,
        });
    catalog
}

/// 1.1.0's CSV made 1.3.0's, with a Deployment that never becomes available.
fn unschedulable(csv: &mut Value) {
    csv["metadata"]["name"] = BAD.into();
    csv["spec"]["version"] = "1.3.0".into();
    csv["spec"]["replaces"] = GOOD.into();
    let deployment = &mut csv["spec"]["install"]["spec"]["deployments"][0]["spec"];
    deployment["progressDeadlineSeconds"] = 10.into();
    deployment["template"]["spec"]["nodeSelector"] = json!({"olm-rs.dev/no-such-node": "true"});
}

/// Subscribes to demo-db with `annotations`, and waits until 1.1.0 runs and
/// is recorded as a revision; then the catalog offers 1.3.0.
async fn install_then_offer_bad(client: &Client, ns: &str, stack: &DemoStack, annotations: Value) {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    apply_json(
        &subs,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "db", "namespace": ns, "annotations": annotations},
        "spec": {"name": "demo-db", "channel": "stable", "source": "demo", "sourceNamespace": ns}}),
    )
    .await;
    wait_installed(client, ns, &[(GOOD, "demo-db")], STEP).await;
    wait_for_within(
        STEP,
        &subs,
        "db",
        "Subscription db is at 1.1.0",
        subscription_at(GOOD),
    )
    .await;
    let revisions: Api<OperatorRevision> = Api::namespaced(client.clone(), ns);
    wait_for(
        &revisions,
        GOOD,
        "the revision of 1.1.0 is recorded",
        |r: Option<&OperatorRevision>| r.is_some(),
    )
    .await;
    stack.update_catalog(Arc::new(RegistryIndex::new(catalog_with_bad_version())));
}

/// Watches the namespace's CSVs for `period`, and returns every phase CSV
/// `name` was seen in (`None` for a deletion or while it has none).
async fn watch_csv(client: &Client, ns: &str, name: &str, period: Duration) -> Vec<Option<CsvPhase>> {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut seen = Vec::new();
    let stream = watcher(csvs, config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let deadline = tokio::time::Instant::now() + period;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, stream.next()).await {
        match event.expect("the watch of CSVs runs") {
            watcher::Event::Apply(csv) | watcher::Event::InitApply(csv) => {
                seen.push(csv.status.and_then(|s| s.phase));
            }
            watcher::Event::Delete(_) => seen.push(None),
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
    seen
}

#[tokio::test]
async fn a_failed_upgrade_rolls_back_to_the_previous_version_and_is_not_tried_again() {
    with_namespace("autorollback", |client, ns| async move {
        install_crds(&client).await;
        let stack = DemoStack::start_with(&client, &ns, demo_index(false)).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        install_then_offer_bad(
            &client,
            &ns,
            &stack,
            json!({"olm-rs.dev/auto-rollback": "true", "olm-rs.dev/auto-rollback-deadline": "5m"}),
        )
        .await;

        // The upgrade is tried: 1.3.0's CSV appears.
        wait_for_within(
            STEP,
            &csvs,
            BAD,
            "the upgrade to 1.3.0 is tried",
            |c: Option<&ClusterServiceVersion>| c.is_some(),
        )
        .await;
        // It fails, and 1.1.0 comes back.
        let sub = wait_for_within(
            STEP * 2,
            &subs,
            "db",
            "Subscription db is rolled back to 1.1.0",
            |s: Option<&Subscription>| {
                subscription_at(GOOD)(s)
                    && rolled_back(s).is_some_and(|(status, reason, _)| {
                        status == ConditionStatus::True && reason == "RolledBack"
                    })
            },
        )
        .await
        .expect("the Subscription");
        let (_, _, message) = rolled_back(Some(&sub)).unwrap();
        assert!(
            message.contains("demo-db.v1.1.0 (version 1.1.0)")
                && message.contains("demo-db.v1.3.0 (version 1.3.0)")
                && message.contains("went Failed"),
            "the condition names both versions and the cause: {message}"
        );
        assert_eq!(
            sub.annotations()
                .get("olm-rs.dev/failed-upgrade")
                .map(String::as_str),
            Some(BAD)
        );
        wait_gone(&csvs, BAD).await;
        wait_installed(&client, &ns, &[(GOOD, "demo-db")], STEP).await;
        let deployment = wait_for_within(
            STEP,
            &deployments,
            "demo-db",
            "1.1.0's Deployment is available again, as it was",
            |d: Option<&Deployment>| {
                is_deployment_available().matches_object(d)
                    && d.and_then(|d| d.spec.as_ref()?.template.spec.as_ref())
                        .is_some_and(|spec| spec.node_selector.is_none())
            },
        )
        .await
        .expect("the Deployment");
        let status = deployment.status.expect("a status");
        assert_eq!(status.updated_replicas, status.replicas, "rolled out whole");

        // Not tried again: over a period in which the namespace is resolved
        // again (a second Subscription), no CSV of 1.3.0 appears and no new
        // plan installs it, though the catalog still offers it.
        let upgrades = plans_for(&plans, BAD).await;
        apply_json(
            &subs,
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "probe", "namespace": ns},
            "spec": {"name": "demo-broken", "channel": "stable", "source": "demo", "sourceNamespace": ns}}),
        )
        .await;
        let seen = watch_csv(&client, &ns, BAD, Duration::from_secs(30)).await;
        assert!(seen.is_empty(), "1.3.0 was tried again: {seen:?}");
        let probe = subs.get("probe").await.expect("the probe Subscription");
        assert!(
            probe.status.and_then(|s| s.conditions).is_some(),
            "the namespace was resolved again during the watch"
        );
        assert_eq!(
            plans_for(&plans, BAD).await,
            upgrades,
            "no new plan installs 1.3.0"
        );
        let sub = subs.get("db").await.expect("the Subscription");
        assert_eq!(sub.status.unwrap().installed_csv.as_deref(), Some(GOOD));

        stack.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_failed_upgrade_without_automatic_rollback_stays_as_olm_leaves_it() {
    with_namespace("noautorollback", |client, ns| async move {
        install_crds(&client).await;
        let stack = DemoStack::start_with(&client, &ns, demo_index(false)).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        install_then_offer_bad(&client, &ns, &stack, json!({})).await;

        wait_for_within(
            STEP * 2,
            &csvs,
            BAD,
            "the CSV of 1.3.0 goes Failed",
            csv_in(CsvPhase::Failed),
        )
        .await;
        // Over a period: 1.3.0 stays, never Succeeded, and nothing is rolled back.
        let seen = watch_csv(&client, &ns, BAD, Duration::from_secs(30)).await;
        assert!(
            !seen.is_empty()
                && seen
                    .iter()
                    .all(|phase| phase.is_some_and(|p| p != CsvPhase::Succeeded)),
            "1.3.0 stays, not Succeeded: {seen:?}"
        );
        let sub = subs.get("db").await.expect("the Subscription");
        assert!(rolled_back(Some(&sub)).is_none(), "nothing is rolled back");
        assert!(!sub.annotations().contains_key("olm-rs.dev/rollback-to"));
        assert_eq!(
            sub.status.as_ref().and_then(|s| s.current_csv.as_deref()),
            Some(BAD)
        );
        let csv = csvs.get(BAD).await.expect("1.3.0's CSV is still there");
        assert!(csv.metadata.deletion_timestamp.is_none());
        assert_ne!(csv.status.and_then(|s| s.phase), Some(CsvPhase::Succeeded));

        stack.stop().await;
    })
    .await;
}
