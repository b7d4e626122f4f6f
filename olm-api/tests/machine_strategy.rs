//! The `machine` install strategy keeps OLM's wire shape
//! (`spec.install.strategy` + `spec.install.spec`) and types its details.

use std::path::Path;

use olm_api::{
    manifest,
    v1alpha1::{ClusterServiceVersion, InstallStrategyName},
};

const MACHINE: &str = r#"
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: demo-machine.v1.0.0
spec:
  displayName: Demo on machines
  version: 1.0.0
  installModes:
  - type: OwnNamespace
    supported: true
  install:
    strategy: machine
    spec:
      pool: edge
      hooks:
        configMap: demo-hooks
      config:
        port: "8080"
      hookTimeoutSeconds: 60
"#;

#[test]
fn a_machine_csv_parses_with_typed_details_and_defaults() {
    let csv: ClusterServiceVersion =
        manifest::parse_one(Path::new("machine.yaml"), MACHINE).expect("valid machine CSV");
    assert_eq!(csv.spec.install.name(), InstallStrategyName::Machine);
    assert!(csv.spec.install.deployment().is_none());
    let details = csv.spec.install.machine().expect("machine details");
    assert_eq!(details.pool, "edge");
    assert_eq!(details.hooks.config_map, "demo-hooks");
    assert_eq!(
        details
            .config
            .as_ref()
            .and_then(|c| c.get("port"))
            .map(String::as_str),
        Some("8080")
    );
    assert_eq!(details.hook_timeout_seconds(), 60);
    assert_eq!(details.update_status_interval_seconds(), 300);
}

#[test]
fn the_wire_shape_is_strategy_and_spec() {
    let csv: ClusterServiceVersion =
        manifest::parse_one(Path::new("machine.yaml"), MACHINE).expect("valid machine CSV");
    let json = serde_json::to_value(&csv).expect("serializes");
    assert_eq!(json["spec"]["install"]["strategy"], "machine");
    assert_eq!(json["spec"]["install"]["spec"]["pool"], "edge");
    assert_eq!(
        json["spec"]["install"]["spec"]["hooks"]["configMap"],
        "demo-hooks"
    );
    let back: ClusterServiceVersion = serde_json::from_value(json).expect("reads back");
    assert_eq!(back, csv);
}

#[test]
fn a_machine_strategy_without_a_pool_is_named() {
    let bad = MACHINE.replace("      pool: edge\n", "");
    let text = manifest::parse_one::<ClusterServiceVersion>(Path::new("machine.yaml"), &bad)
        .expect_err("pool is required")
        .to_string();
    assert!(text.contains("machine.yaml") && text.contains("pool"), "{text}");
}

#[test]
fn the_crd_schema_requires_pool_and_hooks_for_machines() {
    let crds = olm_api::crds::render_all();
    let (_, csv) = crds
        .iter()
        .find(|(name, _)| name.starts_with("clusterserviceversions."))
        .expect("the CSV CRD");
    assert!(csv.contains("self.strategy != 'machine'"), "{csv}");
}

#[test]
fn a_deployment_strategy_without_details_has_no_deployments() {
    let csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "bare"},
        "spec": {"displayName": "Bare", "install": {"strategy": "deployment"}},
    }))
    .expect("OLM accepts a deployment strategy without spec");
    assert_eq!(
        csv.spec.install.deployment().map(|d| d.deployments.len()),
        Some(0)
    );
}
