//! Everything catalog-operator does with container images, in one place: pulling
//! catalog images and serving the file-based catalog inside them, pulling bundle
//! images (in process, or by OLM's unpack Job), the pull secrets both use, and the
//! image flags of `run`.
//!
//! - [`catalogs`]: a catalog image pulled in process, its file-based catalog read.
//! - [`bundles`]: bundle images pulled in process, unpacked into bundle directories.
//! - [`unpack_jobs`]: unpacking bundle images in a Job, OLM's way.
//! - [`pull_secrets`]: the pull secrets of a catalog, as registry credentials.
//! - [`args`]: the image flags of `run` (mirrors, limits, unpack method).
//!
//! The controllers' steps that use them stay with their controllers
//! (`controllers::catalogsource::image`, `controllers::subscription::unpack`), as
//! does the unpack Job's command (`cli::unpack`).

pub mod args;
pub mod bundles;
pub mod catalogs;
pub mod pull_secrets;
pub mod unpack_jobs;
