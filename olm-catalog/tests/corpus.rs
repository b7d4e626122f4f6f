//! Corpus tests: every real bundle and catalog under `../shared/corpus` (next to the workspace, or
//! `OLM_RS_CORPUS`) loads, renders and validates, and renders agree with the community pipeline's.
//! The tests fail, saying so, when the corpus is absent.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use olm_catalog::{
    Catalog, Property, bundle, fbc, manifests_dir,
    render::{self, RenderOptions},
    validate::{Severity, validate},
};

fn corpus() -> PathBuf {
    let dir = match std::env::var_os("OLM_RS_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
    };
    assert!(
        dir.join("bundles").is_dir() && dir.join("fbc").is_dir(),
        "the corpus is not at {}: put shared/corpus next to the workspace or set OLM_RS_CORPUS",
        dir.display()
    );
    dir
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

fn count(c: &Catalog, type_: &str) -> usize {
    c.bundles
        .iter()
        .flat_map(|b| &b.properties)
        .filter(|p| p.type_name() == type_)
        .count()
}

fn errors_only(c: &Catalog) -> Vec<String> {
    validate(c)
        .into_iter()
        .filter(|e| e.severity() == Severity::Error)
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn every_bundle_dir_loads_and_renders() {
    let corpus = corpus();
    let mut bundles = 0;
    let mut not_semver = Vec::new();
    let mut with_deps = 0;
    let mut needing = 0;
    let mut warnings = 0;
    for pkg in subdirs(&corpus.join("bundles")) {
        for version in subdirs(&pkg) {
            if bundle::bundle_root(&version).is_none() {
                continue;
            }
            let b = bundle::load_bundle_dir(&version)
                .unwrap_or_else(|e| panic!("{}", olm_catalog::error::display_chain(&e)));
            warnings += b.warnings.len();
            with_deps += usize::from(!b.dependencies.is_empty());
            let r = render::render_bundle(&b, &RenderOptions::default())
                .unwrap_or_else(|e| panic!("{}", olm_catalog::error::display_chain(&e)));
            needing += usize::from(r.properties.iter().any(|p| {
                matches!(
                    p.type_name(),
                    "olm.gvk.required" | "olm.package.required" | "olm.constraint"
                )
            }));
            assert_eq!(r.name, b.name());
            let v = r.version().expect("olm.package");
            if v.semver().is_none() {
                not_semver.push(format!("{} {}", r.name, v));
            }
            bundles += 1;
        }
    }
    let enmasse = manifests_dir::load(corpus.join("packagemanifests/enmasse"))
        .unwrap_or_else(|e| panic!("{}", olm_catalog::error::display_chain(&e)));
    println!(
        "bundle dirs: {bundles} loaded and rendered ({with_deps} with a dependencies list, {needing} needing \
         something, {warnings} loader warnings); \
         package manifest enmasse: {} bundles; versions that are not semver: {not_semver:?}",
        enmasse.catalog.bundles.len()
    );
    assert_eq!(bundles, 283);
    assert_eq!(
        with_deps,
        38 + 9,
        "dependencies.yaml files, and properties.yaml files holding dependencies"
    );
    assert_eq!(needing, 62);
    assert_eq!(enmasse.catalog.bundles.len(), 8);
    assert!(not_semver.is_empty(), "{not_semver:?}");
    assert!(
        errors_only(&enmasse.catalog).is_empty(),
        "{:?}",
        errors_only(&enmasse.catalog)
    );
    assert!(enmasse.warnings.is_empty(), "{:?}", enmasse.warnings);
}

#[test]
fn every_package_renders_into_a_catalog_that_validates() {
    let corpus = corpus();
    let (mut packages, mut channels, mut bundles, mut warned) = (0, 0, 0, 0);
    for pkg in subdirs(&corpus.join("bundles")) {
        let r = render::render_package_dir(&pkg)
            .unwrap_or_else(|e| panic!("{}", olm_catalog::error::display_chain(&e)));
        let errors = errors_only(&r.catalog);
        assert!(errors.is_empty(), "{}: {errors:#?}", pkg.display());
        let notes: Vec<String> = validate(&r.catalog)
            .iter()
            .map(ToString::to_string)
            .chain(r.warnings)
            .collect();
        if !notes.is_empty() {
            warned += 1;
            println!("{}: {notes:?}", pkg.file_name().unwrap().to_string_lossy());
        }
        packages += r.catalog.packages.len();
        channels += r.catalog.channels.len();
        bundles += r.catalog.bundles.len();
    }
    println!(
        "rendered packages: {packages}, channels: {channels}, bundles: {bundles}; {warned} with warnings"
    );
    assert_eq!((packages, bundles), (40, 283));
}

#[test]
fn fbc_trees_load_with_exact_counts() {
    let corpus = corpus();
    let v421 = fbc::load_dir(corpus.join("fbc/v4.21"))
        .unwrap_or_else(|e| panic!("{}", olm_catalog::error::display_chain(&e)));
    let counts = (v421.packages.len(), v421.channels.len(), v421.bundles.len());
    let props = (
        count(&v421, "olm.gvk"),
        count(&v421, "olm.gvk.required"),
        count(&v421, "olm.package.required"),
    );
    println!(
        "fbc/v4.21: packages/channels/bundles {counts:?}, olm.gvk/olm.gvk.required/olm.package.required {props:?}"
    );
    assert_eq!(counts, (30, 68, 635));
    assert_eq!(props, (5562, 7, 7));
    assert!(errors_only(&v421).is_empty(), "{:#?}", errors_only(&v421));

    let v416 = fbc::load_dir(corpus.join("fbc/v4.16-bundle-object"))
        .unwrap_or_else(|e| panic!("{}", olm_catalog::error::display_chain(&e)));
    let counts = (v416.packages.len(), v416.channels.len(), v416.bundles.len());
    println!(
        "fbc/v4.16-bundle-object: packages/channels/bundles {counts:?}, olm.bundle.object {}",
        count(&v416, "olm.bundle.object")
    );
    assert_eq!(counts, (11, 15, 48));
    assert_eq!(count(&v416, "olm.bundle.object"), 295);
    assert!(errors_only(&v416).is_empty(), "{:#?}", errors_only(&v416));

    // Every version of the community catalogs parses as semver.
    let bad: Vec<String> = v421
        .bundles
        .iter()
        .chain(&v416.bundles)
        .filter(|b| b.version().is_none_or(|v| v.semver().is_none()))
        .map(|b| b.name.clone())
        .collect();
    assert!(bad.is_empty(), "{bad:?}");

    // Writing and reading back gives the same catalog.
    for c in [v421, v416] {
        let back = fbc::parse_str("roundtrip.json", &fbc::to_json_stream(&c)).unwrap();
        let mut sorted = c.clone();
        sorted.sort();
        let mut back_sorted = back;
        back_sorted.sort();
        assert!(back_sorted == sorted, "round trip changed the catalog");
    }
}

/// `(type, value)` of the properties both sides must agree on.
fn compared(props: &[Property]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = props
        .iter()
        .filter(|p| {
            matches!(
                p.type_name(),
                "olm.package" | "olm.gvk" | "olm.gvk.required" | "olm.package.required"
            )
        })
        .map(|p| (p.type_name().to_owned(), p.value_json()))
        .collect();
    out.sort();
    out
}

#[test]
fn rabbitmq_topology_render_agrees_with_the_community_catalog() {
    let corpus = corpus();
    let pkg = "rabbitmq-messaging-topology-operator";
    let rendered = render::render_package_dir(corpus.join("bundles").join(pkg)).unwrap();
    let community = fbc::load_file(corpus.join("fbc/v4.21").join(pkg).join("catalog.yaml")).unwrap();
    let mut compared_bundles = 0;
    for b in &rendered.catalog.bundles {
        let Some(theirs) = community.bundle(pkg, &b.name) else {
            continue;
        };
        assert_eq!(
            compared(&b.properties),
            compared(&theirs.properties),
            "{}",
            b.name
        );
        // The same properties in the same order, up to where the community render puts
        // olm.csv.metadata and a directory render bundle objects.
        let order = |props: &[Property]| -> Vec<String> {
            props
                .iter()
                .filter(|p| !matches!(p.type_name(), "olm.csv.metadata" | "olm.bundle.object"))
                .map(|p| format!("{} {}", p.type_name(), p.value_json()))
                .collect()
        };
        assert_eq!(order(&b.properties), order(&theirs.properties), "{}", b.name);
        compared_bundles += 1;
    }
    println!(
        "{pkg}: {compared_bundles} bundles agree with fbc/v4.21 on olm.package, olm.gvk, olm.gvk.required, olm.package.required"
    );
    assert_eq!(compared_bundles, 8);
    let required: usize = rendered
        .catalog
        .bundles
        .iter()
        .flat_map(|b| &b.properties)
        .filter(|p| p.type_name() == "olm.package.required")
        .count();
    assert_eq!(
        required, 10,
        "every bundle from 1.15.0 on needs rabbitmq-cluster-operator >2.0.0"
    );
}

#[test]
fn csv_metadata_agrees_with_the_community_catalog() {
    let corpus = corpus();
    let mut compared_bundles = 0;
    let mut mismatches = Vec::new();
    for pkg in subdirs(&corpus.join("bundles")) {
        let name = pkg.file_name().unwrap().to_string_lossy().into_owned();
        let fbc_file = corpus.join("fbc/v4.21").join(&name).join("catalog.yaml");
        if !fbc_file.is_file() {
            continue;
        }
        let community = fbc::load_file(&fbc_file).unwrap();
        for version in subdirs(&pkg) {
            if bundle::bundle_root(&version).is_none() {
                continue;
            }
            let b = bundle::load_bundle_dir(&version).unwrap();
            let Some(theirs) = community.bundle(&name, b.name()) else {
                continue;
            };
            let ours = render::render_bundle(&b, &RenderOptions::image(theirs.image.clone())).unwrap();
            let meta = |props: &[Property]| {
                props.iter().find_map(|p| match p {
                    Property::CsvMetadata(m) => Some(m.to_value()),
                    _ => None,
                })
            };
            if meta(&ours.properties) != meta(&theirs.properties) {
                mismatches.push(ours.name.clone());
            }
            assert_eq!(
                compared(&ours.properties),
                compared(&theirs.properties),
                "{}",
                ours.name
            );
            let images = |b: &olm_catalog::Bundle| {
                b.related_images
                    .iter()
                    .map(|r| r.image.clone())
                    .collect::<BTreeSet<_>>()
            };
            assert_eq!(images(&ours), images(theirs), "related images of {}", ours.name);
            compared_bundles += 1;
        }
    }
    println!("olm.csv.metadata compared on {compared_bundles} bundles; differing: {mismatches:?}");
    assert!(compared_bundles > 20);
    assert!(mismatches.is_empty(), "{mismatches:?}");
}

#[test]
fn bundle_objects_agree_with_the_older_community_catalog() {
    let corpus = corpus();
    let mut compared_bundles = 0;
    let mut identical = 0;
    for pkg in subdirs(&corpus.join("bundles")) {
        let name = pkg.file_name().unwrap().to_string_lossy().into_owned();
        let fbc_file = corpus
            .join("fbc/v4.16-bundle-object")
            .join(&name)
            .join("catalog.yaml");
        if !fbc_file.is_file() {
            continue;
        }
        let community = fbc::load_file(&fbc_file).unwrap();
        for version in subdirs(&pkg) {
            if bundle::bundle_root(&version).is_none() {
                continue;
            }
            let b = bundle::load_bundle_dir(&version).unwrap();
            let Some(theirs) = community.bundle(&name, b.name()) else {
                continue;
            };
            let ours = render::render_bundle(&b, &RenderOptions::default()).unwrap();
            let objects = |props: &[Property]| -> BTreeMap<String, serde_json::Value> {
                props
                    .iter()
                    .filter_map(|p| match p {
                        Property::BundleObject(o) => {
                            let v = o.decode().unwrap();
                            let key = format!(
                                "{}/{}",
                                v["kind"].as_str().unwrap_or(""),
                                v["metadata"]["name"].as_str().unwrap_or("")
                            );
                            Some((key, v))
                        }
                        _ => None,
                    })
                    .collect()
            };
            assert_eq!(
                objects(&ours.properties),
                objects(&theirs.properties),
                "bundle objects of {}",
                ours.name
            );
            assert_eq!(
                compared(&ours.properties),
                compared(&theirs.properties),
                "{}",
                ours.name
            );
            let data = |props: &[Property]| -> Vec<String> {
                props
                    .iter()
                    .filter_map(|p| match p {
                        Property::BundleObject(o) => Some(o.data.clone()),
                        _ => None,
                    })
                    .collect()
            };
            if data(&ours.properties) == data(&theirs.properties) {
                identical += 1;
            }
            compared_bundles += 1;
        }
    }
    println!("olm.bundle.object compared on {compared_bundles} bundles, byte-identical on {identical}");
    assert!(compared_bundles > 5);
    assert_eq!(
        identical, compared_bundles,
        "bundle objects must be encoded exactly as opm encodes them"
    );
}

#[test]
fn catalog_template_expands_to_the_community_catalog() {
    let corpus = corpus();
    let pkg = "rabbitmq-messaging-topology-operator";
    let template = fbc::load_file(
        corpus
            .join("bundles")
            .join(pkg)
            .join("catalog-templates/v4.21.yaml"),
    )
    .unwrap();
    let community = fbc::load_file(corpus.join("fbc/v4.21").join(pkg).join("catalog.yaml")).unwrap();
    let t = olm_catalog::template::BasicTemplate::all_in(&template)
        .remove(0)
        .unwrap();
    assert_eq!(t.bundle_images.len(), community.bundles.len());
    // Stand in for pulling each image: take the community's render of it.
    let mut expanded = t
        .expand(|image| {
            community
                .bundles
                .iter()
                .find(|b| b.image == image)
                .cloned()
                .ok_or(image.to_owned())
        })
        .unwrap();
    let mut want = community.clone();
    expanded.sort();
    want.sort();
    assert_eq!(expanded.channels, want.channels);
    assert_eq!(expanded.bundles, want.bundles);
    assert_eq!(
        expanded.packages[0].default_channel,
        want.packages[0].default_channel
    );
    println!(
        "{pkg}: the v4.21 template expands to the {} channels and {} bundles of the catalog",
        want.channels.len(),
        want.bundles.len()
    );
}
