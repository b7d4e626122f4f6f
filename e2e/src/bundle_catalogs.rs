//! Catalogs of bundle images served to a catalog-operator of one test, and
//! what those tests check on Subscriptions (`tests/bundle_images.rs`,
//! `tests/unpack_jobs.rs`).

use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{CatalogSource, ConditionStatus, Subscription, SubscriptionConditionType},
};
use olm_catalog::{Bundle, Catalog};
use olm_testkit::{
    objects::ready_catalog_source,
    process::{Process, free_port},
    wait_for,
};
use serde_json::json;

use crate::images::TestRegistry;

/// The CatalogSource [`serve_catalog`] makes.
pub const CATALOG_SOURCE: &str = "images";

/// A served catalog: what must stay alive while the test runs.
pub struct ServedCatalog {
    _dir: tempfile::TempDir,
    _registry: Process,
    _operator: Process,
}

/// Writes `catalog` as a file-based catalog, serves it with `catalog-operator
/// serve` (process `<label>-registry`), runs catalog-operator for `ns`
/// (process `label`) and waits until CatalogSource [`CATALOG_SOURCE`] in `ns`,
/// pointing at the registry, is READY.
pub async fn serve_catalog(client: &Client, ns: &str, label: &str, catalog: &Catalog) -> ServedCatalog {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(
        dir.path().join("catalog.json"),
        olm_catalog::fbc::to_json_stream(catalog),
    )
    .expect("write the catalog");
    let port = free_port();
    let registry = Process::registry(&format!("{label}-registry"), dir.path(), port);
    let operator = Process::catalog_operator(label, "catalog-operator", ns, Some(ns), ns);
    ready_catalog_source(client, ns, CATALOG_SOURCE, &format!("127.0.0.1:{port}")).await;
    ServedCatalog {
        _dir: dir,
        _registry: registry,
        _operator: operator,
    }
}

/// The bundle at the head of `package`'s `channel` in `catalog`.
pub fn head_bundle<'a>(catalog: &'a Catalog, package: &str, channel: &str) -> &'a Bundle {
    let head = olm_registry::server::RegistryIndex::new(catalog.clone())
        .get_bundle_for_channel(package, channel)
        .unwrap_or_else(|e| panic!("{package} has a head in {channel}: {e}"));
    catalog
        .bundles
        .iter()
        .find(|b| b.name == head.csv_name)
        .expect("the head is among the bundles")
}

/// Creates the `kubernetes.io/dockerconfigjson` Secret `name` in `ns` with the
/// test registry's credentials.
pub async fn create_pull_secret(client: &Client, ns: &str, name: &str, registry: &TestRegistry) {
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name},
                "type": "kubernetes.io/dockerconfigjson",
                "stringData": {".dockerconfigjson": registry.docker_config_json},
            }))
            .expect("a Secret"),
        )
        .await
        .expect("create the pull secret");
}

/// Names `secrets` in `spec.secrets` of CatalogSource [`CATALOG_SOURCE`] in `ns`.
pub async fn name_pull_secrets(client: &Client, ns: &str, secrets: &[&str]) {
    Api::<CatalogSource>::namespaced(client.clone(), ns)
        .patch(
            CATALOG_SOURCE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"secrets": secrets}})),
        )
        .await
        .expect("name the pull secrets on the CatalogSource");
}

/// Creates OperatorGroup `og` in `ns`, targeting `ns`, with OLM's unpack
/// annotations: `timeout` and `min_retry` (Go durations).
pub async fn unpack_operator_group(client: &Client, ns: &str, timeout: &str, min_retry: &str) {
    Api::<OperatorGroup>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "og", "annotations": {
                    "operatorframework.io/bundle-unpack-timeout": timeout,
                    "operatorframework.io/bundle-unpack-min-retry-interval": min_retry,
                }},
                "spec": {"targetNamespaces": [ns]},
            }))
            .expect("an OperatorGroup"),
        )
        .await
        .expect("create the OperatorGroup");
}

/// The message of the Subscription's condition `type_`, if it is True.
pub fn true_condition(sub: &Subscription, type_: SubscriptionConditionType) -> Option<String> {
    sub.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == ConditionStatus::True)
        .map(|c| c.message.clone().unwrap_or_default())
}

/// Waits until Subscription `name` has condition `type_` True with a message
/// that `accept` takes, and returns that message; `what` names the wait.
pub async fn wait_condition(
    subs: &Api<Subscription>,
    name: &str,
    type_: SubscriptionConditionType,
    what: &str,
    accept: impl Fn(&str) -> bool + Send + 'static,
) -> String {
    let sub = wait_for(subs, name, what, move |s: Option<&Subscription>| {
        s.and_then(|s| true_condition(s, type_))
            .is_some_and(|m| accept(&m))
    })
    .await
    .expect("the Subscription");
    true_condition(&sub, type_).unwrap_or_default()
}
