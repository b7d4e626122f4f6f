//! Every ClusterServiceVersion in the shared corpus of real OperatorHub
//! bundles reads into our type and writes back as the same JSON.

use std::path::{Path, PathBuf};

use olm_api::{manifest, v1alpha1::ClusterServiceVersion};

/// The corpus directory: `OLM_RS_CORPUS`, or `../shared/corpus` beside the checkout.
fn corpus_dir() -> PathBuf {
    match std::env::var_os("OLM_RS_CORPUS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
    }
}

fn manifest_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            manifest_files(&path, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(path);
        }
    }
}

/// What the API server would store of `value`: without `status` (bundle
/// authors do not write it, and the status subresource ignores it on create),
/// with only the user-written parts of `metadata`, and with every field that
/// the CRD schema does not know pruned, as the API server prunes them.
fn server_view(mut value: serde_json::Value, schema: &serde_json::Value) -> serde_json::Value {
    if let Some(obj) = value.as_object_mut() {
        obj.remove("status");
        if let Some(meta) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.retain(|key, _| matches!(key.as_str(), "name" | "namespace" | "labels" | "annotations"));
        }
        if let Some(spec) = obj.get_mut("spec") {
            prune(spec, &schema["properties"]["spec"]);
        }
    }
    value
}

/// Structural pruning: drops object fields the schema does not declare,
/// unless the schema preserves unknown fields.
fn prune(value: &mut serde_json::Value, schema: &serde_json::Value) {
    match value {
        serde_json::Value::Object(fields) => {
            let preserve = schema["x-kubernetes-preserve-unknown-fields"] == serde_json::json!(true);
            if let Some(properties) = schema["properties"].as_object() {
                fields.retain(|key, _| preserve || properties.contains_key(key));
                for (key, field) in fields.iter_mut() {
                    if let Some(field_schema) = properties.get(key) {
                        prune(field, field_schema);
                    }
                }
            } else if schema["additionalProperties"].is_object() {
                for field in fields.values_mut() {
                    prune(field, &schema["additionalProperties"]);
                }
            } else if !preserve {
                fields.clear();
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                prune(item, &schema["items"]);
            }
        }
        _ => {}
    }
}

/// The openAPIV3Schema of the CSV CRD that olm-rs installs.
fn csv_schema() -> serde_json::Value {
    use kube::CustomResourceExt;
    let crd = serde_json::to_value(ClusterServiceVersion::crd()).expect("CRD serializes");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn every_corpus_csv_round_trips() {
    let dir = corpus_dir();
    assert!(
        dir.is_dir(),
        "the corpus of real bundles is missing at {}: check out shared/ beside the repository \
         or set OLM_RS_CORPUS to its corpus directory",
        dir.display()
    );
    let mut files = Vec::new();
    manifest_files(&dir, &mut files);

    let schema = csv_schema();
    let mut checked = 0;
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable corpus file");
        if !text.contains("ClusterServiceVersion") {
            continue;
        }
        let docs = manifest::documents(path, &text).unwrap_or_else(|e| panic!("{e}"));
        for (index, doc) in docs.into_iter().enumerate() {
            if doc.get("kind").and_then(|k| k.as_str()) != Some("ClusterServiceVersion") {
                continue;
            }
            checked += 1;
            let expected = server_view(doc.clone(), &schema);
            match manifest::from_value::<ClusterServiceVersion>(path, index + 1, doc) {
                Err(e) => failures.push(e.to_string()),
                Ok(csv) => {
                    let actual = server_view(serde_json::to_value(&csv).expect("CSV serializes"), &schema);
                    if actual != expected {
                        failures.push(format!(
                            "{}: document {}: differs after a round trip: {}",
                            path.display(),
                            index + 1,
                            first_difference(&expected, &actual, String::new())
                        ));
                    }
                }
            }
        }
    }
    println!(
        "round-tripped {checked} ClusterServiceVersions from {}",
        dir.display()
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} CSVs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(checked, 291, "the corpus holds 291 CSVs");
}

/// Describes the first place where two JSON values differ.
fn first_difference(expected: &serde_json::Value, actual: &serde_json::Value, at: String) -> String {
    use serde_json::Value;
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, ev) in e {
                match a.get(key) {
                    None => return format!("{at}.{key} was dropped"),
                    Some(av) if av != ev => return first_difference(ev, av, format!("{at}.{key}")),
                    Some(_) => {}
                }
            }
            for key in a.keys() {
                if !e.contains_key(key) {
                    return format!("{at}.{key} was added");
                }
            }
            format!("{at}: equal")
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                if ev != av {
                    return first_difference(ev, av, format!("{at}[{i}]"));
                }
            }
            format!("{at}: equal")
        }
        _ => format!("{at}: {expected} became {actual}"),
    }
}
