//! Why a bundle or a package directory cannot be rendered.

use std::path::PathBuf;

use crate::error::LoadError;

/// Failure to render a bundle or a package directory.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A file could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The bundle loads but cannot be rendered.
    #[error("cannot render bundle {bundle} ({}): {message}", path.display())]
    Bundle {
        /// Bundle directory.
        path: PathBuf,
        /// Bundle (CSV) name.
        bundle: String,
        /// What is wrong.
        message: String,
    },
    /// The bundles of a package directory do not make one package.
    #[error("cannot render package directory {}: {message}", path.display())]
    Package {
        /// Package directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}
