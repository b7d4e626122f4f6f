//! Property tests of the bundle directory reader on generated input: a small valid bundle
//! (a CSV, a CRD, `metadata/annotations.yaml`, `dependencies.yaml`, `properties.yaml`) whose
//! files are mutated structurally (keys removed, values of other types, deep nesting) or
//! replaced with arbitrary bytes.
//!
//! The properties: loading never panics; a rejection is an error that names a path inside the
//! bundle and says why; a bundle that loads and renders gives an `olm.bundle` blob that renders
//! to a JSON stream which parses back to the same stream.

mod mutate;

use std::path::Path;

use mutate::{Mutation, mutated, mutation, yaml};
use olm_catalog::{
    Catalog, bundle::load_bundle_dir, error::display_chain, fbc, render::RenderOptions, render::render_bundle,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn csv() -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "foo.v1.2.0", "annotations": {
            "olm.skipRange": ">=1.0.0 <1.2.0",
            "olm.properties": "[{\"type\": \"olm.maxOpenShiftVersion\", \"value\": \"4.8\"}]",
            "alm-examples": "[]"}},
        "spec": {
            "version": "1.2.0", "replaces": "foo.v1.1.0", "skips": ["foo.v1.1.1"],
            "installModes": [{"type": "OwnNamespace", "supported": true},
                             {"type": "AllNamespaces", "supported": false}],
            "customresourcedefinitions": {
                "owned": [{"name": "foos.foo.io", "version": "v1", "kind": "Foo"}],
                "required": [{"name": "bars.bar.io", "version": "v1alpha1", "kind": "Bar"}]},
            "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "foo", "spec": {
                "template": {"spec": {"containers": [{"name": "m", "image": "quay.io/foo/op:1.2.0"}]}}}}]}},
            "relatedImages": [{"name": "op", "image": "quay.io/foo/op:1.2.0"}]
        }
    })
}

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "foos.foo.io"},
        "spec": {"group": "foo.io", "names": {"kind": "Foo", "plural": "foos"}, "scope": "Namespaced",
                 "versions": [{"name": "v1", "served": true, "storage": true}]}
    })
}

fn annotations() -> Value {
    json!({"annotations": {
        "operators.operatorframework.io.bundle.package.v1": "foo",
        "operators.operatorframework.io.bundle.channels.v1": "stable, fast",
        "operators.operatorframework.io.bundle.channel.default.v1": "stable",
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1"
    }})
}

fn dependencies() -> Value {
    json!({"dependencies": [
        {"type": "olm.package", "value": {"packageName": "bar", "version": ">=1.0.0"}},
        {"type": "olm.gvk", "value": {"group": "bar.io", "version": "v1", "kind": "Bar"}},
        {"type": "olm.label", "value": {"label": "x"}},
        {"type": "olm.constraint", "value": {"failureMessage": "needs x", "cel": {"rule": "true"}}}
    ]})
}

fn properties() -> Value {
    json!({"properties": [
        {"type": "olm.maxOpenShiftVersion", "value": "4.9"},
        {"type": "olm.gvk", "value": {"group": "foo.io", "version": "v1", "kind": "Foo"}}
    ]})
}

const FILES: [&str; 5] = [
    "manifests/foo.clusterserviceversion.yaml",
    "manifests/foos.crd.yaml",
    "metadata/annotations.yaml",
    "metadata/dependencies.yaml",
    "metadata/properties.yaml",
];

fn valid_files() -> [Value; 5] {
    [csv(), crd(), annotations(), dependencies(), properties()]
}

/// What happens to one file of the bundle.
#[derive(Debug, Clone)]
enum Change {
    Mutate(Vec<Mutation>),
    Bytes(Vec<u8>),
    Delete,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        6 => proptest::collection::vec(mutation(), 1..5).prop_map(Change::Mutate),
        2 => proptest::collection::vec(any::<u8>(), 0..256).prop_map(Change::Bytes),
        1 => Just(Change::Delete),
    ]
}

/// Writes the bundle under `root`, file `which` changed by `change`.
fn write_bundle(root: &Path, which: usize, change: &Change) {
    for (i, (rel, value)) in FILES.iter().zip(valid_files()).enumerate() {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let bytes = match (i == which, change) {
            (false, _) => yaml(&value).into_bytes(),
            (true, Change::Mutate(mutations)) => yaml(&mutated(value, mutations)).into_bytes(),
            (true, Change::Bytes(bytes)) => bytes.clone(),
            (true, Change::Delete) => continue,
        };
        std::fs::write(path, bytes).unwrap();
    }
}

/// Loads and renders the bundle at `root`: never panics, a rejection names a path inside the
/// bundle and a cause, an accepted bundle round-trips through the JSON stream.
fn check(root: &Path) {
    let loaded = match load_bundle_dir(root) {
        Ok(loaded) => loaded,
        Err(error) => {
            let message = display_chain(&error);
            assert!(
                error.path().starts_with(root),
                "{:?} is not in the bundle",
                error.path()
            );
            assert!(
                message.contains(&root.display().to_string()),
                "no path in {message}"
            );
            assert!(
                message.len() > error.path().display().to_string().len() + 10,
                "no cause in {message:?}"
            );
            return;
        }
    };
    match render_bundle(&loaded, &RenderOptions::default()) {
        Ok(bundle) => {
            let catalog = Catalog {
                bundles: vec![bundle],
                ..Catalog::default()
            };
            let rendered = fbc::to_json_stream(&catalog);
            let again = fbc::parse_str("bundle.json", &rendered).unwrap_or_else(|e| {
                panic!("the rendering does not parse: {}\n{rendered}", display_chain(&e))
            });
            assert_eq!(fbc::to_json_stream(&again), rendered);
        }
        Err(error) => {
            let message = display_chain(&error);
            assert!(
                message.contains(&root.display().to_string()),
                "no path in {message}"
            );
        }
    }
}

#[test]
fn the_valid_bundle_loads_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    write_bundle(dir.path(), usize::MAX, &Change::Delete);
    let loaded = load_bundle_dir(dir.path()).unwrap();
    assert_eq!(loaded.package, "foo");
    assert_eq!(loaded.dependencies.len(), 4);
    assert_eq!(loaded.properties.len(), 2);
    render_bundle(&loaded, &RenderOptions::default()).unwrap();
    check(dir.path());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// One file of the bundle mutated, replaced with bytes, or deleted.
    #[test]
    fn a_changed_file_loads_or_fails_naming_the_bundle(which in 0usize..5, change in change()) {
        let dir = tempfile::tempdir().unwrap();
        write_bundle(dir.path(), which, &change);
        check(dir.path());
    }

    /// The metadata files as YAML-like text built from tokens (anchors, tags, flow, block).
    #[test]
    fn yaml_like_metadata_never_panics(
        which in 2usize..5,
        text in "(annotations:\n|dependencies:\n|properties:\n|- |  |type: olm\\.package\n|value: |\\{|\\}|\\[|\\]|: |&a |\\*a|!!binary |---\n|'|\"|#|\\|\n|>\n|~|[a-z.]{1,6}|[0-9.]{1,4}|\n){0,60}",
    ) {
        let dir = tempfile::tempdir().unwrap();
        write_bundle(dir.path(), which, &Change::Bytes(text.into_bytes()));
        check(dir.path());
    }
}
