//! Catalog content as the catalog-operator reads it, read here by the CLI
//! itself: the CatalogSources in the cluster, each loaded with the
//! catalog-operator's own loaders where the CLI can reach the content
//! (ConfigMaps through the API server, `spec.address` registries over gRPC,
//! image catalogs pulled from their registry). No server of ours is needed.

use std::{path::Path, time::Duration};

use catalog_operator::{
    bundles::BundleSource,
    catalogs::{CatalogContent, CatalogState, CatalogStore, Health},
    registry::client::RegistryClient,
    source,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, ResourceExt, api::ListParams};
use olm_api::v1alpha1::{CatalogSource, ConnectivityState};
use olm_catalog::Catalog;
use olm_resolver::model::CatalogId;

use crate::error::Error;

/// How long one catalog may take to load.
const LOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// The image label naming the directory of an image's file-based catalog.
const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";

/// Where the catalog content comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A registry at an address.
    Address(String),
    /// A ConfigMap in the catalog's namespace.
    ConfigMap(String),
    /// A catalog image.
    Image(String),
    /// Nothing usable.
    None,
}

impl Origin {
    /// The origin `spec` names, chosen as the catalog-operator chooses.
    pub fn of(source: &CatalogSource) -> Origin {
        let non_empty = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
        if let Some(name) = non_empty(&source.spec.config_map) {
            Origin::ConfigMap(name)
        } else if let Some(address) = non_empty(&source.spec.address) {
            Origin::Address(address)
        } else if let Some(image) = non_empty(&source.spec.image) {
            Origin::Image(image)
        } else {
            Origin::None
        }
    }

    /// The kind of source, as a word.
    pub fn kind(&self) -> &'static str {
        match self {
            Origin::Address(_) => "grpc",
            Origin::ConfigMap(_) => "configmap",
            Origin::Image(_) => "image",
            Origin::None => "none",
        }
    }

    /// The address, ConfigMap or image.
    pub fn target(&self) -> &str {
        match self {
            Origin::Address(s) | Origin::ConfigMap(s) | Origin::Image(s) => s,
            Origin::None => "",
        }
    }
}

/// One CatalogSource and what the CLI could read of it.
#[derive(Debug, Clone)]
pub struct CatalogView {
    /// The CatalogSource.
    pub source: CatalogSource,
    /// Its id.
    pub id: CatalogId,
    /// Where its content comes from.
    pub origin: Origin,
    /// Whether the CLI read it, and if not why.
    pub health: Health,
}

impl CatalogView {
    /// What the catalog-operator last reported (`status.connectionState.lastObservedState`).
    pub fn operator_state(&self) -> Option<ConnectivityState> {
        self.source
            .status
            .as_ref()?
            .connection_state
            .as_ref()
            .map(|s| s.last_observed_state)
    }
}

/// The catalogs of a scope, loaded.
pub struct Catalogs {
    /// Their content, as the catalog-operator holds it.
    pub store: CatalogStore,
    /// Each CatalogSource, sorted by namespace and name.
    pub views: Vec<CatalogView>,
}

impl Catalogs {
    /// The catalogs a Subscription in `namespace` may use (its own and the global ones), with state.
    pub fn visible(&self, namespace: &str, global: &str) -> Vec<(CatalogId, CatalogState)> {
        self.store.visible(&[namespace, global], &[])
    }

    /// The content of `id`, if it was read.
    pub fn content(&self, id: &CatalogId) -> Option<std::sync::Arc<CatalogContent>> {
        self.store.get(id)?.content
    }

    /// The view of `id`.
    pub fn view(&self, id: &CatalogId) -> Option<&CatalogView> {
        self.views.iter().find(|v| &v.id == id)
    }

    /// The catalogs that could not be read, as `namespace/name`.
    pub fn unhealthy(&self) -> Vec<String> {
        self.views
            .iter()
            .filter(|v| matches!(v.health, Health::Unhealthy(_)))
            .map(|v| format!("{}/{}", v.id.namespace, v.id.name))
            .collect()
    }
}

/// Which namespaces to read CatalogSources from.
#[derive(Debug, Clone)]
pub enum Scope {
    /// These namespaces.
    Namespaces(Vec<String>),
    /// Every namespace.
    All,
}

/// Lists the CatalogSources of `scope` and loads each one's content.
pub async fn load(client: &Client, scope: &Scope) -> Result<Catalogs, Error> {
    let mut sources: Vec<CatalogSource> = Vec::new();
    match scope {
        Scope::All => {
            let api: Api<CatalogSource> = Api::all(client.clone());
            sources = api
                .list(&ListParams::default())
                .await
                .map_err(Error::kube("list CatalogSources in all namespaces"))?
                .items;
        }
        Scope::Namespaces(namespaces) => {
            let mut seen = Vec::new();
            for namespace in namespaces {
                if seen.contains(namespace) {
                    continue;
                }
                seen.push(namespace.clone());
                let api: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
                sources.extend(
                    api.list(&ListParams::default())
                        .await
                        .map_err(Error::kube(format!(
                            "list CatalogSources in namespace {namespace}"
                        )))?
                        .items,
                );
            }
        }
    }
    sources.sort_by_key(|s| (s.namespace().unwrap_or_default(), s.name_any()));
    let store = CatalogStore::new();
    let now = olm_runtime::conditions::now();
    let loads = sources.into_iter().map(|source| {
        let client = client.clone();
        async move {
            let id = CatalogId::new(source.name_any(), source.namespace().unwrap_or_default());
            let origin = Origin::of(&source);
            let result = match tokio::time::timeout(LOAD_TIMEOUT, read(&client, &id, &origin)).await {
                Ok(result) => result,
                Err(_) => Err(format!(
                    "reading it from {} took longer than {}s",
                    origin.target(),
                    LOAD_TIMEOUT.as_secs()
                )),
            };
            (source, id, origin, result)
        }
    });
    let mut views = Vec::new();
    for (source, id, origin, result) in futures::future::join_all(loads).await {
        let priority = source.spec.priority.unwrap_or(0);
        let health = match result {
            Ok((catalog, problems)) => {
                let content = CatalogContent::new(id.clone(), catalog, problems, BundleSource::Memory);
                store.set_loaded(&id, priority, content, &now);
                Health::Healthy
            }
            Err(message) => {
                store.set_unhealthy(&id, priority, message.clone(), &now);
                Health::Unhealthy(message)
            }
        };
        views.push(CatalogView {
            source,
            id,
            origin,
            health,
        });
    }
    Ok(Catalogs { store, views })
}

/// Reads one catalog's content, with every bundle's manifests where the source lists them.
async fn read(client: &Client, id: &CatalogId, origin: &Origin) -> Result<(Catalog, Vec<String>), String> {
    match origin {
        Origin::None => Err("its spec names no address, ConfigMap or image".to_owned()),
        Origin::Address(address) => read_registry(address).await,
        Origin::ConfigMap(name) => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &id.namespace);
            let config_map = api
                .get_opt(name)
                .await
                .map_err(|e| format!("cannot read ConfigMap {name}: {e}"))?
                .ok_or_else(|| format!("ConfigMap {name} does not exist in namespace {}", id.namespace))?;
            let text = serde_json::to_string(&config_map).map_err(|e| e.to_string())?;
            let rendered =
                olm_catalog::configmap::parse_str(format!("configmap {}/{name}", id.namespace), &text)
                    .map_err(|e| format!("ConfigMap {name} is not a valid catalog: {e}"))?;
            let mut problems = rendered.render.warnings;
            problems.extend(rendered.left_out.iter().map(ToString::to_string));
            Ok((rendered.render.catalog, problems))
        }
        Origin::Image(image) => read_image(image).await,
    }
}

async fn read_registry(address: &str) -> Result<(Catalog, Vec<String>), String> {
    let mut registry = RegistryClient::new(address).map_err(|e| e.to_string())?;
    let loaded = registry
        .load()
        .await
        .map_err(|e| format!("the registry at {address} does not answer: {e}"))?;
    Ok((loaded.catalog, loaded.problems))
}

/// Pulls a catalog image and loads the file-based catalog inside it.
async fn read_image(image: &str) -> Result<(Catalog, Vec<String>), String> {
    let puller = olm_oci::Puller::new(olm_oci::PullOptions {
        attempts: 1,
        ..olm_oci::PullOptions::default()
    });
    let pulled = puller
        .pull(image, &olm_oci::DockerConfig::default())
        .await
        .map_err(|e| format!("cannot pull catalog image {image} from here: {e}"))?;
    let configs = pulled
        .labels
        .get(CONFIGS_LABEL)
        .map_or("configs", |dir| dir.trim_start_matches('/'))
        .to_owned();
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    pulled
        .files
        .write_to(dir.path(), &[Path::new(&configs)])
        .map_err(|e| format!("cannot unpack catalog image {image}: {e}"))?;
    let root = dir.path().join(&configs);
    if !root.is_dir() {
        return Err(format!(
            "catalog image {image} holds no file-based catalog under /{configs}"
        ));
    }
    source::load(&root).map_err(|e| format!("catalog image {image}: {e}"))
}
