//! Reading API objects from YAML or JSON text, with errors that name the file
//! (and document) and the field that is wrong.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// Why a manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid YAML or JSON.
    #[error("{path}: document {document}: not valid YAML: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The document's index in the file, from 1.
        document: usize,
        /// The parser's message, with line and column.
        message: String,
    },
    /// The document parsed, but a field does not fit the type.
    #[error("{path}: document {document}: field `{field}`: {message}")]
    Field {
        /// The file.
        path: PathBuf,
        /// The document's index in the file, from 1.
        document: usize,
        /// The path of the offending field, e.g. `spec.install.strategy`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

/// The YAML reading rules that Kubernetes tools apply: a key repeated in one
/// mapping keeps its last value (real bundles contain such repeats, and
/// kubectl and OLM accept them).
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
    }
}

/// Every YAML document in `text` as a JSON value. Empty documents are skipped.
/// `path` only names the source in errors.
pub fn documents(path: &Path, text: &str) -> Result<Vec<serde_json::Value>, ManifestError> {
    let docs: Vec<Option<serde_json::Value>> = serde_saphyr::from_multiple_with_options(text, yaml_options())
        .map_err(|e| ManifestError::Syntax {
            path: path.to_owned(),
            document: 1,
            message: e.to_string(),
        })?;
    Ok(docs.into_iter().flatten().filter(|doc| !doc.is_null()).collect())
}

/// Converts a JSON value into `T`, naming the offending field on error.
pub fn from_value<T: DeserializeOwned>(
    path: &Path,
    document: usize,
    value: serde_json::Value,
) -> Result<T, ManifestError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        ManifestError::Field {
            path: path.to_owned(),
            document,
            field: if field == "." {
                "(top level)".to_owned()
            } else {
                field
            },
            message: e.into_inner().to_string(),
        }
    })
}

/// Reads the single object in a YAML or JSON file.
pub fn read_one<T: DeserializeOwned>(path: &Path) -> Result<T, ManifestError> {
    let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse_one(path, &text)
}

/// Parses the single object in YAML or JSON `text`; `path` names it in errors.
pub fn parse_one<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, ManifestError> {
    let mut docs = documents(path, text)?;
    match docs.len() {
        1 => from_value(path, 1, docs.remove(0)),
        n => Err(ManifestError::Syntax {
            path: path.to_owned(),
            document: n,
            message: format!("expected exactly one document, found {n}"),
        }),
    }
}
