//! `catalog-operator resolve`: which bundles a namespace's Subscriptions
//! would install, resolved offline against catalogs on disk.
//!
//! The answer comes from the same code as the Subscription controller's: the
//! catalogs go into a [`CatalogStore`], the Subscriptions and installed CSVs
//! become the objects the controller reads, and
//! [`resolve::decide`](crate::controllers::subscription::resolve::decide) turns
//! them into the resolver's input (installed CSVs with their
//! `olm.installed-properties`, replaced and non-semver CSVs left out) and
//! decides per group. So the offline answer is the in-cluster answer.
//!
//! Exit code 0 when every group of Subscriptions has a plan, 1 when some
//! group is unsatisfiable (the explanation is in the output), 2 for bad input.

use std::{
    io::{self, Write},
    path::PathBuf,
    process::ExitCode,
    sync::Arc,
};

use kube::{ResourceExt, api::ObjectMeta};
use olm_api::{
    manifest,
    v1alpha1::{ClusterServiceVersion, Subscription, SubscriptionSpec},
};
use olm_catalog::Catalog;
use olm_resolver::model::CatalogId;
use serde::Serialize;

use super::output;
use crate::{
    catalogs::{CatalogContent, CatalogStore},
    controllers::subscription::resolve::{Decision, GroupDecision, NamespaceView, decide, installed_csvs},
    source,
};

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
    /// Installed CSVs left out of resolution, as the controller leaves them out:
    /// another installed CSV replaces them, or their version is not semver.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub installed_left_out: Vec<String>,
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
    /// Subscriptions that do not get a bundle they prefer (a newer version), and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_back: Vec<HeldBackReport>,
}

/// A Subscription held back from a bundle it prefers.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HeldBackReport {
    /// The Subscription.
    pub subscription: String,
    /// Why, in plain words: what it prefers and which installed operators hold it back.
    pub reason: String,
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

impl SubscriptionArg {
    /// The Subscription object this argument stands for: named after its package,
    /// in `namespace`, with `source` as its catalog.
    pub fn to_subscription(&self, namespace: &str, source: &CatalogId) -> Subscription {
        Subscription {
            metadata: ObjectMeta {
                name: Some(self.package.clone()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            spec: SubscriptionSpec {
                catalog_source: source.name.clone(),
                catalog_source_namespace: source.namespace.clone(),
                package: self.package.clone(),
                channel: self.channel.clone(),
                starting_csv: self.starting_csv.clone(),
                install_plan_approval: None,
                config: None,
            },
            status: None,
        }
    }
}

/// Catalogs loaded for offline resolution into a [`CatalogStore`], as the
/// controller holds them. Loading reads every bundle once: load once, resolve
/// many times.
pub struct OfflineCatalogs {
    store: CatalogStore,
    ids: Vec<CatalogId>,
}

impl OfflineCatalogs {
    /// Loads `catalogs`, in this order.
    pub fn new(catalogs: Vec<(CatalogId, Catalog)>) -> Self {
        let store = CatalogStore::new();
        let now = olm_runtime::conditions::now();
        let mut ids = Vec::with_capacity(catalogs.len());
        for (id, catalog) in catalogs {
            let content = CatalogContent::new(
                id.clone(),
                catalog,
                Vec::new(),
                crate::bundles::BundleSource::Memory,
            );
            store.set_loaded(&id, 0, content, &now);
            ids.push(id);
        }
        OfflineCatalogs { store, ids }
    }

    /// The catalogs, in the order given.
    pub fn ids(&self) -> &[CatalogId] {
        &self.ids
    }
}

/// Resolves `subscriptions` in `namespace` against `catalogs`, with the
/// `installed` CSVs present. Every Subscription names `source` as its catalog.
pub fn resolve(
    catalogs: &OfflineCatalogs,
    source: &CatalogId,
    namespace: &str,
    subscriptions: &[SubscriptionArg],
    installed: &[ClusterServiceVersion],
) -> Report {
    let subscriptions: Vec<Arc<Subscription>> = subscriptions
        .iter()
        .map(|arg| Arc::new(arg.to_subscription(namespace, source)))
        .collect();
    let csvs: Vec<Arc<ClusterServiceVersion>> = installed.iter().cloned().map(Arc::new).collect();
    resolve_objects(catalogs, namespace, &subscriptions, &csvs)
}

/// Resolves the Subscription and CSV objects of `namespace` against `catalogs`
/// (all visible), exactly as the Subscription controller does.
pub fn resolve_objects(
    catalogs: &OfflineCatalogs,
    namespace: &str,
    subscriptions: &[Arc<Subscription>],
    csvs: &[Arc<ClusterServiceVersion>],
) -> Report {
    let store = &catalogs.store;
    let visible = store.visible(&[], &catalogs.ids);
    let index = store.index(&visible);
    let mut catalog_problems: Vec<String> = visible
        .iter()
        .filter_map(|(id, state)| Some((id, state.content.as_ref()?)))
        .flat_map(|(id, content)| {
            content
                .problems
                .iter()
                .map(move |p| format!("{}/{}: {p}", id.namespace, id.name))
        })
        .collect();
    catalog_problems.extend(index.problems().iter().map(|p| p.to_string()));
    catalog_problems.sort();

    let view = NamespaceView {
        namespace,
        subscriptions,
        csvs,
        catalogs: &visible,
    };
    let decisions = decide(&index, &view);
    let kept = installed_csvs(csvs, &visible);
    let installed_left_out = csvs
        .iter()
        .map(|csv| csv.name_any())
        .filter(|name| !kept.iter().any(|k| &k.name == name))
        .collect();
    let mut groups: Vec<GroupReport> = decisions.iter().map(group_report).collect();
    groups.sort_by(|a, b| a.subscriptions.cmp(&b.subscriptions));
    Report {
        namespace: namespace.to_owned(),
        groups,
        catalog_problems,
        installed_left_out,
    }
}

/// The report of one group's decision.
fn group_report(group: &GroupDecision) -> GroupReport {
    let mut subscriptions = group.subscriptions.clone();
    subscriptions.sort();
    let held_back: Vec<HeldBackReport> = subscriptions
        .iter()
        .filter_map(|name| {
            let reason = group.targets.get(name)?.held_back.clone()?;
            Some(HeldBackReport {
                subscription: name.clone(),
                reason,
            })
        })
        .collect();
    let report = match &group.decision {
        Decision::Unsatisfiable(explanation) => GroupReport {
            subscriptions,
            status: GroupStatus::Unsatisfiable,
            steps: Vec::new(),
            explanation: Some(explanation.clone()),
            held_back: Vec::new(),
        },
        Decision::UpToDate => GroupReport {
            subscriptions,
            status: GroupStatus::Resolved,
            steps: Vec::new(),
            explanation: None,
            held_back: Vec::new(),
        },
        Decision::Install(steps) => GroupReport {
            subscriptions,
            status: GroupStatus::Resolved,
            steps: steps
                .iter()
                .map(|step| StepReport {
                    bundle: step.bundle.clone(),
                    package: step.package.clone(),
                    version: step.version.clone(),
                    catalog: format!("{}/{}", step.catalog.namespace, step.catalog.name),
                    channel: step.channel.clone(),
                    reason: step.reason.clone(),
                    replaces: step.replaces.clone(),
                })
                .collect(),
            explanation: None,
            held_back: Vec::new(),
        },
    };
    GroupReport { held_back, ..report }
}

impl ResolveArgs {
    /// Runs the command.
    pub fn run(&self) -> ExitCode {
        output::run(|out, err| self.write(out, err))
    }

    /// Writes the report to `out` in the chosen format, errors to `err`;
    /// returns exit code 0 when everything resolved, 1 when not, 2 for bad input.
    pub fn write(&self, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<ExitCode> {
        let report = match self.report() {
            Ok(report) => report,
            Err(e) => return output::bad_input(err, &e),
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
                return Ok(ExitCode::from(output::EXIT_BAD_INPUT));
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
        let catalogs = OfflineCatalogs::new(catalogs);
        let source = match &self.source {
            Some(name) => catalogs
                .ids()
                .iter()
                .find(|id| &id.name == name)
                .cloned()
                .ok_or_else(|| ResolveInputError::UnknownSource(name.clone()))?,
            None => catalogs.ids()[0].clone(),
        };
        let subscriptions = self
            .subscriptions
            .iter()
            .map(|s| SubscriptionArg::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        let installed = self
            .installed
            .iter()
            .map(|path| manifest::read_one::<ClusterServiceVersion>(path).map_err(Box::new))
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
    use std::path::Path;

    use olm_api::labels;
    use serde_json::json;

    use super::*;
    use crate::controllers::subscription::resolve::Decision;

    fn csv(
        name: &str,
        version: &str,
        replaces: Option<&str>,
        package: Option<&str>,
    ) -> ClusterServiceVersion {
        let properties = package.map(|package| {
            json!({"properties": [{"type": "olm.package", "value": {"packageName": package, "version": version}}]})
                .to_string()
        });
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {
                "name": name,
                "namespace": "team",
                "annotations": properties.map(|p| json!({ labels::INSTALLED_PROPERTIES: p })).unwrap_or(json!({})),
            },
            "spec": {
                "version": version,
                "replaces": replaces,
                "displayName": name,
                "install": {"strategy": "deployment", "spec": {"deployments": []}},
                "customresourcedefinitions": {"owned": [
                    {"name": "databases.demo.olm-rs.dev", "version": "v1", "kind": "Database"}
                ]},
            },
        }))
        .expect("a CSV")
    }

    /// Subscriptions in namespace `team` to `(package, channel)` of catalog olm/demo.
    fn subscription_objects(packages: &[(&str, Option<&str>)]) -> Vec<Arc<Subscription>> {
        packages
            .iter()
            .map(|(package, channel)| {
                Arc::new(
                    serde_json::from_value(json!({
                        "apiVersion": "operators.coreos.com/v1alpha1",
                        "kind": "Subscription",
                        "metadata": {"name": package, "namespace": "team"},
                        "spec": {"source": "demo", "sourceNamespace": "olm", "name": package, "channel": channel},
                    }))
                    .expect("a Subscription"),
                )
            })
            .collect()
    }

    /// What the Subscription controller decides for namespace `team` with catalog `id`.
    fn controller_decisions(
        id: &CatalogId,
        catalog: Catalog,
        subscriptions: &[Arc<Subscription>],
        csvs: &[Arc<ClusterServiceVersion>],
    ) -> Vec<GroupDecision> {
        let store = CatalogStore::new();
        let now = olm_runtime::conditions::now();
        store.set_loaded(
            id,
            0,
            CatalogContent::new(
                id.clone(),
                catalog,
                Vec::new(),
                crate::bundles::BundleSource::Memory,
            ),
            &now,
        );
        let visible = store.visible(&["team", "olm"], &[]);
        let index = store.index(&visible);
        decide(
            &index,
            &NamespaceView {
                namespace: "team",
                subscriptions,
                csvs,
                catalogs: &visible,
            },
        )
    }

    /// One group's answer: its Subscriptions, the bundles it installs (with their catalog and what
    /// they replace), and why it cannot.
    type Answer = (Vec<String>, Vec<(String, String, Option<String>)>, Option<String>);

    /// The controller's answers, sorted.
    fn in_cluster_answers(decisions: &[GroupDecision]) -> Vec<Answer> {
        let mut answers: Vec<Answer> = decisions
            .iter()
            .map(|group| {
                let mut names = group.subscriptions.clone();
                names.sort();
                match &group.decision {
                    Decision::Install(steps) => (
                        names,
                        steps
                            .iter()
                            .map(|s| {
                                (
                                    s.bundle.clone(),
                                    format!("{}/{}", s.catalog.namespace, s.catalog.name),
                                    s.replaces.clone(),
                                )
                            })
                            .collect(),
                        None,
                    ),
                    Decision::UpToDate => (names, Vec::new(), None),
                    Decision::Unsatisfiable(why) => (names, Vec::new(), Some(why.clone())),
                }
            })
            .collect();
        answers.sort();
        answers
    }

    /// The offline report's answers.
    fn offline_answers(report: &Report) -> Vec<Answer> {
        report
            .groups
            .iter()
            .map(|g| {
                (
                    g.subscriptions.clone(),
                    g.steps
                        .iter()
                        .map(|s| (s.bundle.clone(), s.catalog.clone(), s.replaces.clone()))
                        .collect(),
                    g.explanation.clone(),
                )
            })
            .collect()
    }

    /// The same Subscriptions and installed CSVs, given to `resolve` as
    /// arguments and to the Subscription controller's resolution as the objects
    /// it reads from the cluster, get the same answer: which bundles each group
    /// installs (and what they replace), or why it cannot.
    #[test]
    fn the_offline_answer_is_the_controllers() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalogs/demo-bundles");
        let catalog = source::load(&path).expect("the demo catalog loads").0;
        let id = CatalogId::new("demo", "olm");
        let catalogs = OfflineCatalogs::new(vec![(id.clone(), catalog.clone())]);
        let args: Vec<SubscriptionArg> = ["demo-db/stable", "demo-app/stable", "demo-broken"]
            .iter()
            .map(|a| SubscriptionArg::parse(a).expect("valid"))
            .collect();
        // An installed db with its installed properties, the CSV it replaced
        // (on its way out), and an operator whose version is not semver.
        let installed = vec![
            csv("demo-db.v1.0.0", "1.0.0", Some("demo-db.v0.9.0"), Some("demo-db")),
            csv("demo-db.v0.9.0", "0.9.0", None, None),
            csv("legacy-operator", "latest", None, None),
        ];
        let offline = resolve(&catalogs, &id, "team", &args, &installed);

        // In the cluster: the objects as a user applies them, read by the controller.
        let subscriptions = subscription_objects(&[
            ("demo-db", Some("stable")),
            ("demo-app", Some("stable")),
            ("demo-broken", None),
        ]);
        let csvs: Vec<Arc<ClusterServiceVersion>> = installed.into_iter().map(Arc::new).collect();
        let decisions = controller_decisions(&id, catalog, &subscriptions, &csvs);
        assert_eq!(offline_answers(&offline), in_cluster_answers(&decisions));

        // And the answer is the one the installed CSVs call for.
        let db_group = offline
            .groups
            .iter()
            .find(|g| g.subscriptions.contains(&"demo-db".to_owned()))
            .expect("a group for demo-db");
        let db = db_group
            .steps
            .iter()
            .find(|s| s.package == "demo-db")
            .expect("demo-db is upgraded");
        assert_eq!(db.replaces.as_deref(), Some("demo-db.v1.0.0"), "{offline:?}");
        assert_eq!(
            offline.installed_left_out,
            ["demo-db.v0.9.0", "legacy-operator"],
            "the replaced CSV and the one whose version is not semver"
        );
        let broken = offline
            .groups
            .iter()
            .find(|g| g.subscriptions == ["demo-broken"])
            .expect("a group for demo-broken");
        assert_eq!(broken.status, GroupStatus::Unsatisfiable);
    }

    /// An installed operator that needs demo-db below 1.1.0 holds back demo-db's
    /// upgrade; the offline report and the controller say so in the same words.
    #[test]
    fn a_held_back_upgrade_is_reported_as_the_controller_reports_it() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalogs/demo-bundles");
        let catalog = source::load(&path).expect("the demo catalog loads").0;
        let id = CatalogId::new("demo", "olm");
        let catalogs = OfflineCatalogs::new(vec![(id.clone(), catalog)]);
        let mut pinning = csv("pinning.v1.0.0", "1.0.0", None, None);
        pinning.metadata.annotations = Some(
            [(
                labels::INSTALLED_PROPERTIES.to_owned(),
                json!({"properties": [
                    {"type": "olm.package", "value": {"packageName": "pinning", "version": "1.0.0"}},
                    {"type": "olm.package.required", "value": {"packageName": "demo-db", "versionRange": "<1.1.0"}},
                ]})
                .to_string(),
            )]
            .into(),
        );
        pinning.spec.custom_resource_definitions = None;
        let installed = vec![csv("demo-db.v1.0.0", "1.0.0", None, Some("demo-db")), pinning];
        let args = [SubscriptionArg::parse("demo-db/stable").expect("valid")];
        let offline = resolve(&catalogs, &id, "team", &args, &installed);
        assert!(offline.all_resolved(), "{offline:?}");
        let group = &offline.groups[0];
        assert!(group.steps.is_empty(), "demo-db stays: {group:?}");
        let [held] = group.held_back.as_slice() else {
            panic!("demo-db is held back: {group:?}")
        };
        assert_eq!(held.subscription, "demo-db");
        assert!(
            held.reason
                .starts_with("demo-db.v1.1.0 held back by installed operator pinning.v1.0.0: "),
            "{}",
            held.reason
        );
        assert!(
            held.reason
                .contains("pinning.v1.0.0 requires package demo-db in range <1.1.0"),
            "{}",
            held.reason
        );

        // The controller, reading the same objects, says the same.
        let subscription: Arc<Subscription> = Arc::new(args[0].to_subscription("team", &id));
        let csvs: Vec<Arc<ClusterServiceVersion>> = installed.into_iter().map(Arc::new).collect();
        let store = &catalogs.store;
        let visible = store.visible(&[], catalogs.ids());
        let decisions = decide(
            &store.index(&visible),
            &NamespaceView {
                namespace: "team",
                subscriptions: &[subscription],
                csvs: &csvs,
                catalogs: &visible,
            },
        );
        assert_eq!(decisions[0].decision, Decision::UpToDate);
        let target = &decisions[0].targets["demo-db"];
        assert_eq!(target.held_back.as_deref(), Some(held.reason.as_str()));
    }

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
