//! The health of the catalogs a Subscription may use, and CatalogSourcesUnhealthy
//! for those its group depends on.

use k8s_openapi::{api::core::v1::ObjectReference, apimachinery::pkg::apis::meta::v1::Time};
use olm_api::{
    OPERATORS_GROUP,
    v1alpha1::{
        Subscription, SubscriptionCatalogHealth, SubscriptionConditionReason as Reason,
        SubscriptionConditionType as Type, SubscriptionStatus,
    },
};
use olm_resolver::model::CatalogId;

use super::input::{Conditions, StatusInput};
use crate::{catalogs::Health, controllers::conditions::set_subscription_condition};

/// The health of every catalog the namespace may use (each entry's time kept
/// while its health is unchanged), and what is wrong with those the
/// Subscription's group depends on, in words.
pub(super) fn catalog_health(
    input: &StatusInput<'_>,
    old: &SubscriptionStatus,
) -> (Vec<SubscriptionCatalogHealth>, Vec<String>) {
    let mut health = Vec::new();
    let mut unhealthy = Vec::new();
    for (id, state) in input.catalogs {
        let healthy = state.is_healthy();
        let previous = old.catalog_health.iter().flatten().find(|h| {
            h.catalog_source_ref.name.as_deref() == Some(&id.name)
                && h.catalog_source_ref.namespace.as_deref() == Some(&id.namespace)
        });
        health.push(SubscriptionCatalogHealth {
            catalog_source_ref: ObjectReference {
                api_version: Some(format!("{OPERATORS_GROUP}/v1alpha1")),
                kind: Some("CatalogSource".to_owned()),
                name: Some(id.name.clone()),
                namespace: Some(id.namespace.clone()),
                uid: input.catalog_uids.get(id).cloned(),
                ..ObjectReference::default()
            },
            last_updated: match previous {
                Some(p) if p.healthy == healthy => p.last_updated.clone(),
                _ => Some(input.now.clone()),
            },
            healthy,
        });
        if !healthy && input.group.catalogs.contains(id) {
            let why = match &state.health {
                Health::Unhealthy(message) => message.clone(),
                Health::Pending => "not read yet".to_owned(),
                Health::Healthy => String::new(),
            };
            unhealthy.push(format!(
                "targeted catalogsource {}/{} unhealthy: {why}",
                id.namespace, id.name
            ));
        }
    }
    for id in &input.group.catalogs {
        if !input.catalogs.iter().any(|(known, _)| known == id) && sub_names(input.subscription, id) {
            unhealthy.push(format!(
                "targeted catalogsource {}/{} missing: create it or fix spec.source and spec.sourceNamespace",
                id.namespace, id.name
            ));
        }
    }
    (health, unhealthy)
}

/// CatalogSourcesUnhealthy: True with what is wrong, or False when nothing is.
pub(super) fn set_catalogs_unhealthy(conditions: &mut Conditions, unhealthy: &[String], now: &Time) {
    if unhealthy.is_empty() {
        set_subscription_condition(
            conditions,
            Type::CatalogSourcesUnhealthy,
            false,
            Reason::AllCatalogSourcesHealthy,
            "all available catalogsources are healthy",
            now,
        );
    } else {
        set_subscription_condition(
            conditions,
            Type::CatalogSourcesUnhealthy,
            true,
            Reason::UnhealthyCatalogSourceFound,
            &unhealthy.join("; "),
            now,
        );
    }
}

/// Whether the Subscription itself names catalog `id` (a missing catalog that
/// only a dependency would come from is not this Subscription's to report).
fn sub_names(sub: &Subscription, id: &CatalogId) -> bool {
    sub.spec.catalog_source == id.name && sub.spec.catalog_source_namespace == id.namespace
}
