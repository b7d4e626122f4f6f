//! olm-operator installs on a real control plane (the cluster in `KUBECONFIG`):
//! real bundles install with their RBAC and Deployments, deletes clean up,
//! drift is repaired and a changed CSV rolls out again.
//!
//! Run with `cargo test -p olm-operator --test install -- --ignored`.

mod common;

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
};
use olm_api::{
    labels, manifest,
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, CsvPhase, CsvReason, StatusReason},
};

use common::{csv::*, *};

#[tokio::test]
#[ignore = "needs a cluster"]
async fn corpus_csv_installs_with_its_rbac_and_deployment() {
    with_namespace("install", |client, ns| async move {
        let csv = install_limitador(&client, &ns).await;
        let source: ClusterServiceVersion =
            manifest::read_one(&corpus_dir().join(LIMITADOR).join(LIMITADOR_CSV))
                .unwrap_or_else(|e| panic!("{e}"));
        let details = source
            .spec
            .install
            .deployment()
            .cloned()
            .expect("the CSV has a strategy");

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
        let group = wait_for(
            &groups,
            "operators",
            "OperatorGroup operators has its provided APIs",
            |g: Option<&OperatorGroup>| {
                g.is_some_and(|g| g.annotations().contains_key(labels::PROVIDED_APIS))
            },
        )
        .await
        .expect("the OperatorGroup exists");
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
            &format!("Deployment {LIMITADOR_DEPLOYMENT} is created again"),
            move |d: Option<&Deployment>| {
                d.is_some_and(|d| d.metadata.uid != old_uid && d.metadata.deletion_timestamp.is_none())
            },
        )
        .await
        .expect("the Deployment exists");
        assert!(controlled_by(&back.metadata, &csv));
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        wait_for_csv(&api, &csv.name_any(), CsvPhase::Succeeded).await;

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
        wait_for(
            &roles,
            &role.name_any(),
            "the tampered Role has its rules back",
            move |r: Option<&Role>| r.is_some_and(|r| r.rules == wanted),
        )
        .await;
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
        wait_for_csv(&api, "edited.v1.0.0", CsvPhase::Succeeded).await;
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let before = deployments.get("edited").await.expect("the Deployment");
        let hash = |d: &Deployment| d.labels().get(labels::DEPLOYMENT_SPEC_HASH).cloned();

        // A hotfix of the CSV's Deployment spec, as `kubectl edit csv` would make it.
        let mut csv = api.get("edited.v1.0.0").await.expect("the CSV");
        let spec = &mut csv.spec.install.deployment_mut().expect("details").deployments[0].spec;
        spec["template"]["spec"]["containers"][0]["env"][0]["value"] = "1.0.0-hotfix".into();
        let patch = serde_json::json!({"spec": {"install": csv.spec.install}});
        api.patch("edited.v1.0.0", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("edit the CSV");

        let before_hash = hash(&before);
        let after = wait_for(
            &deployments,
            "edited",
            "Deployment edited has a new spec hash",
            move |d: Option<&Deployment>| {
                d.is_some_and(|d| d.labels().get(labels::DEPLOYMENT_SPEC_HASH).cloned() != before_hash)
            },
        )
        .await
        .expect("the Deployment exists");
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
        let csv = wait_for_csv(&api, "edited.v1.0.0", CsvPhase::Succeeded).await;
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
        install_crd(&client, &crd).await;
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let csv: ClusterServiceVersion =
            manifest::read_one(&dir.join("debezium-operator.v3.0.0-final.clusterserviceversion.yaml"))
                .unwrap_or_else(|e| panic!("{e}"));
        let name = csv.name_any();
        create_csv(&client, &ns, csv).await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let installed = wait_for_csv(&api, &name, CsvPhase::Succeeded).await;
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
