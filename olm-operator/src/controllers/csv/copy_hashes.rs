//! The annotations of copied CSVs (see [`crate::controllers::copiedcsv`]). A
//! leaf: the build step leaves [`STATUS_HASH`] off pod templates without
//! using the copies' controller.

/// Annotation on a copy: the hash of its metadata and spec as last written (as in OLM).
pub const SPEC_HASH: &str = "olm.operatorframework.io/nonStatusCopyHash";
/// Annotation that earlier releases kept on an original: the hash of the
/// status its copies were last written with. No longer written, and removed
/// by the next apply of the original's annotations
/// (`update_status::owned_annotations`); until then never copied, neither to
/// the copies nor to pod templates.
pub const STATUS_HASH: &str = "olm-rs.dev/copied-status-hash";
