//! Bad input gives an error that names the file and the field, never a panic.

use std::path::Path;

use olm_api::{
    manifest::{self, ManifestError},
    v1alpha1::{ClusterServiceVersion, CsvPhase, InstallModeType},
};

const GOOD: &str = r#"
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: demo.v1.0.0
spec:
  displayName: Demo
  version: 1.0.0
  installModes:
  - type: OwnNamespace
    supported: true
  - type: AllNamespaces
    supported: false
  install:
    strategy: deployment
    spec:
      deployments:
      - name: demo
        spec:
          selector: {matchLabels: {app: demo}}
          template:
            metadata: {labels: {app: demo}}
            spec: {containers: [{name: demo, image: registry.k8s.io/pause:3.10}]}
status:
  phase: Succeeded
  reason: InstallSucceeded
"#;

#[test]
fn a_good_csv_reads() {
    let csv: ClusterServiceVersion = manifest::parse_one(Path::new("demo.yaml"), GOOD).expect("valid CSV");
    assert_eq!(csv.spec.display_name, "Demo");
    assert_eq!(
        csv.supported_install_modes().collect::<Vec<_>>(),
        vec![InstallModeType::OwnNamespace]
    );
    assert_eq!(
        csv.status.as_ref().and_then(|s| s.phase),
        Some(CsvPhase::Succeeded)
    );
    let json = serde_json::to_value(&csv).expect("serializes");
    assert_eq!(json["status"]["reason"], "InstallSucceeded");
}

#[test]
fn a_wrong_field_is_named() {
    let bad = GOOD.replace("strategy: deployment", "strategy: helm");
    let err = manifest::parse_one::<ClusterServiceVersion>(Path::new("bundle/demo.csv.yaml"), &bad)
        .expect_err("unknown strategy");
    let text = err.to_string();
    assert!(matches!(err, ManifestError::Field { .. }), "{text}");
    assert!(text.contains("bundle/demo.csv.yaml"), "{text}");
    assert!(text.contains("spec.install.strategy"), "{text}");
    assert!(text.contains("helm"), "{text}");
}

#[test]
fn a_missing_required_field_is_named() {
    let bad = GOOD.replace("  displayName: Demo\n", "");
    let text = manifest::parse_one::<ClusterServiceVersion>(Path::new("demo.yaml"), &bad)
        .expect_err("displayName is required")
        .to_string();
    assert!(
        text.contains("demo.yaml") && text.contains("displayName"),
        "{text}"
    );
}

#[test]
fn a_wrong_type_deep_inside_is_named() {
    let bad = GOOD.replace("supported: true", "supported: [yes]");
    let text = manifest::parse_one::<ClusterServiceVersion>(Path::new("demo.yaml"), &bad)
        .expect_err("supported is a bool")
        .to_string();
    assert!(text.contains("spec.installModes[0].supported"), "{text}");
}

#[test]
fn broken_yaml_names_file_and_line() {
    let bad = GOOD.replace("  displayName: Demo", "  displayName: [Demo");
    let err =
        manifest::parse_one::<ClusterServiceVersion>(Path::new("demo.yaml"), &bad).expect_err("not YAML");
    let text = err.to_string();
    assert!(matches!(err, ManifestError::Syntax { .. }), "{text}");
    assert!(text.contains("demo.yaml") && text.contains("line"), "{text}");
}

#[test]
fn a_missing_file_is_named() {
    let err = manifest::read_one::<ClusterServiceVersion>(Path::new("/nonexistent/csv.yaml"))
        .expect_err("no such file");
    assert!(err.to_string().contains("/nonexistent/csv.yaml"));
}
