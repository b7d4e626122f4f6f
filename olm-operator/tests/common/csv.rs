//! What the olm-operator cluster tests build on: CSVs and OperatorGroups to
//! create, the corpus's limitador-operator bundle, and checks on a CSV's
//! phases and the objects it owns.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    api::{ObjectMeta, PostParams},
};
use olm_api::{
    manifest,
    v1::{OperatorGroup, OperatorGroupSpec},
    v1alpha1::{ClusterServiceVersion, CsvPhase, CsvReason},
};

use super::*;

/// The limitador-operator bundle of the corpus the install tests use.
pub const LIMITADOR: &str = "bundles/limitador-operator/0.11.0/manifests";
pub const LIMITADOR_CSV: &str = "limitador-operator.clusterserviceversion.yaml";
pub const LIMITADOR_CRD: &str = "limitador.kuadrant.io_limitadors.yaml";
pub const LIMITADOR_DEPLOYMENT: &str = "limitador-operator-controller-manager";

/// Waits until the CSV `name` is in `phase` for `reason`, and returns it.
pub async fn wait_for_csv_reason(
    api: &Api<ClusterServiceVersion>,
    name: &str,
    phase: CsvPhase,
    reason: CsvReason,
) -> ClusterServiceVersion {
    let in_phase_for_reason = move |csv: Option<&ClusterServiceVersion>| {
        let status = csv.and_then(|c| c.status.as_ref());
        status.and_then(|s| s.phase) == Some(phase) && status.and_then(|s| s.reason) == Some(reason)
    };
    wait_for(
        api,
        name,
        &format!("CSV {name} is {phase:?} for {reason:?}"),
        in_phase_for_reason,
    )
    .await
    .unwrap_or_else(|| panic!("the CSV {name} exists"))
}

/// The OperatorGroup's status lists exactly the namespaces `wanted`.
pub fn namespaces_are(wanted: Vec<String>) -> impl Fn(Option<&OperatorGroup>) -> bool {
    move |group| {
        group
            .and_then(|g| g.status.as_ref())
            .and_then(|s| s.namespaces.as_ref())
            == Some(&wanted)
    }
}

/// The phases a CSV went through, from its condition history.
pub fn history(csv: &ClusterServiceVersion) -> Vec<CsvPhase> {
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

pub async fn operator_group(client: &Client, namespace: &str, spec: OperatorGroupSpec) -> OperatorGroup {
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

pub async fn create_csv(
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
pub async fn install_limitador(client: &Client, namespace: &str) -> ClusterServiceVersion {
    let dir = corpus_dir().join(LIMITADOR);
    let crd: CustomResourceDefinition =
        manifest::read_one(&dir.join(LIMITADOR_CRD)).unwrap_or_else(|e| panic!("{e}"));
    install_crd(client, &crd).await;

    operator_group(client, namespace, OperatorGroupSpec::default()).await;
    let csv: ClusterServiceVersion =
        manifest::read_one(&dir.join(LIMITADOR_CSV)).unwrap_or_else(|e| panic!("{e}"));
    let created = create_csv(client, namespace, csv).await;
    let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace);
    wait_for_csv(&api, &created.name_any(), CsvPhase::Succeeded).await
}

pub fn owner_selector(csv: &ClusterServiceVersion) -> String {
    format!(
        "olm.owner={},olm.owner.kind=ClusterServiceVersion,olm.owner.namespace={}",
        csv.name_any(),
        csv.namespace().unwrap_or_default()
    )
}

pub fn controlled_by(meta: &ObjectMeta, csv: &ClusterServiceVersion) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == csv.metadata.uid.as_ref())
}

/// A small CSV: one pause Deployment per name in `deployments`, a service
/// account with a namespaced rule, optional `replaces` and required CRD.
pub fn demo_csv(
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

pub const OWN_NAMESPACE: &[(&str, bool)] = &[
    ("OwnNamespace", true),
    ("SingleNamespace", true),
    ("MultiNamespace", false),
    ("AllNamespaces", false),
];

pub fn own_namespace_group(ns: &str) -> OperatorGroupSpec {
    OperatorGroupSpec {
        target_namespaces: Some(vec![ns.to_owned()]),
        ..OperatorGroupSpec::default()
    }
}

pub fn widget_crd(group: &str) -> CustomResourceDefinition {
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

pub const MULTI_NAMESPACE: &[(&str, bool)] = &[
    ("OwnNamespace", true),
    ("SingleNamespace", true),
    ("MultiNamespace", true),
    ("AllNamespaces", false),
];
