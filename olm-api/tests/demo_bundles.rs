//! The CSVs of the demo catalog (`catalogs/demo-bundles`) are valid, and so are
//! the relation endpoints they declare.

use std::path::Path;

use olm_api::{endpoints::Endpoints, labels, manifest, v1alpha1::ClusterServiceVersion};

#[test]
fn demo_csvs_read() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalogs/demo-bundles");
    let mut checked = 0;
    let mut declared = Vec::new();
    for package in std::fs::read_dir(&root).expect("catalogs/demo-bundles exists") {
        for version in std::fs::read_dir(package.expect("entry").path()).expect("package dir") {
            let manifests = version.expect("entry").path().join("manifests");
            for file in std::fs::read_dir(&manifests).expect("manifests dir") {
                let path = file.expect("entry").path();
                if path.to_string_lossy().ends_with(".clusterserviceversion.yaml") {
                    let csv: ClusterServiceVersion =
                        manifest::read_one(&path).unwrap_or_else(|e| panic!("{e}"));
                    let name = csv.metadata.name.clone().unwrap_or_default();
                    assert!(name.starts_with("demo-"), "{}", path.display());
                    if let Some(text) = csv
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(labels::ENDPOINTS))
                    {
                        let endpoints = Endpoints::parse(&name, text).unwrap_or_else(|e| panic!("{e}"));
                        declared.push((name, endpoints));
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 10, "ten demo bundles");
    // The relation the demo makes: demo-store provides what demo-shop requires.
    let interface = |csv: &str, endpoint: &str| {
        let (_, endpoints) = declared
            .iter()
            .find(|(name, _)| name == csv)
            .unwrap_or_else(|| panic!("{csv} declares endpoints"));
        let (role, declared) = endpoints
            .get(endpoint)
            .unwrap_or_else(|| panic!("{csv} has {endpoint}"));
        (role, declared.interface.clone())
    };
    let (provides, offered) = interface("demo-store.v1.0.0", "db");
    let (requires, wanted) = interface("demo-shop.v1.0.0", "database");
    assert_eq!((provides.as_str(), requires.as_str()), ("provides", "requires"));
    assert_eq!(offered, wanted);
}
