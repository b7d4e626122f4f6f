//! Actions from a bundle to `kubectl olm show`: a bundle directory whose CSV
//! declares them (the fixture `olm-catalog/testdata/actions-demo`) is rendered
//! into a catalog as `opm render` would, both ways a catalog holds a CSV
//! (bundle objects, or `olm.csv.metadata`); the catalog validates; its
//! PackageManifest, built as catalog-operator serves it, carries the
//! declaration in the head's `currentCSVDesc`; and `show` prints it.

use std::path::PathBuf;

use kubectl_olm::show::{ActionInfo, ParamInfo, details, render_details};
use olm_api::actions::{self, Actions, validate_params};
use olm_catalog::{
    Catalog, Property,
    render::{RenderOptions, render_package_dir_with},
    validate::validate,
};
use olm_catalog_store::{bundles::strip_manifests, channel_heads::head_csvs};
use olm_packageserver::manifest::{CatalogInfo, package_manifests};
use serde_json::json;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../olm-catalog/testdata/actions-demo")
}

fn rendered(options: &RenderOptions) -> Catalog {
    let render = render_package_dir_with(fixture(), options).expect("the fixture renders");
    assert_eq!(render.warnings, Vec::<String>::new());
    render.catalog
}

fn param(name: &str, type_: &str, required: bool) -> ParamInfo {
    ParamInfo {
        name: name.into(),
        type_: type_.into(),
        required,
    }
}

#[test]
fn actions_go_from_a_bundle_through_a_catalog_to_show() {
    let ways = [
        ("bundle objects", RenderOptions::default()),
        (
            "olm.csv.metadata",
            RenderOptions::image("registry.test/actions-demo:0.1.0"),
        ),
    ];
    for (way, options) in ways {
        let mut catalog = rendered(&options);
        assert_eq!(validate(&catalog), Vec::new(), "{way}: the catalog validates");

        // The render carries the declaration as the bundle property, as JSON.
        let bundle = &catalog.bundles[0];
        let carried: Vec<&Property> = bundle.properties_of(actions::PROPERTY).collect();
        let [Property::Other { value, .. }] = carried.as_slice() else {
            panic!("{way}: one {} property, not {carried:?}", actions::PROPERTY);
        };
        assert_eq!(value.to_value()["backup"]["required"], json!(["path"]), "{way}");

        // The PackageManifest as catalog-operator serves it: heads described
        // first, then the manifests dropped.
        let heads = head_csvs(&catalog);
        strip_manifests(&mut catalog);
        let info = CatalogInfo {
            namespace: "olm".into(),
            name: "tests".into(),
            ..CatalogInfo::default()
        };
        let manifests = package_manifests(&info, &catalog, &heads);
        let [manifest] = manifests.as_slice() else {
            panic!("{way}: one PackageManifest, not {}", manifests.len());
        };
        let channel = &manifest.status.channels[0];
        let annotations = &channel.current_csv_desc.annotations;
        assert!(
            annotations[actions::ANNOTATION].contains("enum: [none, gzip, xz]"),
            "{way}: the annotation as the CSV writes it: {annotations:?}"
        );

        // What the PackageManifest carries is enough to check a run's parameters.
        let offered = Actions::of_annotations(&channel.current_csv, annotations)
            .unwrap()
            .expect("the actions");
        let backup = offered.get("backup").unwrap();
        assert_eq!(
            validate_params(backup, &json!({"path": "/srv", "keep": 7})),
            Ok(())
        );
        let refused = validate_params(backup, &json!({"keep": 7})).unwrap_err();
        assert_eq!(
            refused.to_string(),
            r#"action "backup": parameter `path`: is required; give it"#
        );

        let details = details(manifest);
        assert_eq!(
            details.bundles[0].actions,
            [
                ActionInfo {
                    name: "backup".into(),
                    description: "Write a backup of the database and return its path and size.".into(),
                    params: vec![
                        param("compression", "string", false),
                        param("keep", "integer", false),
                        param("path", "string", true),
                    ],
                },
                ActionInfo {
                    name: "pause".into(),
                    description: "Stop serving writes until resumed.".into(),
                    params: vec![],
                },
            ],
            "{way}"
        );
        let text = render_details(&details);
        let table = "    Actions:
      NAME    PARAMETERS                                                     DESCRIPTION
      backup  compression (string), keep (integer), path (string, required)  Write a backup of the database and return its path and size.
      pause   -                                                              Stop serving writes until resumed.
";
        assert!(text.contains(table), "{way}:\n{text}");
    }
}
