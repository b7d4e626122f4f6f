//! `catalog-operator serve`: serve catalog content over the operator-registry
//! gRPC API, as `opm serve` does, until SIGTERM or Ctrl-C. The serving is
//! `olm-registry`'s ([`olm_registry::serve::serve_path`]); this is the command.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::PathBuf,
};

use olm_registry::serve::{self, ServePathError};
use olm_runtime::telemetry::{TelemetryArgs, TelemetryError};

/// Arguments of `serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The catalog: a file-based catalog (file or directory), a package directory,
    /// a directory of packages, or a package-manifest directory.
    pub path: PathBuf,
    /// The port to listen on.
    #[arg(long, short = 'p', default_value_t = 50051)]
    pub port: u16,
    /// The address to listen on.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    pub address: IpAddr,
    /// Logging.
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
}

/// Why `serve` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeCommandError {
    /// Logging could not be set up.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    /// The catalog could not be read, or the server failed.
    #[error(transparent)]
    Serve(#[from] ServePathError),
    /// Signals could not be watched.
    #[error("cannot watch for shutdown signals")]
    Signal(#[source] std::io::Error),
}

impl ServeArgs {
    /// Loads the catalog and serves it until SIGTERM or Ctrl-C.
    pub async fn run(self) -> Result<(), ServeCommandError> {
        self.telemetry.init()?;
        let (signal_tx, signal_rx) = tokio::sync::oneshot::channel();
        let shutdown = async move {
            let _ = signal_tx.send(olm_runtime::shutdown_signal().await);
        };
        serve::serve_path(&self.path, SocketAddr::new(self.address, self.port), shutdown).await?;
        match signal_rx.await {
            Ok(signal) => signal.map_err(ServeCommandError::Signal),
            // The server stopped without the signal future finishing: nothing to report.
            Err(_) => Ok(()),
        }
    }
}
