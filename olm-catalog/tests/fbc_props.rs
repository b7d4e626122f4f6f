//! Property tests of the file-based catalog parser on generated input: arbitrary bytes, and
//! structured mutations of a small valid catalog (fields removed, wrong types, huge numbers,
//! duplicate blobs, deep nesting), written as a JSON stream and as YAML documents.
//!
//! The properties: parsing never panics; a rejection is an error that names the file; what is
//! accepted renders to a JSON stream that parses back to the same catalog; the JSON and YAML
//! spellings of the same blobs read the same.

use olm_catalog::{Catalog, LoadError, error::display_chain, fbc, validate};
use proptest::prelude::*;
use serde_json::{Value, json};

const JSON_PATH: &str = "catalogs/generated/catalog.json";
const YAML_PATH: &str = "catalogs/generated/catalog.yaml";

/// A small catalog that `opm validate` would accept: one package, one channel, two bundles.
fn valid_blobs() -> Vec<Value> {
    vec![
        json!({"schema": "olm.package", "name": "etcd", "defaultChannel": "stable",
               "description": "a key-value store",
               "icon": {"base64data": "PHN2Zz48L3N2Zz4=", "mediatype": "image/svg+xml"}}),
        json!({"schema": "olm.channel", "package": "etcd", "name": "stable", "entries": [
            {"name": "etcd.v0.9.0"},
            {"name": "etcd.v0.9.2", "replaces": "etcd.v0.9.0", "skips": ["etcd.v0.9.1"],
             "skipRange": ">=0.9.0 <0.9.2"}
        ]}),
        json!({"schema": "olm.bundle", "package": "etcd", "name": "etcd.v0.9.0",
               "image": "quay.io/example/etcd@sha256:0000", "properties": [
            {"type": "olm.package", "value": {"packageName": "etcd", "version": "0.9.0"}},
            {"type": "olm.gvk", "value": {"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta2"}}
        ]}),
        json!({"schema": "olm.bundle", "package": "etcd", "name": "etcd.v0.9.2",
               "image": "quay.io/example/etcd@sha256:0002",
               "relatedImages": [{"name": "operator", "image": "quay.io/example/etcd-operator:v0.9.2"}],
               "properties": [
            {"type": "olm.package", "value": {"packageName": "etcd", "version": "0.9.2"}},
            {"type": "olm.package.required", "value": {"packageName": "prometheus", "versionRange": ">=0.27.0"}},
            {"type": "olm.constraint", "value": {"failureMessage": "needs a store",
                "any": {"constraints": [{"gvk": {"group": "g", "version": "v1", "kind": "K"}},
                                         {"cel": {"rule": "properties.exists(p, p.type == 'x')"}}]}}},
            {"type": "olm.bundle.object", "value": {"data": "eyJraW5kIjoiQ29uZmlnTWFwIn0="}}
        ]}),
        json!({"schema": "olm.deprecations", "package": "etcd", "entries": [
            {"reference": {"schema": "olm.bundle", "name": "etcd.v0.9.0"}, "message": "use 0.9.2"}
        ]}),
        json!({"schema": "olm.template.basic", "package": "etcd", "name": "t", "entries": [1, {"a": null}]}),
    ]
}

fn json_stream(blobs: &[Value]) -> String {
    blobs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
}

fn yaml_documents(blobs: &[Value]) -> String {
    serde_saphyr::to_string_multiple(blobs).expect("JSON values serialize as YAML")
}

/// Parses `text` as the file `path`; a rejection must name the file. Returns what was accepted.
fn parse_named(path: &str, text: &str) -> Option<Catalog> {
    match fbc::parse_str(path, text) {
        Ok(catalog) => Some(catalog),
        Err(error) => {
            assert_names(&error, path);
            None
        }
    }
}

fn assert_names(error: &LoadError, path: &str) {
    let message = display_chain(error);
    assert!(
        message.contains(path),
        "the error does not name {path}: {message}"
    );
    assert_eq!(error.path(), std::path::Path::new(path));
    assert!(message.len() > path.len() + 10, "no cause in {message:?}");
}

/// Rendering what was accepted and parsing it again gives the same catalog, and the rendering
/// is stable.
fn assert_round_trips(catalog: &Catalog) {
    let rendered = fbc::to_json_stream(catalog);
    let again = fbc::parse_str(JSON_PATH, &rendered)
        .unwrap_or_else(|e| panic!("the rendering does not parse: {}\n{rendered}", display_chain(&e)));
    assert_eq!(fbc::to_json_stream(&again), rendered);
    let mut compact = Vec::new();
    fbc::write_json_stream(catalog, &mut compact, fbc::JsonStyle::Compact).unwrap();
    let compact = String::from_utf8(compact).unwrap();
    let from_compact = fbc::parse_str(JSON_PATH, &compact).unwrap();
    assert_eq!(fbc::to_json_stream(&from_compact), rendered);
}

/// One structural change to a JSON tree; `at` picks the node (by pre-order index, modulo the
/// number of nodes) and `key` a key or element of it.
#[derive(Debug, Clone)]
enum Mutation {
    Remove { at: usize, key: usize },
    Replace { at: usize, with: Value },
    Duplicate { at: usize, key: usize },
    Nest { at: usize, depth: usize, object: bool },
}

/// Values of every JSON type, including numbers at the edges of what JSON parsers hold.
fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        Just(Value::from(f64::MAX)),
        Just(Value::from(-0.0)),
        "[ -~]{0,12}".prop_map(Value::String),
        Just(Value::String(String::new())),
        Just(Value::String("\u{feff}\0\u{202e}é".to_owned())),
        Just(Value::String("x".repeat(10_000))),
        Just(json!([])),
        Just(json!({})),
        Just(json!([1, "a", null])),
        Just(json!({"schema": "olm.bundle"})),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0usize..400;
    prop_oneof![
        (at.clone(), any::<usize>()).prop_map(|(at, key)| Mutation::Remove { at, key }),
        (at.clone(), odd_value()).prop_map(|(at, with)| Mutation::Replace { at, with }),
        (at.clone(), any::<usize>()).prop_map(|(at, key)| Mutation::Duplicate { at, key }),
        (at, 1usize..100, any::<bool>()).prop_map(|(at, depth, object)| Mutation::Nest { at, depth, object }),
    ]
}

fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(map) => map.values().map(count).sum(),
        _ => 0,
    }
}

/// The node at pre-order index `n` (which must be below `count(v)`).
fn node_mut(v: &mut Value, mut n: usize) -> &mut Value {
    fn walk<'a>(v: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
        if *n == 0 {
            return Some(v);
        }
        *n -= 1;
        let children: Vec<&mut Value> = match v {
            Value::Array(items) => items.iter_mut().collect(),
            Value::Object(map) => map.values_mut().collect(),
            _ => Vec::new(),
        };
        for child in children {
            let size = count(child);
            if *n < size {
                return walk(child, n);
            }
            *n -= size;
        }
        None
    }
    walk(v, &mut n).expect("index below the node count")
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
        Mutation::Duplicate { at, key } => {
            if let Value::Array(items) = node_mut(root, at % nodes)
                && !items.is_empty()
            {
                let copy = items[key % items.len()].clone();
                items.push(copy);
            }
        }
        Mutation::Nest { at, depth, object } => {
            let node = node_mut(root, at % nodes);
            let mut value = node.take();
            for _ in 0..*depth {
                value = if *object {
                    json!({ "n": value })
                } else {
                    json!([value])
                };
            }
            *node = value;
        }
    }
}

/// The valid catalog after a few mutations, as a list of blobs (the root array is not part of
/// the file: each element is one blob).
fn mutated_blobs() -> impl Strategy<Value = Vec<Value>> {
    proptest::collection::vec(mutation(), 1..6).prop_map(|mutations| {
        let mut root = Value::Array(valid_blobs());
        for m in &mutations {
            apply(&mut root, m);
        }
        match root {
            Value::Array(blobs) => blobs,
            other => vec![other],
        }
    })
}

#[test]
fn the_valid_catalog_parses_validates_and_round_trips() {
    let blobs = valid_blobs();
    let catalog = parse_named(JSON_PATH, &json_stream(&blobs)).expect("the valid catalog parses");
    assert_eq!((catalog.bundles.len(), catalog.others.len()), (2, 1));
    assert!(
        validate::validate(&catalog).is_empty(),
        "{:?}",
        validate::validate(&catalog)
    );
    let from_yaml = parse_named(YAML_PATH, &yaml_documents(&blobs)).expect("the YAML spelling parses");
    assert_eq!(from_yaml, catalog);
    assert_round_trips(&catalog);
}

#[test]
fn an_alias_bomb_is_refused_naming_the_file() {
    // 5 levels of 10 aliases of a 1 KiB string: 5 KiB of text for 100 MiB of strings.
    let text = alias_bomb(5, 10, 1024);
    let error = match fbc::parse_str(YAML_PATH, &text) {
        Ok(catalog) => panic!("read as {} bytes", fbc::to_json_stream(&catalog).len()),
        Err(error) => error,
    };
    assert_names(&error, YAML_PATH);
    assert!(
        display_chain(&error).contains("aliases"),
        "{}",
        display_chain(&error)
    );
}

#[test]
fn duplicate_packages_and_bundles_load_but_do_not_validate() {
    let mut blobs = valid_blobs();
    blobs.push(blobs[0].clone());
    blobs.push(blobs[3].clone());
    let catalog = parse_named(JSON_PATH, &json_stream(&blobs)).unwrap();
    let problems: Vec<String> = validate::validate(&catalog)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("\"etcd\" is defined more than once"))
            && problems
                .iter()
                .any(|p| p.contains("\"etcd.v0.9.2\" is defined more than once")),
        "{problems:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Some(catalog) = parse_named(JSON_PATH, &text) {
            assert_round_trips(&catalog);
        }
        // The same bytes behind a `{`, so that they are read as a JSON stream.
        let _ = parse_named(JSON_PATH, &format!("{{{text}"));
    }

    #[test]
    fn yaml_like_text_never_panics(text in "([a-z]{1,3}|-|:| |  |\n|\\[|\\]|\\{|\\}|'|\"|#|\\||>|&a|\\*a|!!str|---|\\.\\.\\.|\t|[0-9.e+]{1,4}|\\.inf|-\\.inf|\\.nan|0x1F|0o17|~|null|schema: olm\\.bundle\n|name: b\n|package: p\n){0,60}") {
        if let Some(catalog) = parse_named(YAML_PATH, &text) {
            assert_round_trips(&catalog);
        }
    }

    #[test]
    fn mutated_catalogs_parse_or_fail_naming_the_file(blobs in mutated_blobs()) {
        let from_json = parse_named(JSON_PATH, &json_stream(&blobs));
        let pretty: String = blobs.iter().map(|b| serde_json::to_string_pretty(b).unwrap()).collect();
        let from_pretty = parse_named(JSON_PATH, &pretty);
        prop_assert_eq!(&from_pretty, &from_json);
        let from_yaml = parse_named(YAML_PATH, &yaml_documents(&blobs));
        if let Some(catalog) = &from_json {
            assert_round_trips(catalog);
            // Whatever loads can be validated without panicking; problems name their package.
            for problem in validate::validate(catalog) {
                prop_assert!(!problem.to_string().is_empty());
            }
        }
        // YAML nests at most 64 levels and JSON 128, so JSON may accept more; what both read
        // must be the same catalog.
        if let (Some(json), Some(yaml)) = (&from_json, &from_yaml) {
            prop_assert_eq!(json, yaml);
        }
    }

}

/// A bundle whose properties nest YAML aliases `levels` deep, each level `fan` aliases of the
/// one below, the lowest an anchored string of `size` bytes: it expands to `fan^levels` copies.
fn alias_bomb(levels: usize, fan: usize, size: usize) -> String {
    let mut text = format!(
        "schema: olm.bundle\nname: b\npackage: p\nimage: i\nproperties:\n- type: l0\n  value: &a0 \"{}\"\n",
        "x".repeat(size)
    );
    for level in 1..=levels {
        let aliases = vec![format!("*a{}", level - 1); fan].join(", ");
        text += &format!("- type: l{level}\n  value: &a{level} [{aliases}]\n");
    }
    text
}

/// How far a YAML catalog may expand through its aliases: read, it holds at most this many
/// times the bytes of its text (and this much more for a short text).
const EXPANSION: usize = 16;
const EXPANSION_SLACK: usize = 1 << 20;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn yaml_aliases_expand_within_a_bound_of_the_text(levels in 1usize..=5, fan in 2usize..=10, size in 1usize..=64) {
        let text = alias_bomb(levels, fan, size);
        if let Some(catalog) = parse_named(YAML_PATH, &text) {
            let held = fbc::to_json_stream(&catalog).len();
            prop_assert!(
                held <= EXPANSION * text.len() + EXPANSION_SLACK,
                "{} bytes of YAML read as {held} bytes", text.len()
            );
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed(depth in 1usize..20_000, flow in any::<bool>(), object in any::<bool>()) {
        let json = format!(
            "{{\"schema\":\"olm.bundle\",\"name\":\"b\",\"package\":\"p\",\"x\":{}1{}}}",
            if object { "{\"a\":" } else { "[" }.repeat(depth),
            if object { "}" } else { "]" }.repeat(depth),
        );
        let _ = parse_named(JSON_PATH, &json);
        let yaml = if flow {
            format!("schema: olm.bundle\nname: b\npackage: p\nx: {}1{}\n", "[".repeat(depth), "]".repeat(depth))
        } else {
            // Block sequences nested on one line: `- - - 1`.
            format!("schema: olm.bundle\nname: b\npackage: p\nx:\n{}1\n", "- ".repeat(depth))
        };
        let _ = parse_named(YAML_PATH, &yaml);
    }

    #[test]
    fn a_directory_with_a_bad_file_names_that_file(
        files in proptest::collection::vec(
            (
                "[a-z]{1,6}(/[a-z]{1,6})?\\.(json|yaml|yml|txt)",
                prop_oneof![
                    Just(json_stream(&valid_blobs()).into_bytes()),
                    proptest::collection::vec(any::<u8>(), 0..64),
                ],
            ),
            1..4,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in &files {
            let path = dir.path().join(name);
            // Directories have no extension and files do, so no name is both.
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, bytes).unwrap();
        }
        if let Err(error) = fbc::load_dir(dir.path()) {
            let path = error.path().to_path_buf();
            prop_assert!(path.starts_with(dir.path()) && path.is_file(), "{}", path.display());
            let message = display_chain(&error);
            prop_assert!(message.contains(&path.display().to_string()), "{}", message);
        }
    }
}
