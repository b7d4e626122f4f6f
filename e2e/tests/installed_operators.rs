//! An installed operator's needs constrain the upgrades of what it depends on, on
//! a real control plane: `pin-a` needs package `pin-b` in `>=1.0.0 <2.0.0`;
//! installing `pin-a` brings `pin-b` 1.5.0 with a Subscription of its own; when
//! the catalog gets `pin-b` 2.0.0, that Subscription stays at 1.5.0 and says
//! which installed operator holds it back; once `pin-a` 2.0.0 (which allows
//! `pin-b` 2.x) is in the catalog, `pin-a` upgrades and `pin-b` follows.
//!
//! The catalog-operator runs in-process against a registry on loopback whose
//! content the test replaces, as a catalog update does.

mod common;

use std::sync::Arc;

use e2e::inprocess::{Operator, Registry};
use kube::Api;
use olm_api::v1alpha1::{
    Approval, CatalogSource, ClusterServiceVersion, ConditionStatus, RegistryPoll, Subscription,
    SubscriptionConditionType, UpdateStrategy,
};
use olm_catalog::{Catalog, ChannelEntry, Property, property::PackageRequired};
use olm_registry::server::RegistryIndex;
use olm_testkit::{
    install_crds,
    objects::{catalog_is_ready, subscription_at},
    wait_for, with_namespace,
};

use common::*;

/// A bundle of package `package` at `version`, replacing `replaces`, needing
/// package `pin-b` in `needs_b` when given.
struct Pin {
    package: &'static str,
    version: &'static str,
    replaces: Option<&'static str>,
    needs_b: Option<&'static str>,
}

impl Pin {
    fn name(&self) -> String {
        format!("{}.v{}", self.package, self.version)
    }
}

/// A catalog with package `pin-a` and `pin-b`, one `stable` channel each, holding `pins`.
fn catalog(pins: &[Pin]) -> Catalog {
    let mut catalog = Catalog::default();
    for package in ["pin-a", "pin-b"] {
        catalog.packages.push(olm_catalog::Package {
            name: package.to_owned(),
            default_channel: Some("stable".to_owned()),
            icon: None,
            description: None,
            properties: Vec::new(),
        });
        catalog.channels.push(olm_catalog::Channel {
            name: "stable".to_owned(),
            package: package.to_owned(),
            entries: pins
                .iter()
                .filter(|p| p.package == package)
                .map(|p| ChannelEntry {
                    name: p.name(),
                    replaces: p.replaces.map(str::to_owned),
                    ..ChannelEntry::default()
                })
                .collect(),
            properties: Vec::new(),
        });
    }
    for pin in pins {
        let name = pin.name();
        let mut bundle = bundle(
            &name,
            pin.package,
            pin.version,
            &[csv_manifest(&name, pin.version, pin.replaces, None)],
            None,
        );
        if let Some(range) = pin.needs_b {
            bundle.properties.push(Property::PackageRequired(PackageRequired {
                package_name: "pin-b".to_owned(),
                version_range: range.to_owned(),
            }));
        }
        catalog.bundles.push(bundle);
    }
    catalog.sort();
    catalog
}

const A1: Pin = Pin {
    package: "pin-a",
    version: "1.0.0",
    replaces: None,
    needs_b: Some(">=1.0.0 <2.0.0"),
};
const A2: Pin = Pin {
    package: "pin-a",
    version: "2.0.0",
    replaces: Some("pin-a.v1.0.0"),
    needs_b: Some(">=1.0.0 <3.0.0"),
};
const B15: Pin = Pin {
    package: "pin-b",
    version: "1.5.0",
    replaces: None,
    needs_b: None,
};
const B2: Pin = Pin {
    package: "pin-b",
    version: "2.0.0",
    replaces: Some("pin-b.v1.5.0"),
    needs_b: None,
};

/// The held-back condition: ResolutionFailed, False, reason UpgradeHeldBack.
fn held_back(sub: &Subscription) -> Option<String> {
    let (status, reason, message) = condition(sub, SubscriptionConditionType::ResolutionFailed)?;
    (status == ConditionStatus::False && reason == "UpgradeHeldBack").then_some(message)
}

#[tokio::test]
async fn an_installed_operator_holds_back_its_dependency_until_it_allows_the_upgrade() {
    with_namespace("catpin", |client, ns| async move {
        install_crds(&client).await;
        let registry = Registry::start(
            Arc::new(RegistryIndex::new(catalog(&[A1, B15]))),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await;
        let operator = Operator::start(&client, &ns).await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        let mut source = catalog_source("demo", &registry.addr.to_string());
        source.spec.update_strategy = Some(UpdateStrategy {
            registry_poll: Some(RegistryPoll {
                interval: Some("1s".to_owned()),
            }),
        });
        create(&sources, &source).await;
        wait_for(&sources, "demo", "CatalogSource demo is READY", catalog_is_ready).await;

        // Installing pin-a brings pin-b 1.5.0, with a Subscription of its own.
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        create(&subs, &subscription("a", &ns, "pin-a", Approval::Automatic)).await;
        wait_for(
            &subs,
            "a",
            "Subscription a is at pin-a.v1.0.0",
            subscription_at("pin-a.v1.0.0"),
        )
        .await
        .expect("pin-a installs");
        let b = format!("pin-b-stable-demo-{ns}");
        wait_for(
            &subs,
            &b,
            "pin-b's Subscription is at 1.5.0",
            subscription_at("pin-b.v1.5.0"),
        )
        .await
        .expect("pin-b comes with pin-a");

        // The catalog gets pin-b 2.0.0: pin-b stays, and its Subscription says why.
        registry
            .service
            .replace(Arc::new(RegistryIndex::new(catalog(&[A1, B15, B2]))));
        let held = wait_for(
            &subs,
            &b,
            "pin-b's Subscription says its upgrade is held back",
            |sub: Option<&Subscription>| sub.and_then(held_back).is_some(),
        )
        .await
        .expect("the upgrade is held back");
        let message = held_back(&held).unwrap();
        assert!(
            message.starts_with("pin-b.v2.0.0 held back by installed operator pin-a.v1.0.0: "),
            "{message}"
        );
        assert!(
            message.contains("pin-a.v1.0.0 requires package pin-b in range >=1.0.0 <2.0.0"),
            "{message}"
        );
        let status = held.status.as_ref().unwrap();
        assert_eq!(status.installed_csv.as_deref(), Some("pin-b.v1.5.0"));
        assert_eq!(status.current_csv.as_deref(), Some("pin-b.v1.5.0"));
        assert_eq!(
            condition(&held, SubscriptionConditionType::Ready).map(|c| c.0),
            Some(ConditionStatus::True),
            "nothing failed: the Subscription stays healthy"
        );
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        assert!(
            csvs.get_opt("pin-b.v2.0.0").await.unwrap().is_none(),
            "pin-b 2.0.0 is not installed"
        );

        // pin-a 2.0.0 allows pin-b 2.x: pin-a upgrades and pin-b follows.
        registry
            .service
            .replace(Arc::new(RegistryIndex::new(catalog(&[A1, A2, B15, B2]))));
        wait_for(
            &subs,
            "a",
            "Subscription a upgrades to pin-a.v2.0.0",
            subscription_at("pin-a.v2.0.0"),
        )
        .await
        .expect("pin-a upgrades");
        let followed = wait_for(
            &subs,
            &b,
            "pin-b's Subscription follows to 2.0.0",
            subscription_at("pin-b.v2.0.0"),
        )
        .await
        .expect("pin-b follows");
        assert_eq!(held_back(&followed), None, "nothing holds it back any more");
        assert!(condition(&followed, SubscriptionConditionType::ResolutionFailed).is_none());
        let upgraded = csvs.get("pin-b.v2.0.0").await.unwrap();
        assert_eq!(upgraded.spec.replaces.as_deref(), Some("pin-b.v1.5.0"));

        operator.stop().await;
        registry.stop().await;
    })
    .await;
}
