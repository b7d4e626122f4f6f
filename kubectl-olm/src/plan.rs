//! Resolution for `install` and `plan`: the Subscription the command would
//! write, resolved together with the namespace's Subscriptions and CSVs by the
//! catalog-operator's own resolution, and the OperatorGroup it needs.

use std::{fmt::Write, sync::Arc};

use catalog_operator::{
    catalogs::Health,
    controllers::subscription::resolve::{self, Decision, GroupDecision, NamespaceView},
};
use kube::{Api, ResourceExt, api::ListParams};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{Approval, ClusterServiceVersion, InstallModeType, Subscription},
};
use olm_catalog::Catalog;
use olm_resolver::model::CatalogId;
use serde::Serialize;
use serde_json::Value;

use crate::{
    Env, TargetArgs,
    catalogs::{self, Catalogs, Scope},
    error::Error,
    objects::{self, BundleFacts, SubscriptionRequest},
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

/// The catalog to install `package` from: `--catalog`, else the visible healthy
/// catalog that has it with the highest priority, own namespace first.
pub fn choose_catalog(
    catalogs: &Catalogs,
    package: &str,
    wanted: Option<&str>,
    namespace: &str,
    global: &str,
) -> Result<CatalogId, Error> {
    if let Some(wanted) = wanted {
        let id = named_catalog(catalogs, wanted, namespace, global)?;
        let Some(content) = catalogs.content(&id) else {
            let message = match catalogs.view(&id).map(|v| &v.health) {
                Some(Health::Unhealthy(message)) => message.clone(),
                _ => "it was not read".to_owned(),
            };
            return Err(Error::UnhealthyCatalog { catalog: id, message });
        };
        if content.catalog.package(package).is_none() {
            return Err(unknown_package(catalogs, package, namespace, Some(&id)));
        }
        return Ok(id);
    }
    let mut found: Vec<(i32, bool, CatalogId)> = catalogs
        .visible(namespace, global)
        .into_iter()
        .filter(|(_, state)| {
            state
                .content
                .as_ref()
                .is_some_and(|c| c.catalog.package(package).is_some())
        })
        .map(|(id, state)| (state.priority, id.namespace == namespace, id))
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.name.cmp(&b.2.name)));
    found
        .into_iter()
        .next()
        .map(|(_, _, id)| id)
        .ok_or_else(|| unknown_package(catalogs, package, namespace, None))
}

fn unknown_package(catalogs: &Catalogs, package: &str, namespace: &str, only: Option<&CatalogId>) -> Error {
    let mut names: Vec<String> = Vec::new();
    for view in &catalogs.views {
        if only.is_some_and(|id| id != &view.id) {
            continue;
        }
        if let Some(content) = catalogs.content(&view.id) {
            names.extend(content.catalog.packages.iter().map(|p| p.name.clone()));
        }
    }
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
pub fn channel_of(catalog: &Catalog, package: &str, wanted: Option<&str>) -> Result<String, Error> {
    let channels: Vec<String> = catalog.channels_of(package).map(|c| c.name.clone()).collect();
    match wanted {
        Some(wanted) if channels.iter().any(|c| c == wanted) => Ok(wanted.to_owned()),
        Some(wanted) => Err(Error::NoSuchEntry {
            package: package.to_owned(),
            what: "channel",
            wanted: wanted.to_owned(),
            available: channels,
        }),
        None => catalog
            .package(package)
            .and_then(|p| p.default_channel.clone())
            .or_else(|| channels.first().cloned())
            .ok_or_else(|| Error::NoSuchEntry {
                package: package.to_owned(),
                what: "channel",
                wanted: "(default)".to_owned(),
                available: Vec::new(),
            }),
    }
}

/// The bundle of `version` in `channel` of `package`.
pub fn bundle_of_version(
    catalog: &Catalog,
    package: &str,
    channel: &str,
    version: &str,
) -> Result<String, Error> {
    let wanted = version.trim_start_matches('v');
    let entries: Vec<&str> = catalog
        .channels_of(package)
        .filter(|c| c.name == channel)
        .flat_map(|c| c.entries.iter().map(|e| e.name.as_str()))
        .collect();
    let mut available = Vec::new();
    for name in entries {
        let Some(bundle) = catalog.bundle(package, name) else {
            continue;
        };
        let Some(v) = bundle.version() else { continue };
        if v.as_str() == wanted {
            return Ok(bundle.name.clone());
        }
        available.push(v.as_str().to_owned());
    }
    Err(Error::NoSuchEntry {
        package: package.to_owned(),
        what: "version (in that channel)",
        wanted: version.to_owned(),
        available,
    })
}

/// Resolves `namespace`'s Subscriptions with `subscription` added (or put in place
/// of the one of the same name) and returns the decision of its group.
pub async fn resolve_with(
    env: &Env<'_>,
    catalogs: &Catalogs,
    subscription: &Subscription,
) -> Result<GroupDecision, Error> {
    let namespace = env.namespace.as_str();
    let subs: Api<Subscription> = Api::namespaced(env.client.clone(), namespace);
    let name = subscription.name_any();
    let existing = subs
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!(
            "list Subscriptions in namespace {namespace}"
        )))?
        .items;
    if let Some(other) = existing
        .iter()
        .find(|s| s.spec.package == subscription.spec.package && s.name_any() != name)
    {
        return Err(Error::Usage(format!(
            "package {} is already subscribed in {namespace} by Subscription {}; use `kubectl olm upgrade` or `kubectl olm config` on it, or uninstall it first",
            subscription.spec.package,
            other.name_any()
        )));
    }
    let mut subscriptions: Vec<Arc<Subscription>> = existing
        .into_iter()
        .filter(|s| s.name_any() != name && s.metadata.deletion_timestamp.is_none())
        .map(Arc::new)
        .collect();
    subscriptions.push(Arc::new(subscription.clone()));
    subscriptions.sort_by_key(|s| s.name_any());
    let csvs = namespace_csvs(env).await?;
    let visible = catalogs.visible(namespace, &env.global_namespace);
    let index = catalogs.store.index(&visible);
    let view = NamespaceView {
        namespace,
        subscriptions: &subscriptions,
        csvs: &csvs,
        catalogs: &visible,
    };
    resolve::decide(&index, &view)
        .into_iter()
        .find(|group| group.subscriptions.contains(&name))
        .ok_or_else(|| {
            Error::Failed(format!(
                "the resolution of namespace {namespace} left out Subscription {name}"
            ))
        })
}

/// The namespace's own CSVs (copied CSVs left out).
pub async fn namespace_csvs(env: &Env<'_>) -> Result<Vec<Arc<ClusterServiceVersion>>, Error> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(env.client.clone(), &env.namespace);
    Ok(api
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!(
            "list ClusterServiceVersions in namespace {}",
            env.namespace
        )))?
        .items
        .into_iter()
        .filter(|c| !resolve::is_copied(c))
        .map(Arc::new)
        .collect())
}

/// Resolves an install of `target` in the namespace without writing anything.
pub async fn prepare(env: &Env<'_>, target: &TargetArgs) -> Result<Prepared, Error> {
    let namespace = env.namespace.clone();
    let scope = Scope::Namespaces(vec![namespace.clone(), env.global_namespace.clone()]);
    let catalogs = catalogs::load(&env.client, &scope).await?;
    let catalog_id = choose_catalog(
        &catalogs,
        &target.package,
        target.catalog.as_deref(),
        &namespace,
        &env.global_namespace,
    )?;
    let content = catalogs
        .content(&catalog_id)
        .ok_or_else(|| Error::Failed(format!("catalog {catalog_id} has no content")))?;
    let catalog = &content.catalog;
    let channel = channel_of(catalog, &target.package, target.channel.as_deref())?;
    let starting_csv = match (&target.version, &target.starting_csv) {
        (Some(version), _) => Some(bundle_of_version(catalog, &target.package, &channel, version)?),
        (None, Some(csv)) => {
            if catalog.bundle(&target.package, csv).is_none() {
                return Err(Error::NoSuchEntry {
                    package: target.package.clone(),
                    what: "bundle",
                    wanted: csv.clone(),
                    available: catalog
                        .bundles_of(&target.package)
                        .map(|b| b.name.clone())
                        .collect(),
                });
            }
            Some(csv.clone())
        }
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
    let group = resolve_with(env, &catalogs, &subscription).await?;
    let name = subscription.name_any();
    let (steps, bundle) = match &group.decision {
        Decision::Unsatisfiable(explanation) => {
            return Err(Error::Unsatisfiable {
                package: target.package.clone(),
                namespace,
                explanation: explanation.clone(),
            });
        }
        Decision::UpToDate => (Vec::new(), group.targets.get(&name).map(|t| t.bundle.clone())),
        Decision::Install(steps) => (steps.clone(), group.targets.get(&name).map(|t| t.bundle.clone())),
    };
    let bundle = bundle.unwrap_or_default();
    let facts: BundleFacts = catalog
        .bundle(&target.package, &bundle)
        .map(objects::bundle_facts)
        .unwrap_or_default();
    let (operator_group, new_group) =
        operator_group_plan(env, &target.package, &bundle, &facts, &target.watch_namespaces).await?;
    let view = PlanView {
        namespace: namespace.clone(),
        package: target.package.clone(),
        catalog: catalog_id.to_string(),
        channel,
        approval: request.approval,
        bundle,
        operator_group,
        steps: steps
            .iter()
            .map(|s| PlanStep {
                bundle: s.bundle.clone(),
                package: s.package.clone(),
                version: s.version.clone(),
                catalog: s.catalog.to_string(),
                replaces: s.replaces.clone(),
                reason: s.reason.clone(),
            })
            .collect(),
        deprecations: group.deprecations.iter().map(ToString::to_string).collect(),
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
    facts: &BundleFacts,
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
    let supported = facts
        .install_modes
        .clone()
        .unwrap_or_else(|| vec![InstallModeType::OwnNamespace, InstallModeType::AllNamespaces]);
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
}
