//! The InstallPlan a Subscription refers to: its references, why it failed, and
//! InstallPlanMissing once it is gone.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::ResourceExt;
use olm_api::{
    OPERATORS_GROUP,
    v1alpha1::{
        InstallPlan, InstallPlanReference, SubscriptionConditionReason as Reason,
        SubscriptionConditionType as Type, SubscriptionStatus,
    },
};

use super::input::{Conditions, StatusInput};
use crate::controllers::conditions::{remove_subscription_condition, set_subscription_condition};

pub(super) fn install_plan_refs(ip: &InstallPlan) -> (ObjectReference, InstallPlanReference) {
    let api_version = format!("{OPERATORS_GROUP}/v1alpha1");
    (
        ObjectReference {
            api_version: Some(api_version.clone()),
            kind: Some("InstallPlan".to_owned()),
            name: Some(ip.name_any()),
            namespace: ip.namespace(),
            uid: ip.uid(),
            ..ObjectReference::default()
        },
        InstallPlanReference {
            api_version,
            kind: "InstallPlan".to_owned(),
            name: ip.name_any(),
            uuid: ip.uid().unwrap_or_default(),
        },
    )
}

/// Why the install plan failed, in words.
pub(super) fn failure_message(ip: &InstallPlan) -> String {
    let status = ip.status.as_ref();
    status
        .and_then(|s| s.message.clone())
        .or_else(|| {
            status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find_map(|c| c.message.clone()))
        })
        .unwrap_or_else(|| format!("install plan {} failed", ip.name_any()))
}

/// The plan the Subscription refers to is gone (deleted by hand, or beyond the
/// plans a namespace keeps) and no other plan stands in for it.
pub(super) fn set_install_plan_missing(
    conditions: &mut Conditions,
    status: &SubscriptionStatus,
    input: &StatusInput<'_>,
) {
    match (&status.install_plan_ref, input.install_plan) {
        (Some(reference), None) => {
            set_subscription_condition(
                conditions,
                Type::InstallPlanMissing,
                true,
                Reason::ReferencedInstallPlanNotFound,
                &format!(
                    "install plan {} was not found",
                    reference.name.as_deref().unwrap_or_default()
                ),
                input.now,
            );
        }
        _ => {
            remove_subscription_condition(conditions, Type::InstallPlanMissing);
        }
    }
}
