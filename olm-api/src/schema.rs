//! Schema helpers for fields that OLM's API keeps open.
//!
//! OLM stores some fields as arbitrary JSON: deployment specs, descriptor
//! values, `alm-examples`-like blobs. Their CRD schema must still be
//! structural, so these helpers mark them with
//! `x-kubernetes-preserve-unknown-fields` instead of leaving them untyped.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// An object whose fields the API server keeps as they are.
pub fn open_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Any JSON value (object, list, string, number or boolean), kept as it is.
pub fn any_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A list of objects whose fields the API server keeps as they are.
pub fn open_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// A `map[string]string`, as Kubernetes labels and annotations are.
pub fn string_map(generator: &mut SchemaGenerator) -> Schema {
    <std::collections::BTreeMap<String, String>>::json_schema(generator)
}

/// A list of conditions keyed on `type`, so server-side apply merges them
/// item by item instead of replacing the whole list.
pub fn conditions_list_map<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = <Vec<T>>::json_schema(generator);
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert("x-kubernetes-list-map-keys".into(), serde_json::json!(["type"]));
    schema
}

/// An object kept as it is and tracked as one field by server-side apply
/// (`x-kubernetes-map-type: atomic`), so that `managedFields` names it once
/// instead of listing every field inside it: for whole manifests kept as data.
pub fn atomic_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-map-type": "atomic",
    })
}
