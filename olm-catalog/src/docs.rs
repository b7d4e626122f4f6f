//! Reading the documents of a YAML or JSON file into `serde_json::Value`s, as operator-registry's
//! `YAMLOrJSONDecoder` does: a file whose first non-blank character is `{` is a stream of
//! concatenated JSON objects, anything else is YAML with `---` separated documents.

use std::path::Path;

use serde_json::Value;

use crate::{
    bounded::{self, Bounded},
    error::{LoadError, Position, SyntaxError},
    fastyaml,
};

/// YAML parser options for catalog files: real catalogs hold thousands of documents, far beyond the
/// parser's defaults meant for configuration files. Nesting stays at 64 levels: the deepest of the
/// corpus' 2634 YAML and JSON files (a CRD schema) has 38, and the parser recurses per level, so
/// a few kilobytes of `[[[[...` nested a few hundred deep would overflow a thread's stack.
fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_reader_input_bytes = None;
    budget.max_events = usize::MAX;
    budget.max_nodes = usize::MAX;
    budget.max_documents = usize::MAX;
    budget.max_total_scalar_bytes = usize::MAX;
    budget.max_depth = 64;
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
    if let Some(docs) = fast_path(text) {
        return Ok(docs);
    }
    parse_yaml_full(path, text)
}

/// Every document through the fast reader, or through the full parser where the fast reader
/// gives up; `None` if some document does not parse (the full parser then reports the error with
/// its position in the whole text).
fn fast_path(text: &str) -> Option<Vec<Value>> {
    // One budget for the whole text, however many documents the full parser reads of it.
    bounded::within(bounded::budget(text.len()), || {
        fastyaml::parse_stream(text, |doc| read_yaml(doc).ok())
    })
}

/// Every document of `text`, within what is left of the budget of [`bounded::within`].
fn read_yaml(text: &str) -> Result<Vec<Value>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options::<Bounded>(text, yaml_options())
        .map(|docs| docs.into_iter().map(|d| d.0).collect())
}

/// Every document through the full YAML parser.
fn parse_yaml_full(path: &Path, text: &str) -> Result<Vec<Value>, LoadError> {
    match bounded::within(bounded::budget(text.len()), || read_yaml(text)) {
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

    /// The corpus, or a loud failure.
    fn corpus() -> std::path::PathBuf {
        let dir = match std::env::var_os("OLM_RS_CORPUS") {
            Some(d) => std::path::PathBuf::from(d),
            None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
        };
        assert!(
            dir.join("bundles").is_dir(),
            "the corpus is not at {}: put shared/corpus next to the workspace or set OLM_RS_CORPUS",
            dir.display()
        );
        dir
    }

    fn yaml_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                yaml_files(&p, out);
            } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
                out.push(p);
            }
        }
    }

    #[test]
    fn corpus_yaml_reads_the_same_through_the_fast_path() {
        let mut files = Vec::new();
        yaml_files(&corpus(), &mut files);
        let (mut docs, mut fast) = (0, 0);
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            if is_json(&text) {
                continue;
            }
            let full = parse_yaml_full(f, &text).unwrap();
            let ours = fast_path(&text)
                .unwrap_or_else(|| panic!("{} has a document neither reader takes", f.display()));
            assert!(
                ours == full,
                "{} reads differently through the fast path",
                f.display()
            );
            for d in fastyaml::split_documents(&text).unwrap_or_default() {
                docs += 1;
                fast += usize::from(fastyaml::parse_document(d.text).is_some());
            }
        }
        println!(
            "{} YAML files, {docs} documents, {fast} read by the fast path",
            files.len()
        );
        assert!(files.len() > 2000 && fast * 10 > docs * 9, "{fast} of {docs}");
    }

    #[test]
    fn deep_nesting_is_an_error_naming_the_file_not_a_stack_overflow() {
        // Found by the property tests: 100 nested flow sequences overflowed a 2 MiB stack.
        let flow = format!("x: {}1{}\n", "[".repeat(100), "]".repeat(100));
        let block = format!("x:\n{}1\n", "- ".repeat(2000));
        for text in [flow, block] {
            let err = parse_documents(Path::new("cat/deep.yaml"), &text).unwrap_err();
            let msg = display_chain(&err);
            assert!(msg.starts_with("failed to parse cat/deep.yaml (line"), "{msg}");
        }
        let within = format!("x: {}1{}\n", "[".repeat(60), "]".repeat(60));
        assert!(parse_documents(Path::new("cat/ok.yaml"), &within).is_ok());
    }

    #[test]
    fn the_fast_and_full_readers_stop_at_the_same_depth() {
        for depth in [63, 64, 65] {
            let sequences = format!("x:\n{}1\n", "- ".repeat(depth));
            let maps: String = (0..=depth).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
            for text in [sequences, maps] {
                let full = parse_yaml_full(Path::new("x.yaml"), &text).ok();
                assert_eq!(fast_path(&text), full, "{depth} levels");
            }
        }
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
