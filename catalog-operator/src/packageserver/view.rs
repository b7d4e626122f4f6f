//! The PackageManifests visible in a namespace, built on demand from the
//! catalog store (nothing is cached: the store is the only copy).

use std::collections::BTreeMap;

use kube::runtime::reflector::{ObjectRef, Store};
use olm_api::{packages::PackageManifest, v1alpha1::CatalogSource};

use super::manifest::{CatalogInfo, package_manifests};
use crate::catalogs::CatalogStore;

/// Reads PackageManifests out of the catalog store.
#[derive(Clone)]
pub struct Packages {
    /// The catalogs.
    pub catalogs: CatalogStore,
    /// The CatalogSources (display name, publisher, labels, creation time).
    pub sources: Store<CatalogSource>,
    /// The namespace whose catalogs every namespace sees.
    pub global_namespace: String,
}

/// What identifies a PackageManifest across catalogs: the catalog and the package.
pub type Key = (String, String, String);

impl Packages {
    /// The PackageManifests of `namespace` (its catalogs' packages, then the
    /// global catalogs', all shown in `namespace`), or of every namespace.
    pub fn list(&self, namespace: Option<&str>) -> Vec<PackageManifest> {
        let all = self.catalogs.all();
        let in_namespace = |ns: &str| {
            all.iter()
                .filter(move |((catalog_ns, _), _)| catalog_ns == ns)
                .collect::<Vec<_>>()
        };
        let chosen = match namespace {
            None => all.iter().collect(),
            Some(ns) if ns == self.global_namespace => in_namespace(ns),
            Some(ns) => {
                let mut chosen = in_namespace(ns);
                chosen.extend(in_namespace(&self.global_namespace));
                chosen
            }
        };
        let mut out = Vec::new();
        for ((catalog_ns, catalog_name), state) in chosen {
            let Some(content) = &state.content else { continue };
            let info = self
                .sources
                .get(&ObjectRef::new(catalog_name).within(catalog_ns))
                .map(|source| CatalogInfo::from_source(&source))
                .unwrap_or_else(|| CatalogInfo {
                    namespace: catalog_ns.clone(),
                    name: catalog_name.clone(),
                    ..CatalogInfo::default()
                });
            let mut manifests = package_manifests(&info, &content.catalog, &content.heads);
            manifests.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            for manifest in &mut manifests {
                if let Some(ns) = namespace {
                    manifest.metadata.namespace = Some(ns.to_owned());
                }
            }
            out.extend(manifests);
        }
        out
    }

    /// The PackageManifests of `namespace` by catalog and package.
    pub fn keyed(&self, namespace: Option<&str>) -> BTreeMap<Key, PackageManifest> {
        self.list(namespace).into_iter().map(|m| (key(&m), m)).collect()
    }
}

/// The key of a PackageManifest.
pub fn key(manifest: &PackageManifest) -> Key {
    (
        manifest.status.catalog_source_namespace.clone(),
        manifest.status.catalog_source.clone(),
        manifest.status.package_name.clone(),
    )
}
