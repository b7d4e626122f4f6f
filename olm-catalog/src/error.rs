//! Errors shared by every loader: each one names the file, the place in it and the cause.

use std::{fmt, path::PathBuf};

/// Where in a file a problem was found. Every part is optional: a YAML syntax error knows its line
/// and column, a bad blob in a catalog knows its document.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Position {
    /// 1-based index of the document in a multi-document file (YAML `---` separated or a JSON stream).
    pub document: Option<usize>,
    /// 1-based line.
    pub line: Option<u64>,
    /// 1-based column.
    pub column: Option<u64>,
}

impl Position {
    /// The position of a whole document.
    pub fn document(index: usize) -> Self {
        Self {
            document: Some(index),
            ..Self::default()
        }
    }

    /// A line and column.
    pub fn line_column(line: u64, column: u64) -> Self {
        Self {
            document: None,
            line: Some(line),
            column: Some(column),
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(d) = self.document {
            parts.push(format!("document {d}"));
        }
        if let Some(l) = self.line {
            parts.push(format!("line {l}"));
        }
        if let Some(c) = self.column {
            parts.push(format!("column {c}"));
        }
        if parts.is_empty() {
            Ok(())
        } else {
            write!(f, " ({})", parts.join(", "))
        }
    }
}

/// A syntax error from the YAML or JSON parser.
#[derive(Debug, thiserror::Error)]
pub enum SyntaxError {
    /// The YAML parser's error.
    #[error(transparent)]
    Yaml(Box<serde_saphyr::Error>),
    /// The JSON parser's error.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Failure to load catalog content from a file or directory.
///
/// The message names the file and the position; for [`LoadError::Io`] and [`LoadError::Parse`] the
/// cause is the error's `source()` (print the chain, as `anyhow`'s `{:#}` does), for
/// [`LoadError::Invalid`] it is part of the message.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file or directory could not be read.
    #[error("failed to read {}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML or JSON.
    #[error("failed to parse {}{position}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where the parser stopped.
        position: Position,
        /// The cause.
        #[source]
        source: SyntaxError,
    },
    /// The file parses but its content is not what OLM expects.
    #[error("invalid content in {}{position}: {message}", path.display())]
    Invalid {
        /// The file (or directory, for problems of a whole bundle).
        path: PathBuf,
        /// Where in the file, when known.
        position: Position,
        /// What is wrong, in plain words.
        message: String,
    },
}

impl LoadError {
    /// The file or directory the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            Self::Io { path, .. } | Self::Parse { path, .. } | Self::Invalid { path, .. } => path,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, position: Position, message: impl Into<String>) -> Self {
        Self::Invalid {
            path: path.into(),
            position,
            message: message.into(),
        }
    }
}

/// Renders an error and its chain of causes on one line, `outer: cause: cause`, like `anyhow`'s `{:#}`.
pub fn display_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut cur = error.source();
    while let Some(e) = cur {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cur = e.source();
    }
    out
}
