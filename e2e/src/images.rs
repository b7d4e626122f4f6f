//! Bundle images built from bundle directories, pushed to a registry, and a
//! file-based catalog in the community pipeline's shape that refers to them by
//! digest (`olm.csv.metadata` only, no `olm.bundle.object`).
//!
//! A bundle image is what a `bundle.Dockerfile` builds: one layer with
//! `manifests/` and `metadata/`, and the annotations of `metadata/annotations.yaml`
//! as image labels. A catalog image holds the file-based catalog under
//! `/configs`, one directory per package, as community catalog images do.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use olm_catalog::{
    Catalog,
    bundle::{bundle_root, load_bundle_dir},
    render::{RenderOptions, render_bundle_dir, render_package_dir},
};
use olm_oci::{DockerConfig, Puller};

/// The files of an image: path in the image, content.
pub type ImageFiles = Vec<(PathBuf, Vec<u8>)>;

/// The files of a bundle image and its labels.
pub fn bundle_image_content(version_dir: &Path) -> Result<(ImageFiles, BTreeMap<String, String>), String> {
    let root = bundle_root(version_dir)
        .ok_or_else(|| format!("{} is not a bundle directory", version_dir.display()))?;
    let mut files = Vec::new();
    for sub in ["manifests", "metadata"] {
        let dir = root.join(sub);
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        entries.sort();
        for path in entries {
            let content = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            files.push((
                Path::new(sub).join(path.file_name().expect("a file name")),
                content,
            ));
        }
    }
    #[derive(serde::Deserialize)]
    struct Annotations {
        annotations: BTreeMap<String, String>,
    }
    let annotations_path = root.join("metadata/annotations.yaml");
    let text = std::fs::read_to_string(&annotations_path)
        .map_err(|e| format!("{}: {e}", annotations_path.display()))?;
    let labels = serde_saphyr::from_str::<Annotations>(&text)
        .map_err(|e| format!("{}: {e}", annotations_path.display()))?
        .annotations;
    Ok((files, labels))
}

/// Builds the bundle image of `version_dir`, pushes it as `repository:tag`, and
/// returns `repository@digest`.
pub async fn push_bundle_image(
    puller: &Puller,
    version_dir: &Path,
    repository: &str,
    tag: &str,
    secrets: &DockerConfig,
) -> Result<String, String> {
    let (files, labels) = bundle_image_content(version_dir)?;
    let (layer, diff_id) = olm_oci::tar_gz_layer(&files).map_err(|e| e.to_string())?;
    let digest = puller
        .push_one_layer(&format!("{repository}:{tag}"), layer, &diff_id, &labels, secrets)
        .await
        .map_err(|e| e.to_string())?;
    Ok(format!("{repository}@{digest}"))
}

/// The catalog of a package directory whose bundles are images pushed under
/// `repository_prefix/<package>` (one tag per version), rendered as `opm render`
/// renders bundle images: the image by digest and `olm.csv.metadata`.
pub async fn image_catalog(
    puller: &Puller,
    package_dir: &Path,
    repository_prefix: &str,
    secrets: &DockerConfig,
) -> Result<Catalog, String> {
    let mut catalog = render_package_dir(package_dir)
        .map_err(|e| e.to_string())?
        .catalog;
    let mut dirs = BTreeMap::new();
    for entry in std::fs::read_dir(package_dir).map_err(|e| format!("{}: {e}", package_dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if bundle_root(&path).is_some() {
            let bundle = load_bundle_dir(&path).map_err(|e| e.to_string())?;
            dirs.insert(bundle.name().to_owned(), path);
        }
    }
    for bundle in &mut catalog.bundles {
        let dir = dirs
            .get(&bundle.name)
            .ok_or_else(|| format!("no directory for bundle {}", bundle.name))?;
        let tag = bundle
            .version()
            .map(|v| v.to_string())
            .unwrap_or_else(|| bundle.name.clone());
        let repository = format!("{repository_prefix}/{}", bundle.package);
        let image = push_bundle_image(puller, dir, &repository, &tag, secrets).await?;
        let rendered =
            render_bundle_dir(dir, &RenderOptions::image(image.clone())).map_err(|e| e.to_string())?;
        bundle.image = image;
        bundle.properties = rendered.properties;
    }
    Ok(catalog)
}

/// The label naming the file-based catalog directory of a catalog image.
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";

/// The part of `catalog` that is about `package`.
fn package_part(catalog: &Catalog, package: &str) -> Catalog {
    Catalog {
        packages: catalog
            .packages
            .iter()
            .filter(|p| p.name == package)
            .cloned()
            .collect(),
        channels: catalog
            .channels
            .iter()
            .filter(|c| c.package == package)
            .cloned()
            .collect(),
        bundles: catalog
            .bundles
            .iter()
            .filter(|b| b.package == package)
            .cloned()
            .collect(),
        deprecations: catalog
            .deprecations
            .iter()
            .filter(|d| d.package == package)
            .cloned()
            .collect(),
        others: Vec::new(),
    }
}

/// The files of a catalog image in the community pipeline's shape: one
/// directory per package under `/configs`, each with a `catalog.json`.
pub fn catalog_image_content(catalog: &Catalog) -> ImageFiles {
    catalog
        .packages
        .iter()
        .map(|package| {
            let part = package_part(catalog, &package.name);
            (
                PathBuf::from(format!("configs/{}/catalog.json", package.name)),
                olm_catalog::fbc::to_json_stream(&part).into_bytes(),
            )
        })
        .collect()
}

/// Builds a catalog image of `catalog` (file-based catalog under `/configs`,
/// with the label that names it), pushes it as `image` (`repository:tag`), and
/// returns the digest of its manifest.
pub async fn push_catalog_image(
    puller: &Puller,
    catalog: &Catalog,
    image: &str,
    secrets: &DockerConfig,
) -> Result<String, String> {
    let files = catalog_image_content(catalog);
    let (layer, diff_id) = olm_oci::tar_gz_layer(&files).map_err(|e| e.to_string())?;
    let labels = BTreeMap::from([(CONFIGS_LABEL.to_owned(), "/configs".to_owned())]);
    puller
        .push_one_layer(image, layer, &diff_id, &labels, secrets)
        .await
        .map_err(|e| e.to_string())
}

/// The test registry of `hack/registry.sh`.
pub struct TestRegistry {
    /// `127.0.0.1:<port>`.
    pub address: String,
    /// The credentials of its `private/` repositories.
    pub secrets: DockerConfig,
    /// The same as the content of a `kubernetes.io/dockerconfigjson` Secret.
    pub docker_config_json: String,
}

/// The test registry of `hack/registry.sh` (started when none runs in
/// `OLM_RS_REGISTRY_DIR`).
pub fn test_registry() -> TestRegistry {
    let script = olm_testkit::repo_root().join("hack/registry.sh");
    let run = |arg: &str| {
        let out = std::process::Command::new(&script)
            .arg(arg)
            .output()
            .unwrap_or_else(|e| panic!("running {} {arg}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} {arg} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run("up");
    let env = run("env");
    let value = |key: &str| {
        env.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("hack/registry.sh env gives no {key}: {env}"))
            .to_owned()
    };
    let address = value("OLM_RS_REGISTRY");
    let auth = format!(
        r#"{{"auths": {{"{address}": {{"username": "{}", "password": "{}"}}}}}}"#,
        value("OLM_RS_REGISTRY_USER"),
        value("OLM_RS_REGISTRY_PASSWORD")
    );
    let secrets = DockerConfig::parse(auth.as_bytes()).expect("credentials of the test registry");
    TestRegistry {
        address,
        secrets,
        docker_config_json: auth,
    }
}
