//! Reading the catalog the offline commands are given, from paths of any layout.

use std::path::PathBuf;

use olm_catalog::{Catalog, bundle, render::RenderOptions};

use crate::source::{self, SourceError};

/// The catalog content of `paths`, merged and sorted, with the warnings about
/// it (choices made for incomplete input, files skipped). A path is a bundle
/// directory, rendered into one bundle, or anything [`source::load`] reads.
/// `render` and `validate` both read through here, so that they report the
/// same warnings for the same input.
pub(super) fn load(paths: &[PathBuf]) -> Result<(Catalog, Vec<String>), SourceError> {
    let mut catalog = Catalog::default();
    let mut warnings = Vec::new();
    for path in paths {
        if bundle::bundle_root(path).is_some() {
            let dir = bundle::load_bundle_dir(path)?;
            catalog.bundles.push(olm_catalog::render::render_bundle(
                &dir,
                &RenderOptions::default(),
            )?);
            warnings.extend(dir.warnings);
            continue;
        }
        let (content, more) = source::load(path)?;
        catalog.extend(content);
        warnings.extend(more);
    }
    catalog.sort();
    Ok((catalog, warnings))
}
