//! The revision controller: keeps what was installed for each version of an
//! operator, so that it can be installed again without the catalog.
//!
//! Each time the installed CSV of a Subscription (`status.installedCSV`)
//! reaches Succeeded, the objects the InstallPlan applied for it (the CSV, its
//! CRDs and the other bundle objects, as the plan's steps hold them) are
//! recorded as an OperatorRevision (`model.olm-rs.dev`) named after the CSV,
//! numbered one past the highest before it, owned by the Subscription. Only
//! the current revision and the newest others are kept, up to the
//! Subscription's limit ([`decide::history_limit`], the current one and the
//! one before by default). What does not fit in an object is said in
//! [`olm_api::model::OperatorRevision`]'s documentation and decided in
//! [`content`].
//!
//! A reconcile of one Subscription *reads* its installed CSV and its
//! revisions from the shared stores; when a revision is to be recorded
//! ([`decide::plan_to_read`]), it also reads that one InstallPlan from the API
//! server, since the store keeps no manifests of a finished plan
//! ([`crate::controllers::trim::install_plan`]); it *decides* with
//! [`decide::decide`] (pure); and the runtime's applier performs it.
//!
//! A Subscription that asks for a rollback (annotation
//! `olm-rs.dev/rollback-to`, [`rollback`]) is rolled back instead, and
//! nothing is recorded for it while it is held: the reconcile reads its
//! revisions, the CSVs and InstallPlans of its namespace from the stores,
//! and, while the revision's CSV is not Succeeded, the revision whole and
//! the live CRDs it holds from the API server (the store keeps no manifests
//! and no store holds CRDs); [`rollback::decide`] decides (pure), and the
//! applier performs it, the Subscription's status included.

pub mod announce;
pub mod auto;
pub mod content;
pub mod decide;
pub mod dependents;
pub mod rollback;
pub mod safety;
pub mod schemas;
#[cfg(test)]
mod tests;

use std::{sync::Arc, time::Duration};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, ResourceExt,
    runtime::{
        controller::Action,
        reflector::{ObjectRef, Store},
    },
};
use olm_api::{
    labels,
    model::OperatorRevision,
    v1alpha1::{ClusterServiceVersion, InstallPlan, Subscription},
};
use olm_runtime::{ErrorClass, ReconcileError, apply::WriteError};

use self::decide::{Outcome, Read};
use super::Context;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "revision";

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Subscription has no namespace (never from the API server).
    #[error("Subscription {0} has no namespace")]
    NoNamespace(String),
    /// The InstallPlan could not be read.
    #[error("failed to read InstallPlan {namespace}/{name} to record a revision")]
    ReadPlan {
        /// Namespace.
        namespace: String,
        /// The plan.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A revision could not be serialized (never for a valid object).
    #[error("failed to build the revision of Subscription {namespace}/{name}")]
    Build {
        /// Namespace.
        namespace: String,
        /// The Subscription.
        name: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The revision a rollback asks for could not be read.
    #[error("failed to read OperatorRevision {namespace}/{name} to roll back to it")]
    ReadRevision {
        /// Namespace.
        namespace: String,
        /// The revision.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A CRD a rollback would install again could not be read.
    #[error("failed to read CustomResourceDefinition {name} to check a rollback")]
    ReadCrd {
        /// The CRD.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The custom resources of a CRD a rollback changes could not be listed.
    #[error("failed to list the objects of CRD {crd} version {version} to check a rollback")]
    ListObjects {
        /// The CRD.
        crd: String,
        /// The version.
        version: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Writing or removing revisions failed.
    #[error("failed to write the revisions of Subscription {namespace}/{name}")]
    Write {
        /// Namespace.
        namespace: String,
        /// The Subscription.
        name: String,
        /// The cause.
        #[source]
        source: WriteError,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace(_) | Error::Build { .. } => "invalid",
            Error::ReadPlan { .. }
            | Error::ReadRevision { .. }
            | Error::ReadCrd { .. }
            | Error::ListObjects { .. }
            | Error::Write { .. } => "api",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace(_) | Error::Build { .. } => ErrorClass::Terminal,
            Error::ReadPlan { source, .. }
            | Error::ReadRevision { source, .. }
            | Error::ReadCrd { source, .. }
            | Error::ListObjects { source, .. } => olm_runtime::classify(source),
            Error::Write { source, .. } => source.class(),
        }
    }
}

/// Reconciles the revisions of one Subscription.
pub async fn reconcile(subscription: Arc<Subscription>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.reconciles.start(CONTROLLER);
    if !ctx.writer.leadership().is_leader() {
        return Ok(Action::await_change());
    }
    let name = subscription.name_any();
    let namespace = subscription
        .namespace()
        .ok_or_else(|| Error::NoNamespace(name.clone()))?;
    if let Some(request) = rollback::requested(&subscription) {
        if auto::lifts(&subscription, channel_head(&ctx, &subscription).as_deref()) {
            return lift(&ctx, &subscription, &namespace).await;
        }
        return roll_back(&ctx, &subscription, &namespace, &request).await;
    }

    // Read: the installed CSV, the revisions, and the plan when one is to be recorded.
    let stores = &ctx.stores;
    let installed = subscription.status.as_ref().and_then(|s| s.installed_csv.clone());
    let csv = installed.and_then(|csv| stores.csvs.get(&ObjectRef::new(&csv).within(&namespace)));
    let revisions = of_subscription(&stores.revisions, &namespace, &name);
    let revisions: Vec<&OperatorRevision> = revisions.iter().map(AsRef::as_ref).collect();
    let plans: Vec<Arc<InstallPlan>> = in_namespace(&stores.install_plans, &namespace);
    let plans: Vec<&InstallPlan> = plans.iter().map(AsRef::as_ref).collect();
    let plan = match decide::plan_to_read(csv.as_deref(), &revisions, &plans) {
        Some(plan) => read_plan(&ctx, &namespace, &plan).await?,
        None => None,
    };

    // Decide, then apply.
    let verdict = automatic(&ctx, &subscription, &namespace, &revisions);
    let mut decision = decide::decide(&Read {
        subscription: &subscription,
        csv: csv.as_deref(),
        revisions,
        plan: plan.as_ref(),
    })
    .map_err(|source| Error::Build {
        namespace: namespace.clone(),
        name: name.clone(),
        source,
    })?;
    if let auto::Verdict::RollBack(failure) = &verdict {
        let head = channel_head(&ctx, &subscription);
        decision
            .effects
            .objects
            .push(auto::request(&subscription, failure, head.as_deref()));
    }
    perform(&ctx, &namespace, &name, &decision.effects).await?;
    log(&namespace, &name, &decision);
    Ok(match verdict {
        auto::Verdict::RollBack(failure) => {
            tracing::warn!(%namespace, subscription = %name, failed = %failure.failed,
                target = %failure.target, cause = %failure.cause, "upgrade failed: rolling back");
            Action::requeue(ROLLBACK_RECHECK)
        }
        // Just after the deadline, unless a change of the CSV comes first.
        auto::Verdict::Wait(left) => {
            Action::requeue(ctx.options.resync_interval.min(left + Duration::from_secs(1)))
        }
        auto::Verdict::Nothing => Action::requeue(ctx.options.resync_interval),
    })
}

/// Whether the upgrade of `subscription` failed, and should be rolled back
/// ([`auto::verdict`], read from the stores).
fn automatic(
    ctx: &Context,
    subscription: &Subscription,
    namespace: &str,
    revisions: &[&OperatorRevision],
) -> auto::Verdict {
    let config = ctx
        .stores
        .olm_configs
        .get(&ObjectRef::new(olm_api::v1::OLM_CONFIG_NAME));
    let policy = auto::policy(subscription, config.as_deref());
    if let Some(unreadable) = policy.unreadable.as_deref().filter(|_| policy.enabled) {
        tracing::warn!(%namespace, subscription = %subscription.name_any(), %unreadable,
            "automatic rollback: the deadline cannot be read, the default applies");
    }
    let csvs = in_namespace(&ctx.stores.csvs, namespace);
    let csvs: Vec<&ClusterServiceVersion> = csvs
        .iter()
        .map(AsRef::as_ref)
        .filter(|c| !olm_resolution::is_copied(c))
        .collect();
    auto::verdict(&auto::Read {
        subscription,
        policy: &policy,
        csvs: &csvs,
        revisions,
        now: olm_runtime::conditions::now().0,
    })
}

/// The head of `subscription`'s channel in its catalog, once the catalog is read.
fn channel_head(ctx: &Context, subscription: &Subscription) -> Option<String> {
    let state = ctx.catalogs.get(&olm_resolution::catalog_of(subscription))?;
    let catalog = &state.content.as_ref()?.catalog;
    let package = &subscription.spec.package;
    let channel = match &subscription.spec.channel {
        Some(channel) if !channel.is_empty() => channel.clone(),
        _ => catalog
            .packages
            .iter()
            .find(|p| &p.name == package)?
            .default_channel
            .clone()?,
    };
    let channel = catalog
        .channels
        .iter()
        .find(|c| &c.package == package && c.name == channel)?;
    crate::channel_heads::channel_head(channel).map(ToOwned::to_owned)
}

/// Has the one applier perform `effects` for Subscription `name` of
/// `namespace` (the reconciled object).
async fn perform<S: serde::Serialize>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    effects: &olm_runtime::effects::Effects<S>,
) -> Result<(), Error> {
    let api: Api<Subscription> = Api::namespaced(ctx.client.clone(), namespace);
    ctx.writer
        .perform(&ctx.client, &api, effects, &())
        .await
        .map(|_| ())
        .map_err(|source| Error::Write {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })
}

/// Lifts the hold an automatic rollback put on `subscription`: the channel
/// head has changed, so the Subscription is resolved again.
async fn lift(ctx: &Context, subscription: &Subscription, namespace: &str) -> Result<Action, Error> {
    let name = subscription.name_any();
    let mut effects = olm_runtime::effects::Effects::<()>::none();
    effects.objects.push(auto::lift(subscription));
    perform(ctx, namespace, &name, &effects).await?;
    tracing::info!(%namespace, subscription = %name, failed = ?auto::failed_upgrade(subscription),
        "the channel head changed: the hold of the automatic rollback is lifted");
    Ok(Action::requeue(ROLLBACK_RECHECK))
}

/// How soon a rollback under way is looked at again, should no change of
/// its CSVs wake it sooner.
const ROLLBACK_RECHECK: Duration = Duration::from_secs(5);

/// Reconciles a Subscription that asks for a rollback.
async fn roll_back(
    ctx: &Context,
    subscription: &Subscription,
    namespace: &str,
    request: &rollback::Request,
) -> Result<Action, Error> {
    let name = subscription.name_any();
    let stores = &ctx.stores;
    let revisions = of_subscription(&stores.revisions, namespace, &name);
    let revisions: Vec<&OperatorRevision> = revisions.iter().map(AsRef::as_ref).collect();
    let csvs = in_namespace(&stores.csvs, namespace);
    let csvs: Vec<&ClusterServiceVersion> = csvs
        .iter()
        .map(AsRef::as_ref)
        .filter(|c| !olm_resolution::is_copied(c))
        .collect();
    let plans = in_namespace(&stores.install_plans, namespace);
    let plans: Vec<&InstallPlan> = plans.iter().map(AsRef::as_ref).collect();
    let now = olm_runtime::conditions::now();
    let mut read = rollback::Read {
        subscription,
        request,
        revisions: &revisions,
        csvs: &csvs,
        plans: &plans,
        content: None,
        undecodable: None,
        crds: &[],
        objects: &[],
        now: &now,
    };
    let (whole, undecodable) = match rollback::content_needed(&read) {
        Some(revision) => match read_revision(ctx, namespace, &revision).await? {
            Some(Ok(whole)) => (Some(whole), None),
            Some(Err(cause)) => (None, Some(cause)),
            None => (None, None),
        },
        None => (None, None),
    };
    let crds = match &whole {
        Some(whole) => read_crds(ctx, whole).await?,
        None => Vec::new(),
    };
    read.content = whole.as_ref();
    let objects = match &whole {
        Some(whole) => list_objects(ctx, &schemas::to_check(whole, &crds)).await?,
        None => Vec::new(),
    };
    read.undecodable = undecodable.as_deref();
    read.crds = &crds;
    read.objects = &objects;
    let decision = rollback::decide(&read);
    perform(ctx, namespace, &name, &decision.effects).await?;
    announce(ctx, subscription, &decision);
    if !decision.effects.is_empty() {
        tracing::info!(%namespace, subscription = %name, %request, stage = ?decision.stage, "rollback");
    }
    Ok(match decision.stage {
        rollback::Stage::Refused(refusal) if refusal.is_temporary() => Action::requeue(ROLLBACK_RECHECK),
        rollback::Stage::Refused(_) | rollback::Stage::Done => Action::requeue(ctx.options.resync_interval),
        _ => Action::requeue(ROLLBACK_RECHECK),
    })
}

/// Publishes the Event of a rollback's start, refusal or end, and counts a
/// start by its cause ([`announce::announce`]).
fn announce(ctx: &Context, subscription: &Subscription, decision: &rollback::Decision) {
    let Some(write) = &decision.effects.status else {
        return;
    };
    let message = write
        .status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == olm_api::v1alpha1::SubscriptionConditionType::RolledBack)
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    let Some(announced) = announce::announce(subscription, &decision.stage, &message) else {
        return;
    };
    if announced.moment == announce::Moment::Started {
        ctx.metrics.count_rollback(announced.cause.as_str());
    }
    ctx.publish(subscription, announced.event());
}

/// The OperatorRevision `name`, whole, or why it cannot be decoded (the
/// rollback is then refused as corrupt, not failed); `None` when it is
/// gone. Read untyped, so that an object this version cannot decode (one
/// written under another schema) is told apart from a failed request.
async fn read_revision(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<Result<OperatorRevision, String>>, Error> {
    let resource = kube::api::ApiResource::erase::<OperatorRevision>(&());
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &resource);
    let found = api.get_opt(name).await.map_err(|source| Error::ReadRevision {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    })?;
    Ok(found.map(|object| rollback::decode(&object)))
}

/// The live CRDs that `revision` holds, by name, as JSON (those the
/// cluster does not hold are left out).
async fn read_crds(
    ctx: &Context,
    revision: &OperatorRevision,
) -> Result<Vec<(String, serde_json::Value)>, Error> {
    let api: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let mut crds = Vec::new();
    for object in revision
        .spec
        .objects
        .iter()
        .filter(|o| o.key.kind == "CustomResourceDefinition")
    {
        let name = &object.key.name;
        let live = api.get_opt(name).await.map_err(|source| Error::ReadCrd {
            name: name.clone(),
            source,
        })?;
        if let Some(live) = live.and_then(|crd| serde_json::to_value(crd).ok()) {
            crds.push((name.clone(), live));
        }
    }
    Ok(crds)
}

/// The custom resources of each CRD version of `checks`, in all namespaces
/// (a version the API server no longer serves has none to check).
async fn list_objects(ctx: &Context, checks: &[schemas::ToCheck]) -> Result<Vec<schemas::Listed>, Error> {
    let mut listed = Vec::new();
    for check in checks {
        let gvk = kube::api::GroupVersionKind::gvk(&check.group, &check.version, &check.kind);
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, &check.plural);
        let api: Api<kube::api::DynamicObject> = Api::all_with(ctx.client.clone(), &resource);
        let objects = match api.list(&kube::api::ListParams::default()).await {
            Ok(list) => list.items,
            Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
            Err(source) => {
                return Err(Error::ListObjects {
                    crd: check.crd.clone(),
                    version: check.version.clone(),
                    source,
                });
            }
        };
        listed.push(schemas::Listed {
            crd: check.crd.clone(),
            version: check.version.clone(),
            objects: objects
                .iter()
                .filter_map(|o| serde_json::to_value(o).ok())
                .collect(),
        });
    }
    Ok(listed)
}

/// The InstallPlan `name`, whole; `None` when it is gone.
async fn read_plan(ctx: &Context, namespace: &str, name: &str) -> Result<Option<InstallPlan>, Error> {
    let plans: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), namespace);
    plans.get_opt(name).await.map_err(|source| Error::ReadPlan {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    })
}

fn log(namespace: &str, subscription: &str, decision: &decide::Decision) {
    match &decision.outcome {
        Outcome::Recorded {
            name,
            revision,
            omitted,
        } => {
            tracing::info!(%namespace, %subscription, revision = %name, number = revision, ?omitted, "revision recorded")
        }
        Outcome::NoPlan { csv } => tracing::warn!(
            %namespace, %subscription, %csv,
            "no revision recorded: the InstallPlan that applied the CSV is gone or holds no manifest of it"
        ),
        Outcome::Nothing => {}
    }
    for removal in &decision.effects.removals {
        tracing::info!(%namespace, %subscription, revision = %removal.name, "revision beyond the history limit removed");
    }
}

/// What to do after a failed reconcile.
pub fn error_policy(subscription: Arc<Subscription>, error: &Error, ctx: Arc<Context>) -> Action {
    olm_runtime::error_policy(CONTROLLER, subscription.as_ref(), error, &ctx.reconciles)
}

/// The revisions recorded for Subscription `name` of `namespace`.
pub fn of_subscription(
    store: &Store<OperatorRevision>,
    namespace: &str,
    name: &str,
) -> Vec<Arc<OperatorRevision>> {
    store
        .state()
        .into_iter()
        .filter(|r| r.namespace().as_deref() == Some(namespace))
        .filter(|r| r.labels().get(labels::revision::SUBSCRIPTION).map(String::as_str) == Some(name))
        .collect()
}

fn in_namespace<K: kube::Resource + Clone>(store: &Store<K>, namespace: &str) -> Vec<Arc<K>>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    store
        .state()
        .into_iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .collect()
}

/// The Subscriptions of `csv`'s namespace that have it installed, or are
/// upgrading to it.
pub fn installing(store: &Store<Subscription>, csv: &ClusterServiceVersion) -> Vec<ObjectRef<Subscription>> {
    let name = csv.name_any();
    store
        .state()
        .iter()
        .filter(|s| s.namespace() == csv.namespace())
        .filter(|s| {
            s.status.as_ref().is_some_and(|st| {
                st.installed_csv.as_deref() == Some(name.as_str())
                    || st.current_csv.as_deref() == Some(name.as_str())
            })
        })
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// The Subscriptions held after an automatic rollback: a catalog change may
/// end their hold.
pub fn held_after_failure(store: &Store<Subscription>) -> Vec<ObjectRef<Subscription>> {
    store
        .state()
        .iter()
        .filter(|s| auto::failed_upgrade(s).is_some())
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// The Subscription a revision was recorded for.
pub fn owner(revision: &OperatorRevision) -> Option<ObjectRef<Subscription>> {
    let name = revision.labels().get(labels::revision::SUBSCRIPTION)?;
    Some(ObjectRef::new(name).within(&revision.namespace()?))
}
