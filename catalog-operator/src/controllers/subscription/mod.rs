//! The Subscription controller: resolves all Subscriptions of a namespace
//! together, gives each independent group its own InstallPlan, and reports on
//! every Subscription.
//!
//! A reconcile of any Subscription syncs its whole namespace, under a lock per
//! namespace, as a pipeline of named steps:
//! 1. [`read_namespace`]: the stores → [`NamespaceInputs`];
//! 2. [`decide`]: resolution of the namespace ([`resolve::decide`], pure) →
//!    one [`GroupDecision`] per independent group;
//! 3. [`plans::write_plans`]: per group with bundles to install, find the plan
//!    that covers them or create one → [`plans::WrittenPlans`];
//! 4. [`status::statuses`] (pure): each Subscription's status →
//!    [`status::Statuses`];
//! 5. [`write_statuses`]: write the ones that changed; then
//!    [`plans::collect_garbage`] removes the oldest plans beyond the limit.
//!
//! Before that, [`adopt::adopt`] labels the Subscription as a component of its
//! package's `Operator`.
//!
//! A namespace whose inputs did not change since its last complete sync is
//! skipped. The controller's own state ([`context::State`]: namespace locks, plans it
//! created that the store has not shown yet, what was synced) lives in
//! [`SubscriptionContext`], beside the shared [`Context`].

pub mod adopt;
mod context;
mod error;
mod inputs;
pub mod plans;
pub mod resolve;
pub mod status;
mod unpacking;

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
use tokio::time::Instant;

pub use self::{context::SubscriptionContext, error::Error, inputs::NamespaceInputs};
use self::{
    resolve::{Decision, GroupDecision, NamespaceView, catalog_of},
    status::Statuses,
};
use super::Context;
use crate::catalogs::Health;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "subscription";

/// How long a namespace waits for a catalog it names to be read for the first
/// time before it is resolved without it.
const PENDING_CATALOG_WAIT: Duration = Duration::from_secs(30);

/// How often a namespace whose plan waits for an unpack Job looks at the Job again.
const UNPACK_JOB_RECHECK: Duration = Duration::from_secs(2);

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
    adopt::adopt(shared, &subscription).await?;
    let lock = ctx.state.namespace_lock(&namespace);
    let _guard = lock.lock().await;
    match sync_namespace(&ctx, &namespace).await? {
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
    let decisions = decide(&ctx.shared, &inputs);
    let mut written = plans::write_plans(ctx, &inputs, &decisions).await?;
    let now = olm_runtime::conditions::now();
    let statuses = status::statuses(&inputs, &decisions, &written, &now);
    write_statuses(&ctx.shared, namespace, &statuses).await?;
    plans::collect_garbage(&ctx.shared, namespace, &written.all, &statuses.referenced).await?;
    if let Some(error) = written.unpack_error.take() {
        // BundleUnpackFailed is written; try again with backoff.
        return Err(error);
    }
    if written.unpacking() {
        // An unpack Job runs: look again soon, without marking the namespace synced.
        return Ok(Some(Action::requeue(UNPACK_JOB_RECHECK)));
    }
    ctx.state.set_synced(namespace, Some(inputs.fingerprint));
    Ok(None)
}

fn in_namespace<K: Resource>(namespace: &str) -> impl Fn(&Arc<K>) -> bool + '_ {
    move |object| object.meta().namespace.as_deref() == Some(namespace)
}

/// Step 1: reads `namespace` from the stores; `None` when it has no Subscription.
fn read_namespace(ctx: &SubscriptionContext, namespace: &str) -> Option<NamespaceInputs> {
    let shared = &ctx.shared;
    let mut subscriptions: Vec<Arc<Subscription>> = shared
        .stores
        .subscriptions
        .state()
        .into_iter()
        .filter(in_namespace(namespace))
        .filter(|s| s.metadata.deletion_timestamp.is_none())
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
    let stored: Vec<Arc<InstallPlan>> = shared
        .stores
        .install_plans
        .state()
        .into_iter()
        .filter(in_namespace(namespace))
        .collect();
    let mut plans = stored.clone();
    plans.extend(ctx.state.recent(namespace, &stored));
    let fingerprint = fingerprint(shared.catalogs.generation(), &subscriptions, &csvs, &plans);

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
        fingerprint,
    })
}

fn fingerprint(
    generation: u64,
    subscriptions: &[Arc<Subscription>],
    csvs: &[Arc<ClusterServiceVersion>],
    plans: &[Arc<InstallPlan>],
) -> u64 {
    let mut hasher = DefaultHasher::new();
    generation.hash(&mut hasher);
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
fn decide(shared: &Context, inputs: &NamespaceInputs) -> Vec<GroupDecision> {
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

/// Step 5: writes the statuses that changed, and counts every sync.
async fn write_statuses(shared: &Context, namespace: &str, statuses: &Statuses) -> Result<(), Error> {
    let api: Api<Subscription> = Api::namespaced(shared.client.clone(), namespace);
    for update in &statuses.updates {
        let subscription = &update.subscription;
        let name = subscription.name_any();
        if update.changed {
            shared
                .writer
                .apply_status(&api, &name, &update.status)
                .await
                .map_err(|source| Error::Write {
                    what: format!("the status of Subscription {namespace}/{name}"),
                    source,
                })?;
        }
        shared
            .metrics
            .subscription_sync_total
            .with_label_values(&[
                name.as_str(),
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
    Ok(())
}

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
