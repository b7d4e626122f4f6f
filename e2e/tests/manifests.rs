//! `manifests/` deploys olm-rs: every object that `kubectl apply -k manifests/`
//! would send is accepted by the API server (server-side dry run), and the
//! kustomization lists only files and bases that exist.

use std::path::{Path, PathBuf};

use kube::{
    Api,
    api::{DynamicObject, GroupVersionKind, Patch, PatchParams},
    discovery::{Discovery, Scope},
};
use olm_testkit::{FIELD_MANAGER, client, dynamic, install_crds, repo_root};

/// Every document of a kustomization, in order, following bases.
fn kustomization_documents(dir: &Path, out: &mut Vec<(PathBuf, serde_json::Value)>) {
    let file = dir.join("kustomization.yaml");
    let kustomization = olm_testkit::yaml_file(&file);
    let resources = kustomization["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{} lists no resources", file.display()));
    for resource in resources {
        let path = dir.join(resource.as_str().expect("a resource is a path"));
        assert!(
            path.exists(),
            "{} names {}, which does not exist",
            file.display(),
            path.display()
        );
        if path.is_dir() {
            kustomization_documents(&path, out);
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable manifest");
        let docs: Vec<Option<serde_json::Value>> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()));
        out.extend(
            docs.into_iter()
                .flatten()
                .filter(|d| !d.is_null())
                .map(|d| (path.clone(), d)),
        );
    }
}

#[tokio::test]
async fn manifests_are_accepted_by_the_api_server() {
    let client = client().await;
    install_crds(&client).await;
    let mut docs = Vec::new();
    kustomization_documents(&repo_root().join("manifests"), &mut docs);
    let mut monitoring = Vec::new();
    kustomization_documents(&repo_root().join("manifests/monitoring"), &mut monitoring);
    assert!(monitoring.iter().all(|(_, d)| d["kind"] == "ServiceMonitor"));

    // Only the groups of manifests/: an aggregated API another test registered and
    // left unavailable must not fail this check.
    let mut groups: Vec<String> = docs
        .iter()
        .map(|(_, d)| {
            let api_version = d["apiVersion"].as_str().unwrap_or_default();
            api_version.rsplit_once('/').map_or("", |(g, _)| g).to_owned()
        })
        .collect();
    groups.sort();
    groups.dedup();
    let group_names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let discovery = Discovery::new(client.clone())
        .filter(&group_names)
        .run()
        .await
        .expect("API discovery");
    // Forced: objects other tests or tools applied before must not make the check fail.
    let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    let mut kinds = Vec::new();
    for (path, doc) in docs {
        let object: DynamicObject = dynamic(doc, &path.display().to_string());
        let types = object.types.clone().expect("apiVersion and kind");
        let gvk = GroupVersionKind::try_from(&types).expect("a valid apiVersion");
        let (resource, capabilities) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("{}: the API server does not serve {gvk:?}", path.display()));
        let name = object.metadata.name.clone().expect("every manifest is named");
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => {
                let namespace =
                    object.metadata.namespace.clone().unwrap_or_else(|| {
                        panic!("{}: {} {name} has no namespace", path.display(), types.kind)
                    });
                Api::namespaced_with(client.clone(), &namespace, &resource)
            }
        };
        // Namespaces are created for real so that the dry run of what lives
        // in them can be checked; everything else is only validated.
        let params = if types.kind == "Namespace" {
            PatchParams::apply(FIELD_MANAGER).force()
        } else {
            params.clone()
        };
        api.patch(&name, &params, &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("{}: {} {name} is refused: {e}", path.display(), types.kind));
        kinds.push(types.kind);
    }
    for kind in [
        "Deployment",
        "PodDisruptionBudget",
        "ClusterRole",
        "OperatorGroup",
        "CatalogSource",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "manifests/ has no {kind}");
    }
    println!(
        "manifests: {} objects accepted by a server-side dry run",
        kinds.len()
    );
}
