//! olm-resolution: the resolution of a namespace, pure.
//!
//! The resolver (`olm-resolver`) knows bundles, channels and requirements, not
//! Kubernetes objects; the catalog crate (`olm-catalog`) knows catalog content as
//! OLM writes it. This crate is the translation between them and the API types:
//! a namespace's Subscriptions, the CSVs installed there and the catalogs it may
//! use go in, and each independent group of Subscriptions gets a decision out.
//! It does no I/O and holds no client, so every caller (the Subscription
//! controller, the PackageManifest API's plans, the offline `resolve` command)
//! reaches the same decision from the same inputs.
//!
//! - [`snapshot`]: loaded catalog content → the resolver's input.
//! - [`namespace`]: a namespace's objects → a [`Decision`] per group ([`decide`]).
//! - [`step`]: what a decision hands to planning ([`ResolvedStep`]).

pub mod namespace;
pub mod snapshot;
pub mod step;

pub use namespace::{
    CatalogBundles, Decision, GroupDecision, NamespaceView, Target, catalog_of, decide, installed_csvs,
    is_copied, resolver_subscriptions,
};
pub use step::ResolvedStep;
