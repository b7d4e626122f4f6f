//! olm-operator against a real control plane (the cluster in `KUBECONFIG`):
//! real bundles install, requirements hold installs back, install modes are
//! enforced, upgrades replace, deletes clean up, and drift is repaired.
//!
//! Run with `cargo test -p olm-operator --test e2e -- --ignored`.

mod common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams},
    runtime::wait::conditions,
};
use olm_api::{
    labels, manifest,
    v1::{OperatorGroup, OperatorGroupSpec},
    v1alpha1::{ClusterServiceVersion, CsvPhase, CsvReason, StatusReason},
};

const LIMITADOR: &str = "bundles/limitador-operator/0.11.0/manifests";
const LIMITADOR_CSV: &str = "limitador-operator.clusterserviceversion.yaml";
const LIMITADOR_CRD: &str = "limitador.kuadrant.io_limitadors.yaml";
const LIMITADOR_DEPLOYMENT: &str = "limitador-operator-controller-manager";

// === Helpers ===

fn phase_is(phase: CsvPhase) -> impl Fn(Option<&ClusterServiceVersion>) -> bool {
    move |csv| csv.and_then(|c| c.status.as_ref()).and_then(|s| s.phase) == Some(phase)
}

fn phase_and_reason(phase: CsvPhase, reason: CsvReason) -> impl Fn(Option<&ClusterServiceVersion>) -> bool {
    move |csv| {
        let status = csv.and_then(|c| c.status.as_ref());
        status.and_then(|s| s.phase) == Some(phase) && status.and_then(|s| s.reason) == Some(reason)
    }
}

/// The phases a CSV went through, from its condition history.
fn history(csv: &ClusterServiceVersion) -> Vec<CsvPhase> {
    let mut phases: Vec<CsvPhase> = Vec::new();
    for condition in csv.status.iter().flat_map(|s| s.conditions.iter().flatten()) {
        if let Some(phase) = condition.phase
            && phases.last() != Some(&phase)
        {
            phases.push(phase);
        }
    }
    phases
}

async fn operator_group(client: &Client, namespace: &str, spec: OperatorGroupSpec) -> OperatorGroup {
    let group = OperatorGroup {
        metadata: ObjectMeta {
            name: Some("operators".to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    };
    apply(&Api::namespaced(client.clone(), namespace), &group).await
}

async fn create_csv(
    client: &Client,
    namespace: &str,
    mut csv: ClusterServiceVersion,
) -> ClusterServiceVersion {
    csv.metadata.namespace = Some(namespace.to_owned());
    Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &csv)
        .await
        .unwrap_or_else(|e| panic!("create CSV {}: {e}", csv.name_any()))
}

/// The limitador-operator 0.11.0 bundle from the corpus: a CSV with
/// permissions and clusterPermissions, AllNamespaces only, and the CRD it owns.
async fn install_limitador(client: &Client, namespace: &str) -> ClusterServiceVersion {
    let dir = corpus_dir().join(LIMITADOR);
    let crd: CustomResourceDefinition =
        manifest::read_one(&dir.join(LIMITADOR_CRD)).unwrap_or_else(|e| panic!("{e}"));
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    apply(&crds, &crd).await;
    wait_for(&crds, &crd.name_any(), conditions::is_crd_established()).await;

    operator_group(client, namespace, OperatorGroupSpec::default()).await;
    let csv: ClusterServiceVersion =
        manifest::read_one(&dir.join(LIMITADOR_CSV)).unwrap_or_else(|e| panic!("{e}"));
    let created = create_csv(client, namespace, csv).await;
    let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace);
    wait_for(&api, &created.name_any(), phase_is(CsvPhase::Succeeded)).await
}

fn owner_selector(csv: &ClusterServiceVersion) -> String {
    format!(
        "olm.owner={},olm.owner.kind=ClusterServiceVersion,olm.owner.namespace={}",
        csv.name_any(),
        csv.namespace().unwrap_or_default()
    )
}

fn controlled_by(meta: &ObjectMeta, csv: &ClusterServiceVersion) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == csv.metadata.uid.as_ref())
}

// === Tests ===

#[tokio::test]
#[ignore = "needs a cluster"]
async fn corpus_csv_installs_with_its_rbac_and_deployment() {
    with_namespace("install", |client, ns| async move {
        let csv = install_limitador(&client, &ns).await;
        let source: ClusterServiceVersion =
            manifest::read_one(&corpus_dir().join(LIMITADOR).join(LIMITADOR_CSV))
                .unwrap_or_else(|e| panic!("{e}"));
        let details = source.spec.install.spec.clone().expect("the CSV has a strategy");

        // OLM's phases, in order.
        let phases = history(&csv);
        let expected = [
            CsvPhase::Pending,
            CsvPhase::InstallReady,
            CsvPhase::Installing,
            CsvPhase::Succeeded,
        ];
        assert_eq!(phases, expected, "phase history {phases:?}");
        let status = csv.status.clone().expect("a status");
        assert_eq!(status.reason, Some(CsvReason::InstallSuccessful));
        let requirement = |kind: &str, name: &str| {
            status
                .requirement_status
                .iter()
                .flatten()
                .find(|r| r.kind == kind && r.name == name)
                .unwrap_or_else(|| panic!("no requirement {kind} {name} in {:#?}", status.requirement_status))
                .status
        };
        assert_eq!(
            requirement("CustomResourceDefinition", "limitadors.limitador.kuadrant.io"),
            StatusReason::Present
        );
        assert_eq!(
            requirement("ServiceAccount", LIMITADOR_DEPLOYMENT),
            StatusReason::Present
        );

        // The CSV is annotated with its OperatorGroup, the group with its APIs.
        let annotations = csv.annotations();
        assert_eq!(
            annotations.get(labels::OPERATOR_GROUP).map(String::as_str),
            Some("operators")
        );
        assert_eq!(annotations.get(labels::OPERATOR_NAMESPACE), Some(&ns));
        assert_eq!(
            annotations.get(labels::TARGET_NAMESPACES).map(String::as_str),
            Some("")
        );
        let groups = Api::<OperatorGroup>::namespaced(client.clone(), &ns);
        let group = wait_for(&groups, "operators", |g: Option<&OperatorGroup>| {
            g.is_some_and(|g| g.annotations().contains_key(labels::PROVIDED_APIS))
        })
        .await;
        assert_eq!(
            group.annotations().get(labels::PROVIDED_APIS).map(String::as_str),
            Some("Limitador.v1alpha1.limitador.kuadrant.io")
        );
        assert_eq!(group.status.and_then(|s| s.namespaces), Some(vec![String::new()]));

        // The Deployment: available, labelled, annotated, owned.
        let deployment = Api::<Deployment>::namespaced(client.clone(), &ns)
            .get(LIMITADOR_DEPLOYMENT)
            .await
            .expect("the Deployment exists");
        assert!(
            controlled_by(&deployment.metadata, &csv),
            "{:?}",
            deployment.metadata.owner_references
        );
        let deployment_labels = deployment.labels();
        assert_eq!(deployment_labels.get(labels::OWNER), Some(&csv.name_any()));
        assert_eq!(
            deployment_labels.get(labels::OWNER_KIND).map(String::as_str),
            Some("ClusterServiceVersion")
        );
        assert_eq!(deployment_labels.get(labels::OWNER_NAMESPACE), Some(&ns));
        assert!(deployment_labels.contains_key(labels::DEPLOYMENT_SPEC_HASH));
        assert_eq!(
            deployment_labels.get("control-plane").map(String::as_str),
            Some("controller-manager")
        );
        let spec = deployment.spec.expect("a spec");
        let pod_annotations = spec
            .template
            .metadata
            .and_then(|m| m.annotations)
            .expect("pod template annotations");
        assert_eq!(
            pod_annotations.get(labels::OPERATOR_GROUP).map(String::as_str),
            Some("operators")
        );
        assert_eq!(pod_annotations.get(labels::OPERATOR_NAMESPACE), Some(&ns));
        assert_eq!(
            pod_annotations.get(labels::TARGET_NAMESPACES).map(String::as_str),
            Some("")
        );
        assert_eq!(
            pod_annotations.get("capabilities").map(String::as_str),
            Some("Basic Install"),
            "the CSV's annotations are copied onto the pods"
        );
        let available = deployment.status.and_then(|s| s.available_replicas).unwrap_or(0);
        assert!(available >= 1, "the Deployment is available");

        // Service account, Role and RoleBinding with the CSV's permissions.
        let account = Api::<ServiceAccount>::namespaced(client.clone(), &ns)
            .get(LIMITADOR_DEPLOYMENT)
            .await
            .expect("the service account exists");
        assert!(controlled_by(&account.metadata, &csv));
        let selector = owner_selector(&csv);
        let roles = list(&Api::<Role>::namespaced(client.clone(), &ns), &selector).await;
        let permissions = details.permissions.clone().expect("permissions");
        assert_eq!(roles.len(), permissions.len());
        assert_eq!(roles[0].rules.as_ref(), Some(&permissions[0].rules));
        assert!(controlled_by(&roles[0].metadata, &csv));
        let bindings = list(&Api::<RoleBinding>::namespaced(client.clone(), &ns), &selector).await;
        assert_eq!(bindings.len(), 1);
        assert_eq!(bindings[0].role_ref.name, roles[0].name_any());
        let subject = &bindings[0].subjects.as_ref().expect("subjects")[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_ref()),
            (LIMITADOR_DEPLOYMENT, Some(&ns))
        );

        // ClusterRoles: the clusterPermissions, and (all namespaces) the permissions.
        let cluster_roles = list(&Api::<ClusterRole>::all(client.clone()), &selector).await;
        assert_eq!(cluster_roles.len(), 2, "{cluster_roles:#?}");
        let cluster_permissions = details.cluster_permissions.clone().expect("clusterPermissions");
        for rules in [&cluster_permissions[0].rules, &permissions[0].rules] {
            assert!(
                cluster_roles.iter().any(|r| r.rules.as_ref() == Some(rules)),
                "a ClusterRole has the rules {rules:?}"
            );
        }
        let cluster_bindings = list(&Api::<ClusterRoleBinding>::all(client.clone()), &selector).await;
        assert_eq!(cluster_bindings.len(), 2);
        for binding in &cluster_bindings {
            assert!(
                cluster_roles
                    .iter()
                    .any(|r| r.name_any() == binding.role_ref.name)
            );
        }

        // An Event tells of the phase change, and OLM's metrics count the CSV.
        let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), &ns);
        let csv_name = csv.name_any();
        eventually("an InstallSucceeded event is published", || async {
            events.list(&Default::default()).await.is_ok_and(|list| {
                list.items.iter().any(|e| {
                    e.reason.as_deref() == Some("InstallSucceeded")
                        && e.regarding.as_ref().and_then(|r| r.name.as_ref()) == Some(&csv_name)
                })
            })
        })
        .await;
        let metrics = operator_metrics().render();
        let succeeded = format!(r#"csv_succeeded{{name="{csv_name}",namespace="{ns}",version="0.11.0"}} 1"#);
        assert!(metrics.contains(&succeeded), "{succeeded} in\n{metrics}");
        assert!(metrics.contains("csv_count "), "{metrics}");

        // The cluster-scoped objects go with the CSV; its namespace goes afterwards.
        Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns)
            .delete(&csv.name_any(), &DeleteParams::default())
            .await
            .expect("delete the CSV");
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn deleting_a_csv_removes_its_namespaced_and_cluster_scoped_objects() {
    with_namespace("delete", |client, ns| async move {
        let csv = install_limitador(&client, &ns).await;
        let selector = owner_selector(&csv);
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        api.delete(&csv.name_any(), &DeleteParams::default())
            .await
            .expect("delete the CSV");
        wait_gone(&api, &csv.name_any()).await;

        // The garbage collector takes what has owner references...
        wait_gone(
            &Api::<Deployment>::namespaced(client.clone(), &ns),
            LIMITADOR_DEPLOYMENT,
        )
        .await;
        wait_gone(
            &Api::<ServiceAccount>::namespaced(client.clone(), &ns),
            LIMITADOR_DEPLOYMENT,
        )
        .await;
        let roles = Api::<Role>::namespaced(client.clone(), &ns);
        eventually("the CSV's Roles are collected", || async {
            list(&roles, &selector).await.is_empty()
        })
        .await;
        // ...and the operator's finalizer what is cluster-scoped.
        assert!(
            list(&Api::<ClusterRole>::all(client.clone()), &selector)
                .await
                .is_empty()
        );
        assert!(
            list(&Api::<ClusterRoleBinding>::all(client.clone()), &selector)
                .await
                .is_empty()
        );
        // CRDs always stay.
        let crds = Api::<CustomResourceDefinition>::all(client.clone());
        assert!(
            crds.get_opt("limitadors.limitador.kuadrant.io")
                .await
                .expect("get")
                .is_some()
        );
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_deleted_deployment_and_an_edited_role_are_put_back() {
    with_namespace("drift", |client, ns| async move {
        let csv = install_limitador(&client, &ns).await;
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let original = deployments
            .get(LIMITADOR_DEPLOYMENT)
            .await
            .expect("the Deployment");
        deployments
            .delete(LIMITADOR_DEPLOYMENT, &DeleteParams::default())
            .await
            .expect("delete the Deployment");
        let old_uid = original.metadata.uid.clone();
        let back = wait_for(
            &deployments,
            LIMITADOR_DEPLOYMENT,
            move |d: Option<&Deployment>| {
                d.is_some_and(|d| d.metadata.uid != old_uid && d.metadata.deletion_timestamp.is_none())
            },
        )
        .await;
        assert!(controlled_by(&back.metadata, &csv));
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        wait_for(&api, &csv.name_any(), phase_is(CsvPhase::Succeeded)).await;

        let roles = Api::<Role>::namespaced(client.clone(), &ns);
        let role = list(&roles, &owner_selector(&csv)).await.remove(0);
        let wanted = role.rules.clone();
        let tampered =
            serde_json::json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        roles
            .patch(
                &role.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&tampered),
            )
            .await
            .expect("edit the Role");
        wait_for(&roles, &role.name_any(), move |r: Option<&Role>| {
            r.is_some_and(|r| r.rules == wanted)
        })
        .await;
    })
    .await;
}

// === Fixtures of our own ===

/// A small CSV: one pause Deployment per name in `deployments`, a service
/// account with a namespaced rule, optional `replaces` and required CRD.
fn demo_csv(
    name: &str,
    version: &str,
    replaces: Option<&str>,
    deployments: &[&str],
    install_modes: &[(&str, bool)],
    required_crd: Option<(&str, &str, &str)>,
) -> ClusterServiceVersion {
    let deployments: Vec<serde_json::Value> = deployments
        .iter()
        .map(|d| {
            serde_json::json!({
                "name": d,
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": d}},
                    "template": {
                        "metadata": {"labels": {"app": d}},
                        "spec": {
                            "serviceAccountName": "demo-operator",
                            "containers": [{
                                "name": "operator",
                                "image": "registry.k8s.io/pause:3.10",
                                "env": [{"name": "VERSION", "value": version}],
                            }],
                        },
                    },
                },
            })
        })
        .collect();
    let modes: Vec<serde_json::Value> = install_modes
        .iter()
        .map(|(mode, supported)| serde_json::json!({"type": mode, "supported": supported}))
        .collect();
    let mut csv = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": name},
        "spec": {
            "displayName": "Demo",
            "version": version,
            "installModes": modes,
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": deployments,
                    "permissions": [{
                        "serviceAccountName": "demo-operator",
                        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}],
                    }],
                },
            },
        },
    });
    if let Some(replaces) = replaces {
        csv["spec"]["replaces"] = replaces.into();
    }
    if let Some((crd, version, kind)) = required_crd {
        csv["spec"]["customresourcedefinitions"] =
            serde_json::json!({"required": [{"name": crd, "version": version, "kind": kind}]});
    }
    serde_json::from_value(csv).expect("a valid CSV")
}

const OWN_NAMESPACE: &[(&str, bool)] = &[
    ("OwnNamespace", true),
    ("SingleNamespace", true),
    ("MultiNamespace", false),
    ("AllNamespaces", false),
];

fn own_namespace_group(ns: &str) -> OperatorGroupSpec {
    OperatorGroupSpec {
        target_namespaces: Some(vec![ns.to_owned()]),
        ..OperatorGroupSpec::default()
    }
}

fn widget_crd(group: &str) -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .expect("a valid CRD")
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_missing_required_crd_holds_the_install_until_it_appears() {
    with_namespace("requires", |client, ns| async move {
        let group = format!("e2e-{}.olm-rs.dev", random_suffix());
        let crd_name = format!("widgets.{group}");
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let csv = demo_csv(
            "needs-widgets.v1.0.0",
            "1.0.0",
            None,
            &["needs-widgets"],
            OWN_NAMESPACE,
            Some((&crd_name, "v1", "Widget")),
        );
        create_csv(&client, &ns, csv).await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let pending = wait_for(
            &api,
            "needs-widgets.v1.0.0",
            phase_and_reason(CsvPhase::Pending, CsvReason::RequirementsNotMet),
        )
        .await;
        let status = pending.status.expect("a status");
        assert!(
            status.message.as_deref().is_some_and(|m| m.contains(&crd_name)),
            "the message names the CRD: {:?}",
            status.message
        );
        let requirement = status
            .requirement_status
            .iter()
            .flatten()
            .find(|r| r.name == crd_name)
            .expect("the CRD is listed as a requirement");
        assert_eq!(requirement.status, StatusReason::NotPresent);
        assert!(
            Api::<Deployment>::namespaced(client.clone(), &ns)
                .get_opt("needs-widgets")
                .await
                .expect("get")
                .is_none(),
            "nothing is installed while a requirement is missing"
        );

        let crds = Api::<CustomResourceDefinition>::all(client.clone());
        apply(&crds, &widget_crd(&group)).await;
        let installed = wait_for(&api, "needs-widgets.v1.0.0", phase_is(CsvPhase::Succeeded)).await;
        let requirement = installed
            .status
            .and_then(|s| s.requirement_status)
            .into_iter()
            .flatten()
            .find(|r| r.name == crd_name)
            .expect("the CRD is listed as a requirement");
        assert_eq!(requirement.status, StatusReason::Present);
        crds.delete(&crd_name, &DeleteParams::default())
            .await
            .expect("delete the CRD");
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn an_unsupported_install_mode_fails_until_the_operator_group_fits() {
    with_namespace("modes", |client, ns| async move {
        // All namespaces, which this CSV does not support.
        operator_group(&client, &ns, OperatorGroupSpec::default()).await;
        create_csv(
            &client,
            &ns,
            demo_csv(
                "own-only.v1.0.0",
                "1.0.0",
                None,
                &["own-only"],
                OWN_NAMESPACE,
                None,
            ),
        )
        .await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let failed = wait_for(
            &api,
            "own-only.v1.0.0",
            phase_and_reason(CsvPhase::Failed, CsvReason::UnsupportedOperatorGroup),
        )
        .await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains("AllNamespaces"), "{message}");

        // Narrowing the group to its own namespace lets it install.
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        wait_for(&api, "own-only.v1.0.0", phase_is(CsvPhase::Succeeded)).await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn without_an_operator_group_a_csv_fails_with_no_operator_group() {
    with_namespace("nogroup", |client, ns| async move {
        create_csv(
            &client,
            &ns,
            demo_csv("lonely.v1.0.0", "1.0.0", None, &["lonely"], OWN_NAMESPACE, None),
        )
        .await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        wait_for(
            &api,
            "lonely.v1.0.0",
            phase_and_reason(CsvPhase::Failed, CsvReason::NoOperatorGroup),
        )
        .await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn an_upgrade_replaces_the_old_csv_and_leaves_only_the_new_deployments() {
    with_namespace("upgrade", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);

        // 1.0 runs `demo` and `demo-legacy`; 1.1 keeps `demo` and drops `demo-legacy`.
        create_csv(
            &client,
            &ns,
            demo_csv(
                "demo.v1.0.0",
                "1.0.0",
                None,
                &["demo", "demo-legacy"],
                OWN_NAMESPACE,
                None,
            ),
        )
        .await;
        let old = wait_for(&api, "demo.v1.0.0", phase_is(CsvPhase::Succeeded)).await;

        // Record every phase the old CSV shows until it is gone.
        let watch_api = api.clone();
        let old_phases = tokio::spawn(async move {
            use futures::StreamExt;
            let mut seen: Vec<CsvPhase> = Vec::new();
            let config = kube::runtime::watcher::Config::default().fields("metadata.name=demo.v1.0.0");
            let mut events = std::pin::pin!(kube::runtime::watcher(watch_api, config));
            while let Some(event) = events.next().await {
                match event {
                    Ok(
                        kube::runtime::watcher::Event::Apply(csv)
                        | kube::runtime::watcher::Event::InitApply(csv),
                    ) => {
                        if let Some(phase) = csv.status.and_then(|s| s.phase)
                            && seen.last() != Some(&phase)
                        {
                            seen.push(phase);
                        }
                    }
                    Ok(kube::runtime::watcher::Event::Delete(_)) => break,
                    _ => {}
                }
            }
            seen
        });

        create_csv(
            &client,
            &ns,
            demo_csv(
                "demo.v1.1.0",
                "1.1.0",
                Some("demo.v1.0.0"),
                &["demo"],
                OWN_NAMESPACE,
                None,
            ),
        )
        .await;
        wait_gone(&api, "demo.v1.0.0").await;
        // No gap: when the old CSV is gone, the new one already runs.
        let new = api.get("demo.v1.1.0").await.expect("the new CSV");
        assert_eq!(
            new.status.as_ref().and_then(|s| s.phase),
            Some(CsvPhase::Succeeded)
        );
        let demo = deployments.get("demo").await.expect("the demo Deployment");
        assert!(controlled_by(&demo.metadata, &new), "demo now belongs to 1.1.0");
        assert!(demo.status.and_then(|s| s.available_replicas).unwrap_or(0) >= 1);
        let env = demo
            .spec
            .expect("spec")
            .template
            .spec
            .expect("pod spec")
            .containers[0]
            .env
            .clone()
            .unwrap_or_default();
        assert!(
            env.iter()
                .any(|e| e.name == "VERSION" && e.value.as_deref() == Some("1.1.0"))
        );

        let phases = tokio::time::timeout(TIMEOUT, old_phases)
            .await
            .expect("the old CSV's watch ends")
            .expect("the watch task");
        assert!(
            phases.ends_with(&[CsvPhase::Replacing, CsvPhase::Deleting]),
            "the old CSV went Replacing then Deleting: {phases:?}"
        );
        // The Deployment only 1.0 had is collected with it.
        wait_gone(&deployments, "demo-legacy").await;
        let left: BTreeMap<String, String> = list(&deployments, "")
            .await
            .iter()
            .map(|d| {
                (
                    d.name_any(),
                    d.labels().get(labels::OWNER).cloned().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            left,
            BTreeMap::from([("demo".to_owned(), "demo.v1.1.0".to_owned())])
        );
        let _ = old;
    })
    .await;
}

const MULTI_NAMESPACE: &[(&str, bool)] = &[
    ("OwnNamespace", true),
    ("SingleNamespace", true),
    ("MultiNamespace", true),
    ("AllNamespaces", false),
];

#[tokio::test]
#[ignore = "needs a cluster"]
async fn roles_follow_the_target_namespaces_and_go_with_the_csv() {
    with_namespace("targets", |client, ns| async move {
        let other = format!("{ns}-b");
        create_namespace(&client, &other, &[]).await;
        let both = OperatorGroupSpec {
            target_namespaces: Some(vec![ns.clone(), other.clone()]),
            ..OperatorGroupSpec::default()
        };
        operator_group(&client, &ns, both.clone()).await;
        let csv = create_csv(
            &client,
            &ns,
            demo_csv("multi.v1.0.0", "1.0.0", None, &["multi"], MULTI_NAMESPACE, None),
        )
        .await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let csv = wait_for(&api, &csv.name_any(), phase_is(CsvPhase::Succeeded)).await;
        let mut targets = [ns.clone(), other.clone()];
        targets.sort();
        assert_eq!(
            csv.annotations().get(labels::TARGET_NAMESPACES),
            Some(&targets.join(","))
        );

        // The Role and RoleBinding are copied into the other target namespace,
        // with labels and no owner reference (owners cannot cross namespaces).
        let selector = owner_selector(&csv);
        let other_roles = Api::<Role>::namespaced(client.clone(), &other);
        let copied = list(&other_roles, &selector).await;
        assert_eq!(copied.len(), 1, "a Role in {other}");
        assert!(copied[0].metadata.owner_references.is_none());
        let bindings = list(&Api::<RoleBinding>::namespaced(client.clone(), &other), &selector).await;
        let subject = &bindings[0].subjects.as_ref().expect("subjects")[0];
        assert_eq!(
            subject.namespace.as_ref(),
            Some(&ns),
            "the subject is the operator's service account"
        );

        // Narrowing the group removes the copy...
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        eventually("the Role copy leaves the dropped namespace", || async {
            list(&other_roles, &selector).await.is_empty()
        })
        .await;
        // ...widening it brings it back, and deleting the CSV removes it.
        operator_group(&client, &ns, both).await;
        eventually("the Role copy is back", || async {
            list(&other_roles, &selector).await.len() == 1
        })
        .await;
        api.delete(&csv.name_any(), &DeleteParams::default())
            .await
            .expect("delete the CSV");
        wait_gone(&api, &csv.name_any()).await;
        assert!(
            list(&other_roles, &selector).await.is_empty(),
            "the finalizer removed the copy"
        );
        assert!(
            list(&Api::<RoleBinding>::namespaced(client.clone(), &other), &selector)
                .await
                .is_empty()
        );
        delete_namespace(&client, &other).await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn an_operator_group_selects_namespaces_by_label() {
    with_namespace("selector", |client, ns| async move {
        let other = format!("{ns}-b");
        let label = "e2e.olm-rs.dev/selected-by";
        create_namespace(&client, &other, &[(label, ns.as_str())]).await;
        let spec: OperatorGroupSpec = serde_json::from_value(serde_json::json!({
            "selector": {"matchLabels": {label: ns}},
        }))
        .expect("a valid spec");
        operator_group(&client, &ns, spec).await;
        let groups = Api::<OperatorGroup>::namespaced(client.clone(), &ns);
        let wanted = vec![other.clone()];
        wait_for(&groups, "operators", move |g: Option<&OperatorGroup>| {
            g.and_then(|g| g.status.as_ref())
                .and_then(|s| s.namespaces.as_ref())
                == Some(&wanted)
        })
        .await;

        // Labelling the group's own namespace adds it.
        let patch = serde_json::json!({"metadata": {"labels": {label: ns}}});
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .patch(&ns, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("label the namespace");
        let mut wanted = vec![ns.clone(), other.clone()];
        wanted.sort();
        wait_for(&groups, "operators", move |g: Option<&OperatorGroup>| {
            g.and_then(|g| g.status.as_ref())
                .and_then(|s| s.namespaces.as_ref())
                == Some(&wanted)
        })
        .await;
        delete_namespace(&client, &other).await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_deployment_that_cannot_progress_fails_with_install_check_failed() {
    with_namespace("stuck", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let mut csv = demo_csv("stuck.v1.0.0", "1.0.0", None, &["stuck"], OWN_NAMESPACE, None);
        let spec = &mut csv.spec.install.spec.as_mut().expect("details").deployments[0].spec;
        spec["progressDeadlineSeconds"] = 5.into();
        spec["template"]["spec"]["nodeSelector"] = serde_json::json!({"e2e.olm-rs.dev/no-such-node": "true"});
        create_csv(&client, &ns, csv).await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let failed = wait_for(
            &api,
            "stuck.v1.0.0",
            phase_and_reason(CsvPhase::Failed, CsvReason::InstallCheckFailed),
        )
        .await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains("progress deadline"), "{message}");
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_scoped_install_is_bounded_by_the_operator_groups_service_account() {
    with_namespace("scoped", |client, ns| async move {
        // The installer may manage service accounts and RBAC (and holds the
        // rules it grants), but not Deployments.
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &ns);
        let installer: ServiceAccount = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "installer"},
        }))
        .expect("a service account");
        accounts.create(&PostParams::default(), &installer).await.expect("create the installer");
        let grant = |name: &str, rules: serde_json::Value| -> (Role, RoleBinding) {
            let role = serde_json::from_value(serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": name}, "rules": rules,
            }))
            .expect("a Role");
            let binding = serde_json::from_value(serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}],
            }))
            .expect("a RoleBinding");
            (role, binding)
        };
        let verbs = ["get", "list", "watch", "create", "update", "patch", "delete"];
        let (role, binding) = grant(
            "installer-base",
            serde_json::json!([
                {"apiGroups": [""], "resources": ["serviceaccounts", "configmaps"], "verbs": verbs},
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": verbs},
            ]),
        );
        let roles = Api::<Role>::namespaced(client.clone(), &ns);
        let role_bindings = Api::<RoleBinding>::namespaced(client.clone(), &ns);
        apply(&roles, &role).await;
        apply(&role_bindings, &binding).await;

        let mut spec = own_namespace_group(&ns);
        spec.service_account_name = Some("installer".to_owned());
        operator_group(&client, &ns, spec).await;
        create_csv(&client, &ns, demo_csv("scoped.v1.0.0", "1.0.0", None, &["scoped"], OWN_NAMESPACE, None)).await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let failed = wait_for(
            &api,
            "scoped.v1.0.0",
            phase_and_reason(CsvPhase::Failed, CsvReason::ComponentFailed),
        )
        .await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(
            message.contains("installer") && message.contains("\"deployments\""),
            "the message names the account and the missing permission: {message}"
        );
        assert!(
            Api::<Deployment>::namespaced(client.clone(), &ns).get_opt("scoped").await.expect("get").is_none(),
            "nothing beyond the account's permissions was created"
        );
        let groups = Api::<OperatorGroup>::namespaced(client.clone(), &ns);
        let group = groups.get("operators").await.expect("the group");
        let reference = group.status.and_then(|s| s.service_account_ref).expect("serviceAccountRef");
        assert_eq!(reference.name.as_deref(), Some("installer"));

        // Granting the missing permission lets the install through.
        let (role, binding) = grant(
            "installer-deployments",
            serde_json::json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": verbs}]),
        );
        apply(&roles, &role).await;
        apply(&role_bindings, &binding).await;
        let installed = wait_for(&api, "scoped.v1.0.0", phase_is(CsvPhase::Succeeded)).await;
        let deployment = Api::<Deployment>::namespaced(client.clone(), &ns).get("scoped").await.expect("the Deployment");
        assert!(controlled_by(&deployment.metadata, &installed));
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_changed_csv_rolls_its_deployment_out_again() {
    with_namespace("edit", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        create_csv(
            &client,
            &ns,
            demo_csv("edited.v1.0.0", "1.0.0", None, &["edited"], OWN_NAMESPACE, None),
        )
        .await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        wait_for(&api, "edited.v1.0.0", phase_is(CsvPhase::Succeeded)).await;
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let before = deployments.get("edited").await.expect("the Deployment");
        let hash = |d: &Deployment| d.labels().get(labels::DEPLOYMENT_SPEC_HASH).cloned();

        // A hotfix of the CSV's Deployment spec, as `kubectl edit csv` would make it.
        let mut csv = api.get("edited.v1.0.0").await.expect("the CSV");
        let spec = &mut csv.spec.install.spec.as_mut().expect("details").deployments[0].spec;
        spec["template"]["spec"]["containers"][0]["env"][0]["value"] = "1.0.0-hotfix".into();
        let patch = serde_json::json!({"spec": {"install": csv.spec.install}});
        api.patch("edited.v1.0.0", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("edit the CSV");

        let before_hash = hash(&before);
        let after = wait_for(&deployments, "edited", move |d: Option<&Deployment>| {
            d.is_some_and(|d| d.labels().get(labels::DEPLOYMENT_SPEC_HASH).cloned() != before_hash)
        })
        .await;
        let env = after
            .spec
            .expect("spec")
            .template
            .spec
            .expect("pod spec")
            .containers[0]
            .env
            .clone();
        assert!(
            env.unwrap_or_default()
                .iter()
                .any(|e| e.value.as_deref() == Some("1.0.0-hotfix"))
        );
        let csv = wait_for(&api, "edited.v1.0.0", phase_is(CsvPhase::Succeeded)).await;
        let reasons: Vec<Option<CsvReason>> = csv
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .map(|c| c.reason)
            .collect();
        assert!(
            !reasons.contains(&Some(CsvReason::ComponentUnhealthy)),
            "a new rollout is not a broken install: {reasons:?}"
        );
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_corpus_csv_with_native_apis_installs_in_its_own_namespace() {
    with_namespace("native", |client, ns| async move {
        let dir = corpus_dir().join("bundles/debezium-operator/3.0.0-final/manifests");
        let crd: CustomResourceDefinition =
            manifest::read_one(&dir.join("debeziumservers.debezium.io-v1.crd.yml"))
                .unwrap_or_else(|e| panic!("{e}"));
        let crds = Api::<CustomResourceDefinition>::all(client.clone());
        apply(&crds, &crd).await;
        wait_for(&crds, &crd.name_any(), conditions::is_crd_established()).await;
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let csv: ClusterServiceVersion =
            manifest::read_one(&dir.join("debezium-operator.v3.0.0-final.clusterserviceversion.yaml"))
                .unwrap_or_else(|e| panic!("{e}"));
        let name = csv.name_any();
        create_csv(&client, &ns, csv).await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let installed = wait_for(&api, &name, phase_is(CsvPhase::Succeeded)).await;
        let requirements = installed
            .status
            .clone()
            .and_then(|s| s.requirement_status)
            .unwrap_or_default();
        let native: Vec<(&str, StatusReason)> = requirements
            .iter()
            .filter(|r| r.kind == "PersistentVolumeClaim" || r.kind == "Deployment")
            .map(|r| (r.name.as_str(), r.status))
            .collect();
        assert_eq!(
            native,
            [("v1.", StatusReason::Present), ("v1.apps", StatusReason::Present)]
        );
        // Own namespace: the permissions stay namespaced.
        let selector = owner_selector(&installed);
        assert_eq!(
            list(&Api::<Role>::namespaced(client.clone(), &ns), &selector)
                .await
                .len(),
            1
        );
        assert!(
            list(&Api::<ClusterRole>::all(client.clone()), &selector)
                .await
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn two_csvs_cannot_own_one_crd_in_a_namespace() {
    with_namespace("owners", |client, ns| async move {
        let group = format!("e2e-{}.olm-rs.dev", random_suffix());
        let crd_name = format!("widgets.{group}");
        let crds = Api::<CustomResourceDefinition>::all(client.clone());
        apply(&crds, &widget_crd(&group)).await;
        wait_for(&crds, &crd_name, conditions::is_crd_established()).await;
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let owning = |name: &str, deployment: &str| {
            let mut csv = demo_csv(name, "1.0.0", None, &[deployment], OWN_NAMESPACE, None);
            csv.spec.custom_resource_definitions = Some(
                serde_json::from_value(serde_json::json!({
                    "owned": [{"name": crd_name, "version": "v1", "kind": "Widget"}],
                }))
                .expect("valid CRD descriptions"),
            );
            csv
        };
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        create_csv(&client, &ns, owning("first.v1.0.0", "first")).await;
        wait_for(&api, "first.v1.0.0", phase_is(CsvPhase::Succeeded)).await;
        create_csv(&client, &ns, owning("second.v1.0.0", "second")).await;
        let failed = wait_for(
            &api,
            "second.v1.0.0",
            phase_and_reason(CsvPhase::Failed, CsvReason::OwnerConflict),
        )
        .await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(
            message.contains(&crd_name) && message.contains("first.v1.0.0"),
            "{message}"
        );

        // Once the first owner is gone, the second installs.
        api.delete("first.v1.0.0", &DeleteParams::default())
            .await
            .expect("delete the first CSV");
        wait_for(&api, "second.v1.0.0", phase_is(CsvPhase::Succeeded)).await;
        crds.delete(&crd_name, &DeleteParams::default())
            .await
            .expect("delete the CRD");
    })
    .await;
}
