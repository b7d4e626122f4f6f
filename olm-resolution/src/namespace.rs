//! Resolution of one namespace (pure): the Subscriptions, the CSVs installed
//! there and the catalogs it may use become the resolver's input, and each
//! independent group of Subscriptions gets a [`Decision`].

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
};

use kube::ResourceExt;
use olm_api::{
    labels,
    v1alpha1::{Approval, ClusterServiceVersion, Subscription},
};
use olm_resolver::{
    CatalogIndex,
    model::{self, BundleVersion, CatalogId, Gvk, InstalledCsv, Requirement},
    plan::{Change, DeprecationNotice, Group, Outcome, Step, StepReason, SubscriptionResult},
};
use serde_json::Value;

use olm_catalog::property::Property;

use crate::{snapshot, step::ResolvedStep};

/// A catalog as the resolution of a namespace reads it, beside the index built
/// from it: where to find the package of an installed CSV that does not name it.
pub trait CatalogBundles {
    /// The package of the bundle named `bundle`, when this catalog has that bundle.
    fn package_of_bundle(&self, bundle: &str) -> Option<String>;
}

impl CatalogBundles for olm_catalog::Catalog {
    fn package_of_bundle(&self, bundle: &str) -> Option<String> {
        self.bundles
            .iter()
            .find(|b| b.name == bundle)
            .map(|b| b.package.clone())
    }
}

/// What one namespace holds; `C` is how its catalogs are kept.
pub struct NamespaceView<'a, C> {
    /// The namespace.
    pub namespace: &'a str,
    /// Its Subscriptions (not being deleted).
    pub subscriptions: &'a [Arc<Subscription>],
    /// Its CSVs (copied CSVs excluded).
    pub csvs: &'a [Arc<ClusterServiceVersion>],
    /// The catalogs it may use, with their state.
    pub catalogs: &'a [(CatalogId, C)],
}

/// What one Subscription of a group gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The bundle chosen for it.
    pub bundle: String,
    /// A new install, an upgrade or the installed CSV.
    pub change: Change,
    /// Why it does not get a bundle it prefers (a newer version that an installed operator does
    /// not allow, say), in plain words.
    pub held_back: Option<String>,
}

/// What to do for a group.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Every chosen bundle is installed.
    UpToDate,
    /// These bundles must be installed, dependencies first.
    Install(Vec<ResolvedStep>),
    /// No plan exists; the explanation says why in plain words.
    Unsatisfiable(String),
}

/// The decision for one independent group of Subscriptions.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDecision {
    /// The Subscriptions of the group, sorted.
    pub subscriptions: Vec<String>,
    /// What to do.
    pub decision: Decision,
    /// What each Subscription gets (empty when unsatisfiable).
    pub targets: HashMap<String, Target>,
    /// Manual when any Subscription of the group is Manual.
    pub approval: Approval,
    /// The catalogs the group depends on: those its Subscriptions name, those its
    /// plan uses, and (when it cannot be resolved) every catalog it may use.
    pub catalogs: BTreeSet<CatalogId>,
    /// Deprecations of what the plan installs or keeps.
    pub deprecations: Vec<DeprecationNotice>,
}

/// Whether a CSV is a copy made for an OperatorGroup's target namespace.
pub fn is_copied(csv: &ClusterServiceVersion) -> bool {
    csv.labels().contains_key(labels::COPIED_FROM)
}

/// The catalog a Subscription names.
pub fn catalog_of(subscription: &Subscription) -> CatalogId {
    CatalogId::new(
        subscription.spec.catalog_source.clone(),
        subscription.spec.catalog_source_namespace.clone(),
    )
}

/// The properties OLM (and we) write on a CSV at install, as `(type, value)`.
fn installed_properties(csv: &ClusterServiceVersion) -> Vec<(String, Value)> {
    csv.annotations()
        .get(labels::INSTALLED_PROPERTIES)
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|value| value.get("properties")?.as_array().cloned())
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p.get("type")?.as_str()?.to_owned(), p.get("value")?.clone())))
        .collect()
}

/// The package of an installed CSV: from its installed properties, else from the
/// catalogs' bundle of that name.
fn package_of<C: CatalogBundles>(
    csv: &ClusterServiceVersion,
    properties: &[(String, Value)],
    catalogs: &[(CatalogId, C)],
) -> Option<String> {
    let from_annotation = properties
        .iter()
        .find(|(t, _)| t == "olm.package")
        .and_then(|(_, v)| v.get("packageName")?.as_str().map(str::to_owned));
    from_annotation.or_else(|| {
        let name = csv.name_any();
        catalogs
            .iter()
            .find_map(|(_, catalog)| catalog.package_of_bundle(&name))
    })
}

/// The resolver's view of the installed CSVs. CSVs whose version is not semver
/// are left out (they cannot take part in upgrades).
pub fn installed_csvs<C: CatalogBundles>(
    csvs: &[Arc<ClusterServiceVersion>],
    catalogs: &[(CatalogId, C)],
) -> Vec<InstalledCsv> {
    // A CSV that another CSV of the namespace replaces is on its way out (OLM
    // moves it to Replacing, then Deleting): the new one stands for its package.
    let replaced: BTreeSet<&str> = csvs
        .iter()
        .filter(|csv| !is_copied(csv))
        .filter_map(|csv| csv.spec.replaces.as_deref())
        .collect();
    csvs.iter()
        .filter(|csv| !is_copied(csv))
        .filter(|csv| !replaced.contains(csv.name_any().as_str()))
        .filter_map(|csv| {
            let version = BundleVersion::parse(csv.spec.version.as_deref()?).ok()?;
            let properties = installed_properties(csv);
            let package = package_of(csv, &properties, catalogs);
            let mut installed = InstalledCsv::new(csv.name_any(), package.as_deref(), version);
            installed.replaces = csv.spec.replaces.clone();
            let mut provides: Vec<Gvk> = csv
                .owned_crds()
                .iter()
                .map(|crd| Gvk::new(crd.group(), crd.version.clone(), crd.kind.clone()))
                .collect();
            for (_, value) in properties.iter().filter(|(t, _)| t == "olm.gvk") {
                let field = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
                if let (Some(version), Some(kind)) = (field("version"), field("kind")) {
                    let gvk = Gvk::new(field("group").unwrap_or_default(), version, kind);
                    if !provides.contains(&gvk) {
                        provides.push(gvk);
                    }
                }
            }
            installed.provides = provides;
            installed.requirements = installed_requirements(csv, &properties);
            Some(installed)
        })
        .collect()
}

/// What an installed CSV needs: the `olm.gvk.required`, `olm.package.required` and
/// `olm.constraint` of its installed properties (ones that do not parse are left out, as the
/// catalog left out such a bundle), and the required CRDs of its spec that no property names.
fn installed_requirements(csv: &ClusterServiceVersion, properties: &[(String, Value)]) -> Vec<Requirement> {
    let mut requirements: Vec<Requirement> = properties
        .iter()
        .filter_map(|(type_, value)| Property::from_parts(type_.clone(), value.clone()).ok())
        .filter_map(|property| snapshot::requirement(&property)?.ok())
        .collect();
    for crd in csv.required_crds() {
        let gvk = Gvk::new(crd.group(), crd.version.clone(), crd.kind.clone());
        let named = requirements
            .iter()
            .any(|r| matches!(r, Requirement::Gvk { gvk: known, .. } if *known == gvk));
        if !named {
            requirements.push(Requirement::csv_required_crd(gvk));
        }
    }
    requirements
}

/// The resolver's view of the Subscriptions; `installed` names the CSVs present.
pub fn resolver_subscriptions(
    namespace: &str,
    subscriptions: &[Arc<Subscription>],
    installed: &[InstalledCsv],
) -> Vec<model::Subscription> {
    subscriptions
        .iter()
        .map(|sub| {
            let mut out = model::Subscription::new(
                sub.name_any(),
                namespace,
                sub.spec.package.clone(),
                catalog_of(sub),
            );
            out.channel = sub.spec.channel.clone().filter(|c| !c.is_empty());
            out.starting_csv = sub.spec.starting_csv.clone().filter(|c| !c.is_empty());
            out.installed_csv = sub
                .status
                .as_ref()
                .and_then(|s| s.installed_csv.clone())
                .filter(|name| installed.iter().any(|c| &c.name == name));
            out
        })
        .collect()
}

/// Resolves the namespace against `index` (built from `view.catalogs`).
pub fn decide<C: CatalogBundles>(index: &CatalogIndex, view: &NamespaceView<'_, C>) -> Vec<GroupDecision> {
    let installed = installed_csvs(view.csvs, view.catalogs);
    let subs = resolver_subscriptions(view.namespace, view.subscriptions, &installed);
    let resolution = index.resolve(view.namespace, &installed, &subs);
    let by_name: HashMap<String, &Arc<Subscription>> =
        view.subscriptions.iter().map(|s| (s.name_any(), s)).collect();
    let installed_names: BTreeSet<&str> = installed.iter().map(|c| c.name.as_str()).collect();
    resolution
        .groups
        .into_iter()
        .map(|group| group_decision(group, view, &by_name, &installed_names))
        .collect()
}

/// The decision for one group the resolver found.
fn group_decision<C>(
    group: Group,
    view: &NamespaceView<'_, C>,
    by_name: &HashMap<String, &Arc<Subscription>>,
    installed_names: &BTreeSet<&str>,
) -> GroupDecision {
    let members: Vec<&Arc<Subscription>> = group
        .subscriptions
        .iter()
        .filter_map(|n| by_name.get(n).copied())
        .collect();
    let approval = group_approval(&members);
    let mut catalogs: BTreeSet<CatalogId> = members.iter().map(|s| catalog_of(s)).collect();
    match group.outcome {
        Outcome::Unsatisfiable(explanation) => {
            catalogs.extend(view.catalogs.iter().map(|(id, _)| id.clone()));
            GroupDecision {
                subscriptions: group.subscriptions,
                decision: Decision::Unsatisfiable(explanation.to_string()),
                targets: HashMap::new(),
                approval,
                catalogs,
                deprecations: Vec::new(),
            }
        }
        Outcome::Plan(plan) => {
            let steps = steps_to_install(&plan.steps, view.subscriptions, installed_names);
            catalogs.extend(steps.iter().map(|s| s.catalog.clone()));
            GroupDecision {
                subscriptions: group.subscriptions,
                decision: if steps.is_empty() {
                    Decision::UpToDate
                } else {
                    Decision::Install(steps)
                },
                targets: targets(&plan.subscriptions),
                approval,
                catalogs,
                deprecations: plan.deprecations,
            }
        }
    }
}

/// A group's plans need approval when any of its Subscriptions asks for it.
fn group_approval(members: &[&Arc<Subscription>]) -> Approval {
    if members
        .iter()
        .any(|s| s.spec.install_plan_approval == Some(Approval::Manual))
    {
        Approval::Manual
    } else {
        Approval::Automatic
    }
}

/// The plan's steps whose bundle is not installed yet; a step is a dependency
/// when the resolver added it for another bundle and no Subscription names its package.
fn steps_to_install(
    steps: &[Step],
    subscriptions: &[Arc<Subscription>],
    installed_names: &BTreeSet<&str>,
) -> Vec<ResolvedStep> {
    steps
        .iter()
        .filter(|step| !installed_names.contains(step.bundle.as_str()))
        .map(|step| ResolvedStep {
            bundle: step.bundle.clone(),
            package: step.package.clone(),
            version: step.version.as_str().to_owned(),
            catalog: step.catalog.clone(),
            channel: step.channel.clone(),
            replaces: step.replaces.clone(),
            reason: step.reason.to_string(),
            dependency: matches!(step.reason, StepReason::Dependency { .. })
                && !subscriptions.iter().any(|s| s.spec.package == step.package),
        })
        .collect()
}

/// What each Subscription of the plan gets, by Subscription name.
fn targets(results: &[SubscriptionResult]) -> HashMap<String, Target> {
    results
        .iter()
        .map(|result| {
            (
                result.subscription.clone(),
                Target {
                    bundle: result.bundle.clone(),
                    change: result.change.clone(),
                    held_back: result.held_back.as_ref().map(ToString::to_string),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use kube::api::ObjectMeta;
    use olm_api::v1alpha1::ClusterServiceVersionSpec;

    use super::*;

    const FBC: &str = r#"
{"schema":"olm.package","name":"db","defaultChannel":"stable"}
{"schema":"olm.channel","package":"db","name":"stable","entries":[{"name":"db.v1.0.0"}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.0.0","image":"db:1.0.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.0.0"}}]}
"#;

    fn csv(name: &str, version: &str, copied: bool) -> Arc<ClusterServiceVersion> {
        let spec: ClusterServiceVersionSpec = serde_json::from_value(serde_json::json!({
            "version": version,
            "displayName": name,
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
        }))
        .expect("a CSV spec");
        let labels = copied.then(|| [(labels::COPIED_FROM.to_owned(), "elsewhere".to_owned())].into());
        Arc::new(ClusterServiceVersion {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("team".into()),
                labels,
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        })
    }

    #[test]
    fn installed_csvs_take_their_package_from_the_catalogs_and_leave_copies_out() {
        let catalog = olm_catalog::fbc::parse_str(Path::new("test.json"), FBC).expect("valid FBC");
        let catalogs = vec![(CatalogId::new("demo", "team"), catalog)];
        let csvs = vec![
            csv("db.v1.0.0", "1.0.0", false),
            csv("other.v1.0.0", "1.0.0", false),
            csv("copy.v1.0.0", "1.0.0", true),
            csv("odd.v1", "not-semver", false),
        ];
        let installed = installed_csvs(&csvs, &catalogs);
        let found: Vec<(&str, Option<&str>)> = installed
            .iter()
            .map(|c| (c.name.as_str(), c.package.as_deref()))
            .collect();
        assert_eq!(found, [("db.v1.0.0", Some("db")), ("other.v1.0.0", None)]);
    }

    #[test]
    fn a_subscription_names_its_catalog() {
        let subscription: Subscription = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": "db", "namespace": "team"},
            "spec": {"source": "demo", "sourceNamespace": "olm", "name": "db"},
        }))
        .expect("a Subscription");
        assert_eq!(catalog_of(&subscription), CatalogId::new("demo", "olm"));
    }
}
