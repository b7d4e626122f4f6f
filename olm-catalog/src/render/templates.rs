//! The community pipeline's catalog templates: the one chosen for the newest catalog, its
//! `olm.package` entry, and a version directory's `release-config.yaml` entry for it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{ci::CiConfig, error::RenderError};
use crate::{
    bundle, docs,
    error::LoadError,
    model::{Package, schema},
};

/// `v4.21` → (4, 21), for picking the newest catalog.
fn catalog_version(name: &str) -> Vec<u64> {
    name.trim_start_matches('v')
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect()
}

/// The basic catalog template the community pipeline renders the newest catalog from: the one
/// `ci.yaml` maps to the highest catalog version, else the last file of `catalog-templates/`.
pub(super) fn chosen_template(dir: &Path, ci: &CiConfig) -> Result<Option<PathBuf>, RenderError> {
    let tdir = dir.join("catalog-templates");
    if !tdir.is_dir() {
        return Ok(None);
    }
    let newest_mapped = ci
        .templates
        .iter()
        .max_by_key(|(_, catalogs)| catalogs.iter().map(|c| catalog_version(c)).max())
        .map(|(t, _)| tdir.join(t))
        .filter(|p| p.is_file());
    Ok(match newest_mapped {
        Some(f) => Some(f),
        None => bundle::files_of(&tdir)?.pop(),
    })
}

/// The `olm.package` entry of the chosen basic catalog template, if the package has one.
pub(super) fn template_package(file: Option<&Path>) -> Result<Option<(PathBuf, Package)>, RenderError> {
    let Some(file) = file else { return Ok(None) };
    let text = docs::read_text(file)?;
    for doc in docs::parse_documents(file, &text)? {
        if doc.get("schema").and_then(Value::as_str) != Some(schema::TEMPLATE_BASIC) {
            continue;
        }
        let entries = doc
            .get("entries")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for e in entries {
            if e.get("schema").and_then(Value::as_str) == Some(schema::PACKAGE) {
                let blob = crate::fbc::parse_blob(e).map_err(|m| {
                    LoadError::invalid(file, Default::default(), format!("olm.package entry: {m}"))
                })?;
                if let crate::fbc::Blob::Package(p) = blob {
                    return Ok(Some((file.to_path_buf(), p)));
                }
            }
        }
    }
    Ok(None)
}

/// The entry of a version directory's `release-config.yaml` (how the community pipeline adds a
/// bundle to a catalog template) for `template`, or its last entry.
pub(super) fn release_config(
    version_dir: &Path,
    template: Option<&Path>,
) -> Result<Option<Value>, RenderError> {
    let path = version_dir.join("release-config.yaml");
    if !path.is_file() {
        return Ok(None);
    }
    let text = docs::read_text(&path)?;
    let Some(doc) = docs::parse_first_document(&path, &text)? else {
        return Ok(None);
    };
    let entries = doc
        .get("catalog_templates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let name = template.and_then(|t| t.file_name()).and_then(|n| n.to_str());
    let chosen = entries
        .iter()
        .find(|e| name.is_some() && e.get("template_name").and_then(Value::as_str) == name)
        .or(entries.last());
    Ok(chosen.cloned())
}
