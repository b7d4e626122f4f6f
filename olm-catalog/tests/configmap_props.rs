//! Property tests of the ConfigMap catalog reader on generated input: a small valid ConfigMap
//! catalog (one CRD, two CSVs, one package, each list a YAML string under `data`) mutated in its
//! outer structure, inside one of its lists, or with one list replaced by arbitrary text.
//!
//! The properties: parsing never panics; a rejection is an error that names the ConfigMap and
//! says why; a bundle left out says which and why; what is accepted renders to a JSON stream
//! that parses back to the same stream.

mod mutate;

use mutate::{mutated, mutation, yaml};
use olm_catalog::{configmap, error::display_chain, fbc};
use proptest::prelude::*;
use serde_json::{Value, json};

const PATH: &str = "catalogs/generated/configmap.yaml";

fn csv(version: &str, replaces: Option<&str>) -> Value {
    let mut csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("foo.v{version}"), "annotations": {"olm.skipRange": "<1.0.0"}},
        "spec": {
            "version": version,
            "installModes": [{"type": "AllNamespaces", "supported": true}],
            "customresourcedefinitions": {
                "owned": [{"name": "foos.foo.io", "version": "v1", "kind": "Foo"}]},
            "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "foo", "spec": {
                "template": {"spec": {"containers": [{"name": "m", "image": "quay.io/foo/op:1"}]}}}}]}}
        }
    });
    if let Some(r) = replaces {
        csv["spec"]["replaces"] = json!(r);
    }
    csv
}

/// The three lists of the ConfigMap's data: CRDs, CSVs, packages.
fn lists() -> [Value; 3] {
    [
        json!([{
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "foos.foo.io"},
            "spec": {"group": "foo.io", "names": {"kind": "Foo", "plural": "foos"}, "scope": "Namespaced",
                     "versions": [{"name": "v1", "served": true, "storage": true}]}
        }]),
        json!([csv("1.0.0", None), csv("1.1.0", Some("foo.v1.0.0"))]),
        json!([{"packageName": "foo", "defaultChannel": "stable",
                "channels": [{"name": "stable", "currentCSV": "foo.v1.1.0"}]}]),
    ]
}

const KEYS: [&str; 3] = [
    configmap::keys::CRDS,
    configmap::keys::CSVS,
    configmap::keys::PACKAGES,
];

/// The ConfigMap, with data value `key` given by `text` for each entry of `lists`.
fn config_map(lists: &[(usize, String)]) -> Value {
    let data: serde_json::Map<String, Value> = lists
        .iter()
        .map(|(key, text)| (KEYS[*key].to_owned(), Value::String(text.clone())))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "catalog", "namespace": "olm"}, "data": data})
}

fn valid_config_map() -> Value {
    config_map(
        &lists()
            .iter()
            .enumerate()
            .map(|(i, l)| (i, yaml(l)))
            .collect::<Vec<_>>(),
    )
}

/// Parses `text`: never panics; a rejection names the ConfigMap; left-out bundles say which and
/// why; what is accepted round-trips through the JSON stream.
fn check(text: &str) {
    match configmap::parse_str(PATH, text) {
        Ok(read) => {
            for out in &read.left_out {
                let message = out.to_string();
                assert!(!out.bundle.is_empty() && !out.reason.is_empty(), "{message}");
                assert!(message.contains(&out.bundle), "{message}");
            }
            let rendered = fbc::to_json_stream(&read.render.catalog);
            let again = fbc::parse_str("configmap.json", &rendered).unwrap_or_else(|e| {
                panic!("the rendering does not parse: {}\n{rendered}", display_chain(&e))
            });
            assert_eq!(fbc::to_json_stream(&again), rendered);
        }
        Err(error) => {
            let message = display_chain(&error);
            assert!(
                message.contains(PATH),
                "the error does not name {PATH}: {message}"
            );
            assert!(message.len() > PATH.len() + 10, "no cause in {message:?}");
        }
    }
}

#[test]
fn the_valid_config_map_serves_both_bundles() {
    let read = configmap::parse_str(PATH, &yaml(&valid_config_map())).unwrap();
    assert!(read.left_out.is_empty(), "{:?}", read.left_out);
    assert_eq!(read.render.catalog.bundles.len(), 2);
    check(&yaml(&valid_config_map()));
}

#[test]
fn a_data_value_that_is_not_a_string_is_named() {
    let mut cm = valid_config_map();
    cm["data"]["packages"] = json!([{"packageName": "foo"}]);
    let error = configmap::parse_str(PATH, &yaml(&cm)).unwrap_err();
    assert!(
        display_chain(&error).contains("data.packages"),
        "{}",
        display_chain(&error)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The ConfigMap object itself mutated (data values replaced, keys removed, nesting).
    #[test]
    fn a_mutated_config_map_parses_or_fails_naming_it(mutations in proptest::collection::vec(mutation(), 1..5)) {
        check(&yaml(&mutated(valid_config_map(), &mutations)));
    }

    /// One list mutated inside its YAML string.
    #[test]
    fn a_mutated_list_leaves_bundles_out_or_fails_naming_it(
        which in 0usize..3,
        mutations in proptest::collection::vec(mutation(), 1..5),
    ) {
        let lists: Vec<(usize, String)> = lists()
            .into_iter()
            .enumerate()
            .map(|(i, l)| (i, yaml(&if i == which { mutated(l, &mutations) } else { l })))
            .collect();
        check(&yaml(&config_map(&lists)));
    }

    /// One list replaced by arbitrary text (a string that is not YAML, or YAML of another shape),
    /// also spelled as JSON.
    #[test]
    fn an_arbitrary_list_never_panics(which in 0usize..3, text in "[ -~\n]{0,200}", as_json in any::<bool>()) {
        let lists: Vec<(usize, String)> = lists()
            .into_iter()
            .enumerate()
            .map(|(i, l)| (i, if i == which { text.clone() } else { yaml(&l) }))
            .collect();
        let cm = config_map(&lists);
        check(&if as_json { cm.to_string() } else { yaml(&cm) });
    }

    /// Arbitrary bytes (lossily decoded) as the whole file.
    #[test]
    fn arbitrary_text_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(&String::from_utf8_lossy(&bytes));
    }
}
