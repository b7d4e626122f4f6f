//! The Subscription controller: resolves all Subscriptions of a namespace
//! together, gives each independent group its own InstallPlan, and reports on
//! every Subscription.
//!
//! A reconcile of any Subscription syncs its whole namespace, under a lock per
//! namespace, as a pipeline of named steps:
//! 1. [`read_namespace`]: the stores → [`NamespaceInputs`];
//! 2. [`resolve_namespace`]: resolution of the namespace ([`resolve::decide`], pure) →
//!    one [`GroupDecision`] per independent group;
//! 3. [`plan_groups`]: per group with bundles to install, the plan that
//!    covers them, or a new one named after what it installs
//!    ([`plans::plan_groups`], [`crate::controllers::plan::install_plan_name`]) →
//!    [`plans::GroupPlans`]. A plan whose bundle image must be unpacked first
//!    asks for it ([`unpacking::UnpackRequest`]): for a pull, its Subscriptions
//!    get BundleUnpacking ([`decide::unpacking`], applied); the images are
//!    pulled or their unpack Jobs advanced ([`unpacking::perform`]), and the
//!    groups are planned again with what that gave;
//! 4. [`status::statuses`] (pure): each Subscription's status →
//!    [`status::Statuses`];
//! 5. [`decide::closing`] (pure): the new plans to create with their statuses,
//!    the Subscription statuses that changed (one that refers to a new plan
//!    only if that plan is created), and the oldest plans beyond the limit to
//!    remove, as [`olm_runtime::effects::Effects`];
//! 6. [`apply`]: the runtime's applier performs them, in that order.
//!
//! Before that, [`adopt::adopt`] labels the Subscription as a component of its
//! package's `Operator`.
//!
//! A namespace whose inputs did not change since its last complete sync is
//! skipped. The controller's own state ([`context::State`]: namespace locks,
//! what was synced) lives in [`SubscriptionContext`], beside the shared [`Context`].
//!
//! How far this is from the shape of every reconciler (read, decide in a pure
//! function, apply through the runtime's one applier, `Writer::perform`): the
//! new InstallPlans, the statuses of plans and Subscriptions and the removal of
//! old plans are decided as one `Effects` and performed by the applier. A new
//! plan's name follows from what it installs, so a sync that does not see the
//! plan the last one made (a store lagging) asks for the same plan again, whose
//! create is refused (HTTP 409) and whose Subscriptions' statuses are left as
//! they are. Building a plan never unpacks an image (the unpack is requested,
//! performed between two planning passes, and the pass after it plans with
//! what it gave). The unpack by a Job reads the unpack Jobs and their
//! ConfigMaps (the bundle in their data) from shared stores that watch only
//! those objects (`crate::images::unpack_jobs::JobStores`); their changes wake
//! the sync of the namespaces that may use the catalog, and a sync waiting for
//! a Job looks again on a short timer for the steps that follow from time
//! alone (deadline, grace, retry interval). Still to move: the unpack itself
//! is performed by `crate::images` with its own writes (the unpack Job's
//! ConfigMap, RBAC and Job, applied and created there, a Job named so that a
//! lagging store gets a 409, not a second Job) and one live read, the LIST of
//! a running Job's Pods for its message; while planning, a bundle's manifests
//! are fetched from its registry, and a complete plan's CSVs are looked up
//! live when the CSV store lacks them (it may lag). The unpack policy comes
//! from the OperatorGroup store.

pub mod adopt;
mod context;
pub mod decide;
mod error;
mod inputs;
pub mod plans;
pub mod resolve;
pub mod status;
pub mod unpacking;

use std::{
    collections::HashMap,
    hash::{DefaultHasher, Hash, Hasher},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::jiff::Timestamp;
use kube::{Api, Resource, ResourceExt, runtime::controller::Action};
use olm_api::v1alpha1::{Approval, ClusterServiceVersion, InstallPlan, Subscription};
use olm_resolver::model::CatalogId;
use olm_runtime::effects::Performed;
use tokio::time::Instant;

pub use self::{context::SubscriptionContext, error::Error, inputs::NamespaceInputs};
use self::{
    decide::SyncEffects,
    plans::GroupPlans,
    resolve::{Decision, GroupDecision, NamespaceView, catalog_of},
    status::Statuses,
    unpacking::Unpacked,
};
use super::Context;
use crate::{
    catalogs::Health,
    images::unpack::{self, UnpackPolicy},
};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "subscription";

/// How long a namespace waits for a catalog it names to be read for the first
/// time before it is resolved without it.
const PENDING_CATALOG_WAIT: Duration = Duration::from_secs(30);

/// How often a namespace whose plan waits for an unpack Job looks at the Job
/// again (its changes wake the sync sooner; this covers what follows from time).
const UNPACK_JOB_RECHECK: Duration = Duration::from_secs(2);

/// How soon a namespace whose new plan's name was taken is planned again.
const TAKEN_NAME_RECHECK: Duration = Duration::from_secs(2);

/// Reconciles one Subscription by syncing its namespace.
pub async fn reconcile(
    subscription: Arc<Subscription>,
    ctx: Arc<SubscriptionContext>,
) -> Result<Action, Error> {
    let shared = &ctx.shared;
    let _timer = shared.reconciles.start(CONTROLLER);
    let namespace = subscription.namespace().ok_or(Error::NoNamespace)?;
    shared
        .metrics
        .subscription_count
        .set(shared.stores.subscriptions.state().len() as i64);
    shared
        .metrics
        .install_plan_count
        .set(shared.stores.install_plans.state().len() as i64);
    if !shared.writer.leadership().is_leader() {
        // Followers keep their caches warm and do nothing else; gaining the
        // lease triggers a full resync.
        ctx.state.reset();
        return Ok(Action::await_change());
    }
    // The label and the sync are independent: both at once.
    let sync = async {
        let lock = ctx.state.namespace_lock(&namespace);
        let _guard = lock.lock().await;
        sync_namespace(&ctx, &namespace).await
    };
    let ((), synced) = futures::try_join!(adopt::adopt(shared, &subscription), sync)?;
    match synced {
        Some(action) => Ok(action),
        None => Ok(Action::requeue(shared.options.resync_interval)),
    }
}

/// The error policy of the controller.
pub fn error_policy(subscription: Arc<Subscription>, error: &Error, ctx: Arc<SubscriptionContext>) -> Action {
    olm_runtime::error_policy(CONTROLLER, subscription.as_ref(), error, &ctx.shared.reconciles)
}

/// Resolves `namespace` and acts on the result, step by step. Returns a sooner
/// requeue when something is still being waited for.
async fn sync_namespace(ctx: &SubscriptionContext, namespace: &str) -> Result<Option<Action>, Error> {
    let Some(inputs) = read_namespace(ctx, namespace) else {
        return Ok(None);
    };
    if ctx.state.synced(namespace) == Some(inputs.fingerprint) {
        return Ok(None);
    }
    if waiting_for_catalog(&inputs, Timestamp::now()) {
        // A catalog a Subscription names has not been read yet: resolving now
        // would report it missing. Its first read triggers this sync again.
        return Ok(Some(Action::requeue(Duration::from_secs(5))));
    }
    let decisions = resolve_namespace(&ctx.shared, &inputs);
    let mut planned = plan_groups(ctx, &inputs, &decisions).await?;
    let now = olm_runtime::conditions::now();
    let statuses = status::statuses(&inputs, &decisions, &planned, &now);
    let max_plans = ctx.shared.options.max_install_plans;
    let effects = decide::closing(namespace, &statuses, &planned.all, &planned.writes, max_plans).map_err(
        encode_error(namespace, "the InstallPlans and Subscription statuses"),
    )?;
    let performed = apply(&ctx.shared, namespace, &effects).await?;
    count_syncs(&ctx.shared, &statuses);
    if let Some(error) = planned.unpack_error.take() {
        // BundleUnpackFailed is written; try again with backoff.
        return Err(error);
    }
    if planned.unpacking() {
        // An unpack Job runs: look again soon, without marking the namespace synced.
        return Ok(Some(Action::requeue(UNPACK_JOB_RECHECK)));
    }
    if performed.refused > 0 {
        // A new plan's name is taken (by that plan, which the store has not
        // shown yet, or by another one): plan again once the store shows it.
        return Ok(Some(Action::requeue(TAKEN_NAME_RECHECK)));
    }
    ctx.state.set_synced(namespace, Some(inputs.fingerprint));
    Ok(None)
}

fn in_namespace<K: Resource>(namespace: &str) -> impl Fn(&Arc<K>) -> bool + '_ {
    move |object| object.meta().namespace.as_deref() == Some(namespace)
}

/// Step 1: reads `namespace` from the stores; `None` when it has no
/// Subscription (but those held by a rollback).
fn read_namespace(ctx: &SubscriptionContext, namespace: &str) -> Option<NamespaceInputs> {
    let shared = &ctx.shared;
    let mut subscriptions: Vec<Arc<Subscription>> = shared
        .stores
        .subscriptions
        .state()
        .into_iter()
        .filter(in_namespace(namespace))
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        // A Subscription held by a rollback is not resolved (or it would be
        // upgraded straight back); the revision controller keeps its status.
        .filter(|s| !super::revision::rollback::held(s))
        .collect();
    if subscriptions.is_empty() {
        return None;
    }
    subscriptions.sort_by_key(|s| s.name_any());
    let csvs: Vec<Arc<ClusterServiceVersion>> = shared
        .stores
        .csvs
        .state()
        .into_iter()
        .filter(in_namespace(namespace))
        .filter(|c| !resolve::is_copied(c))
        .collect();
    let plans: Vec<Arc<InstallPlan>> = shared
        .stores
        .install_plans
        .state()
        .into_iter()
        .filter(in_namespace(namespace))
        .collect();
    let groups: Vec<_> = shared
        .stores
        .operator_groups
        .state()
        .into_iter()
        .filter(in_namespace(namespace))
        .collect();
    // OLM's defaults unless the namespace has exactly one OperatorGroup.
    let unpack_policy = unpack::policy_of(match groups.as_slice() {
        [group] => Some(&group.metadata),
        _ => None,
    });
    let olm_config = shared
        .stores
        .olm_configs
        .get(&kube::runtime::reflector::ObjectRef::new(
            olm_api::v1::OLM_CONFIG_NAME,
        ));
    let fingerprint = fingerprint(
        shared.catalogs.generation(),
        &subscriptions,
        &csvs,
        &plans,
        &unpack_policy,
    ) ^ config_fingerprint(olm_config.as_deref());

    shared.forget_deleted_catalogs();
    let named: Vec<CatalogId> = subscriptions.iter().map(|s| catalog_of(s)).collect();
    let catalogs = shared
        .catalogs
        .visible(&shared.catalog_namespaces(namespace), &named);
    let catalog_uids: HashMap<CatalogId, String> = shared
        .stores
        .catalog_sources
        .state()
        .iter()
        .filter_map(|c| Some((CatalogId::new(c.name_any(), c.namespace()?), c.uid()?)))
        .collect();
    Some(NamespaceInputs {
        namespace: namespace.to_owned(),
        subscriptions,
        csvs,
        plans,
        catalogs,
        catalog_uids,
        unpack_policy,
        olm_config,
        fingerprint,
    })
}

/// OLMConfig `cluster`'s part of a namespace's fingerprint (its automatic
/// rollback settings show in the Subscriptions' status).
fn config_fingerprint(config: Option<&olm_api::v1::OLMConfig>) -> u64 {
    config.and_then(|c| c.resource_version()).map_or(0, |version| {
        let mut hasher = DefaultHasher::new();
        version.hash(&mut hasher);
        hasher.finish()
    })
}

/// What a namespace's sync depends on, as one number: the catalogs'
/// generation, the versions of its Subscriptions, CSVs and plans, and its
/// unpack policy.
fn fingerprint(
    generation: u64,
    subscriptions: &[Arc<Subscription>],
    csvs: &[Arc<ClusterServiceVersion>],
    plans: &[Arc<InstallPlan>],
    unpack_policy: &UnpackPolicy,
) -> u64 {
    let mut hasher = DefaultHasher::new();
    generation.hash(&mut hasher);
    unpack_policy.hash(&mut hasher);
    for s in subscriptions {
        (s.name_any(), s.resource_version()).hash(&mut hasher);
    }
    for c in csvs {
        (c.name_any(), c.resource_version()).hash(&mut hasher);
    }
    for p in plans {
        (p.name_any(), p.resource_version()).hash(&mut hasher);
    }
    hasher.finish()
}

/// Whether a catalog a Subscription names is still waiting for its first read
/// (and has not waited longer than [`PENDING_CATALOG_WAIT`]) at `now` (pure).
fn waiting_for_catalog(inputs: &NamespaceInputs, now: Timestamp) -> bool {
    inputs.catalogs.iter().any(|(id, state)| {
        inputs.subscriptions.iter().any(|s| &catalog_of(s) == id)
            && state.health == Health::Pending
            && state.content.is_none()
            && now.duration_since(state.since.0).as_secs() < PENDING_CATALOG_WAIT.as_secs() as i64
    })
}

/// Step 2: resolves the namespace against its catalogs, timing the resolution.
fn resolve_namespace(shared: &Context, inputs: &NamespaceInputs) -> Vec<GroupDecision> {
    let index = shared.catalogs.index(&inputs.catalogs);
    let started = Instant::now();
    let view = NamespaceView {
        namespace: &inputs.namespace,
        subscriptions: &inputs.subscriptions,
        csvs: &inputs.csvs,
        catalogs: &inputs.catalogs,
    };
    let decisions = resolve::decide(&index, &view);
    let outcome = if decisions
        .iter()
        .any(|d| matches!(d.decision, Decision::Unsatisfiable(_)))
    {
        "failed"
    } else {
        "succeeded"
    };
    shared
        .metrics
        .resolution_duration
        .with_label_values(&[outcome])
        .observe(started.elapsed().as_secs_f64());
    decisions
}

/// Step 3: plans the groups with bundles to install. When some need a bundle
/// image unpacked first, the Subscriptions waiting for a pull show
/// BundleUnpacking (best effort: a failed write only loses the transient
/// condition), the unpacks are performed, and the groups are planned again
/// with what they gave (the plans of the first pass kept as they were made).
async fn plan_groups(
    ctx: &SubscriptionContext,
    inputs: &NamespaceInputs,
    decisions: &[GroupDecision],
) -> Result<GroupPlans, Error> {
    let namespace = inputs.namespace.as_str();
    let first = plans::plan_groups(
        ctx,
        inputs,
        &inputs.plans,
        &[],
        decisions,
        &mut Unpacked::default(),
    )
    .await?;
    if first.requests.is_empty() {
        return Ok(first);
    }
    let now = olm_runtime::conditions::now();
    let pulls = first.requests.iter().filter(|r| r.is_pull());
    let waiting: Vec<decide::Waiting> = pulls.clone().map(Into::into).collect();
    let marks = decide::unpacking(namespace, &inputs.subscriptions, &waiting, &now)
        .map_err(encode_error(namespace, "the BundleUnpacking conditions"))?;
    if let Err(error) = apply(&ctx.shared, namespace, &marks).await {
        tracing::debug!(namespace, error = %crate::error_chain(&error), "BundleUnpacking not written");
    }
    let marked = pulls.flat_map(|r| r.members.clone()).collect();
    let mut unpacked = unpacking::perform(&ctx.shared, &inputs.unpack_policy, first.requests).await;
    let mut second =
        plans::plan_groups(ctx, inputs, &first.all, &first.writes, decisions, &mut unpacked).await?;
    second.marked_unpacking = marked;
    Ok(second)
}

fn encode_error(namespace: &str, what: &str) -> impl FnOnce(serde_json::Error) -> Error {
    let what = format!("{what} of namespace {namespace}");
    move |source| Error::Encode { what, source }
}

/// Step 6: performs `effects` with the runtime's applier.
async fn apply(shared: &Context, namespace: &str, effects: &SyncEffects) -> Result<Performed, Error> {
    let api: Api<Subscription> = Api::namespaced(shared.client.clone(), namespace);
    let performed = shared
        .writer
        // No live copies: a sync owns no object whole (its plans are created).
        .perform(&shared.client, &api, effects, &())
        .await
        .map_err(|source| Error::Write {
            what: format!("the InstallPlans and Subscription statuses of namespace {namespace}"),
            source,
        })?;
    for plan in &effects.objects {
        let csvs = &plan.object.data["spec"]["clusterServiceVersionNames"];
        if performed.refused == 0 {
            tracing::info!(namespace, install_plan = %plan.name(), %csvs, "created install plan");
        } else {
            // Which write was refused is not told apart: the next sync sees.
            tracing::info!(namespace, install_plan = %plan.name(), %csvs, "install plan not created, or a status held back: a name is taken");
        }
    }
    for removal in &effects.removals {
        tracing::info!(namespace, install_plan = %removal.name, "deleted an old install plan");
    }
    Ok(performed)
}

/// Counts the sync of every Subscription in OLM's `subscription_sync_total`.
fn count_syncs(shared: &Context, statuses: &Statuses) {
    for update in &statuses.updates {
        let subscription = &update.subscription;
        shared
            .metrics
            .subscription_sync_total
            .with_label_values(&[
                subscription.name_any().as_str(),
                update.status.installed_csv.as_deref().unwrap_or_default(),
                subscription.spec.channel.as_deref().unwrap_or_default(),
                subscription.spec.package.as_str(),
                match subscription.spec.install_plan_approval.unwrap_or_default() {
                    Approval::Automatic => "Automatic",
                    Approval::Manual => "Manual",
                },
            ])
            .inc();
    }
}

#[cfg(test)]
mod sync_tests;

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::catalogs::CatalogState;

    fn inputs(health: Health, since: i64) -> NamespaceInputs {
        let subscription = resolve::tests::subscription("db", "demo-db", Approval::Automatic);
        NamespaceInputs {
            namespace: "team".into(),
            catalogs: vec![(
                catalog_of(&subscription),
                CatalogState {
                    priority: 0,
                    health,
                    content: None,
                    since: Time(Timestamp::from_second(since).unwrap()),
                },
            )],
            subscriptions: vec![subscription],
            csvs: Vec::new(),
            plans: Vec::new(),
            catalog_uids: HashMap::new(),
            unpack_policy: crate::images::unpack::policy_of(None),
            olm_config: None,
            fingerprint: 0,
        }
    }

    #[test]
    fn a_named_catalog_never_read_is_waited_for_a_while() {
        let at = |second| Timestamp::from_second(second).unwrap();
        assert!(waiting_for_catalog(&inputs(Health::Pending, 100), at(110)));
        assert!(
            !waiting_for_catalog(&inputs(Health::Pending, 100), at(140)),
            "waited long enough"
        );
        assert!(!waiting_for_catalog(
            &inputs(Health::Unhealthy("down".into()), 100),
            at(110)
        ));
    }
}
