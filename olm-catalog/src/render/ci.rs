//! What `ci.yaml` of a community-operators package says: how its upgrade edges are made and
//! which catalog templates feed which catalogs.

use std::path::Path;

use serde_json::Value;

use super::{channels::GraphMode, error::RenderError};
use crate::{docs, error::LoadError};

/// What `ci.yaml` of a community-operators package says.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct CiConfig {
    pub(super) mode: GraphMode,
    /// `fbc.catalog_mapping`: template file name and the catalogs it feeds.
    pub(super) templates: Vec<(String, Vec<String>)>,
}

pub(super) fn read_ci(dir: &Path) -> Result<CiConfig, RenderError> {
    let path = dir.join("ci.yaml");
    if !path.is_file() {
        return Ok(CiConfig::default());
    }
    let text = docs::read_text(&path)?;
    let Some(doc) = docs::parse_first_document(&path, &text)? else {
        return Ok(CiConfig::default());
    };
    let mode = match doc.get("updateGraph").and_then(Value::as_str) {
        None | Some("replaces-mode") => GraphMode::Replaces,
        Some("semver-mode") => GraphMode::Semver,
        Some("semver-skippatch-mode") => GraphMode::SemverSkipPatch,
        Some(other) => {
            return Err(LoadError::invalid(
                &path,
                Default::default(),
                format!("unknown updateGraph {other:?}"),
            )
            .into());
        }
    };
    let templates = doc
        .pointer("/fbc/catalog_mapping")
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .filter_map(|m| {
                    let name = m.get("template_name")?.as_str()?.to_owned();
                    let catalogs = m.get("catalog_names").map(|c| {
                        c.as_array()
                            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
                    });
                    Some((name, catalogs.flatten().unwrap_or_default()))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(CiConfig { mode, templates })
}
