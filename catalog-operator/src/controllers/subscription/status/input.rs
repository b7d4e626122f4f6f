//! What the status of one Subscription follows from, and the conditions it is made of.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{InstallPlan, Subscription};
use olm_resolver::model::CatalogId;

use crate::{catalogs::CatalogState, controllers::subscription::resolve::GroupDecision};

/// Everything the status of one Subscription follows from.
pub struct StatusInput<'a> {
    /// The Subscription as last read.
    pub subscription: &'a Subscription,
    /// The decision for its group.
    pub group: &'a GroupDecision,
    /// The InstallPlan of the group when it has something to install, else the
    /// one the Subscription refers to (if it still exists).
    pub install_plan: Option<&'a InstallPlan>,
    /// Whether a CSV of that name exists in the namespace.
    pub csv_exists: &'a dyn Fn(&str) -> bool,
    /// The catalogs the namespace may use.
    pub catalogs: &'a [(CatalogId, CatalogState)],
    /// UIDs of the CatalogSources, for references.
    pub catalog_uids: &'a HashMap<CatalogId, String>,
    /// OLMConfig `cluster`, when there is one.
    pub olm_config: Option<&'a olm_api::v1::OLMConfig>,
    /// Now.
    pub now: &'a Time,
}

/// The conditions of a Subscription's status.
pub(super) type Conditions = Vec<olm_api::v1alpha1::SubscriptionCondition>;
