//! Test fixtures: objects from small YAML snippets, and real CSVs from the
//! corpus of OperatorHub bundles (`$OLM_RS_CORPUS`, or `../shared/corpus`
//! beside the workspace).

use std::{collections::BTreeMap, path::Path};

use k8s_openapi::{
    api::core::v1::ServiceAccount,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::api::ApiResource;
use olm_api::{manifest, v1::OperatorGroup, v1alpha1::ClusterServiceVersion};

use super::{
    dereference::Dereferenced,
    validate::{Membership, Targets},
};

/// The namespace every fixture lives in.
pub const NAMESPACE: &str = "operators";

/// A CSV from YAML, with a namespace and uid as the API server would give it.
pub fn csv(yaml: &str) -> ClusterServiceVersion {
    let mut csv: ClusterServiceVersion =
        manifest::parse_one(Path::new("fixture.yaml"), yaml).unwrap_or_else(|e| panic!("{e}"));
    stamp(&mut csv);
    csv
}

/// A CSV from the corpus, e.g. `bundles/etcd/0.9.4/manifests/etcdoperator.v0.9.4.clusterserviceversion.yaml`.
pub fn corpus_csv(relative: &str) -> ClusterServiceVersion {
    let path = corpus_dir().join(relative);
    let mut csv: ClusterServiceVersion = manifest::read_one(&path).unwrap_or_else(|e| panic!("{e}"));
    stamp(&mut csv);
    csv
}

fn stamp(csv: &mut ClusterServiceVersion) {
    csv.metadata.namespace = Some(NAMESPACE.to_owned());
    csv.metadata.uid = Some("00000000-0000-0000-0000-00000000c5c5".to_owned());
}

/// The corpus directory; panics, saying how to point at it, when it is absent.
pub use olm_testkit::corpus_dir;

/// An OperatorGroup from YAML (in [`NAMESPACE`]).
pub fn operator_group(yaml: &str) -> OperatorGroup {
    // The API server defaults a missing spec to `{}`; so do the fixtures.
    let yaml = if yaml.contains("\nspec:") {
        yaml.to_owned()
    } else {
        format!("{yaml}\nspec: {{}}\n")
    };
    let mut group: OperatorGroup =
        manifest::parse_one(Path::new("group.yaml"), &yaml).unwrap_or_else(|e| panic!("{e}"));
    group.metadata.namespace = Some(NAMESPACE.to_owned());
    group
}

/// A CRD `name` serving `versions`, Established or not.
pub fn crd(name: &str, versions: &[&str], established: bool) -> CustomResourceDefinition {
    let (plural, group) = name.split_once('.').unwrap_or((name, "example.com"));
    let status = if established { "True" } else { "False" };
    let versions: Vec<serde_json::Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| serde_json::json!({"name": v, "served": true, "storage": i == 0}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "kind": "Thing"},
            "versions": versions,
        },
        "status": {
            "conditions": [
                {"type": "NamesAccepted", "status": "True"},
                {"type": "Established", "status": status},
            ],
        },
    }))
    .expect("a valid CRD")
}

/// A service account `name` in [`NAMESPACE`].
pub fn service_account(name: &str) -> ServiceAccount {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}")},
    }))
    .expect("a valid service account")
}

/// What dereference would find: these CRDs and service accounts, and one
/// OperatorGroup selecting `namespaces`.
pub fn found(
    crds: Vec<CustomResourceDefinition>,
    accounts: Vec<ServiceAccount>,
    namespaces: &[&str],
) -> Dereferenced {
    let list: Vec<String> = namespaces.iter().map(|ns| format!("\"{ns}\"")).collect();
    Dereferenced {
        operator_groups: vec![operator_group(&format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: og}}\nstatus: {{namespaces: [{}]}}\n",
            list.join(", ")
        ))],
        crds: crds
            .into_iter()
            .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
            .collect(),
        service_accounts: accounts
            .into_iter()
            .map(|a| (a.metadata.name.clone().unwrap_or_default(), a))
            .collect(),
        server_version: Some(semver::Version::new(1, 36, 3)),
        ..Dereferenced::default()
    }
}

/// A membership in OperatorGroup `og` of [`NAMESPACE`] with `targets`.
pub fn membership(targets: Targets) -> Membership {
    Membership {
        operator_group: "og".to_owned(),
        operator_namespace: NAMESPACE.to_owned(),
        targets,
        service_account: None,
        fail_forward: false,
    }
}

/// A minimal CSV with one Deployment and the given install modes and extra spec.
pub fn small_csv(install_modes: &str, extra_spec: &str) -> ClusterServiceVersion {
    csv(&format!(
        r#"
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: demo.v1.0.0
  annotations: {{capabilities: Basic Install}}
spec:
  displayName: Demo
  version: 1.0.0
  installModes: {install_modes}
  install:
    strategy: deployment
    spec:
      deployments:
      - name: demo
        label: {{app.kubernetes.io/name: demo}}
        spec:
          selector: {{matchLabels: {{app: demo}}}}
          template:
            metadata: {{labels: {{app: demo}}, annotations: {{own: kept}}}}
            spec:
              serviceAccountName: demo
              containers: [{{name: manager, image: registry.k8s.io/pause:3.10}}]
      permissions:
      - serviceAccountName: demo
        rules: [{{apiGroups: [""], resources: [configmaps], verbs: [get]}}]
{extra_spec}
"#
    ))
}

/// Install modes: all four, with `supported` ones true.
pub fn modes(supported: &[&str]) -> String {
    let all = [
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
        "AllNamespaces",
    ];
    let entries: Vec<String> = all
        .iter()
        .map(|mode| format!("{{type: {mode}, supported: {}}}", supported.contains(mode)))
        .collect();
    format!("[{}]", entries.join(", "))
}

/// Live copies as the stores would hold them: hashes and foreign fields by
/// kind and name, and the objects labelled for a CSV.
#[derive(Default)]
pub struct Copies {
    /// The desired hash each object carries, by kind and name.
    pub hashes: BTreeMap<(String, String), String>,
    /// The fields other writers own, by kind and name.
    pub foreign: BTreeMap<(String, String), Vec<crate::fields::Path>>,
    /// The objects labelled for the CSV, by kind.
    pub labelled: Vec<(String, crate::fields::Key)>,
}

impl Copies {
    /// Records that the live copy of `desired` carries its hash.
    pub fn carry(&mut self, desired: &olm_runtime::effects::Desired) {
        let key = (desired.resource.kind.clone(), desired.name().to_owned());
        self.hashes
            .insert(key, desired.hash().unwrap_or_default().to_owned());
    }
}

impl olm_runtime::effects::Live for Copies {
    fn desired_hash(&self, resource: &ApiResource, _: Option<&str>, name: &str) -> Option<String> {
        self.hashes
            .get(&(resource.kind.clone(), name.to_owned()))
            .cloned()
    }
}

impl crate::fields::LiveCopies for Copies {
    fn foreign_fields(
        &self,
        resource: &ApiResource,
        _: Option<&str>,
        name: &str,
    ) -> Vec<crate::fields::Path> {
        let key = (resource.kind.clone(), name.to_owned());
        self.foreign.get(&key).cloned().unwrap_or_default()
    }

    fn labelled(&self, resource: &ApiResource, _: &BTreeMap<String, String>) -> Vec<crate::fields::Key> {
        self.labelled
            .iter()
            .filter(|(kind, _)| *kind == resource.kind)
            .map(|(_, key)| key.clone())
            .collect()
    }
}
