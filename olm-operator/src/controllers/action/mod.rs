//! The Action controller: checks an Action (`model.olm-rs.dev`) once, before
//! anything runs, and queues it or refuses it with a named reason in its
//! `Accepted` condition ([`check`]); then keeps its tasks' bookkeeping that
//! needs no agent: cancelling pending tasks when the user sets
//! `spec.cancel`, aborting the tasks of lost units, the phase from the tasks;
//! and removes finished Actions past their retention ([`decide::Retention`]).
//! The agents of the units run the tasks and write their results; for an
//! operator installed as Deployments, the controller runs each task as a Job
//! ([`job`]) and reads its end back ([`job_end`]). The write
//! that marks an Action's start or end ([`milestone`]) also gives an Event on
//! it and, for its end, the `olm_rs_actions_total` and
//! `olm_rs_action_duration_seconds` metrics.
//!
//! A reconcile reads the shared stores (CSVs, Machines, Actions, the Jobs of
//! actions and their Pods), decides
//! with [`decide::decide`] (pure), and has the runtime's applier write the
//! status, create Jobs and remove expired Actions. It is triggered by the
//! Action, by any CSV, Machine or other Action of its namespace, and by its
//! Job and that Job's Pods ([`of_labelled`]).

pub mod check;
pub mod decide;
pub mod job;
pub mod job_end;
pub mod milestone;
#[cfg(test)]
mod tests;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::{batch::v1::Job, core::v1::Pod};
use kube::runtime::events::{Event, EventType};
use kube::{
    Api, Resource, ResourceExt,
    runtime::{
        controller::Action as Next,
        reflector::{ObjectRef, Store},
    },
};
use olm_api::{
    model::{Action, ActionStatus},
    substrate::Machine,
    v1alpha1::ClusterServiceVersion,
};
use olm_runtime::{ErrorClass, ReconcileError};

use crate::{context::Context, stores::Cache};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "action";

/// How soon an action is looked at again while the stores have not synced yet.
const UNTIL_SYNCED: Duration = Duration::from_secs(1);

/// The stores an Action reconcile reads.
#[derive(Clone)]
pub struct Sources {
    /// Every CSV (not the copies).
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every Machine.
    pub machines: Cache<Machine>,
    /// Every Action.
    pub actions: Cache<Action>,
    /// The Jobs of actions (labelled [`job::ACTION_LABEL`]).
    pub jobs: Cache<Job>,
    /// The Pods of those Jobs (labelled alike).
    pub pods: Cache<Pod>,
}

impl Sources {
    /// Whether every store holds a complete list.
    fn synced(&self) -> bool {
        self.csvs.synced.get()
            && self.machines.synced.get()
            && self.actions.synced.get()
            && self.jobs.synced.get()
            && self.pods.synced.get()
    }
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Action has no namespace (it always should).
    #[error("Action {0} has no namespace")]
    NoNamespace(String),
    /// The status could not be made into JSON (it always can).
    #[error("failed to serialize the status of Action {name}")]
    Serialize {
        /// The Action.
        name: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// Writing the status, creating a Job or removing expired Actions failed.
    #[error("failed to write Action {namespace}/{name}, create its Job or remove expired Actions")]
    Write {
        /// The Action's namespace.
        namespace: String,
        /// The Action.
        name: String,
        /// The cause.
        #[source]
        source: olm_runtime::apply::WriteError,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace(_) => "invalid",
            Error::Serialize { .. } => "build",
            Error::Write { .. } => "update_status",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace(_) | Error::Serialize { .. } => ErrorClass::Terminal,
            Error::Write { source, .. } => source.class(),
        }
    }
}

/// Reconciles one Action from the shared `sources`.
pub async fn reconcile(action: Arc<Action>, ctx: Arc<Context>, sources: Sources) -> Result<Next, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if !ctx.is_leader() {
        return Ok(Next::await_change());
    }
    if !sources.synced() {
        // An unsynced store would read as "not installed" or "no unit".
        return Ok(Next::requeue(UNTIL_SYNCED));
    }
    let name = action.name_any();
    let namespace = action
        .namespace()
        .ok_or_else(|| Error::NoNamespace(name.clone()))?;

    // Read: the CSVs, Machines and Actions of the namespace.
    let csvs = crate::stores::in_namespace(&sources.csvs.store, &namespace);
    let machines = crate::stores::in_namespace(&sources.machines.store, &namespace);
    let actions = crate::stores::in_namespace(&sources.actions.store, &namespace);
    let csvs: Vec<&ClusterServiceVersion> = csvs.iter().map(AsRef::as_ref).collect();
    let machines: Vec<&Machine> = machines.iter().map(AsRef::as_ref).collect();
    let actions: Vec<&Action> = actions.iter().map(AsRef::as_ref).collect();
    let jobs = crate::stores::in_namespace(&sources.jobs.store, &namespace);
    let pods = crate::stores::in_namespace(&sources.pods.store, &namespace);
    let jobs: Vec<&Job> = jobs.iter().map(AsRef::as_ref).collect();
    let pods: Vec<&Pod> = pods.iter().map(AsRef::as_ref).collect();
    let retention = ctx.settings.action_retention;
    let inputs = decide::Inputs {
        csvs: &csvs,
        machines: &machines,
        actions: &actions,
        jobs: &jobs,
        pods: &pods,
        retention,
    };

    // Decide, then apply.
    let now = olm_runtime::conditions::now();
    let effects = decide::decide(&action, &inputs, &now).map_err(|source| Error::Serialize {
        name: name.clone(),
        source,
    })?;
    let api: Api<Action> = Api::namespaced(ctx.client.clone(), &namespace);
    let done = ctx
        .writer
        .perform(&ctx.client, &api, &effects, &())
        .await
        .map_err(|source| Error::Write {
            namespace: namespace.clone(),
            name: name.clone(),
            source,
        })?;
    if done.statuses > 0
        && let Some(written) = effects.statuses.first()
    {
        tracing::info!(action = %name, %namespace, phase = %written.status["phase"], "Action status updated");
        let next: Option<ActionStatus> = serde_json::from_value(written.status.clone()).ok();
        if let Some(next) = next
            && let Some(step) = milestone::milestone(action.status.as_ref(), &next)
        {
            mark(&ctx, &action, &next, &step);
        }
    }
    if done.removed > 0 {
        tracing::info!(%namespace, removed = done.removed, "finished Actions past their retention removed");
    }
    // A finished action is looked at again when its retention ends.
    let next = decide::kept_for(&action, retention, &now)
        .map_or(ctx.settings.resync, |left| left.min(ctx.settings.resync));
    Ok(Next::requeue(next.max(UNTIL_SYNCED)))
}

/// Marks `step` of `action`'s life: an Event on it and, when it ended, the
/// Action metrics.
fn mark(ctx: &Context, action: &Action, status: &ActionStatus, step: &milestone::Milestone) {
    let (type_, reason, note) = match step {
        milestone::Milestone::Started => (
            EventType::Normal,
            "Started",
            format!(
                "action {} of operator {} started",
                action.spec.action, action.spec.operator
            ),
        ),
        milestone::Milestone::Ended { outcome, seconds } => {
            ctx.metrics.action_ended(
                &action.spec.operator,
                &action.spec.action,
                outcome.as_str(),
                *seconds,
            );
            let type_ = if outcome.is_warning() {
                EventType::Warning
            } else {
                EventType::Normal
            };
            let message = status.message.clone();
            let note = format!(
                "action {} of operator {} ended: {}{}",
                action.spec.action,
                action.spec.operator,
                outcome.as_str().to_lowercase(),
                message.map(|m| format!(" ({m})")).unwrap_or_default()
            );
            (type_, outcome.as_str(), note)
        }
    };
    ctx.publish(
        action,
        Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: "Run".to_owned(),
            secondary: None,
        },
    );
}

/// What to do after a failed reconcile.
pub fn error_policy(action: Arc<Action>, error: &Error, ctx: Arc<Context>) -> Next {
    olm_runtime::error_policy(
        CONTROLLER,
        action.as_ref(),
        error,
        &ctx.metrics.runtime().reconcile,
    )
}

/// The Action that `object` (an action's Job or Pod) is labelled with
/// ([`job::ACTION_LABEL`]).
pub fn of_labelled(object: &impl Resource) -> Option<ObjectRef<Action>> {
    let meta = object.meta();
    let name = meta.labels.as_ref()?.get(job::ACTION_LABEL)?;
    Some(ObjectRef::new(name).within(meta.namespace.as_deref()?))
}

/// The Actions of `namespace` (for another Action there: a finished one may
/// push an older one past the retention count).
pub fn in_namespace(store: &Store<Action>, namespace: &str) -> Vec<ObjectRef<Action>> {
    of_namespace(store, namespace, |_| true)
}

/// The Actions of `namespace` that have not finished (for a CSV or Machine
/// there: it may accept, refuse or abort them; finished ones stay as they are).
pub fn unfinished_in_namespace(store: &Store<Action>, namespace: &str) -> Vec<ObjectRef<Action>> {
    of_namespace(store, namespace, |action| {
        !action
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .is_some_and(|phase| phase.is_finished())
    })
}

fn of_namespace(
    store: &Store<Action>,
    namespace: &str,
    keep: impl Fn(&Action) -> bool,
) -> Vec<ObjectRef<Action>> {
    store
        .state()
        .iter()
        .filter(|action| action.meta().namespace.as_deref() == Some(namespace))
        .filter(|action| keep(action))
        .map(|action| ObjectRef::from_obj(action.as_ref()))
        .collect()
}
