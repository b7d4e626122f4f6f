//! `apiextensions.k8s.io/v1beta1` CRDs of older bundles, written as `v1` (pure).
//!
//! Kubernetes stopped serving `apiextensions.k8s.io/v1beta1` in 1.22, so a
//! bundle that ships its CRDs in that version could never be installed as is:
//! its step would wait for an API that never comes. The API server itself
//! keeps every CRD in one internal form and converts between the two versions;
//! this does the same conversion on the manifest, so that the step applies the
//! CRD through `v1`:
//!
//! - `spec.version` becomes `spec.versions` when these are absent;
//! - `spec.validation`, `spec.subresources` and `spec.additionalPrinterColumns`
//!   move into each version (columns' `JSONPath` becomes `jsonPath`);
//! - `spec.preserveUnknownFields` (true unless set false in v1beta1) must be
//!   false in `v1`: unknown fields are kept instead by
//!   `x-kubernetes-preserve-unknown-fields` on every object of the schema, and
//!   a version without a schema gets one that keeps everything;
//! - `spec.conversion`'s webhook fields move under `webhook`.
//!
//! A schema that `v1` refuses (one that is not structural) is refused by the
//! API server, which names the field.

use serde_json::{Map, Value, json};

/// The API version Kubernetes no longer serves.
pub const V1BETA1: &str = "apiextensions.k8s.io/v1beta1";

/// The API version CRDs are written in.
pub const V1: &str = "apiextensions.k8s.io/v1";

/// `crd` as an `apiextensions.k8s.io/v1` CRD when it is a `v1beta1` one;
/// anything else unchanged.
pub fn upgrade(mut crd: Value) -> Value {
    if crd.get("apiVersion").and_then(Value::as_str) != Some(V1BETA1) {
        return crd;
    }
    crd["apiVersion"] = Value::String(V1.to_owned());
    if let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) {
        upgrade_spec(spec);
    }
    crd
}

fn upgrade_spec(spec: &mut Map<String, Value>) {
    let version = spec.remove("version");
    let validation = spec.remove("validation");
    let subresources = spec.remove("subresources");
    let columns = spec.remove("additionalPrinterColumns");
    // v1beta1's default is true: unknown fields are kept unless it says false.
    let keep_unknown = spec
        .remove("preserveUnknownFields")
        .and_then(|v| v.as_bool())
        .unwrap_or(true);
    let mut versions = match spec.remove("versions") {
        Some(Value::Array(versions)) if !versions.is_empty() => versions,
        _ => version
            .and_then(|v| v.as_str().map(str::to_owned))
            .map(|name| vec![json!({"name": name, "served": true, "storage": true})])
            .unwrap_or_default(),
    };
    for version in versions.iter_mut().filter_map(Value::as_object_mut) {
        if let Some(validation) = &validation {
            version.entry("schema").or_insert_with(|| validation.clone());
        }
        if let Some(subresources) = &subresources {
            version
                .entry("subresources")
                .or_insert_with(|| subresources.clone());
        }
        if let Some(columns) = &columns {
            version
                .entry("additionalPrinterColumns")
                .or_insert_with(|| columns.clone());
        }
        if let Some(Value::Array(columns)) = version.get_mut("additionalPrinterColumns") {
            columns.iter_mut().for_each(rename_json_path);
        }
        let schema = version
            .entry("schema")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|s| s.entry("openAPIV3Schema").or_insert_with(|| json!({})));
        if let Some(schema) = schema {
            if schema.as_object().is_none_or(Map::is_empty) {
                *schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
            } else if keep_unknown {
                keep_unknown_fields(schema, true);
            }
        }
    }
    spec.insert("versions".to_owned(), Value::Array(versions));
    spec.insert("preserveUnknownFields".to_owned(), Value::Bool(false));
    if let Some(conversion) = spec.get_mut("conversion").and_then(Value::as_object_mut) {
        upgrade_conversion(conversion);
    }
}

/// A printer column's `JSONPath` is `jsonPath` in v1.
fn rename_json_path(column: &mut Value) {
    if let Some(column) = column.as_object_mut()
        && let Some(path) = column.remove("JSONPath")
    {
        column.entry("jsonPath").or_insert(path);
    }
}

/// Marks every object of `schema` as keeping unknown fields, as v1beta1's
/// `preserveUnknownFields: true` kept them everywhere. The root's `metadata`
/// is left alone (v1 lets it say nothing but its type, name and generateName).
fn keep_unknown_fields(schema: &mut Value, root: bool) {
    let Some(node) = schema.as_object_mut() else {
        return;
    };
    let is_object = node.get("type").and_then(Value::as_str) == Some("object");
    if is_object && !node.contains_key("additionalProperties") {
        node.insert(
            "x-kubernetes-preserve-unknown-fields".to_owned(),
            Value::Bool(true),
        );
    }
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !(root && name == "metadata") {
                keep_unknown_fields(property, false);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = node.get_mut(key) {
            keep_unknown_fields(child, false);
        }
    }
}

/// v1beta1's `conversion.webhookClientConfig` and `conversionReviewVersions`
/// are `conversion.webhook.clientConfig` and `.conversionReviewVersions` in v1.
fn upgrade_conversion(conversion: &mut Map<String, Value>) {
    let client_config = conversion.remove("webhookClientConfig");
    let review_versions = conversion.remove("conversionReviewVersions");
    if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
        return;
    }
    let mut webhook = Map::new();
    if let Some(client_config) = client_config {
        webhook.insert("clientConfig".to_owned(), client_config);
    }
    webhook.insert(
        "conversionReviewVersions".to_owned(),
        review_versions.unwrap_or_else(|| json!(["v1beta1"])),
    );
    conversion.insert("webhook".to_owned(), Value::Object(webhook));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_crd_is_left_as_it_is() {
        let crd = json!({"apiVersion": V1, "kind": "CustomResourceDefinition", "spec": {"version": "x"}});
        assert_eq!(upgrade(crd.clone()), crd);
    }

    #[test]
    fn spec_level_fields_move_into_the_one_version() {
        let crd = upgrade(json!({
            "apiVersion": V1BETA1, "kind": "CustomResourceDefinition",
            "metadata": {"name": "backends.capabilities.3scale.net"},
            "spec": {
                "group": "capabilities.3scale.net", "scope": "Namespaced",
                "names": {"kind": "Backend", "plural": "backends"},
                "version": "v1beta1",
                "preserveUnknownFields": false,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Ready", "type": "string", "JSONPath": ".status.ready"}],
                "validation": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}},
            },
        }));
        assert_eq!(crd["apiVersion"], V1);
        assert_eq!(
            crd["spec"],
            json!({
                "group": "capabilities.3scale.net", "scope": "Namespaced",
                "names": {"kind": "Backend", "plural": "backends"},
                "preserveUnknownFields": false,
                "versions": [{
                    "name": "v1beta1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [{"name": "Ready", "type": "string", "jsonPath": ".status.ready"}],
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}},
                }],
            })
        );
    }

    #[test]
    fn unknown_fields_kept_by_default_are_kept_by_the_schema() {
        let crd = upgrade(json!({
            "apiVersion": V1BETA1, "kind": "CustomResourceDefinition",
            "spec": {
                "version": "v1",
                "versions": [{"name": "v1", "served": true, "storage": true}, {"name": "v1alpha1", "served": true, "storage": false}],
                "validation": {"openAPIV3Schema": {"type": "object", "properties": {
                    "metadata": {"type": "object"},
                    "spec": {"type": "object", "properties": {"list": {"type": "array", "items": {"type": "object"}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                }}},
            },
        }));
        let versions = crd["spec"]["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 2);
        for version in versions {
            let schema = &version["schema"]["openAPIV3Schema"];
            let keeps = |node: &Value| node["x-kubernetes-preserve-unknown-fields"] == json!(true);
            assert!(keeps(schema), "{schema}");
            assert!(keeps(&schema["properties"]["spec"]));
            assert!(keeps(
                &schema["properties"]["spec"]["properties"]["list"]["items"]
            ));
            assert!(
                !keeps(&schema["properties"]["metadata"]),
                "metadata says nothing more"
            );
            assert!(!keeps(&schema["properties"]["labels"]), "a map has its own rule");
        }
        assert_eq!(crd["spec"]["preserveUnknownFields"], json!(false));
        assert!(crd["spec"].get("version").is_none());
        assert!(crd["spec"].get("validation").is_none());
    }

    #[test]
    fn a_version_without_a_schema_keeps_everything() {
        let crd = upgrade(json!({
            "apiVersion": V1BETA1, "kind": "CustomResourceDefinition",
            "spec": {"version": "v1", "conversion": {"strategy": "None"}},
        }));
        assert_eq!(
            crd["spec"]["versions"][0]["schema"],
            json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
        );
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
    }

    #[test]
    fn a_conversion_webhook_moves_under_webhook() {
        let crd = upgrade(json!({
            "apiVersion": V1BETA1, "kind": "CustomResourceDefinition",
            "spec": {"version": "v1", "conversion": {
                "strategy": "Webhook",
                "webhookClientConfig": {"service": {"name": "hook", "namespace": "ns"}},
            }},
        }));
        assert_eq!(
            crd["spec"]["conversion"],
            json!({"strategy": "Webhook", "webhook": {
                "clientConfig": {"service": {"name": "hook", "namespace": "ns"}},
                "conversionReviewVersions": ["v1beta1"],
            }})
        );
    }
}
