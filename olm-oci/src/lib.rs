//! Pulls images from OCI registries in process, for bundle and catalog images.
//!
//! [`Puller`] fetches an image by tag or digest (image indexes resolved to one
//! platform; OCI and Docker v2 media types), verifies every blob against its
//! digest, authenticates with pull-secret credentials ([`auth`]), tries the
//! configured mirrors first ([`mirror`]), retries transient failures with
//! backoff, and reads the layers into memory within a size limit ([`layers`]).
//! References are parsed by [`reference`], without a regular expression.

pub mod auth;
pub mod layers;
pub mod mirror;
mod pull;
pub mod reference;

pub use auth::{Credentials, DockerConfig};
pub use layers::{Files, LayerError, Limits, tar_gz_layer};
pub use mirror::Mirrors;
pub use pull::{Image, PullError, PullOptions, Puller, Select, is_loopback};
