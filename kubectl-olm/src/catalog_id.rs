//! A CatalogSource's identity, which errors and objects name without
//! depending on how catalogs are read.

use std::fmt;

use olm_api::packages::PackageManifest;

/// A CatalogSource, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CatalogId {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
}

impl CatalogId {
    /// The catalog `namespace/name`.
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        CatalogId {
            name: name.into(),
            namespace: namespace.into(),
        }
    }

    /// The catalog of a PackageManifest.
    pub fn of_manifest(manifest: &PackageManifest) -> Self {
        CatalogId::new(
            manifest.status.catalog_source.clone(),
            manifest.status.catalog_source_namespace.clone(),
        )
    }
}

impl fmt::Display for CatalogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
