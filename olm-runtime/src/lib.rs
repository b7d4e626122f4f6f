//! What both olm-rs operators need once: leader election with fenced writes, the admin
//! server, logging, condition helpers, the field managers and metrics.
//!
//! - [`leader`]: one Lease per binary; every replica watches, only the holder writes.
//!   [`Leadership::is_leader`] turns false by the clock when renewals stop.
//! - [`apply`]: server-side apply and delete that refuse to write unless this replica
//!   leads ([`apply::Writer`]); the field manager constants.
//! - [`client`]: the Kubernetes client, counting its requests by verb and resource.
//! - [`admin`]: `/metrics`, `/healthz`, `/readyz` ([`readiness`]).
//! - [`telemetry`]: `tracing` setup from `--log-level` and `--log-format`.
//! - [`conditions`]: typed `metav1.Condition` maintenance and the kstatus conditions.
//! - [`metrics`]: the Prometheus registry and the reconcile, leader and write metrics.
//! - [`errors`]: [`classify`] sorts a `kube::Error` into transient / conflict / forbidden /
//!   gone / terminal, the one place that reads HTTP codes.
//! - [`backoff`]: the retry pause of a controller's watches, short enough to recover from an
//!   API server outage in seconds.
//!
//! A binary flattens [`RuntimeArgs`] into its own arguments and wires it up like this:
//!
//! ```no_run
//! # async fn run(args: olm_runtime::RuntimeArgs, client: kube::Client) -> anyhow::Result<()> {
//! use olm_runtime::{Readiness, admin::AdminServer, apply::{FIELD_MANAGER_OLM, Writer}, metrics::Metrics};
//! use tokio::sync::watch;
//!
//! args.telemetry.init()?;
//! let metrics = Metrics::new()?;
//! let readiness = Readiness::new();
//! let (stop_tx, stop_rx) = watch::channel(false);
//! let stop = move || {
//!     let mut rx = stop_rx.clone();
//!     async move { let _ = rx.wait_for(|stop| *stop).await; }
//! };
//!
//! let (leadership, mut election) =
//!     args.leader_election.start(client.clone(), "olm-operator", Some(&metrics.leader), stop())?;
//! let writer = Writer::new(leadership, FIELD_MANAGER_OLM).with_metrics(&metrics.writes);
//! let admin = AdminServer::bind(args.admin.admin_addr, metrics.registry().clone(), readiness.clone()).await?;
//! let admin = tokio::spawn(admin.serve(stop()));
//! // ... create one `readiness.gate(..)` per store, spawn the controllers with `writer` ...
//!
//! tokio::select! {
//!     signal = olm_runtime::shutdown_signal() => signal?,
//!     ended = election.finished() => anyhow::bail!("leader election ended unexpectedly: {ended:?}"),
//! }
//! let _ = stop_tx.send(true);
//! election.finished().await?; // the lease is released
//! admin.await?;
//! # Ok(())
//! # }
//! ```

pub mod admin;
pub mod apply;
pub mod backoff;
pub mod client;
pub mod conditions;
pub mod errors;
pub mod leader;
pub mod metrics;
pub mod readiness;
pub mod telemetry;

pub use errors::{ErrorClass, classify};
pub use leader::{LeaderElectionArgs, LeaderState, Leadership};
pub use readiness::{Readiness, ReadyGate};

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
