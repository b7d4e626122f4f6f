//! The annotations that record which copied CSVs are current (see
//! [`super::copied`]). A leaf: the build step leaves [`STATUS_HASH`] off pod
//! templates and the status step keeps it on the original, without either
//! using the copies' module.

/// Annotation on a copy: the hash of its metadata and spec as last written.
pub const SPEC_HASH: &str = "olm.operatorframework.io/nonStatusCopyHash";
/// Annotation on an original: the hash of the status (see
/// [`super::copied::status_hash`]) every copy of it was last written with.
/// Never copied, neither to the copies nor to pod templates.
pub const STATUS_HASH: &str = "olm-rs.dev/copied-status-hash";
