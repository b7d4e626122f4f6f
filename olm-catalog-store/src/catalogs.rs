//! The shared in-memory store of catalog content, one immutable snapshot per
//! CatalogSource, keyed by its namespace and name.
//!
//! The CatalogSource controller is the only writer: it loads content, marks a
//! catalog healthy or not, and removes deleted catalogs. The Subscription and
//! InstallPlan controllers read it. A catalog that becomes unhealthy keeps its
//! last good content, so resolution goes on with what was last known (as OLM's
//! resolver cache does) while the Subscriptions that need it are marked.
//!
//! Every change that can alter a resolution (content, health, priority, removal)
//! bumps a generation that readers watch through [`CatalogStore::subscribe`].

use std::{
    collections::{BTreeMap, HashMap},
    hash::{DefaultHasher, Hash, Hasher},
    sync::{Arc, Mutex, MutexGuard},
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_catalog::{Bundle, Catalog, Property, property::BundleObject};
use olm_resolution::{CatalogBundles, snapshot};
use olm_resolver::{
    CatalogIndex,
    model::{CatalogId, CatalogSnapshot},
};
use tokio::sync::watch;

use crate::{
    bundles::{self, BundleCache, BundleSource, FetchError},
    channel_heads::{self, Describe, HeadCsvs},
};

/// How many resolver indexes are kept (one per distinct set of visible catalogs).
const MAX_CACHED_INDEXES: usize = 32;

/// Whether a catalog can be read now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Never tried yet.
    Pending,
    /// The last attempt succeeded.
    Healthy,
    /// The last attempt failed; the message says why.
    Unhealthy(String),
}

/// One catalog's immutable content.
#[derive(Debug)]
pub struct CatalogContent {
    /// The catalog, without its bundles' manifests unless the source keeps them
    /// in memory ([`BundleSource::Memory`]): those are read on demand.
    pub catalog: Catalog,
    /// The resolver's view of it (priority 0; the store's priority applies).
    pub snapshot: CatalogSnapshot,
    /// Bundles and entries left out of the snapshot, and other problems, in words.
    pub problems: Vec<String>,
    /// Changes when the content changes.
    pub fingerprint: u64,
    /// Where bundle manifests are read from when a plan needs them.
    pub source: BundleSource,
    /// The channel heads' CSV descriptions, read before the manifests are
    /// dropped (PackageManifests show them); empty unless the content was
    /// built to keep them ([`Describe::Heads`]).
    pub heads: HeadCsvs,
}

impl CatalogContent {
    /// Builds the content of catalog `id`, read from `source`, without what
    /// only the PackageManifest API reads ([`CatalogContent::described`]).
    pub fn new(id: CatalogId, catalog: Catalog, problems: Vec<String>, source: BundleSource) -> Self {
        Self::described(id, catalog, problems, source, Describe::Nothing)
    }

    /// Builds the content of catalog `id`, read from `source`, keeping the
    /// channel heads' descriptions when `describe` asks for them.
    pub fn described(
        id: CatalogId,
        mut catalog: Catalog,
        mut problems: Vec<String>,
        source: BundleSource,
        describe: Describe,
    ) -> Self {
        let heads = describe.head_csvs(&catalog);
        if !source.keeps_manifests() {
            bundles::strip_manifests(&mut catalog);
        }
        let built = snapshot::snapshot(id, 0, &catalog);
        problems.extend(built.problems.iter().map(ToString::to_string));
        let fingerprint = fingerprint(&catalog, &heads);
        CatalogContent {
            catalog,
            snapshot: built.snapshot,
            problems,
            fingerprint,
            source,
            heads,
        }
    }

    /// Adds the descriptions of channel heads whose CSVs (JSON, by package and
    /// CSV name) were read apart from the catalog: a registry's listing leaves
    /// manifests out. Heads the catalog describes itself keep their description.
    pub fn with_head_csvs(mut self, csvs: HashMap<(String, String), String>) -> Self {
        for ((package, name), csv) in csvs {
            let bundle = Bundle {
                name: name.clone(),
                package: package.clone(),
                image: String::new(),
                properties: vec![Property::BundleObject(BundleObject::from_json(&csv))],
                related_images: Vec::new(),
            };
            if let Some(head) = channel_heads::head_csv(&bundle, self.catalog.package(&package)) {
                self.heads.entry((package, name)).or_insert(head);
            }
        }
        self.fingerprint = fingerprint(&self.catalog, &self.heads);
        self
    }

    /// The bundle `name` of `package`, with its manifests, read again from the
    /// catalog's source (`GetBundle` from a registry, the ConfigMap) unless the
    /// content keeps them. A bundle the source no longer has is returned without
    /// manifests (planning it then says so).
    pub async fn bundle_with_manifests(
        &self,
        id: &CatalogId,
        package: &str,
        channel: &str,
        name: &str,
    ) -> Result<Option<Bundle>, FetchError> {
        let Some(bundle) = self.catalog.bundle(package, name) else {
            return Ok(None);
        };
        if bundles::has_manifests(bundle) {
            return Ok(Some(bundle.clone()));
        }
        let fetched = bundles::fetch(&self.source, id, package, channel, name).await?;
        Ok(Some(fetched.unwrap_or_else(|| bundle.clone())))
    }
}

/// A fingerprint of catalog content: equal content, equal fingerprint.
fn fingerprint(catalog: &Catalog, heads: &HeadCsvs) -> u64 {
    let mut hasher = DefaultHasher::new();
    // The heads' descriptions are not in the stripped catalog: a new one is new content.
    let mut described: Vec<String> = heads.iter().map(|(key, csv)| format!("{key:?}{csv:?}")).collect();
    described.sort_unstable();
    described.hash(&mut hasher);
    for package in &catalog.packages {
        package.name.hash(&mut hasher);
        package.default_channel.hash(&mut hasher);
    }
    for channel in &catalog.channels {
        (&channel.package, &channel.name).hash(&mut hasher);
        for entry in &channel.entries {
            (&entry.name, &entry.replaces, &entry.skips, &entry.skip_range).hash(&mut hasher);
        }
    }
    for bundle in &catalog.bundles {
        (&bundle.package, &bundle.name, &bundle.image).hash(&mut hasher);
        for property in &bundle.properties {
            property.type_name().hash(&mut hasher);
            property.value_json().hash(&mut hasher);
        }
    }
    for deprecation in &catalog.deprecations {
        deprecation.package.hash(&mut hasher);
        for entry in &deprecation.entries {
            (&entry.reference.schema, &entry.reference.name, &entry.message).hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// What the store knows of one catalog.
#[derive(Debug, Clone)]
pub struct CatalogState {
    /// `spec.priority`.
    pub priority: i32,
    /// Whether it can be read now.
    pub health: Health,
    /// The last content loaded, if any.
    pub content: Option<Arc<CatalogContent>>,
    /// When the health last changed.
    pub since: Time,
}

impl CatalogBundles for CatalogState {
    fn package_of_bundle(&self, bundle: &str) -> Option<String> {
        self.content.as_ref()?.catalog.package_of_bundle(bundle)
    }
}

impl CatalogState {
    /// Whether the last attempt to read the catalog succeeded.
    pub fn is_healthy(&self) -> bool {
        self.health == Health::Healthy
    }
}

struct Inner {
    catalogs: HashMap<CatalogId, CatalogState>,
    generation: u64,
    /// Indexes built lately, by the catalogs (content and priority) they cover.
    indexes: HashMap<Vec<(CatalogId, u64, i32)>, Arc<CatalogIndex>>,
    /// The bundles with manifests read last.
    bundles: BundleCache,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            catalogs: HashMap::new(),
            generation: 0,
            indexes: HashMap::new(),
            bundles: BundleCache::new(bundles::CACHED_BUNDLES),
        }
    }
}

/// The shared store of catalogs.
#[derive(Clone)]
pub struct CatalogStore {
    inner: Arc<Mutex<Inner>>,
    changes: Arc<watch::Sender<u64>>,
}

impl Default for CatalogStore {
    fn default() -> Self {
        Self::new()
    }
}

impl CatalogStore {
    /// An empty store.
    pub fn new() -> Self {
        CatalogStore {
            inner: Arc::default(),
            changes: Arc::new(watch::channel(0).0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Plain bookkeeping: a panic while holding the lock leaves it usable.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn bump(&self, inner: &mut Inner) {
        inner.generation += 1;
        self.changes.send_replace(inner.generation);
    }

    /// A receiver woken whenever a change may alter a resolution.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The current generation (bumped by every such change).
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// The state of one catalog.
    pub fn get(&self, id: &CatalogId) -> Option<CatalogState> {
        self.lock().catalogs.get(id).cloned()
    }

    /// Every catalog, by id.
    pub fn all(&self) -> BTreeMap<(String, String), CatalogState> {
        self.lock()
            .catalogs
            .iter()
            .map(|(id, state)| ((id.namespace.clone(), id.name.clone()), state.clone()))
            .collect()
    }

    /// Makes sure `id` is known (as Pending until it is first read), with `priority`.
    pub fn register(&self, id: &CatalogId, priority: i32, now: &Time) {
        let mut inner = self.lock();
        match inner.catalogs.get_mut(id) {
            Some(state) if state.priority == priority => {}
            Some(state) => {
                state.priority = priority;
                self.bump(&mut inner);
            }
            None => {
                inner.catalogs.insert(
                    id.clone(),
                    CatalogState {
                        priority,
                        health: Health::Pending,
                        content: None,
                        since: now.clone(),
                    },
                );
                self.bump(&mut inner);
            }
        }
    }

    /// Records freshly loaded content; returns whether content or health changed.
    pub fn set_loaded(&self, id: &CatalogId, priority: i32, content: CatalogContent, now: &Time) -> bool {
        let mut inner = self.lock();
        let state = inner.catalogs.entry(id.clone()).or_insert_with(|| CatalogState {
            priority,
            health: Health::Pending,
            content: None,
            since: now.clone(),
        });
        let same_content = state
            .content
            .as_ref()
            .is_some_and(|c| c.fingerprint == content.fingerprint);
        let changed = !same_content || state.health != Health::Healthy || state.priority != priority;
        if state.health != Health::Healthy {
            state.since = now.clone();
        }
        state.health = Health::Healthy;
        state.priority = priority;
        if !same_content {
            state.content = Some(Arc::new(content));
        }
        if changed {
            self.bump(&mut inner);
        }
        changed
    }

    /// Records that the catalog is healthy with unchanged content (a health check
    /// passed); returns whether the health changed.
    pub fn set_healthy(&self, id: &CatalogId, now: &Time) -> bool {
        let mut inner = self.lock();
        let Some(state) = inner.catalogs.get_mut(id) else {
            return false;
        };
        if state.health == Health::Healthy {
            return false;
        }
        state.health = Health::Healthy;
        state.since = now.clone();
        self.bump(&mut inner);
        true
    }

    /// Records that the catalog cannot be read; its last content is kept. Returns
    /// whether the health changed.
    pub fn set_unhealthy(&self, id: &CatalogId, priority: i32, message: String, now: &Time) -> bool {
        let mut inner = self.lock();
        let state = inner.catalogs.entry(id.clone()).or_insert_with(|| CatalogState {
            priority,
            health: Health::Pending,
            content: None,
            since: now.clone(),
        });
        let was_unhealthy = matches!(state.health, Health::Unhealthy(_));
        if !was_unhealthy {
            state.since = now.clone();
        }
        state.health = Health::Unhealthy(message);
        state.priority = priority;
        if !was_unhealthy {
            self.bump(&mut inner);
        }
        !was_unhealthy
    }

    /// Forgets a catalog (its CatalogSource was deleted); returns whether it was known.
    pub fn remove(&self, id: &CatalogId) -> bool {
        let mut inner = self.lock();
        let removed = inner.catalogs.remove(id).is_some();
        if removed {
            self.bump(&mut inner);
        }
        removed
    }

    /// Forgets every catalog for which `keep` is false.
    pub fn retain(&self, mut keep: impl FnMut(&CatalogId) -> bool) {
        let mut inner = self.lock();
        let before = inner.catalogs.len();
        inner.catalogs.retain(|id, _| keep(id));
        if inner.catalogs.len() != before {
            self.bump(&mut inner);
        }
    }

    /// The catalogs in any of `namespaces` and those named in `extra`, by id.
    pub fn visible(&self, namespaces: &[&str], extra: &[CatalogId]) -> Vec<(CatalogId, CatalogState)> {
        let inner = self.lock();
        let mut out: Vec<(CatalogId, CatalogState)> = inner
            .catalogs
            .iter()
            .filter(|(id, _)| namespaces.contains(&id.namespace.as_str()) || extra.contains(id))
            .map(|(id, state)| (id.clone(), state.clone()))
            .collect();
        out.sort_by(|a, b| (&a.0.namespace, &a.0.name).cmp(&(&b.0.namespace, &b.0.name)));
        out
    }

    /// Bundle `name` of `package` in catalog `id`, with its manifests: from the
    /// cache of the bundles read last, else read from the catalog's source
    /// ([`CatalogContent::bundle_with_manifests`]). `Ok(None)` when the catalog
    /// has no content or no such bundle.
    pub async fn bundle_with_manifests(
        &self,
        id: &CatalogId,
        package: &str,
        channel: &str,
        name: &str,
    ) -> Result<Option<Arc<Bundle>>, FetchError> {
        let Some(content) = self.get(id).and_then(|state| state.content) else {
            return Ok(None);
        };
        let key = (
            id.clone(),
            content.fingerprint,
            package.to_owned(),
            name.to_owned(),
        );
        if let Some(bundle) = self.lock().bundles.get(&key) {
            return Ok(Some(bundle));
        }
        let Some(bundle) = content.bundle_with_manifests(id, package, channel, name).await? else {
            return Ok(None);
        };
        let bundle = Arc::new(bundle);
        if bundles::has_manifests(&bundle) {
            self.lock().bundles.insert(key, bundle.clone());
        }
        Ok(Some(bundle))
    }

    /// The resolver index over the content of `catalogs` (those without content
    /// are left out), reusing the last one built when the same content is asked for.
    pub fn index(&self, catalogs: &[(CatalogId, CatalogState)]) -> Arc<CatalogIndex> {
        let key: Vec<(CatalogId, u64, i32)> = catalogs
            .iter()
            .filter_map(|(id, state)| {
                state
                    .content
                    .as_ref()
                    .map(|c| (id.clone(), c.fingerprint, state.priority))
            })
            .collect();
        if let Some(index) = self.lock().indexes.get(&key) {
            return index.clone();
        }
        let snapshots = catalogs
            .iter()
            .filter_map(|(_, state)| {
                state.content.as_ref().map(|content| {
                    let mut snapshot = content.snapshot.clone();
                    snapshot.priority = state.priority;
                    snapshot
                })
            })
            .collect();
        let index = Arc::new(CatalogIndex::new(snapshots));
        let mut inner = self.lock();
        if inner.indexes.len() >= MAX_CACHED_INDEXES {
            // Old content is never asked for again: start over rather than track use.
            inner.indexes.clear();
        }
        inner.indexes.insert(key, index.clone());
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(id: &CatalogId, packages: &[&str]) -> CatalogContent {
        let mut catalog = Catalog::default();
        for name in packages {
            catalog.packages.push(olm_catalog::Package {
                name: (*name).to_owned(),
                default_channel: None,
                icon: None,
                description: None,
                properties: Vec::new(),
            });
        }
        CatalogContent::new(id.clone(), catalog, Vec::new(), BundleSource::Memory)
    }

    #[test]
    fn changes_bump_the_generation_only_when_something_changed() {
        let store = CatalogStore::new();
        let rx = store.subscribe();
        let id = CatalogId::new("demo", "olm");
        let now = olm_runtime::conditions::now();
        store.register(&id, 0, &now);
        assert_eq!(*rx.borrow(), 1);
        store.register(&id, 0, &now);
        assert_eq!(*rx.borrow(), 1, "nothing changed");
        assert!(store.set_loaded(&id, 0, content(&id, &["a"]), &now));
        assert!(
            !store.set_loaded(&id, 0, content(&id, &["a"]), &now),
            "same content"
        );
        assert!(store.set_loaded(&id, 0, content(&id, &["a", "b"]), &now));
        assert!(store.set_unhealthy(&id, 0, "down".into(), &now));
        assert!(!store.set_unhealthy(&id, 0, "still down".into(), &now));
        let state = store.get(&id).unwrap();
        assert!(!state.is_healthy());
        assert_eq!(
            state.content.unwrap().catalog.packages.len(),
            2,
            "content is kept"
        );
        assert!(store.set_healthy(&id, &now));
        assert_eq!(store.visible(&["olm"], &[]).len(), 1);
        assert_eq!(store.visible(&["other"], &[]).len(), 0);
        assert_eq!(store.visible(&["other"], std::slice::from_ref(&id)).len(), 1);
        let generation = *rx.borrow();
        assert!(store.remove(&id));
        assert!(*rx.borrow() > generation);
    }

    #[test]
    fn the_index_is_reused_for_the_same_content() {
        let store = CatalogStore::new();
        let id = CatalogId::new("demo", "olm");
        let now = olm_runtime::conditions::now();
        store.set_loaded(&id, 0, content(&id, &["a"]), &now);
        let visible = store.visible(&["olm"], &[]);
        let a = store.index(&visible);
        let b = store.index(&visible);
        assert!(Arc::ptr_eq(&a, &b));
        store.set_loaded(&id, 0, content(&id, &["a", "b"]), &now);
        let c = store.index(&store.visible(&["olm"], &[]));
        assert!(!Arc::ptr_eq(&a, &c));
    }
}
