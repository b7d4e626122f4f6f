//! The ClusterServiceVersion controller.
//!
//! Each reconcile runs under a finalizer (so that cluster-scoped objects are
//! removed on delete, see [`cleanup`]) and has three steps:
//!
//! 1. *Read* ([`read_and_validate`], while the finalizer is added to a new
//!    CSV, as neither needs the other), writing nothing: [`dereference`] reads
//!    what the CSV refers to (OperatorGroups, CSVs, Subscriptions and
//!    OperatorConditions, its Deployments and ServiceAccounts once labelled,
//!    and the CRDs it names as summaries, from the shared [`Stores`];
//!    discovery, the API server's version and what the stores do not show as
//!    needed from the API server), [`validate`] checks
//!    it (pure), and the APIServices and machine hooks it requires join its
//!    requirements.
//! 2. *Decide* ([`phase::decide_ahead`], pure): the status and what to do:
//!    settle, install, or delete a replaced CSV.
//! 3. *Apply*: the OperatorCondition ([`operator_condition::keep`]:
//!    [`operator_condition::plan`], pure, then the one applier) and the
//!    OperatorGroup annotations ([`update_status::annotations`], pure, then
//!    the one applier), and beside them, independent of them, what was
//!    decided; for an install, [`build`] (pure) → [`overrides`] (pure) →
//!    [`serving`] ([`serving::certificates`] and [`serving::plan`], pure,
//!    with new certificates issued in between when the stored ones are not
//!    kept) and [`apply::plan`] (pure) → the one applier writes the Services
//!    and certificate Secrets, then the install's service accounts, RBAC and
//!    Deployments and the removal of what it no longer has, then the webhook
//!    configurations, CRD conversions and APIServices and the removal of
//!    those it no longer declares; then [`decide::record`] (pure) gives the
//!    status to end with, which [`update_status`] writes only when it
//!    changed.
//!
//! Every object is stamped with the hash of its content and left out when
//! its live copy in the shared stores ([`crate::stores::InstallStores`])
//! carries it already and no other writer owns a field it sets ([`stamp`],
//! [`crate::fields`]), so that a new leader, or a resync, sends nothing for
//! an install that is already right; the objects a CSV no longer has are
//! found in the stores; only [`cleanup`], once, on delete, lists them live.
//! The conversion of a CRD and the OperatorGroup annotations, fields of
//! objects others own, are sent only when the object read lacks them
//! ([`webhooks::conversion_current`]). The requests of a reconcile are
//! tested against a mocked API server (`tests`): a reconcile of an install
//! that is already right, serving objects included, sends no write.
//!
//! Where it still differs from the one shape of the other controllers: the
//! decisions are made and performed in three groups (the companions, the
//! install and its serving objects, then the status), not as one
//! [`olm_runtime::effects::Effects`], because the install's objects go
//! through the OperatorGroup's service account when it names one and the
//! rest through the operator's own; new certificates are issued between two
//! pure steps (a new key is outside work with randomness); and the read step
//! GETs what no store holds: a CRD the store of summaries does not show
//! Established and serving the versions the CSV names (the store may lag
//! behind a CRD the InstallPlan made a moment before), Deployments and
//! ServiceAccounts not labelled for a CSV (not made yet, or someone else's:
//! their owner decides whether they may be adopted), the certificate Secrets
//! of serving Deployments (their keys: no store keeps Secrets), the hooks
//! ConfigMap of a machine CSV ([`machine::requirements`]) and discovery.
//!
//! What triggers a reconcile is wired in [`crate::watches`]; the mappers it
//! uses are here: CSVs; the Deployments and ServiceAccounts they own (owner
//! references); Roles, RoleBindings, ClusterRoles and ClusterRoleBindings
//! mapped back by their `olm.owner*` labels ([`labelled_owner`]);
//! OperatorGroups (→ the CSVs of their namespace, [`in_namespace`]); CRDs (→
//! the CSVs that own or require them, [`naming_crd`]); and CSVs again (→ the
//! CSVs they replace or are replaced by, and those of their namespace held
//! back by an owner conflict, [`upgrade_neighbours`]); Subscriptions (→ the
//! CSV they installed, whose Deployments take their config, [`overrides`]);
//! and OperatorConditions (→ the CSV of the same name and those replacing
//! it, [`operator_condition`]).

pub mod apiservices;
pub mod apply;
pub mod build;
pub mod certs;
pub mod cleanup;
pub mod copy_hashes;
pub mod crd_summary;
pub mod decide;
pub mod dereference;
pub mod machine;
pub mod naming;
pub mod operator_condition;
pub mod overrides;
pub mod phase;
pub mod relation_data;
pub mod serving;
pub mod stamp;
pub mod update_status;
pub mod validate;
pub mod webhooks;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

use std::{sync::Arc, time::Duration};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, ResourceExt,
    runtime::{
        controller::Action,
        finalizer::{self, finalizer},
        reflector::{ObjectRef, Store},
    },
};
use olm_api::{
    labels,
    v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase},
};
use olm_runtime::{ErrorClass, ReconcileError, classify};

use self::{
    build::OWNER_KIND,
    decide::{Outcome, shown_requirements},
    phase::{Decision, Facts, InstallOutcome},
};
use crate::{context::Context, stores::Stores};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "clusterserviceversion";

/// The finalizer that keeps a CSV until its cluster-scoped objects are gone.
pub const FINALIZER: &str = "olm-operator.olm-rs.dev/cleanup";

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CSV has no namespace (it always should).
    #[error("the ClusterServiceVersion has no namespace")]
    NoNamespace,
    /// Reading what the CSV refers to failed.
    #[error("failed to dereference the objects of the ClusterServiceVersion")]
    Dereference(#[source] dereference::Error),
    /// Building the install failed.
    #[error("failed to build the install")]
    Build(#[source] build::Error),
    /// Applying the install failed (transiently; refusals become the status).
    #[error("failed to apply the install")]
    Apply(#[source] apply::Error),
    /// Keeping the CSV's OperatorCondition failed.
    #[error("failed to keep the OperatorCondition of the ClusterServiceVersion")]
    OperatorCondition(#[source] operator_condition::Error),
    /// Writing status or annotations failed.
    #[error("failed to update the ClusterServiceVersion")]
    UpdateStatus(#[source] update_status::Error),
    /// Deleting a replaced CSV failed.
    #[error("failed to delete the replaced ClusterServiceVersion")]
    DeleteReplaced(#[source] olm_runtime::apply::WriteError),
    /// Looking at or applying the `machine` strategy failed.
    #[error("failed to install on machines")]
    Machine(#[source] machine::Error),
    /// Keeping the copies of the CSV in its target namespaces failed.
    #[error("failed to keep the copied ClusterServiceVersions")]
    Copied(#[source] crate::controllers::copiedcsv::Error),
    /// Removing cluster-scoped objects failed.
    #[error("failed to clean up after the ClusterServiceVersion")]
    Cleanup(#[source] cleanup::Error),
    /// Certificates, webhooks or APIServices could not be made or written.
    #[error("failed to install the serving certificates, webhooks or APIServices")]
    Serving(#[source] serving::Error),
    /// The finalizer could not be added or removed, or a step failed under it.
    #[error("finalizer {FINALIZER}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace => "invalid",
            Error::Dereference(_) => "dereference",
            Error::Build(_) => "build",
            Error::Apply(_) => "apply",
            Error::UpdateStatus(_) => "update_status",
            Error::OperatorCondition(_) => "operator_condition",
            Error::DeleteReplaced(_) => "delete",
            Error::Cleanup(_) => "cleanup",
            Error::Copied(_) => "copied",
            Error::Serving(_) => "serving",
            Error::Machine(_) => "machine",
            Error::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.category(),
                _ => "finalizer",
            },
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            // Only a change of the object can help: wait for one.
            Error::NoNamespace | Error::Build(_) => ErrorClass::Terminal,
            Error::DeleteReplaced(source) => source.class(),
            Error::OperatorCondition(source) => source.class(),
            Error::Serving(source) => source.class(),
            Error::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.class(),
                finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => classify(e),
                _ => ErrorClass::Transient,
            },
            // Install refusals became the status; what is left is worth a retry.
            Error::Apply(source) => source.class(),
            Error::Machine(source) => source.class(),
            Error::Dereference(_) | Error::UpdateStatus(_) | Error::Cleanup(_) | Error::Copied(_) => {
                ErrorClass::Transient
            }
        }
    }
}

/// How soon a CSV is looked at again while the shared stores have not synced yet.
const UNSYNCED_RETRY: Duration = Duration::from_millis(500);

/// Reconciles one CSV, reading the OperatorGroups, CSVs and Subscriptions of
/// its namespace from the shared `stores`.
pub async fn reconcile(
    csv: Arc<ClusterServiceVersion>,
    ctx: Arc<Context>,
    stores: Stores,
) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if csv.labels().contains_key(labels::COPIED_FROM) {
        // A copy in a target namespace: kept by the copied-CSV controller.
        return Ok(Action::await_change());
    }
    if !ctx.is_leader() {
        // Standbys keep their caches warm and write nothing; a new leader
        // reconciles every CSV (see `crate::watches`).
        return Ok(Action::await_change());
    }
    if !stores.synced() || !stores.installs.synced() {
        // An unsynced store would read as "no OperatorGroup, no Subscription",
        // or have every object of an install written again.
        return Ok(Action::requeue(UNSYNCED_RETRY));
    }
    let namespace = csv.namespace().ok_or(Error::NoNamespace)?;
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
    let result = async {
        // The reads need no finalizer: both at once. The writes wait for it.
        let (csv, read) = futures::join!(
            with_finalizer(&api, csv.clone()),
            read_unless_deleted(&ctx, &stores, &csv)
        );
        let csv = csv?;
        finalizer(&api, FINALIZER, csv, |event| async {
            match event {
                finalizer::Event::Apply(csv) => install(&ctx, &stores, &api, &csv, read).await,
                finalizer::Event::Cleanup(csv) => {
                    crate::controllers::copiedcsv::delete_all(&ctx, &stores.copies, &csv)
                        .await
                        .map_err(Error::Copied)?;
                    cleanup::cleanup(&ctx, &csv).await.map_err(Error::Cleanup)
                }
            }
        })
        .await
    }
    .await;
    match result {
        Ok(action) => Ok(action),
        // The cache was behind: the CSV changed since it was read. The watch
        // brings the newer CSV, and with it the next pass.
        Err(finalizer::Error::AddFinalizer(kube::Error::Api(status))) if matches!(status.code, 409 | 422) => {
            Ok(Action::await_change())
        }
        Err(finalizer::Error::RemoveFinalizer(kube::Error::Api(status))) if status.code == 404 => {
            Ok(Action::await_change())
        }
        Err(e) => Err(Error::Finalizer(Box::new(e))),
    }
}

/// `csv` with the [`FINALIZER`]: added first when missing (and the CSV is
/// not being deleted), then the same pass goes on with the CSV the API server
/// returned, instead of waiting for the watch to bring it back. The patch
/// names the resourceVersion read, so a stale read fails with a conflict.
async fn with_finalizer(
    api: &Api<ClusterServiceVersion>,
    csv: Arc<ClusterServiceVersion>,
) -> Result<Arc<ClusterServiceVersion>, finalizer::Error<Error>> {
    if csv.metadata.deletion_timestamp.is_some() || csv.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(csv);
    }
    let mut finalizers = csv.finalizers().to_vec();
    finalizers.push(FINALIZER.to_owned());
    let patch = serde_json::json!({
        "metadata": {"finalizers": finalizers, "resourceVersion": csv.resource_version()},
    });
    let params = kube::api::PatchParams::default();
    api.patch(&csv.name_any(), &params, &kube::api::Patch::Merge(&patch))
        .await
        .map(Arc::new)
        .map_err(finalizer::Error::AddFinalizer)
}

/// What [`read_and_validate`] gives for a CSV that is not being deleted;
/// `None` for one that is (its cleanup reads what it needs).
type Read = Option<Result<(dereference::Dereferenced, validate::Validation), Error>>;

async fn read_unless_deleted(ctx: &Context, stores: &Stores, csv: &ClusterServiceVersion) -> Read {
    if csv.metadata.deletion_timestamp.is_some() {
        return None;
    }
    Some(read_and_validate(ctx, stores, csv).await)
}

/// The steps for a CSV that is not being deleted, after `read` (read and
/// validate): decide the phase, perform the decision, then write the status
/// it leads to.
async fn install(
    ctx: &Context,
    stores: &Stores,
    api: &Api<ClusterServiceVersion>,
    csv: &ClusterServiceVersion,
    read: Read,
) -> Result<Action, Error> {
    let read = match read {
        Some(read) => read,
        // Not read as being deleted, yet applied: cannot happen (a deletion
        // timestamp stays once set); read now rather than fail.
        None => read_and_validate(ctx, stores, csv).await,
    };
    let (found, validation) = read?;
    let facts = Facts {
        validation: &validation,
        replacement: found.replacement.as_ref(),
        replaced: found.replaced.as_ref(),
        upgrade_hold: found.upgrade_hold.as_deref(),
    };
    let now = crate::context::now();
    let live = csv.status.clone().unwrap_or_default();
    let requirements = shown_requirements(live.phase, &validation.requirements.statuses);
    // Pending and InstallReady are taken in this pass when nothing waits in between.
    let (status, decision) = phase::decide_ahead(&live, &facts, requirements, now);
    let live_copies = stores.installs.live();
    let applier = stamp::Applier {
        ctx,
        live: &live_copies,
    };
    // The companions and the decision's work are independent: both at once.
    let work = async {
        match decision {
            Decision::DeleteSelf => {
                tracing::info!(csv = %csv.name_any(), "deleting a replaced ClusterServiceVersion");
                ctx.delete(api, &csv.name_any())
                    .await
                    .map_err(Error::DeleteReplaced)?;
                Ok(None)
            }
            Decision::Settle(transition) => Ok(Some(Outcome {
                transition,
                ..Outcome::default()
            })),
            Decision::Install if csv.spec.install.machine().is_some() => {
                install_on_machines(ctx, stores, csv, &found, &status, now)
                    .await
                    .map(Some)
            }
            // decide() installs only with a membership and a valid strategy
            // (`None` otherwise).
            Decision::Install => install_deployments(applier, csv, &found, &validation, &status, now).await,
        }
    };
    let (annotated, outcome) = futures::try_join!(keep_companions(applier, stores, csv, &validation), work)?;
    // The annotations changed the CSV: its status is written at that version.
    let csv = match annotated {
        Some(version) => {
            let mut csv = csv.clone();
            csv.metadata.resource_version = Some(version);
            std::borrow::Cow::Owned(csv)
        }
        None => std::borrow::Cow::Borrowed(csv),
    };
    match outcome {
        Some(outcome) => record(ctx, api, &csv, &status, &validation, outcome, now).await,
        None => Ok(Action::await_change()),
    }
}

/// Reads what the CSV refers to and validates it: the APIServices and
/// machine hooks it requires are added to its requirements. Writes nothing.
async fn read_and_validate(
    ctx: &Context,
    stores: &Stores,
    csv: &ClusterServiceVersion,
) -> Result<(dereference::Dereferenced, validate::Validation), Error> {
    let found = dereference::dereference(ctx, stores, csv)
        .await
        .map_err(Error::Dereference)?;
    let mut validation = validate::validate(csv, &found);
    let installs = &stores.installs;
    serving::require_api_services(&installs.api_services.store, csv, &mut validation.requirements);
    if let Some(details) = csv.spec.install.machine() {
        let statuses = machine::requirements(ctx, &installs.machine_pools.store, csv, details)
            .await
            .map_err(Error::Machine)?;
        validation.requirements.met &= statuses
            .iter()
            .all(|s| s.status == olm_api::v1alpha1::StatusReason::Present);
        validation.requirements.statuses.extend(statuses);
    }
    Ok((found, validation))
}

/// The writes every decision starts with: the CSV's OperatorCondition (with
/// its RBAC and status) and, with a membership, the OperatorGroup annotations
/// on the CSV; each only when it is not as wanted. The CSV's resourceVersion
/// when the annotations were written.
async fn keep_companions(
    applier: stamp::Applier<'_>,
    stores: &Stores,
    csv: &ClusterServiceVersion,
    validation: &validate::Validation,
) -> Result<Option<String>, Error> {
    let conditions = &stores.installs.operator_conditions.store;
    let named = ObjectRef::new(&csv.name_any()).within(&csv.namespace().unwrap_or_default());
    let live = conditions.get(&named);
    // Independent writes: both at once.
    let condition = async {
        operator_condition::keep(applier.ctx, csv, live.as_deref(), applier.live)
            .await
            .map_err(Error::OperatorCondition)
    };
    let annotations = async {
        match &validation.membership {
            Ok(membership) => match update_status::annotations(csv, membership) {
                Some(annotations) => update_status::annotate(applier.ctx, &annotations)
                    .await
                    .map_err(Error::UpdateStatus),
                None => Ok(None),
            },
            Err(_) => Ok(None),
        }
    };
    futures::try_join!(condition, annotations).map(|((), annotated)| annotated)
}

/// Installs a CSV with the `machine` strategy on its machines.
async fn install_on_machines(
    ctx: &Context,
    stores: &Stores,
    csv: &ClusterServiceVersion,
    found: &dereference::Dereferenced,
    status: &ClusterServiceVersionStatus,
    now: Timestamp,
) -> Result<Outcome, Error> {
    let details = csv.spec.install.machine().expect("a machine strategy");
    let replacement = found.replacement.as_ref().map(|next| next.name.as_str());
    let health = machine::install(ctx, stores, csv, details, replacement)
        .await
        .map_err(Error::Machine)?;
    let outcome = InstallOutcome::Applied(health.clone());
    let after = phase::after_install(status, &outcome, now, ctx.settings.install_timeout);
    Ok(Outcome {
        transition: machine::explain_timeout(after.transition, &health),
        recheck_in: after.recheck_in,
        served: None,
    })
}

/// Installs a CSV's Deployments: fails it at once for invalid webhooks, as
/// OLM does, else builds, configures and applies its objects. `None` without
/// a membership or a valid strategy.
async fn install_deployments(
    applier: stamp::Applier<'_>,
    csv: &ClusterServiceVersion,
    found: &dereference::Dereferenced,
    validation: &validate::Validation,
    status: &ClusterServiceVersionStatus,
    now: Timestamp,
) -> Result<Option<Outcome>, Error> {
    let (Ok(membership), Ok(strategy)) = (&validation.membership, &validation.strategy) else {
        return Ok(None);
    };
    let deployments: Vec<String> = strategy.deployments.iter().map(|d| d.name.clone()).collect();
    if let Err(invalid) = webhooks::check(csv, &deployments) {
        let failed = phase::Transition {
            phase: CsvPhase::Failed,
            reason: olm_api::v1alpha1::CsvReason::InvalidWebhookDescription,
            message: invalid.to_string(),
        };
        return Ok(Some(Outcome {
            transition: Some(failed),
            ..Outcome::default()
        }));
    }
    let mut children = build::build(csv, membership, strategy).map_err(Error::Build)?;
    // OLM's order: the Subscription's config first, then the serving certificates.
    overrides::apply(
        &mut children.deployments,
        found.subscription_config.as_ref(),
        &found.replicas,
    );
    if let overrides::Replicas::Invalid {
        subscription,
        invalid,
    } = &found.replicas
    {
        applier
            .ctx
            .publish(subscription.as_ref(), overrides::invalid_replicas_event(invalid));
    }
    match relation_data::deliveries(csv) {
        Ok(asked) => relation_data::apply(&mut children.deployments, &asked, &found.related),
        Err(invalid) => applier.ctx.publish(csv, relation_data::invalid_event(&invalid)),
    }
    let (outcome, served) = apply_install(applier, csv, membership, children, found, now).await?;
    let timeout = applier.ctx.settings.install_timeout;
    let after = phase::after_install(status, &outcome, now, timeout);
    Ok(Some(Outcome {
        transition: after.transition,
        recheck_in: after.recheck_in,
        served,
    }))
}

/// Writes the status `outcome` leads to ([`decide::record`]), when it
/// changed, and says when to look again. The copies follow from the written
/// status, by their own controller.
async fn record(
    ctx: &Context,
    api: &Api<ClusterServiceVersion>,
    csv: &ClusterServiceVersion,
    status: &ClusterServiceVersionStatus,
    validation: &validate::Validation,
    outcome: Outcome,
    now: Timestamp,
) -> Result<Action, Error> {
    let live = csv.status.clone().unwrap_or_default();
    let facts = decide::Facts {
        live: &live,
        decided: status,
        requirements: &validation.requirements,
        machine: csv.spec.install.machine().is_some(),
        resync: ctx.settings.resync,
    };
    let record = decide::record(&facts, &outcome, now);
    // Also when nothing changed, so that the metrics' series exist after a restart.
    let next = record.status.unwrap_or(live);
    match update_status::write(ctx, api, csv, next).await {
        Ok(()) => Ok(Action::requeue(record.requeue)),
        // The CSV changed since it was read (its last status write had not
        // reached the store): the watch brings the newer one, and with it
        // the pass that decides from it.
        Err(update_status::Error::Status { source, .. }) if source.class() == ErrorClass::Conflict => {
            tracing::debug!(csv = %csv.name_any(), rv = ?csv.metadata.resource_version, %source, "status write conflicted");
            Ok(Action::await_change())
        }
        Err(error) => Err(Error::UpdateStatus(error)),
    }
}

/// Applies the install: the serving certificates and Services
/// ([`serving::write_before`]), the objects of `children` ([`apply`]), then
/// the webhooks and APIServices ([`serving::write_after`]), each decided
/// first ([`serving::plan`], [`apply::plan`]). Refusals become the outcome;
/// other failures are errors.
async fn apply_install(
    applier: stamp::Applier<'_>,
    csv: &ClusterServiceVersion,
    membership: &validate::Membership,
    mut children: build::Children,
    found: &dereference::Dereferenced,
    now: Timestamp,
) -> Result<(InstallOutcome, Option<serving::Serving>), Error> {
    let ctx = applier.ctx;
    let refused = |detail: String, serving: Option<serving::Serving>| {
        tracing::warn!(csv = %csv.name_any(), error = %detail, "the install was refused");
        (InstallOutcome::Rejected(detail), serving)
    };
    let lifetimes = ctx.settings.cert_lifetimes;
    let certificates = serving::certificates(csv, &found.serving, now, lifetimes);
    let certified = serving::certify(csv, certificates, now, lifetimes).map_err(Error::Serving)?;
    let input = serving::Input {
        csv,
        membership,
        certified: certified.as_ref(),
        found: &found.serving,
        crds: &found.crds,
        live: applier.live,
    };
    let serving_writes = match serving::plan::plan(&input, &mut children) {
        Ok(writes) => writes,
        Err(e) if e.is_terminal() => return Ok(refused(e.detail(), None)),
        Err(e) => return Err(Error::Serving(e)),
    };
    match serving::write_before(ctx, &serving_writes).await {
        Ok(()) => {}
        Err(e) if e.is_terminal() => return Ok(refused(e.detail(), None)),
        Err(e) => return Err(Error::Serving(e)),
    }
    // The certificates are written: the status says so even if what follows is refused.
    let serving = certified.map(|c| c.serving);
    let updated = apply::spec_changed(&children, found);
    let bindings = apply::Bindings::of(membership);
    let applied = match apply::plan(csv, &children, found, applier.live, bindings) {
        Ok(writes) => apply::apply(ctx, csv, membership, &children, found, &writes).await,
        Err(refusal) => Err(refusal),
    };
    let applied = match applied {
        Ok(applied) => applied,
        Err(e) if e.is_terminal() => return Ok(refused(e.detail(), serving)),
        Err(e) => return Err(Error::Apply(e)),
    };
    match serving::write_after(ctx, &serving_writes).await {
        Ok(()) => {}
        Err(e) if e.is_terminal() => return Ok(refused(e.detail(), serving)),
        Err(e) => return Err(Error::Serving(e)),
    }
    let health = phase::health(&applied.deployments);
    let outcome = if updated {
        InstallOutcome::Updated(health)
    } else {
        InstallOutcome::Applied(health)
    };
    Ok((outcome, serving))
}

/// What to do after a failed reconcile: olm-runtime's one policy.
pub fn error_policy(csv: Arc<ClusterServiceVersion>, error: &Error, ctx: Arc<Context>) -> Action {
    olm_runtime::error_policy(CONTROLLER, csv.as_ref(), error, &ctx.metrics.runtime().reconcile)
}

/// The CSV an object's `olm.owner*` labels name.
pub fn labelled_owner(meta: &ObjectMeta) -> Option<ObjectRef<ClusterServiceVersion>> {
    let labels = meta.labels.as_ref()?;
    if labels.get(labels::OWNER_KIND).map(String::as_str) != Some(OWNER_KIND) {
        return None;
    }
    let name = labels.get(labels::OWNER)?;
    let namespace = labels.get(labels::OWNER_NAMESPACE)?;
    Some(ObjectRef::new(name).within(namespace))
}

/// The CSVs of `namespace` (for an OperatorGroup there).
pub fn in_namespace(
    store: &Store<ClusterServiceVersion>,
    namespace: &str,
) -> Vec<ObjectRef<ClusterServiceVersion>> {
    store
        .state()
        .iter()
        .filter(|csv| csv.namespace().as_deref() == Some(namespace))
        .map(|csv| ObjectRef::from_obj(csv.as_ref()))
        .collect()
}

/// The CSVs that own or require the CRD named `crd`.
pub fn naming_crd(store: &Store<ClusterServiceVersion>, crd: &str) -> Vec<ObjectRef<ClusterServiceVersion>> {
    store
        .state()
        .iter()
        .filter(|csv| dereference::crd_names(csv).contains(crd))
        .map(|csv| ObjectRef::from_obj(csv.as_ref()))
        .collect()
}

/// The CSVs whose reconcile depends on `csv`: the one it replaces, those
/// that replace it, and those of its namespace held back by an owner conflict.
pub fn upgrade_neighbours(
    store: &Store<ClusterServiceVersion>,
    csv: &ClusterServiceVersion,
) -> Vec<ObjectRef<ClusterServiceVersion>> {
    let namespace = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    let blocked_by_owner = |other: &ClusterServiceVersion| {
        other.status.as_ref().and_then(|s| s.reason) == Some(olm_api::v1alpha1::CsvReason::OwnerConflict)
    };
    let mut related: Vec<_> = store
        .state()
        .iter()
        .filter(|other| {
            other.namespace().as_deref() == Some(namespace.as_str())
                && other.name_any() != name
                && (other.spec.replaces.as_deref() == Some(name.as_str())
                    || dereference::rolled_back_from(other) == Some(name.as_str())
                    || blocked_by_owner(other))
        })
        .map(|other| ObjectRef::from_obj(other.as_ref()))
        .collect();
    let older = [csv.spec.replaces.as_deref(), dereference::rolled_back_from(csv)];
    for older in older.into_iter().flatten() {
        related.push(ObjectRef::new(older).within(&namespace));
    }
    related
}
