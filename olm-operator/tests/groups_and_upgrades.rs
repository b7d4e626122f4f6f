//! OperatorGroups and upgrades with olm-operator on a real control plane: a
//! CSV that replaces another, RBAC that follows the target namespaces, label
//! selectors, and scoped installs bounded by a service account.
//!
//! Run with `cargo test -p olm-operator --test groups_and_upgrades -- --ignored`.

mod common;

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::ServiceAccount,
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use olm_api::{
    labels,
    v1::{OperatorGroup, OperatorGroupSpec},
    v1alpha1::{ClusterServiceVersion, CsvPhase, CsvReason},
};

use common::{csv::*, *};

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
        let old = wait_for_csv(&api, "demo.v1.0.0", CsvPhase::Succeeded).await;

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
        let csv = wait_for_csv(&api, &csv.name_any(), CsvPhase::Succeeded).await;
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

/// The label by which the OperatorGroups of these tests select namespaces.
const SELECTED_BY: &str = "e2e.olm-rs.dev/selected-by";

/// Creates namespace `{ns}-b` labelled [`SELECTED_BY`]`={ns}` and, in `ns`, the
/// OperatorGroup `operators` that selects by that label; returns the groups of
/// `ns` and the name of the labelled namespace.
async fn group_selecting_labelled_namespace(client: &kube::Client, ns: &str) -> (Api<OperatorGroup>, String) {
    let other = format!("{ns}-b");
    create_namespace(client, &other, &[(SELECTED_BY, ns)]).await;
    let spec: OperatorGroupSpec = serde_json::from_value(serde_json::json!({
        "selector": {"matchLabels": {SELECTED_BY: ns}},
    }))
    .expect("a valid spec");
    operator_group(client, ns, spec).await;
    (Api::<OperatorGroup>::namespaced(client.clone(), ns), other)
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn an_operator_group_selects_namespaces_by_label() {
    with_namespace("selector", |client, ns| async move {
        let (groups, other) = group_selecting_labelled_namespace(&client, &ns).await;
        let wanted = vec![other.clone()];
        wait_for(
            &groups,
            "operators",
            &format!("OperatorGroup operators selects {wanted:?}"),
            namespaces_are(wanted),
        )
        .await;

        // Labelling the group's own namespace adds it.
        let patch = serde_json::json!({"metadata": {"labels": {SELECTED_BY: ns}}});
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .patch(&ns, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("label the namespace");
        let mut wanted = vec![ns.clone(), other.clone()];
        wanted.sort();
        wait_for(
            &groups,
            "operators",
            &format!("OperatorGroup operators selects {wanted:?}"),
            namespaces_are(wanted),
        )
        .await;
        delete_namespace(&client, &other).await;
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
        let failed = wait_for_csv_reason(&api, "scoped.v1.0.0", CsvPhase::Failed, CsvReason::ComponentFailed)
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
        let installed = wait_for_csv(&api, "scoped.v1.0.0", CsvPhase::Succeeded).await;
        let deployment = Api::<Deployment>::namespaced(client.clone(), &ns).get("scoped").await.expect("the Deployment");
        assert!(controlled_by(&deployment.metadata, &installed));
    })
    .await;
}

/// Grants ServiceAccount `installer` of `ns` the `rules`, through Role and RoleBinding `name`.
async fn grant_installer(client: &Client, ns: &str, name: &str, rules: serde_json::Value) {
    let role: Role = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name}, "rules": rules,
    }))
    .expect("a Role");
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}],
    }))
    .expect("a RoleBinding");
    apply(&Api::<Role>::namespaced(client.clone(), ns), &role).await;
    apply(&Api::<RoleBinding>::namespaced(client.clone(), ns), &binding).await;
}

/// `csv` with `rules` added to its first `permissions` entry, or as
/// `clusterPermissions` of its service account when `cluster`.
fn asking(csv: ClusterServiceVersion, rules: serde_json::Value, cluster: bool) -> ClusterServiceVersion {
    let mut value = serde_json::to_value(csv).expect("a CSV");
    let strategy = &mut value["spec"]["install"]["spec"];
    if cluster {
        strategy["clusterPermissions"] =
            serde_json::json!([{"serviceAccountName": "demo-operator", "rules": rules}]);
    } else {
        let held = strategy["permissions"][0]["rules"].as_array_mut().expect("rules");
        held.extend(rules.as_array().expect("a list of rules").iter().cloned());
    }
    serde_json::from_value(value).expect("a CSV")
}

/// The objects of kind `K` in `ns` (all namespaces when cluster-scoped) labelled as `csv`'s.
async fn owned_by<K>(api: &Api<K>, csv: &str) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&kube::api::ListParams::default().labels(&format!("{}={csv}", labels::OWNER)))
        .await
        .expect("list")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect()
}

/// Security: a scoped install never creates RBAC beyond what the
/// OperatorGroup's service account could grant itself. Here it may manage
/// RBAC and Deployments, and holds what the operator asks for, except reading
/// Secrets (in the namespace) and listing Namespaces (cluster-wide): the API
/// server's escalation check refuses the Role and the ClusterRole (asked in a
/// dry run before anything is written), the CSV fails with
/// `InstallComponentFailed` naming the account, and nothing of the CSV exists:
/// no ServiceAccount, RBAC or Deployment, not even the rules it does hold.
#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_scoped_install_never_grants_more_than_its_service_account_holds() {
    with_namespace("escalate", |client, ns| async move {
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &ns);
        let installer: ServiceAccount = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "installer"},
        }))
        .expect("a service account");
        accounts.create(&PostParams::default(), &installer).await.expect("create the installer");
        let verbs = ["get", "list", "watch", "create", "update", "patch", "delete"];
        grant_installer(
            &client,
            &ns,
            "installer-base",
            serde_json::json!([
                {"apiGroups": [""], "resources": ["serviceaccounts", "configmaps"], "verbs": verbs},
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": verbs},
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": verbs},
            ]),
        )
        .await;
        let mut spec = own_namespace_group(&ns);
        spec.service_account_name = Some("installer".to_owned());
        operator_group(&client, &ns, spec).await;

        let secrets = serde_json::json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]);
        let namespaced = demo_csv("escalate.v1.0.0", "1.0.0", None, &["escalate"], OWN_NAMESPACE, None);
        create_csv(&client, &ns, asking(namespaced, secrets.clone(), false)).await;
        let namespaces = serde_json::json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}]);
        let cluster = demo_csv("escalate-cluster.v1.0.0", "1.0.0", None, &["escalate-cluster"], OWN_NAMESPACE, None);
        create_csv(&client, &ns, asking(cluster, namespaces, true)).await;

        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let roles = Api::<Role>::namespaced(client.clone(), &ns);
        let bindings = Api::<RoleBinding>::namespaced(client.clone(), &ns);
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let cluster_roles = Api::<ClusterRole>::all(client.clone());
        let cluster_bindings = Api::<ClusterRoleBinding>::all(client.clone());
        for csv in ["escalate.v1.0.0", "escalate-cluster.v1.0.0"] {
            let failed = wait_for_csv_reason(&api, csv, CsvPhase::Failed, CsvReason::ComponentFailed).await;
            let message = failed.status.and_then(|s| s.message).unwrap_or_default();
            assert!(
                message.contains("system:serviceaccount:") && message.contains(":installer") && message.contains("forbidden"),
                "{csv}: the message names the account and the refusal: {message}"
            );
            assert_eq!(owned_by(&accounts, csv).await, Vec::<String>::new(), "{csv}: no ServiceAccount");
            assert_eq!(owned_by(&roles, csv).await, Vec::<String>::new(), "{csv}: no Role");
            assert_eq!(owned_by(&bindings, csv).await, Vec::<String>::new(), "{csv}: no RoleBinding");
            assert_eq!(owned_by(&cluster_roles, csv).await, Vec::<String>::new(), "{csv}: no ClusterRole");
            assert_eq!(owned_by(&cluster_bindings, csv).await, Vec::<String>::new(), "{csv}: no ClusterRoleBinding");
            assert_eq!(owned_by(&deployments, csv).await, Vec::<String>::new(), "{csv}: no Deployment");
        }
        let failed = api.get("escalate.v1.0.0").await.expect("the CSV");
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains("secrets"), "the message names the rule not held: {message}");

    })
    .await;
}

/// The status of condition `type_` of an OperatorGroup, if it has one.
/// Waits until `condition` holds for the OperatorGroup `name`, which must exist then.
async fn wait_for_group(
    groups: &Api<OperatorGroup>,
    name: &str,
    what: &str,
    condition: impl kube::runtime::wait::Condition<OperatorGroup>,
) -> OperatorGroup {
    wait_for(groups, name, what, condition)
        .await
        .unwrap_or_else(|| panic!("OperatorGroup {name} exists once {what}"))
}

fn condition(group: &OperatorGroup, type_: &str) -> Option<String> {
    group
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_second_operator_group_is_reported_on_both_until_it_goes() {
    with_namespace("two-groups", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let groups = Api::<OperatorGroup>::namespaced(client.clone(), &ns);
        let ready = wait_for_group(
            &groups,
            "operators",
            "the OperatorGroup is Ready",
            |g: Option<&OperatorGroup>| g.is_some_and(|g| condition(g, "Ready").as_deref() == Some("True")),
        )
        .await;
        let status = ready.status.clone().expect("a status");
        assert_eq!(status.observed_generation, ready.metadata.generation);
        assert_eq!(condition(&ready, "MultipleOperatorGroup"), None);

        let second = OperatorGroup {
            metadata: kube::api::ObjectMeta {
                name: Some("second".to_owned()),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            spec: own_namespace_group(&ns),
            status: None,
        };
        apply(&groups, &second).await;
        for name in ["operators", "second"] {
            let group = wait_for_group(
                &groups,
                name,
                "both OperatorGroups report MultipleOperatorGroup",
                |g: Option<&OperatorGroup>| {
                    g.is_some_and(|g| condition(g, "MultipleOperatorGroup").as_deref() == Some("True"))
                },
            )
            .await;
            assert_eq!(condition(&group, "Stalled").as_deref(), Some("True"), "{name}");
            assert_eq!(condition(&group, "Ready").as_deref(), Some("False"), "{name}");
        }

        // The second group goes: the first is told without any change of its own.
        groups
            .delete("second", &DeleteParams::default())
            .await
            .expect("delete the second group");
        let alone = wait_for_group(
            &groups,
            "operators",
            "the remaining OperatorGroup is Ready again without MultipleOperatorGroup",
            |g: Option<&OperatorGroup>| {
                g.is_some_and(|g| {
                    condition(g, "MultipleOperatorGroup").is_none()
                        && condition(g, "Ready").as_deref() == Some("True")
                })
            },
        )
        .await;
        assert_eq!(condition(&alone, "Stalled"), None);
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_missing_service_account_is_a_condition_of_the_operator_group() {
    with_namespace("missing-sa", |client, ns| async move {
        let mut spec = own_namespace_group(&ns);
        spec.service_account_name = Some("installer".to_owned());
        operator_group(&client, &ns, spec).await;
        let groups = Api::<OperatorGroup>::namespaced(client.clone(), &ns);
        let missing = wait_for_group(
            &groups,
            "operators",
            "the OperatorGroup reports its missing service account",
            |g: Option<&OperatorGroup>| {
                g.is_some_and(|g| condition(g, "OperatorGroupServiceAccount").as_deref() == Some("True"))
            },
        )
        .await;
        let status = missing.status.clone().expect("a status");
        let reason = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "OperatorGroupServiceAccount")
            .map(|c| c.reason.clone());
        assert_eq!(reason.as_deref(), Some("ServiceAccountNotFound"));
        assert_eq!(status.service_account_ref, None);
        assert_eq!(condition(&missing, "Stalled").as_deref(), Some("True"));
        assert_eq!(
            status.namespaces,
            Some(vec![ns.clone()]),
            "the namespaces are still selected"
        );

        // Once the account exists, the group's next reconcile (here: a change
        // of the group) refers to it and drops the condition.
        let installer: ServiceAccount = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "installer"},
        }))
        .expect("a service account");
        Api::<ServiceAccount>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &installer)
            .await
            .expect("create the installer");
        let touch = serde_json::json!({"metadata": {"labels": {"e2e.olm-rs.dev/touched": "yes"}}});
        groups
            .patch("operators", &PatchParams::default(), &Patch::Merge(&touch))
            .await
            .expect("label the group");
        let found = wait_for_group(
            &groups,
            "operators",
            "the OperatorGroup refers to its service account and is Ready",
            |g: Option<&OperatorGroup>| {
                g.is_some_and(|g| {
                    condition(g, "OperatorGroupServiceAccount").is_none()
                        && condition(g, "Ready").as_deref() == Some("True")
                })
            },
        )
        .await;
        let reference = found
            .status
            .and_then(|s| s.service_account_ref)
            .expect("serviceAccountRef");
        assert_eq!(reference.name.as_deref(), Some("installer"));
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_deleted_namespace_leaves_the_operator_groups_that_selected_it() {
    with_namespace("gone-ns", |client, ns| async move {
        let (groups, other) = group_selecting_labelled_namespace(&client, &ns).await;
        let wanted = vec![other.clone()];
        wait_for_group(
            &groups,
            "operators",
            "the OperatorGroup selects the labelled namespace",
            namespaces_are(wanted),
        )
        .await;

        delete_namespace(&client, &other).await;
        wait_gone(
            &Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()),
            &other,
        )
        .await;
        wait_for_group(
            &groups,
            "operators",
            "the OperatorGroup selects no namespace once it is deleted",
            namespaces_are(Vec::new()),
        )
        .await;
    })
    .await;
}
