//! Everything catalog-operator does with container images, in one place: pulling
//! catalog images and serving the file-based catalog inside them, pulling bundle
//! images (in process, or by OLM's unpack Job, whose steps run catalog-operator
//! itself), the pull secrets both use, the cache of bundles read from images, and
//! the image flags of `run` (mirrors, limits, unpack method).
//!
//! - [`catalogs`]: a catalog image pulled in process, its file-based catalog read,
//!   and how it is served (from memory or by a registry Pod); its digest polled.
//! - [`bundles`]: bundle images pulled in process, unpacked into bundle directories,
//!   and the cache of what was read ([`bundles::BundleImages`]).
//! - [`unpack`]: completing a resolved bundle from its image, with the OperatorGroup's
//!   unpack timeout and retry interval: pulled in process or by a Job.
//! - [`unpack_jobs`]: unpacking bundle images in a Job, OLM's way, and the Job's
//!   steps (`catalog-operator unpack`, [`unpack_jobs::steps`]).
//! - [`pull_secrets`]: the pull secrets of a catalog, as registry credentials.
//! - [`args`]: the image flags of `run` (mirrors, limits, unpack method).
//!
//! The controllers keep only their side: the CatalogSource step that stores a
//! catalog read from an image (`controllers::catalogsource::image`) and the
//! Subscription's BundleUnpacking condition (`controllers::subscription::unpacking`).

pub mod args;
pub mod bundles;
pub mod catalogs;
pub mod pull_secrets;
pub mod unpack;
pub mod unpack_jobs;
