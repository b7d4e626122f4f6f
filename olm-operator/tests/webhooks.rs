//! Webhooks, APIServices and their certificates on a real control plane (the
//! cluster in `KUBECONFIG`): every corpus package that declares webhooks or
//! owned API services installs from its newest such bundle, with webhook
//! configurations, conversion webhooks and APIServices whose `caBundle`
//! verifies the serving certificate in the Deployment's Secret (checked with
//! rustls-webpki, SANs included), the Secret mounted at OLM's paths, and a
//! Service that selects the Deployment's pods; deleting the CSV removes them.
//!
//! No pod really serves on the test control plane, so every CSV is deleted
//! before the next installs: a webhook with `failurePolicy: Fail` left behind
//! would refuse objects of its kinds.
//!
//! Run with `cargo test -p olm-operator --test webhooks -- --ignored`.

mod common;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::{
    ByteString,
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        apps::v1::Deployment,
        core::v1::{Node, Pod, Secret, Service},
        rbac::v1::ClusterRoleBinding,
        scheduling::v1::PriorityClass,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams},
};
use olm_api::{
    manifest,
    v1::OperatorGroupSpec,
    v1alpha1::{ClusterServiceVersion, CsvPhase, InstallModeType, WebhookAdmissionType},
};
use olm_operator::controllers::csv::certs;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject};

use common::{csv::*, *};

/// A corpus bundle: its CSV and CRDs.
struct Bundle {
    package: String,
    version: String,
    csv: ClusterServiceVersion,
    crds: Vec<CustomResourceDefinition>,
}

fn serves_something(csv: &ClusterServiceVersion) -> bool {
    !csv.spec
        .webhook_definitions
        .as_deref()
        .unwrap_or_default()
        .is_empty()
        || csv
            .spec
            .api_service_definitions
            .as_ref()
            .and_then(|d| d.owned.as_ref())
            .is_some_and(|owned| !owned.is_empty())
}

/// Reads the CSV and CRDs of a manifest directory; `None` when it has no CSV or
/// a document does not parse.
fn read_bundle(dir: &Path) -> Option<(ClusterServiceVersion, Vec<CustomResourceDefinition>)> {
    let mut csv = None;
    let mut crds = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).collect();
    files.sort();
    for path in files {
        let is_yaml = path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if !is_yaml {
            continue;
        }
        for (index, doc) in manifest::documents(&path, &text).ok()?.into_iter().enumerate() {
            match (doc["apiVersion"].as_str(), doc["kind"].as_str()) {
                (_, Some("ClusterServiceVersion")) => {
                    csv = Some(manifest::from_value(&path, index + 1, doc).ok()?);
                }
                (Some("apiextensions.k8s.io/v1"), Some("CustomResourceDefinition")) => {
                    crds.push(manifest::from_value(&path, index + 1, doc).ok()?);
                }
                (Some("apiextensions.k8s.io/v1beta1"), Some("CustomResourceDefinition")) => {
                    crds.push(manifest::from_value(&path, index + 1, v1_of_v1beta1(&doc)).ok()?);
                }
                _ => {}
            }
        }
    }
    Some((csv?, crds))
}

/// A v1 CRD with the names, scope and versions of a v1beta1 CRD document and
/// an open schema: the API server serves no v1beta1 CRDs any more, and only the
/// CRD's presence matters here (a requirement of the CSV).
fn v1_of_v1beta1(doc: &serde_json::Value) -> serde_json::Value {
    let spec = &doc["spec"];
    let mut versions: Vec<String> = spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str().map(str::to_owned))
        .collect();
    if versions.is_empty() {
        versions.extend(spec["version"].as_str().map(str::to_owned));
    }
    let storage = spec["version"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| versions[0].clone());
    let versions: Vec<serde_json::Value> = versions
        .iter()
        .map(|name| {
            serde_json::json!({
                "name": name,
                "served": true,
                "storage": *name == storage,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": doc["metadata"]["name"]},
        "spec": {
            "group": spec["group"],
            "names": spec["names"],
            "scope": spec["scope"],
            "versions": versions,
        }
    })
}

/// The priority classes the CSV's Deployments name, other than the system ones.
fn priority_classes(csv: &ClusterServiceVersion) -> Vec<String> {
    let details = csv.spec.install.deployment().cloned().map(serde_json::to_value);
    let deployments = details
        .and_then(Result::ok)
        .and_then(|d| d["deployments"].as_array().cloned())
        .unwrap_or_default();
    deployments
        .iter()
        .filter_map(|d| d["spec"]["template"]["spec"]["priorityClassName"].as_str())
        .filter(|name| !name.starts_with("system-"))
        .map(str::to_owned)
        .collect()
}

/// The node labels the CSV's pods require (node selectors, and required node
/// affinity terms with `Exists` or `In`).
fn node_labels(csv: &ClusterServiceVersion) -> BTreeMap<String, String> {
    let details = csv.spec.install.deployment().cloned().map(serde_json::to_value);
    let deployments = details
        .and_then(Result::ok)
        .and_then(|d| d["deployments"].as_array().cloned())
        .unwrap_or_default();
    let mut labels = BTreeMap::new();
    for deployment in &deployments {
        let pod = &deployment["spec"]["template"]["spec"];
        for (key, value) in pod["nodeSelector"].as_object().into_iter().flatten() {
            labels.insert(key.clone(), value.as_str().unwrap_or_default().to_owned());
        }
        let terms = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
        for term in terms.as_array().into_iter().flatten().take(1) {
            for expression in term["matchExpressions"].as_array().into_iter().flatten() {
                let key = expression["key"].as_str().unwrap_or_default().to_owned();
                match expression["operator"].as_str() {
                    Some("Exists") => {
                        labels.insert(key, String::new());
                    }
                    Some("In") => {
                        let value = expression["values"][0].as_str().unwrap_or_default().to_owned();
                        labels.insert(key, value);
                    }
                    _ => {}
                }
            }
        }
    }
    labels
}

/// Where the CSV itself mounts `volume` in `container` of `deployment`, if it does.
fn declared_mount(
    csv: &ClusterServiceVersion,
    deployment: &str,
    container: &str,
    volume: &str,
) -> Option<String> {
    let details = serde_json::to_value(csv.spec.install.deployment().cloned()?).ok()?;
    let deployment = details["deployments"]
        .as_array()?
        .iter()
        .find(|d| d["name"] == deployment)?;
    let container = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == container)?;
    container["volumeMounts"]
        .as_array()?
        .iter()
        .find(|m| m["name"] == volume)
        .and_then(|m| m["mountPath"].as_str().map(str::to_owned))
}

/// The CRDs the CSV's conversion webhooks convert.
fn conversion_crds(csv: &ClusterServiceVersion) -> Vec<String> {
    csv.spec
        .webhook_definitions
        .iter()
        .flatten()
        .filter(|d| d.type_ == WebhookAdmissionType::ConversionWebhook)
        .flat_map(|d| d.conversion_crds.clone().unwrap_or_default())
        .collect()
}

/// Stand-ins for the CRDs the CSV requires and its bundle does not ship.
fn stand_ins(bundle: &Bundle) -> Vec<CustomResourceDefinition> {
    let shipped: Vec<String> = bundle.crds.iter().map(|c| c.name_any()).collect();
    let required = bundle
        .csv
        .spec
        .custom_resource_definitions
        .as_ref()
        .and_then(|c| c.required.clone())
        .unwrap_or_default();
    required
        .into_iter()
        .filter(|desc| !shipped.contains(&desc.name))
        .map(|desc| {
            let (plural, group) = desc.name.split_once('.').unwrap_or((&desc.name, ""));
            serde_json::from_value(v1_of_v1beta1(&serde_json::json!({
                "metadata": {"name": desc.name},
                "spec": {
                    "group": group,
                    "version": desc.version,
                    "scope": "Namespaced",
                    "names": {
                        "plural": plural,
                        "singular": desc.kind.to_lowercase(),
                        "kind": desc.kind,
                        "listKind": format!("{}List", desc.kind),
                    },
                },
            })))
            .expect("a stand-in CRD")
        })
        .collect()
}

fn version_key(version: &str) -> semver::Version {
    semver::Version::parse(version).unwrap_or_else(|_| semver::Version::new(0, 0, 0))
}

/// The newest bundle of each corpus package that declares webhooks or owned API services.
fn corpus_bundles() -> Vec<Bundle> {
    let corpus = corpus_dir();
    let mut packages: BTreeMap<String, Vec<(String, PathBuf)>> = BTreeMap::new();
    for package in std::fs::read_dir(corpus.join("bundles"))
        .expect("corpus bundles")
        .flatten()
    {
        let name = package.file_name().to_string_lossy().into_owned();
        for version in std::fs::read_dir(package.path()).into_iter().flatten().flatten() {
            let dir = version.path();
            for manifests in [dir.join("manifests"), dir.join("bundle").join("manifests")] {
                if manifests.is_dir() {
                    packages
                        .entry(name.clone())
                        .or_default()
                        .push((version.file_name().to_string_lossy().into_owned(), manifests));
                }
            }
        }
    }
    let legacy = corpus.join("packagemanifests").join("enmasse");
    for version in std::fs::read_dir(&legacy).into_iter().flatten().flatten() {
        if version.path().is_dir() {
            packages
                .entry("enmasse".to_owned())
                .or_default()
                .push((version.file_name().to_string_lossy().into_owned(), version.path()));
        }
    }
    let mut bundles = Vec::new();
    for (package, mut versions) in packages {
        versions.sort_by_key(|(version, _)| std::cmp::Reverse(version_key(version)));
        let newest = versions.into_iter().find_map(|(version, dir)| {
            let (csv, crds) = read_bundle(&dir)?;
            serves_something(&csv).then_some((version, csv, crds))
        });
        if let Some((version, csv, crds)) = newest {
            bundles.push(Bundle {
                package,
                version,
                csv,
                crds,
            });
        }
    }
    bundles
}

/// Verifies `cert_pem` against the CA `ca_pem` for `host` now, with webpki.
fn verifies(ca_pem: &[u8], cert_pem: &[u8], host: &str) -> Result<(), String> {
    let ca = CertificateDer::from_pem_slice(ca_pem).map_err(|e| format!("CA: {e}"))?;
    let cert = CertificateDer::from_pem_slice(cert_pem).map_err(|e| format!("certificate: {e}"))?;
    let anchor = webpki::anchor_from_trusted_cert(&ca).map_err(|e| format!("anchor: {e}"))?;
    let end_entity = webpki::EndEntityCert::try_from(&cert).map_err(|e| format!("parse: {e}"))?;
    end_entity
        .verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &[anchor],
            &[],
            UnixTime::now(),
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .map_err(|e| format!("chain: {e}"))?;
    let name = ServerName::try_from(host).map_err(|e| format!("name {host}: {e}"))?;
    end_entity
        .verify_is_valid_for_subject_name(&name)
        .map_err(|e| format!("SAN {host}: {e}"))
}

fn api_service_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
        "apiservices",
    )
}

fn bytes(value: &serde_json::Value) -> Vec<u8> {
    serde_json::from_value::<ByteString>(value.clone())
        .map(|b| b.0)
        .unwrap_or_default()
}

/// Checks that the serving certificate of the Service `service` in
/// `namespace` verifies against `ca_bundle` for the Service's DNS name.
async fn check_ca_bundle(client: &Client, namespace: &str, service: &str, ca_bundle: &[u8], what: &str) {
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(&certs::secret_name(service))
        .await
        .unwrap_or_else(|e| panic!("{what}: the Secret of {service}: {e}"));
    let data = secret.data.unwrap_or_default();
    let cert = data
        .get("tls.crt")
        .unwrap_or_else(|| panic!("{what}: no tls.crt"));
    assert!(data.contains_key("tls.key"), "{what}: no tls.key");
    let host = format!("{service}.{namespace}.svc");
    verifies(ca_bundle, &cert.0, &host).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Installs `bundle` in a namespace of its own, checks everything, deletes the CSV and checks
/// that its objects are gone.
async fn install_and_check(client: Client, bundle: Bundle, namespace: String) {
    let client = &client;
    let bundle = &bundle;
    let what = format!("{} {}", bundle.package, bundle.version);
    for crd in &bundle.crds {
        install_crd(client, crd).await;
    }
    for crd in stand_ins(bundle) {
        // Another package provides these; only their presence matters here.
        install_crd(client, &crd).await;
    }
    let labels = node_labels(&bundle.csv);
    if !labels.is_empty() {
        // Fake nodes carry no roles; give them the labels the pods ask for.
        let nodes = Api::<Node>::all(client.clone());
        for node in list(&nodes, "").await {
            let patch = serde_json::json!({"metadata": {"labels": labels}});
            nodes
                .patch(&node.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap_or_else(|e| panic!("label node {}: {e}", node.name_any()));
        }
    }
    for name in priority_classes(&bundle.csv) {
        // On a real cluster the operator makes these itself once it runs.
        let class: PriorityClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": 1000,
        }))
        .expect("a PriorityClass");
        apply(&Api::<PriorityClass>::all(client.clone()), &class).await;
    }
    let all_namespaces = bundle
        .csv
        .spec
        .install_modes
        .iter()
        .flatten()
        .any(|m| m.type_ == InstallModeType::AllNamespaces && m.supported);
    let group = if all_namespaces {
        OperatorGroupSpec::default()
    } else {
        own_namespace_group(&namespace)
    };
    operator_group(client, &namespace, group).await;
    let created = create_csv(client, &namespace, bundle.csv.clone()).await;
    let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &namespace);
    let name = created.name_any();
    let csv = wait_for_csv(&csvs, &name, CsvPhase::Succeeded).await;
    let status = csv.status.clone().expect("a status");
    assert!(status.certs_last_updated.is_some(), "{what}: certsLastUpdated");
    assert!(status.certs_rotate_at.is_some(), "{what}: certsRotateAt");

    // Per served Deployment: Service, Secret, mounts.
    let deployments = Api::<Deployment>::namespaced(client.clone(), &namespace);
    let services = Api::<Service>::namespaced(client.clone(), &namespace);
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    for served in certs::served(&csv) {
        let deployment = deployments
            .get(&served.deployment)
            .await
            .unwrap_or_else(|e| panic!("{what}: Deployment {}: {e}", served.deployment));
        let service_name = certs::service_name(&served.deployment);
        let service = services
            .get(&service_name)
            .await
            .unwrap_or_else(|e| panic!("{what}: Service {service_name}: {e}"));
        let spec = deployment.spec.clone().expect("a spec");
        let selector = service
            .spec
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default();
        assert_eq!(
            Some(&selector),
            spec.selector.match_labels.as_ref(),
            "{what}: the Service selects the Deployment's pods"
        );
        let label_selector: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let selected = list(&pods, &label_selector.join(",")).await;
        assert!(
            selected.iter().any(|pod| pod
                .owner_references()
                .iter()
                .any(|o| o.kind == "ReplicaSet" && o.name.starts_with(&served.deployment))),
            "{what}: the Service selects the pods of {}",
            served.deployment
        );
        let ports: Vec<_> = service
            .spec
            .as_ref()
            .and_then(|s| s.ports.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|p| (p.name, p.port, p.target_port))
            .collect();
        let declared: Vec<_> = served
            .ports
            .iter()
            .cloned()
            .map(|p| (p.name, p.port, p.target_port))
            .collect();
        assert_eq!(ports, declared, "{what}: the Service's ports");

        let secret_name = certs::secret_name(&service_name);
        let pod = spec.template.spec.clone().expect("a pod spec");
        for (volume, path) in [
            ("apiservice-cert", "/apiserver.local.config/certificates"),
            ("webhook-cert", "/tmp/k8s-webhook-server/serving-certs"),
        ] {
            let found = pod
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == volume)
                .unwrap_or_else(|| panic!("{what}: volume {volume}"));
            assert_eq!(
                found.secret.as_ref().and_then(|s| s.secret_name.as_deref()),
                Some(secret_name.as_str()),
                "{what}: volume {volume}"
            );
            for container in &pod.containers {
                // A container that mounts the volume itself keeps its path (as in OLM).
                let own = declared_mount(&bundle.csv, &served.deployment, &container.name, volume);
                let path = own.as_deref().unwrap_or(path);
                assert!(
                    container
                        .volume_mounts
                        .iter()
                        .flatten()
                        .any(|m| m.name == volume && m.mount_path == path),
                    "{what}: container {} mounts {volume} at {path}",
                    container.name
                );
            }
        }
        let secret = Api::<Secret>::namespaced(client.clone(), &namespace)
            .get(&secret_name)
            .await
            .unwrap_or_else(|e| panic!("{what}: Secret {secret_name}: {e}"));
        let ca = secret
            .data
            .unwrap_or_default()
            .get("olmCAKey")
            .cloned()
            .expect("olmCAKey");
        let annotations = spec
            .template
            .metadata
            .and_then(|m| m.annotations)
            .unwrap_or_default();
        assert_eq!(
            annotations.get("olmcahash"),
            Some(&certs::ca_hash(&ca.0)),
            "{what}: the pod template carries the CA's hash"
        );
    }

    // Webhook configurations, one per admission webhook, and conversion webhooks.
    let selector = owner_selector(&csv);
    let validating = list(
        &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        &selector,
    )
    .await;
    let mutating = list(
        &Api::<MutatingWebhookConfiguration>::all(client.clone()),
        &selector,
    )
    .await;
    let definitions = csv.spec.webhook_definitions.clone().unwrap_or_default();
    let count = |type_| definitions.iter().filter(|d| d.type_ == type_).count();
    assert_eq!(
        validating.len(),
        count(WebhookAdmissionType::ValidatingAdmissionWebhook),
        "{what}: validating configurations"
    );
    assert_eq!(
        mutating.len(),
        count(WebhookAdmissionType::MutatingAdmissionWebhook),
        "{what}: mutating configurations"
    );
    let expected_selector = |hook: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>| {
        if all_namespaces {
            // The API server defaults a missing selector to the empty one, which selects all.
            assert!(
                hook.is_none_or(|s| s.match_labels.is_none() && s.match_expressions.is_none()),
                "{what}: an AllNamespaces operator's webhook sees all namespaces: {hook:?}"
            );
        } else {
            let values = hook
                .and_then(|s| s.match_expressions.as_ref())
                .and_then(|e| e.first())
                .and_then(|e| e.values.clone());
            assert_eq!(
                values,
                Some(vec![namespace.clone()]),
                "{what}: namespace selector"
            );
        }
    };
    for configuration in &validating {
        for hook in configuration.webhooks.iter().flatten() {
            expected_selector(hook.namespace_selector.as_ref());
            let service = hook.client_config.service.clone().expect("a service");
            let ca = hook.client_config.ca_bundle.clone().expect("a caBundle");
            check_ca_bundle(client, &namespace, &service.name, &ca.0, &what).await;
        }
    }
    for configuration in &mutating {
        for hook in configuration.webhooks.iter().flatten() {
            expected_selector(hook.namespace_selector.as_ref());
            let service = hook.client_config.service.clone().expect("a service");
            let ca = hook.client_config.ca_bundle.clone().expect("a caBundle");
            check_ca_bundle(client, &namespace, &service.name, &ca.0, &what).await;
        }
    }
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for definition in definitions
        .iter()
        .filter(|d| d.type_ == WebhookAdmissionType::ConversionWebhook)
    {
        for crd_name in definition.conversion_crds.iter().flatten() {
            let crd = crds.get(crd_name).await.expect("the CRD");
            let conversion = crd.spec.conversion.clone().expect("a conversion");
            assert_eq!(conversion.strategy, "Webhook", "{what}: {crd_name}");
            let client_config = conversion
                .webhook
                .and_then(|w| w.client_config)
                .expect("a client config");
            let service = client_config.service.expect("a service");
            assert_eq!(service.namespace, namespace, "{what}: {crd_name}");
            let ca = client_config.ca_bundle.expect("a caBundle");
            check_ca_bundle(client, &namespace, &service.name, &ca.0, &what).await;
        }
    }

    // APIServices.
    let api_services = Api::<DynamicObject>::all_with(client.clone(), &api_service_resource());
    let owned = csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.clone())
        .unwrap_or_default();
    for desc in &owned {
        let name = format!("{}.{}", desc.version, desc.group);
        let found = api_services
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("{what}: APIService {name}: {e}"));
        let spec = &found.data["spec"];
        assert_eq!(spec["service"]["namespace"], namespace.as_str(), "{what}: {name}");
        let service = spec["service"]["name"].as_str().expect("a service").to_owned();
        check_ca_bundle(client, &namespace, &service, &bytes(&spec["caBundle"]), &what).await;
    }

    // Deleting the CSV removes all of it.
    csvs.delete(&name, &DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("{what}: delete the CSV: {e}"));
    wait_gone(&csvs, &name).await;
    assert!(
        list(
            &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
            &selector
        )
        .await
        .is_empty(),
        "{what}: validating configurations left"
    );
    assert!(
        list(
            &Api::<MutatingWebhookConfiguration>::all(client.clone()),
            &selector
        )
        .await
        .is_empty(),
        "{what}: mutating configurations left"
    );
    assert!(
        list(&api_services, &selector).await.is_empty(),
        "{what}: APIServices left"
    );
    assert!(
        list(&Api::<ClusterRoleBinding>::all(client.clone()), &selector)
            .await
            .is_empty(),
        "{what}: ClusterRoleBindings left"
    );
    let services_left = || async {
        list(&services, "olm.managed=true").await.is_empty()
            && list(
                &Api::<Secret>::namespaced(client.clone(), &namespace),
                "olm.managed=true",
            )
            .await
            .is_empty()
    };
    eventually(
        &format!("{what}: the garbage collector removes the Services and Secrets"),
        services_left,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn every_corpus_bundle_with_webhooks_or_api_services_installs_with_verified_certificates() {
    let client = client().await;
    start_operator(&client).await;
    let bundles = corpus_bundles();
    let names: Vec<String> = bundles
        .iter()
        .map(|b| format!("{} {}", b.package, b.version))
        .collect();
    eprintln!("bundles: {names:?}");
    assert!(
        bundles.len() >= 10,
        "the corpus has 10 packages with webhooks and one with API services: {names:?}"
    );
    for bundle in bundles {
        let what = format!("{} {}", bundle.package, bundle.version);
        eprintln!("installing {what}");
        let namespace = format!("e2e-webhooks-{}", random_suffix());
        create_namespace(&client, &namespace, &[(NAMESPACE_LABEL, "webhooks")]).await;
        let converted = conversion_crds(&bundle.csv);
        let check = install_and_check(client.clone(), bundle, namespace.clone());
        let outcome = tokio::spawn(tokio::time::timeout(Duration::from_secs(300), check)).await;
        // Whatever happened, no webhook of this CSV stays behind to refuse the next one's objects,
        // and its CRDs convert without it again (the CRDs stay, as they do in OLM).
        delete_csvs(&client, &namespace).await;
        delete_namespace(&client, &namespace).await;
        let crds = Api::<CustomResourceDefinition>::all(client.clone());
        let no_webhook = serde_json::json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
        for crd in converted {
            if let Err(e) = crds
                .patch(&crd, &PatchParams::default(), &Patch::Merge(&no_webhook))
                .await
            {
                eprintln!("warning: could not reset the conversion of CRD {crd}: {e}");
            }
        }
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(_)) => panic!("{what} took too long"),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
        // The operator did it with the permissions of manifests/ alone.
        assert_no_refusals();
    }
}
