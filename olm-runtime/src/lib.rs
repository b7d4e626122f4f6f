//! What both olm-rs operators need once: leader election with fenced writes, the admin
//! server, logging, condition helpers, the field managers and metrics.
//!
//! - [`admin`]: `/metrics`, `/healthz`, `/readyz` ([`readiness`]).
//! - [`telemetry`]: `tracing` setup from `--log-level` and `--log-format`.
//! - [`conditions`]: typed `metav1.Condition` maintenance and the kstatus conditions.

pub mod admin;
pub mod conditions;
pub mod readiness;
pub mod telemetry;

pub use readiness::{Readiness, ReadyGate};
