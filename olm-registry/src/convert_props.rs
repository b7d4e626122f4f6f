//! Property tests of how the client reads a registry's answers, on generated input: arbitrary
//! bytes decoded as `Bundle` and `Package` messages (as the gRPC layer decodes them), the
//! encodings of well-formed messages with bytes changed, and well-formed messages whose fields
//! are changed (CSV JSON that is not JSON or not an object, properties and dependencies of the
//! wrong shape, huge strings, bundles of unknown packages).
//!
//! The properties: decoding and conversion never panic; each problem reported names the bundle
//! it is about (or says the package has no name); the catalog read renders to a JSON stream that parses back to the same stream.

use olm_catalog::{error::display_chain, fbc};
use proptest::prelude::*;
use prost::Message;

use crate::{api, convert::catalog_from_api};

fn package() -> api::Package {
    api::Package {
        name: "etcd".into(),
        channels: vec![
            api::Channel {
                name: "stable".into(),
                csv_name: "etcd.v0.9.2".into(),
                deprecation: None,
            },
            api::Channel {
                name: "alpha".into(),
                csv_name: "etcd.v0.9.2".into(),
                deprecation: Some(api::Deprecation {
                    message: "use stable".into(),
                }),
            },
        ],
        default_channel_name: "stable".into(),
        deprecation: None,
    }
}

fn bundle(name: &str, replaces: &str) -> api::Bundle {
    let csv = format!(
        r#"{{"apiVersion":"operators.coreos.com/v1alpha1","kind":"ClusterServiceVersion","metadata":{{"name":"{name}"}},"spec":{{"version":"0.9.2"}}}}"#
    );
    api::Bundle {
        csv_name: name.into(),
        package_name: "etcd".into(),
        channel_name: "stable".into(),
        csv_json: csv.clone(),
        object: vec![
            csv,
            r#"{"kind":"CustomResourceDefinition","metadata":{"name":"c"}}"#.into(),
        ],
        bundle_path: format!("quay.io/example/etcd:{name}"),
        provided_apis: vec![api::GroupVersionKind {
            group: "etcd.database.coreos.com".into(),
            version: "v1beta2".into(),
            kind: "EtcdCluster".into(),
            plural: "etcdclusters".into(),
        }],
        required_apis: Vec::new(),
        version: "0.9.2".into(),
        skip_range: ">=0.9.0 <0.9.2".into(),
        dependencies: vec![
            api::Dependency {
                r#type: "olm.package".into(),
                value: r#"{"packageName":"prometheus","version":">=0.27.0"}"#.into(),
            },
            api::Dependency {
                r#type: "olm.gvk".into(),
                value: r#"{"group":"g","version":"v1","kind":"K"}"#.into(),
            },
        ],
        properties: vec![
            api::Property {
                r#type: "olm.package".into(),
                value: r#"{"packageName":"etcd","version":"0.9.2"}"#.into(),
            },
            api::Property {
                r#type: "olm.maxOpenShiftVersion".into(),
                value: r#""4.9""#.into(),
            },
        ],
        replaces: replaces.into(),
        skips: vec!["etcd.v0.9.1".into()],
        deprecation: None,
    }
}

fn bundles() -> Vec<api::Bundle> {
    vec![bundle("etcd.v0.9.0", ""), bundle("etcd.v0.9.2", "etcd.v0.9.0")]
}

/// Converts; each problem names its bundle; the catalog round-trips through the JSON stream.
fn check(packages: Vec<api::Package>, bundles: Vec<api::Bundle>) {
    let names: Vec<String> = bundles.iter().map(|b| b.csv_name.clone()).collect();
    let (catalog, problems) = catalog_from_api(packages, bundles);
    for problem in &problems {
        assert!(
            names.iter().any(|n| problem.starts_with(&format!("bundle {n}")))
                || problem.starts_with("package with no name"),
            "the problem names no bundle: {problem}"
        );
    }
    let rendered = fbc::to_json_stream(&catalog);
    let again = fbc::parse_str("registry.json", &rendered)
        .unwrap_or_else(|e| panic!("the rendering does not parse: {}\n{rendered}", display_chain(&e)));
    assert_eq!(fbc::to_json_stream(&again), rendered);
}

/// Text a registry might put in a string field: JSON of every shape, not JSON, huge, odd.
fn odd_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("null".to_owned()),
        Just("[]".to_owned()),
        Just("{}".to_owned()),
        Just("\"a string\"".to_owned()),
        Just("42".to_owned()),
        Just("{\"kind\":".to_owned()),
        Just("{\"packageName\":1,\"version\":[]}".to_owned()),
        Just("{\"group\":\"g\"}".to_owned()),
        Just("\u{feff}\0\u{202e}é".to_owned()),
        Just(format!("\"{}\"", "x".repeat(100_000))),
        Just("[".repeat(10_000)),
        "[ -~]{0,24}",
    ]
}

/// One field of one message changed.
#[derive(Debug, Clone)]
enum Change {
    CsvJson(usize, String),
    Object(usize, String),
    PropertyType(usize, usize, String),
    PropertyValue(usize, usize, String),
    DependencyType(usize, usize, String),
    DependencyValue(usize, usize, String),
    PackageName(usize, String),
    CsvName(usize, String),
    Version(usize, String),
    ChannelHead(usize, String),
    DefaultChannel(String),
}

fn change() -> impl Strategy<Value = Change> {
    let types = prop_oneof![
        Just("olm.package".to_owned()),
        Just("olm.gvk".to_owned()),
        Just("olm.package.required".to_owned()),
        Just("olm.gvk.required".to_owned()),
        Just("olm.constraint".to_owned()),
        Just("olm.bundle.object".to_owned()),
        Just("olm.channel".to_owned()),
        Just(String::new()),
    ];
    let b = 0usize..2;
    let i = 0usize..2;
    prop_oneof![
        (b.clone(), odd_text()).prop_map(|(b, t)| Change::CsvJson(b, t)),
        (b.clone(), odd_text()).prop_map(|(b, t)| Change::Object(b, t)),
        (b.clone(), i.clone(), types.clone()).prop_map(|(b, i, t)| Change::PropertyType(b, i, t)),
        (b.clone(), i.clone(), odd_text()).prop_map(|(b, i, t)| Change::PropertyValue(b, i, t)),
        (b.clone(), i.clone(), types).prop_map(|(b, i, t)| Change::DependencyType(b, i, t)),
        (b.clone(), i, odd_text()).prop_map(|(b, i, t)| Change::DependencyValue(b, i, t)),
        (b.clone(), odd_text()).prop_map(|(b, t)| Change::PackageName(b, t)),
        (b.clone(), odd_text()).prop_map(|(b, t)| Change::CsvName(b, t)),
        (b.clone(), odd_text()).prop_map(|(b, t)| Change::Version(b, t)),
        (b, odd_text()).prop_map(|(b, t)| Change::ChannelHead(b, t)),
        odd_text().prop_map(Change::DefaultChannel),
    ]
}

fn apply(package: &mut api::Package, bundles: &mut [api::Bundle], change: &Change) {
    match change.clone() {
        Change::CsvJson(b, t) => bundles[b].csv_json = t,
        Change::Object(b, t) => bundles[b].object[1] = t,
        Change::PropertyType(b, i, t) => bundles[b].properties[i].r#type = t,
        Change::PropertyValue(b, i, t) => bundles[b].properties[i].value = t,
        Change::DependencyType(b, i, t) => bundles[b].dependencies[i].r#type = t,
        Change::DependencyValue(b, i, t) => bundles[b].dependencies[i].value = t,
        Change::PackageName(b, t) => bundles[b].package_name = t,
        Change::CsvName(b, t) => bundles[b].csv_name = t,
        Change::Version(b, t) => bundles[b].version = t,
        Change::ChannelHead(c, t) => package.channels[c].csv_name = t,
        Change::DefaultChannel(t) => package.default_channel_name = t,
    }
}

#[test]
fn the_valid_answers_convert_without_problems() {
    let (catalog, problems) = catalog_from_api(vec![package()], bundles());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(catalog.bundles.len(), 2);
    check(vec![package()], bundles());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn changed_messages_convert_or_say_which_bundle(changes in proptest::collection::vec(change(), 1..5)) {
        let (mut package, mut bundles) = (package(), bundles());
        for c in &changes {
            apply(&mut package, &mut bundles, c);
        }
        check(vec![package], bundles);
    }

    #[test]
    fn arbitrary_bytes_decode_or_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let bundle = api::Bundle::decode(bytes.as_slice());
        let package = api::Package::decode(bytes.as_slice());
        if let (Ok(mut bundle), Ok(package)) = (bundle, package) {
            bundle.package_name.clone_from(&package.name);
            check(vec![package], vec![bundle]);
        }
    }

    /// The encodings of the well-formed messages with a few bytes changed, then decoded.
    #[test]
    fn changed_encodings_decode_or_are_refused(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        truncate in any::<prop::sample::Index>(),
    ) {
        let mut package_bytes = package().encode_to_vec();
        let mut bundle_bytes = bundles()[1].encode_to_vec();
        for (at, byte) in &flips {
            let (p, b) = (at.index(package_bytes.len()), at.index(bundle_bytes.len()));
            package_bytes[p] = *byte;
            bundle_bytes[b] ^= *byte;
        }
        bundle_bytes.truncate(truncate.index(bundle_bytes.len() + 1));
        if let (Ok(package), Ok(bundle)) = (
            api::Package::decode(package_bytes.as_slice()),
            api::Bundle::decode(bundle_bytes.as_slice()),
        ) {
            check(vec![package], vec![bundle]);
        }
    }
}
