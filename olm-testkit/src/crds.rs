//! OLM's CRDs as the repository ships them in `crds/`.

use std::path::PathBuf;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams},
    runtime::wait::conditions,
};

use crate::{FIELD_MANAGER, repo_root, wait_for};

/// Reads the CRDs the repository ships in `crds/`, sorted by file name.
pub fn repo_crds() -> Vec<CustomResourceDefinition> {
    let dir = repo_root().join("crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("read crds/").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .filter(|path| !path.ends_with("kustomization.yaml"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no CRDs in {}; generate them with `make crds`",
        dir.display()
    );
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).expect("read a CRD file");
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{} is not a CRD: {e}", path.display()))
        })
        .collect()
}

/// Server-side applies every CRD in `crds/` and waits until each is Established. Idempotent, so
/// every test that needs the CRDs calls it.
pub async fn install_crds(client: &Client) -> Vec<CustomResourceDefinition> {
    let crds = repo_crds();
    for crd in &crds {
        install_crd(client, crd).await;
    }
    crds
}

/// Server-side applies `crd` (OLM's, or one a test's operator owns or needs) and waits until it
/// is Established.
pub async fn install_crd(client: &Client, crd: &CustomResourceDefinition) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(crd),
    )
    .await
    .unwrap_or_else(|e| panic!("apply CRD {name}: {e}"));
    wait_for(
        &api,
        &name,
        &format!("CRD {name} is Established"),
        conditions::is_crd_established(),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_crds_are_olms_kinds() {
        let names: Vec<String> = repo_crds().iter().map(|crd| crd.name_any()).collect();
        for kind in [
            "clusterserviceversions.operators.coreos.com",
            "subscriptions.operators.coreos.com",
            "installplans.operators.coreos.com",
            "catalogsources.operators.coreos.com",
            "operatorgroups.operators.coreos.com",
        ] {
            assert!(
                names.iter().any(|n| n == kind),
                "{kind} is not in crds/: {names:?}"
            );
        }
    }
}
