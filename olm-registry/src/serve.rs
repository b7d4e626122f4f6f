//! A catalog on disk served over the registry API until shutdown, as `opm serve`
//! does: what `catalog-operator serve` runs.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
};

use olm_catalog::source::SourceError;

use crate::server::{self, RegistryIndex, ServeError};

/// Why [`serve_path`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServePathError {
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
    /// The bound address could not be read back.
    #[error("cannot read the address the registry server listens on")]
    Address(#[source] std::io::Error),
}

/// Loads the catalog at `path` (any layout [`olm_catalog::source::load`] reads),
/// logs what it had to leave out, and serves it on `addr` until `shutdown` resolves.
pub async fn serve_path(
    path: &Path,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServePathError> {
    let (index, warnings) = RegistryIndex::load(path).map_err(|source| ServePathError::Catalog {
        path: path.to_owned(),
        source: Box::new(source),
    })?;
    for warning in warnings.iter().chain(index.problems()) {
        tracing::warn!(path = %path.display(), "{warning}");
    }
    let (packages, bundles) = index.counts();
    let listener = server::bind(addr).await?;
    let addr = listener.local_addr().map_err(ServePathError::Address)?;
    tracing::info!(%addr, packages, bundles, path = %path.display(), "serving the registry API");
    server::serve(listener, Arc::new(index), shutdown).await?;
    Ok(())
}
