//! The catalog store with a registry behind it: channel heads described from a
//! listing, bundle manifests read on demand and cached. The registry's own
//! tests (server and client alone) are in `olm-registry`.

use std::{path::Path, sync::Arc};

use olm_catalog::{Catalog, Property};
use olm_registry::{
    client::RegistryClient,
    server::{self, RegistryIndex},
};
use olm_resolver::model::CatalogId;
use tokio::sync::oneshot;

use crate::{
    bundles::{BundleSource, FetchError},
    catalogs::{CatalogContent, CatalogStore},
    channel_heads::Describe,
};

fn demo() -> Catalog {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalogs/demo-bundles");
    crate::source::load(&path).expect("the demo catalog loads").0
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
async fn channel_heads_keep_their_description_when_the_listing_leaves_their_csv_out() {
    // Bundles with an image: the listing carries no csvJson, as OLM's registry's does not.
    let mut source = demo();
    for bundle in &mut source.bundles {
        bundle.image = format!("registry.example/{}:latest", bundle.name);
    }
    let (address, stop, task) = start(source).await;
    let mut client = RegistryClient::new(&address).unwrap();
    let loaded = client
        .load_listing(Describe::Heads.head_csv_json())
        .await
        .expect("the catalog loads");
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    assert!(
        !loaded.catalog.bundles.iter().any(crate::bundles::has_manifests),
        "the listing keeps no manifests"
    );
    let content = CatalogContent::described(
        CatalogId::new("demo", "olm"),
        loaded.catalog,
        loaded.problems,
        BundleSource::Registry(Box::new(client)),
        Describe::Heads,
    )
    .with_head_csvs(loaded.head_csvs);
    let head = content
        .heads
        .get(&("demo-db".to_owned(), "demo-db.v1.1.0".to_owned()))
        .expect("the head of demo-db's channels is described");
    assert!(!head.description.display_name.is_empty(), "{head:?}");
    assert!(!head.description.install_modes.is_empty(), "{head:?}");
    let _ = stop.send(());
    task.await.unwrap();
}

#[tokio::test]
async fn the_store_reads_manifests_from_the_registry_on_demand_and_caches_them() {
    let source = demo();
    let (address, stop, task) = start(source.clone()).await;
    let mut client = RegistryClient::new(&address).unwrap();
    let loaded = client
        .load_listing(Describe::Nothing.head_csv_json())
        .await
        .expect("the catalog loads");
    assert!(
        !loaded.catalog.bundles.iter().any(crate::bundles::has_manifests),
        "the listing keeps no manifests"
    );
    assert!(loaded.head_csvs.is_empty(), "no description is read");
    let id = CatalogId::new("demo", "olm");
    let content = CatalogContent::new(
        id.clone(),
        loaded.catalog,
        loaded.problems,
        BundleSource::Registry(Box::new(client)),
    );
    let store = CatalogStore::new();
    store.set_loaded(&id, 0, content, &olm_runtime::conditions::now());
    let state = store.get(&id).expect("the catalog is known");
    let kept = &state.content.as_ref().expect("content").catalog;
    assert!(!kept.bundles.iter().any(crate::bundles::has_manifests));

    let bundle = store
        .bundle_with_manifests(&id, "demo-db", "stable", "demo-db.v1.1.0")
        .await
        .expect("the registry serves the bundle")
        .expect("the bundle exists");
    assert_eq!(
        objects(
            &Catalog {
                bundles: vec![(*bundle).clone()],
                ..Catalog::default()
            },
            "demo-db.v1.1.0"
        ),
        objects(&source, "demo-db.v1.1.0"),
        "the manifests are the source's"
    );
    assert!(
        store
            .bundle_with_manifests(&id, "demo-db", "stable", "no-such-bundle")
            .await
            .expect("no error")
            .is_none()
    );

    // Once read, the bundle comes from the cache: the registry may be gone.
    let _ = stop.send(());
    task.await.unwrap();
    let again = store
        .bundle_with_manifests(&id, "demo-db", "stable", "demo-db.v1.1.0")
        .await
        .expect("the cache answers");
    assert!(again.is_some_and(|b| Arc::ptr_eq(&b, &bundle)));
    let error = store
        .bundle_with_manifests(&id, "demo-app", "stable", "demo-app.v0.2.0")
        .await
        .expect_err("another bundle needs the registry");
    assert!(matches!(error, FetchError::Registry(_)), "{error:?}");
}
