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

use crate::{catalogs::CatalogState, controllers::plan::ResolvedStep, snapshot};

/// What one namespace holds.
pub struct NamespaceView<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// Its Subscriptions (not being deleted).
    pub subscriptions: &'a [Arc<Subscription>],
    /// Its CSVs (copied CSVs excluded).
    pub csvs: &'a [Arc<ClusterServiceVersion>],
    /// The catalogs it may use, with their state.
    pub catalogs: &'a [(CatalogId, CatalogState)],
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
fn package_of(
    csv: &ClusterServiceVersion,
    properties: &[(String, Value)],
    catalogs: &[(CatalogId, CatalogState)],
) -> Option<String> {
    let from_annotation = properties
        .iter()
        .find(|(t, _)| t == "olm.package")
        .and_then(|(_, v)| v.get("packageName")?.as_str().map(str::to_owned));
    from_annotation.or_else(|| {
        let name = csv.name_any();
        catalogs.iter().find_map(|(_, state)| {
            state.content.as_ref().and_then(|content| {
                content
                    .catalog
                    .bundles
                    .iter()
                    .find(|b| b.name == name)
                    .map(|b| b.package.clone())
            })
        })
    })
}

/// The resolver's view of the installed CSVs. CSVs whose version is not semver
/// are left out (they cannot take part in upgrades).
pub fn installed_csvs(
    csvs: &[Arc<ClusterServiceVersion>],
    catalogs: &[(CatalogId, CatalogState)],
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
pub fn decide(index: &CatalogIndex, view: &NamespaceView<'_>) -> Vec<GroupDecision> {
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
fn group_decision(
    group: Group,
    view: &NamespaceView<'_>,
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
pub(crate) mod tests {
    use std::path::Path;

    use kube::api::ObjectMeta;
    use olm_api::v1alpha1::{ClusterServiceVersionSpec, SubscriptionSpec, SubscriptionStatus};

    use super::*;
    use crate::catalogs::{CatalogContent, CatalogStore};

    pub(crate) fn demo_store() -> (CatalogStore, CatalogId) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalogs/demo-bundles");
        let catalog = crate::source::load(&path).expect("demo").0;
        let id = CatalogId::new("demo", "team");
        let store = CatalogStore::new();
        let now = olm_runtime::conditions::now();
        store.set_loaded(
            &id,
            0,
            CatalogContent::new(
                id.clone(),
                catalog,
                Vec::new(),
                crate::bundles::BundleSource::Memory,
            ),
            &now,
        );
        (store, id)
    }

    pub(crate) fn subscription(name: &str, package: &str, approval: Approval) -> Arc<Subscription> {
        Arc::new(Subscription {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("team".into()),
                ..ObjectMeta::default()
            },
            spec: SubscriptionSpec {
                catalog_source: "demo".into(),
                catalog_source_namespace: "team".into(),
                package: package.into(),
                channel: Some("stable".into()),
                starting_csv: None,
                install_plan_approval: Some(approval),
                config: None,
            },
            status: None,
        })
    }

    fn csv(name: &str, version: &str) -> Arc<ClusterServiceVersion> {
        let spec: ClusterServiceVersionSpec = serde_json::from_value(serde_json::json!({
            "version": version,
            "displayName": name,
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
            "customresourcedefinitions": {"owned": [
                {"name": "databases.demo.olm-rs.dev", "version": "v1", "kind": "Database"}
            ]},
        }))
        .expect("a CSV spec");
        Arc::new(ClusterServiceVersion {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("team".into()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        })
    }

    #[test]
    fn groups_get_their_own_decisions() {
        let (store, _) = demo_store();
        let catalogs = store.visible(&["team"], &[]);
        let index = store.index(&catalogs);
        let subs = vec![
            subscription("app", "demo-app", Approval::Automatic),
            subscription("broken", "demo-broken", Approval::Automatic),
        ];
        let view = NamespaceView {
            namespace: "team",
            subscriptions: &subs,
            csvs: &[],
            catalogs: &catalogs,
        };
        let decisions = decide(&index, &view);
        assert_eq!(decisions.len(), 2);
        let app = decisions.iter().find(|d| d.subscriptions == ["app"]).unwrap();
        let Decision::Install(steps) = &app.decision else {
            panic!("{:?}", app.decision)
        };
        let order: Vec<_> = steps.iter().map(|s| (s.bundle.as_str(), s.dependency)).collect();
        assert_eq!(order, [("demo-db.v1.1.0", true), ("demo-app.v0.2.0", false)]);
        assert_eq!(app.targets["app"].bundle, "demo-app.v0.2.0");
        let broken = decisions.iter().find(|d| d.subscriptions == ["broken"]).unwrap();
        let Decision::Unsatisfiable(message) = &broken.decision else {
            panic!("{:?}", broken.decision)
        };
        assert!(message.contains("demo-missing"), "{message}");
    }

    #[test]
    fn installed_bundles_are_up_to_date_and_manual_groups_are_manual() {
        let (store, _) = demo_store();
        let catalogs = store.visible(&["team"], &[]);
        let index = store.index(&catalogs);
        let mut db = subscription("db", "demo-db", Approval::Manual);
        Arc::make_mut(&mut db).status = Some(SubscriptionStatus {
            installed_csv: Some("demo-db.v1.1.0".into()),
            ..SubscriptionStatus::default()
        });
        let subs = vec![db, subscription("app", "demo-app", Approval::Automatic)];
        let csvs = vec![csv("demo-db.v1.1.0", "1.1.0")];
        let view = NamespaceView {
            namespace: "team",
            subscriptions: &subs,
            csvs: &csvs,
            catalogs: &catalogs,
        };
        let decisions = decide(&index, &view);
        assert_eq!(decisions.len(), 1, "app needs db: one group");
        let group = &decisions[0];
        assert_eq!(group.approval, Approval::Manual);
        let Decision::Install(steps) = &group.decision else {
            panic!("{:?}", group.decision)
        };
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(steps[0].bundle, "demo-app.v0.2.0");
        assert_eq!(group.targets["db"].change, Change::Stay);
    }

    #[test]
    fn installed_csvs_bring_their_needs() {
        let (store, _) = demo_store();
        let catalogs = store.visible(&["team"], &[]);
        let mut app = csv("demo-app.v0.1.0", "0.1.0");
        let spec = &mut Arc::make_mut(&mut app).spec;
        spec.custom_resource_definitions = serde_json::from_value(serde_json::json!({"required": [
            {"name": "databases.demo.olm-rs.dev", "version": "v1", "kind": "Database"},
            {"name": "caches.demo.olm-rs.dev", "version": "v1", "kind": "Cache"}
        ]}))
        .expect("required CRDs");
        Arc::make_mut(&mut app).metadata.annotations = Some(
            [(
                labels::INSTALLED_PROPERTIES.to_owned(),
                serde_json::json!({"properties": [
                    {"type": "olm.package", "value": {"packageName": "demo-app", "version": "0.1.0"}},
                    {"type": "olm.package.required", "value": {"packageName": "demo-db", "versionRange": ">=1.1.0 <2.0.0"}},
                    {"type": "olm.gvk.required", "value": {"group": "demo.olm-rs.dev", "version": "v1", "kind": "Database"}},
                    {"type": "olm.constraint", "value": {"failureMessage": "no red", "not": {"constraints": [{"package": {"packageName": "red"}}]}}},
                    {"type": "olm.package.required", "value": {"packageName": "bad", "versionRange": "^1"}}
                ]})
                .to_string(),
            )]
            .into(),
        );
        let installed = installed_csvs(&[app], &catalogs);
        let described: Vec<String> = installed[0]
            .requirements
            .iter()
            .map(olm_resolver::describe_requirement)
            .collect();
        assert_eq!(
            described,
            [
                "package demo-db in range >=1.1.0 <2.0.0",
                "API demo.olm-rs.dev/v1 Database",
                "olm.constraint none of [package red]",
                "API demo.olm-rs.dev/v1 Cache (a required CRD of its CSV)",
            ],
            "a range that does not parse is left out; a required CRD named by a property counts once"
        );
    }

    #[test]
    fn a_replaced_csv_gives_way_to_its_replacement() {
        let (store, _) = demo_store();
        let catalogs = store.visible(&["team"], &[]);
        let index = store.index(&catalogs);
        let mut db = subscription("db", "demo-db", Approval::Automatic);
        Arc::make_mut(&mut db).status = Some(SubscriptionStatus {
            installed_csv: Some("demo-db.v1.0.0".into()),
            ..SubscriptionStatus::default()
        });
        let mut new = csv("demo-db.v1.1.0", "1.1.0");
        Arc::make_mut(&mut new).spec.replaces = Some("demo-db.v1.0.0".into());
        let csvs = vec![csv("demo-db.v1.0.0", "1.0.0"), new];
        let installed = installed_csvs(&csvs, &catalogs);
        assert_eq!(installed.len(), 1, "the replaced CSV is left out");
        let subs = vec![db];
        let view = NamespaceView {
            namespace: "team",
            subscriptions: &subs,
            csvs: &csvs,
            catalogs: &catalogs,
        };
        let decisions = decide(&index, &view);
        assert_eq!(decisions[0].decision, Decision::UpToDate, "{:?}", decisions[0]);
        assert_eq!(decisions[0].targets["db"].bundle, "demo-db.v1.1.0");
    }
}
