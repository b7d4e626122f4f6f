//! How the hook tools that print data (`action-get`, `relation-get`) print
//! it, as Juju's `--format`: without it, a single value as it is and
//! anything else as YAML.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A hook tool's `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// `data` (key → value) printed as `format` asks: YAML unless JSON.
pub fn print_map(data: &BTreeMap<String, String>, format: Option<Format>) -> Result<String, String> {
    match format {
        Some(Format::Json) => serde_json::to_string(data).map_err(|e| format!("cannot print as JSON: {e}")),
        None | Some(Format::Yaml) if data.is_empty() => Ok("{}".to_owned()),
        None | Some(Format::Yaml) => serde_saphyr::to_string(data)
            .map(|text| text.trim_end().to_owned())
            .map_err(|e| format!("cannot print as YAML: {e}")),
    }
}

/// One value printed as `format` asks: as it is, unless a format is given.
pub fn print_value(value: &str, format: Option<Format>) -> Result<String, String> {
    match format {
        None => Ok(value.to_owned()),
        Some(Format::Json) => serde_json::to_string(value).map_err(|e| format!("cannot print as JSON: {e}")),
        Some(Format::Yaml) => serde_saphyr::to_string(&value)
            .map(|text| text.trim_end().to_owned())
            .map_err(|e| format!("cannot print as YAML: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_is_yaml_unless_json_is_asked_and_a_value_is_as_it_is() {
        let data = BTreeMap::from([
            ("host".to_owned(), "10.0.0.1".to_owned()),
            ("port".to_owned(), "5432".to_owned()),
        ]);
        let yaml = print_map(&data, None).unwrap();
        let read: BTreeMap<String, String> = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(read, data, "{yaml}");
        assert_eq!(
            print_map(&data, Some(Format::Json)).unwrap(),
            r#"{"host":"10.0.0.1","port":"5432"}"#
        );
        assert_eq!(print_map(&BTreeMap::new(), None).unwrap(), "{}");
        assert_eq!(print_value("5432", None).unwrap(), "5432");
        assert_eq!(
            print_value("a \"b\"", Some(Format::Json)).unwrap(),
            r#""a \"b\"""#
        );
    }
}
