//! Rendering bundles into file-based catalog content, as `opm render` does, and a directory of
//! bundle versions (a package, as in community-operators) into a whole catalog.
//!
//! A rendered bundle carries, sorted by type then by value as `opm` sorts them:
//! - `olm.package` (package annotation, CSV `spec.version`);
//! - `olm.gvk` for every version of every CRD object in the bundle, and every owned API service;
//! - `olm.gvk.required` for the CSV's required CRDs and API services, and `olm.gvk` dependencies;
//! - `olm.package.required` for `olm.package` dependencies (the version is the range);
//! - `olm.constraint`, `olm.label.required` and other dependencies, properties of the metadata
//!   properties file and of the CSV's `olm.properties` annotation, and `olm-rs.endpoints`, the
//!   relation endpoints of the CSV's `olm-rs.dev/endpoints` annotation, carried unchanged (as JSON,
//!   or as the text itself when it is not YAML: the catalog's validation says what is wrong), and
//!   `olm-rs.actions`, the actions of the CSV's `olm-rs.dev/actions` annotation, carried the same way;
//! - then one `olm.bundle.object` per manifest (base64 of its JSON, as Go writes it) and/or
//!   `olm.csv.metadata`, last.
//!
//! `opm` writes an `olm.label` dependency as an `olm.label` property, which would make the bundle
//! *provide* the label; here it becomes `olm.label.required`, which is what it means.
//!
//! The parts, each depending only on those listed before it:
//! - `error`: [`RenderError`];
//! - `metadata`: the `olm.csv.metadata` property of a CSV, shaped as Go writes it;
//! - `properties`: a bundle's properties by kind, in `opm`'s order;
//! - `bundle`: [`RenderOptions`] and one bundle rendered ([`render_bundle`],
//!   [`render_bundle_dir`]), with its objects and related images;
//! - `channels`: [`GraphMode`], and a package's channels, edges and default channel built from
//!   its bundles;
//! - `ci`: what a package's `ci.yaml` says;
//! - `templates`: the community pipeline's catalog templates and release configs;
//! - `package`: a package directory rendered into a catalog ([`render_package_dir`],
//!   [`PackageRender`]).

mod bundle;
mod channels;
mod ci;
mod error;
mod metadata;
mod package;
mod properties;
mod templates;

pub use bundle::{RenderOptions, render_bundle, render_bundle_dir};
pub use channels::GraphMode;
pub use error::RenderError;
pub use metadata::csv_metadata;
pub use package::{PackageRender, render_package_dir, render_package_dir_with};
