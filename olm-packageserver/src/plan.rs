//! `packagemanifests/<package>/plan`: a dry run of a Subscription (pure).
//!
//! A [`PackagePlan`] names a Subscription as it would be created. It is
//! resolved with the namespace's other Subscriptions and installed CSVs,
//! against the catalogs this catalog-operator holds, by the Subscription
//! controller's own resolution ([`resolve::decide`]), and the decision for its group is the
//! answer. Nothing is written: no Subscription, no InstallPlan.

use std::sync::Arc;

use kube::{ResourceExt, api::ObjectMeta};
use olm_api::{
    packages::{self, PackagePlan, PackagePlanStatus, PlanResult, PlanStep},
    v1alpha1::{ClusterServiceVersion, InstallModeType, Subscription},
};
use olm_catalog::Property;
use olm_resolver::{CatalogIndex, model::CatalogId};
use serde_json::Value;

use olm_catalog_store::catalogs::CatalogState;
use olm_resolution::{self as resolve, Decision, catalog_of};

/// What one namespace holds, with the catalogs of the store.
type NamespaceView<'a> = olm_resolution::NamespaceView<'a, CatalogState>;

/// Why a plan request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The body is not a PackagePlan.
    #[error("the body is not a {kind}: {0}", kind = packages::PLAN_KIND)]
    BadBody(String),
    /// The body's package is not the one of the path.
    #[error("the {kind} for package {path} names package {body} in spec.name: send it to packagemanifests/{body}/plan", kind = packages::PLAN_KIND)]
    PackageMismatch {
        /// The package of the path.
        path: String,
        /// The package of the body.
        body: String,
    },
    /// The Subscription names no catalog.
    #[error("the {kind} for package {package} names no catalog: set spec.source and spec.sourceNamespace", kind = packages::PLAN_KIND)]
    NoCatalog {
        /// The package.
        package: String,
    },
    /// Another Subscription of the namespace has the package.
    #[error("package {package} is already subscribed in namespace {namespace} by Subscription {other}")]
    AlreadySubscribed {
        /// The package.
        package: String,
        /// The namespace.
        namespace: String,
        /// The Subscription that has it.
        other: String,
    },
    /// Resolution gave no decision for the Subscription.
    #[error("the resolution of namespace {namespace} left out Subscription {name}")]
    LeftOut {
        /// The namespace.
        namespace: String,
        /// The Subscription.
        name: String,
    },
}

impl PlanError {
    /// The HTTP code and the `Status` reason of the refusal.
    pub fn code(&self) -> (u16, &'static str) {
        match self {
            PlanError::BadBody(_) | PlanError::PackageMismatch { .. } => (400, "BadRequest"),
            PlanError::NoCatalog { .. } => (422, "Invalid"),
            PlanError::AlreadySubscribed { .. } => (409, "AlreadyExists"),
            PlanError::LeftOut { .. } => (500, "InternalError"),
        }
    }
}

/// What the namespace holds, as the Subscription controller reads it.
pub struct Inputs {
    /// Its Subscriptions, deleted ones included (they are left out here).
    pub subscriptions: Vec<Arc<Subscription>>,
    /// Its CSVs (copies are left out here).
    pub csvs: Vec<Arc<ClusterServiceVersion>>,
}

/// The Subscription `request` stands for, in `namespace`, for the package of the path.
pub fn subscription(
    namespace: &str,
    package: &str,
    request: &PackagePlan,
) -> Result<Subscription, PlanError> {
    let mut spec = request.spec.subscription.clone();
    if spec.package.is_empty() {
        spec.package = package.to_owned();
    }
    if spec.package != package {
        return Err(PlanError::PackageMismatch {
            path: package.to_owned(),
            body: spec.package,
        });
    }
    if spec.catalog_source.is_empty() || spec.catalog_source_namespace.is_empty() {
        return Err(PlanError::NoCatalog {
            package: package.to_owned(),
        });
    }
    let name = request
        .spec
        .subscription_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| package.to_owned());
    Ok(Subscription {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    })
}

/// The namespace's Subscriptions with `subscription` added, in place of the one of
/// its name, sorted by name; refused when another one has its package.
pub fn with_subscription(
    namespace: &str,
    existing: &[Arc<Subscription>],
    subscription: Subscription,
) -> Result<Vec<Arc<Subscription>>, PlanError> {
    let name = subscription.name_any();
    let mut out: Vec<Arc<Subscription>> = Vec::new();
    for sub in existing {
        if sub.name_any() == name || sub.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if sub.spec.package == subscription.spec.package {
            return Err(PlanError::AlreadySubscribed {
                package: subscription.spec.package.clone(),
                namespace: namespace.to_owned(),
                other: sub.name_any(),
            });
        }
        out.push(sub.clone());
    }
    out.push(Arc::new(subscription));
    out.sort_by_key(|s| s.name_any());
    Ok(out)
}

/// The catalogs the Subscriptions name, to be seen beside the namespace's own.
pub fn named_catalogs(subscriptions: &[Arc<Subscription>]) -> Vec<CatalogId> {
    subscriptions.iter().map(|s| catalog_of(s)).collect()
}

/// Resolves the namespace with `subscriptions` (from [`with_subscription`]) and
/// answers for `name`.
pub fn decide(
    index: &CatalogIndex,
    namespace: &str,
    name: &str,
    subscriptions: &[Arc<Subscription>],
    csvs: &[Arc<ClusterServiceVersion>],
    catalogs: &[(CatalogId, CatalogState)],
) -> Result<PackagePlanStatus, PlanError> {
    let csvs: Vec<Arc<ClusterServiceVersion>> =
        csvs.iter().filter(|c| !resolve::is_copied(c)).cloned().collect();
    let view = NamespaceView {
        namespace,
        subscriptions,
        csvs: &csvs,
        catalogs,
    };
    let group = resolve::decide(index, &view)
        .into_iter()
        .find(|group| group.subscriptions.iter().any(|s| s == name))
        .ok_or_else(|| PlanError::LeftOut {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })?;
    let bundle = group
        .targets
        .get(name)
        .map(|t| t.bundle.clone())
        .unwrap_or_default();
    let (result, message, steps) = match &group.decision {
        Decision::Unsatisfiable(explanation) => (PlanResult::Unsatisfiable, explanation.clone(), Vec::new()),
        Decision::UpToDate => (PlanResult::UpToDate, String::new(), Vec::new()),
        Decision::Install(steps) => (PlanResult::Install, String::new(), steps.clone()),
    };
    let package = subscriptions
        .iter()
        .find(|s| s.name_any() == name)
        .map(|s| s.spec.package.clone())
        .unwrap_or_default();
    let install_modes = (!bundle.is_empty())
        .then(|| install_modes(catalogs, &package, &bundle))
        .flatten();
    Ok(PackagePlanStatus {
        result,
        message,
        bundle,
        install_modes,
        approval: group.approval,
        steps: steps
            .into_iter()
            .map(|s| PlanStep {
                bundle: s.bundle,
                package: s.package,
                version: s.version,
                catalog_source: s.catalog.name,
                catalog_source_namespace: s.catalog.namespace,
                replaces: s.replaces,
                reason: s.reason,
            })
            .collect(),
        deprecations: group.deprecations.iter().map(ToString::to_string).collect(),
    })
}

/// The install modes `bundle` of `package` supports: from its CSV metadata where
/// the catalog keeps it, else from the description of a channel head.
pub fn install_modes(
    catalogs: &[(CatalogId, CatalogState)],
    package: &str,
    bundle: &str,
) -> Option<Vec<InstallModeType>> {
    catalogs.iter().find_map(|(_, state)| {
        let content = state.content.as_ref()?;
        let found = content.catalog.bundle(package, bundle)?;
        let from_metadata = found.properties.iter().find_map(|p| match p {
            Property::CsvMetadata(raw) => modes_of(raw.to_value().get("installModes")?),
            _ => None,
        });
        from_metadata.or_else(|| {
            let head = content.heads.get(&(package.to_owned(), bundle.to_owned()))?;
            let modes = &head.description.install_modes;
            (!modes.is_empty()).then(|| modes.iter().filter(|m| m.supported).map(|m| m.type_).collect())
        })
    })
}

fn modes_of(value: &Value) -> Option<Vec<InstallModeType>> {
    let modes = value.as_array()?;
    Some(
        modes
            .iter()
            .filter(|m| m.get("supported").and_then(Value::as_bool) == Some(true))
            .filter_map(|m| serde_json::from_value(m.get("type")?.clone()).ok())
            .collect(),
    )
}

/// The answer: the request with `status` set.
pub fn answer(
    namespace: &str,
    package: &str,
    request: PackagePlan,
    status: PackagePlanStatus,
) -> PackagePlan {
    PackagePlan {
        api_version: packages::API_VERSION.to_owned(),
        kind: packages::PLAN_KIND.to_owned(),
        metadata: ObjectMeta {
            name: Some(package.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: request.spec,
        status: Some(status),
    }
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::SubscriptionSpec;

    use super::*;
    use olm_catalog_store::{
        bundles::BundleSource,
        catalogs::{CatalogContent, CatalogStore},
    };

    const CATALOG: &str = r#"
{"schema":"olm.package","name":"db","defaultChannel":"stable"}
{"schema":"olm.channel","package":"db","name":"stable","entries":[{"name":"db.v1.0.0"}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.0.0","image":"db:1.0.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.0.0"}},{"type":"olm.csv.metadata","value":{"installModes":[{"type":"OwnNamespace","supported":true},{"type":"AllNamespaces","supported":false}]}}]}
{"schema":"olm.package","name":"app","defaultChannel":"stable"}
{"schema":"olm.channel","package":"app","name":"stable","entries":[{"name":"app.v0.1.0"}]}
{"schema":"olm.bundle","package":"app","name":"app.v0.1.0","image":"app:0.1.0","properties":[{"type":"olm.package","value":{"packageName":"app","version":"0.1.0"}},{"type":"olm.package.required","value":{"packageName":"db","versionRange":">=1.0.0"}}]}
{"schema":"olm.package","name":"broken","defaultChannel":"stable"}
{"schema":"olm.channel","package":"broken","name":"stable","entries":[{"name":"broken.v0.1.0"}]}
{"schema":"olm.bundle","package":"broken","name":"broken.v0.1.0","image":"broken:0.1.0","properties":[{"type":"olm.package","value":{"packageName":"broken","version":"0.1.0"}},{"type":"olm.package.required","value":{"packageName":"missing","versionRange":">=1.0.0"}}]}
"#;

    /// The catalog `olm/demo`.
    fn demo() -> CatalogStore {
        let store = CatalogStore::new();
        let id = CatalogId::new("demo", "olm");
        let catalog = olm_catalog::fbc::parse_str(std::path::Path::new("c.json"), CATALOG).unwrap();
        let content = CatalogContent::new(id.clone(), catalog, Vec::new(), BundleSource::Memory);
        store.set_loaded(&id, 0, content, &olm_runtime::conditions::now());
        store
    }

    fn request(package: &str) -> PackagePlan {
        let spec = SubscriptionSpec {
            catalog_source: "demo".into(),
            catalog_source_namespace: "olm".into(),
            package: package.into(),
            ..SubscriptionSpec::default()
        };
        PackagePlan::request("team", package, spec)
    }

    /// The plan for `request` at path `package` in namespace `team`.
    fn plan_for(
        store: &CatalogStore,
        existing: &[Arc<Subscription>],
        package: &str,
        request: &PackagePlan,
    ) -> Result<PackagePlanStatus, PlanError> {
        let sub = subscription("team", package, request)?;
        let name = sub.name_any();
        let subs = with_subscription("team", existing, sub)?;
        let catalogs = store.visible(&["team", "olm"], &named_catalogs(&subs));
        let index = store.index(&catalogs);
        decide(&index, "team", &name, &subs, &[], &catalogs)
    }

    #[test]
    fn a_plan_installs_dependencies_first_with_the_bundles_install_modes() {
        let store = demo();
        let app = plan_for(&store, &[], "app", &request("app")).unwrap();
        assert_eq!(app.result, PlanResult::Install);
        assert_eq!(app.bundle, "app.v0.1.0");
        let steps: Vec<(&str, &str)> = app
            .steps
            .iter()
            .map(|s| (s.bundle.as_str(), s.catalog_source.as_str()))
            .collect();
        assert_eq!(steps, [("db.v1.0.0", "demo"), ("app.v0.1.0", "demo")]);
        assert_eq!(app.steps[0].version, "1.0.0");
        assert_eq!(
            app.install_modes, None,
            "app's catalog entry names no install modes"
        );
        let db = plan_for(&store, &[], "db", &request("db")).unwrap();
        assert_eq!(db.install_modes, Some(vec![InstallModeType::OwnNamespace]));
    }

    #[test]
    fn an_unsatisfiable_plan_says_why() {
        let broken = plan_for(&demo(), &[], "broken", &request("broken")).unwrap();
        assert_eq!(broken.result, PlanResult::Unsatisfiable);
        assert!(broken.steps.is_empty());
        assert!(broken.message.contains("missing"), "{}", broken.message);
    }

    #[test]
    fn bad_requests_are_refused_with_their_codes() {
        let store = demo();
        let mismatch = plan_for(&store, &[], "db", &request("app")).unwrap_err();
        assert_eq!(mismatch.code().0, 400, "{mismatch}");
        let mut no_catalog = request("app");
        no_catalog.spec.subscription.catalog_source.clear();
        let error = plan_for(&store, &[], "app", &no_catalog).unwrap_err();
        assert_eq!(error.code(), (422, "Invalid"), "{error}");
        let other = subscription("team", "app", &request("app")).map(|mut s| {
            s.metadata.name = Some("app-by-hand".into());
            Arc::new(s)
        });
        let error = plan_for(&store, &[other.unwrap()], "app", &request("app")).unwrap_err();
        assert_eq!(error.code().0, 409);
        assert!(error.to_string().contains("Subscription app-by-hand"), "{error}");
    }

    #[test]
    fn a_subscription_of_the_same_name_is_replaced_not_doubled() {
        let existing = Arc::new(subscription("team", "app", &request("app")).unwrap());
        let subs = with_subscription(
            "team",
            &[existing],
            subscription("team", "app", &request("app")).unwrap(),
        )
        .unwrap();
        assert_eq!(subs.len(), 1);
    }
}
