//! Bundles whose CRDs are `apiextensions.k8s.io/v1beta1` (3scale-community-operator,
//! t8c, cockroachdb, prometheus ... in the corpus), which Kubernetes no longer
//! serves: an InstallPlan writes them as `v1`. The API server accepts the CRDs
//! of the scale bench's 3scale-community-operator and t8c written so
//! (server-side dry run); where it refuses another corpus CRD, it is for the
//! CRD's own schema or group (a schema `v1` requires to be structural, a
//! `*.k8s.io` group without its approval annotation), never for a field the
//! conversion writes.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use olm_testkit::{FIELD_MANAGER, client, corpus_dir, yaml_file};

/// Every `v1beta1` CRD file of the corpus's bundles, with its path.
fn v1beta1_crds() -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    let bundles = corpus_dir().join("bundles");
    for package in std::fs::read_dir(&bundles).expect("the corpus's bundles") {
        let package = package.expect("a package directory").path();
        let Ok(versions) = std::fs::read_dir(&package) else {
            continue;
        };
        for version in versions {
            let manifests = version.expect("a bundle directory").path().join("manifests");
            let Ok(files) = std::fs::read_dir(&manifests) else {
                continue;
            };
            for file in files {
                let path = file.expect("a manifest").path();
                if path.extension().is_none_or(|e| e != "yaml" && e != "yml") {
                    continue;
                }
                let doc = yaml_file(&path);
                if doc["apiVersion"] == "apiextensions.k8s.io/v1beta1" {
                    out.push((path.display().to_string(), doc));
                }
            }
        }
    }
    out
}

#[tokio::test]
async fn v1beta1_crds_as_v1_are_refused_only_for_their_own_content() {
    let crds = v1beta1_crds();
    assert!(
        crds.len() >= 10,
        "the corpus has v1beta1 CRDs (3scale, t8c ...): found {}",
        crds.len()
    );
    let client = client().await;
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    let mut refused = Vec::new();
    for (path, doc) in &crds {
        let mut crd = catalog_operator::controllers::plan::crd_v1::upgrade(doc.clone());
        crd.as_object_mut().map(|o| o.remove("status"));
        let name = crd["metadata"]["name"]
            .as_str()
            .expect("a CRD has a name")
            .to_owned();
        if let Err(e) = api.patch(&name, &params, &Patch::Apply(&crd)).await {
            refused.push(format!("{path}: {e}"));
        }
    }
    eprintln!(
        "{} of {} v1beta1 CRDs refused as v1, for their own content:\n{}",
        refused.len(),
        crds.len(),
        refused.join("\n")
    );
    for line in &refused {
        assert!(
            !SCALE_BENCH_BUNDLES.iter().any(|b| line.contains(b)),
            "a CRD of the scale bench's operators is refused: {line}"
        );
        for written in CONVERSION_FIELDS {
            assert!(
                !line.contains(written),
                "refused for a field the conversion writes ({written}): {line}"
            );
        }
    }
}

/// The bundles the scale bench installs that ship v1beta1 CRDs.
const SCALE_BENCH_BUNDLES: [&str; 2] = ["3scale-community-operator/0.6.0/", "t8c/8.0.0/"];

/// What the conversion writes, as the API server names it in a refusal.
const CONVERSION_FIELDS: [&str; 2] = ["preserveUnknownFields", "x-kubernetes-preserve-unknown-fields"];
