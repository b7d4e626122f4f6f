//! `catalog-operator run`: the controllers, wired with the runtime (leader
//! election, admin server, telemetry, metrics).
//!
//! Watch topology: one shared reflector per kind (Subscriptions, InstallPlans,
//! CSVs, CatalogSources, registry Pods and Services), in one namespace or in all.
//! - CatalogSource controller ← CatalogSources; the registry Pods and Services
//!   of image catalogs (only objects labelled `olm.catalogSource` are watched).
//! - Subscription controller ← Subscriptions; InstallPlans (their owner
//!   Subscriptions); CSVs, catalog changes (one Subscription per affected
//!   namespace: any of them syncs the whole namespace).
//! - InstallPlan controller ← InstallPlans.
//!
//! Every controller reconciles everything again when this replica gains the lease.
//! `/readyz` turns ready once every store has synced, on standbys too.

use std::{sync::Arc, time::Duration};

use futures::{FutureExt, Stream, StreamExt, future::BoxFuture, stream};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        Controller, WatchStreamExt,
        controller::Config as ControllerConfig,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use olm_api::v1alpha1::{CatalogSource, ClusterServiceVersion, InstallPlan, Subscription};
use olm_runtime::{
    Leadership, Readiness, RuntimeArgs,
    admin::{AdminError, AdminServer},
    apply::{FIELD_MANAGER_CATALOG, Writer},
    backoff::TriggerBackoff,
    client::{RequestMetrics, instrumented},
    leader::{LeaderElectionError, parse_duration},
    metrics::Metrics,
    telemetry::TelemetryError,
};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::{
    catalogs::CatalogStore,
    controllers::{Context, Options, Stores, catalogsource, installplan, subscription},
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
            ..Options::default()
        }
    }
}

/// Why `run` stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Logging could not be set up.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    /// No client could be built for the cluster.
    #[error("cannot connect to the Kubernetes API")]
    Client(#[source] kube::Error),
    /// Metrics could not be registered.
    #[error("cannot register metrics")]
    Metrics(#[from] prometheus::Error),
    /// The admin server could not start.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// Leader election could not start or ended.
    #[error(transparent)]
    LeaderElection(#[from] LeaderElectionError),
    /// Leader election ended while the operator was running.
    #[error("leader election ended unexpectedly")]
    ElectionEnded,
    /// Signals could not be watched.
    #[error("cannot watch for shutdown signals")]
    Signal(#[source] std::io::Error),
    /// A controller task ended abnormally.
    #[error("a controller task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// Runs the operator until SIGTERM or Ctrl-C.
pub async fn run(args: RunArgs) -> Result<(), RunError> {
    args.runtime.telemetry.init()?;
    let config = kube::Config::infer()
        .await
        .map_err(|e| RunError::Client(kube::Error::InferConfig(e)))?;
    let metrics = Metrics::new()?;
    let requests = RequestMetrics::register(metrics.registry())?;
    let client = instrumented(config, &requests).map_err(RunError::Client)?;
    let readiness = Readiness::new();
    let (stop_tx, stop_rx) = watch::channel(false);
    let stop = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };
    let (leadership, mut election) = args.runtime.leader_election.start(
        client.clone(),
        "catalog-operator",
        Some(&metrics.leader),
        stop(),
    )?;
    let writer = Writer::new(leadership, FIELD_MANAGER_CATALOG).with_metrics(&metrics.writes);
    let admin = AdminServer::bind(
        args.runtime.admin.admin_addr,
        metrics.registry().clone(),
        readiness.clone(),
    )
    .await?;
    let admin = tokio::spawn(admin.serve(stop()));
    let mut controllers = tokio::spawn(run_controllers(
        client,
        writer,
        args.options(),
        metrics,
        readiness,
        stop().boxed(),
    ));
    let outcome = tokio::select! {
        signal = olm_runtime::shutdown_signal() => signal.map_err(RunError::Signal),
        ended = election.finished() => {
            ended?;
            Err(RunError::ElectionEnded)
        }
        ended = &mut controllers => match ended {
            Ok(result) => result.and(Err(RunError::ElectionEnded)),
            Err(e) => Err(RunError::Task(e)),
        },
    };
    let _ = stop_tx.send(true);
    if !controllers.is_finished() {
        match controllers.await {
            Ok(result) => result?,
            Err(e) => return Err(RunError::Task(e)),
        }
    }
    election.finished().await?;
    admin.await.map_err(RunError::Task)?;
    outcome
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

/// A shared reflector: its store, a driver task, and `subscribers` streams of the
/// objects it applies.
fn shared<K>(
    api: Api<K>,
    config: watcher::Config,
    subscribers: usize,
    on_delete: impl Fn(&K) + Send + 'static,
) -> (
    Store<K>,
    BoxFuture<'static, ()>,
    Vec<impl Stream<Item = Arc<K>> + Send + 'static>,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store_shared::<K>(1024);
    let streams = (0..subscribers).filter_map(|_| writer.subscribe()).collect();
    let kind = K::kind(&()).into_owned();
    let driver = watcher(api, config)
        .backoff(TriggerBackoff::default())
        .reflect_shared(writer)
        .for_each(move |event| {
            match event {
                Ok(watcher::Event::Delete(object)) => on_delete(&object),
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    kind,
                    error = &error as &dyn std::error::Error,
                    "watch failed; retrying"
                ),
            }
            std::future::ready(())
        })
        .boxed();
    (reader, driver, streams)
}

/// Flips a readiness gate named `name` once `store` has synced.
fn gate<K>(tasks: &mut tokio::task::JoinSet<()>, readiness: &Readiness, name: &str, store: Store<K>)
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let gate = readiness.gate(name);
    tasks.spawn(async move {
        // Store::wait_until_ready wakes only the last of several concurrent waiters
        // (the controller waits on the same store), so ask again now and then.
        loop {
            match tokio::time::timeout(Duration::from_millis(500), store.wait_until_ready()).await {
                Ok(Ok(())) => {
                    gate.ready();
                    break;
                }
                Ok(Err(_)) => break,
                Err(_) => {}
            }
        }
        // Stay in the set: a task that ends means the operator must stop.
        std::future::pending::<()>().await;
    });
}

/// One `()` each time this replica starts leading (and once at start if it leads).
fn leadership_gained(leadership: &Leadership) -> impl Stream<Item = ()> + Send + 'static {
    let rx = leadership.subscribe();
    let leadership = leadership.clone();
    stream::unfold(
        (rx, leadership, false),
        |(mut rx, leadership, mut leading)| async move {
            loop {
                let now = leadership.is_leader();
                if now && !leading {
                    return Some(((), (rx, leadership, true)));
                }
                leading = now;
                rx.changed().await.ok()?;
            }
        },
    )
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

/// Runs the three controllers until `shutdown` resolves. Writes go through
/// `writer` (fenced on its leadership); `readiness` gets one gate per store.
pub async fn run_controllers(
    client: Client,
    writer: Writer,
    options: Options,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: BoxFuture<'static, ()>,
) -> Result<(), RunError> {
    let catalog_metrics = CatalogMetrics::register(metrics.registry())?;
    let namespace = options.namespace.clone();
    let ns = namespace.as_deref();
    let catalogs = CatalogStore::new();
    let leadership = writer.leadership().clone();

    // Deleted CatalogSources leave the store through the watch; the context is not
    // built yet, so the watch reports them on a channel.
    let (deleted_tx, mut deleted_rx) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    let all = watcher::Config::default;
    // Only the registry Pods and Services of image catalogs, never every Pod.
    let registry_objects = || watcher::Config::default().labels(olm_api::labels::CATALOG_SOURCE);
    let (catalog_sources, cs_driver, mut cs_streams) =
        shared::<CatalogSource>(api(&client, ns), all(), 1, move |source: &CatalogSource| {
            if let Some(namespace) = source.namespace() {
                let _ = deleted_tx.send((namespace, source.name_any()));
            }
        });
    let (subscriptions, sub_driver, mut sub_streams) =
        shared::<Subscription>(api(&client, ns), all(), 1, |_| {});
    // A deleted InstallPlan changes the status of the Subscriptions that refer to
    // it (InstallPlanMissing); the shared streams carry no deletions, so the
    // watch reports its namespace on a channel.
    let (plan_deleted_tx, plan_deleted_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let (install_plans, ip_driver, mut ip_streams) =
        shared::<InstallPlan>(api(&client, ns), all(), 2, move |plan: &InstallPlan| {
            if let Some(namespace) = plan.namespace() {
                let _ = plan_deleted_tx.send(namespace);
            }
        });
    let (csvs, csv_driver, mut csv_streams) =
        shared::<ClusterServiceVersion>(api(&client, ns), all(), 1, |_| {});
    let (pods, pod_driver, mut pod_streams) = shared::<Pod>(api(&client, ns), registry_objects(), 1, |_| {});
    let (services, svc_driver, mut svc_streams) =
        shared::<Service>(api(&client, ns), registry_objects(), 1, |_| {});
    let (
        Some(cs_stream),
        Some(sub_stream),
        Some(ip_stream_a),
        Some(ip_stream_b),
        Some(csv_stream),
        Some(pod_stream),
        Some(svc_stream),
    ) = (
        cs_streams.pop(),
        sub_streams.pop(),
        ip_streams.pop(),
        ip_streams.pop(),
        csv_streams.pop(),
        pod_streams.pop(),
        svc_streams.pop(),
    )
    else {
        unreachable!("shared stores always have subscribers");
    };

    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(cs_driver);
    tasks.spawn(sub_driver);
    tasks.spawn(ip_driver);
    tasks.spawn(csv_driver);
    tasks.spawn(pod_driver);
    tasks.spawn(svc_driver);
    gate(
        &mut tasks,
        &readiness,
        "catalogsource store",
        catalog_sources.clone(),
    );
    gate(
        &mut tasks,
        &readiness,
        "subscription store",
        subscriptions.clone(),
    );
    gate(&mut tasks, &readiness, "installplan store", install_plans.clone());
    gate(&mut tasks, &readiness, "csv store", csvs.clone());
    gate(&mut tasks, &readiness, "registry pod store", pods.clone());
    gate(&mut tasks, &readiness, "registry service store", services.clone());

    let ctx = Arc::new(Context::new(
        client.clone(),
        writer,
        catalogs.clone(),
        Stores {
            subscriptions: subscriptions.clone(),
            install_plans: install_plans.clone(),
            csvs: csvs.clone(),
            catalog_sources: catalog_sources.clone(),
            pods,
            services,
        },
        options.clone(),
        catalog_metrics,
        metrics.reconcile.clone(),
    ));
    {
        let ctx = ctx.clone();
        tasks.spawn(async move {
            while let Some((namespace, name)) = deleted_rx.recv().await {
                catalogsource::forget(&ctx, &namespace, &name);
            }
            std::future::pending::<()>().await;
        });
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };
    let config = ControllerConfig::default().concurrency(8);

    let catalog_controller = Controller::for_shared_stream(cs_stream, catalog_sources.clone())
        .with_config(config.clone())
        .owns_shared_stream(pod_stream)
        .owns_shared_stream(svc_stream)
        .reconcile_all_on(leadership_gained(&leadership))
        .graceful_shutdown_on(stopped())
        .run(catalogsource::reconcile, catalogsource::error_policy, ctx.clone())
        .for_each(|_| std::future::ready(()));

    let catalog_changes = {
        let subscriptions = subscriptions.clone();
        let namespace = namespace.clone();
        let rx = catalogs.subscribe();
        stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
        .flat_map(move |()| stream::iter(one_per_namespace(&subscriptions, namespace.as_deref())))
    };
    let plan_deletions = {
        let subscriptions = subscriptions.clone();
        stream::unfold(plan_deleted_rx, |mut rx| async move {
            let namespace = rx.recv().await?;
            Some((namespace, rx))
        })
        .flat_map(move |namespace| stream::iter(one_per_namespace(&subscriptions, Some(&namespace))))
    };
    let csv_mapper = {
        let subscriptions = subscriptions.clone();
        move |csv: Arc<ClusterServiceVersion>| {
            let namespace = csv.namespace();
            one_per_namespace(&subscriptions, namespace.as_deref())
                .into_iter()
                .filter(move |r| r.namespace == namespace)
        }
    };
    let subscription_controller = Controller::for_shared_stream(sub_stream, subscriptions.clone())
        .with_config(config.clone())
        .owns_shared_stream(ip_stream_a)
        .watches_shared_stream(csv_stream, csv_mapper)
        .reconcile_on(stream::select(catalog_changes, plan_deletions))
        .reconcile_all_on(leadership_gained(&leadership))
        .graceful_shutdown_on(stopped())
        .run(subscription::reconcile, subscription::error_policy, ctx.clone())
        .for_each(|_| std::future::ready(()));

    let install_plan_controller = Controller::for_shared_stream(ip_stream_b, install_plans.clone())
        .with_config(config)
        .reconcile_all_on(leadership_gained(&leadership))
        .graceful_shutdown_on(stopped())
        .run(installplan::reconcile, installplan::error_policy, ctx.clone())
        .for_each(|_| std::future::ready(()));

    tracing::info!(
        namespace = namespace.as_deref().unwrap_or("(all)"),
        global_catalog_namespace = %options.global_catalog_namespace,
        "catalog-operator controllers starting"
    );
    let controllers = async {
        tokio::join!(
            catalog_controller,
            subscription_controller,
            install_plan_controller
        );
    };
    let mut shutdown = shutdown;
    tokio::pin!(controllers);
    tokio::select! {
        () = &mut controllers => {}
        () = &mut shutdown => {
            let _ = stop_tx.send(true);
            controllers.await;
        }
        Some(joined) = tasks.join_next() => {
            let _ = stop_tx.send(true);
            controllers.await;
            tasks.shutdown().await;
            joined.map_err(RunError::Task)?;
            return Ok(());
        }
    }
    tasks.shutdown().await;
    tracing::info!("catalog-operator controllers stopped");
    Ok(())
}
