//! The `packages.operators.coreos.com/v1` PackageManifest API, as OLM's
//! packageserver serves it, served by catalog-operator itself from the catalogs
//! it already holds (no second copy, no second process).
//!
//! - [`describe`]: the channel heads' CSV descriptions kept with catalog content.
//! - [`manifest`]: catalog content → PackageManifests (pure).

pub mod describe;
pub mod manifest;

#[cfg(test)]
mod tests;
