//! Property tests of a CSV's validation on generated input, through the same pure steps the
//! controller takes: the object as the API server would hand it (JSON), `validate` against an
//! OperatorGroup, the webhook check, the build of the install's objects and the Subscription
//! overrides. The input is a small valid CSV (two Deployments, permissions, cluster
//! permissions, a webhook, an owned CRD) with fields removed, values of other types, odd
//! install strategies, huge strings and deep nesting.
//!
//! The properties: nothing panics; each rejection has a message, and a rejected Deployment is
//! named in it; what deserializes serializes back to the same CSV; what validates builds.

use olm_api::{v1::OperatorGroup, v1alpha1::ClusterServiceVersion};
use olm_operator::controllers::csv::{build, dereference::Dereferenced, overrides, validate, webhooks};
use proptest::prelude::*;
use serde_json::{Value, json};

const NAMESPACE: &str = "operators";

fn deployment(name: &str) -> Value {
    json!({"name": name, "label": {"app": name}, "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {
            "serviceAccountName": "etcd-operator",
            "containers": [{"name": "op", "image": "quay.io/example/etcd:0.9",
                            "ports": [{"containerPort": 8443}],
                            "env": [{"name": "WATCH", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}}]}]}}}})
}

fn valid_csv() -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "etcd.v0.9.2", "namespace": NAMESPACE, "uid": "0000-1111",
                     "annotations": {"olm.targetNamespaces": NAMESPACE}},
        "spec": {
            "displayName": "etcd", "version": "0.9.2", "minKubeVersion": "1.20.0",
            "installModes": [{"type": "OwnNamespace", "supported": true},
                             {"type": "SingleNamespace", "supported": true},
                             {"type": "AllNamespaces", "supported": false}],
            "customresourcedefinitions": {"owned": [
                {"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster"}]},
            "install": {"strategy": "deployment", "spec": {
                "deployments": [deployment("etcd-operator"), deployment("etcd-webhook")],
                "permissions": [{"serviceAccountName": "etcd-operator", "rules": [
                    {"apiGroups": ["etcd.database.coreos.com"], "resources": ["etcdclusters"], "verbs": ["*"]},
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}],
                "clusterPermissions": [{"serviceAccountName": "etcd-operator", "rules": [
                    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}]}},
            "webhookdefinitions": [{
                "generateName": "vetcd.example.com", "type": "ValidatingAdmissionWebhook",
                "deploymentName": "etcd-webhook", "containerPort": 8443,
                "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                "webhookPath": "/validate",
                "rules": [{"apiGroups": ["etcd.database.coreos.com"], "apiVersions": ["v1beta2"],
                           "operations": ["CREATE", "UPDATE"], "resources": ["etcdclusters"]}]}]
        }
    })
}

fn operator_group() -> OperatorGroup {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": NAMESPACE},
        "spec": {"targetNamespaces": [NAMESPACE]},
        "status": {"namespaces": [NAMESPACE]}
    }))
    .expect("an OperatorGroup")
}

#[derive(Debug, Clone)]
enum Mutation {
    Remove { at: usize, key: usize },
    Replace { at: usize, with: Value },
    Nest { at: usize, depth: usize },
}

/// Values of every type, and install strategies and webhooks of odd shapes.
fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        Just(Value::from(-1)),
        "[ -~]{0,12}".prop_map(Value::String),
        Just(Value::String(String::new())),
        Just(Value::String("\u{feff}\0\u{202e}é".to_owned())),
        Just(Value::String("x".repeat(10_000))),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"strategy": "machine"})),
        Just(json!({"strategy": "machine", "spec": {"pool": "p", "hooks": {}}})),
        Just(json!({"strategy": "helm", "spec": {}})),
        Just(json!({"strategy": "deployment"})),
        Just(json!({"strategy": "deployment", "spec": {"deployments": [{"name": "", "spec": {}}]}})),
        Just(
            json!({"strategy": "deployment", "spec": {"deployments": [{"name": "d", "spec": {"replicas": "two"}}]}})
        ),
        Just(json!({"name": "etcd-operator", "spec": {}})),
        Just(json!({"serviceAccountName": "", "rules": []})),
        Just(
            json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"], "operations": ["*"], "apiVersions": ["*"]})
        ),
        Just(
            json!({"apiGroups": ["operators.coreos.com"], "resources": ["*"], "operations": ["*"], "apiVersions": ["*"]})
        ),
        Just(
            json!({"generateName": "c", "type": "ConversionWebhook", "deploymentName": "etcd-operator",
                    "conversionCRDs": ["etcdclusters.etcd.database.coreos.com", "other.example.com"],
                    "admissionReviewVersions": ["v1"], "sideEffects": "None"})
        ),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0usize..300;
    prop_oneof![
        2 => (at.clone(), any::<usize>()).prop_map(|(at, key)| Mutation::Remove { at, key }),
        4 => (at.clone(), odd_value()).prop_map(|(at, with)| Mutation::Replace { at, with }),
        1 => (at, 1usize..40).prop_map(|(at, depth)| Mutation::Nest { at, depth }),
    ]
}

fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(map) => map.values().map(count).sum(),
        _ => 0,
    }
}

fn node_mut(root: &mut Value, index: usize) -> &mut Value {
    if index == 0 {
        return root;
    }
    let mut rest = index - 1;
    let children: Vec<&mut Value> = match root {
        Value::Array(items) => items.iter_mut().collect(),
        Value::Object(map) => map.values_mut().collect(),
        _ => unreachable!("index beyond a leaf"),
    };
    for child in children {
        let size = count(child);
        if rest < size {
            return node_mut(child, rest);
        }
        rest -= size;
    }
    unreachable!("index beyond the tree")
}

fn apply(root: &mut Value, mutation: &Mutation) {
    let nodes = count(root);
    match mutation {
        Mutation::Remove { at, key } => match node_mut(root, at % nodes) {
            Value::Array(items) if !items.is_empty() => {
                items.remove(key % items.len());
            }
            Value::Object(map) if !map.is_empty() => {
                let k = map.keys().nth(key % map.len()).cloned().unwrap_or_default();
                map.remove(&k);
            }
            _ => {}
        },
        Mutation::Replace { at, with } => *node_mut(root, at % nodes) = with.clone(),
        Mutation::Nest { at, depth } => {
            let node = node_mut(root, at % nodes);
            let mut value = node.take();
            for i in 0..*depth {
                value = if i % 2 == 0 {
                    json!({ "n": value })
                } else {
                    json!([value])
                };
            }
            *node = value;
        }
    }
}

/// Runs the controller's pure steps on `object`; returns whether it validated and built.
/// (Dereference reads the cluster; here it found the OperatorGroup and nothing else.)
fn check(object: Value) -> bool {
    let csv: ClusterServiceVersion = match serde_json::from_value(object) {
        Ok(csv) => csv,
        Err(error) => {
            assert!(!error.to_string().is_empty());
            return false;
        }
    };
    let again: ClusterServiceVersion =
        serde_json::from_value(serde_json::to_value(&csv).expect("a CSV serializes")).expect("it reads back");
    assert_eq!(again, csv, "the CSV does not round-trip");

    let found = Dereferenced {
        operator_groups: vec![operator_group()],
        server_version: Some(semver::Version::new(1, 30, 0)),
        ..Dereferenced::default()
    };
    let validation = validate::validate(&csv, &found);
    if let Err(error) = &validation.membership {
        assert!(!error.to_string().is_empty());
    }
    for status in &validation.requirements.statuses {
        assert!(
            !status.message.is_empty() || status.kind == "ServiceAccount",
            "{status:?}"
        );
    }
    let strategy = match &validation.strategy {
        Ok(strategy) => strategy,
        Err(invalid) => {
            let message = invalid.0.as_str();
            assert!(message.len() > 10, "no cause in {message:?}");
            if let Some(rest) = message.strip_prefix("deployment ") {
                let named = rest.split([' ', ':']).next().unwrap_or("");
                let deployments = csv
                    .spec
                    .install
                    .deployment()
                    .map(|d| d.deployments.clone())
                    .unwrap_or_default();
                assert!(
                    deployments.iter().any(|d| d.name == named),
                    "{message} names no deployment"
                );
            }
            return false;
        }
    };
    let Ok(membership) = &validation.membership else {
        return false;
    };
    let names: Vec<String> = strategy.deployments.iter().map(|d| d.name.clone()).collect();
    if let Err(invalid) = webhooks::check(&csv, &names) {
        assert!(!invalid.to_string().is_empty());
        return false;
    }
    let mut children = match build::build(&csv, membership, strategy) {
        Ok(children) => children,
        Err(error) => {
            // Only metadata the API server always sets can be missing.
            assert!(
                error.to_string().starts_with("the ClusterServiceVersion has no "),
                "{error}"
            );
            return false;
        }
    };
    overrides::apply(&mut children.deployments, None, &overrides::Replicas::Declared);
    assert_eq!(children.deployments.len(), strategy.deployments.len());
    true
}

#[test]
fn the_valid_csv_validates_and_builds() {
    assert!(check(valid_csv()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn a_mutated_csv_validates_or_says_why(mutations in proptest::collection::vec(mutation(), 1..5)) {
        let mut csv = valid_csv();
        for m in &mutations {
            apply(&mut csv, m);
        }
        check(csv);
    }

    /// `spec.install` replaced by a value of any shape, or one Deployment's spec.
    #[test]
    fn any_install_strategy_validates_or_says_why(install in odd_value(), spec in odd_value(), which in 0usize..3) {
        let mut csv = valid_csv();
        match which {
            0 => csv["spec"]["install"] = install,
            1 => csv["spec"]["install"]["spec"]["deployments"][0]["spec"] = spec,
            _ => csv["spec"]["install"]["spec"]["deployments"][1]["spec"]["template"] = spec,
        }
        check(csv);
    }
}
