//! The status of one Subscription, composed from its parts.

use kube::ResourceExt;
use olm_api::v1alpha1::SubscriptionStatus;

use crate::controllers::conditions::{remove_subscription_condition, set_subscription_condition};

use super::{
    catalog_health::{catalog_health, set_catalogs_unhealthy},
    decision::{installed_csv, set_held_back, set_installing, set_unsatisfiable, set_up_to_date},
    deprecations::set_deprecations,
    input::StatusInput,
    install_plan::set_install_plan_missing,
    kstatus::set_kstatus,
};
use crate::controllers::subscription::resolve::Decision;

/// The status `input.subscription` should have.
pub fn compute(input: &StatusInput<'_>) -> SubscriptionStatus {
    let sub = input.subscription;
    let name = sub.name_any();
    let old = sub.status.clone().unwrap_or_default();
    let mut status = old.clone();
    status.observed_generation = sub.metadata.generation;
    let mut conditions = old.conditions.clone().unwrap_or_default();
    // A rollback's condition goes with its hold: this Subscription is not held.
    remove_subscription_condition(
        &mut conditions,
        olm_api::v1alpha1::SubscriptionConditionType::RolledBack,
    );
    let now = input.now;

    let target = input.group.targets.get(&name);
    status.installed_csv = installed_csv(target, old.installed_csv.as_ref(), input.csv_exists);
    if let Some(target) = target {
        status.current_csv = Some(target.bundle.clone());
    }
    match &input.group.decision {
        Decision::Unsatisfiable(explanation) => set_unsatisfiable(&mut conditions, explanation, now),
        Decision::UpToDate => set_up_to_date(&mut status, &mut conditions, input, target),
        Decision::Install(_) => set_installing(&mut status, &mut conditions, input),
    }
    set_held_back(&mut conditions, input, target);
    set_install_plan_missing(&mut conditions, &status, input);
    let (health, unhealthy) = catalog_health(input, &old);
    status.catalog_health = Some(health);
    set_catalogs_unhealthy(&mut conditions, &unhealthy, now);
    set_deprecations(&mut conditions, input, &name, now);
    set_auto_rollback_invalid(&mut conditions, input);
    set_kstatus(&mut conditions, status.state, now);
    status.conditions = Some(conditions);

    let mut without_time = status.clone();
    without_time.last_updated = old.last_updated.clone();
    if without_time != old {
        status.last_updated = Some(now.clone());
    }
    status
}

/// AutoRollbackInvalid: True while automatic rollback is on for the
/// Subscription and its deadline cannot be read (the default applies).
fn set_auto_rollback_invalid(conditions: &mut super::input::Conditions, input: &StatusInput<'_>) {
    use olm_api::v1alpha1::{SubscriptionConditionReason as Reason, SubscriptionConditionType as Type};
    let policy = crate::controllers::revision::auto::policy(input.subscription, input.olm_config);
    match policy.unreadable.filter(|_| policy.enabled) {
        Some(unreadable) => {
            set_subscription_condition(
                conditions,
                Type::AutoRollbackInvalid,
                true,
                Reason::DeadlineUnreadable,
                &format!(
                    "the automatic rollback deadline cannot be read ({unreadable}); the default of {}s \
                 applies. Write a duration such as 10m",
                    policy.deadline.as_secs()
                ),
                input.now,
            );
        }
        None => {
            remove_subscription_condition(conditions, Type::AutoRollbackInvalid);
        }
    }
}
