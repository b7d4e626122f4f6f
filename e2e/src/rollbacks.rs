//! What the rollback tests read back from the cluster: a Subscription's
//! `RolledBack` condition, and the InstallPlans that install a CSV.

use kube::{Api, ResourceExt, api::ListParams};
use olm_api::v1alpha1::{ConditionStatus, InstallPlan, Subscription, SubscriptionConditionType};

/// The RolledBack condition of `sub`: status, reason, message.
pub fn rolled_back(sub: Option<&Subscription>) -> Option<(ConditionStatus, String, String)> {
    let c = sub?
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == SubscriptionConditionType::RolledBack)?;
    Some((
        c.status,
        c.reason.as_ref().map(ToString::to_string).unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// The InstallPlans of the namespace that install `csv`, by name.
pub async fn plans_for(plans: &Api<InstallPlan>, csv: &str) -> Vec<String> {
    let mut names: Vec<String> = plans
        .list(&ListParams::default())
        .await
        .expect("InstallPlans can be listed")
        .items
        .iter()
        .filter(|p| p.spec.cluster_service_version_names.iter().any(|c| c == csv))
        .map(|p| p.name_any())
        .collect();
    names.sort();
    names
}
