//! olm-registry: the operator-registry gRPC API (`api.Registry`), as `opm serve`
//! speaks it: a server for catalog content read from disk, and a client that loads
//! a whole catalog from such a server (or from `opm serve`, or OLM's catalog pods).
//! It knows catalogs ([`olm_catalog`]) and gRPC, and nothing of Kubernetes
//! controllers: catalog-operator's CatalogSource controller is one client of it,
//! its `serve` command ([`serve::serve_path`]) one server.
//!
//! - [`api`]: the messages and service stubs generated from `proto/registry.proto`.
//! - [`server`]: [`server::RegistryIndex`] answers every query of the API over a
//!   [`olm_catalog::Catalog`]; [`server::serve`] runs it with `grpc.health.v1`.
//! - [`client`]: [`client::RegistryClient`] checks health and loads a catalog
//!   (`ListPackages`, `GetPackage`, `ListBundles`) into an [`olm_catalog::Catalog`].
//! - [`serve`]: a catalog on disk served until shutdown, as `opm serve` does.
//! - `convert`: messages ↔ catalog model, in both directions.
//!
//! `proto/registry.proto` is compiled by `build.rs` with protox, in Rust.

pub mod client;
mod convert;
#[cfg(test)]
mod convert_props;
pub mod serve;
pub mod server;

/// Messages and service stubs of `api.Registry`, generated at build time.
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls
)]
pub mod api {
    tonic::include_proto!("api");
}

/// The name under which `grpc.health.v1` reports the registry service.
pub const SERVICE_NAME: &str = "api.Registry";

/// The largest message the server sends and the client accepts: bundles carry
/// their manifests, and CRDs can be large (etcd's own limit is 1.5 MiB per object,
/// a bundle has several).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use std::{path::Path, sync::Arc};

    use olm_catalog::{Catalog, Property};
    use olm_resolver::{
        CatalogIndex,
        model::{CatalogId, Subscription},
        plan::Outcome,
    };
    use tokio::sync::oneshot;

    use super::{
        api,
        client::RegistryClient,
        server::{self, RegistryIndex},
    };

    fn demo() -> Catalog {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalogs/demo-bundles");
        olm_catalog::source::load(&path)
            .expect("the demo catalog loads")
            .0
    }

    /// Serves `catalog` on a free loopback port; returns the address and a stopper.
    async fn start(catalog: Catalog) -> (String, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
        let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            server::serve(listener, Arc::new(RegistryIndex::new(catalog)), async move {
                let _ = stopped.await;
            })
            .await
            .expect("the server runs");
        });
        (address, stop, task)
    }

    fn objects(catalog: &Catalog, bundle: &str) -> Vec<serde_json::Value> {
        let bundle = catalog.bundles.iter().find(|b| b.name == bundle).expect("bundle");
        bundle
            .properties
            .iter()
            .filter_map(|p| match p {
                Property::BundleObject(o) => Some(o.decode().expect("decodes")),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_catalog_round_trips_through_server_and_client() {
        let source = demo();
        let (address, stop, task) = start(source.clone()).await;
        let mut client = RegistryClient::new(&address).unwrap();
        client.check_health().await.expect("the server is healthy");
        let loaded = client.load().await.expect("the catalog loads");
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        let catalog = loaded.catalog;

        let names = |c: &Catalog| c.packages.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&catalog), names(&source));
        assert_eq!(
            catalog
                .package("demo-db")
                .and_then(|p| p.default_channel.as_deref()),
            Some("stable")
        );
        let mut channels: Vec<_> = catalog
            .channels
            .iter()
            .map(|c| (c.package.clone(), c.name.clone(), c.entries.clone()))
            .collect();
        let mut expected: Vec<_> = source
            .channels
            .iter()
            .map(|c| (c.package.clone(), c.name.clone(), c.entries.clone()))
            .collect();
        channels.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        expected.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        assert_eq!(channels, expected);
        assert_eq!(catalog.bundles.len(), source.bundles.len());
        for bundle in &source.bundles {
            let loaded = catalog
                .bundle(&bundle.package, &bundle.name)
                .expect("every bundle is listed");
            let mut want: Vec<String> = bundle
                .properties
                .iter()
                .filter(|p| !matches!(p, Property::BundleObject(_)))
                .map(|p| format!("{} {}", p.type_name(), p.value_json()))
                .collect();
            let mut got: Vec<String> = loaded
                .properties
                .iter()
                .filter(|p| !matches!(p, Property::BundleObject(_)))
                .map(|p| format!("{} {}", p.type_name(), p.value_json()))
                .collect();
            want.sort();
            got.sort();
            assert_eq!(got, want, "properties of {}", bundle.name);
            assert_eq!(
                objects(&catalog, &bundle.name),
                objects(&source, &bundle.name),
                "manifests of {}",
                bundle.name
            );
        }

        // The loaded catalog resolves as the source does.
        let id = CatalogId::new("demo", "olm");
        let index = CatalogIndex::new(vec![
            olm_resolution::snapshot::snapshot(id.clone(), 0, &catalog).snapshot,
        ]);
        let resolution = index.resolve("team", &[], &[Subscription::new("app", "team", "demo-app", id)]);
        let Outcome::Plan(plan) = &resolution.groups[0].outcome else {
            panic!("{:?}", resolution.groups[0].outcome)
        };
        let order: Vec<_> = plan.steps.iter().map(|s| s.bundle.as_str()).collect();
        assert_eq!(order, ["demo-db.v1.1.0", "demo-app.v0.2.0"]);

        let _ = stop.send(());
        task.await.unwrap();
        let error = client.check_health().await.expect_err("the server is gone");
        assert!(error.is_unreachable(), "{error:?}");
    }

    /// The provider and replacement queries of `queries_answer_as_opm_does`.
    async fn assert_provider_queries(
        stub: &mut api::registry_client::RegistryClient<tonic::transport::Channel>,
    ) {
        let provide = |kind: &str| api::GetAllProvidersRequest {
            group: "demo.olm-rs.dev".into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: String::new(),
        };
        let entries: Vec<api::ChannelEntry> = futures::TryStreamExt::try_collect(
            stub.get_channel_entries_that_provide(provide("Database"))
                .await
                .unwrap()
                .into_inner(),
        )
        .await
        .unwrap();
        assert_eq!(entries.len(), 4, "{entries:?}");
        let latest: Vec<api::ChannelEntry> = futures::TryStreamExt::try_collect(
            stub.get_latest_channel_entries_that_provide(api::GetLatestProvidersRequest {
                group: "demo.olm-rs.dev".into(),
                version: "v1".into(),
                kind: "Database".into(),
                plural: String::new(),
            })
            .await
            .unwrap()
            .into_inner(),
        )
        .await
        .unwrap();
        let mut latest: Vec<_> = latest.iter().map(|e| e.bundle_name.as_str()).collect();
        latest.sort();
        assert_eq!(latest, ["demo-db.v1.1.0", "demo-db.v1.2.0"]);
        let default = stub
            .get_default_bundle_that_provides(api::GetDefaultProviderRequest {
                group: "demo.olm-rs.dev".into(),
                version: "v1".into(),
                kind: "WebApp".into(),
                plural: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(default.csv_name, "demo-app.v0.2.0");
        let replacing: Vec<api::ChannelEntry> = futures::TryStreamExt::try_collect(
            stub.get_channel_entries_that_replace(api::GetAllReplacementsRequest {
                csv_name: "demo-db.v1.0.0".into(),
            })
            .await
            .unwrap()
            .into_inner(),
        )
        .await
        .unwrap();
        assert_eq!(replacing.len(), 2, "{replacing:?}");
    }

    #[tokio::test]
    async fn queries_answer_as_opm_does() {
        let (address, stop, task) = start(demo()).await;
        let mut client = RegistryClient::new(&address).unwrap();
        let stub = client.stub();

        let package = stub
            .get_package(api::GetPackageRequest {
                name: "demo-db".into(),
            })
            .await
            .unwrap()
            .into_inner();
        let heads: Vec<_> = package
            .channels
            .iter()
            .map(|c| (c.name.as_str(), c.csv_name.as_str()))
            .collect();
        assert_eq!(
            heads,
            [("candidate", "demo-db.v1.2.0"), ("stable", "demo-db.v1.1.0")]
        );

        let head = stub
            .get_bundle_for_channel(api::GetBundleInChannelRequest {
                pkg_name: "demo-db".into(),
                channel_name: "stable".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(head.csv_name, "demo-db.v1.1.0");
        assert_eq!(head.replaces, "demo-db.v1.0.0");
        assert!(head.csv_json.contains("ClusterServiceVersion"));
        assert_eq!(head.object.len(), 2);
        assert!(head.properties.iter().all(|p| p.r#type != "olm.bundle.object"));

        let next = stub
            .get_bundle_that_replaces(api::GetReplacementRequest {
                csv_name: "demo-db.v1.1.0".into(),
                pkg_name: "demo-db".into(),
                channel_name: "candidate".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(next.csv_name, "demo-db.v1.2.0");
        assert_eq!(next.skip_range, ">=1.0.0 <1.2.0");

        let app = stub
            .get_bundle(api::GetBundleRequest {
                pkg_name: "demo-app".into(),
                channel_name: "stable".into(),
                csv_name: "demo-app.v0.2.0".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(app.version, "0.2.0");
        assert_eq!(app.required_apis.len(), 1);
        assert!(
            app.dependencies
                .iter()
                .any(|d| d.r#type == "olm.package" && d.value.contains("demo-db"))
        );

        assert_provider_queries(stub).await;

        let missing = stub
            .get_package(api::GetPackageRequest { name: "nope".into() })
            .await
            .unwrap_err();
        assert_eq!(missing.code(), tonic::Code::NotFound);

        let _ = stop.send(());
        task.await.unwrap();
    }

    #[tokio::test]
    async fn bundles_with_an_image_are_listed_without_manifests() {
        let mut catalog = demo();
        for bundle in &mut catalog.bundles {
            bundle.image = format!("quay.io/demo/{}:latest", bundle.name);
        }
        let (address, stop, task) = start(catalog).await;
        let mut client = RegistryClient::new(&address).unwrap();
        let loaded = client.load().await.unwrap().catalog;
        assert!(
            loaded
                .bundles
                .iter()
                .all(|b| b.properties_of("olm.bundle.object").count() == 0),
            "ListBundles leaves manifests out for bundles with an image"
        );
        let (bundle, problems) = client
            .bundle("demo-db", "stable", "demo-db.v1.1.0")
            .await
            .unwrap();
        assert!(problems.is_empty());
        assert_eq!(bundle.properties_of("olm.bundle.object").count(), 2);
        assert_eq!(bundle.image, "quay.io/demo/demo-db.v1.1.0:latest");
        let _ = stop.send(());
        task.await.unwrap();
    }
}
