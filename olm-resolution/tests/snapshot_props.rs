//! Property test of the way from a file-based catalog to a resolution: generated catalogs whose
//! versions, replaces, skips, `skipRange`, `olm.package.required` ranges and `olm.constraint`
//! values are valid or not, read, turned into the resolver's snapshot, indexed and resolved.
//!
//! The properties: nothing panics; every bundle or entry left out is reported with its package,
//! its bundle and the reason; what the snapshot keeps, the index and the resolver take.

use olm_catalog::{error::display_chain, fbc};
use olm_resolution::snapshot::snapshot;
use olm_resolver::{
    CatalogIndex,
    model::{CatalogId, Subscription},
};
use proptest::prelude::*;
use serde_json::{Value, json};

const BUNDLES: [&str; 5] = ["p.v0", "p.v1", "p.v2", "p.v3", "p.v4"];

fn bundle_name() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => proptest::sample::select(&BUNDLES[..]).prop_map(str::to_owned),
        1 => Just("missing.v9".to_owned()),
    ]
}

fn version_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0u64..3, 0u64..3, 0u64..3).prop_map(|(a, b, c)| format!("{a}.{b}.{c}")),
        1 => Just("1.0.0-rc.1+build".to_owned()),
        1 => Just("v1.2.3".to_owned()),
        1 => Just("18446744073709551616.0.0".to_owned()),
        1 => Just(String::new()),
    ]
}

fn range_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0u64..3, 0u64..3).prop_map(|(a, b)| format!(">={a}.0.0 <{b}.1.0")),
        1 => Just("<1.0.0 || >=2.0.0-0".to_owned()),
        1 => Just("1.x".to_owned()),
        1 => Just("^1.0.0".to_owned()),
        1 => Just("||".to_owned()),
        1 => Just(" ".to_owned()),
        1 => "[ -~]{0,10}",
    ]
}

fn constraint() -> impl Strategy<Value = Value> {
    prop_oneof![
        range_text()
            .prop_map(|r| json!({"failureMessage": "m", "package": {"packageName": "q", "versionRange": r}})),
        Just(json!({"gvk": {"group": "g", "version": "v1", "kind": "K"}})),
        Just(
            json!({"all": {"constraints": [{"not": {"constraints": [{"package": {"packageName": "p"}}]}}]}})
        ),
        Just(json!({"cel": {"rule": "true"}})),
        Just(json!({"gvk": {}, "package": {}})),
        Just(json!([1, 2])),
        Just(json!({"any": {"constraints": "no"}})),
    ]
}

fn bundle_blob() -> impl Strategy<Value = Value> {
    (
        bundle_name(),
        version_text(),
        proptest::option::of(range_text()),
        proptest::option::of(constraint()),
        any::<bool>(),
    )
        .prop_map(|(name, version, required, constraint, gvk)| {
            let mut properties = vec![json!({"type": "olm.package", "value": {"packageName": "p", "version": version}})];
            if let Some(range) = required {
                properties.push(json!({"type": "olm.package.required", "value": {"packageName": "q", "versionRange": range}}));
            }
            if let Some(c) = constraint {
                properties.push(json!({"type": "olm.constraint", "value": c}));
            }
            if gvk {
                properties.push(json!({"type": "olm.gvk", "value": {"group": "g", "version": "v1", "kind": "K"}}));
            }
            json!({"schema": "olm.bundle", "package": "p", "name": name, "image": "img", "properties": properties})
        })
}

fn entry() -> impl Strategy<Value = Value> {
    (
        bundle_name(),
        proptest::option::of(bundle_name()),
        proptest::collection::vec(bundle_name(), 0..3),
        proptest::option::of(range_text()),
    )
        .prop_map(|(name, replaces, skips, range)| {
            let mut e = json!({"name": name, "skips": skips});
            if let Some(r) = replaces {
                e["replaces"] = Value::String(r);
            }
            if let Some(r) = range {
                e["skipRange"] = Value::String(r);
            }
            e
        })
}

fn catalog_text() -> impl Strategy<Value = String> {
    (
        proptest::collection::vec(bundle_blob(), 0..7),
        proptest::collection::vec(entry(), 0..7),
        proptest::collection::vec(entry(), 0..4),
    )
        .prop_map(|(bundles, stable, fast)| {
            let mut blobs = vec![
                json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
                json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": stable}),
                json!({"schema": "olm.channel", "package": "p", "name": "fast", "entries": fast}),
            ];
            blobs.extend(bundles);
            blobs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn generated_catalogs_snapshot_index_and_resolve_without_panic(
        text in catalog_text(),
        channel in proptest::option::of(prop_oneof![Just("stable"), Just("fast"), Just("none")]),
        starting in proptest::option::of(bundle_name()),
        installed in proptest::option::of(bundle_name()),
    ) {
        let catalog = match fbc::parse_str("catalog.json", &text) {
            Ok(catalog) => catalog,
            Err(error) => {
                // Only an olm.constraint value that is not an object is refused this early.
                let message = display_chain(&error);
                prop_assert!(message.starts_with("invalid content in catalog.json (document "), "{}", message);
                prop_assert!(message.contains("olm.constraint"), "{}", message);
                return Ok(());
            }
        };
        let id = CatalogId::new("generated", "olm");
        let taken = snapshot(id.clone(), 0, &catalog);
        for problem in &taken.problems {
            let message = problem.to_string();
            prop_assert!(
                message.starts_with(&format!("package {}: bundle {} left out: ", problem.package, problem.bundle))
                    && !problem.reason.is_empty(),
                "{}",
                message
            );
        }
        let index = CatalogIndex::new(vec![taken.snapshot]);
        for problem in index.problems() {
            prop_assert!(!problem.to_string().is_empty());
        }
        let mut subscription = Subscription::new("sub", "ns", "p", id);
        subscription.channel = channel.map(str::to_owned);
        subscription.starting_csv = starting;
        subscription.installed_csv = installed;
        let _ = index.resolve("ns", &[], &[subscription]);
    }
}
