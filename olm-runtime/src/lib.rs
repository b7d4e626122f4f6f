//! The runtime of every olm-rs binary: what each needs once, built by one builder.
//!
//! - [`runtime`]: [`Runtime::builder`] sets up logging, the client, the metrics, the
//!   admin server, leader election, the fenced writer and the one [`Shutdown`]
//!   signal; [`Runtime::run`] runs the controllers until SIGTERM or SIGINT, then drains.
//!   The controllers are built from its [`Parts`] (tests make their own `Parts`).
//! - [`reflector`]: one shared watch per kind; its store opens a readiness gate once
//!   the first list is in it.
//! - [`reconcile`]: [`ReconcileError`] and the one [`error_policy`] of every controller.
//! - [`errors`]: [`classify`] sorts a `kube::Error` into transient / conflict / forbidden /
//!   gone / terminal, the one place that reads HTTP codes.
//! - [`leader`]: one Lease per binary, owned by the binary's Deployment in a cluster;
//!   every replica watches, only the holder writes. [`Leadership::is_leader`] turns
//!   false by the clock when renewals stop; [`Leadership::terms`] says when a term starts.
//! - [`apply`]: the fenced [`apply::Writer`]: server-side apply, create, status apply,
//!   delete and dynamic apply, refused unless this replica leads, and counted.
//! - [`effects`]: what a reconcile decided ([`effects::Effects`]: objects to apply, objects to
//!   remove, the status) and [`apply::Writer::perform`], the one applier that carries it out.
//! - [`events`]: [`events::Outbox`], Kubernetes Events published in order by a task of
//!   their own, so that no reconcile waits for one.
//! - [`endpoints`]: the API server endpoints the `kubernetes` EndpointSlices list.
//! - [`live`]: [`live::LiveStores`], the shared stores the applier reads live copies from, so a
//!   new leader sends no write for an object that is already as decided.
//! - [`client`]: the Kubernetes client, counting its requests by verb and resource.
//! - [`refusals`]: every request the API server refuses (403), logged with its message.
//! - [`admin`]: `/metrics`, `/healthz`, `/readyz` ([`readiness`]).
//! - [`telemetry`]: `tracing` setup from `--log-level` and `--log-format`.
//! - [`conditions`]: typed `metav1.Condition` maintenance and the kstatus conditions.
//! - [`metrics`]: the Prometheus registry and the reconcile, leader and write metrics.
//! - [`backoff`]: the retry pause of a controller's watches, short enough to recover from an
//!   API server outage in seconds.
//!
//! A binary flattens [`RuntimeArgs`] into its own arguments; its `run` builds the
//! runtime, lists its controllers and their watches, and runs them:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use futures::StreamExt;
//! # use k8s_openapi::api::core::v1::ConfigMap;
//! # use kube::runtime::{Controller, controller::Action, watcher};
//! # #[derive(Debug, thiserror::Error)] #[error("failed")] struct Error;
//! # impl olm_runtime::ReconcileError for Error {
//! #     fn category(&self) -> &'static str { "api" }
//! #     fn class(&self) -> olm_runtime::ErrorClass { olm_runtime::ErrorClass::Transient }
//! # }
//! # struct Context { writer: olm_runtime::apply::Writer, metrics: olm_runtime::metrics::Metrics }
//! # async fn reconcile(_: Arc<ConfigMap>, _: Arc<Context>) -> Result<Action, Error> { Ok(Action::await_change()) }
//! use olm_runtime::{Runtime, RuntimeArgs};
//!
//! fn error_policy(object: Arc<ConfigMap>, error: &Error, ctx: Arc<Context>) -> Action {
//!     olm_runtime::error_policy("configmap", object.as_ref(), error, &ctx.metrics.reconcile)
//! }
//!
//! async fn run(args: RuntimeArgs) -> Result<(), olm_runtime::RuntimeError> {
//!     let rt = Runtime::builder("my-operator").with_args(args).build().await?;
//!     // The binary's own metrics register on rt.metrics().registry().
//!     let config_maps = rt.reflector(kube::Api::<ConfigMap>::all(rt.client().clone()), watcher::Config::default());
//!     let ctx = Arc::new(Context { writer: rt.writer().clone(), metrics: rt.metrics().clone() });
//!     let controller = Controller::for_shared_stream(config_maps.subscribe(), config_maps.store())
//!         .reconcile_all_on(rt.leadership().terms())
//!         .graceful_shutdown_on(rt.shutdown().signaled())
//!         .run(reconcile, error_policy, ctx)
//!         .for_each(|_| std::future::ready(()));
//!     let watch = config_maps.run();
//!     rt.run(async move {
//!         // The watch never ends; the controller ends on shutdown.
//!         futures::future::select(watch, Box::pin(controller)).await;
//!     })
//!     .await
//! }
//! ```

pub mod admin;
pub mod apply;
pub mod backoff;
pub mod client;
pub mod conditions;
pub mod effects;
pub mod endpoints;
pub mod errors;
pub mod events;
pub mod leader;
pub mod live;
pub mod metrics;
pub mod readiness;
pub mod reconcile;
pub mod reflector;
pub mod refusals;
pub mod runtime;
pub mod shutdown;
pub mod telemetry;

pub use errors::{ErrorClass, classify};
pub use leader::{LeaderElectionArgs, LeaderState, Leadership};
pub use readiness::{Readiness, ReadyGate};
pub use reconcile::{ReconcileError, error_policy};
pub use reflector::Reflector;
pub use runtime::{Parts, Runtime, RuntimeBuilder, RuntimeError};
pub use shutdown::Shutdown;

/// All runtime flags of a binary: flatten into its `Args` with `#[command(flatten)]`.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct RuntimeArgs {
    /// Logging.
    #[command(flatten)]
    pub telemetry: telemetry::TelemetryArgs,
    /// The admin server.
    #[command(flatten)]
    pub admin: admin::AdminArgs,
    /// Leader election.
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,
}

/// Resolves on SIGTERM (how Kubernetes stops a pod) or SIGINT (Ctrl-C).
pub async fn shutdown_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => tracing::info!("received SIGTERM: shutting down"),
            ctrl_c = tokio::signal::ctrl_c() => {
                ctrl_c?;
                tracing::info!("received SIGINT: shutting down");
            }
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await?;
        tracing::info!("received Ctrl-C: shutting down");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        runtime: RuntimeArgs,
    }

    #[test]
    fn runtime_flags_compose_without_clashes() {
        Cli::command().debug_assert();
        let cli =
            Cli::try_parse_from(["bin", "--admin-addr=127.0.0.1:9090", "--leader-elect=false"]).unwrap();
        assert_eq!(cli.runtime.admin.admin_addr.port(), 9090);
        assert!(!cli.runtime.leader_election.leader_elect);
    }
}
