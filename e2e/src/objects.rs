//! The OLM objects a test creates as a user would, and what it waits for on
//! them.

use kube::{
    Api, Resource,
    api::{Patch, PatchParams},
};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{
        Approval, CatalogSource, ClusterServiceVersion, ConnectivityState, CsvPhase, InstallPlan,
        InstallPlanPhase, Subscription, SubscriptionState,
    },
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;

use crate::FIELD_MANAGER;

/// Server-side applies `object` (JSON of a typed kind) with the tests' field
/// manager, panicking with its name on error.
pub async fn apply<K>(api: &Api<K>, object: serde_json::Value) -> K
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Serialize,
{
    let object: K = serde_json::from_value(object).expect("a valid object");
    let name = object.meta().name.clone().expect("a named object");
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(&object))
        .await
        .unwrap_or_else(|e| panic!("cannot apply {name}: {e}"))
}

/// A gRPC CatalogSource `name` reading the registry at `address`.
pub async fn grpc_catalog_source(api: &Api<CatalogSource>, name: &str, address: &str) -> CatalogSource {
    apply(
        api,
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "CatalogSource",
            "metadata": {"name": name},
            "spec": {"sourceType": "grpc", "address": address, "displayName": name},
        }),
    )
    .await
}

/// A Subscription `name` to `package` on `channel` of the CatalogSource
/// `source` of the namespace `source_namespace`.
pub async fn subscribe(
    api: &Api<Subscription>,
    name: &str,
    (source, source_namespace): (&str, &str),
    package: &str,
    channel: &str,
    approval: Approval,
) -> Subscription {
    apply(
        api,
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": name},
            "spec": {
                "source": source,
                "sourceNamespace": source_namespace,
                "name": package,
                "channel": channel,
                "installPlanApproval": approval,
            },
        }),
    )
    .await
}

/// An OperatorGroup `name` targeting all namespaces.
pub async fn global_operator_group(api: &Api<OperatorGroup>, name: &str) -> OperatorGroup {
    apply(
        api,
        json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": name},
            "spec": {},
        }),
    )
    .await
}

/// The CatalogSource has connected to its registry.
pub fn catalog_is_ready(source: Option<&CatalogSource>) -> bool {
    source
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.connection_state.as_ref())
        .is_some_and(|c| c.last_observed_state == ConnectivityState::Ready)
}

/// The Subscription has installed `csv` and knows of nothing newer.
pub fn subscription_at(csv: &str) -> impl Fn(Option<&Subscription>) -> bool + '_ {
    move |sub: Option<&Subscription>| {
        sub.and_then(|s| s.status.as_ref()).is_some_and(|s| {
            s.state == Some(SubscriptionState::AtLatestKnown) && s.installed_csv.as_deref() == Some(csv)
        })
    }
}

/// The name of the InstallPlan the Subscription points at, if any.
pub fn install_plan_of(sub: &Subscription) -> Option<String> {
    sub.status.as_ref()?.install_plan_ref.as_ref()?.name.clone()
}

/// The InstallPlan is in `phase`.
pub fn plan_in(phase: InstallPlanPhase) -> impl Fn(Option<&InstallPlan>) -> bool {
    move |plan: Option<&InstallPlan>| {
        plan.and_then(|p| p.status.as_ref())
            .is_some_and(|s| s.phase == phase)
    }
}

/// The CSV is in `phase`.
pub fn csv_in(phase: CsvPhase) -> impl Fn(Option<&ClusterServiceVersion>) -> bool {
    move |csv: Option<&ClusterServiceVersion>| {
        csv.and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.phase == Some(phase))
    }
}
