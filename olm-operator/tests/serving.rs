//! Serving certificates over time, and required API services, on a real
//! control plane (the cluster in `KUBECONFIG`). The operator of this test
//! process issues certificates valid for 40 seconds and renews them 20 seconds
//! before expiry, so that a test can watch a rotation: a new certificate, a new
//! `caBundle`, `certsRotateAt` moved and the Deployment rolled.
//!
//! Run with `cargo test -p olm-operator --test serving -- --ignored`.

mod common;

use std::time::Duration;

use k8s_openapi::api::{
    admissionregistration::v1::ValidatingWebhookConfiguration, apps::v1::Deployment, core::v1::Secret,
};
use kube::{Api, Client, ResourceExt};
use olm_api::v1alpha1::{ClusterServiceVersion, CsvPhase, CsvReason, StatusReason};
use olm_operator::{
    context::Settings,
    controllers::csv::certs::{self, Lifetimes},
};

use common::{csv::*, *};

/// Certificates that live 40 seconds and are renewed 20 seconds before they expire.
fn short_lived() -> Settings {
    Settings {
        cert_lifetimes: Lifetimes::from_seconds(40, 20),
        ..test_settings()
    }
}

/// A small CSV whose Deployment `demo` serves a validating webhook (that
/// ignores failures: no pod really serves here).
fn webhook_csv() -> ClusterServiceVersion {
    let mut value = serde_json::to_value(demo_csv(
        "demo.v1.0.0",
        "1.0.0",
        None,
        &["demo"],
        OWN_NAMESPACE,
        None,
    ))
    .expect("a CSV as JSON");
    value["spec"]["webhookdefinitions"] = serde_json::json!([{
        "generateName": "vwidget.serving.example.com",
        "type": "ValidatingAdmissionWebhook",
        "deploymentName": "demo",
        "containerPort": 443,
        "targetPort": 9443,
        "sideEffects": "None",
        "failurePolicy": "Ignore",
        "admissionReviewVersions": ["v1"],
        "webhookPath": "/validate",
        "rules": [{"apiGroups": ["serving.example.com"], "apiVersions": ["v1"],
                   "operations": ["CREATE"], "resources": ["widgets"]}],
    }]);
    serde_json::from_value(value).expect("a CSV")
}

/// What a rotation changes, as seen at one moment.
#[derive(Debug, PartialEq)]
struct Seen {
    rotate_at: String,
    certificate: Vec<u8>,
    ca_bundle: Vec<u8>,
    pod_ca_hash: String,
}

async fn seen(client: &Client, namespace: &str, csv: &ClusterServiceVersion) -> Seen {
    let csv = Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace)
        .get(&csv.name_any())
        .await
        .expect("the CSV");
    let rotate_at = csv
        .status
        .as_ref()
        .and_then(|s| s.certs_rotate_at.as_ref())
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get("demo-service-cert")
        .await
        .expect("the certificate Secret");
    let certificate = secret.data.unwrap_or_default()["tls.crt"].0.clone();
    let configurations = list(
        &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        &owner_selector(&csv),
    )
    .await;
    let ca_bundle = configurations
        .first()
        .and_then(|c| c.webhooks.as_ref())
        .and_then(|w| w.first())
        .and_then(|w| w.client_config.ca_bundle.clone())
        .map(|b| b.0)
        .unwrap_or_default();
    let deployment = Api::<Deployment>::namespaced(client.clone(), namespace)
        .get("demo")
        .await
        .expect("the Deployment");
    let pod_ca_hash = deployment
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .and_then(|a| a.get("olmcahash").cloned())
        .unwrap_or_default();
    Seen {
        rotate_at,
        certificate,
        ca_bundle,
        pod_ca_hash,
    }
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_short_lifetime_rotates_the_certificate_the_ca_bundle_and_the_pods() {
    start_operator_with(&client().await, short_lived()).await;
    with_namespace("serving", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let created = create_csv(&client, &ns, webhook_csv()).await;
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        wait_for_csv(&csvs, &created.name_any(), CsvPhase::Succeeded).await;
        let before = seen(&client, &ns, &created).await;
        assert!(!before.rotate_at.is_empty(), "certsRotateAt is set: {before:?}");
        assert!(!before.ca_bundle.is_empty(), "the webhook has a caBundle");
        certs::verify(
            &before.ca_bundle,
            &before.certificate,
            &certs::hosts("demo-service", &ns),
            olm_operator::context::now(),
        )
        .expect("the caBundle verifies the certificate");
        assert_eq!(before.pod_ca_hash, certs::ca_hash(&before.ca_bundle));

        // The webhook sees the operator's own namespace only.
        let configuration = &list(
            &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
            &owner_selector(&created),
        )
        .await[0];
        let selector = configuration.webhooks.as_ref().expect("webhooks")[0]
            .namespace_selector
            .clone()
            .expect("a namespace selector");
        assert_eq!(
            selector.match_expressions.expect("expressions")[0].values,
            Some(vec![ns.clone()])
        );

        // Within a rotation period and some, everything has moved on.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        let after = loop {
            let now = seen(&client, &ns, &created).await;
            if now.rotate_at != before.rotate_at && now.pod_ca_hash != before.pod_ca_hash {
                break now;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no rotation within 90s: before {before:?}, now {now:?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert!(after.rotate_at > before.rotate_at, "certsRotateAt moved later");
        assert_ne!(after.certificate, before.certificate, "a new certificate");
        assert_ne!(after.ca_bundle, before.ca_bundle, "a new caBundle");
        certs::verify(
            &after.ca_bundle,
            &after.certificate,
            &certs::hosts("demo-service", &ns),
            olm_operator::context::now(),
        )
        .expect("the new caBundle verifies the new certificate");
        assert!(
            certs::verify(
                &before.ca_bundle,
                &after.certificate,
                &certs::hosts("demo-service", &ns),
                olm_operator::context::now(),
            )
            .is_err(),
            "the old CA does not verify the new certificate"
        );
        assert_eq!(
            after.pod_ca_hash,
            certs::ca_hash(&after.ca_bundle),
            "the pods roll to the new CA"
        );
        // And the operator settles again.
        wait_for_csv(&csvs, &created.name_any(), CsvPhase::Succeeded).await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn required_api_services_are_requirements() {
    start_operator_with(&client().await, short_lived()).await;
    with_namespace("serving-required", |client, ns| async move {
        let group = format!("missing-{}.example.com", random_suffix());
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let mut value = serde_json::to_value(demo_csv(
            "needs.v1.0.0",
            "1.0.0",
            None,
            &["needs"],
            OWN_NAMESPACE,
            None,
        ))
        .expect("a CSV as JSON");
        value["spec"]["apiservicedefinitions"] = serde_json::json!({"required": [
            {"name": "deployments", "group": "apps", "version": "v1", "kind": "Deployment"},
            {"name": "widgets", "group": group, "version": "v1", "kind": "Widget"},
        ]});
        let csv: ClusterServiceVersion = serde_json::from_value(value).expect("a CSV");
        let created = create_csv(&client, &ns, csv).await;
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        eventually("the CSV waits with RequirementsNotMet", || {
            let csvs = csvs.clone();
            let name = created.name_any();
            async move {
                csvs.get(&name)
                    .await
                    .ok()
                    .and_then(|c| c.status)
                    .is_some_and(|s| s.reason == Some(CsvReason::RequirementsNotMet))
            }
        })
        .await;
        let pending = csvs.get(&created.name_any()).await.expect("the CSV");
        let status = pending.status.clone().expect("a status");
        assert_eq!(status.phase, Some(CsvPhase::Pending));
        let requirement = |name: &str| {
            status
                .requirement_status
                .iter()
                .flatten()
                .find(|r| r.kind == "APIService" && r.name == name)
                .unwrap_or_else(|| panic!("no APIService {name} in {:#?}", status.requirement_status))
                .status
        };
        assert_eq!(
            requirement("v1.apps"),
            StatusReason::Present,
            "served by the API server itself"
        );
        let missing = format!("v1.{group}");
        assert_eq!(requirement(&missing), StatusReason::NotPresent);

        // Once the API is served (here by a local APIService, always Available), the CSV
        // installs without waiting for a resync.
        let resource = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
            "apiservices",
        );
        let api_services = Api::<kube::api::DynamicObject>::all_with(client.clone(), &resource);
        let mut local = kube::api::DynamicObject::new(&missing, &resource);
        local.data = serde_json::json!({"spec": {
            "group": group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10
        }});
        api_services
            .create(&Default::default(), &local)
            .await
            .expect("create a local APIService");
        let installed = tokio::time::timeout(
            Duration::from_secs(30),
            kube::runtime::wait::await_condition(
                csvs.clone(),
                &created.name_any(),
                csv_in(CsvPhase::Succeeded),
            ),
        )
        .await;
        api_services
            .delete(&missing, &Default::default())
            .await
            .expect("delete the local APIService");
        assert!(
            matches!(installed, Ok(Ok(Some(_)))),
            "the CSV did not install within 30s of the APIService: {installed:?}"
        );
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn invalid_webhooks_fail_the_csv_and_a_foreign_api_service_is_not_taken() {
    start_operator_with(&client().await, short_lived()).await;
    with_namespace("serving-refused", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);

        let mut value = serde_json::to_value(webhook_csv()).expect("a CSV as JSON");
        value["metadata"]["name"] = "everything.v1.0.0".into();
        value["spec"]["webhookdefinitions"][0]["rules"][0]["apiGroups"] = serde_json::json!(["*"]);
        let invalid = create_csv(&client, &ns, serde_json::from_value(value).expect("a CSV")).await;
        let failed = wait_for_csv(&csvs, &invalid.name_any(), CsvPhase::Failed).await;
        let status = failed.status.expect("a status");
        assert_eq!(status.reason, Some(CsvReason::InvalidWebhookDescription));
        assert_eq!(
            status.message.as_deref(),
            Some("webhook rules cannot include all groups")
        );
        assert!(
            list(
                &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
                &owner_selector(&invalid)
            )
            .await
            .is_empty(),
            "nothing is registered"
        );

        // v1.apps is the API server's own: a CSV that claims it must not take it.
        let mut value = serde_json::to_value(demo_csv(
            "apps.v1.0.0",
            "1.0.0",
            None,
            &["apps"],
            OWN_NAMESPACE,
            None,
        ))
        .expect("a CSV as JSON");
        value["spec"]["apiservicedefinitions"] = serde_json::json!({"owned": [
            {"name": "deployments", "group": "apps", "version": "v1", "kind": "Deployment",
             "deploymentName": "apps", "containerPort": 8443}
        ]});
        let claiming = create_csv(&client, &ns, serde_json::from_value(value).expect("a CSV")).await;
        let failed = wait_for_csv(&csvs, &claiming.name_any(), CsvPhase::Failed).await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(
            message.contains("pre-existing APIService v1.apps is not adoptable"),
            "{message}"
        );
        let resource = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
            "apiservices",
        );
        let apps = Api::<kube::api::DynamicObject>::all_with(client.clone(), &resource)
            .get("v1.apps")
            .await
            .expect("v1.apps");
        assert!(
            apps.data["spec"]["service"].is_null(),
            "v1.apps stays local: {:?}",
            apps.data["spec"]
        );
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_deleted_certificate_secret_and_webhook_come_back() {
    start_operator_with(&client().await, short_lived()).await;
    with_namespace("serving-repair", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let created = create_csv(&client, &ns, webhook_csv()).await;
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        wait_for_csv(&csvs, &created.name_any(), CsvPhase::Succeeded).await;
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let configurations = Api::<ValidatingWebhookConfiguration>::all(client.clone());
        let configuration = list(&configurations, &owner_selector(&created)).await[0].name_any();

        secrets
            .delete("demo-service-cert", &Default::default())
            .await
            .expect("delete the Secret");
        configurations
            .delete(&configuration, &Default::default())
            .await
            .expect("delete the webhook configuration");
        eventually("the Secret and the webhook are back and agree", || {
            let (client, ns, created) = (client.clone(), ns.clone(), created.clone());
            async move {
                let secret = Api::<Secret>::namespaced(client.clone(), &ns)
                    .get_opt("demo-service-cert")
                    .await
                    .ok()
                    .flatten();
                let registered = list(
                    &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
                    &owner_selector(&created),
                )
                .await;
                let (Some(secret), Some(configuration)) = (secret, registered.first()) else {
                    return false;
                };
                let certificate = secret.data.unwrap_or_default()["tls.crt"].0.clone();
                let ca_bundle = configuration.webhooks.as_ref().expect("webhooks")[0]
                    .client_config
                    .ca_bundle
                    .clone()
                    .map(|b| b.0)
                    .unwrap_or_default();
                certs::verify(
                    &ca_bundle,
                    &certificate,
                    &certs::hosts("demo-service", &ns),
                    olm_operator::context::now(),
                )
                .is_ok()
            }
        })
        .await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn an_upgrade_hands_the_certificates_and_webhooks_to_the_new_csv() {
    start_operator_with(&client().await, short_lived()).await;
    with_namespace("serving-upgrade", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        let old = create_csv(&client, &ns, webhook_csv()).await;
        wait_for_csv(&csvs, &old.name_any(), CsvPhase::Succeeded).await;

        let mut value = serde_json::to_value(webhook_csv()).expect("a CSV as JSON");
        value["metadata"]["name"] = "demo.v2.0.0".into();
        value["spec"]["version"] = "2.0.0".into();
        value["spec"]["replaces"] = "demo.v1.0.0".into();
        let new = create_csv(&client, &ns, serde_json::from_value(value).expect("a CSV")).await;
        wait_for_csv(&csvs, &new.name_any(), CsvPhase::Succeeded).await;
        wait_gone(&csvs, &old.name_any()).await;

        let configurations = Api::<ValidatingWebhookConfiguration>::all(client.clone());
        assert!(
            list(&configurations, &owner_selector(&old)).await.is_empty(),
            "the old CSV's webhook is gone"
        );
        eventually("the new CSV's certificate, Service and webhook agree", || {
            let (client, ns, new) = (client.clone(), ns.clone(), new.clone());
            async move {
                let secret = Api::<Secret>::namespaced(client.clone(), &ns)
                    .get_opt("demo-service-cert")
                    .await
                    .ok()
                    .flatten();
                let service = Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), &ns)
                    .get_opt("demo-service")
                    .await
                    .ok()
                    .flatten();
                let registered = list(
                    &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
                    &owner_selector(&new),
                )
                .await;
                let (Some(secret), Some(_service), Some(configuration)) =
                    (secret, service, registered.first())
                else {
                    return false;
                };
                let owned_by_new = secret
                    .owner_references()
                    .iter()
                    .any(|o| Some(&o.uid) == new.metadata.uid.as_ref());
                let certificate = secret.data.unwrap_or_default()["tls.crt"].0.clone();
                let ca_bundle = configuration.webhooks.as_ref().expect("webhooks")[0]
                    .client_config
                    .ca_bundle
                    .clone()
                    .map(|b| b.0)
                    .unwrap_or_default();
                owned_by_new
                    && certs::verify(
                        &ca_bundle,
                        &certificate,
                        &certs::hosts("demo-service", &ns),
                        olm_operator::context::now(),
                    )
                    .is_ok()
            }
        })
        .await;
    })
    .await;
}
