//! A Subscription's `spec.config` as a user meets it, with both operators: a
//! Subscription to demo-app with a config installs demo-app's Deployment with
//! the config merged in (and demo-db, its dependency, without it); changing
//! the config updates the Deployment and removing it reverts it.

use std::collections::BTreeMap;

use e2e::inprocess::DemoStack;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::PodSpec};
use kube::{Api, Client};
use olm_api::v1alpha1::Subscription;
use olm_testkit::{
    install_crds,
    objects::{DEMO_APP_INSTALL, STEP, apply_json, wait_installed},
    wait_for_within, with_namespace,
};
use serde_json::json;

fn pod(deployment: &Deployment) -> PodSpec {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("a pod spec")
}

/// The variables of every container, by container.
fn env(deployment: &Deployment) -> Vec<BTreeMap<String, String>> {
    pod(deployment)
        .containers
        .into_iter()
        .map(|c| {
            c.env
                .unwrap_or_default()
                .into_iter()
                .map(|v| (v.name, v.value.unwrap_or_default()))
                .collect()
        })
        .collect()
}

fn subscription(ns: &str, config: Option<serde_json::Value>) -> serde_json::Value {
    let mut sub = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "demo-app", "namespace": ns},
        "spec": {"name": "demo-app", "channel": "stable", "source": "demo", "sourceNamespace": ns}});
    if let Some(config) = config {
        sub["spec"]["config"] = config;
    }
    sub
}

async fn wait_for_deployment(
    api: &Api<Deployment>,
    name: &str,
    what: &str,
    check: impl Fn(&Deployment) -> bool,
) -> Deployment {
    wait_for_within(STEP, api, name, what, move |d: Option<&Deployment>| {
        d.is_some_and(&check)
    })
    .await
    .unwrap_or_else(|| panic!("Deployment {name}"))
}

#[tokio::test]
async fn a_subscription_config_reaches_the_deployments_and_follows_changes() {
    with_namespace("subcfg", |client: Client, ns: String| async move {
        install_crds(&client).await;
        let stack = DemoStack::start(&client, &ns).await;

        // The user's Subscription, with a config.
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let config = json!({
            "env": [{"name": "LOG_LEVEL", "value": "debug"}],
            "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "10m"}},
            "nodeSelector": {"type": "kwok"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
        });
        apply_json(&subs, subscription(&ns, Some(config))).await;
        wait_installed(&client, &ns, &DEMO_APP_INSTALL, STEP).await;

        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let merged = wait_for_deployment(&deployments, "demo-app", "demo-app with the config", |d| {
            env(d)
                .iter()
                .all(|vars| vars.get("LOG_LEVEL").map(String::as_str) == Some("debug"))
        })
        .await;
        let spec = pod(&merged);
        for container in &spec.containers {
            let resources = container.resources.clone().unwrap_or_default();
            assert_eq!(
                resources.limits.as_ref().map(|l| l["memory"].0.as_str()),
                Some("64Mi")
            );
            assert_eq!(
                resources.requests.as_ref().map(|r| r["cpu"].0.as_str()),
                Some("10m")
            );
            assert!(
                container
                    .volume_mounts
                    .iter()
                    .flatten()
                    .any(|m| m.name == "scratch" && m.mount_path == "/scratch")
            );
        }
        assert_eq!(
            spec.node_selector,
            Some(BTreeMap::from([("type".to_owned(), "kwok".to_owned())]))
        );
        assert!(
            spec.tolerations
                .iter()
                .flatten()
                .any(|t| t.key.as_deref() == Some("dedicated"))
        );
        assert!(spec.volumes.iter().flatten().any(|v| v.name == "scratch"));

        // demo-db came as a dependency, through its own Subscription: not this config.
        let db = deployments.get("demo-db").await.expect("the demo-db Deployment");
        assert!(
            env(&db).iter().all(|vars| !vars.contains_key("LOG_LEVEL")),
            "another Subscription's config stays off demo-db"
        );

        // A changed config is applied again.
        apply_json(
            &subs,
            subscription(
                &ns,
                Some(json!({"env": [{"name": "LOG_LEVEL", "value": "info"}]})),
            ),
        )
        .await;
        let changed = wait_for_deployment(&deployments, "demo-app", "demo-app with the new config", |d| {
            env(d)
                .iter()
                .all(|vars| vars.get("LOG_LEVEL").map(String::as_str) == Some("info"))
        })
        .await;
        let spec = pod(&changed);
        assert_eq!(spec.node_selector, None, "the config no longer sets it");
        assert!(spec.volumes.iter().flatten().all(|v| v.name != "scratch"));
        for container in &spec.containers {
            let resources = container.resources.clone().unwrap_or_default();
            assert_eq!(resources.limits, None, "the config's limits are gone");
            assert_eq!(
                resources.requests.as_ref().map(|r| r["memory"].0.as_str()),
                Some("16Mi"),
                "the CSV's own requests are back"
            );
        }

        // Removing the config reverts the Deployment.
        apply_json(&subs, subscription(&ns, None)).await;
        let reverted = wait_for_deployment(&deployments, "demo-app", "demo-app without the config", |d| {
            env(d).iter().all(|vars| !vars.contains_key("LOG_LEVEL"))
        })
        .await;
        assert!(
            pod(&reverted)
                .tolerations
                .iter()
                .flatten()
                .all(|t| t.key.as_deref() != Some("dedicated"))
        );
        wait_installed(&client, &ns, &DEMO_APP_INSTALL, STEP).await;

        stack.stop().await;
    })
    .await;
}

/// `kubectl olm ARGS` in namespace `ns`, which must succeed: its output.
async fn kubectl_olm(client: &Client, ns: &str, args: &[&str]) -> String {
    let argv: Vec<&str> = ["-n", ns].iter().chain(args).copied().collect();
    e2e::kubectl::kubectl_olm(client, &argv).await.ok()
}

fn replicas(deployment: &Deployment) -> Option<i32> {
    deployment.spec.as_ref().and_then(|s| s.replicas)
}

#[tokio::test]
async fn scaling_an_operator_in_pods_sets_its_deployments_replicas_through_its_subscription() {
    with_namespace("scalepods", |client: Client, ns: String| async move {
        install_crds(&client).await;
        let stack = DemoStack::start(&client, &ns).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        apply_json(&subs, subscription(&ns, None)).await;
        wait_installed(&client, &ns, &DEMO_APP_INSTALL, STEP).await;
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let declared = replicas(&deployments.get("demo-app").await.expect("demo-app"));
        let db_declared = replicas(&deployments.get("demo-db").await.expect("demo-db"));

        // The dry run prints the Subscription it would write, and writes nothing.
        let dry = kubectl_olm(
            &client,
            &ns,
            &["scale", "demo-app", "3", "--dry-run", "-o", "yaml"],
        )
        .await;
        assert!(
            dry.contains("kind: Subscription") && dry.contains("olm-rs.dev/replicas: \"3\""),
            "{dry}"
        );
        let sub = subs.get("demo-app").await.expect("the Subscription");
        assert!(
            !sub.metadata
                .annotations
                .unwrap_or_default()
                .contains_key("olm-rs.dev/replicas")
        );

        let out = kubectl_olm(&client, &ns, &["scale", "demo-app", "3"]).await;
        assert!(
            out.contains("demo-app scaled to 3 replica(s) through Subscription demo-app"),
            "{out}"
        );
        wait_for_deployment(&deployments, "demo-app", "demo-app at 3 replicas", |d| {
            replicas(d) == Some(3)
        })
        .await;
        let db = deployments.get("demo-db").await.expect("demo-db");
        assert_eq!(
            replicas(&db),
            db_declared,
            "another Subscription's operator keeps its count"
        );

        // A count no one can read is told on the Subscription, and the
        // Deployment goes back to what its CSV declares.
        let bad = json!({"metadata": {"annotations": {"olm-rs.dev/replicas": "many"}}});
        subs.patch(
            "demo-app",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&bad),
        )
        .await
        .expect("annotate the Subscription");
        wait_for_deployment(
            &deployments,
            "demo-app",
            "demo-app back at its CSV's replicas",
            |d| replicas(d) == declared,
        )
        .await;
        let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), &ns);
        olm_testkit::eventually("an InvalidReplicas Warning on the Subscription", || async {
            events.list(&Default::default()).await.is_ok_and(|list| {
                list.items.iter().any(|e| {
                    e.reason.as_deref() == Some("InvalidReplicas")
                        && e.type_.as_deref() == Some("Warning")
                        && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Subscription")
                        && e.note.as_deref().is_some_and(|n| n.contains("\"many\""))
                })
            })
        })
        .await;
        wait_installed(&client, &ns, &DEMO_APP_INSTALL, STEP).await;
        stack.stop().await;
    })
    .await;
}
