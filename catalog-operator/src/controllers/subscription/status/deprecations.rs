//! The deprecation conditions of a Subscription.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{SubscriptionConditionReason as Reason, SubscriptionConditionType as Type};
use olm_resolver::plan::DeprecatedSubject;

use super::input::StatusInput;
use crate::controllers::conditions::{remove_subscription_condition, set_subscription_condition};

/// PackageDeprecated, ChannelDeprecated, BundleDeprecated and Deprecated, from the
/// deprecations of the package, channel and bundle this Subscription gets.
pub(super) fn set_deprecations(
    conditions: &mut Vec<olm_api::v1alpha1::SubscriptionCondition>,
    input: &StatusInput<'_>,
    name: &str,
    now: &Time,
) {
    let sub = input.subscription;
    let target = input.group.targets.get(name);
    let mut any = Vec::new();
    let mut one = |type_: Type, message: Option<String>, any: &mut Vec<String>| match message {
        Some(message) => {
            set_subscription_condition(conditions, type_, true, Reason::Deprecated, &message, now);
            any.push(message);
        }
        None => {
            remove_subscription_condition(conditions, type_);
        }
    };
    let find = |wanted: &dyn Fn(&DeprecatedSubject) -> bool| {
        input
            .group
            .deprecations
            .iter()
            .find(|d| wanted(&d.subject))
            .map(ToString::to_string)
    };
    let package = &sub.spec.package;
    one(
        Type::PackageDeprecated,
        find(&|s| matches!(s, DeprecatedSubject::Package(p) if p == package)),
        &mut any,
    );
    let channel = sub.spec.channel.clone().unwrap_or_default();
    one(
        Type::ChannelDeprecated,
        find(
            &|s| matches!(s, DeprecatedSubject::Channel { package: p, channel: c } if p == package && (channel.is_empty() || *c == channel)),
        ),
        &mut any,
    );
    one(
        Type::BundleDeprecated,
        target.and_then(|t| find(&|s| matches!(s, DeprecatedSubject::Bundle(b) if *b == t.bundle))),
        &mut any,
    );
    if any.is_empty() {
        remove_subscription_condition(conditions, Type::Deprecated);
    } else {
        set_subscription_condition(
            conditions,
            Type::Deprecated,
            true,
            Reason::Deprecated,
            &any.join("; "),
            now,
        );
    }
}
