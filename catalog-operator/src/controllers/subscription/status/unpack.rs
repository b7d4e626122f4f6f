//! The bundle unpack conditions of a Subscription, from its group's unpack.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{
    SubscriptionConditionReason as Reason, SubscriptionConditionType as Type, SubscriptionStatus,
};

use crate::controllers::{
    conditions::{remove_subscription_condition, set_subscription_condition},
    subscription::plans::UnpackState,
};

/// BundleUnpackFailed while a bundle image of the group's plan cannot be
/// unpacked (with the image and the cause), absent otherwise. BundleUnpacking is
/// True only while an image is unpacked (written during a pull by the unpack
/// itself, and here while an unpack Job runs): once the plan is made, it is gone.
pub(super) fn set_unpack_conditions(status: &mut SubscriptionStatus, state: Option<UnpackState>, now: &Time) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    remove_subscription_condition(conditions, Type::BundleUnpacking);
    match state {
        Some(UnpackState::Unpacking(message)) => {
            set_subscription_condition(
                conditions,
                Type::BundleUnpacking,
                true,
                Reason::UnpackingInProgress,
                &message,
                now,
            );
            remove_subscription_condition(conditions, Type::BundleUnpackFailed);
        }
        Some(UnpackState::Failed(message)) => {
            set_subscription_condition(
                conditions,
                Type::BundleUnpackFailed,
                true,
                Reason::BundleUnpackFailed,
                &message,
                now,
            );
        }
        None => {
            remove_subscription_condition(conditions, Type::BundleUnpackFailed);
        }
    }
    if conditions.is_empty() {
        status.conditions = None;
    }
}
