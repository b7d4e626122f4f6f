//! `catalog-operator run`: the controllers and their watches, run by
//! olm-runtime's [`Runtime`] (leader election, admin server, telemetry, metrics,
//! shutdown).
//!
//! Watch topology: one shared reflector per kind (Subscriptions, InstallPlans,
//! CSVs, CatalogSources, registry Pods and Services, and the metadata of
//! Namespaces and ConfigMaps), in one namespace or in all; and two for bundle
//! unpacks: the Jobs and the ConfigMaps (whole) labelled
//! `operatorframework.io/bundle-unpack-ref`, no others.
//! - CatalogSource controller ← CatalogSources; the registry Pods and Services
//!   of image catalogs (only objects labelled `olm.catalogSource` are watched).
//! - Subscription controller ← Subscriptions; InstallPlans (their owner
//!   Subscriptions); CSVs, catalog changes, unpack Jobs and ConfigMaps (one
//!   Subscription per affected namespace: any of them syncs the whole
//!   namespace).
//! - InstallPlan controller ← InstallPlans; CRDs and APIServices as metadata,
//!   kept nowhere (the plans waiting for an API).
//!
//! Every controller reconciles everything again when this replica gains the lease.
//! `/readyz` turns ready once every store has synced, on standbys too.

use std::{sync::Arc, time::Duration};

use futures::{FutureExt, StreamExt, stream};
use k8s_openapi::{
    api::{
        batch::v1::Job,
        core::v1::{ConfigMap, Namespace, Pod, Service},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    core::PartialObjectMeta,
    runtime::{
        WatchStreamExt,
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use olm_api::{
    model::OperatorRevision,
    v1::{OLMConfig, OperatorGroup},
    v1alpha1::{CatalogSource, ClusterServiceVersion, InstallPlan, Subscription},
};
use olm_runtime::{
    Parts, Runtime, RuntimeArgs, RuntimeError, apply::FIELD_MANAGER_CATALOG, backoff::TriggerBackoff,
    leader::parse_duration, reflector::Reflector,
};

use crate::{
    catalogs::CatalogStore,
    controllers::{Context, Options, Stores, catalogsource, installplan, revision, subscription, trim},
    images::unpack_jobs::JobStores,
    metrics::CatalogMetrics,
};

/// Arguments of `run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Logging, admin server and leader election.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// The namespace whose CatalogSources every namespace may use.
    #[arg(long, env = "OLM_GLOBAL_CATALOG_NAMESPACE", default_value = "olm")]
    pub global_catalog_namespace: String,
    /// Watch only this namespace [default: all namespaces].
    #[arg(long, env = "OLM_WATCH_NAMESPACE")]
    pub watch_namespace: Option<String>,
    /// How often a catalog is checked for health (and an unreachable one retried).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub catalog_health_interval: Duration,
    /// How often catalog content is reloaded when a CatalogSource sets no
    /// `updateStrategy.registryPoll.interval`.
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub default_poll_interval: Duration,
    /// How long an InstallPlan retries a step that fails for a transient reason.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub install_plan_retry_timeout: Duration,
    /// The PackageManifest API server.
    #[command(flatten)]
    pub package_server: Box<olm_packageserver::PackageServerArgs>,
    /// Pulling bundle and catalog images.
    #[command(flatten)]
    pub images: crate::images::args::ImageArgs,
    /// The image unpack Jobs run `catalog-operator unpack` from (for
    /// CatalogSources annotated `olm-rs.dev/bundle-unpack-method: Job`): this
    /// binary's own image, statically linked so that it runs in a bundle image.
    #[arg(long, default_value = crate::controllers::DEFAULT_UNPACK_JOB_IMAGE)]
    pub unpack_job_image: String,
}

impl RunArgs {
    /// The controllers' options these arguments describe.
    pub fn options(&self) -> Options {
        Options {
            global_catalog_namespace: self.global_catalog_namespace.clone(),
            namespace: self.watch_namespace.clone().filter(|n| !n.is_empty()),
            catalog_health_interval: self.catalog_health_interval,
            default_poll_interval: self.default_poll_interval,
            install_plan_retry_timeout: self.install_plan_retry_timeout,
            package_server: self.package_server.config(),
            unpack_job_image: self.unpack_job_image.clone(),
            ..Options::default()
        }
    }
}

/// Why `run` stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The runtime could not start, or stopped other than by a shutdown signal.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The catalog-operator's metrics could not be registered.
    #[error("cannot register the catalog-operator metrics")]
    Metrics(#[from] prometheus::Error),
    /// The image pulling flags are invalid.
    #[error("invalid image pulling flags: {0}")]
    Images(String),
}

/// Runs the operator until SIGTERM or Ctrl-C.
pub async fn run(args: RunArgs) -> Result<(), RunError> {
    let pull_options = args.images.pull_options().map_err(RunError::Images)?;
    if !crate::images::bundles::BundleImages::configure(pull_options) {
        tracing::warn!("image pulling was configured before the flags were read; the flags are ignored");
    }
    let runtime = Runtime::builder(FIELD_MANAGER_CATALOG)
        .with_args(args.runtime.clone())
        .build()
        .await?;
    let controllers = controllers(runtime.parts(), args.options())?;
    Ok(runtime.run(controllers).await?)
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// The name of each object of kind `K` (watched as metadata, kept nowhere)
/// created, changed or deleted.
fn api_changes<K>(client: &Client) -> impl futures::Stream<Item = String> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(
        Api::<PartialObjectMeta<K>>::all(client.clone()),
        watcher::Config::default(),
    )
    .backoff(TriggerBackoff::default())
    .touched_objects()
    .filter_map(|object| std::future::ready(object.ok().map(|o| o.name_any())))
}

/// The namespaces watched: `namespace` alone, or all of them.
fn watched_namespaces(namespace: Option<&str>) -> watcher::Config {
    match namespace {
        Some(namespace) => watcher::Config::default().fields(&format!("metadata.name={namespace}")),
        None => watcher::Config::default(),
    }
}

/// One Subscription per namespace: reconciling any of them syncs the namespace.
fn one_per_namespace(
    subscriptions: &Store<Subscription>,
    namespace: Option<&str>,
) -> Vec<ObjectRef<Subscription>> {
    let mut chosen: std::collections::BTreeMap<String, Arc<Subscription>> = std::collections::BTreeMap::new();
    for sub in subscriptions.state() {
        let Some(ns) = sub.namespace() else { continue };
        if namespace.is_some_and(|wanted| wanted != ns) {
            continue;
        }
        match chosen.get(&ns) {
            Some(existing) if existing.name_any() <= sub.name_any() => {}
            _ => {
                chosen.insert(ns, sub);
            }
        }
    }
    chosen.values().map(|s| ObjectRef::from_obj(s.as_ref())).collect()
}

/// The shared watches of the three controllers.
struct Watches {
    catalog_sources: Reflector<CatalogSource>,
    subscriptions: Reflector<Subscription>,
    install_plans: Reflector<InstallPlan>,
    csvs: Reflector<ClusterServiceVersion>,
    revisions: Reflector<OperatorRevision>,
    olm_configs: Reflector<OLMConfig>,
    pods: Reflector<Pod>,
    services: Reflector<Service>,
    namespaces: Reflector<PartialObjectMeta<Namespace>>,
    config_maps: Reflector<PartialObjectMeta<ConfigMap>>,
    operator_groups: Reflector<PartialObjectMeta<OperatorGroup>>,
    unpack_jobs: Reflector<Job>,
    unpack_config_maps: Reflector<ConfigMap>,
}

impl Watches {
    /// The watches of `namespace` (all namespaces when `None`).
    fn new(parts: &Parts, namespace: Option<&str>) -> Self {
        let client = &parts.client;
        let all = watcher::Config::default;
        // Only the registry Pods and Services of image catalogs, never every Pod.
        let registry_objects = || watcher::Config::default().labels(olm_api::labels::CATALOG_SOURCE);
        // Only bundle unpack Jobs and ConfigMaps, never every Job or ConfigMap.
        let unpack_objects = || watcher::Config::default().labels(olm_api::labels::unpack::REF);
        // Copies in target namespaces (olm.copiedFrom) are no installed operators: kept out.
        let not_copies = watcher::Config::default().labels(&format!("!{}", olm_api::labels::COPIED_FROM));
        Watches {
            catalog_sources: parts.reflector(api(client, namespace), all()),
            subscriptions: parts.reflector(api(client, namespace), all()),
            install_plans: parts
                .reflector(api(client, namespace), all())
                .modify(trim::install_plan),
            csvs: parts
                .reflector(api(client, namespace), not_copies)
                .modify(trim::csv),
            revisions: parts
                .reflector(api(client, namespace), all())
                .modify(trim::revision),
            olm_configs: parts
                .reflector(Api::all(client.clone()), all())
                .modify(|config: &mut OLMConfig| config.metadata.managed_fields = None),
            pods: parts.reflector(api(client, namespace), registry_objects()),
            services: parts.reflector(api(client, namespace), registry_objects()),
            namespaces: parts
                .reflector(Api::all(client.clone()), watched_namespaces(namespace))
                .modify(|ns: &mut PartialObjectMeta<Namespace>| ns.metadata.annotations = None),
            // Names and versions are all the CatalogSource controller reads of them.
            config_maps: parts.reflector(api(client, namespace), all()).modify(
                |map: &mut PartialObjectMeta<ConfigMap>| {
                    map.metadata.annotations = None;
                    map.metadata.labels = None;
                },
            ),
            // One per namespace; only the unpack policy's annotations are read.
            operator_groups: parts.reflector(api(client, namespace), all()).modify(
                |group: &mut PartialObjectMeta<OperatorGroup>| {
                    group.metadata.labels = None;
                    group.metadata.managed_fields = None;
                    if let Some(annotations) = group.metadata.annotations.as_mut() {
                        annotations.retain(|key, _| {
                            crate::images::unpack::POLICY_ANNOTATIONS.contains(&key.as_str())
                        });
                    }
                },
            ),
            unpack_jobs: parts
                .reflector(api(client, namespace), unpack_objects())
                .modify(trim::unpack_job),
            unpack_config_maps: parts.reflector(api(client, namespace), unpack_objects()),
        }
    }

    /// The stores the controllers read.
    fn stores(&self) -> Stores {
        Stores {
            subscriptions: self.subscriptions.store(),
            install_plans: self.install_plans.store(),
            csvs: self.csvs.store(),
            revisions: self.revisions.store(),
            olm_configs: self.olm_configs.store(),
            catalog_sources: self.catalog_sources.store(),
            pods: self.pods.store(),
            services: self.services.store(),
            namespaces: self.namespaces.store(),
            config_maps: self.config_maps.store(),
            operator_groups: self.operator_groups.store(),
            unpack: JobStores {
                jobs: self.unpack_jobs.store(),
                config_maps: self.unpack_config_maps.store(),
                jobs_synced: self.unpack_jobs.synced(),
                config_maps_synced: self.unpack_config_maps.synced(),
            },
        }
    }

    /// The watches, run until the process ends.
    fn run(self) -> impl Future<Output = ()> + Send + 'static + use<> {
        futures::future::join_all([
            self.catalog_sources.run(),
            self.subscriptions.run(),
            self.install_plans.run(),
            self.csvs.run(),
            self.revisions.run(),
            self.olm_configs.run(),
            self.pods.run(),
            self.services.run(),
            self.namespaces.run(),
            self.config_maps.run(),
            self.operator_groups.run(),
            self.unpack_jobs.run(),
            self.unpack_config_maps.run(),
        ])
        .map(drop)
    }
}

/// The three controllers and their watches, as one future that ends once they
/// have drained after `parts.shutdown`. Writes go through `parts.writer`; each
/// store has a readiness gate in `parts.readiness`.
pub fn controllers(
    parts: &Parts,
    options: Options,
) -> Result<impl Future<Output = ()> + Send + 'static, prometheus::Error> {
    let catalog_metrics = CatalogMetrics::register(parts.metrics.registry())?;
    let catalogs = CatalogStore::new();
    let mut watches = Watches::new(parts, options.namespace.as_deref());
    // Deleted CatalogSources are forgotten (their content, clients and metrics).
    let deleted_sources = watches.catalog_sources.deleted();
    // A deleted InstallPlan changes the status of the Subscriptions that refer to
    // it (InstallPlanMissing), and a deleted CSV what is installed in its
    // namespace (a Subscription whose CSV is gone is resolved again). Shared
    // streams carry no deletions: these are heard apart.
    let deletions = stream::select(
        watches
            .install_plans
            .deleted()
            .filter_map(|plan| std::future::ready(plan.namespace())),
        watches
            .csvs
            .deleted()
            .filter_map(|csv| std::future::ready(csv.namespace())),
    );
    let ctx = Arc::new(Context::new(
        parts.client.clone(),
        parts.writer.clone(),
        catalogs.clone(),
        watches.stores(),
        options.clone(),
        catalog_metrics,
        parts.metrics.reconcile.clone(),
    ));
    let catalog_ctx = Arc::new(catalogsource::CatalogSourceContext::new(ctx.clone()));
    let forget_deleted = forget_deleted_sources(deleted_sources, catalog_ctx.clone());
    let catalog_controller = catalog_source_controller(parts, &watches, catalog_ctx);
    let subscription_controller = subscription_controller(parts, &watches, &ctx, deletions);
    let revision_controller = revision_controller(parts, &watches, ctx.clone());
    let install_plan_controller = install_plan_controller(parts, &watches, ctx);

    tracing::info!(
        namespace = options.namespace.as_deref().unwrap_or("(all)"),
        global_catalog_namespace = %options.global_catalog_namespace,
        "catalog-operator controllers starting"
    );
    // The watches and the deletion relay never end; the controllers end on shutdown.
    // The PackageManifest API is served by every replica (it only reads).
    let package_server = package_server(&parts.client, &options, &catalogs, &watches);
    let background = futures::future::join3(watches.run(), forget_deleted, package_server);
    let controllers = async {
        tokio::join!(
            catalog_controller,
            subscription_controller,
            install_plan_controller,
            revision_controller
        );
    };
    Ok(async move {
        futures::future::select(Box::pin(controllers), Box::pin(background)).await;
        tracing::info!("catalog-operator controllers stopped");
    })
}

/// Forgets each deleted CatalogSource (its content, clients and metrics) as soon as it goes.
fn forget_deleted_sources<S>(
    deleted: S,
    catalog_ctx: Arc<catalogsource::CatalogSourceContext>,
) -> impl Future<Output = ()> + Send + 'static + use<S>
where
    S: futures::Stream<Item = Arc<CatalogSource>> + Send + 'static,
{
    deleted.for_each(move |source| {
        if let Some(namespace) = source.namespace() {
            catalogsource::forget(&catalog_ctx, &namespace, &source.name_any());
        }
        std::future::ready(())
    })
}

/// The CatalogSource controller, woken by its registry Pods and Services too.
fn catalog_source_controller(
    parts: &Parts,
    watches: &Watches,
    catalog_ctx: Arc<catalogsource::CatalogSourceContext>,
) -> impl Future<Output = ()> + Send + 'static + use<> {
    parts
        .controller(&watches.catalog_sources)
        .owns_shared_stream(watches.pods.subscribe())
        .owns_shared_stream(watches.services.subscribe())
        .run(catalogsource::reconcile, catalogsource::error_policy, catalog_ctx)
        .for_each(|_| std::future::ready(()))
}

/// One Subscription per namespace whose Subscriptions may wait for an unpack in
/// `object`'s namespace (the CatalogSource's): that namespace, or every
/// namespace for the global catalog namespace.
fn unpack_waiters<K: Resource>(
    subscriptions: Store<Subscription>,
    global: String,
) -> impl Fn(Arc<K>) -> Vec<ObjectRef<Subscription>> + Send + Sync + 'static {
    move |object| {
        let Some(namespace) = object.meta().namespace.as_deref() else {
            return Vec::new();
        };
        // The global catalog namespace's catalogs serve every namespace.
        let only = (namespace != global).then_some(namespace);
        one_per_namespace(&subscriptions, only)
    }
}

/// The Subscription controller: one reconcile syncs a namespace, woken by its
/// Subscriptions, InstallPlans and CSVs, by catalog changes, by plans and CSVs
/// deleted (`deletions`: their namespaces), and by the unpack Jobs and
/// ConfigMaps of the catalogs it may use.
fn subscription_controller<S>(
    parts: &Parts,
    watches: &Watches,
    ctx: &Arc<Context>,
    deletions: S,
) -> impl Future<Output = ()> + Send + 'static + use<S>
where
    S: futures::Stream<Item = String> + Send + 'static,
{
    let subscription_store = watches.subscriptions.store();
    let namespace = ctx.options.namespace.clone();
    let catalog_changes = {
        let subscriptions = subscription_store.clone();
        let rx = ctx.catalogs.subscribe();
        stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
        .flat_map(move |()| stream::iter(one_per_namespace(&subscriptions, namespace.as_deref())))
    };
    let deletions = {
        let subscriptions = subscription_store.clone();
        deletions.flat_map(move |namespace| stream::iter(one_per_namespace(&subscriptions, Some(&namespace))))
    };
    let csv_mapper = {
        let subscriptions = subscription_store.clone();
        move |csv: Arc<ClusterServiceVersion>| {
            let namespace = csv.namespace();
            one_per_namespace(&subscriptions, namespace.as_deref())
                .into_iter()
                .filter(move |r| r.namespace == namespace)
        }
    };
    let global = ctx.options.global_catalog_namespace.clone();
    let job_waiters = unpack_waiters::<Job>(subscription_store.clone(), global.clone());
    let config_map_waiters = unpack_waiters::<ConfigMap>(subscription_store.clone(), global);
    let subscription_ctx = Arc::new(subscription::SubscriptionContext::new(ctx.clone()));
    parts
        .controller(&watches.subscriptions)
        .owns_shared_stream(watches.install_plans.subscribe())
        .watches_shared_stream(watches.csvs.subscribe(), csv_mapper)
        .watches_shared_stream(watches.unpack_jobs.subscribe(), job_waiters)
        .watches_shared_stream(watches.unpack_config_maps.subscribe(), config_map_waiters)
        .reconcile_on(stream::select(catalog_changes, deletions))
        .run(
            subscription::reconcile,
            subscription::error_policy,
            subscription_ctx,
        )
        .for_each(|_| std::future::ready(()))
}

/// The InstallPlan controller. A plan waiting for an API looks again when a CRD
/// or an APIService changes (one is created, or becomes Established or
/// Available), not on a timer.
fn install_plan_controller(
    parts: &Parts,
    watches: &Watches,
    ctx: Arc<Context>,
) -> impl Future<Output = ()> + Send + 'static + use<> {
    // A kept discovery answer of the changed API's group is read again.
    let discovered = ctx.discovered.clone();
    let api_changes = stream::select(
        api_changes::<CustomResourceDefinition>(&parts.client),
        api_changes::<APIService>(&parts.client),
    )
    .map(move |name| {
        if let Some(group) = installplan::discovery::group_of(&name) {
            discovered.forget_group(group);
        }
    });
    let plans = &watches.install_plans;
    let waiting_plans = installplan::wake_on_api_changes(api_changes, plans.store());
    parts
        .controller(plans)
        .reconcile_on(waiting_plans)
        .run(installplan::reconcile, installplan::error_policy, ctx)
        .for_each(|_| std::future::ready(()))
}

/// The revision controller: one reconcile per Subscription, woken by its
/// installed CSV and by its revisions (a revision removed by hand is
/// recorded again while its CSV is installed and Succeeded).
fn revision_controller(
    parts: &Parts,
    watches: &Watches,
    ctx: Arc<Context>,
) -> impl Future<Output = ()> + Send + 'static + use<> {
    let subscriptions = watches.subscriptions.store();
    let installing = move |csv: Arc<ClusterServiceVersion>| revision::installing(&subscriptions, &csv);
    let owner = |revision: Arc<OperatorRevision>| revision::owner(&revision);
    // A hold after an automatic rollback ends when the channel head changes.
    let held = {
        let subscriptions = watches.subscriptions.store();
        let rx = ctx.catalogs.subscribe();
        stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
        .flat_map(move |()| stream::iter(revision::held_after_failure(&subscriptions)))
    };
    parts
        .controller(&watches.subscriptions)
        .watches_shared_stream(watches.csvs.subscribe(), installing)
        .watches_shared_stream(watches.revisions.subscribe(), owner)
        .reconcile_on(held)
        .run(revision::reconcile, revision::error_policy, ctx)
        .for_each(|_| std::future::ready(()))
}

/// The PackageManifest API server when it is enabled; never ends.
fn package_server(
    client: &Client,
    options: &Options,
    catalogs: &CatalogStore,
    watches: &Watches,
) -> impl Future<Output = ()> + Send + 'static + use<> {
    let server = options.package_server.clone().map(|config| {
        let stores = olm_packageserver::Sources {
            catalogs: catalogs.clone(),
            sources: watches.catalog_sources.store(),
            subscriptions: watches.subscriptions.store(),
            csvs: watches.csvs.store(),
        };
        olm_packageserver::run(
            client.clone(),
            config,
            stores,
            options.global_catalog_namespace.clone(),
        )
    });
    async move {
        match server {
            Some(server) => server.await,
            None => futures::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::Job;
    use kube::api::ObjectMeta;

    use super::*;

    fn subscription(namespace: &str, name: &str) -> Subscription {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"name": "p", "source": "c", "sourceNamespace": namespace}
        }))
        .unwrap()
    }

    fn job_in(namespace: &str) -> Arc<Job> {
        Arc::new(Job {
            metadata: ObjectMeta {
                name: Some("j".into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            ..Job::default()
        })
    }

    /// An unpack Job or ConfigMap wakes one Subscription of its own namespace,
    /// or of every namespace when it is the global catalog namespace's.
    #[test]
    fn an_unpack_wakes_the_namespaces_that_may_use_its_catalog() {
        let subscriptions = olm_testkit::stores::listed([
            subscription("team", "b"),
            subscription("team", "a"),
            subscription("other", "c"),
            subscription("olm", "d"),
        ]);
        let waiters = unpack_waiters::<Job>(subscriptions, "olm".into());
        let woken = |namespace: &str| {
            let mut names: Vec<String> = waiters(job_in(namespace))
                .into_iter()
                .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
                .collect();
            names.sort();
            names
        };
        assert_eq!(woken("team"), ["team/a"]);
        assert_eq!(woken("olm"), ["olm/d", "other/c", "team/a"]);
        assert!(woken("empty").is_empty());
    }
}
