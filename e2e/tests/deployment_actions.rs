//! Actions of an operator installed as Deployments, run as Jobs, on the real
//! control plane with olm-operator in-process under its RBAC of `manifests/`.
//!
//! The operator `shop` declares an action `backup` whose Job is made from its
//! Deployment `shop-actions` (no replicas): its image, ServiceAccount,
//! environment and node selector. The test cluster's nodes are kwok's: they
//! run no container, and would complete a Job's Pod at once with no
//! termination message. So the Deployment's node selector matches no node:
//! the Job's Pod is never scheduled, and the test plays the kubelet that
//! would run it, writing the container's end and termination message into
//! the Pod's status; the Job controller then completes or fails the Job.

use std::collections::BTreeMap;

use k8s_openapi::api::{batch::v1::Job, core::v1::Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use olm_api::{
    model::{Action, TaskState},
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};
use olm_testkit::{eventually, install_crds, objects::apply_json, wait_for, with_namespace};
use serde_json::json;

const CSV: &str = "shop.v1.0.0";
/// A node label no node of the test cluster has.
const NO_NODE: &str = "olm-rs.dev/e2e-no-node";

/// A Deployment of the CSV's install strategy.
fn deployment(name: &str, replicas: i32, account: &str, pod: serde_json::Value) -> serde_json::Value {
    let mut spec = json!({"serviceAccountName": account});
    if let (Some(spec), Some(pod)) = (spec.as_object_mut(), pod.as_object()) {
        spec.extend(pod.clone());
    }
    json!({"name": name, "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})
}

async fn install_shop(client: &Client, ns: &str) {
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), ns);
    apply_json(
        &groups,
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
               "metadata": {"name": "group", "namespace": ns}, "spec": {"targetNamespaces": [ns]}}),
    )
    .await;
    let actions = "backup:\n  description: Back up the shop.\n  params: {path: {type: string}}\n  required: [path]\n  job: {command: [/tools/backup, --all], deployment: shop-actions, container: runner}\n";
    let rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    apply_json(
        &csvs,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": CSV, "namespace": ns, "annotations": {"olm-rs.dev/actions": actions}},
        "spec": {"displayName": "Shop", "version": "1.0.0",
            "installModes": [{"type": "OwnNamespace", "supported": true},
                             {"type": "SingleNamespace", "supported": true},
                             {"type": "MultiNamespace", "supported": false},
                             {"type": "AllNamespaces", "supported": false}],
            "install": {"strategy": "deployment", "spec": {
                "permissions": [{"serviceAccountName": "shop", "rules": rules},
                                {"serviceAccountName": "shop-actions", "rules": rules}],
                "deployments": [
                    deployment("shop-operator", 1, "shop",
                        json!({"containers": [{"name": "manager", "image": "registry.k8s.io/pause:3.10"}]})),
                    deployment("shop-actions", 0, "shop-actions", json!({
                        "nodeSelector": {NO_NODE: "true"},
                        "containers": [
                            {"name": "sidecar", "image": "registry.k8s.io/pause:3.10"},
                            {"name": "runner", "image": "example.com/shop-tools:1.0",
                             "env": [{"name": "SHOP_MODE", "value": "full"}]}]})),
                ]}}}}),
    )
    .await;
    wait_for(&csvs, CSV, "Succeeded", |c: Option<&ClusterServiceVersion>| {
        c.and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.phase == Some(CsvPhase::Succeeded))
    })
    .await;
}

async fn run_backup(client: &Client, ns: &str, name: &str, path: &str) {
    let actions: Api<Action> = Api::namespaced(client.clone(), ns);
    apply_json(
        &actions,
        json!({"apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Action",
               "metadata": {"name": name, "namespace": ns},
               "spec": {"operator": CSV, "action": "backup", "params": {"path": path}, "timeoutSeconds": 120}}),
    )
    .await;
}

/// The Pod of Job `job`, once the Job controller made it.
async fn pod_of(client: &Client, ns: &str, job: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let selector = format!("batch.kubernetes.io/job-name={job}");
    let listed = || async {
        pods.list(&ListParams::default().labels(&selector))
            .await
            .ok()
            .and_then(|l| l.items.into_iter().next())
    };
    eventually(&format!("the Pod of Job {job}"), || async {
        listed().await.is_some()
    })
    .await;
    listed().await.expect("the Pod")
}

/// Plays the kubelet of the node that would run `pod`: its container ended
/// with `exit` and wrote `message` to its termination message.
async fn end_pod(client: &Client, pod: &Pod, exit: i32, message: &str) {
    let ns = pod.namespace().expect("a namespace");
    let container = &pod.spec.as_ref().expect("a spec").containers[0];
    let now = "2026-01-01T00:00:00Z";
    let status = json!({"status": {
        "phase": if exit == 0 { "Succeeded" } else { "Failed" },
        "containerStatuses": [{"name": container.name, "image": container.image, "imageID": "",
            "ready": false, "restartCount": 0, "started": false,
            "state": {"terminated": {"exitCode": exit, "reason": if exit == 0 { "Completed" } else { "Error" },
                "message": message, "startedAt": now, "finishedAt": now}}}]}});
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write the Pod's end as its kubelet would");
}

async fn finished(client: &Client, ns: &str, name: &str) -> Action {
    let actions: Api<Action> = Api::namespaced(client.clone(), ns);
    wait_for(&actions, name, "finished", |a: Option<&Action>| {
        a.and_then(|a| a.status.as_ref())
            .and_then(|s| s.phase)
            .is_some_and(|p| p.is_finished())
    })
    .await
    .expect("the Action")
}

#[tokio::test]
async fn an_action_of_a_deployment_operator_runs_as_a_job_and_its_results_come_back() {
    with_namespace("jobactions", |client, ns| async move {
        install_crds(&client).await;
        let operator = e2e::inprocess::OlmOperator::start(&client).await;
        install_shop(&client, &ns).await;

        run_backup(&client, &ns, "backup-1", "/srv/b").await;
        let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
        let job = wait_for(&jobs, "backup-1", "created", |j: Option<&Job>| j.is_some())
            .await
            .expect("the Job");
        let actions: Api<Action> = Api::namespaced(client.clone(), &ns);
        let action = actions.get("backup-1").await.expect("the Action");
        let owner = &job.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), Some(&owner.uid), owner.controller),
            ("Action", action.metadata.uid.as_ref(), Some(true)),
            "the Action owns its Job"
        );
        let spec = job.spec.as_ref().expect("a spec");
        assert_eq!(
            (spec.backoff_limit, spec.active_deadline_seconds),
            (Some(0), Some(120))
        );
        let pod_spec = spec.template.spec.as_ref().expect("a Pod spec");
        assert_eq!(pod_spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(pod_spec.service_account_name.as_deref(), Some("shop-actions"));
        let container = &pod_spec.containers[0];
        assert_eq!(container.image.as_deref(), Some("example.com/shop-tools:1.0"));
        assert_eq!(
            container.command,
            Some(vec!["/tools/backup".to_owned(), "--all".to_owned()])
        );
        assert_eq!(container.termination_message_policy.as_deref(), Some("File"));
        let env: BTreeMap<String, String> = container
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect();
        assert_eq!(env["SHOP_MODE"], "full", "the container's own environment");
        assert_eq!(env["OLM_RS_ACTION"], "backup");
        let params: serde_json::Value =
            serde_json::from_str(&env["OLM_RS_ACTION_PARAMS"]).expect("the parameters as JSON");
        assert_eq!(params, json!({"path": "/srv/b"}));

        let running = wait_for(
            &actions,
            "backup-1",
            "running in its Job",
            |a: Option<&Action>| {
                a.and_then(|a| a.status.as_ref())
                    .is_some_and(|s| s.phase == Some(TaskState::Running))
            },
        )
        .await
        .expect("the Action");
        let task = &running.status.as_ref().expect("a status").tasks[0];
        assert_eq!(
            (task.unit.as_str(), task.job.as_deref()),
            ("shop-actions", Some("backup-1")),
            "one unit, named after the Deployment, with its Job"
        );

        let pod = pod_of(&client, &ns, "backup-1").await;
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            None,
            "no node runs the Pod"
        );
        end_pod(&client, &pod, 0, "file=/srv/b/shop.tgz\nsize=42\n").await;
        let done = finished(&client, &ns, "backup-1").await;
        let status = done.status.expect("a status");
        assert_eq!(status.phase, Some(TaskState::Completed), "{status:?}");
        let task = &status.tasks[0];
        assert_eq!(task.results["file"], "/srv/b/shop.tgz");
        assert_eq!(task.results["size"], "42");
        assert_eq!(task.exit_code, Some(0));
        println!("deployment actions: completed with {:?}", task.results);

        // A failing Job: the Action fails with the container's message.
        run_backup(&client, &ns, "backup-2", "/srv/full").await;
        let pod = pod_of(&client, &ns, "backup-2").await;
        end_pod(&client, &pod, 3, "disk full").await;
        let failed = finished(&client, &ns, "backup-2").await;
        let status = failed.status.expect("a status");
        assert_eq!(status.phase, Some(TaskState::Failed), "{status:?}");
        let message = status.tasks[0].message.clone().unwrap_or_default();
        assert!(
            message.contains("Job backup-2 failed")
                && message.contains("exit code 3")
                && message.contains("disk full"),
            "{message}"
        );
        assert!(
            status.message.as_deref().is_some_and(|m| m.contains("disk full")),
            "{status:?}"
        );
        println!("deployment actions: failed with {message}");
        operator.stop().await;
    })
    .await;
}
