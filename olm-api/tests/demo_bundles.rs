//! The CSVs of the demo catalog (`catalogs/demo-bundles`) are valid.

use std::path::Path;

use olm_api::{manifest, v1alpha1::ClusterServiceVersion};

#[test]
fn demo_csvs_read() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalogs/demo-bundles");
    let mut checked = 0;
    for package in std::fs::read_dir(&root).expect("catalogs/demo-bundles exists") {
        for version in std::fs::read_dir(package.expect("entry").path()).expect("package dir") {
            let manifests = version.expect("entry").path().join("manifests");
            for file in std::fs::read_dir(&manifests).expect("manifests dir") {
                let path = file.expect("entry").path();
                if path.to_string_lossy().ends_with(".clusterserviceversion.yaml") {
                    let csv: ClusterServiceVersion =
                        manifest::read_one(&path).unwrap_or_else(|e| panic!("{e}"));
                    assert!(
                        csv.metadata.name.is_some_and(|n| n.starts_with("demo-")),
                        "{}",
                        path.display()
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 8, "eight demo bundles");
}
