//! `catalog-operator run`: the controllers and their watches, run by
//! olm-runtime's [`Runtime`] (leader election, admin server, telemetry, metrics,
//! shutdown).
//!
//! Watch topology: one shared reflector per kind (Subscriptions, InstallPlans,
//! CSVs, CatalogSources, registry Pods and Services), in one namespace or in all.
//! - CatalogSource controller ← CatalogSources; the registry Pods and Services
//!   of image catalogs (only objects labelled `olm.catalogSource` are watched).
//! - Subscription controller ← Subscriptions; InstallPlans (their owner
//!   Subscriptions); CSVs, catalog changes (one Subscription per affected
//!   namespace: any of them syncs the whole namespace).
//! - InstallPlan controller ← InstallPlans; CRDs and APIServices as metadata,
//!   kept nowhere (the plans waiting for an API).
//!
//! Every controller reconciles everything again when this replica gains the lease.
//! `/readyz` turns ready once every store has synced, on standbys too.

use std::{sync::Arc, time::Duration};

use futures::{StreamExt, stream};
use k8s_openapi::{
    api::core::v1::{Pod, Service},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    core::PartialObjectMeta,
    runtime::{
        Controller, WatchStreamExt,
        controller::Config as ControllerConfig,
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use olm_api::v1alpha1::{CatalogSource, ClusterServiceVersion, InstallPlan, Subscription};
use olm_runtime::{
    Parts, Runtime, RuntimeArgs, RuntimeError, apply::FIELD_MANAGER_CATALOG, backoff::TriggerBackoff,
    leader::parse_duration,
};

use crate::{
    catalogs::CatalogStore,
    controllers::{Context, Options, Stores, catalogsource, installplan, subscription, trim},
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
    pub package_server: Box<crate::packageserver::PackageServerArgs>,
    /// Pulling bundle and catalog images.
    #[command(flatten)]
    pub images: crate::image_args::ImageArgs,
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
    if !crate::bundle_images::BundleImages::configure(pull_options) {
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

/// A tick each time an object of kind `K` (watched as metadata, kept nowhere)
/// is created or changes.
fn api_changes<K>(client: &Client) -> impl futures::Stream<Item = ()> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(
        Api::<PartialObjectMeta<K>>::all(client.clone()),
        watcher::Config::default(),
    )
    .backoff(TriggerBackoff::default())
    .touched_objects()
    .filter_map(|object| std::future::ready(object.ok().map(drop)))
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

/// The three controllers and their watches, as one future that ends once they
/// have drained after `parts.shutdown`. Writes go through `parts.writer`; each
/// store has a readiness gate in `parts.readiness`.
pub fn controllers(
    parts: &Parts,
    options: Options,
) -> Result<impl Future<Output = ()> + Send + 'static, prometheus::Error> {
    let catalog_metrics = CatalogMetrics::register(parts.metrics.registry())?;
    let client = &parts.client;
    let namespace = options.namespace.clone();
    let ns = namespace.as_deref();
    let catalogs = CatalogStore::new();

    let all = watcher::Config::default;
    // Only the registry Pods and Services of image catalogs, never every Pod.
    let registry_objects = || watcher::Config::default().labels(olm_api::labels::CATALOG_SOURCE);
    let mut catalog_sources = parts.reflector::<CatalogSource>(api(client, ns), all());
    // Deleted CatalogSources are forgotten (their content, clients and metrics).
    let deleted_sources = catalog_sources.deleted();
    let subscriptions = parts.reflector::<Subscription>(api(client, ns), all());
    let mut install_plans = parts
        .reflector::<InstallPlan>(api(client, ns), all())
        .modify(trim::install_plan);
    // A deleted InstallPlan changes the status of the Subscriptions that refer to
    // it (InstallPlanMissing).
    let deleted_plans = install_plans.deleted();
    // Copies in target namespaces (olm.copiedFrom) are no installed operators: kept out.
    let not_copies = watcher::Config::default().labels(&format!("!{}", olm_api::labels::COPIED_FROM));
    let csvs = parts
        .reflector::<ClusterServiceVersion>(api(client, ns), not_copies)
        .modify(trim::csv);
    let pods = parts.reflector::<Pod>(api(client, ns), registry_objects());
    let services = parts.reflector::<Service>(api(client, ns), registry_objects());

    let ctx = Arc::new(Context::new(
        client.clone(),
        parts.writer.clone(),
        catalogs.clone(),
        Stores {
            subscriptions: subscriptions.store(),
            install_plans: install_plans.store(),
            csvs: csvs.store(),
            catalog_sources: catalog_sources.store(),
            pods: pods.store(),
            services: services.store(),
        },
        options.clone(),
        catalog_metrics,
        parts.metrics.reconcile.clone(),
    ));
    let catalog_ctx = Arc::new(catalogsource::CatalogSourceContext::new(ctx.clone()));
    let subscription_ctx = Arc::new(subscription::SubscriptionContext::new(ctx.clone()));
    let forget_deleted = {
        let catalog_ctx = catalog_ctx.clone();
        deleted_sources.for_each(move |source| {
            if let Some(namespace) = source.namespace() {
                catalogsource::forget(&catalog_ctx, &namespace, &source.name_any());
            }
            std::future::ready(())
        })
    };

    let config = ControllerConfig::default().concurrency(8);
    let terms = || parts.leadership().terms();
    let stopped = || parts.shutdown.signaled();

    let catalog_controller =
        Controller::for_shared_stream(catalog_sources.subscribe(), catalog_sources.store())
            .with_config(config.clone())
            .owns_shared_stream(pods.subscribe())
            .owns_shared_stream(services.subscribe())
            .reconcile_all_on(terms())
            .graceful_shutdown_on(stopped())
            .run(catalogsource::reconcile, catalogsource::error_policy, catalog_ctx)
            .for_each(|_| std::future::ready(()));

    let subscription_store = subscriptions.store();
    let catalog_changes = {
        let subscriptions = subscription_store.clone();
        let namespace = namespace.clone();
        let rx = catalogs.subscribe();
        stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
        .flat_map(move |()| stream::iter(one_per_namespace(&subscriptions, namespace.as_deref())))
    };
    let plan_deletions = {
        let subscriptions = subscription_store.clone();
        deleted_plans
            .filter_map(|plan| std::future::ready(plan.namespace()))
            .flat_map(move |namespace| stream::iter(one_per_namespace(&subscriptions, Some(&namespace))))
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
    let subscription_controller =
        Controller::for_shared_stream(subscriptions.subscribe(), subscription_store)
            .with_config(config.clone())
            .owns_shared_stream(install_plans.subscribe())
            .watches_shared_stream(csvs.subscribe(), csv_mapper)
            .reconcile_on(stream::select(catalog_changes, plan_deletions))
            .reconcile_all_on(terms())
            .graceful_shutdown_on(stopped())
            .run(
                subscription::reconcile,
                subscription::error_policy,
                subscription_ctx,
            )
            .for_each(|_| std::future::ready(()));

    // A plan waiting for an API looks again when a CRD or an APIService changes
    // (one is created, or becomes Established or Available), not on a timer.
    let api_changes = stream::select(
        api_changes::<CustomResourceDefinition>(client),
        api_changes::<APIService>(client),
    );
    let waiting_plans = installplan::wake_on_api_changes(api_changes, install_plans.store());
    let install_plan_controller =
        Controller::for_shared_stream(install_plans.subscribe(), install_plans.store())
            .with_config(config)
            .reconcile_on(waiting_plans)
            .reconcile_all_on(terms())
            .graceful_shutdown_on(stopped())
            .run(installplan::reconcile, installplan::error_policy, ctx)
            .for_each(|_| std::future::ready(()));

    tracing::info!(
        namespace = namespace.as_deref().unwrap_or("(all)"),
        global_catalog_namespace = %options.global_catalog_namespace,
        "catalog-operator controllers starting"
    );
    // The watches and the deletion relay never end; the controllers end on shutdown.
    // The PackageManifest API is served by every replica (it only reads).
    let package_server = options.package_server.clone().map(|config| {
        let stores = crate::packageserver::Sources {
            catalogs: catalogs.clone(),
            sources: catalog_sources.store(),
            subscriptions: subscriptions.store(),
            csvs: csvs.store(),
        };
        crate::packageserver::run(
            client.clone(),
            config,
            stores,
            options.global_catalog_namespace.clone(),
        )
    });
    let background = futures::future::join3(
        futures::future::join_all([
            catalog_sources.run(),
            subscriptions.run(),
            install_plans.run(),
            csvs.run(),
            pods.run(),
            services.run(),
        ]),
        forget_deleted,
        async move {
            match package_server {
                Some(server) => server.await,
                None => futures::future::pending().await,
            }
        },
    );
    let controllers = async {
        tokio::join!(
            catalog_controller,
            subscription_controller,
            install_plan_controller
        );
    };
    Ok(async move {
        futures::future::select(Box::pin(controllers), Box::pin(background)).await;
        tracing::info!("catalog-operator controllers stopped");
    })
}
