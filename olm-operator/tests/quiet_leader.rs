//! A new leader of olm-operator sends no write for an install that is already
//! right: one replica installs a CSV and is killed, a new process takes the
//! Lease over and reconciles everything, and its write counter stays at zero
//! (on the objects' side a server-side apply that changes nothing leaves no
//! trace, so the writes are counted where they are sent).
//!
//! The counter holds every write of the new leader, of every controller: a
//! test binary of its own, so that no other operator (in-process or replica
//! of another test) changes the cluster meanwhile. The cluster must hold
//! nothing else an olm-operator controller would write to, so the namespaces
//! that failed tests kept (a MachinePool whose machines go lost gets its status
//! written) are deleted first. Run with
//! `cargo test -p olm-operator --test quiet_leader -- --ignored`.

use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Namespace, rbac::v1::Role},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, ObjectMeta, PostParams},
};
use olm_api::{
    v1::{OperatorGroup, OperatorGroupSpec},
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};
use olm_testkit::{
    NAMESPACE_LABEL, apply, eventually, install_crd, install_crds,
    objects::{lease_holder, wait_for_csv},
    process::Process,
    wait_for, wait_gone, with_namespace,
};

/// The sum of the `olm_writes_total` series a replica's metrics report with
/// outcome `ok`: the writes it sent and the API server accepted.
fn writes_ok(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|line| line.starts_with("olm_writes_total{") && line.contains(r#"outcome="ok""#))
        .map(|line| {
            let value = line.rsplit(' ').next().unwrap_or_default();
            value.parse::<u64>().unwrap_or_else(|_| panic!("a count: {line}"))
        })
        .sum()
}

/// Whether every Operator (`<package>.<namespace>`) names a namespace that exists.
async fn no_stale_operator(client: &kube::Client) -> bool {
    let namespaces: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list the namespaces")
        .items
        .into_iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter_map(|n| n.metadata.name)
        .collect();
    Api::<olm_api::v1::Operator>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list the Operators")
        .items
        .iter()
        .filter_map(|o| o.metadata.name.as_deref()?.rsplit_once('.'))
        .all(|(_, namespace)| namespaces.iter().any(|n| n == namespace))
}

/// Deletes the namespaces that earlier tests which failed kept (their objects
/// were printed when they failed): what they hold, such as a MachinePool
/// whose machines go lost, gets written by any leader, and would be counted
/// here as a second failure. No other test runs meanwhile: this test is a
/// binary of its own.
async fn remove_kept_namespaces(client: &kube::Client, own: &str) {
    let namespaces = Api::<Namespace>::all(client.clone());
    let kept = namespaces
        .list(&ListParams::default().labels(NAMESPACE_LABEL))
        .await
        .expect("list the test namespaces");
    for name in kept.items.iter().filter_map(|n| n.metadata.name.as_deref()) {
        if name != own {
            eprintln!("quiet_leader: deleting namespace {name}, kept by a test that failed");
            namespaces
                .delete(name, &DeleteParams::default())
                .await
                .expect("delete a kept namespace");
        }
    }
}

/// Whether no namespace of the cluster is being deleted.
async fn no_namespace_terminating(client: &kube::Client) -> bool {
    Api::<Namespace>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list the namespaces")
        .items
        .iter()
        .all(|n| n.metadata.deletion_timestamp.is_none())
}

/// Whether the copies the cluster asks for are made: none when the OLMConfig
/// switches copies off (as the in-process tests of other binaries leave it);
/// otherwise every other active namespace holds a `quiet.v1.0.0`, a copy of
/// the one in `ns`, or (in a namespace a failed run kept) one of its own,
/// where no copy goes.
async fn copied_everywhere(client: &kube::Client, ns: &str) -> bool {
    let config = Api::<olm_api::v1::OLMConfig>::all(client.clone())
        .get_opt("cluster")
        .await
        .expect("read the OLMConfig");
    if config.is_some_and(|c| c.copied_csvs_disabled()) {
        return true;
    }
    let namespaces = Api::<Namespace>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list the namespaces");
    let copies = Api::<ClusterServiceVersion>::all(client.clone())
        .list(&ListParams::default().fields("metadata.name=quiet.v1.0.0"))
        .await
        .expect("list the copies");
    namespaces
        .items
        .iter()
        .filter(|n| n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Active"))
        .filter_map(|n| n.metadata.name.as_deref())
        .filter(|name| *name != ns)
        .all(|name| {
            copies
                .items
                .iter()
                .any(|c| c.metadata.namespace.as_deref() == Some(name))
        })
}

/// How many CSV reconciles a replica's metrics say have finished.
fn csv_reconciles(metrics: &str) -> u64 {
    metrics
        .lines()
        .find(|line| {
            line.starts_with("olm_reconcile_duration_seconds_count{")
                && line.contains(r#"controller="clusterserviceversion""#)
        })
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// The CRD the CSV of the test owns (cluster-wide: removed at the end).
const QUIET_CRD: &str = "widgets.quiet.olm-rs.dev";

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_new_leader_writes_nothing_for_an_install_that_is_right() {
    with_namespace("olm-ha-quiet", |client, ns| async move {
        install_crds(&client).await;
        remove_kept_namespaces(&client, &ns).await;
        let lease_name = format!("olm-operator-{ns}");
        let mut first = Process::olm_operator("replica-a", &lease_name, &ns);
        // The writes counted are cluster-wide: first let the namespaces of
        // earlier tests go, so that the Operators of their packages are gone
        // (by the first leader, which also ends their CSVs) before the new
        // leader is counted.
        eventually("no namespace is being deleted", || {
            no_namespace_terminating(&client)
        })
        .await;
        let group = OperatorGroup {
            metadata: ObjectMeta {
                name: Some("operators".to_owned()),
                namespace: Some(ns.clone()),
                ..ObjectMeta::default()
            },
            // All namespaces: a CSV with a conversion webhook serves only those.
            spec: OperatorGroupSpec::default(),
            status: None,
        };
        apply(&Api::<OperatorGroup>::namespaced(client.clone(), &ns), &group).await;
        // The CRD the CSV owns, whose conversion it points at its webhook.
        let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": QUIET_CRD},
            "spec": {"group": "quiet.olm-rs.dev", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]},
        }))
        .expect("a valid CRD");
        install_crd(&client, &crd).await;
        // Every kind an install writes: a ServiceAccount, a Role and RoleBinding,
        // a ClusterRole and ClusterRoleBinding, a Deployment; its serving
        // certificate Secret and Service, a validating webhook configuration and
        // the conversion of its CRD; and the OperatorCondition. (Not an
        // APIService: were the test to fail, the CSV it keeps would keep an
        // APIService that nothing serves, which fails discovery cluster-wide.)
        let rule = serde_json::json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]});
        let csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "quiet.v1.0.0"},
            "spec": {
                "displayName": "Quiet",
                "installModes": [{"type": "AllNamespaces", "supported": true}],
                "customresourcedefinitions": {"owned": [
                    {"name": QUIET_CRD, "version": "v1", "kind": "Widget"},
                ]},
                "webhookdefinitions": [
                    {"generateName": "vwidget.quiet.olm-rs.dev", "type": "ValidatingAdmissionWebhook",
                     "deploymentName": "quiet", "containerPort": 443, "sideEffects": "None",
                     "admissionReviewVersions": ["v1"], "webhookPath": "/validate",
                     "rules": [{"apiGroups": ["quiet.olm-rs.dev"], "apiVersions": ["v1"],
                                "operations": ["CREATE"], "resources": ["widgets"]}]},
                    {"generateName": "cwidget.quiet.olm-rs.dev", "type": "ConversionWebhook",
                     "deploymentName": "quiet", "containerPort": 443, "sideEffects": "None",
                     "admissionReviewVersions": ["v1"], "webhookPath": "/convert",
                     "conversionCRDs": [QUIET_CRD]},
                ],
                "install": {"strategy": "deployment", "spec": {
                    "permissions": [{"serviceAccountName": "quiet", "rules": [rule]}],
                    "clusterPermissions": [{"serviceAccountName": "quiet", "rules": [rule]}],
                    "deployments": [{
                        "name": "quiet",
                        "spec": {
                            "selector": {"matchLabels": {"app": "quiet"}},
                            "template": {
                                "metadata": {"labels": {"app": "quiet"}},
                                "spec": {
                                    "serviceAccountName": "quiet",
                                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                                },
                            },
                        },
                    }],
                }},
            },
        }))
        .expect("a valid CSV");
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        csvs.create(&PostParams::default(), &csv)
            .await
            .expect("create the CSV");
        wait_for_csv(&csvs, "quiet.v1.0.0", CsvPhase::Succeeded).await;
        // The install is right once its copies are made too (the copied-CSV
        // controller follows the original's phase), where copies are on.
        eventually("the CSV is copied to every other namespace", || {
            copied_everywhere(&client, &ns)
        })
        .await;
        // The Operators of earlier tests' namespaces are the first leader's to remove.
        eventually("no Operator of a deleted namespace is left", || {
            no_stale_operator(&client)
        })
        .await;
        // Kill the leader, then start a new process: it takes the Lease over once it
        // expires, and reconciles every CSV as a new leader does.
        first.kill();
        let mut second = Process::olm_operator("replica-b", &lease_name, &ns);
        let leases = Api::<Lease>::namespaced(client.clone(), &ns);
        wait_for(
            &leases,
            &lease_name,
            "replica-b holds the Lease",
            |lease: Option<&Lease>| lease_holder(lease) == Some("replica-b"),
        )
        .await;
        eventually("the new leader reconciled the CSV", || {
            let done = second
                .admin_get("/metrics")
                .is_some_and(|(_, metrics)| csv_reconciles(&metrics) > 0);
            async move { done }
        })
        .await;
        // Time for every reconcile the new term started (and their requeues) to finish.
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        let (_, metrics) = second.admin_get("/metrics").expect("the new leader's metrics");
        assert_eq!(
            writes_ok(&metrics),
            0,
            "the new leader wrote to an install that was right:\n{metrics}"
        );
        let phase = csvs
            .get("quiet.v1.0.0")
            .await
            .expect("the CSV")
            .status
            .and_then(|s| s.phase);
        assert_eq!(phase, Some(CsvPhase::Succeeded));

        // Not for want of leading: an object of the install that goes is put back.
        let roles = Api::<Role>::namespaced(client.clone(), &ns);
        let role = roles
            .list(&Default::default())
            .await
            .expect("list the Roles")
            .items
            .into_iter()
            .find(|role| {
                role.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.get("olm.owner").map(String::as_str) == Some("quiet.v1.0.0"))
            })
            .expect("the install's Role");
        let role_name = role.metadata.name.clone().expect("a name");
        roles
            .delete(&role_name, &DeleteParams::default())
            .await
            .expect("delete the Role");
        wait_for(&roles, &role_name, "the Role is back", |role: Option<&Role>| {
            role.is_some()
        })
        .await;
        eventually("the new leader wrote the Role again", || {
            let wrote = second
                .admin_get("/metrics")
                .is_some_and(|(_, metrics)| writes_ok(&metrics) > 0);
            async move { wrote }
        })
        .await;

        csvs.delete("quiet.v1.0.0", &DeleteParams::default())
            .await
            .expect("delete the CSV");
        wait_gone(&csvs, "quiet.v1.0.0").await;
        second.kill();
        let crds = Api::<CustomResourceDefinition>::all(client.clone());
        crds.delete(QUIET_CRD, &DeleteParams::default())
            .await
            .expect("delete the CRD");
        wait_gone(&crds, QUIET_CRD).await;
    })
    .await;
}
