//! The `olm.csv.metadata` property of a CSV, shaped field by field as operator-registry's Go
//! types write it.

use serde_json::{Map, Value};

use crate::{bundle::Csv, property::RawJson};

/// The `olm.csv.metadata` value of a CSV, shaped as operator-registry's Go types write it: fields
/// in their JSON names (Go matches keys case-insensitively, so `Kind` counts as `kind`), empty
/// optional fields left out, and required ones (`name`, `kind`, `version` of a resource, ...)
/// written even when empty.
pub fn csv_metadata(csv: Csv<'_>) -> RawJson {
    let spec = csv.0.get("spec").unwrap_or(&Value::Null);
    let mut m = Map::new();
    if let Some(a) = csv.annotations().filter(|a| !a.is_empty()) {
        m.insert("annotations".into(), Value::Object(a.clone()));
    }
    m.insert(
        "apiServiceDefinitions".into(),
        definitions(field(spec, "apiservicedefinitions"), api_service_description),
    );
    m.insert(
        "crdDescriptions".into(),
        definitions(field(spec, "customresourcedefinitions"), crd_description),
    );
    put_str(&mut m, "description", field(spec, "description"));
    put_str(&mut m, "displayName", field(spec, "displayName"));
    put_list(&mut m, "installModes", field(spec, "installModes"), |v| {
        shape(v, &[("type", Req::Str), ("supported", Req::Bool)])
    });
    put_list(&mut m, "keywords", field(spec, "keywords"), |v| {
        Value::String(v.as_str().unwrap_or("").into())
    });
    if let Some(l) = csv.0.pointer("/metadata/labels").filter(|v| !is_empty(v)) {
        m.insert("labels".into(), l.clone());
    }
    put_list(&mut m, "links", field(spec, "links"), |v| {
        shape(v, &[("name", Req::OptStr), ("url", Req::OptStr)])
    });
    put_list(&mut m, "maintainers", field(spec, "maintainers"), |v| {
        shape(v, &[("name", Req::OptStr), ("email", Req::OptStr)])
    });
    put_str(&mut m, "maturity", field(spec, "maturity"));
    put_str(&mut m, "minKubeVersion", field(spec, "minKubeVersion"));
    put_list(&mut m, "nativeAPIs", field(spec, "nativeAPIs"), |v| {
        shape(
            v,
            &[("group", Req::Str), ("version", Req::Str), ("kind", Req::Str)],
        )
    });
    let provider = field(spec, "provider").unwrap_or(&Value::Null);
    m.insert(
        "provider".into(),
        shape(provider, &[("name", Req::OptStr), ("url", Req::OptStr)]),
    );
    RawJson::from_value(&Value::Object(m))
}

/// How a Go struct field is written.
#[derive(Clone, Copy)]
enum Req {
    /// `string`, always written.
    Str,
    /// `string,omitempty`.
    OptStr,
    /// `bool`, always written.
    Bool,
    /// `int32,omitempty`.
    OptInt,
    /// A list (`omitempty`) of descriptors.
    Descriptors,
    /// A list (`omitempty`) of API resource references.
    Resources,
    /// `[]string,omitempty`.
    OptStrs,
    /// `json.RawMessage,omitempty`: any JSON, verbatim.
    OptRaw,
}

/// A field by its JSON name, exact match first, then ignoring ASCII case (as Go decodes).
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let o = v.as_object()?;
    o.get(key).or_else(|| {
        o.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

/// An object with exactly the given fields, written as Go writes its struct.
fn shape(v: &Value, fields: &[(&str, Req)]) -> Value {
    let mut out = Map::new();
    for &(key, req) in fields {
        let f = field(v, key).filter(|f| !f.is_null());
        let written = match req {
            Req::Str => Some(Value::String(f.and_then(Value::as_str).unwrap_or("").into())),
            Req::Bool => Some(Value::Bool(f.and_then(Value::as_bool).unwrap_or(false))),
            Req::OptStr => f
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.into())),
            Req::OptInt => f.filter(|n| n.as_i64().is_some_and(|n| n != 0)).cloned(),
            Req::OptRaw => f.cloned(),
            Req::OptStrs => f.filter(|a| a.as_array().is_some_and(|a| !a.is_empty())).cloned(),
            Req::Descriptors => list(f, |d| {
                shape(
                    d,
                    &[
                        ("path", Req::Str),
                        ("displayName", Req::OptStr),
                        ("description", Req::OptStr),
                        ("x-descriptors", Req::OptStrs),
                        ("value", Req::OptRaw),
                    ],
                )
            }),
            Req::Resources => list(f, |r| {
                shape(
                    r,
                    &[("name", Req::Str), ("kind", Req::Str), ("version", Req::Str)],
                )
            }),
        };
        if let Some(w) = written {
            out.insert(key.into(), w);
        }
    }
    Value::Object(out)
}

fn list(v: Option<&Value>, each: impl Fn(&Value) -> Value) -> Option<Value> {
    let items = v?.as_array().filter(|a| !a.is_empty())?;
    Some(Value::Array(items.iter().map(each).collect()))
}

const DESCRIPTORS: [(&str, Req); 4] = [
    ("resources", Req::Resources),
    ("statusDescriptors", Req::Descriptors),
    ("specDescriptors", Req::Descriptors),
    ("actionDescriptors", Req::Descriptors),
];

fn crd_description(v: &Value) -> Value {
    let mut fields = vec![
        ("name", Req::Str),
        ("version", Req::Str),
        ("kind", Req::Str),
        ("displayName", Req::OptStr),
        ("description", Req::OptStr),
    ];
    fields.extend(DESCRIPTORS);
    shape(v, &fields)
}

fn api_service_description(v: &Value) -> Value {
    let mut fields = vec![
        ("name", Req::Str),
        ("group", Req::Str),
        ("version", Req::Str),
        ("kind", Req::Str),
        ("deploymentName", Req::OptStr),
        ("containerPort", Req::OptInt),
        ("displayName", Req::OptStr),
        ("description", Req::OptStr),
    ];
    fields.extend(DESCRIPTORS);
    shape(v, &fields)
}

/// `{owned, required}`, both `omitempty`.
fn definitions(v: Option<&Value>, each: fn(&Value) -> Value) -> Value {
    let mut out = Map::new();
    for key in ["owned", "required"] {
        if let Some(l) = list(v.and_then(|v| field(v, key)), each) {
            out.insert(key.into(), l);
        }
    }
    Value::Object(out)
}

fn put_str(m: &mut Map<String, Value>, key: &str, v: Option<&Value>) {
    if let Some(s) = v.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        m.insert(key.into(), Value::String(s.into()));
    }
}

fn put_list(m: &mut Map<String, Value>, key: &str, v: Option<&Value>, each: impl Fn(&Value) -> Value) {
    if let Some(l) = list(v, each) {
        m.insert(key.into(), l);
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}
