//! olm-catalog-store: the catalogs a catalog-operator holds, in memory, as its
//! controllers and its PackageManifest API read them.
//!
//! - [`catalogs`]: the shared store of catalog snapshots, one per CatalogSource,
//!   with their health, priority and the resolver's indexes.
//! - [`bundles`]: bundle manifests read on demand from where a catalog came from
//!   (a registry, a ConfigMap) and the few read last.
//! - [`channel_heads`]: the channel heads' CSV descriptions and icons kept with a
//!   catalog while the PackageManifest API is served.
//!
//! It knows catalogs, the registry client and the API server's ConfigMaps, and
//! nothing of the controllers that fill it (catalog-operator's CatalogSource
//! controller) or of the server that reads it (`olm-packageserver`).

pub mod bundles;
pub mod catalogs;
pub mod channel_heads;
