//! The upgrade graph and the dependency resolver of olm-rs. Pure: no I/O, no Kubernetes client.
//!
//! - [`range`]: OLM's version range syntax (blang/semver v4), used by `olm.skipRange` and
//!   `olm.package.required`.
//! - [`model`]: the resolver's own input types (catalog snapshots, installed CSVs, Subscriptions).
//! - [`graph`]: per-channel upgrade graphs: heads, preference order, successors.
//! - [`CatalogIndex`]: snapshots indexed once; [`CatalogIndex::resolve`] resolves a namespace.
//! - [`plan`] and [`explain`]: what resolution returns, a plan or a plain-words explanation, per
//!   independent group of Subscriptions.
//!
//! ```
//! use olm_resolver::{CatalogIndex, model::*, plan::Outcome};
//!
//! let catalog = CatalogId::new("community", "olm");
//! let bundle = |name: &str, version: &str| {
//!     BundleInput::new(name, "etcd", BundleVersion::parse(version).unwrap())
//! };
//! let index = CatalogIndex::new(vec![CatalogSnapshot {
//!     id: catalog.clone(),
//!     priority: 0,
//!     packages: vec![PackageInput::new(
//!         "etcd",
//!         Some("stable"),
//!         vec![ChannelInput::new(
//!             "stable",
//!             vec![ChannelEntry::new("etcd.v0.9.4").replaces("etcd.v0.9.2"), ChannelEntry::new("etcd.v0.9.2")],
//!         )],
//!     )],
//!     bundles: vec![bundle("etcd.v0.9.4", "0.9.4"), bundle("etcd.v0.9.2", "0.9.2")],
//! }]);
//! let subscription = Subscription::new("etcd", "team-a", "etcd", catalog);
//! let resolution = index.resolve("team-a", &[], &[subscription]);
//! let Outcome::Plan(plan) = &resolution.groups[0].outcome else { panic!() };
//! assert_eq!(plan.steps[0].bundle, "etcd.v0.9.4");
//! ```

#![deny(missing_docs)]

pub mod explain;
pub mod graph;
mod index;
pub mod model;
pub mod plan;
pub mod range;
mod resolve;

pub use index::CatalogIndex;
pub use resolve::describe_requirement;
