//! OLM's own condition shapes (Subscription and InstallPlan conditions are not
//! `metav1.Condition`), maintained with the same rules as olm-runtime's
//! [`olm_runtime::conditions::set_condition`]: `lastTransitionTime` changes only
//! when the status flips, messages are cut to what the API server accepts, and
//! every change is reported so that a status is written only when it changed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{
    ConditionStatus, InstallPlanCondition, InstallPlanConditionReason, InstallPlanConditionType,
    SubscriptionCondition, SubscriptionConditionReason, SubscriptionConditionType,
};
use olm_runtime::conditions::truncate_message;

fn status_of(value: bool) -> ConditionStatus {
    if value {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    }
}

/// Sets the Subscription condition `type_`; returns whether anything changed.
pub fn set_subscription_condition(
    conditions: &mut Vec<SubscriptionCondition>,
    type_: SubscriptionConditionType,
    status: bool,
    reason: SubscriptionConditionReason,
    message: &str,
    now: &Time,
) -> bool {
    let status = status_of(status);
    let reason = Some(reason);
    let message = Some(truncate_message(message)).filter(|m| !m.is_empty());
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let before = existing.clone();
            if existing.status != status {
                existing.status = status;
                existing.last_transition_time = Some(now.clone());
            }
            existing.reason = reason;
            existing.message = message;
            *existing != before
        }
        None => {
            conditions.push(SubscriptionCondition {
                type_,
                status,
                reason,
                message,
                last_heartbeat_time: None,
                last_transition_time: Some(now.clone()),
            });
            true
        }
    }
}

/// Removes the Subscription condition `type_`; returns whether it was there.
pub fn remove_subscription_condition(
    conditions: &mut Vec<SubscriptionCondition>,
    type_: SubscriptionConditionType,
) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// Whether the Subscription condition `type_` is present and True.
pub fn subscription_condition_true(
    conditions: &[SubscriptionCondition],
    type_: SubscriptionConditionType,
) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
}

/// Sets the InstallPlan condition `type_`; returns whether anything changed.
pub fn set_install_plan_condition(
    conditions: &mut Vec<InstallPlanCondition>,
    type_: InstallPlanConditionType,
    status: bool,
    reason: InstallPlanConditionReason,
    message: &str,
    now: &Time,
) -> bool {
    let status = Some(status_of(status));
    let message = Some(truncate_message(message)).filter(|m| !m.is_empty());
    match conditions.iter_mut().find(|c| c.type_ == Some(type_)) {
        Some(existing) => {
            let before = existing.clone();
            if existing.status != status {
                existing.status = status;
                existing.last_transition_time = Some(now.clone());
            }
            existing.reason = Some(reason);
            existing.message = message;
            let changed = *existing != before;
            if changed {
                existing.last_update_time = Some(now.clone());
            }
            changed
        }
        None => {
            conditions.push(InstallPlanCondition {
                type_: Some(type_),
                status,
                last_update_time: Some(now.clone()),
                last_transition_time: Some(now.clone()),
                reason: Some(reason),
                message,
            });
            true
        }
    }
}

/// Removes the InstallPlan condition `type_`; returns whether it was there.
pub fn remove_install_plan_condition(
    conditions: &mut Vec<InstallPlanCondition>,
    type_: InstallPlanConditionType,
) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != Some(type_));
    conditions.len() != before
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use olm_runtime::conditions::is_valid_reason;

    use super::*;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    #[test]
    fn every_reason_is_valid() {
        for reason in SubscriptionConditionReason::KNOWN {
            assert!(is_valid_reason(reason.as_str()), "{reason:?}");
        }
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut conditions = Vec::new();
        let t = SubscriptionConditionType::CatalogSourcesUnhealthy;
        assert!(set_subscription_condition(
            &mut conditions,
            t,
            false,
            SubscriptionConditionReason::AllCatalogSourcesHealthy,
            "all healthy",
            &at(1)
        ));
        assert!(!set_subscription_condition(
            &mut conditions,
            t,
            false,
            SubscriptionConditionReason::AllCatalogSourcesHealthy,
            "all healthy",
            &at(2)
        ));
        assert_eq!(conditions[0].last_transition_time, Some(at(1)));
        assert!(set_subscription_condition(
            &mut conditions,
            t,
            true,
            SubscriptionConditionReason::UnhealthyCatalogSourceFound,
            "x is down",
            &at(3)
        ));
        assert_eq!(conditions[0].last_transition_time, Some(at(3)));
        assert!(subscription_condition_true(&conditions, t));
        assert!(remove_subscription_condition(&mut conditions, t));
        assert!(!remove_subscription_condition(&mut conditions, t));

        let mut ip = Vec::new();
        let i = InstallPlanConditionType::Installed;
        assert!(set_install_plan_condition(
            &mut ip,
            i,
            false,
            InstallPlanConditionReason::Installing,
            "",
            &at(1)
        ));
        assert!(!set_install_plan_condition(
            &mut ip,
            i,
            false,
            InstallPlanConditionReason::Installing,
            "",
            &at(2)
        ));
        assert_eq!(ip[0].last_update_time, Some(at(1)));
        assert!(set_install_plan_condition(
            &mut ip,
            i,
            true,
            InstallPlanConditionReason::Complete,
            "",
            &at(4)
        ));
        assert_eq!(ip[0].last_transition_time, Some(at(4)));
        assert!(remove_install_plan_condition(&mut ip, i));
    }
}
