//! The status of a Subscription, computed from its group's decision, its
//! InstallPlan and the health of the catalogs it depends on (pure).
//!
//! The rules GitOps tools read (shared/research/gitops.md): conditions are always
//! present (at least CatalogSourcesUnhealthy); InstallPlanPending,
//! InstallPlanFailed and InstallPlanMissing are removed, never set False, when
//! they no longer apply (Argo CD counts any InstallPlanMissing whose reason is
//! not ReferencedInstallPlanNotFound as Degraded);
//! `state` is AtLatestKnown exactly once the chosen CSV exists, and never parked
//! at UpgradeAvailable; `installedCSV` is omitted until something is installed;
//! Ready/Reconciling/Stalled mirror Argo CD's Healthy/Progressing/Degraded.
//!
//! [`statuses`] is step 4 of a namespace sync: every Subscription's status at once.
//!
//! The parts, each depending only on those listed before it:
//! - `input`: [`StatusInput`], what one status follows from;
//! - `install_plan`: the references to the InstallPlan, why it failed, and
//!   InstallPlanMissing;
//! - `decision`: the state, the installed CSV, and ResolutionFailed and
//!   InstallPlanPending/Failed for each kind of group decision;
//! - `catalog_health`: the health of the catalogs, and CatalogSourcesUnhealthy;
//! - `deprecations`: PackageDeprecated, ChannelDeprecated, BundleDeprecated and
//!   Deprecated;
//! - `kstatus`: Ready, Reconciling and Stalled;
//! - `unpack`: BundleUnpacking and BundleUnpackFailed;
//! - `compute`: one Subscription's status from all of the above ([`compute()`]);
//! - `namespace`: every Subscription of a namespace ([`statuses`], [`Statuses`]).

mod catalog_health;
mod compute;
mod decision;
mod deprecations;
mod input;
mod install_plan;
mod kstatus;
mod namespace;
mod unpack;

pub use compute::compute;
pub use input::StatusInput;
pub use namespace::{StatusUpdate, Statuses, statuses};

#[cfg(test)]
mod tests;
