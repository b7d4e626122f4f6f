//! The statuses of all Subscriptions of a namespace at once (step 4 of a sync).

use std::{collections::HashSet, sync::Arc};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use olm_api::v1alpha1::{Subscription, SubscriptionStatus};

use super::{compute::compute, input::StatusInput, unpack::set_unpack_conditions};
use crate::controllers::subscription::{inputs::NamespaceInputs, plans::GroupPlans, resolve::GroupDecision};

/// The status one Subscription should have.
pub struct StatusUpdate {
    /// The Subscription as read.
    pub subscription: Arc<Subscription>,
    /// Its status.
    pub status: SubscriptionStatus,
    /// Whether that differs from the status it has.
    pub changed: bool,
}

/// The statuses of a namespace's Subscriptions.
pub struct Statuses {
    /// One per Subscription of a group, in the groups' order.
    pub updates: Vec<StatusUpdate>,
    /// The InstallPlans that a status refers to (never collected as garbage).
    pub referenced: HashSet<String>,
}

/// Step 4 of a sync (pure): the status of every Subscription of every group,
/// from its group's decision and plan (`written.by_group`, in the decisions'
/// order), or else from the plan the Subscription already refers to.
pub fn statuses(
    inputs: &NamespaceInputs,
    decisions: &[GroupDecision],
    written: &GroupPlans,
    now: &Time,
) -> Statuses {
    let csv_exists = |name: &str| inputs.csvs.iter().any(|c| c.name_any() == name);
    let mut referenced: HashSet<String> = HashSet::new();
    let mut updates = Vec::new();
    for (i, group) in decisions.iter().enumerate() {
        let plan = written.by_group.get(i).cloned().flatten();
        if let Some(plan) = &plan {
            referenced.insert(plan.name_any());
        }
        for name in &group.subscriptions {
            let Some(subscription) = inputs.subscriptions.iter().find(|s| &s.name_any() == name) else {
                continue;
            };
            let referenced_plan = subscription
                .status
                .as_ref()
                .and_then(|s| s.install_plan_ref.as_ref()?.name.clone())
                .and_then(|name| written.all.iter().find(|p| p.name_any() == name));
            let mut status = compute(&StatusInput {
                subscription,
                group,
                install_plan: plan.as_deref().or(referenced_plan.map(|p| p.as_ref())),
                csv_exists: &csv_exists,
                catalogs: &inputs.catalogs,
                catalog_uids: &inputs.catalog_uids,
                olm_config: inputs.olm_config.as_deref(),
                now,
            });
            set_unpack_conditions(&mut status, written.unpack.get(i).cloned().flatten(), now);
            if let Some(reference) = status.install_plan_ref.as_ref().and_then(|r| r.name.clone()) {
                referenced.insert(reference);
            }
            updates.push(StatusUpdate {
                subscription: subscription.clone(),
                changed: subscription.status.as_ref() != Some(&status)
                    || written.marked_unpacking.contains(name),
                status,
            });
        }
    }
    Statuses { updates, referenced }
}
