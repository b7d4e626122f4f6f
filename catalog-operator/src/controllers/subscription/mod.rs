//! The Subscription controller: resolves all Subscriptions of a namespace
//! together, gives each independent group its own InstallPlan, and reports on
//! every Subscription.
//!
//! A reconcile of any Subscription syncs its whole namespace, under a lock per
//! namespace: read the namespace ([`NamespaceView`]) → [`resolve::decide`] (pure) →
//! per group, find or create its InstallPlan ([`steps::build`] gives the steps) →
//! [`status::compute`] (pure) each Subscription's status and write the ones that
//! changed → remove the oldest InstallPlans beyond the limit. A namespace whose
//! inputs did not change since its last complete sync is skipped.

pub mod resolve;
pub mod status;
pub mod steps;

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    hash::{DefaultHasher, Hash, Hasher},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::OwnerReference, jiff::Timestamp};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ObjectMeta},
    runtime::controller::Action,
};
use olm_api::{
    OPERATORS_GROUP,
    v1alpha1::{
        Approval, ClusterServiceVersion, InstallPlan, InstallPlanConditionReason, InstallPlanConditionType,
        InstallPlanPhase, InstallPlanSpec, InstallPlanStatus, Subscription,
    },
};
use olm_resolver::model::CatalogId;
use olm_runtime::{ErrorClass, ReconcileError, apply::WriteError, classify};
use tokio::time::Instant;

use self::{
    resolve::{Decision, GroupDecision, NamespaceView, ResolvedStep, catalog_of},
    status::StatusInput,
    steps::PlannedBundle,
};
use super::{Context, conditions::set_install_plan_condition};
use crate::{catalogs::Health, controllers::catalogsource::forget_deleted, registry::client::ClientError};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "subscription";

/// How long a namespace waits for a catalog it names to be read for the first
/// time before it is resolved without it.
const PENDING_CATALOG_WAIT: Duration = Duration::from_secs(30);

/// How long an InstallPlan created by this replica is remembered while the
/// InstallPlan store has not seen it yet.
const RECENT_PLAN_TTL: Duration = Duration::from_secs(120);

/// Errors of the Subscription controller. A group that cannot be resolved is not
/// an error: it is reported on its Subscriptions.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Subscription has no namespace (never from the API server).
    #[error("the Subscription has no namespace")]
    NoNamespace,
    /// A catalog the plan uses has no content now.
    #[error("catalog {catalog} has no content to plan bundle {bundle} from")]
    CatalogUnavailable {
        /// The catalog.
        catalog: CatalogId,
        /// The bundle.
        bundle: String,
    },
    /// A bundle's manifests could not be fetched from its registry.
    #[error("failed to fetch the manifests of bundle {bundle} from catalog {catalog}")]
    Fetch {
        /// The catalog.
        catalog: CatalogId,
        /// The bundle.
        bundle: String,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// A write failed.
    #[error("failed to write {what}")]
    Write {
        /// What was written.
        what: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// A read failed.
    #[error("failed to read {what}")]
    Read {
        /// What was read.
        what: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace => "invalid",
            Error::CatalogUnavailable { .. } | Error::Fetch { .. } => "catalog",
            Error::Write { .. } | Error::Read { .. } => "api",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace => ErrorClass::Terminal,
            // The catalog may come back, or serve the bundle later.
            Error::CatalogUnavailable { .. } | Error::Fetch { .. } => ErrorClass::Transient,
            Error::Write { source, .. } => source.class(),
            Error::Read { source, .. } => classify(source),
        }
    }
}

/// An InstallPlan this replica created, until the store has it.
struct RecentPlan {
    plan: Arc<InstallPlan>,
    at: Instant,
}

/// State of the controller that outlives a reconcile.
#[derive(Default)]
pub(crate) struct State {
    recent: Mutex<HashMap<String, Vec<RecentPlan>>>,
    synced: Mutex<HashMap<String, u64>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl State {
    /// The plans created lately in `namespace` that `stored` does not hold yet.
    fn recent(&self, namespace: &str, stored: &[Arc<InstallPlan>]) -> Vec<Arc<InstallPlan>> {
        let mut recent = lock(&self.recent);
        let Some(plans) = recent.get_mut(namespace) else {
            return Vec::new();
        };
        plans.retain(|r| {
            r.at.elapsed() < RECENT_PLAN_TTL && !stored.iter().any(|s| s.name_any() == r.plan.name_any())
        });
        plans.iter().map(|r| r.plan.clone()).collect()
    }

    fn remember(&self, namespace: &str, plan: Arc<InstallPlan>) {
        let mut recent = lock(&self.recent);
        let plans = recent.entry(namespace.to_owned()).or_default();
        plans.retain(|r| r.plan.name_any() != plan.name_any());
        plans.push(RecentPlan {
            plan,
            at: Instant::now(),
        });
    }

    fn synced(&self, namespace: &str) -> Option<u64> {
        lock(&self.synced).get(namespace).copied()
    }

    fn set_synced(&self, namespace: &str, fingerprint: Option<u64>) {
        let mut synced = lock(&self.synced);
        match fingerprint {
            Some(f) => synced.insert(namespace.to_owned(), f),
            None => synced.remove(namespace),
        };
    }

    /// Forgets what was synced (leadership changed hands: start afresh).
    pub(crate) fn reset(&self) {
        lock(&self.synced).clear();
    }
}

/// Reconciles one Subscription by syncing its namespace.
pub async fn reconcile(subscription: Arc<Subscription>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.reconciles.start(CONTROLLER);
    let namespace = subscription.namespace().ok_or(Error::NoNamespace)?;
    ctx.metrics
        .subscription_count
        .set(ctx.stores.subscriptions.state().len() as i64);
    ctx.metrics
        .install_plan_count
        .set(ctx.stores.install_plans.state().len() as i64);
    if !ctx.writer.leadership().is_leader() {
        // Followers keep their caches warm and do nothing else; gaining the
        // lease triggers a full resync.
        ctx.subscription_state.reset();
        return Ok(Action::await_change());
    }
    let lock = ctx.namespace_lock(&namespace);
    let _guard = lock.lock().await;
    match sync_namespace(&ctx, &namespace).await? {
        Some(action) => Ok(action),
        None => Ok(Action::requeue(ctx.options.resync_interval)),
    }
}

/// The error policy of the controller.
pub fn error_policy(subscription: Arc<Subscription>, error: &Error, ctx: Arc<Context>) -> Action {
    olm_runtime::error_policy(CONTROLLER, subscription.as_ref(), error, &ctx.reconciles)
}

fn in_namespace<K: Resource>(namespace: &str) -> impl Fn(&Arc<K>) -> bool + '_ {
    move |object| object.meta().namespace.as_deref() == Some(namespace)
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

/// Resolves `namespace` and acts on the result. Returns a sooner requeue when
/// something is still being waited for.
async fn sync_namespace(ctx: &Arc<Context>, namespace: &str) -> Result<Option<Action>, Error> {
    let mut subscriptions: Vec<Arc<Subscription>> = ctx
        .stores
        .subscriptions
        .state()
        .into_iter()
        .filter(in_namespace(namespace))
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .collect();
    if subscriptions.is_empty() {
        return Ok(None);
    }
    subscriptions.sort_by_key(|s| s.name_any());
    let csvs: Vec<Arc<ClusterServiceVersion>> = ctx
        .stores
        .csvs
        .state()
        .into_iter()
        .filter(in_namespace(namespace))
        .filter(|c| !resolve::is_copied(c))
        .collect();
    let stored: Vec<Arc<InstallPlan>> = ctx
        .stores
        .install_plans
        .state()
        .into_iter()
        .filter(in_namespace(namespace))
        .collect();
    let mut plans = stored.clone();
    plans.extend(ctx.subscription_state.recent(namespace, &stored));

    let sync_fingerprint = fingerprint(ctx.catalogs.generation(), &subscriptions, &csvs, &plans);
    if ctx.subscription_state.synced(namespace) == Some(sync_fingerprint) {
        return Ok(None);
    }

    forget_deleted(ctx);
    let named: Vec<CatalogId> = subscriptions.iter().map(|s| catalog_of(s)).collect();
    let catalogs = ctx.catalogs.visible(&ctx.catalog_namespaces(namespace), &named);
    let waiting = catalogs.iter().any(|(id, state)| {
        named.contains(id)
            && state.health == Health::Pending
            && state.content.is_none()
            && Timestamp::now().duration_since(state.since.0).as_secs()
                < PENDING_CATALOG_WAIT.as_secs() as i64
    });
    if waiting {
        // A catalog a Subscription names has not been read yet: resolving now
        // would report it missing. Its first read triggers this sync again.
        return Ok(Some(Action::requeue(Duration::from_secs(5))));
    }

    let index = ctx.catalogs.index(&catalogs);
    let started = Instant::now();
    let view = NamespaceView {
        namespace,
        subscriptions: &subscriptions,
        csvs: &csvs,
        catalogs: &catalogs,
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
    ctx.metrics
        .resolution_duration
        .with_label_values(&[outcome])
        .observe(started.elapsed().as_secs_f64());

    let catalog_uids: HashMap<CatalogId, String> = ctx
        .stores
        .catalog_sources
        .state()
        .iter()
        .filter_map(|c| Some((CatalogId::new(c.name_any(), c.namespace()?), c.uid()?)))
        .collect();
    let csv_names: HashSet<String> = csvs.iter().map(|c| c.name_any()).collect();
    let now = olm_runtime::conditions::now();
    let mut referenced: HashSet<String> = HashSet::new();
    let api: Api<Subscription> = Api::namespaced(ctx.client.clone(), namespace);
    for group in &decisions {
        let plan = match &group.decision {
            Decision::Install(steps) => {
                let plan = ensure_plan(
                    ctx,
                    namespace,
                    group,
                    steps,
                    &subscriptions,
                    &mut plans,
                    &csv_names,
                )
                .await?;
                referenced.insert(plan.name_any());
                Some(plan)
            }
            _ => None,
        };
        for name in &group.subscriptions {
            let Some(subscription) = subscriptions.iter().find(|s| &s.name_any() == name) else {
                continue;
            };
            let exists = |csv: &str| csv_names.contains(csv);
            let referenced_plan = subscription
                .status
                .as_ref()
                .and_then(|s| s.install_plan_ref.as_ref()?.name.clone())
                .and_then(|name| plans.iter().find(|p| p.name_any() == name));
            let status = status::compute(&StatusInput {
                subscription,
                group,
                install_plan: plan.as_deref().or(referenced_plan.map(|p| p.as_ref())),
                csv_exists: &exists,
                catalogs: &catalogs,
                catalog_uids: &catalog_uids,
                now: &now,
            });
            if let Some(reference) = status.install_plan_ref.as_ref().and_then(|r| r.name.clone()) {
                referenced.insert(reference);
            }
            if subscription.status.as_ref() != Some(&status) {
                ctx.writer
                    .apply_status(&api, name, &status)
                    .await
                    .map_err(|source| Error::Write {
                        what: format!("the status of Subscription {namespace}/{name}"),
                        source,
                    })?;
            }
            ctx.metrics
                .subscription_sync_total
                .with_label_values(&[
                    name.as_str(),
                    status.installed_csv.as_deref().unwrap_or_default(),
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
    collect_garbage(ctx, namespace, &plans, &referenced).await?;
    ctx.subscription_state
        .set_synced(namespace, Some(sync_fingerprint));
    Ok(None)
}

/// The InstallPlan of a group that has bundles to install: the existing plan for
/// the same bundles, or a new one.
async fn ensure_plan(
    ctx: &Arc<Context>,
    namespace: &str,
    group: &GroupDecision,
    steps: &[ResolvedStep],
    subscriptions: &[Arc<Subscription>],
    plans: &mut Vec<Arc<InstallPlan>>,
    csv_names: &HashSet<String>,
) -> Result<Arc<InstallPlan>, Error> {
    let wanted: BTreeSet<&str> = steps.iter().map(|s| s.bundle.as_str()).collect();
    let referenced: HashSet<String> = subscriptions
        .iter()
        .filter(|s| group.subscriptions.contains(&s.name_any()))
        .filter_map(|s| s.status.as_ref()?.install_plan_ref.as_ref()?.name.clone())
        .collect();
    // A plan covers the group when it installs (or installed) every bundle still
    // wanted: the CSV store may show some of a plan's CSVs before the others.
    let existing = plans
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let names: BTreeSet<&str> = p
                .spec
                .cluster_service_version_names
                .iter()
                .map(String::as_str)
                .collect();
            let exact = names == wanted;
            let failed = p.status.as_ref().map(|s| s.phase) == Some(InstallPlanPhase::Failed);
            exact || (!failed && wanted.is_subset(&names))
        })
        .max_by_key(|p| (referenced.contains(&p.name_any()), p.spec.generation.unwrap_or(0)))
        .cloned();
    if let Some(plan) = existing {
        let planned = plan.status.as_ref().is_some_and(|s| s.plan.is_some());
        if !planned {
            // Created, but its steps were never written (a crash in between).
            let status = plan_status(ctx, &plan, group, steps).await?;
            let written = write_plan_status(ctx, namespace, &plan.name_any(), &status).await?;
            ctx.subscription_state.remember(namespace, written.clone());
            return Ok(written);
        }
        let completed = plan.status.as_ref().map(|s| s.phase) == Some(InstallPlanPhase::Complete);
        if !completed || !csvs_gone(ctx, namespace, steps, csv_names).await? {
            return Ok(plan);
        }
        tracing::info!(
            namespace,
            install_plan = %plan.name_any(),
            "CSVs of a complete install plan are gone: planning them again"
        );
    }

    let generation = plans.iter().filter_map(|p| p.spec.generation).max().unwrap_or(0) + 1;
    let owners: Vec<OwnerReference> = subscriptions
        .iter()
        .filter(|s| group.subscriptions.contains(&s.name_any()))
        .filter_map(|s| {
            Some(OwnerReference {
                api_version: format!("{OPERATORS_GROUP}/v1alpha1"),
                kind: "Subscription".to_owned(),
                name: s.name_any(),
                uid: s.uid()?,
                controller: Some(false),
                block_owner_deletion: Some(false),
            })
        })
        .collect();
    let first = &steps[0];
    let plan = InstallPlan {
        metadata: ObjectMeta {
            generate_name: Some("install-".to_owned()),
            namespace: Some(namespace.to_owned()),
            owner_references: Some(owners),
            ..ObjectMeta::default()
        },
        spec: InstallPlanSpec {
            catalog_source: Some(first.catalog.name.clone()),
            catalog_source_namespace: Some(first.catalog.namespace.clone()),
            cluster_service_version_names: steps.iter().map(|s| s.bundle.clone()).collect(),
            approval: group.approval,
            approved: group.approval == Approval::Automatic,
            generation: Some(generation),
        },
        status: None,
    };
    // Fetch the manifests first, so that a registry that is down leaves no
    // half-made plan behind.
    let status = plan_status(ctx, &plan, group, steps).await?;
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), namespace);
    let created = ctx
        .writer
        .create(&api, &plan)
        .await
        .map_err(|source| Error::Write {
            what: format!("a new InstallPlan in namespace {namespace}"),
            source,
        })?;
    let name = created.name_any();
    tracing::info!(
        namespace,
        install_plan = %name,
        csvs = ?created.spec.cluster_service_version_names,
        approval = ?created.spec.approval,
        "created install plan"
    );
    ctx.subscription_state
        .remember(namespace, Arc::new(created.clone()));
    let mut status = status;
    status.observed_generation = created.metadata.generation;
    let written = write_plan_status(ctx, namespace, &name, &status).await?;
    ctx.subscription_state.remember(namespace, written.clone());
    plans.push(written.clone());
    Ok(written)
}

/// Whether some CSV of a complete plan is gone from the namespace (checked with
/// the API server, since the CSV store may lag behind the plan).
async fn csvs_gone(
    ctx: &Context,
    namespace: &str,
    steps: &[ResolvedStep],
    csv_names: &HashSet<String>,
) -> Result<bool, Error> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    for step in steps.iter().filter(|s| !csv_names.contains(&s.bundle)) {
        let found = api
            .get_metadata_opt(&step.bundle)
            .await
            .map_err(|source| Error::Read {
                what: format!("ClusterServiceVersion {namespace}/{}", step.bundle),
                source,
            })?;
        if found.is_none() {
            return Ok(true);
        }
    }
    Ok(false)
}

async fn write_plan_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    status: &InstallPlanStatus,
) -> Result<Arc<InstallPlan>, Error> {
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), namespace);
    ctx.writer
        .apply_status(&api, name, status)
        .await
        .map(Arc::new)
        .map_err(|source| Error::Write {
            what: format!("the status of InstallPlan {namespace}/{name}"),
            source,
        })
}

/// The status of a freshly planned InstallPlan: its steps, or Failed when the
/// bundles' manifests cannot make steps.
async fn plan_status(
    ctx: &Context,
    plan: &InstallPlan,
    group: &GroupDecision,
    steps: &[ResolvedStep],
) -> Result<InstallPlanStatus, Error> {
    let mut bundles = Vec::with_capacity(steps.len());
    for step in steps {
        let content = ctx
            .catalogs
            .get(&step.catalog)
            .and_then(|state| state.content)
            .ok_or_else(|| Error::CatalogUnavailable {
                catalog: step.catalog.clone(),
                bundle: step.bundle.clone(),
            })?;
        let bundle = content
            .bundle_with_manifests(&step.package, &step.channel, &step.bundle)
            .await
            .map_err(|source| Error::Fetch {
                catalog: step.catalog.clone(),
                bundle: step.bundle.clone(),
                source,
            })?
            .ok_or_else(|| Error::CatalogUnavailable {
                catalog: step.catalog.clone(),
                bundle: step.bundle.clone(),
            })?;
        bundles.push(PlannedBundle {
            step: step.clone(),
            bundle,
        });
    }
    let mut catalog_sources: Vec<String> = Vec::new();
    for step in steps {
        if !catalog_sources.contains(&step.catalog.name) {
            catalog_sources.push(step.catalog.name.clone());
        }
    }
    let now = olm_runtime::conditions::now();
    let mut status = InstallPlanStatus {
        observed_generation: plan.metadata.generation,
        phase: if plan.spec.approved {
            InstallPlanPhase::Installing
        } else {
            InstallPlanPhase::RequiresApproval
        },
        conditions: None,
        catalog_sources,
        plan: None,
        bundle_lookups: None,
        attenuated_service_account_ref: None,
        start_time: None,
        message: None,
    };
    match steps::build(&bundles, group.approval) {
        Ok(built) => status.plan = Some(built),
        Err(error) => {
            let message = error.to_string();
            status.phase = InstallPlanPhase::Failed;
            status.plan = Some(Vec::new());
            status.message = Some(message.clone());
            let mut conditions = Vec::new();
            set_install_plan_condition(
                &mut conditions,
                InstallPlanConditionType::Installed,
                false,
                InstallPlanConditionReason::ComponentFailed,
                &message,
                &now,
            );
            status.conditions = Some(conditions);
        }
    }
    super::installplan::status::set_kstatus(&mut status, &now);
    Ok(status)
}

/// The InstallPlans to delete so that at most `max` remain: the oldest first (by
/// generation, then creation), never one that a Subscription refers to.
pub fn plans_to_delete(plans: &[Arc<InstallPlan>], referenced: &HashSet<String>, max: usize) -> Vec<String> {
    let mut live: Vec<&Arc<InstallPlan>> = plans
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    live.sort_by_key(|p| {
        (
            p.spec.generation.unwrap_or(0),
            p.metadata.creation_timestamp.clone().map(|t| t.0),
        )
    });
    live.dedup_by_key(|p| p.name_any());
    let mut excess = live.len().saturating_sub(max);
    let mut out = Vec::new();
    for plan in live {
        if excess == 0 {
            break;
        }
        let name = plan.name_any();
        if referenced.contains(&name) {
            continue;
        }
        out.push(name);
        excess -= 1;
    }
    out
}

/// Deletes the oldest InstallPlans of the namespace beyond the limit.
async fn collect_garbage(
    ctx: &Context,
    namespace: &str,
    plans: &[Arc<InstallPlan>],
    referenced: &HashSet<String>,
) -> Result<(), Error> {
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), namespace);
    for name in plans_to_delete(plans, referenced, ctx.options.max_install_plans) {
        ctx.writer
            .delete(&api, &name, &DeleteParams::background())
            .await
            .map_err(|source| Error::Write {
                what: format!("the deletion of InstallPlan {namespace}/{name}"),
                source,
            })?;
        tracing::info!(namespace, install_plan = %name, "deleted an old install plan");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::InstallPlanSpec;

    use super::*;

    fn plan(name: &str, generation: i64) -> Arc<InstallPlan> {
        let mut plan = InstallPlan::new(
            name,
            InstallPlanSpec {
                catalog_source: None,
                catalog_source_namespace: None,
                cluster_service_version_names: Vec::new(),
                approval: Approval::Automatic,
                approved: true,
                generation: Some(generation),
            },
        );
        plan.metadata.namespace = Some("team".into());
        Arc::new(plan)
    }

    #[test]
    fn the_oldest_unreferenced_plans_go_beyond_five() {
        let plans: Vec<_> = (1..=8).map(|g| plan(&format!("install-{g}"), g)).collect();
        let referenced = HashSet::from(["install-1".to_owned()]);
        assert_eq!(
            plans_to_delete(&plans, &referenced, 5),
            ["install-2", "install-3", "install-4"],
            "install-1 is still referenced"
        );
        assert!(plans_to_delete(&plans[..5], &HashSet::new(), 5).is_empty());
        let mut with_dup = plans[..6].to_vec();
        with_dup.push(plans[5].clone());
        assert_eq!(plans_to_delete(&with_dup, &HashSet::new(), 5), ["install-1"]);
    }
}
