//! Reading the documents of a YAML or JSON file into `serde_json::Value`s, as operator-registry's
//! `YAMLOrJSONDecoder` does: a file whose first non-blank character is `{` is a stream of
//! concatenated JSON objects, anything else is YAML with `---` separated documents.

use std::path::Path;

use serde_json::Value;

use crate::error::{LoadError, Position, SyntaxError};

/// YAML parser options for catalog files: real catalogs hold thousands of documents and deep CRD
/// schemas, far beyond the parser's defaults meant for configuration files.
fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_reader_input_bytes = None;
    budget.max_events = usize::MAX;
    budget.max_nodes = usize::MAX;
    budget.max_documents = usize::MAX;
    budget.max_total_scalar_bytes = usize::MAX;
    budget.max_depth = 512;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.with_snippet = false;
    // Kubernetes' YAML decoder (go-yaml v2) keeps the last of repeated keys; real CSVs repeat
    // keys. Values are JSON maps, so passing repeats through keeps the last one too.
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::PassThrough;
    options
}

/// Whether `text` is a JSON stream rather than YAML.
pub(crate) fn is_json(text: &str) -> bool {
    text.trim_start_matches('\u{feff}').trim_start().starts_with('{')
}

/// Parses every document of `text`; `path` only names the source in errors. Empty YAML documents
/// are skipped.
pub(crate) fn parse_documents(path: &Path, text: &str) -> Result<Vec<Value>, LoadError> {
    if is_json(text) {
        parse_json_stream(path, text)
    } else {
        parse_yaml_documents(path, text)
    }
}

/// Parses the first document of `text` (YAML or JSON), or `None` if it has none.
pub(crate) fn parse_first_document(path: &Path, text: &str) -> Result<Option<Value>, LoadError> {
    Ok(parse_documents(path, text)?.into_iter().next())
}

fn parse_json_stream(path: &Path, text: &str) -> Result<Vec<Value>, LoadError> {
    let text = text.trim_start_matches('\u{feff}');
    let mut out = Vec::new();
    for item in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        match item {
            Ok(v) => out.push(v),
            Err(e) => {
                let position = Position {
                    document: Some(out.len() + 1),
                    line: Some(e.line() as u64),
                    column: Some(e.column() as u64),
                };
                return Err(LoadError::Parse {
                    path: path.into(),
                    position,
                    source: SyntaxError::Json(e),
                });
            }
        }
    }
    Ok(out)
}

fn parse_yaml_documents(path: &Path, text: &str) -> Result<Vec<Value>, LoadError> {
    let text = text.trim_start_matches('\u{feff}');
    match serde_saphyr::from_multiple_with_options::<Value>(text, yaml_options()) {
        Ok(docs) => Ok(docs.into_iter().filter(|d| !d.is_null()).collect()),
        Err(e) => {
            let position = e
                .location()
                .map(|l| Position::line_column(l.line(), l.column()))
                .unwrap_or_default();
            Err(LoadError::Parse {
                path: path.into(),
                position,
                source: SyntaxError::Yaml(Box::new(e)),
            })
        }
    }
}

/// Reads a whole file as UTF-8 text.
pub(crate) fn read_text(path: &Path) -> Result<String, LoadError> {
    std::fs::read_to_string(path).map_err(|e| LoadError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::display_chain;

    #[test]
    fn json_stream_and_yaml_are_told_apart() {
        let docs = parse_documents(Path::new("a.json"), "{\"a\":1}\n{\"b\":2} {\"c\":3}").unwrap();
        assert_eq!(docs.len(), 3);
        let docs = parse_documents(Path::new("a.yaml"), "---\na: 1\n---\n---\nb: [1, 2]\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1]["b"][1], 2);
    }

    #[test]
    fn repeated_keys_keep_the_last_value_as_kubernetes_does() {
        let docs = parse_documents(Path::new("a.yaml"), "a: 1\nb: 2\na: 3\n").unwrap();
        assert_eq!(docs[0]["a"], 3);
    }

    #[test]
    fn json_error_names_file_document_and_line() {
        let err = parse_documents(Path::new("cat/x.json"), "{\"a\":1}\n{\"b\": }").unwrap_err();
        let msg = display_chain(&err);
        assert!(
            msg.starts_with("failed to parse cat/x.json (document 2, line 2, column 7)"),
            "{msg}"
        );
        assert!(msg.contains("expected value"), "{msg}");
    }

    #[test]
    fn yaml_error_names_file_line_and_cause() {
        let err = parse_documents(Path::new("cat/x.yaml"), "a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        let msg = display_chain(&err);
        assert!(msg.starts_with("failed to parse cat/x.yaml (line"), "{msg}");
        assert!(matches!(
            err,
            LoadError::Parse {
                source: SyntaxError::Yaml(_),
                ..
            }
        ));
    }
}
