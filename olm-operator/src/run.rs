//! Wiring: command-line arguments, telemetry, leader election, the admin
//! server and both controllers, until SIGTERM or Ctrl-C.

use std::{future::Future, sync::Arc, time::Duration};

use clap::Parser;
use futures::{FutureExt, Stream};
use olm_runtime::{
    Leadership, Readiness, RuntimeArgs,
    admin::{AdminError, AdminServer},
    apply::{FIELD_MANAGER_OLM, Writer},
    client::{RequestMetrics, instrumented},
    leader::LeaderElectionError,
    telemetry::TelemetryError,
};
use tokio::sync::watch;

use crate::{
    context::{Context, Settings},
    controllers::{csv, operatorgroup},
    metrics::Metrics,
};

/// The name of olm-operator's Lease (and of the binary).
pub const LEASE_NAME: &str = "olm-operator";

/// Runs the controllers for ClusterServiceVersions and OperatorGroups.
#[derive(Parser, Debug, Clone)]
#[command(version, about)]
pub struct Args {
    /// Logging, admin server and leader election.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Seconds an install may make no progress before its CSV fails with InstallCheckFailed.
    #[arg(long, env = "OLM_OPERATOR_INSTALL_TIMEOUT", default_value_t = 300)]
    pub install_timeout_seconds: u64,
    /// Seconds after which a settled object is checked again without any event.
    #[arg(long, env = "OLM_OPERATOR_RESYNC", default_value_t = 600)]
    pub resync_seconds: u64,
}

/// Why olm-operator stopped other than by a shutdown signal.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Logging could not be set up.
    #[error("cannot set up logging")]
    Telemetry(#[source] TelemetryError),
    /// No client configuration was found (in-cluster or KUBECONFIG).
    #[error("cannot load a Kubernetes client configuration")]
    Config(#[source] kube::config::InferConfigError),
    /// The configuration did not give a client.
    #[error("cannot build a Kubernetes client")]
    Client(#[source] kube::Error),
    /// The metrics could not be registered.
    #[error("cannot register the metrics")]
    Metrics(#[source] prometheus::Error),
    /// Leader election could not start, or its task failed.
    #[error("leader election failed")]
    LeaderElection(#[source] LeaderElectionError),
    /// The leader election task ended while the operator ran.
    #[error("leader election ended unexpectedly")]
    ElectionEnded,
    /// The admin server could not start.
    #[error("cannot start the admin server")]
    Admin(#[source] AdminError),
    /// Listening for shutdown signals failed.
    #[error("cannot listen for shutdown signals")]
    Signal(#[source] std::io::Error),
}

impl Args {
    /// The controller settings these arguments ask for.
    pub fn settings(&self) -> Settings {
        Settings {
            install_timeout: Duration::from_secs(self.install_timeout_seconds),
            resync: Duration::from_secs(self.resync_seconds),
        }
    }
}

/// Runs olm-operator with `args` until SIGTERM or Ctrl-C, then releases the
/// Lease and stops.
pub async fn run(args: Args) -> Result<(), RunError> {
    args.runtime.telemetry.init().map_err(RunError::Telemetry)?;
    let config = kube::Config::infer().await.map_err(RunError::Config)?;
    let metrics = Arc::new(Metrics::new().map_err(RunError::Metrics)?);
    let requests = RequestMetrics::register(metrics.registry()).map_err(RunError::Metrics)?;
    let client = instrumented(config.clone(), &requests).map_err(RunError::Client)?;
    let readiness = Readiness::new();

    let (stop_tx, stop_rx) = watch::channel(false);
    let stop = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };
    let (leadership, mut election) = args
        .runtime
        .leader_election
        .start(
            client.clone(),
            LEASE_NAME,
            Some(&metrics.runtime().leader),
            stop(),
        )
        .map_err(RunError::LeaderElection)?;
    let writer = Writer::new(leadership, FIELD_MANAGER_OLM).with_metrics(&metrics.runtime().writes);
    let admin = AdminServer::bind(
        args.runtime.admin.admin_addr,
        metrics.registry().clone(),
        readiness.clone(),
    )
    .await
    .map_err(RunError::Admin)?;
    let ctx = Arc::new(Context::new(
        client,
        Some(config),
        metrics,
        writer,
        args.settings(),
    ));
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "olm-operator starting");

    let work = futures::future::join(run_controllers(ctx, readiness, stop()), admin.serve(stop()));
    tokio::pin!(work);
    let outcome = tokio::select! {
        signal = olm_runtime::shutdown_signal() => signal.map_err(RunError::Signal),
        ended = election.finished() => Err(ended.map_or_else(RunError::LeaderElection, |()| RunError::ElectionEnded)),
        _ = &mut work => Ok(()),
    };
    let _ = stop_tx.send(true);
    // Reconciles in flight finish, the admin server stops, the Lease is released.
    work.await;
    if outcome.is_ok() {
        election.finished().await.map_err(RunError::LeaderElection)?;
    }
    tracing::info!("olm-operator stopped");
    outcome
}

/// Runs both controllers with `ctx` until `shutdown` completes (reconciles in
/// flight finish first). `readiness` gets one gate per controller, opened once
/// its cache has synced.
pub async fn run_controllers(ctx: Arc<Context>, readiness: Readiness, shutdown: impl Future<Output = ()>) {
    let (stop_csv, csv_stopped) = futures::channel::oneshot::channel::<()>();
    let (stop_group, group_stopped) = futures::channel::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        // A controller that already ended has dropped its receiver; nothing to stop then.
        let _ = stop_csv.send(());
        let _ = stop_group.send(());
    };
    tokio::join!(
        csv::run(
            ctx.clone(),
            readiness.gate("clusterserviceversions"),
            csv_stopped.map(|_| ())
        ),
        operatorgroup::run(
            ctx.clone(),
            readiness.gate("operatorgroups"),
            group_stopped.map(|_| ())
        ),
        signal,
    );
}

/// Yields once each time this replica starts leading (at once for a
/// standalone replica), so that a new leader reconciles everything.
pub fn leadership_terms(leadership: Leadership) -> impl Stream<Item = ()> + Send {
    futures::stream::unfold((leadership, false), |(mut leadership, leading)| async move {
        if leading {
            leadership.lost().await;
        }
        leadership.acquired().await.then_some(((), (leadership, true)))
    })
}
