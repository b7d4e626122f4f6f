//! Reading catalog content from a path, whatever its layout: a file-based
//! catalog, a package directory of bundle versions, a directory of such
//! packages, or OLM's legacy package-manifest layout.

use std::path::{Path, PathBuf};

use crate::{Catalog, LoadError, bundle, fbc, manifests_dir, render};

/// Why catalog content could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A file-based catalog failed to load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Bundles failed to render.
    #[error(transparent)]
    Render(#[from] render::RenderError),
    /// The directory could not be listed.
    #[error("cannot list {}", path.display())]
    List {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The layouts [`load`] recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `<package>.package.yaml` beside version directories.
    ManifestsDir,
    /// Version directories, each a bundle (`manifests/` + `metadata/`).
    PackageDir,
    /// Directories that are each a package in one of the two layouts above.
    PackagesDir,
    /// File-based catalog files (JSON or YAML), in any directory tree.
    FileBased,
}

/// Which layout `path` is in.
pub fn layout(path: &Path) -> Result<Layout, SourceError> {
    if path.is_file() {
        return Ok(Layout::FileBased);
    }
    let children = subdirectories(path)?;
    if is_manifests_dir(path)? {
        return Ok(Layout::ManifestsDir);
    }
    if children.iter().any(|child| bundle::bundle_root(child).is_some()) {
        return Ok(Layout::PackageDir);
    }
    for child in &children {
        if is_manifests_dir(child)?
            || subdirectories(child)?
                .iter()
                .any(|c| bundle::bundle_root(c).is_some())
        {
            return Ok(Layout::PackagesDir);
        }
    }
    Ok(Layout::FileBased)
}

/// Loads the catalog content at `path`, rendering bundles where needed.
/// Warnings from rendering (choices made for incomplete input) are returned beside it.
pub fn load(path: &Path) -> Result<(Catalog, Vec<String>), SourceError> {
    match layout(path)? {
        Layout::FileBased if path.is_file() => Ok((fbc::load_file(path)?, Vec::new())),
        Layout::FileBased => Ok((fbc::load_dir(path)?, Vec::new())),
        Layout::ManifestsDir => {
            let rendered = manifests_dir::load(path)?;
            Ok((rendered.catalog, rendered.warnings))
        }
        Layout::PackageDir => {
            let rendered = render::render_package_dir(path)?;
            Ok((rendered.catalog, rendered.warnings))
        }
        Layout::PackagesDir => {
            let mut catalog = Catalog::default();
            let mut warnings = Vec::new();
            for child in subdirectories(path)? {
                let (content, more) = match layout(&child)? {
                    Layout::ManifestsDir => {
                        let r = manifests_dir::load(&child)?;
                        (r.catalog, r.warnings)
                    }
                    Layout::PackageDir => {
                        let r = render::render_package_dir(&child)?;
                        (r.catalog, r.warnings)
                    }
                    Layout::PackagesDir | Layout::FileBased => continue,
                };
                catalog.extend(content);
                warnings.extend(more);
            }
            catalog.sort();
            Ok((catalog, warnings))
        }
    }
}

fn subdirectories(path: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let list = |source| SourceError::List {
        path: path.to_owned(),
        source,
    };
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(path).map_err(list)? {
        let entry = entry.map_err(list)?;
        if entry.file_type().map_err(list)?.is_dir() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn is_manifests_dir(dir: &Path) -> Result<bool, SourceError> {
    let list = |source| SourceError::List {
        path: dir.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(list)? {
        let name = entry.map_err(list)?.file_name();
        if name.to_string_lossy().ends_with(".package.yaml") {
            return Ok(true);
        }
    }
    Ok(false)
}
