//! OperatorConditions on a real control plane: one per CSV, going with it;
//! the operator's service account may update it and nothing else; and
//! `Upgradeable=False` holds an upgrade until it turns True or an admin
//! overrides it.
//!
//! Run with `cargo test -p olm-operator --test operator_conditions -- --ignored`.

mod common;

use k8s_openapi::api::{
    authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::{
    v1alpha1::{ClusterServiceVersion, CsvPhase, CsvReason},
    v2::OperatorCondition,
};

use common::{csv::*, *};

const ACCOUNT: &str = "demo-operator";

/// Whether service account [`ACCOUNT`] of `namespace` may `verb` the
/// OperatorCondition `name` (or its `subresource`), as the API server decides.
async fn may(client: &Client, namespace: &str, verb: &str, name: &str, subresource: Option<&str>) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:{ACCOUNT}")),
            groups: Some(vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_owned(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_owned()),
                verb: Some(verb.to_owned()),
                group: Some("operators.coreos.com".to_owned()),
                resource: Some("operatorconditions".to_owned()),
                subresource: subresource.map(str::to_owned),
                name: (!name.is_empty()).then(|| name.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("a SubjectAccessReview")
        .status
        .is_some_and(|s| s.allowed)
}

/// A client that acts as service account [`ACCOUNT`] of `namespace`.
async fn as_operator(namespace: &str) -> Client {
    let mut config = olm_testkit::config().await;
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{namespace}:{ACCOUNT}"));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_owned(),
    ]);
    Client::try_from(config).expect("an impersonating client")
}

/// Reports `Upgradeable` as the operator does with the `v2` API: in `spec.conditions`.
async fn report_upgradeable(api: &Api<OperatorCondition>, name: &str, status: &str, message: &str) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"conditions": [{
            "type": "Upgradeable",
            "status": status,
            "reason": if status == "True" { "Ready" } else { "Migrating" },
            "message": message,
            "lastTransitionTime": now,
        }]}})),
    )
    .await
    .unwrap_or_else(|e| panic!("report Upgradeable={status} on {name}: {e}"));
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn an_operator_condition_per_csv_writable_by_its_operator_only_and_gone_with_it() {
    with_namespace("opcond", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let conditions = Api::<OperatorCondition>::namespaced(client.clone(), &ns);
        let roles = Api::<Role>::namespaced(client.clone(), &ns);
        let bindings = Api::<RoleBinding>::namespaced(client.clone(), &ns);

        let csv = create_csv(
            &client,
            &ns,
            demo_csv("demo.v1.0.0", "1.0.0", None, &["demo"], OWN_NAMESPACE, None),
        )
        .await;
        wait_for_csv(&csvs, "demo.v1.0.0", CsvPhase::Succeeded).await;

        let condition = wait_for(&conditions, "demo.v1.0.0", "the CSV's OperatorCondition", |c: Option<&OperatorCondition>| {
            c.is_some()
        })
        .await
        .expect("the OperatorCondition");
        assert!(controlled_by(&condition.metadata, &csv), "the CSV controls it");
        assert_eq!(condition.spec.service_accounts, Some(vec![ACCOUNT.to_owned()]));
        assert_eq!(condition.spec.deployments, Some(vec!["demo".to_owned()]));
        let role = wait_for(&roles, "demo.v1.0.0", "the OperatorCondition's Role", |r: Option<&Role>| r.is_some())
            .await
            .expect("the Role");
        let owner = &role.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), Some(&owner.uid)),
            ("OperatorCondition", condition.metadata.uid.as_ref()),
            "the OperatorCondition controls its Role"
        );
        wait_for(&bindings, "demo.v1.0.0", "the OperatorCondition's RoleBinding", |b: Option<&RoleBinding>| {
            b.is_some()
        })
        .await
        .expect("the RoleBinding");

        // The API server's answer for the operator's service account.
        eventually("the operator may update its OperatorCondition", || {
            let client = client.clone();
            let ns = ns.clone();
            async move { may(&client, &ns, "update", "demo.v1.0.0", Some("status")).await }
        })
        .await;
        for (verb, name, subresource) in [
            ("get", "demo.v1.0.0", None),
            ("update", "demo.v1.0.0", None),
            ("patch", "demo.v1.0.0", Some("status")),
        ] {
            assert!(may(&client, &ns, verb, name, subresource).await, "{verb} {name} {subresource:?}");
        }
        for (verb, name, subresource) in [
            ("update", "other.v1.0.0", Some("status")),
            ("get", "other.v1.0.0", None),
            ("delete", "demo.v1.0.0", None),
            ("create", "", None),
            ("list", "", None),
        ] {
            assert!(
                !may(&client, &ns, verb, name, subresource).await,
                "may not {verb} {name} {subresource:?}"
            );
        }

        // Acting as the operator: its own OperatorCondition's status, yes; another's, no.
        let operator = as_operator(&ns).await;
        let as_operator_api = Api::<OperatorCondition>::namespaced(operator.clone(), &ns);
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let status = serde_json::json!({"status": {"conditions": [{
            "type": "Ready", "status": "True", "reason": "Started", "message": "running", "lastTransitionTime": now,
        }]}});
        as_operator_api
            .patch_status("demo.v1.0.0", &PatchParams::default(), &Patch::Merge(status.clone()))
            .await
            .expect("the operator updates its OperatorCondition's status");
        let mut other = OperatorCondition::new("other.v1.0.0", Default::default());
        other.metadata.namespace = Some(ns.clone());
        conditions
            .create(&PostParams::default(), &other)
            .await
            .expect("another OperatorCondition");
        let refused = as_operator_api
            .patch_status("other.v1.0.0", &PatchParams::default(), &Patch::Merge(status))
            .await
            .expect_err("another OperatorCondition is not the operator's");
        assert!(matches!(refused, kube::Error::Api(ref s) if s.code == 403), "{refused}");
        let refused = as_operator_api
            .delete("demo.v1.0.0", &Default::default())
            .await
            .expect_err("the operator may not delete it");
        assert!(matches!(refused, kube::Error::Api(ref s) if s.code == 403), "{refused}");

        // The operator's spec.conditions are copied into the status at the generation.
        report_upgradeable(&as_operator_api, "demo.v1.0.0", "True", "ready").await;
        let synced = wait_for(&conditions, "demo.v1.0.0", "Upgradeable copied into the status", |c: Option<&OperatorCondition>| {
            c.is_some_and(|c| {
                c.status.iter().flat_map(|s| s.conditions.iter().flatten()).any(|cond| {
                    cond.type_ == "Upgradeable" && cond.status == "True" && cond.observed_generation == c.metadata.generation
                })
            })
        })
        .await
        .expect("the OperatorCondition");
        assert!(
            synced
                .status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .any(|c| c.type_ == "Ready"),
            "the operator's own status condition stays"
        );

        // It goes with the CSV, and its Role and RoleBinding with it.
        csvs.delete("demo.v1.0.0", &Default::default())
            .await
            .expect("delete the CSV");
        wait_gone(&conditions, "demo.v1.0.0").await;
        wait_gone(&roles, "demo.v1.0.0").await;
        wait_gone(&bindings, "demo.v1.0.0").await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn upgradeable_false_holds_an_upgrade_until_true_or_overridden() {
    with_namespace("upgradeable", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let conditions = Api::<OperatorCondition>::namespaced(client.clone(), &ns);
        let operator = Api::<OperatorCondition>::namespaced(as_operator(&ns).await, &ns);

        create_csv(
            &client,
            &ns,
            demo_csv("demo.v1.0.0", "1.0.0", None, &["demo"], OWN_NAMESPACE, None),
        )
        .await;
        wait_for_csv(&csvs, "demo.v1.0.0", CsvPhase::Succeeded).await;
        wait_for(
            &conditions,
            "demo.v1.0.0",
            "the OperatorCondition",
            |c: Option<&OperatorCondition>| c.is_some(),
        )
        .await;
        eventually("the operator may update its OperatorCondition", || {
            let client = client.clone();
            let ns = ns.clone();
            async move { may(&client, &ns, "patch", "demo.v1.0.0", None).await }
        })
        .await;
        report_upgradeable(&operator, "demo.v1.0.0", "False", "migrating data").await;

        // The upgrade waits with OLM's reason while 1.0.0 says it is not upgradeable.
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
        let held = wait_for_csv_reason(
            &csvs,
            "demo.v1.1.0",
            CsvPhase::Pending,
            CsvReason::OperatorConditionNotUpgradeable,
        )
        .await;
        assert_eq!(
            held.status.and_then(|s| s.message).as_deref(),
            Some("operator is not upgradeable: the operator is not upgradeable: migrating data")
        );
        // Still held a little later: the old CSV keeps running.
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let still = csvs.get("demo.v1.1.0").await.expect("the new CSV");
        assert_eq!(
            still.status.and_then(|s| s.reason),
            Some(CsvReason::OperatorConditionNotUpgradeable)
        );
        assert!(csvs.get_opt("demo.v1.0.0").await.expect("get").is_some());

        // True releases it: 1.1.0 installs and 1.0.0 goes.
        report_upgradeable(&operator, "demo.v1.0.0", "True", "done").await;
        wait_for_csv(&csvs, "demo.v1.1.0", CsvPhase::Succeeded).await;
        wait_gone(&csvs, "demo.v1.0.0").await;
        wait_gone(&conditions, "demo.v1.0.0").await;

        // The next upgrade is held by 1.1.0, and an admin's override releases it.
        wait_for(
            &conditions,
            "demo.v1.1.0",
            "the OperatorCondition of 1.1.0",
            |c: Option<&OperatorCondition>| c.is_some(),
        )
        .await;
        eventually("the operator may update its new OperatorCondition", || {
            let client = client.clone();
            let ns = ns.clone();
            async move { may(&client, &ns, "patch", "demo.v1.1.0", None).await }
        })
        .await;
        report_upgradeable(&operator, "demo.v1.1.0", "False", "busy").await;
        create_csv(
            &client,
            &ns,
            demo_csv(
                "demo.v1.2.0",
                "1.2.0",
                Some("demo.v1.1.0"),
                &["demo"],
                OWN_NAMESPACE,
                None,
            ),
        )
        .await;
        wait_for_csv_reason(
            &csvs,
            "demo.v1.2.0",
            CsvPhase::Pending,
            CsvReason::OperatorConditionNotUpgradeable,
        )
        .await;
        conditions
            .patch(
                "demo.v1.1.0",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"overrides": [{
                    "type": "Upgradeable", "status": "True", "reason": "Admin", "message": "upgrade anyway",
                }]}})),
            )
            .await
            .expect("override Upgradeable");
        wait_for_csv(&csvs, "demo.v1.2.0", CsvPhase::Succeeded).await;
        wait_gone(&csvs, "demo.v1.1.0").await;
        let left: Vec<String> = list(&csvs, "").await.iter().map(|c| c.name_any()).collect();
        assert_eq!(left, ["demo.v1.2.0"]);
    })
    .await;
}
