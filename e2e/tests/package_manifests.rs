//! The PackageManifest API on a real control plane, served by catalog-operator
//! in-process and reached through the API server's aggregator: discovery lists
//! the group; a namespace lists every package of its catalogs and of the
//! global ones; a corpus package carries its channels and `currentCSVDesc` as
//! the CSV writes them; a watch sees a package appear when a catalog gains it;
//! a bundle whose CSV declares relation endpoints or actions (olm-rs's
//! annotations) keeps them in its head's `currentCSVDesc`.
//!
//! The aggregator reaches the host process through a Service of type
//! `ExternalName` naming 127.0.0.1: the API server dials an ExternalName
//! Service's name directly, so no Pod, Endpoints or kube-proxy is needed.
//!
//! As deployed, the APIService comes from `manifests/packageserver.yaml`
//! (applied by the admin, here pointed at the test's Service) and
//! catalog-operator, acting as its ServiceAccount with the RBAC of
//! `manifests/`, only sets its `caBundle`.

mod common;

use std::{path::Path, sync::Arc, time::Duration};

use catalog_operator::{controllers::Options, run::controllers};
use e2e::inprocess::{
    IdentityClient, Registry, demo_catalog, demo_index, package_server, wait_package_manifests,
};
use futures::{StreamExt, TryStreamExt};
use kube::{
    Api,
    api::{ListParams, WatchEvent, WatchParams},
};
use olm_api::{
    actions::Actions,
    endpoints::{Endpoints, Role, Scope},
    packages::PackageManifest,
    v1alpha1::CatalogSource,
};
use olm_catalog::render::{RenderOptions, render_package_dir_with};
use olm_registry::server::RegistryIndex;
use olm_runtime::{Leadership, Parts, apply::FIELD_MANAGER_CATALOG};
use olm_testkit::{
    corpus_dir, identity::Binary, install_crds, objects::catalog_is_ready, repo_root, wait_for,
    with_namespace, yaml_file,
};
use serde_json::Value;

use common::*;

#[tokio::test]
async fn package_manifests_are_served_through_the_aggregator() {
    with_namespace("pkgs", |client, ns| async move {
        install_crds(&client).await;
        // The Service and APIService as deployed; the APIService goes when the test ends.
        let (package_server, api_service) = package_server(&client, &ns).await;
        let registry = Registry::start(demo_index(false), "127.0.0.1:0".parse().unwrap()).await;
        let options = Options {
            global_catalog_namespace: ns.clone(),
            namespace: Some(ns.clone()),
            catalog_health_interval: Duration::from_secs(1),
            package_server: Some(package_server),
            ..Options::default()
        };
        let account = IdentityClient::new(&client, Binary::CatalogOperator, None).await;
        let parts = Parts::new(
            account.client.clone(),
            Leadership::standalone(),
            FIELD_MANAGER_CATALOG,
        )
        .unwrap();
        let operator = tokio::spawn(controllers(&parts, options).unwrap());

        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        create(&sources, &catalog_source("demo", &registry.addr.to_string())).await;
        wait_for(&sources, "demo", "CatalogSource demo is READY", catalog_is_ready).await;

        // Every package of the namespace's catalogs, and of the global ones in
        // any other namespace (this one is the global catalog namespace).
        let mut expected: Vec<String> = demo_catalog(false)
            .packages
            .iter()
            .map(|p| p.name.clone())
            .collect();
        expected.sort();
        for namespace in [ns.clone(), format!("{ns}-elsewhere")] {
            let items = wait_package_manifests(&client, &namespace, expected.len()).await;
            let mut names: Vec<String> = items.iter().filter_map(|m| m.metadata.name.clone()).collect();
            names.sort();
            assert_eq!(names, expected, "PackageManifests in {namespace}");
            assert!(
                items
                    .iter()
                    .all(|m| m.metadata.namespace.as_deref() == Some(namespace.as_str()))
            );
        }

        // Discovery lists the group.
        let groups = client.list_api_groups().await.unwrap();
        assert!(
            groups
                .groups
                .iter()
                .any(|g| g.name == "packages.operators.coreos.com"),
            "discovery lists packages.operators.coreos.com"
        );
        let resources = client
            .list_api_group_resources("packages.operators.coreos.com/v1")
            .await
            .unwrap();
        assert_eq!(resources.resources[0].name, "packagemanifests");
        assert_eq!(resources.resources[1].name, "packagemanifests/icon");

        // A watch sees a corpus package appear when a catalog gains it.
        let api: Api<PackageManifest> = Api::namespaced(client.clone(), &ns);
        let mut events = api
            .watch(&WatchParams::default().timeout(120), "0")
            .await
            .unwrap()
            .boxed();
        let corpus = olm_catalog::fbc::load_dir(corpus_dir().join("fbc/v4.21/kube-green")).unwrap();
        let corpus_registry = Registry::start(
            Arc::new(RegistryIndex::new(corpus.clone())),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await;
        create(
            &sources,
            &catalog_source("corpus", &corpus_registry.addr.to_string()),
        )
        .await;
        let appeared = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(event) = events.try_next().await.unwrap() {
                if let WatchEvent::Added(m) = event
                    && m.metadata.name.as_deref() == Some("kube-green")
                {
                    return m;
                }
            }
            panic!("the watch ended before kube-green appeared");
        })
        .await
        .expect("kube-green appears on the watch");
        assert_eq!(appeared.status.catalog_source, "corpus");

        // Labels select by catalog.
        let selected = api
            .list(&ListParams::default().labels("catalog=corpus"))
            .await
            .unwrap();
        assert_eq!(selected.items.len(), 1);

        // The corpus package as OLM renders it, against the CSV it was built from.
        let kube_green = serde_json::to_value(api.get("kube-green").await.unwrap()).unwrap();
        let status = &kube_green["status"];
        assert_eq!(status["packageName"], "kube-green");
        assert_eq!(status["defaultChannel"], "alpha");
        assert_eq!(status["catalogSourceNamespace"], ns.as_str());
        let channel = &status["channels"][0];
        let head = channel["currentCSV"].as_str().unwrap().to_owned();
        let version = head.trim_start_matches("kube-green.v");
        let csv = corpus_csv("kube-green", version);
        let desc = &channel["currentCSVDesc"];
        for (field, from) in [
            ("displayName", &csv["spec"]["displayName"]),
            ("description", &csv["spec"]["description"]),
            ("version", &csv["spec"]["version"]),
            ("provider", &csv["spec"]["provider"]),
            ("keywords", &csv["spec"]["keywords"]),
            ("maintainers", &csv["spec"]["maintainers"]),
            ("links", &csv["spec"]["links"]),
            ("installModes", &csv["spec"]["installModes"]),
            ("minKubeVersion", &csv["spec"]["minKubeVersion"]),
            (
                "customresourcedefinitions",
                &csv["spec"]["customresourcedefinitions"],
            ),
            ("annotations", &csv["metadata"]["annotations"]),
        ] {
            if !from.is_null() {
                assert_eq!(&desc[field], from, "currentCSVDesc.{field} of {head}");
            }
        }
        let alpha = corpus
            .channels_of("kube-green")
            .find(|c| c.name == "alpha")
            .unwrap();
        assert_eq!(
            channel["entries"].as_array().unwrap().len(),
            alpha.entries.len(),
            "every bundle of the channel"
        );
        assert_eq!(channel["entries"][0]["name"], head.as_str());

        // Relation endpoints reach the PackageManifest: a bundle of the project's
        // own whose CSV declares them, rendered as `opm render` renders an image
        // (olm.csv.metadata, no manifests), served over gRPC.
        let endpoints_catalog = render_package_dir_with(
            repo_root().join("olm-catalog/testdata/endpoints-demo"),
            &RenderOptions::image("registry.test/endpoints-demo:0.1.0"),
        )
        .expect("the endpoints fixture renders")
        .catalog;
        let endpoints_registry = Registry::start(
            Arc::new(RegistryIndex::new(endpoints_catalog)),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await;
        create(
            &sources,
            &catalog_source("endpoints", &endpoints_registry.addr.to_string()),
        )
        .await;
        wait_for(
            &sources,
            "endpoints",
            "CatalogSource endpoints is READY",
            catalog_is_ready,
        )
        .await;
        let served = package_manifest(&api, "endpoints-demo").await;
        let channel = &served.status.channels[0];
        let endpoints =
            Endpoints::of_annotations(&channel.current_csv, &channel.current_csv_desc.annotations)
                .expect("the served declaration reads")
                .expect("the head's currentCSVDesc carries the endpoints annotation");
        let declared: Vec<(Role, &str, &str)> = endpoints
            .iter()
            .map(|(role, e)| (role, e.name.as_str(), e.interface.as_str()))
            .collect();
        assert_eq!(
            declared,
            [
                (Role::Provides, "db", "postgresql"),
                (Role::Provides, "metrics", "prometheus-scrape"),
                (Role::Requires, "logs", "loki-push"),
                (Role::Peers, "ring", "endpoints-demo-ring"),
            ]
        );
        let (_, logs) = endpoints.get("logs").unwrap();
        assert_eq!((logs.limit, logs.scope), (Some(1), Scope::Container));

        // Actions reach the PackageManifest the same way.
        let actions_catalog = render_package_dir_with(
            repo_root().join("olm-catalog/testdata/actions-demo"),
            &RenderOptions::image("registry.test/actions-demo:0.1.0"),
        )
        .expect("the actions fixture renders")
        .catalog;
        let actions_registry = Registry::start(
            Arc::new(RegistryIndex::new(actions_catalog)),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await;
        create(
            &sources,
            &catalog_source("actions", &actions_registry.addr.to_string()),
        )
        .await;
        wait_for(
            &sources,
            "actions",
            "CatalogSource actions is READY",
            catalog_is_ready,
        )
        .await;
        let served = package_manifest(&api, "actions-demo").await;
        let channel = &served.status.channels[0];
        let actions = Actions::of_annotations(&channel.current_csv, &channel.current_csv_desc.annotations)
            .expect("the served declaration reads")
            .expect("the head's currentCSVDesc carries the actions annotation");
        let offered: Vec<(&str, Vec<&str>, &[String])> = actions
            .iter()
            .map(|a| {
                (
                    a.name.as_str(),
                    a.params.keys().map(String::as_str).collect(),
                    a.required.as_slice(),
                )
            })
            .collect();
        assert_eq!(
            offered,
            [
                (
                    "backup",
                    vec!["compression", "keep", "path"],
                    &["path".to_owned()][..]
                ),
                ("pause", vec![], &[][..]),
            ]
        );

        parts.shutdown.trigger();
        let _ = tokio::time::timeout(Duration::from_secs(20), operator).await;
        // The APIService is cluster-wide: leave none behind.
        drop(api_service);
        account.assert_no_forbidden();
        registry.stop().await;
        corpus_registry.stop().await;
        endpoints_registry.stop().await;
        actions_registry.stop().await;
    })
    .await;
}

/// The PackageManifest `name`, once it is served.
async fn package_manifest(api: &Api<PackageManifest>, name: &str) -> PackageManifest {
    let mut last = String::new();
    for _ in 0..120 {
        match api.get(name).await {
            Ok(manifest) => return manifest,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("PackageManifest {name} is not served: {last}");
}

/// The CSV of `package` at `version` in the corpus' bundle directories.
fn corpus_csv(package: &str, version: &str) -> Value {
    let dir = corpus_dir()
        .join("bundles")
        .join(package)
        .join(version)
        .join("manifests");
    let path = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".clusterserviceversion.yaml"))
        .unwrap_or_else(|| panic!("a CSV in {}", Path::new(&dir).display()));
    yaml_file(&path)
}
