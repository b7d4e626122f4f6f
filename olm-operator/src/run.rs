//! The binary: its arguments, and its controllers run by olm-runtime's
//! [`Runtime`] until SIGTERM or Ctrl-C. Which controller watches what is in
//! [`crate::watches`].

use std::{future::Future, sync::Arc, time::Duration};

use clap::Parser;
use olm_runtime::{Parts, Runtime, RuntimeArgs, RuntimeError};

use crate::{
    context::{Context, Settings},
    metrics::Metrics,
};

/// The name of olm-operator's Lease (and of the binary, and its field manager).
pub const LEASE_NAME: &str = olm_runtime::apply::FIELD_MANAGER_OLM;

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
    /// Seconds a serving certificate of a webhook or APIService is valid (OLM: 730 days).
    #[arg(long, env = "OLM_OPERATOR_CERT_VALID_FOR", default_value_t = 730 * 24 * 3600)]
    pub cert_valid_for_seconds: u64,
    /// Seconds before expiry that a serving certificate is renewed (OLM: one day).
    #[arg(long, env = "OLM_OPERATOR_CERT_MIN_FRESH", default_value_t = 24 * 3600)]
    pub cert_min_fresh_seconds: u64,
    /// API server endpoints (`https://host:port`, comma separated) that
    /// MachinePools publish for their agents, beside those of the
    /// `kubernetes` EndpointSlices.
    #[arg(long, env = "OLM_RS_APISERVER_ENDPOINTS", value_delimiter = ',')]
    pub apiserver_endpoints: Vec<String>,
    /// Seconds a finished Action is kept before it is removed (Juju's
    /// `max-action-results-age`: 336 hours).
    #[arg(long, env = "OLM_OPERATOR_ACTION_RETENTION", default_value_t = 336 * 3600)]
    pub action_retention_seconds: u64,
    /// How many finished Actions are kept per namespace, the newest.
    #[arg(long, env = "OLM_OPERATOR_ACTION_RETENTION_COUNT", default_value_t = 100)]
    pub action_retention_count: usize,
}

/// Why olm-operator stopped other than by a shutdown signal.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The runtime could not start, or stopped other than by a shutdown signal.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// OLM's metrics could not be registered.
    #[error("cannot register the olm-operator metrics")]
    Metrics(#[from] prometheus::Error),
}

impl Args {
    /// The controller settings these arguments ask for.
    pub fn settings(&self) -> Settings {
        Settings {
            install_timeout: Duration::from_secs(self.install_timeout_seconds),
            resync: Duration::from_secs(self.resync_seconds),
            cert_lifetimes: crate::controllers::csv::certs::Lifetimes::from_seconds(
                self.cert_valid_for_seconds,
                self.cert_min_fresh_seconds,
            ),
            apiserver_endpoints: self.apiserver_endpoints.clone(),
            action_retention: crate::controllers::action::decide::Retention {
                age: Duration::from_secs(self.action_retention_seconds),
                count: self.action_retention_count,
            },
        }
    }
}

/// Runs olm-operator with `args` until SIGTERM or Ctrl-C, then releases the
/// Lease and stops.
pub async fn run(args: Args) -> Result<(), RunError> {
    let runtime = Runtime::builder(LEASE_NAME)
        .with_args(args.runtime.clone())
        .build()
        .await?;
    let parts = runtime.parts();
    let metrics = Arc::new(Metrics::register(&parts.metrics)?);
    let ctx = Arc::new(Context::new(
        parts.client.clone(),
        runtime.config().cloned(),
        metrics,
        parts.writer.clone(),
        args.settings(),
    ));
    let controllers = controllers(parts, ctx);
    Ok(runtime.run(controllers).await?)
}

/// Both controllers and their watches ([`crate::watches`]), as one future that
/// ends once they have drained after `parts.shutdown`.
pub fn controllers(parts: &Parts, ctx: Arc<Context>) -> impl Future<Output = ()> + Send + 'static {
    let parts = parts.clone();
    async move {
        crate::watches::run(ctx, &parts).await;
        tracing::info!("olm-operator controllers stopped");
    }
}
