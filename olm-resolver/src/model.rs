//! The resolver's own input types: catalog snapshots, installed CSVs and Subscriptions.
//!
//! They are deliberately independent of the catalog crate's model and of the Kubernetes API types,
//! so that the resolver stays pure and can be benchmarked and fuzzed alone; adapters convert into
//! them. Values that OLM parses (versions, ranges, constraints) are parsed before they get here, so
//! an input that holds a malformed one cannot be built.

use std::fmt;

use semver::Version;
use serde_json::Value;

use crate::range::{RangeError, VersionRange};

/// Identifies a catalog (a CatalogSource) by name and namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CatalogId {
    /// `metadata.name` of the CatalogSource.
    pub name: String,
    /// `metadata.namespace` of the CatalogSource.
    pub namespace: String,
}

impl CatalogId {
    /// A catalog id from its name and namespace.
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> CatalogId {
        CatalogId {
            name: name.into(),
            namespace: namespace.into(),
        }
    }
}

impl fmt::Display for CatalogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A Kubernetes API: group, version and kind (`olm.gvk`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1beta1`.
    pub version: String,
    /// Kind, e.g. `RabbitmqCluster`.
    pub kind: String,
}

impl Gvk {
    /// A GVK from its three parts.
    pub fn new(group: impl Into<String>, version: impl Into<String>, kind: impl Into<String>) -> Gvk {
        Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }
}

impl fmt::Display for Gvk {
    /// `group/version Kind`, or `version Kind` for the core group.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{} {}", self.version, self.kind)
        } else {
            write!(f, "{}/{} {}", self.group, self.version, self.kind)
        }
    }
}

/// A bundle version: the parsed semantic version plus the text it came from.
///
/// Ordering and equality follow semver precedence: build metadata is ignored.
#[derive(Debug, Clone)]
pub struct BundleVersion {
    version: Version,
    original: String,
}

impl BundleVersion {
    /// Parses a full semantic version (`MAJOR.MINOR.PATCH[-PRE][+BUILD]`), as blang's `Parse` does.
    pub fn parse(text: &str) -> Result<BundleVersion, semver::Error> {
        Ok(BundleVersion {
            version: Version::parse(text)?,
            original: text.to_owned(),
        })
    }

    /// The parsed version.
    pub fn version(&self) -> &Version {
        &self.version
    }

    /// The text the version was parsed from.
    pub fn as_str(&self) -> &str {
        &self.original
    }
}

impl From<Version> for BundleVersion {
    fn from(version: Version) -> Self {
        BundleVersion {
            original: version.to_string(),
            version,
        }
    }
}

impl PartialEq for BundleVersion {
    fn eq(&self, other: &Self) -> bool {
        self.version.cmp_precedence(&other.version).is_eq()
    }
}

impl Eq for BundleVersion {}

impl PartialOrd for BundleVersion {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for BundleVersion {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.version.cmp_precedence(&other.version)
    }
}

impl fmt::Display for BundleVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}

/// A deprecation notice from an `olm.deprecations` entry. Deprecated packages, channels and
/// bundles stay resolvable; plans report the notices of what they choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deprecation {
    /// The catalog author's message.
    pub message: String,
}

impl Deprecation {
    /// A deprecation with this message.
    pub fn new(message: impl Into<String>) -> Deprecation {
        Deprecation {
            message: message.into(),
        }
    }
}

/// One entry of a channel: a bundle and its upgrade edges.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelEntry {
    /// Name of the bundle (the CSV name).
    pub bundle: String,
    /// The bundle this one replaces; it need not exist in the catalog.
    pub replaces: Option<String>,
    /// Bundles this one skips.
    pub skips: Vec<String>,
    /// `olm.skipRange`: installed versions in this range may upgrade straight to this entry.
    pub skip_range: Option<VersionRange>,
}

impl ChannelEntry {
    /// An entry with no upgrade edges.
    pub fn new(bundle: impl Into<String>) -> ChannelEntry {
        ChannelEntry {
            bundle: bundle.into(),
            replaces: None,
            skips: Vec::new(),
            skip_range: None,
        }
    }

    /// Sets `replaces`.
    pub fn replaces(mut self, bundle: impl Into<String>) -> ChannelEntry {
        self.replaces = Some(bundle.into());
        self
    }

    /// Adds a `skips` entry.
    pub fn skips(mut self, bundle: impl Into<String>) -> ChannelEntry {
        self.skips.push(bundle.into());
        self
    }

    /// Sets `skipRange`.
    pub fn skip_range(mut self, range: VersionRange) -> ChannelEntry {
        self.skip_range = Some(range);
        self
    }
}

/// A channel of a package.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelInput {
    /// Channel name.
    pub name: String,
    /// Its entries, in any order.
    pub entries: Vec<ChannelEntry>,
    /// Set when the channel is deprecated.
    pub deprecation: Option<Deprecation>,
}

impl ChannelInput {
    /// A channel with these entries.
    pub fn new(name: impl Into<String>, entries: Vec<ChannelEntry>) -> ChannelInput {
        ChannelInput {
            name: name.into(),
            entries,
            deprecation: None,
        }
    }
}

/// A package of a catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageInput {
    /// Package name.
    pub name: String,
    /// The default channel; a Subscription without a channel uses it.
    pub default_channel: Option<String>,
    /// Its channels.
    pub channels: Vec<ChannelInput>,
    /// Set when the whole package is deprecated.
    pub deprecation: Option<Deprecation>,
}

impl PackageInput {
    /// A package with these channels.
    pub fn new(
        name: impl Into<String>,
        default_channel: Option<&str>,
        channels: Vec<ChannelInput>,
    ) -> PackageInput {
        PackageInput {
            name: name.into(),
            default_channel: default_channel.map(str::to_owned),
            channels,
            deprecation: None,
        }
    }
}

/// Where a required GVK was declared; it only changes how explanations word it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GvkRequirementSource {
    /// An `olm.gvk.required` property (or a `dependencies.yaml` `olm.gvk` entry).
    Property,
    /// The CSV's `spec.customresourcedefinitions.required`.
    CsvRequiredCrd,
}

/// What a bundle needs from the namespace besides itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Requirement {
    /// Some installed bundle must provide this API.
    Gvk {
        /// The API.
        gvk: Gvk,
        /// Where it was declared.
        source: GvkRequirementSource,
    },
    /// `olm.package.required`: a bundle of this package with a version in the range.
    Package {
        /// Package name.
        package: String,
        /// Accepted versions.
        range: VersionRange,
    },
    /// `olm.constraint`.
    Constraint(Constraint),
}

impl Requirement {
    /// An `olm.gvk.required` requirement.
    pub fn gvk(gvk: Gvk) -> Requirement {
        Requirement::Gvk {
            gvk,
            source: GvkRequirementSource::Property,
        }
    }

    /// A CSV `spec.customresourcedefinitions.required` entry.
    pub fn csv_required_crd(gvk: Gvk) -> Requirement {
        Requirement::Gvk {
            gvk,
            source: GvkRequirementSource::CsvRequiredCrd,
        }
    }

    /// An `olm.package.required` requirement; fails when the range does not parse.
    pub fn package(package: impl Into<String>, range: &str) -> Result<Requirement, RangeError> {
        Ok(Requirement::Package {
            package: package.into(),
            range: VersionRange::parse(range)?,
        })
    }
}

/// An `olm.constraint` property value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Constraint {
    /// `failureMessage`, shown when the constraint cannot be met.
    pub failure_message: Option<String>,
    /// What the constraint asks for.
    pub kind: ConstraintKind,
}

/// The body of an `olm.constraint`. Following OLM, a constraint is a predicate over bundles and
/// is met when some bundle of the namespace satisfies it: `all` asks one bundle to satisfy every
/// child, `any` at least one child, `not` no child.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ConstraintKind {
    /// The bundle provides this API.
    Gvk(Gvk),
    /// The bundle belongs to this package, with a version in the range when one is given.
    Package {
        /// Package name.
        package: String,
        /// Accepted versions; `None` accepts every version.
        range: Option<VersionRange>,
    },
    /// Every child holds for the same bundle.
    All(Vec<Constraint>),
    /// At least one child holds.
    Any(Vec<Constraint>),
    /// No child holds.
    Not(Vec<Constraint>),
    /// A CEL expression; olm-rs does not evaluate CEL yet, so a bundle that carries one cannot be
    /// chosen and the explanation says so.
    Cel {
        /// The CEL rule as written.
        rule: String,
    },
}

/// Why an `olm.constraint` JSON value was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConstraintError {
    /// The value is not an object, or has none (or more than one) of the known constraint keys.
    #[error("olm.constraint {json} must have exactly one of gvk, package, all, any, not or cel")]
    Shape {
        /// The offending JSON.
        json: String,
    },
    /// A field is missing or has the wrong type.
    #[error("olm.constraint {json}: field {field} is missing or not a {expected}")]
    Field {
        /// The offending JSON.
        json: String,
        /// The field path.
        field: &'static str,
        /// The expected JSON type.
        expected: &'static str,
    },
    /// A package constraint's `versionRange` does not parse.
    #[error("olm.constraint {json}: {source}")]
    Range {
        /// The offending JSON.
        json: String,
        /// The parse error.
        #[source]
        source: RangeError,
    },
}

impl Constraint {
    /// A constraint without a failure message.
    pub fn new(kind: ConstraintKind) -> Constraint {
        Constraint {
            failure_message: None,
            kind,
        }
    }

    /// Reads the value of an `olm.constraint` property, e.g.
    /// `{"failureMessage": "...", "all": {"constraints": [{"gvk": {...}}, {"package": {...}}]}}`.
    /// A package constraint names its package in `packageName` (as `olm.package.required` does).
    pub fn from_json(value: &Value) -> Result<Constraint, ConstraintError> {
        let json = || value.to_string();
        let object = value
            .as_object()
            .ok_or_else(|| ConstraintError::Shape { json: json() })?;
        let failure_message = object
            .get("failureMessage")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let keys = ["gvk", "package", "all", "any", "not", "cel"];
        let present: Vec<&str> = keys.into_iter().filter(|k| object.contains_key(*k)).collect();
        let [key] = present.as_slice() else {
            return Err(ConstraintError::Shape { json: json() });
        };
        let body = &object[*key];
        let string = |v: &Value, field: &'static str| -> Result<String, ConstraintError> {
            v.get(field.rsplit('.').next().unwrap_or(field))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or(ConstraintError::Field {
                    json: json(),
                    field,
                    expected: "string",
                })
        };
        let kind = match *key {
            "gvk" => ConstraintKind::Gvk(Gvk {
                group: string(body, "gvk.group")?,
                version: string(body, "gvk.version")?,
                kind: string(body, "gvk.kind")?,
            }),
            "package" => {
                let package = string(body, "package.packageName")?;
                let range = match body.get("versionRange").and_then(Value::as_str) {
                    None | Some("") => None,
                    Some(text) => Some(
                        VersionRange::parse(text)
                            .map_err(|source| ConstraintError::Range { json: json(), source })?,
                    ),
                };
                ConstraintKind::Package { package, range }
            }
            "cel" => ConstraintKind::Cel {
                rule: string(body, "cel.rule")?,
            },
            compound => {
                let children = body
                    .get("constraints")
                    .and_then(Value::as_array)
                    .ok_or(ConstraintError::Field {
                        json: json(),
                        field: "constraints",
                        expected: "list",
                    })?
                    .iter()
                    .map(Constraint::from_json)
                    .collect::<Result<Vec<_>, _>>()?;
                match compound {
                    "all" => ConstraintKind::All(children),
                    "any" => ConstraintKind::Any(children),
                    _ => ConstraintKind::Not(children),
                }
            }
        };
        Ok(Constraint {
            failure_message,
            kind,
        })
    }
}

/// A bundle of a catalog, reduced to what resolution needs.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleInput {
    /// Bundle name (the CSV name).
    pub name: String,
    /// The package it belongs to.
    pub package: String,
    /// `olm.package` version.
    pub version: BundleVersion,
    /// APIs it provides (`olm.gvk`; owned CRDs and API services).
    pub provides: Vec<Gvk>,
    /// What it needs.
    pub requirements: Vec<Requirement>,
    /// Set when the bundle is deprecated.
    pub deprecation: Option<Deprecation>,
}

impl BundleInput {
    /// A bundle with no APIs and no requirements.
    pub fn new(name: impl Into<String>, package: impl Into<String>, version: BundleVersion) -> BundleInput {
        BundleInput {
            name: name.into(),
            package: package.into(),
            version,
            provides: Vec::new(),
            requirements: Vec::new(),
            deprecation: None,
        }
    }

    /// Adds a provided API.
    pub fn provides(mut self, gvk: Gvk) -> BundleInput {
        self.provides.push(gvk);
        self
    }

    /// Adds a requirement.
    pub fn requires(mut self, requirement: Requirement) -> BundleInput {
        self.requirements.push(requirement);
        self
    }
}

/// An immutable snapshot of one catalog's content.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogSnapshot {
    /// Which CatalogSource this is.
    pub id: CatalogId,
    /// `spec.priority`: higher is preferred for dependencies.
    pub priority: i32,
    /// Packages and their channels.
    pub packages: Vec<PackageInput>,
    /// Every bundle named by a channel entry.
    pub bundles: Vec<BundleInput>,
}

/// A CSV installed in the namespace: the virtual `@existing` catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct InstalledCsv {
    /// CSV name.
    pub name: String,
    /// Its package, when known (from its `olm.package` property). When unknown, the package of
    /// the Subscription whose `installed_csv` names it is used.
    pub package: Option<String>,
    /// `spec.version`.
    pub version: BundleVersion,
    /// APIs it provides.
    pub provides: Vec<Gvk>,
    /// What it needs (its `olm.package.required`, `olm.gvk.required`, `olm.constraint` and
    /// required CRDs). Checked again while its Subscription keeps it; when it stays anyway, what
    /// meets them today is kept.
    pub requirements: Vec<Requirement>,
    /// `spec.replaces`.
    pub replaces: Option<String>,
}

impl InstalledCsv {
    /// An installed CSV with no APIs and no requirements.
    pub fn new(name: impl Into<String>, package: Option<&str>, version: BundleVersion) -> InstalledCsv {
        InstalledCsv {
            name: name.into(),
            package: package.map(str::to_owned),
            version,
            provides: Vec::new(),
            requirements: Vec::new(),
            replaces: None,
        }
    }

    /// Adds a provided API.
    pub fn provides(mut self, gvk: Gvk) -> InstalledCsv {
        self.provides.push(gvk);
        self
    }

    /// Adds a requirement.
    pub fn requires(mut self, requirement: Requirement) -> InstalledCsv {
        self.requirements.push(requirement);
        self
    }
}

/// A Subscription, reduced to what resolution needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`: the namespace being resolved.
    pub namespace: String,
    /// `spec.name`: the package.
    pub package: String,
    /// `spec.channel`; `None` means the package's default channel.
    pub channel: Option<String>,
    /// `spec.source` and `spec.sourceNamespace`.
    pub catalog: CatalogId,
    /// `spec.startingCSV`: installed first when nothing is installed yet.
    pub starting_csv: Option<String>,
    /// `status.installedCSV`.
    pub installed_csv: Option<String>,
}

impl Subscription {
    /// A Subscription to `package` from `catalog`, default channel, nothing installed.
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        package: impl Into<String>,
        catalog: CatalogId,
    ) -> Subscription {
        Subscription {
            name: name.into(),
            namespace: namespace.into(),
            package: package.into(),
            channel: None,
            catalog,
            starting_csv: None,
            installed_csv: None,
        }
    }

    /// Sets the channel.
    pub fn channel(mut self, channel: impl Into<String>) -> Subscription {
        self.channel = Some(channel.into());
        self
    }

    /// Sets `startingCSV`.
    pub fn starting_csv(mut self, csv: impl Into<String>) -> Subscription {
        self.starting_csv = Some(csv.into());
        self
    }

    /// Sets `installedCSV`.
    pub fn installed_csv(mut self, csv: impl Into<String>) -> Subscription {
        self.installed_csv = Some(csv.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn constraint_from_json() {
        let value = json!({
            "failureMessage": "needs blue and green",
            "all": {"constraints": [
                {"package": {"packageName": "blue", "versionRange": ">=1.0.0"}},
                {"gvk": {"group": "greens.example.com", "version": "v1", "kind": "Green"}},
                {"not": {"constraints": [{"package": {"packageName": "red"}}]}},
                {"any": {"constraints": [{"cel": {"rule": "properties.exists(p, p.type == 'x')"}}]}}
            ]}
        });
        let constraint = Constraint::from_json(&value).unwrap();
        assert_eq!(
            constraint.failure_message.as_deref(),
            Some("needs blue and green")
        );
        let ConstraintKind::All(children) = &constraint.kind else {
            panic!("{constraint:?}")
        };
        assert_eq!(children.len(), 4);
        assert!(
            matches!(&children[0].kind, ConstraintKind::Package { package, range: Some(r) }
            if package == "blue" && r.as_str() == ">=1.0.0")
        );
        assert_eq!(
            children[1].kind,
            ConstraintKind::Gvk(Gvk::new("greens.example.com", "v1", "Green"))
        );
        assert!(matches!(&children[2].kind, ConstraintKind::Not(c) if c.len() == 1));
        assert!(matches!(&children[3].kind, ConstraintKind::Any(c)
            if matches!(&c[0].kind, ConstraintKind::Cel { .. })));
    }

    #[test]
    fn constraint_errors() {
        let err = |v: Value| Constraint::from_json(&v).unwrap_err().to_string();
        assert_eq!(
            err(json!({"gvk": {}, "package": {}})),
            r#"olm.constraint {"gvk":{},"package":{}} must have exactly one of gvk, package, all, any, not or cel"#
        );
        assert_eq!(
            err(json!({"gvk": {"group": "g", "version": "v1"}})),
            r#"olm.constraint {"gvk":{"group":"g","version":"v1"}}: field gvk.kind is missing or not a string"#
        );
        assert_eq!(
            err(json!({"package": {"packageName": "p", "versionRange": "^1.0.0"}})),
            r#"olm.constraint {"package":{"packageName":"p","versionRange":"^1.0.0"}}: unsupported operator "^" in "^1.0.0" of version range "^1.0.0""#
        );
    }

    #[test]
    fn versions_ignore_build_metadata_and_order_prereleases() {
        let v = |s: &str| BundleVersion::parse(s).unwrap();
        assert_eq!(v("1.0.0+a"), v("1.0.0+b"));
        assert!(v("1.14.1-rc1") < v("1.14.1"));
        assert!(v("1.0.0-beta.2") < v("1.0.0-beta.10"));
        assert!(v("1.0.0-alpha") < v("1.0.0-alpha.1"));
        assert_eq!(v("2.5.3514-4052426").to_string(), "2.5.3514-4052426");
        assert_eq!(Gvk::new("", "v1", "ConfigMap").to_string(), "v1 ConfigMap");
        assert_eq!(
            Gvk::new("rabbitmq.com", "v1beta1", "RabbitmqCluster").to_string(),
            "rabbitmq.com/v1beta1 RabbitmqCluster"
        );
    }
}
