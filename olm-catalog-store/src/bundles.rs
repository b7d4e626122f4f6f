//! Bundle manifests on demand.
//!
//! A catalog's bundles carry their manifests (`olm.bundle.object`: CRDs, the
//! CSV, RBAC, ...), which are most of its size: tens of megabytes for a large
//! catalog, while resolution, status and the registry API need only the
//! bundles' names, versions and properties. The store therefore keeps catalogs
//! without manifests ([`strip_manifests`]) and reads one bundle's manifests
//! again from where the catalog came from ([`BundleSource`]) when an
//! InstallPlan is built. The few bundles read last are kept in a small cache
//! ([`BundleCache`]), so that building the plans of several Subscriptions of
//! one operator reads it once.

use std::{collections::VecDeque, sync::Arc};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use olm_catalog::{Bundle, Catalog, Property};
use olm_resolver::model::CatalogId;

use olm_registry::client::{ClientError, RegistryClient};

/// How many bundles with manifests the store keeps after reading them.
pub const CACHED_BUNDLES: usize = 8;

/// Where a catalog's bundle manifests are read from when a plan needs them.
#[derive(Clone)]
pub enum BundleSource {
    /// A registry (an address, or the registry Pod of an image catalog): `GetBundle`.
    Registry(Box<RegistryClient>),
    /// A ConfigMap catalog (OLM's legacy format), read again from the API server.
    ConfigMap {
        /// A client to read it with.
        client: Client,
        /// The ConfigMap's name (in the CatalogSource's namespace).
        name: String,
    },
    /// Nowhere else: the content keeps its manifests in memory (offline
    /// commands and tests, whose catalogs are read once from files).
    Memory,
}

impl std::fmt::Debug for BundleSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BundleSource::Registry(client) => f.debug_tuple("Registry").field(client).finish(),
            BundleSource::ConfigMap { name, .. } => f
                .debug_struct("ConfigMap")
                .field("name", name)
                .finish_non_exhaustive(),
            BundleSource::Memory => f.write_str("Memory"),
        }
    }
}

impl BundleSource {
    /// Whether content from this source keeps its manifests in memory.
    pub fn keeps_manifests(&self) -> bool {
        matches!(self, BundleSource::Memory)
    }
}

/// Why a bundle's manifests could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The registry failed to serve the bundle.
    #[error(transparent)]
    Registry(#[from] ClientError),
    /// The ConfigMap could not be read.
    #[error("cannot read ConfigMap {namespace}/{name}: check that it exists and is readable")]
    ReadConfigMap {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The ConfigMap is no longer a valid catalog.
    #[error("ConfigMap {namespace}/{name} is no longer a valid catalog: {message}")]
    ParseConfigMap {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why, in words.
        message: String,
    },
}

/// Whether `property` is a bundle manifest (or the CSV metadata that stands in
/// for one), which only an InstallPlan reads.
fn is_manifest(property: &Property) -> bool {
    matches!(property, Property::BundleObject(_) | Property::CsvMetadata(_))
}

/// Whether `bundle` carries its manifests.
pub fn has_manifests(bundle: &Bundle) -> bool {
    bundle
        .properties
        .iter()
        .any(|p| matches!(p, Property::BundleObject(_)))
}

/// Drops every bundle's manifests from `catalog` and releases their memory.
pub fn strip_manifests(catalog: &mut Catalog) {
    for bundle in &mut catalog.bundles {
        bundle.properties.retain(|p| !is_manifest(p));
        bundle.properties.shrink_to_fit();
    }
    for package in &mut catalog.packages {
        // Consoles read icons and descriptions from the registry, not from us.
        package.icon = None;
        package.description = None;
    }
}

/// Reads bundle `name` of `package` (in `channel`) from `source`, manifests included.
/// `Ok(None)` when the source no longer has it.
pub async fn fetch(
    source: &BundleSource,
    id: &CatalogId,
    package: &str,
    channel: &str,
    name: &str,
) -> Result<Option<Bundle>, FetchError> {
    match source {
        BundleSource::Registry(client) => {
            let (bundle, _problems) = client.clone().bundle(package, channel, name).await?;
            Ok(Some(bundle))
        }
        BundleSource::ConfigMap {
            client,
            name: config_map,
        } => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &id.namespace);
            let read_error = |source| FetchError::ReadConfigMap {
                namespace: id.namespace.clone(),
                name: config_map.clone(),
                source,
            };
            let Some(object) = api.get_opt(config_map).await.map_err(read_error)? else {
                return Ok(None);
            };
            let text = serde_json::to_string(&object).unwrap_or_default();
            let path = format!("configmap {}/{config_map}", id.namespace);
            let rendered =
                olm_catalog::configmap::parse_str(&path, &text).map_err(|e| FetchError::ParseConfigMap {
                    namespace: id.namespace.clone(),
                    name: config_map.clone(),
                    message: e.to_string(),
                })?;
            Ok(find_bundle(rendered.render.catalog, package, name))
        }
        BundleSource::Memory => Ok(None),
    }
}

/// Takes bundle `name` of `package` out of `catalog`.
fn find_bundle(catalog: Catalog, package: &str, name: &str) -> Option<Bundle> {
    catalog
        .bundles
        .into_iter()
        .find(|b| b.package == package && b.name == name)
}

/// The key of a cached bundle: the catalog, its content fingerprint, package and name.
pub type BundleKey = (CatalogId, u64, String, String);

/// The last few bundles read, least recently used first out.
#[derive(Debug)]
pub struct BundleCache {
    capacity: usize,
    entries: VecDeque<(BundleKey, Arc<Bundle>)>,
}

impl BundleCache {
    /// An empty cache of at most `capacity` bundles.
    pub fn new(capacity: usize) -> Self {
        BundleCache {
            capacity,
            entries: VecDeque::with_capacity(capacity),
        }
    }

    /// The bundle under `key`, now the most recently used.
    pub fn get(&mut self, key: &BundleKey) -> Option<Arc<Bundle>> {
        let at = self.entries.iter().position(|(k, _)| k == key)?;
        let entry = self.entries.remove(at)?;
        let bundle = entry.1.clone();
        self.entries.push_back(entry);
        Some(bundle)
    }

    /// Keeps `bundle` under `key`, dropping the least recently used beyond the capacity.
    pub fn insert(&mut self, key: BundleKey, bundle: Arc<Bundle>) {
        if let Some(at) = self.entries.iter().position(|(k, _)| *k == key) {
            self.entries.remove(at);
        }
        if self.capacity == 0 {
            return;
        }
        while self.entries.len() >= self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back((key, bundle));
    }

    /// How many bundles are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no bundle is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn bundle(name: &str) -> Arc<Bundle> {
        Arc::new(Bundle {
            name: name.to_owned(),
            package: "db".to_owned(),
            image: String::new(),
            properties: Vec::new(),
            related_images: Vec::new(),
        })
    }

    fn key(name: &str) -> BundleKey {
        (CatalogId::new("demo", "olm"), 1, "db".to_owned(), name.to_owned())
    }

    #[test]
    fn the_cache_keeps_at_most_its_capacity_and_drops_the_least_recently_used() {
        let mut cache = BundleCache::new(2);
        cache.insert(key("a"), bundle("a"));
        cache.insert(key("b"), bundle("b"));
        assert!(cache.get(&key("a")).is_some(), "a is now the most recent");
        cache.insert(key("c"), bundle("c"));
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&key("b")).is_none(), "b was the least recently used");
        assert_eq!(cache.get(&key("a")).map(|b| b.name.clone()).as_deref(), Some("a"));
        assert_eq!(cache.get(&key("c")).map(|b| b.name.clone()).as_deref(), Some("c"));
        cache.insert(key("c"), bundle("c"));
        assert_eq!(cache.len(), 2, "inserting again replaces");
    }

    #[test]
    fn other_content_of_the_same_catalog_is_another_key() {
        let mut cache = BundleCache::new(4);
        cache.insert(key("a"), bundle("a"));
        let (id, _, package, name) = key("a");
        assert!(cache.get(&(id, 2, package, name)).is_none());
    }

    #[test]
    fn a_cache_of_no_capacity_keeps_nothing() {
        let mut cache = BundleCache::new(0);
        cache.insert(key("a"), bundle("a"));
        assert!(cache.is_empty());
    }

    #[test]
    fn stripping_keeps_what_resolution_reads_and_drops_the_manifests() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalogs/demo-bundles");
        let (mut catalog, _) = olm_catalog::source::load(&path).expect("the demo catalog loads");
        assert!(catalog.bundles.iter().any(has_manifests));
        let before = catalog.clone();
        strip_manifests(&mut catalog);
        assert!(!catalog.bundles.iter().any(has_manifests));
        assert_eq!(catalog.bundles.len(), before.bundles.len());
        assert_eq!(catalog.channels, before.channels);
        for (stripped, full) in catalog.bundles.iter().zip(&before.bundles) {
            let kept: Vec<&Property> = full.properties.iter().filter(|p| !is_manifest(p)).collect();
            assert_eq!(stripped.properties.iter().collect::<Vec<_>>(), kept);
            assert_eq!(stripped.version(), full.version());
        }
        let id = CatalogId::new("demo", "olm");
        assert_eq!(
            olm_resolution::snapshot::snapshot(id.clone(), 0, &catalog).snapshot,
            olm_resolution::snapshot::snapshot(id, 0, &before).snapshot,
            "the resolver sees the same catalog"
        );
    }
}
