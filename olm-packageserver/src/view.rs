//! The PackageManifests visible in a namespace, built on demand from the
//! catalog store (nothing is cached: the store is the only copy).

use std::{collections::BTreeMap, sync::Arc};

use kube::{
    ResourceExt,
    runtime::reflector::{ObjectRef, Store},
};
use olm_api::{
    packages::{PackageManifest, PackagePlan},
    v1alpha1::{CatalogSource, ClusterServiceVersion, Subscription},
};
use olm_catalog_store::catalogs::{CatalogState, CatalogStore};

use super::{
    icon::PackageIcon,
    manifest::{CatalogInfo, package_manifest, package_manifests},
    plan::{self, PlanError},
};

/// Reads PackageManifests out of the catalog store.
#[derive(Clone)]
pub struct Packages {
    /// The catalogs.
    pub catalogs: CatalogStore,
    /// The CatalogSources (display name, publisher, labels, creation time).
    pub sources: Store<CatalogSource>,
    /// The namespace whose catalogs every namespace sees.
    pub global_namespace: String,
    /// The Subscriptions the Subscription controller resolves (for plans).
    pub subscriptions: Store<Subscription>,
    /// The CSVs it resolves with, copies left out (for plans).
    pub csvs: Store<ClusterServiceVersion>,
}

/// What identifies a PackageManifest across catalogs: the catalog and the package.
pub type Key = (String, String, String);

impl Packages {
    /// The catalogs `namespace` sees, in the order their packages are listed:
    /// its own, then the global ones (or every catalog).
    fn chosen<'a>(
        &self,
        all: &'a BTreeMap<(String, String), CatalogState>,
        namespace: Option<&str>,
    ) -> Vec<(&'a (String, String), &'a CatalogState)> {
        let in_namespace = |ns: &str| {
            all.iter()
                .filter(|((catalog_ns, _), _)| catalog_ns == ns)
                .collect::<Vec<_>>()
        };
        match namespace {
            None => all.iter().collect(),
            Some(ns) if ns == self.global_namespace => in_namespace(ns),
            Some(ns) => {
                let mut chosen = in_namespace(ns);
                chosen.extend(in_namespace(&self.global_namespace));
                chosen
            }
        }
    }

    fn info(&self, catalog_ns: &str, catalog_name: &str) -> CatalogInfo {
        self.sources
            .get(&ObjectRef::new(catalog_name).within(catalog_ns))
            .map(|source| CatalogInfo::from_source(&source))
            .unwrap_or_else(|| CatalogInfo {
                namespace: catalog_ns.to_owned(),
                name: catalog_name.to_owned(),
                ..CatalogInfo::default()
            })
    }

    /// The PackageManifests of `namespace` (its catalogs' packages, then the
    /// global catalogs', all shown in `namespace`), or of every namespace.
    pub fn list(&self, namespace: Option<&str>) -> Vec<PackageManifest> {
        let all = self.catalogs.all();
        let mut out = Vec::new();
        for ((catalog_ns, catalog_name), state) in self.chosen(&all, namespace) {
            let Some(content) = &state.content else { continue };
            let info = self.info(catalog_ns, catalog_name);
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

    /// The icon of package `name` as `namespace` sees it (the package a get
    /// would answer): its default channel head's, if it has one. `None` when
    /// the namespace sees no such package.
    pub fn icon(&self, namespace: &str, name: &str) -> Option<PackageIcon> {
        let all = self.catalogs.all();
        self.chosen(&all, Some(namespace))
            .into_iter()
            .find_map(|((catalog_ns, catalog_name), state)| {
                let content = state.content.as_ref()?;
                let package = content.catalog.package(name)?;
                let info = self.info(catalog_ns, catalog_name);
                let manifest = package_manifest(&info, &content.catalog, &content.heads, package)?;
                let status = manifest.status;
                let head = status
                    .channels
                    .into_iter()
                    .find(|c| c.name == status.default_channel)
                    .map(|c| c.current_csv)
                    .unwrap_or_default();
                let icon = content
                    .heads
                    .get(&(name.to_owned(), head.clone()))
                    .and_then(|h| h.icon.clone());
                Some(PackageIcon {
                    package: name.to_owned(),
                    channel: status.default_channel,
                    head,
                    icon,
                })
            })
    }

    /// The plan for the Subscription `request` names, in `namespace`, for
    /// `package`: the namespace read from the stores as the Subscription
    /// controller reads it, then resolved by [`plan::decide`]. Writes nothing.
    pub fn plan(
        &self,
        namespace: &str,
        package: &str,
        request: PackagePlan,
    ) -> Result<PackagePlan, PlanError> {
        let subscription = plan::subscription(namespace, package, &request)?;
        let name = subscription.name_any();
        let in_namespace = |ns: Option<String>| ns.as_deref() == Some(namespace);
        let existing: Vec<Arc<Subscription>> = self
            .subscriptions
            .state()
            .into_iter()
            .filter(|s| in_namespace(s.namespace()))
            .collect();
        let subscriptions = plan::with_subscription(namespace, &existing, subscription)?;
        let csvs: Vec<Arc<ClusterServiceVersion>> = self
            .csvs
            .state()
            .into_iter()
            .filter(|c| in_namespace(c.namespace()))
            .collect();
        let scope = if namespace == self.global_namespace {
            vec![namespace]
        } else {
            vec![namespace, self.global_namespace.as_str()]
        };
        let catalogs = self
            .catalogs
            .visible(&scope, &plan::named_catalogs(&subscriptions));
        let index = self.catalogs.index(&catalogs);
        let status = plan::decide(&index, namespace, &name, &subscriptions, &csvs, &catalogs)?;
        Ok(plan::answer(namespace, package, request, status))
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
