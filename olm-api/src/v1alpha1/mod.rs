//! `operators.coreos.com/v1alpha1`: ClusterServiceVersion, InstallPlan,
//! Subscription and CatalogSource.

mod catalogsource;
mod csv;
mod install_strategy;
mod installplan;
mod subscription;

pub use catalogsource::*;
pub use csv::*;
pub use install_strategy::*;
pub use installplan::*;
pub use subscription::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The status of a condition: True, False or Unknown.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It is not known whether the condition holds.
    Unknown,
}
