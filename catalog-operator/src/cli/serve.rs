//! `catalog-operator serve`: serve catalog content over the operator-registry
//! gRPC API, as `opm serve` does, until SIGTERM or Ctrl-C.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::PathBuf,
    sync::Arc,
};

use olm_runtime::telemetry::{TelemetryArgs, TelemetryError};

use crate::{
    registry::server::{self, RegistryIndex, ServeError},
    source::SourceError,
};

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
    /// The catalog could not be read.
    #[error("cannot read the catalog at {path}")]
    Catalog {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<SourceError>,
    },
    /// The server failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// Signals could not be watched.
    #[error("cannot watch for shutdown signals")]
    Signal(#[source] std::io::Error),
}

impl ServeArgs {
    /// Loads the catalog and serves it until SIGTERM or Ctrl-C.
    pub async fn run(self) -> Result<(), ServeCommandError> {
        self.telemetry.init()?;
        let (index, warnings) =
            RegistryIndex::load(&self.path).map_err(|source| ServeCommandError::Catalog {
                path: self.path.clone(),
                source: Box::new(source),
            })?;
        for warning in warnings.iter().chain(index.problems()) {
            tracing::warn!(path = %self.path.display(), "{warning}");
        }
        let (packages, bundles) = index.counts();
        let listener = server::bind(SocketAddr::new(self.address, self.port)).await?;
        let addr = listener.local_addr().map_err(ServeCommandError::Signal)?;
        tracing::info!(%addr, packages, bundles, path = %self.path.display(), "serving the registry API");
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(server::serve(listener, Arc::new(index), async move {
            let _ = stop_rx.await;
        }));
        let signal = olm_runtime::shutdown_signal().await;
        let _ = stop_tx.send(());
        match server.await {
            Ok(result) => result?,
            Err(e) => tracing::error!(error = %e, "the registry server task ended abnormally"),
        }
        signal.map_err(ServeCommandError::Signal)
    }
}
