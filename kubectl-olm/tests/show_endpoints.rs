//! Relation endpoints from a bundle to `kubectl olm show`: a bundle directory
//! whose CSV declares them (the fixture `olm-catalog/testdata/endpoints-demo`)
//! is rendered into a catalog as `opm render` would, both ways a catalog holds
//! a CSV (bundle objects, or `olm.csv.metadata`); the catalog validates; its
//! PackageManifest, built as catalog-operator serves it, carries the
//! declaration in the head's `currentCSVDesc`; and `show` prints it.

use std::path::PathBuf;

use kubectl_olm::show::{EndpointInfo, details, render_details};
use olm_api::endpoints::{self, Role, Scope};
use olm_catalog::{
    Catalog, Property,
    render::{RenderOptions, render_package_dir_with},
    validate::validate,
};
use olm_catalog_store::{bundles::strip_manifests, channel_heads::head_csvs};
use olm_packageserver::manifest::{CatalogInfo, package_manifests};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../olm-catalog/testdata/endpoints-demo")
}

fn rendered(options: &RenderOptions) -> Catalog {
    let render = render_package_dir_with(fixture(), options).expect("the fixture renders");
    assert_eq!(render.warnings, Vec::<String>::new());
    render.catalog
}

fn endpoint(role: Role, name: &str, interface: &str, limit: Option<u32>, scope: Scope) -> EndpointInfo {
    EndpointInfo {
        role,
        name: name.into(),
        interface: interface.into(),
        limit,
        scope,
    }
}

#[test]
fn endpoints_go_from_a_bundle_through_a_catalog_to_show() {
    let ways = [
        ("bundle objects", RenderOptions::default()),
        (
            "olm.csv.metadata",
            RenderOptions::image("registry.test/endpoints-demo:0.1.0"),
        ),
    ];
    for (way, options) in ways {
        let mut catalog = rendered(&options);
        assert_eq!(validate(&catalog), Vec::new(), "{way}: the catalog validates");

        // The render carries the declaration as the bundle property, as JSON.
        let bundle = &catalog.bundles[0];
        let carried: Vec<&Property> = bundle.properties_of(endpoints::PROPERTY).collect();
        let [Property::Other { value, .. }] = carried.as_slice() else {
            panic!("{way}: one {} property, not {carried:?}", endpoints::PROPERTY);
        };
        assert_eq!(
            value.to_value()["requires"]["logs"],
            serde_json::json!({"interface": "loki-push", "limit": 1, "scope": "container"}),
            "{way}"
        );

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
        let annotations = &manifest.status.channels[0].current_csv_desc.annotations;
        assert!(
            annotations[endpoints::ANNOTATION].contains("interface: endpoints-demo-ring"),
            "{way}: the annotation as the CSV writes it: {annotations:?}"
        );

        let details = details(manifest);
        assert_eq!(
            details.bundles[0].endpoints,
            [
                endpoint(Role::Provides, "db", "postgresql", None, Scope::Global),
                endpoint(
                    Role::Provides,
                    "metrics",
                    "prometheus-scrape",
                    Some(3),
                    Scope::Global
                ),
                endpoint(Role::Requires, "logs", "loki-push", Some(1), Scope::Container),
                endpoint(Role::Peers, "ring", "endpoints-demo-ring", None, Scope::Global),
            ],
            "{way}"
        );
        let text = render_details(&details);
        let table = "    Endpoints:
      ROLE      NAME     INTERFACE            LIMIT  SCOPE
      provides  db       postgresql           -      global
      provides  metrics  prometheus-scrape    3      global
      requires  logs     loki-push            1      container
      peers     ring     endpoints-demo-ring  -      global
";
        assert!(text.contains(table), "{way}:\n{text}");
    }
}
