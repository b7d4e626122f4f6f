//! PackageManifests of corpus catalogs, compared field by field with the CSVs
//! the community pipeline built them from.

use std::path::{Path, PathBuf};

use olm_api::packages::{PackageManifest, labels};
use olm_catalog::Catalog;
use serde_json::{Value, json};

use super::{
    describe::{HeadIcon, channel_head, head_csvs},
    manifest::{CatalogInfo, package_manifests},
};
use olm_catalog_store::bundles::strip_manifests;

fn info() -> CatalogInfo {
    CatalogInfo {
        namespace: "olm".into(),
        name: "community".into(),
        display_name: "Community Operators".into(),
        publisher: "Red Hat".into(),
        labels: [("team".to_owned(), "a".to_owned())].into(),
        created: None,
    }
}

/// The PackageManifests of a corpus catalog, built as the store keeps it:
/// descriptions taken first, manifests dropped.
fn manifests(dir: &Path) -> (Catalog, Vec<PackageManifest>) {
    let mut catalog = olm_catalog::fbc::load_dir(dir).expect("the corpus catalog loads");
    let full = catalog.clone();
    let heads = head_csvs(&catalog);
    strip_manifests(&mut catalog);
    (full, package_manifests(&info(), &catalog, &heads))
}

fn corpus() -> PathBuf {
    olm_testkit::corpus_dir()
}

/// The CSV of `package` at `version` in the corpus' bundle directories.
fn corpus_csv(package: &str, version: &str) -> Value {
    let dir = corpus()
        .join("bundles")
        .join(package)
        .join(version)
        .join("manifests");
    let path = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".clusterserviceversion.yaml"))
        .expect("a CSV");
    olm_testkit::yaml_file(&path)
}

/// Checks `channel.currentCSVDesc` against the CSV, field by field.
fn assert_describes(desc: &Value, csv: &Value, what: &str) {
    let spec = &csv["spec"];
    for (field, from) in [
        ("displayName", &spec["displayName"]),
        ("description", &spec["description"]),
        ("version", &spec["version"]),
        ("provider", &spec["provider"]),
        ("keywords", &spec["keywords"]),
        ("maintainers", &spec["maintainers"]),
        ("links", &spec["links"]),
        ("maturity", &spec["maturity"]),
        ("installModes", &spec["installModes"]),
        ("minKubeVersion", &spec["minKubeVersion"]),
        ("customresourcedefinitions", &spec["customresourcedefinitions"]),
        ("annotations", &csv["metadata"]["annotations"]),
    ] {
        if from.is_null() {
            continue;
        }
        assert_eq!(&desc[field], from, "{what}: currentCSVDesc.{field}");
    }
}

#[test]
fn a_current_catalog_renders_as_olm_does() {
    let (full, manifests) = manifests(&corpus().join("fbc/v4.21/kube-green"));
    assert_eq!(manifests.len(), 1);
    let manifest = &manifests[0];
    let json = serde_json::to_value(manifest).unwrap();
    let status = &json["status"];
    assert_eq!(status["packageName"], "kube-green");
    assert_eq!(status["catalogSource"], "community");
    assert_eq!(status["catalogSourceNamespace"], "olm");
    assert_eq!(status["catalogSourceDisplayName"], "Community Operators");
    assert_eq!(status["catalogSourcePublisher"], "Red Hat");
    assert_eq!(status["defaultChannel"], "alpha");
    let channel = &status["channels"][0];
    assert_eq!(channel["name"], "alpha");
    let alpha = full
        .channels_of("kube-green")
        .find(|c| c.name == "alpha")
        .unwrap();
    let head = channel_head(alpha).expect("alpha has a head");
    assert_eq!(channel["currentCSV"], head);
    let version = head.trim_start_matches("kube-green.v");
    let csv = corpus_csv("kube-green", version);
    assert_describes(&channel["currentCSVDesc"], &csv, head);
    assert_eq!(status["provider"], csv["spec"]["provider"]);
    assert!(
        channel["currentCSVDesc"].get("icon").is_none(),
        "icons are left out"
    );
    assert!(
        !channel["currentCSVDesc"]["relatedImages"]
            .as_array()
            .unwrap()
            .is_empty(),
        "related images come from the bundle"
    );

    // Every bundle of the channel, newest first.
    let entries = channel["entries"].as_array().unwrap();
    assert_eq!(entries.len(), alpha.entries.len());
    assert_eq!(entries[0]["name"], head);
    assert_eq!(entries[0]["version"], version);
    let versions: Vec<semver::Version> = entries
        .iter()
        .map(|e| semver::Version::parse(e["version"].as_str().unwrap()).unwrap())
        .collect();
    assert!(versions.windows(2).all(|w| w[0] > w[1]), "{versions:?}");

    let labels = manifest.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[labels::CATALOG], "community");
    assert_eq!(labels[labels::CATALOG_NAMESPACE], "olm");
    assert_eq!(labels["team"], "a", "the CatalogSource's labels");
    assert_eq!(labels[labels::PROVIDER], csv["spec"]["provider"]["name"]);
    assert_eq!(labels[labels::DEFAULT_OS], "supported");
    assert_eq!(labels[labels::DEFAULT_ARCH], "supported");
    assert_eq!(manifest.metadata.name.as_deref(), Some("kube-green"));
    assert_eq!(manifest.metadata.namespace.as_deref(), Some("olm"));
}

#[test]
fn an_older_catalog_is_described_from_its_csv_objects() {
    let (full, manifests) = manifests(&corpus().join("fbc/v4.16-bundle-object/kube-green"));
    let json = serde_json::to_value(&manifests[0]).unwrap();
    let channel = &json["status"]["channels"][0];
    let head = channel["currentCSV"].as_str().unwrap();
    // The CSV object in the catalog is the source; it must come through whole.
    let csv = full
        .bundle("kube-green", head)
        .unwrap()
        .properties
        .iter()
        .find_map(|p| match p {
            olm_catalog::Property::BundleObject(o) => {
                o.decode().ok().filter(|v| v["kind"] == "ClusterServiceVersion")
            }
            _ => None,
        })
        .expect("the head carries its CSV");
    assert_describes(&channel["currentCSVDesc"], &csv, head);
    assert_eq!(
        channel["currentCSVDesc"]["version"], csv["spec"]["version"],
        "the version"
    );
}

#[test]
fn every_corpus_package_has_a_manifest_with_every_channel() {
    for dir in ["fbc/v4.21", "fbc/v4.16-bundle-object"] {
        for entry in std::fs::read_dir(corpus().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let (full, manifests) = manifests(&path);
            for package in &full.packages {
                let manifest = manifests
                    .iter()
                    .find(|m| m.status.package_name == package.name)
                    .unwrap_or_else(|| panic!("{}: no manifest for {}", path.display(), package.name));
                let channels: Vec<&str> = manifest.status.channels.iter().map(|c| c.name.as_str()).collect();
                let mut expected: Vec<&str> = full
                    .channels_of(&package.name)
                    .filter(|c| channel_head(c).is_some())
                    .map(|c| c.name.as_str())
                    .collect();
                expected.sort_unstable();
                assert_eq!(channels, expected, "{}", package.name);
                for channel in &manifest.status.channels {
                    assert!(
                        !channel.current_csv_desc.display_name.is_empty(),
                        "{}/{}: the head {} is described",
                        package.name,
                        channel.name,
                        channel.current_csv
                    );
                }
                let default = &manifest.status.default_channel;
                assert!(
                    channels.contains(&default.as_str()),
                    "{}: default {default}",
                    package.name
                );
            }
        }
    }
}

#[test]
fn deprecations_and_deprecated_bundles_show_as_olm_shows_them() {
    let fbc = r#"
{"schema":"olm.package","name":"db","defaultChannel":"stable"}
{"schema":"olm.channel","package":"db","name":"stable","entries":[{"name":"db.v1.0.0"},{"name":"db.v1.1.0","replaces":"db.v1.0.0"},{"name":"db.v1.2.0","replaces":"db.v1.1.0"}]}
{"schema":"olm.channel","package":"db","name":"fork","entries":[{"name":"db.v1.0.0"},{"name":"db.v1.1.0"}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.0.0","image":"db:1.0.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.0.0"}},{"type":"olm.deprecated","value":{}}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.1.0","image":"db:1.1.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.1.0"}}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.2.0","image":"db:1.2.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.2.0"}},{"type":"olm.csv.metadata","value":{"displayName":"DB","provider":{"name":"Acme","url":"https://acme.example"},"labels":{"operatorframework.io/arch.arm64":"supported"}}}]}
{"schema":"olm.deprecations","package":"db","entries":[{"reference":{"schema":"olm.package"},"message":"db is old"},{"reference":{"schema":"olm.channel","name":"stable"},"message":"use fast"},{"reference":{"schema":"olm.bundle","name":"db.v1.1.0"},"message":"1.1 is broken"}]}
"#;
    let mut catalog = olm_catalog::fbc::parse_str(Path::new("db.json"), fbc).unwrap();
    let heads = head_csvs(&catalog);
    strip_manifests(&mut catalog);
    let manifests = package_manifests(&info(), &catalog, &heads);
    let json = serde_json::to_value(&manifests[0]).unwrap();
    let status = &json["status"];
    assert_eq!(status["deprecation"], json!({"message": "db is old"}));
    // The forked channel has two heads: OLM's registry serves none, so it is left out.
    assert_eq!(status["channels"].as_array().unwrap().len(), 1);
    let stable = &status["channels"][0];
    assert_eq!(stable["deprecation"], json!({"message": "use fast"}));
    assert_eq!(
        stable["entries"],
        json!([
            {"name": "db.v1.2.0", "version": "1.2.0"},
            {"name": "db.v1.1.0", "version": "1.1.0", "deprecation": {"message": "1.1 is broken"}},
        ]),
        "newest first; the olm.deprecated bundle is left out"
    );
    assert_eq!(stable["currentCSVDesc"]["displayName"], "DB");
    assert_eq!(
        status["provider"],
        json!({"name": "Acme", "url": "https://acme.example"})
    );
    let labels = manifests[0].metadata.labels.as_ref().unwrap();
    assert_eq!(labels[labels::PROVIDER_URL], "https://acme.example");
    assert_eq!(labels["operatorframework.io/arch.arm64"], "supported");
    assert!(
        !labels.contains_key(labels::DEFAULT_ARCH),
        "the CSV names an arch: no default"
    );
    assert_eq!(labels[labels::DEFAULT_OS], "supported");
}

#[test]
fn a_heads_icon_is_its_csvs_or_else_its_packages() {
    let fbc = r#"
{"schema":"olm.package","name":"db","defaultChannel":"stable","icon":{"base64data":"cGFja2FnZQ==","mediatype":"image/png"}}
{"schema":"olm.channel","package":"db","name":"stable","entries":[{"name":"db.v1.0.0"}]}
{"schema":"olm.channel","package":"db","name":"fast","entries":[{"name":"db.v2.0.0"}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.0.0","image":"db:1.0.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.0.0"}},{"type":"olm.csv.metadata","value":{"displayName":"DB"}}]}
{"schema":"olm.bundle","package":"db","name":"db.v2.0.0","image":"db:2.0.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"2.0.0"}},{"type":"olm.bundle.object","value":{"data":"eyJraW5kIjoiQ2x1c3RlclNlcnZpY2VWZXJzaW9uIiwic3BlYyI6eyJpY29uIjpbeyJiYXNlNjRkYXRhIjoiWTNOMiIsIm1lZGlhdHlwZSI6ImltYWdlL2pwZWcifV19fQ=="}}]}
"#;
    let catalog = olm_catalog::fbc::parse_str(Path::new("db.json"), fbc).unwrap();
    let heads = head_csvs(&catalog);
    let icon = |head: &str| heads[&("db".to_owned(), head.to_owned())].icon.clone().unwrap();
    // olm.csv.metadata carries no icon: OLM's registry gives the package's.
    assert_eq!(&icon("db.v1.0.0").data[..], b"package");
    assert_eq!(icon("db.v1.0.0").media_type, "image/png");
    // A bundle that carries its CSV: the CSV's first icon.
    assert_eq!(&icon("db.v2.0.0").data[..], b"csv");
    assert_eq!(icon("db.v2.0.0").media_type, "image/jpeg");
}

#[test]
fn corpus_heads_keep_their_packages_icon() {
    let dir = corpus().join("fbc/v4.21/kube-green");
    let catalog = olm_catalog::fbc::load_dir(&dir).expect("the corpus catalog loads");
    let package = catalog.package("kube-green").unwrap();
    let expected = HeadIcon::decode(package.icon.as_ref().expect("kube-green has an icon")).unwrap();
    let heads = head_csvs(&catalog);
    assert!(!heads.is_empty());
    for (key, head) in &heads {
        assert_eq!(head.icon.as_ref(), Some(&expected), "{key:?}");
    }
    assert!(expected.data.starts_with(b"<svg"), "kube-green's icon is an SVG");
}

mod served {
    use std::collections::BTreeMap;

    use kube::runtime::reflector::store;
    use olm_api::v1alpha1::CatalogSource;
    use olm_resolver::model::CatalogId;
    use serde_json::Value;

    use olm_catalog_store::{
        bundles::BundleSource,
        catalogs::{CatalogContent, CatalogStore},
    };

    use crate::{
        api::{self, Answer, human_duration},
        describe::Describe,
        view::Packages,
    };

    const DB: &str = r#"
{"schema":"olm.package","name":"db","defaultChannel":"stable","icon":{"base64data":"PHN2Zz48L3N2Zz4=","mediatype":"image/svg+xml"}}
{"schema":"olm.channel","package":"db","name":"stable","entries":[{"name":"db.v1.0.0"}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.0.0","image":"db:1.0.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.0.0"}},{"type":"olm.csv.metadata","value":{"displayName":"DB","provider":{"name":"Acme"}}}]}
"#;
    const APP: &str = r#"
{"schema":"olm.package","name":"app","defaultChannel":"stable"}
{"schema":"olm.channel","package":"app","name":"stable","entries":[{"name":"app.v0.1.0"}]}
{"schema":"olm.bundle","package":"app","name":"app.v0.1.0","image":"app:0.1.0","properties":[{"type":"olm.package","value":{"packageName":"app","version":"0.1.0"}},{"type":"olm.csv.metadata","value":{"displayName":"App","provider":{"name":"Other"}}}]}
"#;

    /// `db` in the global catalog `olm/global`, `app` in `team/own`.
    fn packages() -> Packages {
        let catalogs = CatalogStore::new();
        let now = olm_runtime::conditions::now();
        for (ns, name, fbc) in [("olm", "global", DB), ("team", "own", APP)] {
            let id = CatalogId::new(name, ns);
            let catalog = olm_catalog::fbc::parse_str(std::path::Path::new("c.json"), fbc).unwrap();
            catalogs.set_loaded(
                &id,
                0,
                CatalogContent::described(
                    id.clone(),
                    catalog,
                    Vec::new(),
                    BundleSource::Memory,
                    Describe::Heads,
                ),
                &now,
            );
        }
        let (sources, mut writer) = store::<CatalogSource>();
        let mut source: CatalogSource = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "global", "namespace": "olm", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"sourceType": "grpc", "displayName": "Global Operators", "publisher": "Acme"},
        }))
        .unwrap();
        source.metadata.labels = Some([("tier".to_owned(), "gold".to_owned())].into());
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(source));
        Packages {
            catalogs,
            sources,
            global_namespace: "olm".into(),
            subscriptions: store().0,
            csvs: store().0,
        }
    }

    fn get(packages: &Packages, path_and_query: &str, accept: &str) -> (u16, Value) {
        let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
        let query: BTreeMap<String, String> = crate::server::parse_query(query);
        let list = |ns: Option<&str>| (packages.list(ns), "7".to_owned());
        match api::answer("GET", path, &query, accept, list, 1_767_225_600 + 3 * 3600) {
            Answer::Json(code, body) => (code, body),
            Answer::Watch(q) => panic!("a watch: {q:?}"),
            Answer::Icon { namespace, name } => panic!("the icon of {namespace}/{name}"),
        }
    }

    fn names(list: &Value) -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                format!(
                    "{}/{}",
                    i["metadata"]["namespace"].as_str().unwrap(),
                    i["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    const BASE: &str = "/apis/packages.operators.coreos.com/v1";

    #[test]
    fn discovery_lists_the_group_and_its_resource() {
        let p = packages();
        let (code, groups) = get(&p, "/apis", "");
        assert_eq!(code, 200);
        assert_eq!(groups["groups"][0]["name"], "packages.operators.coreos.com");
        let (_, group) = get(&p, "/apis/packages.operators.coreos.com", "");
        assert_eq!(
            group["preferredVersion"]["groupVersion"],
            "packages.operators.coreos.com/v1"
        );
        let (_, resources) = get(&p, BASE, "");
        let resource = &resources["resources"][0];
        assert_eq!(resource["name"], "packagemanifests");
        assert_eq!(resource["kind"], "PackageManifest");
        assert_eq!(resource["namespaced"], true);
        assert_eq!(resource["verbs"], serde_json::json!(["get", "list", "watch"]));
        let icon = &resources["resources"][1];
        assert_eq!(icon["name"], "packagemanifests/icon");
        assert_eq!(icon["kind"], "PackageManifest");
        assert_eq!(icon["namespaced"], true);
        assert_eq!(icon["verbs"], serde_json::json!(["get"]));
        let plan = &resources["resources"][2];
        assert_eq!(plan["name"], "packagemanifests/plan");
        assert_eq!(plan["kind"], "PackagePlan");
        assert_eq!(plan["verbs"], serde_json::json!(["create"]));
    }

    #[test]
    fn icons_are_the_default_channel_heads_as_the_namespace_sees_them() {
        let p = packages();
        let query = BTreeMap::new();
        let list = |ns: Option<&str>| (p.list(ns), "1".to_owned());
        let answer = api::answer(
            "GET",
            &format!("{BASE}/namespaces/team/packagemanifests/db/icon"),
            &query,
            "",
            list,
            0,
        );
        assert_eq!(
            answer,
            Answer::Icon {
                namespace: "team".into(),
                name: "db".into()
            }
        );
        let db = p.icon("team", "db").expect("team sees the global db");
        assert_eq!((db.channel.as_str(), db.head.as_str()), ("stable", "db.v1.0.0"));
        let icon = db.icon.expect("db's package icon");
        assert_eq!(icon.media_type, "image/svg+xml");
        assert_eq!(&icon.data[..], b"<svg></svg>");
        let app = p.icon("team", "app").expect("team sees its app");
        assert_eq!(app.icon, None, "app has no icon: the default one is served");
        assert_eq!(p.icon("other", "app"), None, "other does not see team's catalog");
        // Lists and gets carry no icons.
        let (_, db) = get(&p, &format!("{BASE}/namespaces/team/packagemanifests/db"), "");
        assert_eq!(db["status"]["channels"][0]["currentCSVDesc"].get("icon"), None);
    }

    #[test]
    fn a_plan_is_asked_for_at_a_package_of_a_namespace() {
        assert_eq!(
            api::plan_path(&format!("{BASE}/namespaces/team/packagemanifests/demo-app/plan")),
            Some(("team", "demo-app"))
        );
        for path in [
            format!("{BASE}/namespaces/team/packagemanifests/demo-app"),
            format!("{BASE}/packagemanifests/demo-app/plan"),
            format!("{BASE}/namespaces/team/packagemanifests/demo-app/icon"),
            "/apis/other.group/v1/namespaces/team/packagemanifests/demo-app/plan".to_owned(),
        ] {
            assert_eq!(api::plan_path(&path), None, "{path}");
        }
    }

    #[test]
    fn a_plan_through_the_package_server_reads_the_namespace_from_its_stores() {
        let p = packages();
        let spec = olm_api::v1alpha1::SubscriptionSpec {
            catalog_source: "own".into(),
            catalog_source_namespace: "team".into(),
            package: "app".into(),
            ..Default::default()
        };
        let request = olm_api::packages::PackagePlan::request("team", "app", spec);
        let answer = p.plan("team", "app", request).expect("a plan");
        let status = answer.status.expect("a status");
        assert_eq!(status.bundle, "app.v0.1.0");
        assert_eq!(status.steps.len(), 1);
        assert_eq!(answer.kind, "PackagePlan");
        assert_eq!(answer.metadata.namespace.as_deref(), Some("team"));
    }

    #[test]
    fn a_namespace_sees_its_catalogs_and_the_global_ones() {
        let p = packages();
        let (_, team) = get(&p, &format!("{BASE}/namespaces/team/packagemanifests"), "");
        assert_eq!(team["kind"], "PackageManifestList");
        assert_eq!(team["metadata"]["resourceVersion"], "7");
        assert_eq!(
            names(&team),
            ["team/app", "team/db"],
            "global packages appear in the namespace asked for"
        );
        let (_, other) = get(&p, &format!("{BASE}/namespaces/other/packagemanifests"), "");
        assert_eq!(names(&other), ["other/db"]);
        let (_, global) = get(&p, &format!("{BASE}/namespaces/olm/packagemanifests"), "");
        assert_eq!(names(&global), ["olm/db"]);
        let (_, all) = get(&p, &format!("{BASE}/packagemanifests"), "");
        assert_eq!(
            names(&all),
            ["olm/db", "team/app"],
            "every package once, in its own namespace"
        );

        let (code, db) = get(&p, &format!("{BASE}/namespaces/team/packagemanifests/db"), "");
        assert_eq!(code, 200);
        assert_eq!(db["kind"], "PackageManifest");
        assert_eq!(db["status"]["catalogSource"], "global");
        assert_eq!(db["status"]["catalogSourceNamespace"], "olm");
        assert_eq!(db["status"]["catalogSourceDisplayName"], "Global Operators");
        assert_eq!(db["status"]["catalogSourcePublisher"], "Acme");
        assert_eq!(db["metadata"]["labels"]["tier"], "gold");
        assert_eq!(db["status"]["channels"][0]["currentCSVDesc"]["displayName"], "DB");
        let (code, missing) = get(&p, &format!("{BASE}/namespaces/team/packagemanifests/nope"), "");
        assert_eq!(code, 404);
        assert_eq!(missing["reason"], "NotFound");
        assert_eq!(missing["details"]["name"], "nope");
    }

    #[test]
    fn label_and_field_selectors_filter_lists() {
        let p = packages();
        let list = |q: &str| names(&get(&p, &format!("{BASE}/namespaces/team/packagemanifests?{q}"), "").1);
        assert_eq!(list("labelSelector=catalog%3Down"), ["team/app"]);
        assert_eq!(list("labelSelector=catalog-namespace%3Dolm"), ["team/db"]);
        assert_eq!(list("labelSelector=provider%3DAcme"), ["team/db"]);
        assert_eq!(
            list("labelSelector=operatorframework.io%2Farch.amd64%3Dsupported").len(),
            2
        );
        assert_eq!(
            list("labelSelector=operatorframework.io%2Fos.linux%3Dsupported").len(),
            2
        );
        assert!(list("labelSelector=operatorframework.io%2Farch.arm64").is_empty());
        assert_eq!(list("fieldSelector=metadata.name%3Ddb"), ["team/db"]);
        let (code, _) = get(
            &p,
            &format!("{BASE}/namespaces/team/packagemanifests?fieldSelector=spec.x%3D1"),
            "",
        );
        assert_eq!(code, 400);
    }

    #[test]
    fn kubectl_gets_olms_columns() {
        let p = packages();
        let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
        let (_, table) = get(&p, &format!("{BASE}/namespaces/team/packagemanifests"), accept);
        assert_eq!(table["kind"], "Table");
        let columns: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(columns, ["Name", "Catalog", "Age"]);
        assert_eq!(
            table["rows"][1]["cells"],
            serde_json::json!(["db", "Global Operators", "3h"])
        );
        assert_eq!(table["rows"][1]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(
            table["rows"][0]["cells"][2], "<unknown>",
            "no CatalogSource known: no age"
        );
        assert_eq!(human_duration(59), "59s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
    }

    #[test]
    fn writes_are_refused_and_watches_are_recognised() {
        let p = packages();
        let query = BTreeMap::new();
        let list = |ns: Option<&str>| (p.list(ns), "1".to_owned());
        let Answer::Json(405, _) = api::answer(
            "DELETE",
            &format!("{BASE}/namespaces/team/packagemanifests/db"),
            &query,
            "",
            list,
            0,
        ) else {
            panic!("DELETE is refused")
        };
        let query: BTreeMap<String, String> = [("watch".to_owned(), "true".to_owned())].into();
        let Answer::Watch(q) = api::answer(
            "GET",
            &format!("{BASE}/namespaces/team/packagemanifests"),
            &query,
            "",
            list,
            0,
        ) else {
            panic!("a watch")
        };
        assert_eq!(q.namespace.as_deref(), Some("team"));
    }
}
