//! What both olm-rs operators need once: leader election with fenced writes, the admin
//! server, logging, condition helpers, the field managers and metrics.
//!
//! - [`conditions`]: typed `metav1.Condition` maintenance and the kstatus conditions.

pub mod conditions;
