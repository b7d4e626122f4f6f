//! Wiring: command-line arguments, tracing, the admin server and both
//! controllers, until SIGTERM or Ctrl-C.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use clap::Parser;
use futures::FutureExt;
use kube::Client;

use crate::{
    admin,
    context::{Context, Settings},
    controllers::{csv, operatorgroup},
    metrics::Metrics,
};

/// Runs the controllers for ClusterServiceVersions and OperatorGroups.
#[derive(Parser, Debug, Clone)]
#[command(version, about)]
pub struct Args {
    /// Where the admin server listens (`/metrics`, `/healthz`).
    #[arg(long, env = "OLM_OPERATOR_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    pub admin_addr: SocketAddr,
    /// Seconds an install may make no progress before its CSV fails with InstallCheckFailed.
    #[arg(long, env = "OLM_OPERATOR_INSTALL_TIMEOUT", default_value_t = 300)]
    pub install_timeout_seconds: u64,
    /// Seconds after which a settled object is checked again without any event.
    #[arg(long, env = "OLM_OPERATOR_RESYNC", default_value_t = 600)]
    pub resync_seconds: u64,
    /// Write logs as JSON lines (for clusters) instead of text.
    #[arg(long, env = "OLM_OPERATOR_LOG_JSON")]
    pub log_json: bool,
}

/// Why olm-operator stopped before a shutdown signal.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No client configuration was found (in-cluster or KUBECONFIG).
    #[error("cannot load a Kubernetes client configuration")]
    Config(#[source] kube::config::InferConfigError),
    /// The configuration did not give a client.
    #[error("cannot build a Kubernetes client")]
    Client(#[source] kube::Error),
    /// The metrics could not be registered.
    #[error("cannot register the metrics")]
    Metrics(#[source] prometheus::Error),
    /// The admin server stopped.
    #[error("the admin server failed")]
    Admin(#[source] std::io::Error),
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

/// Runs olm-operator with `args` until SIGTERM or Ctrl-C.
pub async fn run(args: Args) -> Result<(), RunError> {
    init_tracing(args.log_json);
    let config = kube::Config::infer().await.map_err(RunError::Config)?;
    let client = Client::try_from(config.clone()).map_err(RunError::Client)?;
    let metrics = Arc::new(Metrics::new().map_err(RunError::Metrics)?);
    let ctx = Arc::new(Context::new(
        client,
        Some(config),
        metrics.clone(),
        args.settings(),
    ));
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "olm-operator starting");
    tokio::select! {
        () = run_controllers(ctx, shutdown_signal()) => {
            tracing::info!("olm-operator stopped");
            Ok(())
        }
        result = admin::serve(args.admin_addr, metrics) => result.map_err(RunError::Admin),
    }
}

/// Runs both controllers with `ctx` until `shutdown` completes; reconciles in
/// flight finish first.
pub async fn run_controllers(ctx: Arc<Context>, shutdown: impl Future<Output = ()>) {
    let (stop_csv, csv_stopped) = futures::channel::oneshot::channel::<()>();
    let (stop_group, group_stopped) = futures::channel::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        // A controller that already ended has dropped its receiver; nothing to stop then.
        let _ = stop_csv.send(());
        let _ = stop_group.send(());
    };
    tokio::join!(
        csv::run(ctx.clone(), csv_stopped.map(|_| ())),
        operatorgroup::run(ctx, group_stopped.map(|_| ())),
        signal,
    );
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "cannot listen for SIGTERM"
                );
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutdown signal received");
}

fn init_tracing(json: bool) {
    use tracing_subscriber::{EnvFilter, fmt};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let result = if json {
        fmt().json().with_env_filter(filter).try_init()
    } else {
        fmt().with_env_filter(filter).try_init()
    };
    // Already set (e.g. by a test): keep that one.
    let _ = result;
}
