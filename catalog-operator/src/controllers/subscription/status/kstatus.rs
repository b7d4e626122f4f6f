//! Ready, Reconciling and Stalled (kstatus), from the other conditions and the state.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{
    SubscriptionConditionReason as Reason, SubscriptionConditionType as Type, SubscriptionState,
};

use crate::controllers::conditions::{
    remove_subscription_condition, set_subscription_condition, subscription_condition_true,
};

/// Ready, Reconciling and Stalled, as Argo CD would judge the Subscription.
pub(super) fn set_kstatus(
    conditions: &mut Vec<olm_api::v1alpha1::SubscriptionCondition>,
    state: Option<SubscriptionState>,
    now: &Time,
) {
    let degraded = [
        Type::ResolutionFailed,
        Type::CatalogSourcesUnhealthy,
        Type::InstallPlanFailed,
    ]
    .into_iter()
    .find(|t| subscription_condition_true(conditions, *t))
    .map(|t| {
        let message = conditions
            .iter()
            .find(|c| c.type_ == t)
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        let reason = match t {
            Type::ResolutionFailed => Reason::ConstraintsNotSatisfiable,
            Type::CatalogSourcesUnhealthy => Reason::UnhealthyCatalogSourceFound,
            _ => Reason::InstallComponentFailed,
        };
        (reason, message)
    })
    .or_else(|| {
        (state == Some(SubscriptionState::UpgradeFailed))
            .then(|| (Reason::UpgradeFailed, "the install plan failed".to_owned()))
    });
    let pending = conditions
        .iter()
        .find(|c| c.type_ == Type::InstallPlanPending)
        .and_then(|c| c.reason.clone());
    match (degraded, state) {
        (Some((reason, message)), _) => {
            set_subscription_condition(conditions, Type::Ready, false, reason.clone(), &message, now);
            remove_subscription_condition(conditions, Type::Reconciling);
            set_subscription_condition(conditions, Type::Stalled, true, reason, &message, now);
        }
        (None, Some(SubscriptionState::AtLatestKnown)) => {
            set_subscription_condition(
                conditions,
                Type::Ready,
                true,
                Reason::AtLatestKnown,
                "the latest known CSV is installed",
                now,
            );
            remove_subscription_condition(conditions, Type::Reconciling);
            remove_subscription_condition(conditions, Type::Stalled);
        }
        (None, _) if pending == Some(Reason::RequiresApproval) => {
            set_subscription_condition(
                conditions,
                Type::Ready,
                false,
                Reason::RequiresApproval,
                "the install plan waits for approval",
                now,
            );
            remove_subscription_condition(conditions, Type::Reconciling);
            remove_subscription_condition(conditions, Type::Stalled);
        }
        (None, _) => {
            let message = "installing";
            set_subscription_condition(
                conditions,
                Type::Ready,
                false,
                Reason::UpgradePending,
                message,
                now,
            );
            set_subscription_condition(
                conditions,
                Type::Reconciling,
                true,
                Reason::UpgradePending,
                message,
                now,
            );
            remove_subscription_condition(conditions, Type::Stalled);
        }
    }
}
