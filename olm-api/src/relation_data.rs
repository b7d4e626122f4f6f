//! How an operator installed as Deployments receives the remote data of its
//! relations: the CSV annotation [`ANNOTATION`] (`olm-rs.dev/relation-data`),
//! which OLM ignores, maps each of its endpoints to a delivery, as JSON or YAML:
//!
//! ```yaml
//! olm-rs.dev/relation-data: '{"db": {"env": true}, "logs": {"mount": "/var/run/olm-rs/relations/logs"}}'
//! ```
//!
//! - `env`: every container of the CSV's Deployments gets the data as its
//!   environment (`envFrom` the relation's ConfigMap), and the pod template
//!   carries a hash of the data ([`DATA_HASH`]), so that a change of the data
//!   rolls the Deployment.
//! - `mount`: the ConfigMap is mounted, read-only, at `<mount>/<relation>` in
//!   every container; a change reaches the files without a roll.
//!
//! The data of one relation is one ConfigMap in the operator's namespace
//! ([`configmap_name`]), kept by olm-operator from the remote side's
//! Databags: the remote application bag's keys as they are, and each remote
//! unit bag's keys as `<unit machine>.<key>`.

use std::{collections::BTreeMap, fmt};

use serde::Deserialize;

/// The CSV annotation that asks for the delivery of relation data.
pub const ANNOTATION: &str = "olm-rs.dev/relation-data";

/// Annotation on a relation-data ConfigMap, and on a pod template that gets
/// relation data as environment: the hash of that data.
pub const DATA_HASH: &str = "olm-rs.dev/relation-data-hash";

/// Label on a relation-data ConfigMap: the endpoint of the receiving side.
pub const ENDPOINT_LABEL: &str = "model.olm-rs.dev/endpoint";

/// How the remote data of one endpoint's relations reaches the Deployments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// As environment variables (`envFrom`); a change rolls the Deployment.
    Env,
    /// As files under this absolute directory, one subdirectory per relation;
    /// a change updates the files, no roll.
    Mount(String),
}

/// What a CSV asks for, by endpoint name.
pub type Deliveries = BTreeMap<String, Delivery>;

/// Why the annotation of a CSV cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CSV {csv}: annotation {ANNOTATION}: {cause}")]
pub struct RelationDataError {
    /// The CSV.
    pub csv: String,
    /// What is wrong, in plain words.
    pub cause: String,
}

/// One endpoint's entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    #[serde(default)]
    env: bool,
    #[serde(default)]
    mount: Option<String>,
}

/// The deliveries the annotations of CSV `csv` ask for (none without the
/// annotation); every endpoint named must be one of `declared`.
pub fn of_annotations<'a, I>(
    csv: &str,
    annotations: I,
    declared: &[&str],
) -> Result<Deliveries, RelationDataError>
where
    I: IntoIterator<Item = (&'a String, &'a String)>,
{
    match annotations
        .into_iter()
        .find(|(key, _)| key.as_str() == ANNOTATION)
    {
        Some((_, text)) => parse(csv, text, declared),
        None => Ok(Deliveries::new()),
    }
}

/// Parses the annotation's text of CSV `csv`, whose declared endpoints are `declared`.
pub fn parse(csv: &str, text: &str, declared: &[&str]) -> Result<Deliveries, RelationDataError> {
    let fail = |cause: String| RelationDataError {
        csv: csv.to_owned(),
        cause,
    };
    let value = crate::declaration::parse(text).map_err(fail)?;
    if value.is_null() {
        return Ok(Deliveries::new());
    }
    let wire: BTreeMap<String, Wire> = serde_path_to_error::deserialize(value)
        .map_err(|e| fail(format!("at {}: {}", e.path(), e.inner())))?;
    let mut deliveries = Deliveries::new();
    for (endpoint, entry) in wire {
        if !declared.contains(&endpoint.as_str()) {
            return Err(fail(format!(
                "endpoint {endpoint} is not declared in olm-rs.dev/endpoints"
            )));
        }
        let delivery = match (entry.env, entry.mount) {
            (true, None) => Delivery::Env,
            (false, Some(path)) if is_absolute_dir(&path) => Delivery::Mount(path),
            (false, Some(path)) => {
                return Err(fail(format!(
                    "endpoint {endpoint}: mount {path:?} is not an absolute path"
                )));
            }
            (true, Some(_)) => return Err(fail(format!("endpoint {endpoint}: asks for both env and mount"))),
            (false, None) => {
                return Err(fail(format!(
                    "endpoint {endpoint}: asks for neither env nor mount"
                )));
            }
        };
        deliveries.insert(endpoint, delivery);
    }
    Ok(deliveries)
}

fn is_absolute_dir(path: &str) -> bool {
    path.starts_with('/') && path.len() > 1 && !path.split('/').any(|part| part == "..")
}

/// The name of the ConfigMap that holds, for `application`'s side of
/// `relation`, the other side's data: `<relation>.<application>.remote`.
pub fn configmap_name(relation: &str, application: &str) -> String {
    format!("{relation}.{application}.remote")
}

/// The ConfigMap data of a side, from the other side's application bag
/// (`application`) and unit bags (`units`, by Machine): the application's
/// keys as they are, each unit's as `<machine>.<key>`. Keys a ConfigMap
/// cannot hold (other than letters, digits, `-`, `_` and `.`) are left out.
pub fn flatten<'a>(
    application: Option<&'a BTreeMap<String, String>>,
    units: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
) -> BTreeMap<String, String> {
    let mut data = BTreeMap::new();
    for (key, value) in application.into_iter().flatten() {
        data.insert(key.clone(), value.clone());
    }
    for (machine, bag) in units {
        for (key, value) in bag {
            data.insert(format!("{machine}.{key}"), value.clone());
        }
    }
    data.retain(|key, _| is_configmap_key(key));
    data
}

fn is_configmap_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A short, stable hash of `data` (FNV-1a over its keys and values).
pub fn data_hash(data: &BTreeMap<String, String>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (key, value) in data {
        for byte in key.bytes().chain([0]).chain(value.bytes()).chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

impl fmt::Display for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Delivery::Env => f.write_str("env"),
            Delivery::Mount(path) => write!(f, "mount at {path}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_parse_and_bad_ones_are_named() {
        let declared = ["db", "logs"];
        let ok = parse(
            "app.v1",
            r#"{"db": {"env": true}, "logs": {"mount": "/var/run/logs"}}"#,
            &declared,
        )
        .unwrap();
        assert_eq!(ok["db"], Delivery::Env);
        assert_eq!(ok["logs"], Delivery::Mount("/var/run/logs".into()));
        assert_eq!(
            parse("a", "db: {env: true}", &declared).unwrap()["db"],
            Delivery::Env
        );
        assert!(parse("a", "", &declared).unwrap().is_empty());
        let cases = [
            (r#"{"nope": {"env": true}}"#, "endpoint nope is not declared"),
            (r#"{"db": {"env": true, "mount": "/x"}}"#, "both env and mount"),
            (r#"{"db": {}}"#, "neither env nor mount"),
            (r#"{"db": {"env": false}}"#, "neither env nor mount"),
            (r#"{"db": {"mount": "relative"}}"#, "not an absolute path"),
            (r#"{"db": {"mount": "/a/../b"}}"#, "not an absolute path"),
            (r#"{"db": {"copy": true}}"#, "unknown field `copy`"),
            (r#"{"db": {"env": "yes"}}"#, "at db.env"),
            (r#"["db"]"#, "expected a map"),
            ("{", "olm-rs.dev/relation-data"),
        ];
        for (text, part) in cases {
            let error = parse("app.v1", text, &declared).unwrap_err().to_string();
            assert!(error.contains(part), "{text}: {error}");
            assert!(
                error.starts_with("CSV app.v1: annotation olm-rs.dev/relation-data"),
                "{error}"
            );
        }
    }

    #[test]
    fn data_is_flattened_with_clear_keys_and_hashed() {
        let app = BTreeMap::from([("host".to_owned(), "db.local".to_owned())]);
        let unit = BTreeMap::from([
            ("port".to_owned(), "5432".to_owned()),
            ("bad key".to_owned(), "x".to_owned()),
        ]);
        let data = flatten(Some(&app), [("edge-a", &unit)]);
        assert_eq!(
            data,
            BTreeMap::from([
                ("host".to_owned(), "db.local".to_owned()),
                ("edge-a.port".to_owned(), "5432".to_owned()),
            ])
        );
        let hash = data_hash(&data);
        assert_eq!(hash, data_hash(&data.clone()));
        let mut changed = data.clone();
        changed.insert("host".into(), "db2.local".into());
        assert_ne!(hash, data_hash(&changed));
        assert_eq!(configmap_name("r", "app"), "r.app.remote");
    }
}
