//! The InstallPlan controller: runs a plan once it may run.
//!
//! The Subscription controller plans (it writes the steps into the status); this
//! controller moves a plan through its phases:
//! RequiresApproval → (spec.approved) → Installing → Complete, or Failed.
//! Installing applies the steps not done yet in one pass, in stages (CRDs,
//! CSVs, the rest; the steps of a stage at once, [`execute::Executor`]), and
//! records what it did in the status, so a plan resumes where it stopped.
//! A step whose API is not served yet waits (WaitingForApi); transient failures
//! are retried for `install_plan_retry_timeout` (permission errors for ever, as
//! OLM does); anything else fails the plan with a message that names the step.
//!
//! A reconcile has the three steps of every reconciler. It *reads* the plan
//! (from the shared InstallPlan store the controller runs on); it *decides* in
//! [`decide::decide`] (pure) from the plan, its approval, what the steps applied
//! so far reported, the time and the retry timeout; it *applies*: the decided
//! steps, through [`execute::Executor`] (the external work: server-side apply
//! of objects of any kind), then asks [`decide::decide`] again with their
//! outcomes, and writes each decided status through the runtime's applier
//! ([`olm_runtime::apply::Writer::perform`]), after the steps it reports.

pub mod decide;
pub mod discovery;
pub mod execute;

use std::{sync::Arc, time::Duration};

use futures::{Stream, StreamExt, stream};
use kube::{
    Api, ResourceExt,
    runtime::{
        controller::Action,
        reflector::{ObjectRef, Store},
    },
};
use olm_api::v1alpha1::{InstallPlan, InstallPlanPhase, InstallPlanStatus, Step, StepStatus};
use olm_runtime::{
    ErrorClass, ReconcileError,
    apply::WriteError,
    effects::{Effects, StatusWrite},
};

use self::{
    decide::{Applied, Decision, Next, Read, Transition},
    execute::{Executor, StepCause, StepFailure},
};
use super::Context;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "installplan";

/// After a CRD or APIService changes, the pauses before each look of the plans
/// waiting for an API: at once, then 2, 10 and 30 seconds after the change, as the
/// API server's discovery may serve a new API a little after the change is seen.
const LOOKS_AFTER_AN_API_CHANGE: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_secs(2),
    Duration::from_secs(8),
    Duration::from_secs(20),
];

/// Errors of the InstallPlan controller. A step that fails is not an error of the
/// controller: it is recorded in the plan's status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The InstallPlan has no namespace (never from the API server).
    #[error("the InstallPlan has no namespace")]
    NoNamespace,
    /// The status could not be written.
    #[error("failed to write the status of InstallPlan {namespace}/{name}")]
    WriteStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// This replica stopped leading while applying a step.
    #[error("stopped applying InstallPlan {namespace}/{name}: {message}")]
    NotLeader {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What was being applied.
        message: String,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace => "invalid",
            Error::NotLeader { .. } => olm_runtime::reconcile::NOT_LEADER,
            Error::WriteStatus { .. } => "api",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace => ErrorClass::Terminal,
            // The next leadership term applies the plan again.
            Error::NotLeader { .. } => ErrorClass::Transient,
            Error::WriteStatus { source, .. } => source.class(),
        }
    }

    fn is_not_leader(&self) -> bool {
        matches!(self, Error::NotLeader { .. }) || olm_runtime::reconcile::lost_leadership(self)
    }
}

/// Reconciles one InstallPlan: reads it, then decides and applies until the
/// decision says when to look again.
pub async fn reconcile(plan: Arc<InstallPlan>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.reconciles.start(CONTROLLER);
    let namespace = plan.namespace().ok_or(Error::NoNamespace)?;
    let name = plan.name_any();
    if !ctx.writer.leadership().is_leader() {
        return Ok(Action::await_change());
    }
    // Read: the plan, from the store the controller runs on.
    let Some(status) = plan.status.as_ref() else {
        // Not planned yet: the Subscription controller writes the steps.
        return Ok(Action::await_change());
    };
    let steps = status.plan.as_deref().unwrap_or_default();
    let now = olm_runtime::conditions::now();
    let plans: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), &namespace);
    let executor = Executor::new(
        &ctx.client,
        &ctx.writer,
        &ctx.stores.csvs,
        &namespace,
        &ctx.discovered,
    );
    let mut written = status.clone();
    let mut applied: Vec<Applied> = Vec::new();
    loop {
        let decision = decide::decide(&Read {
            status,
            written: &written,
            approved: plan.spec.approved,
            generation: plan.metadata.generation,
            applied: &applied,
            now: &now,
            retry_timeout: ctx.options.install_plan_retry_timeout,
        });
        let Decision {
            status: write,
            next,
            transition,
        } = decision;
        if let Some(new) = write {
            write_status(&ctx, &plans, &name, &new).await?;
            written = new;
        }
        log(&namespace, &name, transition, &written);
        match next {
            Next::Apply(stages) => apply_stages(&executor, steps, &stages, &mut applied).await,
            Next::LookAgain(Some(after)) => return Ok(Action::requeue(after)),
            Next::LookAgain(None) => return Ok(Action::await_change()),
            Next::Stop(message) => {
                return Err(Error::NotLeader {
                    namespace,
                    name,
                    message,
                });
            }
        }
    }
}

/// Applies `stages` in order, the steps of each at once, until a stage where
/// one fails; records each outcome in `applied`, in plan order. Discovery for
/// every stage is read once, at once, before the first (what is not kept
/// already), and so are the live objects of every stage whose kinds it
/// lists; a later stage reads again only the groups of the CRDs the stages
/// before it applied.
async fn apply_stages(
    executor: &Executor<'_>,
    steps: &[Step],
    stages: &[Vec<usize>],
    applied: &mut Vec<Applied>,
) {
    let of = |stage: &[usize]| -> Vec<&Step> { stage.iter().filter_map(|&index| steps.get(index)).collect() };
    let all = of(&stages.concat());
    executor.discover(&all, false).await;
    // The objects of kinds served before this pass, read at once; not those
    // the CRDs of this pass may serve.
    let new_here: Vec<&str> = all.iter().filter_map(|step| crd_group(step)).collect();
    let served_before: Vec<&Step> = all
        .iter()
        .copied()
        .filter(|step| !new_here.contains(&step.resource.group.as_str()))
        .collect();
    executor.read_ahead(&served_before).await;
    let mut new_groups: Vec<&str> = Vec::new();
    for stage in stages {
        let stage_steps = of(stage);
        // Groups served by the CRDs of the stages before: new since the first read.
        let changed: Vec<&Step> = stage_steps
            .iter()
            .copied()
            .filter(|step| new_groups.contains(&step.resource.group.as_str()))
            .collect();
        if !changed.is_empty() {
            executor.discover(&changed, true).await;
        }
        new_groups.extend(stage_steps.iter().filter_map(|step| crd_group(step)));
        let outcomes = futures::future::join_all(stage.iter().map(|&index| async move {
            let outcome = match steps.get(index) {
                Some(step) => executor.apply(step).await,
                // Never from decide, which names steps of this plan; failing ends the pass.
                None => Err(StepFailure {
                    cause: StepCause::Invalid,
                    message: format!("the plan has no step {index}"),
                }),
            };
            Applied { index, outcome }
        }))
        .await;
        let failed = outcomes.iter().any(|a| a.outcome.is_err());
        applied.extend(outcomes);
        if failed {
            return;
        }
    }
}

/// The API group a CRD step serves (a CRD is named `<plural>.<group>`);
/// `None` for a step of another kind.
fn crd_group(step: &Step) -> Option<&str> {
    (decide::Stage::of(step) == decide::Stage::Crds)
        .then(|| step.resource.name.split_once('.').map(|(_, group)| group))
        .flatten()
}

/// Writes the plan's status, through the runtime's applier.
async fn write_status(
    ctx: &Context,
    plans: &Api<InstallPlan>,
    name: &str,
    status: &InstallPlanStatus,
) -> Result<(), Error> {
    let effects = Effects {
        status: Some(StatusWrite {
            name: name.to_owned(),
            status: status.clone(),
        }),
        ..Effects::none()
    };
    ctx.writer
        .perform(&ctx.client, plans, &effects, &())
        .await
        .map(drop)
        .map_err(|source| Error::WriteStatus {
            namespace: plans.namespace().unwrap_or_default().to_owned(),
            name: name.to_owned(),
            source,
        })
}

/// Logs a phase transition, once its status is written.
fn log(namespace: &str, name: &str, transition: Option<Transition>, status: &InstallPlanStatus) {
    match transition {
        None => {}
        Some(Transition::Approved) => tracing::info!(namespace, install_plan = name, "install plan approved"),
        Some(Transition::Completed) => {
            tracing::info!(namespace, install_plan = name, "install plan complete")
        }
        Some(Transition::Failed) => tracing::warn!(
            namespace,
            install_plan = name,
            message = status.message.as_deref().unwrap_or_default(),
            "install plan failed"
        ),
    }
}

/// The plans to look at again after each of `changes` (a CRD or an APIService
/// changed): those of `plans` waiting for an API, at once and again over the next
/// half minute ([`LOOKS_AFTER_AN_API_CHANGE`]), read from the store at each look.
pub fn wake_on_api_changes(
    changes: impl Stream<Item = ()> + Send + 'static,
    plans: Store<InstallPlan>,
) -> impl Stream<Item = ObjectRef<InstallPlan>> + Send + 'static {
    changes.flat_map_unordered(None, move |()| {
        let plans = plans.clone();
        stream::iter(LOOKS_AFTER_AN_API_CHANGE)
            .then(move |pause| {
                let plans = plans.clone();
                async move {
                    tokio::time::sleep(pause).await;
                    plans
                        .state()
                        .into_iter()
                        .filter(|plan| waits_for_api(plan))
                        .map(|plan| ObjectRef::from_obj(plan.as_ref()))
                        .collect::<Vec<_>>()
                }
            })
            .flat_map(stream::iter)
            .boxed()
    })
}

/// Whether `plan` is installing and a step waits for its API to be served.
pub fn waits_for_api(plan: &InstallPlan) -> bool {
    plan.status.as_ref().is_some_and(|status| {
        status.phase == InstallPlanPhase::Installing
            && status
                .plan
                .iter()
                .flatten()
                .any(|step| step.status == StepStatus::WaitingForApi)
    })
}

/// The error policy of the controller.
pub fn error_policy(plan: Arc<InstallPlan>, error: &Error, ctx: Arc<Context>) -> Action {
    olm_runtime::error_policy(CONTROLLER, plan.as_ref(), error, &ctx.reconciles)
}

#[cfg(test)]
mod tests;
