//! Resolution for `install` and `plan`: the Subscription the command would
//! write is sent to the cluster's catalog-operator as a dry run
//! (`packagemanifests/<package>/plan`), which resolves it with the namespace's
//! Subscriptions and CSVs exactly as its Subscription controller does and
//! answers with the plan; the CLI adds the OperatorGroup the install needs.

use std::fmt::Write;

use kube::{
    Api, ResourceExt,
    api::{ListParams, PostParams},
};
use olm_api::{
    packages::{self, PackageManifest, PackagePlan, PackagePlanStatus, PlanResult},
    v1::OperatorGroup,
    v1alpha1::{Approval, InstallModeType, Subscription},
};
use serde::Serialize;
use serde_json::Value;

use crate::{
    Env, TargetArgs,
    catalogs::{self, CatalogId, Catalogs},
    error::Error,
    objects::{self, SubscriptionRequest},
    suggest,
};

/// The OperatorGroup an install uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupPlan {
    /// Its name.
    pub name: String,
    /// Whether the install creates it.
    pub create: bool,
    /// The namespaces it targets (empty: all).
    pub target_namespaces: Vec<String>,
    /// The install mode that makes.
    pub install_mode: InstallModeType,
}

/// One bundle a plan installs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStep {
    /// The bundle (CSV).
    pub bundle: String,
    /// Its package.
    pub package: String,
    /// Its version.
    pub version: String,
    /// Its catalog, `namespace/name`.
    pub catalog: String,
    /// The installed CSV it replaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Why the resolver chose it.
    pub reason: String,
}

/// What `install` would do, as `plan` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanView {
    /// The namespace.
    pub namespace: String,
    /// The package.
    pub package: String,
    /// Its catalog, `namespace/name`.
    pub catalog: String,
    /// The channel followed.
    pub channel: String,
    /// Automatic or Manual.
    pub approval: Approval,
    /// The bundle the Subscription gets.
    pub bundle: String,
    /// The OperatorGroup.
    pub operator_group: GroupPlan,
    /// The bundles to install, dependencies first; empty when all is installed.
    pub steps: Vec<PlanStep>,
    /// Deprecation notices of what it installs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deprecations: Vec<String>,
}

/// A resolved install: what it shows and what it writes.
pub struct Prepared {
    /// The plan.
    pub view: PlanView,
    /// The objects to write, in order (OperatorGroup when new, then the Subscription).
    pub objects: Vec<Value>,
    /// The Subscription.
    pub subscription: Subscription,
    /// The OperatorGroup, when it is new.
    pub new_group: Option<OperatorGroup>,
}

/// Parses `--catalog` (`name` or `namespace/name`) among the visible catalogs.
pub fn named_catalog(
    catalogs: &Catalogs,
    wanted: &str,
    namespace: &str,
    global: &str,
) -> Result<CatalogId, Error> {
    let candidates: Vec<CatalogId> = match wanted.split_once('/') {
        Some((ns, name)) => vec![CatalogId::new(name, ns)],
        None => vec![CatalogId::new(wanted, namespace), CatalogId::new(wanted, global)],
    };
    candidates
        .into_iter()
        .find(|id| catalogs.view(id).is_some())
        .ok_or_else(|| Error::UnknownCatalog {
            catalog: wanted.to_owned(),
        })
}

/// The catalog to install `package` from: `--catalog`, else the visible catalog
/// serving it with the highest priority, own namespace first.
pub fn choose_catalog(
    catalogs: &Catalogs,
    package: &str,
    wanted: Option<&str>,
    namespace: &str,
    global: &str,
) -> Result<CatalogId, Error> {
    if let Some(wanted) = wanted {
        let id = named_catalog(catalogs, wanted, namespace, global)?;
        if catalogs.manifest(&id, package).is_some() {
            return Ok(id);
        }
        if catalogs.packages_of(&id).is_empty() {
            let view = catalogs.view(&id);
            let state = view
                .and_then(|v| v.operator_state())
                .map(|s| format!("{s:?}").to_uppercase())
                .unwrap_or_else(|| "no state yet".to_owned());
            let message = view.map(|v| v.message()).filter(|m| !m.is_empty());
            return Err(Error::UnhealthyCatalog {
                catalog: id,
                message: message.map_or(state.clone(), |m| format!("{state}: {m}")),
            });
        }
        return Err(unknown_package(catalogs, package, namespace, Some(&id)));
    }
    let priority = |id: &CatalogId| catalogs.view(id).map_or(0, |v| v.priority());
    let mut found: Vec<(i32, bool, CatalogId)> = catalogs
        .manifests
        .iter()
        .filter(|m| m.status.package_name == package)
        .map(CatalogId::of_manifest)
        .map(|id| (priority(&id), id.namespace == namespace, id))
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.name.cmp(&b.2.name)));
    found
        .into_iter()
        .next()
        .map(|(_, _, id)| id)
        .ok_or_else(|| unknown_package(catalogs, package, namespace, None))
}

fn unknown_package(catalogs: &Catalogs, package: &str, namespace: &str, only: Option<&CatalogId>) -> Error {
    let mut names: Vec<String> = catalogs
        .manifests
        .iter()
        .filter(|m| only.is_none_or(|id| &CatalogId::of_manifest(m) == id))
        .map(|m| m.status.package_name.clone())
        .collect();
    names.sort();
    names.dedup();
    Error::UnknownPackage {
        package: package.to_owned(),
        namespace: namespace.to_owned(),
        suggestions: suggest::closest(package, names.iter().map(String::as_str)),
        unhealthy: catalogs.unhealthy(),
    }
}

/// The channel a Subscription follows: `wanted`, checked, else the package's default.
pub fn channel_of(manifest: &PackageManifest, wanted: Option<&str>) -> Result<String, Error> {
    let package = &manifest.status.package_name;
    let channels: Vec<String> = manifest.status.channels.iter().map(|c| c.name.clone()).collect();
    match wanted {
        Some(wanted) if channels.iter().any(|c| c == wanted) => Ok(wanted.to_owned()),
        Some(wanted) => Err(Error::NoSuchEntry {
            package: package.clone(),
            what: "channel",
            wanted: wanted.to_owned(),
            available: channels,
        }),
        None => Some(manifest.status.default_channel.clone())
            .filter(|c| !c.is_empty())
            .or_else(|| channels.first().cloned())
            .ok_or_else(|| Error::NoSuchEntry {
                package: package.clone(),
                what: "channel",
                wanted: "(default)".to_owned(),
                available: Vec::new(),
            }),
    }
}

/// The bundle of `version` in `channel` of the package.
pub fn bundle_of_version(manifest: &PackageManifest, channel: &str, version: &str) -> Result<String, Error> {
    let wanted = version.trim_start_matches('v');
    let entries = catalogs::channel(manifest, channel)
        .map(|c| c.entries.as_slice())
        .unwrap_or_default();
    if let Some(entry) = entries.iter().find(|e| e.version == wanted) {
        return Ok(entry.name.clone());
    }
    Err(Error::NoSuchEntry {
        package: manifest.status.package_name.clone(),
        what: "version (in that channel)",
        wanted: version.to_owned(),
        available: entries.iter().map(|e| e.version.clone()).collect(),
    })
}

/// The bundle `csv` of the package, checked against its channels.
pub fn known_bundle(manifest: &PackageManifest, csv: &str) -> Result<String, Error> {
    let mut names: Vec<String> = manifest
        .status
        .channels
        .iter()
        .flat_map(|c| c.entries.iter().map(|e| e.name.clone()))
        .collect();
    if names.iter().any(|n| n == csv) {
        return Ok(csv.to_owned());
    }
    names.sort();
    names.dedup();
    Err(Error::NoSuchEntry {
        package: manifest.status.package_name.clone(),
        what: "bundle",
        wanted: csv.to_owned(),
        available: names,
    })
}

/// The request for a plan of `subscription` (pure).
pub fn plan_request(subscription: &Subscription) -> PackagePlan {
    PackagePlan::request(
        &subscription.namespace().unwrap_or_default(),
        &subscription.name_any(),
        subscription.spec.clone(),
    )
}

/// What the catalog-operator planned for an install of `package` in `namespace`.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The bundle the Subscription gets.
    pub bundle: String,
    /// Its install modes, when the catalog says.
    pub install_modes: Option<Vec<InstallModeType>>,
    /// The bundles to install, dependencies first.
    pub steps: Vec<PlanStep>,
    /// Deprecation notices.
    pub deprecations: Vec<String>,
}

/// The catalog-operator's answer as a plan, or the resolver's explanation as an error (pure).
pub fn planned(package: &str, namespace: &str, status: PackagePlanStatus) -> Result<Planned, Error> {
    if status.result == PlanResult::Unsatisfiable {
        return Err(Error::Unsatisfiable {
            package: package.to_owned(),
            namespace: namespace.to_owned(),
            explanation: status.message,
        });
    }
    Ok(Planned {
        bundle: status.bundle,
        install_modes: status.install_modes,
        steps: status
            .steps
            .into_iter()
            .map(|s| PlanStep {
                catalog: CatalogId::new(s.catalog_source, s.catalog_source_namespace).to_string(),
                bundle: s.bundle,
                package: s.package,
                version: s.version,
                replaces: s.replaces,
                reason: s.reason,
            })
            .collect(),
        deprecations: status.deprecations,
    })
}

/// Asks the cluster's catalog-operator for the plan of `subscription` (nothing is created).
pub async fn ask(env: &Env<'_>, subscription: &Subscription) -> Result<Planned, Error> {
    let package = subscription.spec.package.as_str();
    let namespace = env.namespace.as_str();
    let api: Api<PackageManifest> = Api::namespaced(env.client.clone(), namespace);
    let answer: PackagePlan = api
        .create_subresource(
            packages::PLAN_SUBRESOURCE,
            package,
            &PostParams::default(),
            &plan_request(subscription),
        )
        .await
        .map_err(|source| Error::plan(package, namespace, source))?;
    let status = answer.status.ok_or_else(|| {
        Error::Failed(format!(
            "the catalog-operator answered the plan of {package} in {namespace} without a status"
        ))
    })?;
    planned(package, namespace, status)
}

/// Resolves an install of `target` in the namespace without writing anything.
pub async fn prepare(env: &Env<'_>, target: &TargetArgs) -> Result<Prepared, Error> {
    let namespace = env.namespace.clone();
    let catalogs = catalogs::load(&env.client, &namespace, &env.global_namespace).await?;
    let catalog_id = choose_catalog(
        &catalogs,
        &target.package,
        target.catalog.as_deref(),
        &namespace,
        &env.global_namespace,
    )?;
    let manifest = catalogs.manifest(&catalog_id, &target.package).ok_or_else(|| {
        Error::Failed(format!(
            "catalog {catalog_id} serves no package {}",
            target.package
        ))
    })?;
    let channel = channel_of(manifest, target.channel.as_deref())?;
    let starting_csv = match (&target.version, &target.starting_csv) {
        (Some(version), _) => Some(bundle_of_version(manifest, &channel, version)?),
        (None, Some(csv)) => Some(known_bundle(manifest, csv)?),
        (None, None) => None,
    };
    let request = SubscriptionRequest {
        namespace: namespace.clone(),
        package: target.package.clone(),
        catalog: catalog_id.clone(),
        channel: Some(channel.clone()),
        starting_csv,
        approval: target.approval.into(),
    };
    let subscription = objects::subscription(&request);
    let planned = ask(env, &subscription).await?;
    let (operator_group, new_group) = operator_group_plan(
        env,
        &target.package,
        &planned.bundle,
        planned.install_modes.clone(),
        &target.watch_namespaces,
    )
    .await?;
    let view = PlanView {
        namespace: namespace.clone(),
        package: target.package.clone(),
        catalog: catalog_id.to_string(),
        channel,
        approval: request.approval,
        bundle: planned.bundle,
        operator_group,
        steps: planned.steps,
        deprecations: planned.deprecations,
    };
    let mut objects = Vec::new();
    if let Some(group) = &new_group {
        objects.push(objects::to_value(group)?);
    }
    objects.push(objects::to_value(&subscription)?);
    Ok(Prepared {
        view,
        objects,
        subscription,
        new_group,
    })
}

/// The OperatorGroup the install uses: the namespace's one, checked against the
/// bundle's install modes, or a new one that fits.
async fn operator_group_plan(
    env: &Env<'_>,
    package: &str,
    bundle: &str,
    install_modes: Option<Vec<InstallModeType>>,
    watch: &[String],
) -> Result<(GroupPlan, Option<OperatorGroup>), Error> {
    let namespace = env.namespace.as_str();
    let api: Api<OperatorGroup> = Api::namespaced(env.client.clone(), namespace);
    let groups = api
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!(
            "list OperatorGroups in namespace {namespace}"
        )))?
        .items;
    // A catalog that does not say which modes a bundle supports: assume the common two.
    let supported =
        install_modes.unwrap_or_else(|| vec![InstallModeType::OwnNamespace, InstallModeType::AllNamespaces]);
    match groups.as_slice() {
        [] => {
            let targets = objects::choose_targets(namespace, package, watch, &supported)?;
            objects::check_install_mode(bundle, namespace, namespace, &targets, &supported, false)?;
            let group = objects::operator_group(namespace, namespace, &targets);
            let plan = GroupPlan {
                name: namespace.to_owned(),
                create: true,
                install_mode: objects::install_mode(namespace, &targets),
                target_namespaces: targets,
            };
            Ok((plan, Some(group)))
        }
        [group] => {
            let name = group.name_any();
            let targets = group
                .status
                .as_ref()
                .and_then(|s| s.namespaces.clone())
                .map(|ns| ns.into_iter().filter(|n| !n.is_empty()).collect())
                .unwrap_or_else(|| objects::group_targets(group));
            if !watch.is_empty() && watch != targets.as_slice() {
                return Err(Error::Usage(format!(
                    "OperatorGroup {name} in {namespace} already targets {}; --watch-namespaces cannot change it (edit the OperatorGroup: it affects every operator in {namespace})",
                    objects::targets_text(&targets)
                )));
            }
            objects::check_install_mode(bundle, namespace, &name, &targets, &supported, true)?;
            let plan = GroupPlan {
                name,
                create: false,
                install_mode: objects::install_mode(namespace, &targets),
                target_namespaces: targets,
            };
            Ok((plan, None))
        }
        many => Err(Error::TooManyOperatorGroups {
            namespace: namespace.to_owned(),
            groups: many.iter().map(ResourceExt::name_any).collect(),
        }),
    }
}

/// The plan as text.
pub fn render(view: &PlanView) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan for {} in namespace {} (catalog {}, channel {}, approval {:?}):",
        view.package, view.namespace, view.catalog, view.channel, view.approval
    );
    let group = &view.operator_group;
    let _ = writeln!(
        out,
        "  OperatorGroup {}: {} {} ({:?})",
        group.name,
        if group.create {
            "will be created, targeting"
        } else {
            "exists, targets"
        },
        objects::targets_text(&group.target_namespaces),
        group.install_mode
    );
    if view.steps.is_empty() {
        let _ = writeln!(out, "  Nothing to install: {} is installed.", view.bundle);
    } else {
        let mut table = crate::table::Table::new(&["#", "BUNDLE", "PACKAGE", "VERSION", "CATALOG", "REASON"]);
        for (i, step) in view.steps.iter().enumerate() {
            let reason = match &step.replaces {
                Some(replaced) => format!("{} (replaces {replaced})", step.reason),
                None => step.reason.clone(),
            };
            table.row(vec![
                (i + 1).to_string().into(),
                step.bundle.clone().into(),
                step.package.clone().into(),
                step.version.clone().into(),
                step.catalog.clone().into(),
                reason.into(),
            ]);
        }
        for line in table.render(false).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    for notice in &view.deprecations {
        let _ = writeln!(out, "  Deprecated: {notice}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reads_as_a_table() {
        let view = PlanView {
            namespace: "team".into(),
            package: "demo-app".into(),
            catalog: "olm/demo".into(),
            channel: "stable".into(),
            approval: Approval::Automatic,
            bundle: "demo-app.v0.2.0".into(),
            operator_group: GroupPlan {
                name: "team".into(),
                create: true,
                target_namespaces: vec!["team".into()],
                install_mode: InstallModeType::OwnNamespace,
            },
            steps: vec![
                PlanStep {
                    bundle: "demo-db.v1.1.0".into(),
                    package: "demo-db".into(),
                    version: "1.1.0".into(),
                    catalog: "olm/demo".into(),
                    replaces: None,
                    reason: "required by demo-app.v0.2.0".into(),
                },
                PlanStep {
                    bundle: "demo-app.v0.2.0".into(),
                    package: "demo-app".into(),
                    version: "0.2.0".into(),
                    catalog: "olm/demo".into(),
                    replaces: None,
                    reason: "subscribed".into(),
                },
            ],
            deprecations: Vec::new(),
        };
        assert_eq!(
            render(&view),
            "\
Plan for demo-app in namespace team (catalog olm/demo, channel stable, approval Automatic):
  OperatorGroup team: will be created, targeting team (OwnNamespace)
  #  BUNDLE           PACKAGE   VERSION  CATALOG   REASON
  1  demo-db.v1.1.0   demo-db   1.1.0    olm/demo  required by demo-app.v0.2.0
  2  demo-app.v0.2.0  demo-app  0.2.0    olm/demo  subscribed
"
        );
    }

    fn manifest() -> PackageManifest {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo-db", "namespace": "team"},
            "status": {"catalogSource": "demo", "catalogSourceNamespace": "olm", "packageName": "demo-db",
                       "defaultChannel": "stable",
                       "channels": [{"name": "stable", "currentCSV": "demo-db.v1.1.0",
                                     "entries": [{"name": "demo-db.v1.1.0", "version": "1.1.0"},
                                                 {"name": "demo-db.v1.0.0", "version": "1.0.0"}]}]}
        }))
        .expect("a PackageManifest")
    }

    #[test]
    fn channels_versions_and_bundles_are_checked_against_the_package_manifest() {
        let manifest = manifest();
        assert_eq!(channel_of(&manifest, None).unwrap(), "stable");
        let error = channel_of(&manifest, Some("beta")).unwrap_err().to_string();
        assert!(
            error.contains("has no channel \"beta\"; it has: stable"),
            "{error}"
        );
        assert_eq!(
            bundle_of_version(&manifest, "stable", "v1.0.0").unwrap(),
            "demo-db.v1.0.0"
        );
        let error = bundle_of_version(&manifest, "stable", "2.0.0")
            .unwrap_err()
            .to_string();
        assert!(error.contains("it has: 1.1.0, 1.0.0"), "{error}");
        assert_eq!(
            known_bundle(&manifest, "demo-db.v1.1.0").unwrap(),
            "demo-db.v1.1.0"
        );
        assert!(known_bundle(&manifest, "demo-db.v9").is_err());
    }

    #[test]
    fn a_plan_request_carries_the_subscription_and_its_answer_becomes_the_plan() {
        let subscription = objects::subscription(&SubscriptionRequest {
            namespace: "team".into(),
            package: "demo-app".into(),
            catalog: CatalogId::new("demo", "olm"),
            channel: Some("stable".into()),
            starting_csv: None,
            approval: Approval::Manual,
        });
        let request = plan_request(&subscription);
        assert_eq!(request.metadata.name.as_deref(), Some("demo-app"));
        assert_eq!(request.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(request.spec.subscription_name.as_deref(), Some("demo-app"));
        assert_eq!(request.spec.subscription, subscription.spec);
        assert!(request.status.is_none());

        let answer: PackagePlanStatus = serde_json::from_value(serde_json::json!({
            "result": "Install", "bundle": "demo-app.v0.2.0", "approval": "Manual",
            "installModes": ["OwnNamespace"],
            "steps": [{"bundle": "demo-db.v1.1.0", "package": "demo-db", "version": "1.1.0",
                       "catalogSource": "demo", "catalogSourceNamespace": "olm",
                       "reason": "required by demo-app.v0.2.0"}],
        }))
        .unwrap();
        let plan = planned("demo-app", "team", answer).unwrap();
        assert_eq!(plan.bundle, "demo-app.v0.2.0");
        assert_eq!(plan.install_modes, Some(vec![InstallModeType::OwnNamespace]));
        assert_eq!(plan.steps[0].catalog, "olm/demo");
        assert_eq!(plan.steps[0].reason, "required by demo-app.v0.2.0");

        let unsatisfiable = PackagePlanStatus {
            result: PlanResult::Unsatisfiable,
            message: "demo-missing is in no catalog".into(),
            ..PackagePlanStatus::default()
        };
        let error = planned("demo-broken", "team", unsatisfiable)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "cannot install demo-broken in team: demo-missing is in no catalog"
        );
    }
}
