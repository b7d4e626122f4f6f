//! What holds an olm-operator install back, on a real control plane: missing
//! required CRDs, install modes the OperatorGroup does not fit, no
//! OperatorGroup, a Deployment that cannot progress, a CRD owned twice.
//!
//! Run with `cargo test -p olm-operator --test requirements -- --ignored`.

mod common;

use k8s_openapi::{
    api::apps::v1::Deployment,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, api::DeleteParams};
use olm_api::{
    v1::OperatorGroupSpec,
    v1alpha1::{ClusterServiceVersion, CsvPhase, CsvReason, StatusReason},
};

use common::{csv::*, *};

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
        let pending = wait_for_csv_reason(
            &api,
            "needs-widgets.v1.0.0",
            CsvPhase::Pending,
            CsvReason::RequirementsNotMet,
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
        let installed = wait_for_csv(&api, "needs-widgets.v1.0.0", CsvPhase::Succeeded).await;
        let requirement = installed
            .status
            .and_then(|s| s.requirement_status)
            .into_iter()
            .flatten()
            .find(|r| r.name == crd_name)
            .expect("the CRD is listed as a requirement");
        assert_eq!(requirement.status, StatusReason::Present);
        Api::<CustomResourceDefinition>::all(client.clone())
            .delete(&crd_name, &DeleteParams::default())
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
        let failed = wait_for_csv_reason(
            &api,
            "own-only.v1.0.0",
            CsvPhase::Failed,
            CsvReason::UnsupportedOperatorGroup,
        )
        .await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains("AllNamespaces"), "{message}");

        // Narrowing the group to its own namespace lets it install.
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        wait_for_csv(&api, "own-only.v1.0.0", CsvPhase::Succeeded).await;
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
        wait_for_csv_reason(
            &api,
            "lonely.v1.0.0",
            CsvPhase::Failed,
            CsvReason::NoOperatorGroup,
        )
        .await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_deployment_that_cannot_progress_fails_with_install_check_failed() {
    with_namespace("stuck", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let mut csv = demo_csv("stuck.v1.0.0", "1.0.0", None, &["stuck"], OWN_NAMESPACE, None);
        let spec = &mut csv.spec.install.deployment_mut().expect("details").deployments[0].spec;
        spec["progressDeadlineSeconds"] = 5.into();
        spec["template"]["spec"]["nodeSelector"] = serde_json::json!({"e2e.olm-rs.dev/no-such-node": "true"});
        create_csv(&client, &ns, csv).await;
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let failed = wait_for_csv_reason(
            &api,
            "stuck.v1.0.0",
            CsvPhase::Failed,
            CsvReason::InstallCheckFailed,
        )
        .await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains("progress deadline"), "{message}");
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn two_csvs_cannot_own_one_crd_in_a_namespace() {
    with_namespace("owners", |client, ns| async move {
        let group = format!("e2e-{}.olm-rs.dev", random_suffix());
        let crd_name = format!("widgets.{group}");
        install_crd(&client, &widget_crd(&group)).await;
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
        wait_for_csv(&api, "first.v1.0.0", CsvPhase::Succeeded).await;
        create_csv(&client, &ns, owning("second.v1.0.0", "second")).await;
        let failed =
            wait_for_csv_reason(&api, "second.v1.0.0", CsvPhase::Failed, CsvReason::OwnerConflict).await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(
            message.contains(&crd_name) && message.contains("first.v1.0.0"),
            "{message}"
        );

        // Once the first owner is gone, the second installs.
        api.delete("first.v1.0.0", &DeleteParams::default())
            .await
            .expect("delete the first CSV");
        wait_for_csv(&api, "second.v1.0.0", CsvPhase::Succeeded).await;
        Api::<CustomResourceDefinition>::all(client.clone())
            .delete(&crd_name, &DeleteParams::default())
            .await
            .expect("delete the CRD");
    })
    .await;
}
