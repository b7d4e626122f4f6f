//! PackageManifests of corpus catalogs, compared field by field with the CSVs
//! the community pipeline built them from.

use std::path::{Path, PathBuf};

use olm_api::packages::{PackageManifest, labels};
use olm_catalog::Catalog;
use serde_json::{Value, json};

use super::{
    describe::{channel_head, head_csvs},
    manifest::{CatalogInfo, package_manifests},
};
use crate::bundles::strip_manifests;

fn info() -> CatalogInfo {
    CatalogInfo {
        namespace: "olm".into(),
        name: "community".into(),
        display_name: "Community Operators".into(),
        publisher: "Red Hat".into(),
        labels: [("team".to_owned(), "a".to_owned())].into(),
        created: None,
    }
}

/// The PackageManifests of a corpus catalog, built as the store keeps it:
/// descriptions taken first, manifests dropped.
fn manifests(dir: &Path) -> (Catalog, Vec<PackageManifest>) {
    let mut catalog = olm_catalog::fbc::load_dir(dir).expect("the corpus catalog loads");
    let full = catalog.clone();
    let heads = head_csvs(&catalog);
    strip_manifests(&mut catalog);
    (full, package_manifests(&info(), &catalog, &heads))
}

fn corpus() -> PathBuf {
    olm_testkit::corpus_dir()
}

/// The CSV of `package` at `version` in the corpus' bundle directories.
fn corpus_csv(package: &str, version: &str) -> Value {
    let dir = corpus()
        .join("bundles")
        .join(package)
        .join(version)
        .join("manifests");
    let path = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".clusterserviceversion.yaml"))
        .expect("a CSV");
    olm_testkit::yaml_file(&path)
}

/// Checks `channel.currentCSVDesc` against the CSV, field by field.
fn assert_describes(desc: &Value, csv: &Value, what: &str) {
    let spec = &csv["spec"];
    for (field, from) in [
        ("displayName", &spec["displayName"]),
        ("description", &spec["description"]),
        ("version", &spec["version"]),
        ("provider", &spec["provider"]),
        ("keywords", &spec["keywords"]),
        ("maintainers", &spec["maintainers"]),
        ("links", &spec["links"]),
        ("maturity", &spec["maturity"]),
        ("installModes", &spec["installModes"]),
        ("minKubeVersion", &spec["minKubeVersion"]),
        ("customresourcedefinitions", &spec["customresourcedefinitions"]),
        ("annotations", &csv["metadata"]["annotations"]),
    ] {
        if from.is_null() {
            continue;
        }
        assert_eq!(&desc[field], from, "{what}: currentCSVDesc.{field}");
    }
}

#[test]
fn a_current_catalog_renders_as_olm_does() {
    let (full, manifests) = manifests(&corpus().join("fbc/v4.21/kube-green"));
    assert_eq!(manifests.len(), 1);
    let manifest = &manifests[0];
    let json = serde_json::to_value(manifest).unwrap();
    let status = &json["status"];
    assert_eq!(status["packageName"], "kube-green");
    assert_eq!(status["catalogSource"], "community");
    assert_eq!(status["catalogSourceNamespace"], "olm");
    assert_eq!(status["catalogSourceDisplayName"], "Community Operators");
    assert_eq!(status["catalogSourcePublisher"], "Red Hat");
    assert_eq!(status["defaultChannel"], "alpha");
    let channel = &status["channels"][0];
    assert_eq!(channel["name"], "alpha");
    let alpha = full
        .channels_of("kube-green")
        .find(|c| c.name == "alpha")
        .unwrap();
    let head = channel_head(alpha).expect("alpha has a head");
    assert_eq!(channel["currentCSV"], head);
    let version = head.trim_start_matches("kube-green.v");
    let csv = corpus_csv("kube-green", version);
    assert_describes(&channel["currentCSVDesc"], &csv, head);
    assert_eq!(status["provider"], csv["spec"]["provider"]);
    assert!(
        channel["currentCSVDesc"].get("icon").is_none(),
        "icons are left out"
    );
    assert!(
        !channel["currentCSVDesc"]["relatedImages"]
            .as_array()
            .unwrap()
            .is_empty(),
        "related images come from the bundle"
    );

    // Every bundle of the channel, newest first.
    let entries = channel["entries"].as_array().unwrap();
    assert_eq!(entries.len(), alpha.entries.len());
    assert_eq!(entries[0]["name"], head);
    assert_eq!(entries[0]["version"], version);
    let versions: Vec<semver::Version> = entries
        .iter()
        .map(|e| semver::Version::parse(e["version"].as_str().unwrap()).unwrap())
        .collect();
    assert!(versions.windows(2).all(|w| w[0] > w[1]), "{versions:?}");

    let labels = manifest.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[labels::CATALOG], "community");
    assert_eq!(labels[labels::CATALOG_NAMESPACE], "olm");
    assert_eq!(labels["team"], "a", "the CatalogSource's labels");
    assert_eq!(labels[labels::PROVIDER], csv["spec"]["provider"]["name"]);
    assert_eq!(labels[labels::DEFAULT_OS], "supported");
    assert_eq!(labels[labels::DEFAULT_ARCH], "supported");
    assert_eq!(manifest.metadata.name.as_deref(), Some("kube-green"));
    assert_eq!(manifest.metadata.namespace.as_deref(), Some("olm"));
}

#[test]
fn an_older_catalog_is_described_from_its_csv_objects() {
    let (full, manifests) = manifests(&corpus().join("fbc/v4.16-bundle-object/kube-green"));
    let json = serde_json::to_value(&manifests[0]).unwrap();
    let channel = &json["status"]["channels"][0];
    let head = channel["currentCSV"].as_str().unwrap();
    // The CSV object in the catalog is the source; it must come through whole.
    let csv = full
        .bundle("kube-green", head)
        .unwrap()
        .properties
        .iter()
        .find_map(|p| match p {
            olm_catalog::Property::BundleObject(o) => {
                o.decode().ok().filter(|v| v["kind"] == "ClusterServiceVersion")
            }
            _ => None,
        })
        .expect("the head carries its CSV");
    assert_describes(&channel["currentCSVDesc"], &csv, head);
    assert_eq!(
        channel["currentCSVDesc"]["version"], csv["spec"]["version"],
        "the version"
    );
}

#[test]
fn every_corpus_package_has_a_manifest_with_every_channel() {
    for dir in ["fbc/v4.21", "fbc/v4.16-bundle-object"] {
        for entry in std::fs::read_dir(corpus().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let (full, manifests) = manifests(&path);
            for package in &full.packages {
                let manifest = manifests
                    .iter()
                    .find(|m| m.status.package_name == package.name)
                    .unwrap_or_else(|| panic!("{}: no manifest for {}", path.display(), package.name));
                let channels: Vec<&str> = manifest.status.channels.iter().map(|c| c.name.as_str()).collect();
                let mut expected: Vec<&str> = full
                    .channels_of(&package.name)
                    .filter(|c| channel_head(c).is_some())
                    .map(|c| c.name.as_str())
                    .collect();
                expected.sort_unstable();
                assert_eq!(channels, expected, "{}", package.name);
                for channel in &manifest.status.channels {
                    assert!(
                        !channel.current_csv_desc.display_name.is_empty(),
                        "{}/{}: the head {} is described",
                        package.name,
                        channel.name,
                        channel.current_csv
                    );
                }
                let default = &manifest.status.default_channel;
                assert!(
                    channels.contains(&default.as_str()),
                    "{}: default {default}",
                    package.name
                );
            }
        }
    }
}

#[test]
fn deprecations_and_deprecated_bundles_show_as_olm_shows_them() {
    let fbc = r#"
{"schema":"olm.package","name":"db","defaultChannel":"stable"}
{"schema":"olm.channel","package":"db","name":"stable","entries":[{"name":"db.v1.0.0"},{"name":"db.v1.1.0","replaces":"db.v1.0.0"},{"name":"db.v1.2.0","replaces":"db.v1.1.0"}]}
{"schema":"olm.channel","package":"db","name":"fork","entries":[{"name":"db.v1.0.0"},{"name":"db.v1.1.0"}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.0.0","image":"db:1.0.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.0.0"}},{"type":"olm.deprecated","value":{}}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.1.0","image":"db:1.1.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.1.0"}}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.2.0","image":"db:1.2.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.2.0"}},{"type":"olm.csv.metadata","value":{"displayName":"DB","provider":{"name":"Acme","url":"https://acme.example"},"labels":{"operatorframework.io/arch.arm64":"supported"}}}]}
{"schema":"olm.deprecations","package":"db","entries":[{"reference":{"schema":"olm.package"},"message":"db is old"},{"reference":{"schema":"olm.channel","name":"stable"},"message":"use fast"},{"reference":{"schema":"olm.bundle","name":"db.v1.1.0"},"message":"1.1 is broken"}]}
"#;
    let mut catalog = olm_catalog::fbc::parse_str(Path::new("db.json"), fbc).unwrap();
    let heads = head_csvs(&catalog);
    strip_manifests(&mut catalog);
    let manifests = package_manifests(&info(), &catalog, &heads);
    let json = serde_json::to_value(&manifests[0]).unwrap();
    let status = &json["status"];
    assert_eq!(status["deprecation"], json!({"message": "db is old"}));
    // The forked channel has two heads: OLM's registry serves none, so it is left out.
    assert_eq!(status["channels"].as_array().unwrap().len(), 1);
    let stable = &status["channels"][0];
    assert_eq!(stable["deprecation"], json!({"message": "use fast"}));
    assert_eq!(
        stable["entries"],
        json!([
            {"name": "db.v1.2.0", "version": "1.2.0"},
            {"name": "db.v1.1.0", "version": "1.1.0", "deprecation": {"message": "1.1 is broken"}},
        ]),
        "newest first; the olm.deprecated bundle is left out"
    );
    assert_eq!(stable["currentCSVDesc"]["displayName"], "DB");
    assert_eq!(
        status["provider"],
        json!({"name": "Acme", "url": "https://acme.example"})
    );
    let labels = manifests[0].metadata.labels.as_ref().unwrap();
    assert_eq!(labels[labels::PROVIDER_URL], "https://acme.example");
    assert_eq!(labels["operatorframework.io/arch.arm64"], "supported");
    assert!(
        !labels.contains_key(labels::DEFAULT_ARCH),
        "the CSV names an arch: no default"
    );
    assert_eq!(labels[labels::DEFAULT_OS], "supported");
}
