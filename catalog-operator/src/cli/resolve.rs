//! `catalog-operator resolve`: which bundles a namespace's Subscriptions
//! would install, resolved offline against catalogs on disk.
//!
//! Exit code 0 when every group of Subscriptions has a plan, 1 when some
//! group is unsatisfiable (the explanation is in the output), 2 for bad input.

use std::{
    io::{self, Write},
    path::PathBuf,
    process::ExitCode,
};

use olm_api::{manifest, v1alpha1::ClusterServiceVersion};
use olm_catalog::Catalog;
use olm_resolver::{
    CatalogIndex,
    model::{BundleVersion, CatalogId, Gvk, InstalledCsv, Subscription},
    plan::{Change, Outcome},
};
use serde::Serialize;

use crate::{snapshot, source};

/// Arguments of `resolve`.
#[derive(clap::Args, Debug)]
pub struct ResolveArgs {
    /// A catalog, as `[NAME=]PATH` (a file-based catalog, a package directory
    /// or a directory of packages). NAME defaults to the last path component.
    #[arg(long = "catalog", required = true)]
    pub catalogs: Vec<String>,
    /// The namespace the catalogs live in.
    #[arg(long, default_value = "olm")]
    pub catalog_namespace: String,
    /// The catalog the Subscriptions name as their source; the first catalog by default.
    #[arg(long)]
    pub source: Option<String>,
    /// The namespace being resolved.
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// A ClusterServiceVersion file of an operator already installed in the namespace.
    #[arg(long = "installed")]
    pub installed: Vec<PathBuf>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
    /// Subscriptions, as `package[/channel][@startingCSV]`.
    #[arg(required = true)]
    pub subscriptions: Vec<String>,
}

/// Output formats of `resolve`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// YAML.
    Yaml,
    /// JSON.
    Json,
}

/// The result of an offline resolution, in a stable, sorted form.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The namespace resolved.
    pub namespace: String,
    /// One entry per independent group of Subscriptions.
    pub groups: Vec<GroupReport>,
    /// Bundles of the catalogs that could not be used, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub catalog_problems: Vec<String>,
}

/// The result for one group of Subscriptions.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GroupReport {
    /// The Subscriptions of the group.
    pub subscriptions: Vec<String>,
    /// `Resolved` or `Unsatisfiable`.
    pub status: GroupStatus,
    /// The bundles to install, dependencies first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepReport>,
    /// Why the group cannot be resolved, in plain words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

/// Whether a group resolved.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupStatus {
    /// A plan exists.
    Resolved,
    /// No set of bundles satisfies the group.
    Unsatisfiable,
}

/// One bundle of a plan.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepReport {
    /// The bundle (CSV) name.
    pub bundle: String,
    /// Its package.
    pub package: String,
    /// Its version.
    pub version: String,
    /// The catalog, as `namespace/name`.
    pub catalog: String,
    /// The channel it was taken from.
    pub channel: String,
    /// Why it is in the plan.
    pub reason: String,
    /// The installed CSV it replaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
}

impl Report {
    /// True when every group resolved.
    pub fn all_resolved(&self) -> bool {
        self.groups.iter().all(|g| g.status == GroupStatus::Resolved)
    }
}

/// Why the input of `resolve` is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ResolveInputError {
    /// A catalog could not be read.
    #[error("cannot read catalog {name}")]
    Catalog {
        /// The catalog's name.
        name: String,
        /// The cause (boxed: load errors carry whole parser reports).
        #[source]
        source: Box<source::SourceError>,
    },
    /// A Subscription argument is malformed.
    #[error("subscription {0:?} is not of the form package[/channel][@startingCSV]")]
    Subscription(String),
    /// An installed CSV could not be read.
    #[error(transparent)]
    Installed(#[from] Box<manifest::ManifestError>),
    /// An installed CSV has no usable version.
    #[error("installed CSV {name}: version {version:?} is not semver")]
    InstalledVersion {
        /// The CSV.
        name: String,
        /// Its version.
        version: String,
    },
    /// `--source` names no catalog.
    #[error("--source {0} names none of the catalogs given with --catalog")]
    UnknownSource(String),
}

/// A Subscription as the command line gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionArg {
    /// The package.
    pub package: String,
    /// The channel, if given.
    pub channel: Option<String>,
    /// The starting CSV, if given.
    pub starting_csv: Option<String>,
}

impl SubscriptionArg {
    /// Parses `package[/channel][@startingCSV]`.
    pub fn parse(text: &str) -> Result<Self, ResolveInputError> {
        let bad = || ResolveInputError::Subscription(text.to_owned());
        let (rest, starting_csv) = match text.split_once('@') {
            Some((rest, csv)) if !csv.is_empty() => (rest, Some(csv.to_owned())),
            Some(_) => return Err(bad()),
            None => (text, None),
        };
        let (package, channel) = match rest.split_once('/') {
            Some((package, channel)) if !channel.is_empty() && !channel.contains('/') => {
                (package, Some(channel.to_owned()))
            }
            Some(_) => return Err(bad()),
            None => (rest, None),
        };
        if package.is_empty() || package.contains(['/', '@']) {
            return Err(bad());
        }
        Ok(Self {
            package: package.to_owned(),
            channel,
            starting_csv,
        })
    }
}

/// Resolves `subscriptions` in `namespace` against `catalogs`, with `installed` CSVs present.
/// Every Subscription names `source` as its catalog.
pub fn resolve(
    catalogs: &[(CatalogId, Catalog)],
    source: &CatalogId,
    namespace: &str,
    subscriptions: &[SubscriptionArg],
    installed: &[InstalledCsv],
) -> Report {
    let mut catalog_problems = Vec::new();
    let snapshots = catalogs
        .iter()
        .map(|(id, catalog)| {
            let snap = snapshot::snapshot(id.clone(), 0, catalog);
            catalog_problems.extend(
                snap.problems
                    .iter()
                    .map(|p| format!("{}/{}: {p}", id.namespace, id.name)),
            );
            snap.snapshot
        })
        .collect();
    let index = CatalogIndex::new(snapshots);
    catalog_problems.extend(index.problems().iter().map(|p| p.to_string()));
    let subs: Vec<_> = subscriptions
        .iter()
        .map(|arg| {
            let mut sub = Subscription::new(
                arg.package.clone(),
                namespace,
                arg.package.clone(),
                source.clone(),
            );
            sub.channel = arg.channel.clone();
            sub.starting_csv = arg.starting_csv.clone();
            sub
        })
        .collect();
    let resolution = index.resolve(namespace, installed, &subs);
    let mut groups: Vec<GroupReport> = resolution
        .groups
        .iter()
        .map(|group| {
            let mut subscriptions = group.subscriptions.clone();
            subscriptions.sort();
            match &group.outcome {
                Outcome::Plan(plan) => GroupReport {
                    subscriptions,
                    status: GroupStatus::Resolved,
                    steps: plan
                        .steps
                        .iter()
                        .filter(|step| {
                            // A Subscription that stays on its installed CSV installs nothing.
                            !plan
                                .subscriptions
                                .iter()
                                .any(|s| s.bundle == step.bundle && s.change == Change::Stay)
                        })
                        .map(|step| StepReport {
                            bundle: step.bundle.clone(),
                            package: step.package.clone(),
                            version: step.version.as_str().to_owned(),
                            catalog: format!("{}/{}", step.catalog.namespace, step.catalog.name),
                            channel: step.channel.clone(),
                            reason: step.reason.to_string(),
                            replaces: step.replaces.clone(),
                        })
                        .collect(),
                    explanation: None,
                },
                Outcome::Unsatisfiable(explanation) => GroupReport {
                    subscriptions,
                    status: GroupStatus::Unsatisfiable,
                    steps: Vec::new(),
                    explanation: Some(explanation.to_string()),
                },
            }
        })
        .collect();
    groups.sort_by(|a, b| a.subscriptions.cmp(&b.subscriptions));
    catalog_problems.sort();
    Report {
        namespace: namespace.to_owned(),
        groups,
        catalog_problems,
    }
}

/// The resolver's view of an installed CSV: its version, its package (found
/// by the CSV's name in the catalogs) and the APIs its owned CRDs provide.
pub fn installed_csv(
    csv: &ClusterServiceVersion,
    catalogs: &[(CatalogId, Catalog)],
) -> Result<InstalledCsv, ResolveInputError> {
    let name = csv.metadata.name.clone().unwrap_or_default();
    let version_text = csv.spec.version.clone().unwrap_or_default();
    let version = BundleVersion::parse(&version_text).map_err(|_| ResolveInputError::InstalledVersion {
        name: name.clone(),
        version: version_text,
    })?;
    let package = catalogs
        .iter()
        .flat_map(|(_, catalog)| &catalog.bundles)
        .find(|bundle| bundle.name == name)
        .map(|bundle| bundle.package.clone());
    let mut installed = InstalledCsv::new(name, package.as_deref(), version);
    installed.replaces = csv.spec.replaces.clone();
    for crd in csv.owned_crds() {
        installed = installed.provides(Gvk::new(crd.group(), crd.version.clone(), crd.kind.clone()));
    }
    Ok(installed)
}

impl ResolveArgs {
    /// Runs the command.
    pub fn run(&self) -> ExitCode {
        super::output::run(|out, err| self.write(out, err))
    }

    /// Writes the report to `out` in the chosen format, errors to `err`;
    /// returns exit code 0 when everything resolved, 1 when not, 2 for bad input.
    pub fn write(&self, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<ExitCode> {
        let report = match self.report() {
            Ok(report) => report,
            Err(e) => return super::bad_input(err, &e),
        };
        let text = match self.output {
            Format::Json => serde_json::to_string_pretty(&report)
                .map(|t| t + "\n")
                .map_err(|e| e.to_string()),
            Format::Yaml => serde_saphyr::to_string(&report).map_err(|e| e.to_string()),
        };
        match text {
            Ok(text) => out.write_all(text.as_bytes())?,
            Err(e) => {
                writeln!(err, "error: cannot print the result: {e}")?;
                return Ok(ExitCode::from(super::EXIT_BAD_INPUT));
            }
        }
        Ok(if report.all_resolved() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    }

    fn report(&self) -> Result<Report, ResolveInputError> {
        let mut catalogs = Vec::new();
        for arg in &self.catalogs {
            let (name, path) = match arg.split_once('=') {
                Some((name, path)) => (name.to_owned(), PathBuf::from(path)),
                None => {
                    let path = PathBuf::from(arg);
                    let name = path
                        .canonicalize()
                        .ok()
                        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                        .unwrap_or_else(|| arg.clone());
                    (name, path)
                }
            };
            let (catalog, _) = source::load(&path).map_err(|source| ResolveInputError::Catalog {
                name: name.clone(),
                source: Box::new(source),
            })?;
            catalogs.push((CatalogId::new(name, self.catalog_namespace.clone()), catalog));
        }
        let source = match &self.source {
            Some(name) => catalogs
                .iter()
                .map(|(id, _)| id.clone())
                .find(|id| &id.name == name)
                .ok_or_else(|| ResolveInputError::UnknownSource(name.clone()))?,
            None => catalogs[0].0.clone(),
        };
        let subscriptions = self
            .subscriptions
            .iter()
            .map(|s| SubscriptionArg::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        let installed = self
            .installed
            .iter()
            .map(|path| installed_csv(&manifest::read_one(path).map_err(Box::new)?, &catalogs))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(resolve(
            &catalogs,
            &source,
            &self.namespace,
            &subscriptions,
            &installed,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_arguments_parse() {
        let parsed = SubscriptionArg::parse("etcd/alpha@etcdoperator.v0.9.2").expect("valid");
        assert_eq!(parsed.package, "etcd");
        assert_eq!(parsed.channel.as_deref(), Some("alpha"));
        assert_eq!(parsed.starting_csv.as_deref(), Some("etcdoperator.v0.9.2"));
        assert_eq!(SubscriptionArg::parse("etcd").expect("valid").channel, None);
        for bad in ["", "/alpha", "etcd/", "etcd@", "a/b/c"] {
            assert!(SubscriptionArg::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
