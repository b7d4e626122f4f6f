//! What the catalog-operator e2e tests share: typed CatalogSources and
//! Subscriptions, the demo registry and the in-process operator set up in one
//! call, condition lookups, and bundles of the tests' own catalogs.

#![allow(dead_code)]

use e2e::inprocess::{Operator, Registry, demo_index};
use k8s_openapi::api::core::v1::Service;
use kube::{Api, Client, ResourceExt, api::PostParams};
use olm_api::v1alpha1::{
    Approval, CatalogSource, CatalogSourceSpec, ConditionStatus, ConnectivityState, RegistryPoll, SourceType,
    Subscription, SubscriptionConditionType, SubscriptionSpec, UpdateStrategy,
};
use olm_testkit::{
    FIELD_MANAGER, install_crds,
    objects::{catalog_is_ready, install_plan_of},
    wait_for,
};

pub fn catalog_source(name: &str, address: &str) -> CatalogSource {
    CatalogSource::new(
        name,
        CatalogSourceSpec {
            source_type: SourceType::Grpc,
            priority: None,
            config_map: None,
            address: Some(address.to_owned()),
            image: None,
            grpc_pod_config: None,
            update_strategy: None,
            secrets: None,
            display_name: Some("Demo".to_owned()),
            description: None,
            publisher: None,
            icon: None,
        },
    )
}

pub fn subscription(name: &str, namespace: &str, package: &str, approval: Approval) -> Subscription {
    subscription_from(name, namespace, package, approval, None)
}

pub fn subscription_from(
    name: &str,
    namespace: &str,
    package: &str,
    approval: Approval,
    starting_csv: Option<&str>,
) -> Subscription {
    let mut sub = Subscription::new(
        name,
        SubscriptionSpec {
            catalog_source: "demo".to_owned(),
            catalog_source_namespace: namespace.to_owned(),
            package: package.to_owned(),
            channel: Some("stable".to_owned()),
            starting_csv: starting_csv.map(str::to_owned),
            install_plan_approval: Some(approval),
            config: None,
        },
    );
    sub.metadata.namespace = Some(namespace.to_owned());
    sub
}

pub async fn create<K>(api: &Api<K>, object: &K) -> K
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(
        &PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        },
        object,
    )
    .await
    .unwrap_or_else(|e| panic!("create {}: {e}", object.meta().name.clone().unwrap_or_default()))
}

pub fn connection(source: Option<&CatalogSource>) -> Option<ConnectivityState> {
    source?
        .status
        .as_ref()?
        .connection_state
        .as_ref()
        .map(|c| c.last_observed_state)
}

pub fn condition(
    sub: &Subscription,
    type_: SubscriptionConditionType,
) -> Option<(ConditionStatus, String, String)> {
    sub.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status,
                c.reason.as_ref().map(ToString::to_string).unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

pub fn has_plan(sub: Option<&Subscription>) -> bool {
    sub.is_some_and(|s| install_plan_of(s).is_some())
}

/// Starts a registry, the operator and a READY CatalogSource `demo` in `namespace`.
pub async fn setup(client: &Client, namespace: &str, tools: bool) -> (Registry, Operator) {
    setup_polling(client, namespace, tools, None).await
}

/// [`setup`], with the CatalogSource polling its registry every `poll`.
pub async fn setup_polling(
    client: &Client,
    namespace: &str,
    tools: bool,
    poll: Option<&str>,
) -> (Registry, Operator) {
    install_crds(client).await;
    let registry = Registry::start(demo_index(tools), "127.0.0.1:0".parse().unwrap()).await;
    let operator = Operator::start(client, namespace).await;
    let sources: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
    let mut source = catalog_source("demo", &registry.addr.to_string());
    source.spec.update_strategy = poll.map(|interval| UpdateStrategy {
        registry_poll: Some(RegistryPoll {
            interval: Some(interval.to_owned()),
        }),
    });
    create(&sources, &source).await;
    wait_for(&sources, "demo", "CatalogSource demo is READY", catalog_is_ready).await;
    (registry, operator)
}

pub async fn service_uid(services: &Api<Service>) -> String {
    match services.get_opt("community").await.unwrap() {
        Some(service) => service.uid().unwrap(),
        None => String::new(),
    }
}

/// A bundle for the tests' own catalogs: its manifests and the API it provides.
pub fn bundle(
    name: &str,
    package: &str,
    version: &str,
    objects: &[serde_json::Value],
    gvk: Option<(&str, &str, &str)>,
) -> olm_catalog::Bundle {
    use olm_catalog::{
        Property,
        property::{BundleObject, PackageProperty},
    };
    let mut properties = vec![Property::Package(PackageProperty {
        package_name: package.to_owned(),
        version: olm_catalog::Version::new(version),
        release: None,
    })];
    if let Some((group, version, kind)) = gvk {
        properties.push(Property::Gvk(olm_catalog::Gvk {
            group: group.to_owned(),
            kind: kind.to_owned(),
            version: version.to_owned(),
        }));
    }
    properties.extend(
        objects
            .iter()
            .map(|o| Property::BundleObject(BundleObject::from_json(&o.to_string()))),
    );
    olm_catalog::Bundle {
        name: name.to_owned(),
        package: package.to_owned(),
        image: String::new(),
        properties,
        related_images: Vec::new(),
    }
}

pub fn csv_manifest(
    name: &str,
    version: &str,
    replaces: Option<&str>,
    owned: Option<(&str, &str, &str)>,
) -> serde_json::Value {
    let mut csv = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": name},
        "spec": {
            "displayName": name,
            "version": version,
            "installModes": [{"type": "AllNamespaces", "supported": true}],
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
        },
    });
    if let Some(replaces) = replaces {
        csv["spec"]["replaces"] = replaces.into();
    }
    if let Some((crd, version, kind)) = owned {
        csv["spec"]["customresourcedefinitions"] =
            serde_json::json!({"owned": [{"name": crd, "version": version, "kind": kind}]});
    }
    csv
}

pub fn crd_manifest(group: &str, versions: &[&str]) -> serde_json::Value {
    let last = versions.len() - 1;
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": "Thing", "listKind": "ThingList", "plural": "things", "singular": "thing"},
            "scope": "Namespaced",
            "versions": versions.iter().enumerate().map(|(i, v)| serde_json::json!({
                "name": v,
                "served": true,
                "storage": i == last,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            })).collect::<Vec<_>>(),
        },
    })
}
