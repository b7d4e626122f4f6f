//! The controllers of catalog-operator and what they share.
//!
//! - [`catalogsource`]: reads each CatalogSource into the [`CatalogStore`] and
//!   reports its connection state.
//! - [`subscription`]: resolves the Subscriptions of a namespace together, creates
//!   one InstallPlan per independent group, and reports on each Subscription.
//! - [`installplan`]: applies an InstallPlan's steps once it may run.
//! - [`revision`]: keeps what was installed for each Succeeded CSV of a
//!   Subscription as an OperatorRevision, within a history limit.
//! - [`plan`]: InstallPlans as objects (building one, its steps, its status),
//!   shared by the Subscription and InstallPlan controllers so that neither
//!   imports the other.
//!
//! All three read the same reflector stores ([`Stores`]) and write through one
//! fenced [`Writer`], so only the leader writes. [`Context`] holds only what they
//! share; a controller's own state lives in its own context
//! ([`catalogsource::CatalogSourceContext`], [`subscription::SubscriptionContext`]).

pub mod catalogsource;
pub mod conditions;
pub mod installplan;
pub mod plan;
pub mod revision;
pub mod subscription;
pub mod trim;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use kube::{Client, core::PartialObjectMeta, runtime::reflector::Store};
use olm_api::{
    model::OperatorRevision,
    v1::{OLMConfig, OperatorGroup},
    v1alpha1::{CatalogSource, ClusterServiceVersion, InstallPlan, Subscription},
};
use olm_runtime::{apply::Writer, metrics::ReconcileMetrics};

use olm_resolver::model::CatalogId;

use crate::{catalogs::CatalogStore, images::unpack_jobs::JobStores, metrics::CatalogMetrics};

/// The image unpack Jobs run the extractor from, unless `--unpack-job-image` says otherwise.
pub const DEFAULT_UNPACK_JOB_IMAGE: &str = "ghcr.io/olm-rs/catalog-operator:latest";

/// How the controllers behave; the defaults are OLM's where OLM has one.
#[derive(Clone, Debug)]
pub struct Options {
    /// The namespace whose CatalogSources every namespace may use (OLM's global
    /// catalog namespace).
    pub global_catalog_namespace: String,
    /// Watch only this namespace (all namespaces when `None`).
    pub namespace: Option<String>,
    /// How often a reachable catalog is checked for health, and how soon an
    /// unreachable one is retried.
    pub catalog_health_interval: Duration,
    /// How often catalog content is reloaded when the CatalogSource sets no
    /// `updateStrategy.registryPoll.interval`.
    pub default_poll_interval: Duration,
    /// How long an InstallPlan retries a step that fails for a transient reason
    /// before it fails (OLM's `--install-plan-retry-timeout`).
    pub install_plan_retry_timeout: Duration,
    /// How many InstallPlans are kept per namespace (OLM keeps 5).
    pub max_install_plans: usize,
    /// How often everything is reconciled even without a change (OLM: 15 minutes).
    pub resync_interval: Duration,
    /// The PackageManifest API server, when it is served.
    pub package_server: Option<olm_packageserver::Config>,
    /// The image of unpack Jobs' extractor: catalog-operator's own.
    pub unpack_job_image: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            global_catalog_namespace: "olm".to_owned(),
            namespace: None,
            catalog_health_interval: Duration::from_secs(10),
            unpack_job_image: DEFAULT_UNPACK_JOB_IMAGE.to_owned(),
            default_poll_interval: Duration::from_secs(15 * 60),
            install_plan_retry_timeout: Duration::from_secs(60),
            max_install_plans: 5,
            resync_interval: Duration::from_secs(15 * 60),
            package_server: None,
        }
    }
}

impl Options {
    /// What catalog content keeps for the PackageManifest API: the channel
    /// heads' descriptions while the package server runs, nothing otherwise.
    pub fn describe(&self) -> crate::channel_heads::Describe {
        crate::channel_heads::Describe::when_serving(self.package_server.is_some())
    }
}

/// The reflector stores the controllers read.
#[derive(Clone)]
pub struct Stores {
    /// Subscriptions.
    pub subscriptions: Store<Subscription>,
    /// InstallPlans.
    pub install_plans: Store<InstallPlan>,
    /// ClusterServiceVersions.
    pub csvs: Store<ClusterServiceVersion>,
    /// OperatorRevisions, without their objects ([`trim::revision`]).
    pub revisions: Store<OperatorRevision>,
    /// OLMConfigs (only `cluster` is read: the default of automatic rollback).
    pub olm_configs: Store<OLMConfig>,
    /// CatalogSources.
    pub catalog_sources: Store<CatalogSource>,
    /// Registry Pods of image catalogs (labelled `olm.catalogSource`).
    pub pods: Store<Pod>,
    /// Registry Services of image catalogs (labelled `olm.catalogSource`).
    pub services: Store<Service>,
    /// The watched namespaces, as metadata: whether one enforces the
    /// `restricted` Pod Security Standard decides a registry Pod's security.
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    /// ConfigMaps, as metadata: whether the one a ConfigMap catalog names
    /// exists and changed since it was loaded.
    pub config_maps: Store<PartialObjectMeta<ConfigMap>>,
    /// OperatorGroups, as metadata with only the annotations of the unpack
    /// policy (`crate::images::unpack::policy_of`).
    pub operator_groups: Store<PartialObjectMeta<OperatorGroup>>,
    /// The bundle unpack Jobs and ConfigMaps (only those labelled
    /// `operatorframework.io/bundle-unpack-ref`), whole.
    pub unpack: JobStores,
}

#[cfg(test)]
impl Stores {
    /// Stores that have listed nothing, for the tests of reconciles without a
    /// cluster: each test fills the ones it needs with struct update syntax.
    pub fn empty() -> Stores {
        use olm_testkit::stores::listed;
        Stores {
            subscriptions: listed(Vec::new()),
            install_plans: listed(Vec::new()),
            csvs: listed(Vec::new()),
            revisions: listed(Vec::new()),
            olm_configs: listed(Vec::new()),
            catalog_sources: listed(Vec::new()),
            pods: listed(Vec::new()),
            services: listed(Vec::new()),
            namespaces: listed(Vec::new()),
            config_maps: listed(Vec::new()),
            operator_groups: listed(Vec::new()),
            unpack: JobStores::listed(Vec::new(), Vec::new()),
        }
    }
}

/// What every controller shares.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// Fenced writes as `catalog-operator`.
    pub writer: Writer,
    /// Catalog content.
    pub catalogs: CatalogStore,
    /// The reflector stores.
    pub stores: Stores,
    /// Settings.
    pub options: Options,
    /// OLM's metrics.
    pub metrics: CatalogMetrics,
    /// Reconcile counts, errors and durations.
    pub reconciles: ReconcileMetrics,
    /// What the API server serves, kept between InstallPlan reconciles.
    pub discovered: installplan::discovery::Discovered,
    /// Events, published in the background.
    events: olm_runtime::events::Outbox,
}

impl Context {
    /// A context for the controllers.
    pub fn new(
        client: Client,
        writer: Writer,
        catalogs: CatalogStore,
        stores: Stores,
        options: Options,
        metrics: CatalogMetrics,
        reconciles: ReconcileMetrics,
    ) -> Self {
        let reporter = kube::runtime::events::Reporter {
            controller: olm_runtime::apply::FIELD_MANAGER_CATALOG.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            events: olm_runtime::events::Outbox::new(kube::runtime::events::Recorder::new(
                client.clone(),
                reporter,
            )),
            client,
            writer,
            catalogs,
            stores,
            options,
            metrics,
            reconciles,
            discovered: installplan::discovery::Discovered::default(),
        }
    }

    /// Publishes a Kubernetes Event about `object` when this replica leads,
    /// in the background: the reconcile does not wait for it, and a failure
    /// is logged, never returned.
    pub fn publish<K: kube::Resource<DynamicType = ()>>(
        &self,
        object: &K,
        event: kube::runtime::events::Event,
    ) {
        if self.writer.leadership().is_leader() {
            self.events.send(event, object.object_ref(&()));
        }
    }

    /// Drops from the catalog store and the metrics every catalog whose
    /// CatalogSource is gone from the store.
    pub fn forget_deleted_catalogs(&self) {
        let existing = self.stores.catalog_sources.state();
        self.metrics.catalog_source_count.set(existing.len() as i64);
        // A store that has not synced yet is empty: keep everything until it has
        // (the watch's delete events forget the last catalogs of a namespace).
        if existing.is_empty() {
            return;
        }
        for ((namespace, name), _) in self.catalogs.all() {
            let gone = !existing.iter().any(|s| {
                s.metadata.name.as_deref() == Some(&name)
                    && s.metadata.namespace.as_deref() == Some(&namespace)
            });
            if gone {
                self.forget_catalog(&CatalogId::new(name, namespace));
            }
        }
    }

    /// Drops one catalog from the catalog store and the metrics.
    pub fn forget_catalog(&self, id: &CatalogId) {
        self.catalogs.remove(id);
        self.metrics.forget_catalog(&id.namespace, &id.name);
    }

    /// The namespaces whose catalogs a Subscription in `namespace` may use.
    pub fn catalog_namespaces<'a>(&'a self, namespace: &'a str) -> Vec<&'a str> {
        if namespace == self.options.global_catalog_namespace {
            vec![namespace]
        } else {
            vec![namespace, self.options.global_catalog_namespace.as_str()]
        }
    }
}
