//! Catalog content for olm-rs: packages, channels, bundles and their properties, and the loaders
//! that read them from every format OLM v0 accepts.
//!
//! - [`fbc`]: file-based catalogs (JSON streams and YAML, files and directory trees), and writing a
//!   catalog back as a deterministic JSON stream.
//! - [`bundle`]: bundle directories (`manifests/` + `metadata/`), read as operator-registry does.
//! - [`render`]: bundles to `olm.bundle` blobs as `opm render` makes them, and a directory of
//!   bundle versions to a whole package.
//! - [`manifests_dir`]: OLM's legacy on-disk package-manifest layout (`<package>.package.yaml` beside
//!   version directories); not the PackageManifest API (`packages.operators.coreos.com`), which
//!   catalog-operator serves.
//! - [`configmap`]: OLM's ConfigMap catalog format.
//! - [`source`]: catalog content read from a path, whatever its layout (any of the above on disk).
//! - [`validate`]: the checks `opm validate` makes on a catalog.
//! - [`template`]: the community pipeline's `olm.template.basic` catalog templates.
//!
//! CSVs and other manifests are kept as `serde_json::Value`, with typed accessors in [`bundle`] for
//! what catalogs need.

#![warn(missing_docs)]

mod bounded;
pub mod bundle;
pub mod configmap;
mod current_csv;
mod docs;
pub mod error;
mod fastyaml;
pub mod fbc;
mod gojson;
pub mod manifests_dir;
pub mod model;
mod par;
pub mod property;
pub mod render;
pub mod size;
pub mod source;
pub mod template;
pub mod validate;
pub mod version;

pub use error::LoadError;
pub use model::{
    Bundle, Catalog, Channel, ChannelEntry, Deprecation, DeprecationEntry, DeprecationReference, Icon, Meta,
    Package, RelatedImage,
};
pub use property::{Gvk, Property};
pub use version::Version;
