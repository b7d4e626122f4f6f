//! A Subscription's `spec.config` on a real control plane: merged into the
//! Deployments of the CSV its `status.installedCSV` names, applied again when
//! it changes, and reverted when it is removed.
//!
//! Run with `cargo test -p olm-operator --test subscription_config -- --ignored`.

mod common;

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Container, PodSpec},
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::v1alpha1::{ClusterServiceVersion, CsvPhase, Subscription};

use common::{csv::*, *};

const CSV: &str = "demo.v1.0.0";

fn pod(deployment: &Deployment) -> PodSpec {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("a pod spec")
}

fn container(deployment: &Deployment) -> Container {
    pod(deployment).containers[0].clone()
}

fn env(deployment: &Deployment) -> BTreeMap<String, String> {
    container(deployment)
        .env
        .unwrap_or_default()
        .into_iter()
        .map(|var| (var.name, var.value.unwrap_or_default()))
        .collect()
}

/// Waits until the `demo` Deployment satisfies `check`, and returns it.
async fn wait_for_demo(api: &Api<Deployment>, what: &str, check: impl Fn(&Deployment) -> bool) -> Deployment {
    wait_for(api, "demo", what, move |d: Option<&Deployment>| {
        d.is_some_and(&check)
    })
    .await
    .expect("the demo Deployment")
}

async fn set_config(subs: &Api<Subscription>, config: serde_json::Value) {
    subs.patch(
        "demo",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"config": config}})),
    )
    .await
    .expect("patch the Subscription's config");
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_subscription_config_is_merged_into_the_deployments_updated_and_reverted() {
    with_namespace("subconfig", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let subs = Api::<Subscription>::namespaced(client.clone(), &ns);
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);

        // The Subscription as catalog-operator leaves it once the CSV is installed.
        let subscription: Subscription = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": "demo", "namespace": ns},
            "spec": {
                "source": "demo-catalog",
                "sourceNamespace": ns,
                "name": "demo",
                "config": {
                    "env": [
                        {"name": "VERSION", "value": "from-config"},
                        {"name": "LOG_LEVEL", "value": "debug"},
                    ],
                    "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                    "nodeSelector": {"type": "kwok"},
                    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "operators", "effect": "NoSchedule"}],
                    "volumes": [{"name": "settings", "configMap": {"name": "demo-settings", "optional": true}}],
                    "volumeMounts": [{"name": "settings", "mountPath": "/etc/demo"}],
                    "annotations": {"example.com/team": "platform"},
                },
            },
        }))
        .expect("a Subscription");
        subs.create(&PostParams::default(), &subscription)
            .await
            .expect("create the Subscription");
        subs.patch_status(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"installedCSV": CSV, "currentCSV": CSV}})),
        )
        .await
        .expect("set the Subscription's installedCSV");

        create_csv(
            &client,
            &ns,
            demo_csv(CSV, "1.0.0", None, &["demo"], OWN_NAMESPACE, None),
        )
        .await;
        wait_for_csv(&csvs, CSV, CsvPhase::Succeeded).await;

        // Everything the config sets is merged in.
        let merged = wait_for_demo(&deployments, "the config merged into demo", |d| {
            env(d).get("LOG_LEVEL").map(String::as_str) == Some("debug")
        })
        .await;
        let vars = env(&merged);
        assert_eq!(vars["VERSION"], "from-config", "the config's value wins");
        assert_eq!(vars["OPERATOR_CONDITION_NAME"], CSV, "OLM's variable stays");
        let names: Vec<String> = container(&merged)
            .env
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.name)
            .collect();
        assert_eq!(
            names,
            ["VERSION", "OPERATOR_CONDITION_NAME", "LOG_LEVEL"],
            "replaced in place, new ones appended"
        );
        let resources = container(&merged).resources.expect("resources");
        let requests = resources.requests.expect("requests");
        assert_eq!(requests["cpu"].0, "50m");
        assert_eq!(requests["memory"].0, "32Mi");
        let pod_spec = pod(&merged);
        assert_eq!(
            pod_spec.node_selector,
            Some(BTreeMap::from([("type".to_owned(), "kwok".to_owned())]))
        );
        let tolerations = pod_spec.tolerations.clone().unwrap_or_default();
        assert!(
            tolerations
                .iter()
                .any(|t| t.key.as_deref() == Some("dedicated") && t.value.as_deref() == Some("operators")),
            "{tolerations:?}"
        );
        assert!(
            pod_spec
                .volumes
                .unwrap_or_default()
                .iter()
                .any(|v| v.name == "settings")
        );
        assert!(
            container(&merged)
                .volume_mounts
                .unwrap_or_default()
                .iter()
                .any(|m| m.name == "settings" && m.mount_path == "/etc/demo")
        );
        assert_eq!(
            merged
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("example.com/team"))
                .map(String::as_str),
            Some("platform")
        );

        // A changed config is applied again: a new value, a toleration and the volume dropped.
        set_config(
            &subs,
            serde_json::json!({
                "env": [{"name": "LOG_LEVEL", "value": "info"}],
                "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                "nodeSelector": {"type": "kwok"},
                "tolerations": null,
                "volumes": null,
                "volumeMounts": null,
            }),
        )
        .await;
        let changed = wait_for_demo(&deployments, "the changed config on demo", |d| {
            env(d).get("LOG_LEVEL").map(String::as_str) == Some("info")
        })
        .await;
        assert_eq!(
            env(&changed)["VERSION"],
            "1.0.0",
            "the CSV's value is back once the config no longer sets it"
        );
        assert!(
            pod(&changed)
                .tolerations
                .unwrap_or_default()
                .iter()
                .all(|t| t.key.as_deref() != Some("dedicated")),
            "the dropped toleration is gone"
        );
        assert!(
            pod(&changed)
                .volumes
                .unwrap_or_default()
                .iter()
                .all(|v| v.name != "settings")
        );
        assert!(
            container(&changed)
                .volume_mounts
                .unwrap_or_default()
                .iter()
                .all(|m| m.name != "settings")
        );
        assert!(container(&changed).resources.and_then(|r| r.requests).is_some());

        // Removing the config reverts the Deployment to the CSV's.
        set_config(&subs, serde_json::Value::Null).await;
        let reverted = wait_for_demo(&deployments, "demo back to the CSV's spec", |d| {
            !env(d).contains_key("LOG_LEVEL")
        })
        .await;
        assert_eq!(
            env(&reverted),
            BTreeMap::from([
                ("VERSION".to_owned(), "1.0.0".to_owned()),
                ("OPERATOR_CONDITION_NAME".to_owned(), CSV.to_owned()),
            ])
        );
        let resources = container(&reverted).resources.unwrap_or_default();
        assert!(
            resources.requests.is_none() && resources.limits.is_none(),
            "{resources:?}"
        );
        assert_eq!(pod(&reverted).node_selector, None);
        assert!(
            pod(&reverted)
                .volumes
                .unwrap_or_default()
                .iter()
                .all(|v| v.name != "settings")
        );
        assert!(
            reverted
                .metadata
                .annotations
                .as_ref()
                .is_none_or(|a| !a.contains_key("example.com/team")),
            "the config's annotation is gone"
        );
        wait_for_csv(&csvs, CSV, CsvPhase::Succeeded).await;
    })
    .await;
}
