//! What to do with an InstallPlan, from what was read (pure).
//!
//! A reconcile asks [`decide`] first with no step applied yet, then again
//! after the steps it applied ([`Next::Apply`]) with their outcomes
//! ([`Applied`]), until the decision says when to look again. The steps not
//! done yet are applied in one pass, in stages ([`Stage`]): every CRD of the
//! plan, then every CSV, then the rest, the steps of a stage at once. Each
//! decision carries the whole status to write (only when it differs from what
//! the API server holds), so the plan records what the pass did, and a plan
//! interrupted at any point resumes where its status says (applying a step
//! again is harmless).

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{InstallPlanConditionReason, InstallPlanPhase, InstallPlanStatus, Step, StepStatus};
use olm_runtime::ErrorClass;

use super::execute::{StepCause, StepFailure};
use crate::controllers::plan::status;

/// How soon a plan that just started waiting or retrying is looked at again.
pub const RETRY: Duration = Duration::from_secs(3);

/// The longest pause between two looks at a plan that keeps waiting or retrying.
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// How long a plan waiting for an API also looks again on a timer. After that
/// only a change of a CRD or an APIService wakes it
/// ([`super::wake_on_api_changes`]), so a plan that waits for an API that
/// never comes costs nothing at rest.
pub const WAIT_FOR_API_ON_A_TIMER: Duration = Duration::from_secs(60);

/// What a decision is made from.
#[derive(Clone, Copy, Debug)]
pub struct Read<'a> {
    /// The plan's status as read from the store (its steps, phase, start time).
    pub status: &'a InstallPlanStatus,
    /// The status the API server holds now: the one read, or the last one
    /// this reconcile wrote.
    pub written: &'a InstallPlanStatus,
    /// Whether the plan is approved (`spec.approved`).
    pub approved: bool,
    /// The plan's `metadata.generation`.
    pub generation: Option<i64>,
    /// What applying steps reported so far in this reconcile, in order.
    pub applied: &'a [Applied],
    /// When the reconcile started: condition times, and how long the plan
    /// has been installing.
    pub now: &'a Time,
    /// How long transient failures are retried (`--install-plan-retry-timeout`).
    pub retry_timeout: Duration,
}

/// What applying one step reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Which step of the plan.
    pub index: usize,
    /// Created or Present, or why it could not be applied.
    pub outcome: Result<StepStatus, StepFailure>,
}

/// A phase transition worth a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// RequiresApproval → Installing.
    Approved,
    /// Installing → Complete.
    Completed,
    /// → Failed.
    Failed,
}

/// What the reconcile does after writing the decision's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Apply these stages of steps (indexes into the plan) in order, the
    /// steps of a stage at once, stopping after the first stage where one
    /// fails, then decide again with their outcomes.
    Apply(Vec<Vec<usize>>),
    /// Done for now: look again after this long, or (`None`) on a change.
    LookAgain(Option<Duration>),
    /// This replica stopped leading while applying a step (what was being
    /// applied): stop without touching the plan, the leader goes on.
    Stop(String),
}

/// Everything one decision says.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The status to write (first, as it records the outcomes so far), when
    /// it differs from [`Read::written`].
    pub status: Option<InstallPlanStatus>,
    /// What follows.
    pub next: Next,
    /// The phase transition this decision makes, if any.
    pub transition: Option<Transition>,
}

impl Decision {
    /// Nothing to write or apply; look again on a change.
    fn nothing() -> Decision {
        Decision {
            status: None,
            next: Next::LookAgain(None),
            transition: None,
        }
    }
}

/// Decides what to do with a plan (pure).
pub fn decide(read: &Read<'_>) -> Decision {
    match read.status.phase {
        InstallPlanPhase::Complete | InstallPlanPhase::Failed | InstallPlanPhase::Planning => {
            Decision::nothing()
        }
        InstallPlanPhase::RequiresApproval if !read.approved => Decision::nothing(),
        InstallPlanPhase::RequiresApproval | InstallPlanPhase::Installing => install(read),
    }
}

/// The decision for a plan that installs: fail it when a step may not be
/// created, record a failed step, apply the next batch, or complete it.
fn install(read: &Read<'_>) -> Decision {
    let approved = read.applied.is_empty() && read.status.phase == InstallPlanPhase::RequiresApproval;
    let (mut status, failed) = progress(read);
    let steps = status.plan.clone().unwrap_or_default();
    let mut decision = if let Some(message) = unsupported_step(&steps).filter(|_| read.applied.is_empty()) {
        status::fail(
            &mut status,
            InstallPlanConditionReason::ComponentFailed,
            message,
            read.now,
        );
        finish(read, status, Next::LookAgain(None), Some(Transition::Failed))
    } else if let Some((index, failure)) = failed {
        step_failed(read, status, index, failure)
    } else if let Some(batch) = next_batch(&steps) {
        // Before any step is applied there is nothing new to record.
        let write = !read.applied.is_empty();
        let decision = finish(read, status, Next::Apply(batch), None);
        Decision {
            status: decision.status.filter(|_| write),
            ..decision
        }
    } else {
        status::complete(&mut status, read.now);
        finish(read, status, Next::LookAgain(None), Some(Transition::Completed))
    };
    if approved {
        decision.transition = decision.transition.or(Some(Transition::Approved));
    }
    decision
}

/// The plan's status with the outcomes so far: Installing, started, each
/// applied step's status; and the step that failed, if one did.
fn progress(read: &Read<'_>) -> (InstallPlanStatus, Option<(usize, StepFailure)>) {
    let mut status = read.status.clone();
    status.phase = InstallPlanPhase::Installing;
    if status.start_time.is_none() {
        status.start_time = Some(read.now.clone());
    }
    let mut steps = status.plan.take().unwrap_or_default();
    let mut failed = None;
    for Applied { index, outcome } in read.applied {
        match (outcome, steps.get_mut(*index)) {
            (Ok(done), Some(step)) => {
                step.status = *done;
                status.message = None;
            }
            // The first failure in plan order is the one the status shows.
            (Err(failure), _) if failed.is_none() => failed = Some((*index, failure.clone())),
            (Err(_), _) => {}
            (Ok(_), None) => {}
        }
    }
    status.plan = Some(steps);
    (status, failed)
}

/// The decision to write `status` (with its observed generation and kstatus
/// conditions) when it changed, then go on with `next`.
fn finish(
    read: &Read<'_>,
    mut status: InstallPlanStatus,
    next: Next,
    transition: Option<Transition>,
) -> Decision {
    status.observed_generation = read.generation;
    status::set_kstatus(&mut status, read.now);
    Decision {
        status: (status != *read.written).then_some(status),
        next,
        transition,
    }
}

/// Records a failed step as its cause asks: wait for an API, retry, fail the
/// plan, or stop when no longer leading; and says when to look again.
fn step_failed(
    read: &Read<'_>,
    mut status: InstallPlanStatus,
    index: usize,
    failure: StepFailure,
) -> Decision {
    let StepFailure { cause, message } = failure;
    let waited = waited(&status, read.now);
    match handling(cause) {
        Handling::Stop => Decision {
            next: Next::Stop(message),
            ..Decision::nothing()
        },
        Handling::WaitForApi => {
            if let Some(step) = status.plan.as_mut().and_then(|steps| steps.get_mut(index)) {
                step.status = StepStatus::WaitingForApi;
            }
            status.message = Some(message);
            finish(read, status, Next::LookAgain(look_again_for_api(waited)), None)
        }
        // The timeout counts in whole seconds.
        Handling::Retry { until_timeout }
            if !until_timeout || waited.as_secs() < read.retry_timeout.as_secs() =>
        {
            status.message = Some(message);
            finish(read, status, Next::LookAgain(Some(next_look(waited))), None)
        }
        Handling::Retry { .. } => {
            let message = format!("gave up retrying: {message}");
            fail(read, status, message)
        }
        Handling::Fail => fail(read, status, message),
    }
}

/// The decision to fail the plan with `message`.
fn fail(read: &Read<'_>, mut status: InstallPlanStatus, message: String) -> Decision {
    let reason = InstallPlanConditionReason::ComponentFailed;
    status::fail(&mut status, reason, message, read.now);
    finish(read, status, Next::LookAgain(None), Some(Transition::Failed))
}

/// The stage of a plan a step is applied in: CRDs first, so that the CSVs
/// that own or require them find them; then CSVs, so that the other objects
/// of a bundle can name their CSV as owner; then the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// CustomResourceDefinitions.
    Crds,
    /// ClusterServiceVersions.
    Csvs,
    /// Everything else (Subscriptions of dependencies, a bundle's objects).
    Rest,
}

impl Stage {
    /// The stage of `step`.
    pub fn of(step: &Step) -> Stage {
        let r = &step.resource;
        match (r.group.as_str(), r.kind.as_str()) {
            ("apiextensions.k8s.io", "CustomResourceDefinition") => Stage::Crds,
            (olm_api::OPERATORS_GROUP, "ClusterServiceVersion") => Stage::Csvs,
            _ => Stage::Rest,
        }
    }
}

/// The steps not done yet, by [`Stage`] (in plan order within each, empty
/// stages left out): all of them are applied in one pass.
fn next_batch(steps: &[Step]) -> Option<Vec<Vec<usize>>> {
    let pending = |i: &usize| !matches!(steps[*i].status, StepStatus::Created | StepStatus::Present);
    let mut stages: BTreeMap<Stage, Vec<usize>> = BTreeMap::new();
    for i in (0..steps.len()).filter(pending) {
        stages.entry(Stage::of(&steps[i])).or_default().push(i);
    }
    (!stages.is_empty()).then(|| stages.into_values().collect())
}

/// Why the plan cannot be installed at all: its first step of a kind a plan may
/// not create, in words.
pub fn unsupported_step(steps: &[Step]) -> Option<String> {
    let step = steps
        .iter()
        .find(|s| s.status == StepStatus::UnsupportedResource)?;
    Some(format!(
        "step {} {} of bundle {}: an install plan may not create objects of kind {}",
        step.resource.kind, step.resource.name, step.resolving, step.resource.kind
    ))
}

/// What the plan does about a step that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// This replica stopped leading: stop without touching the plan.
    Stop,
    /// Mark the step WaitingForApi and look again soon.
    WaitForApi,
    /// Keep the plan Installing and retry soon; give up after the retry timeout
    /// unless `until_timeout` is false (a missing permission may be granted at
    /// any time, so OLM retries it for ever).
    Retry {
        /// Whether the retry timeout applies.
        until_timeout: bool,
    },
    /// Fail the plan: only a new plan can help.
    Fail,
}

/// How the plan handles a step failure of this cause.
pub fn handling(cause: StepCause) -> Handling {
    match cause {
        StepCause::NotLeader => Handling::Stop,
        StepCause::WaitingForApi => Handling::WaitForApi,
        StepCause::Api(ErrorClass::Forbidden) => Handling::Retry { until_timeout: false },
        StepCause::NotReady
        | StepCause::Api(ErrorClass::Transient | ErrorClass::Conflict | ErrorClass::Gone) => {
            Handling::Retry { until_timeout: true }
        }
        StepCause::Invalid | StepCause::Api(ErrorClass::Terminal) => Handling::Fail,
    }
}

/// How long the plan has been installing at `now` (waiting or retrying
/// included).
fn waited(status: &InstallPlanStatus, now: &Time) -> Duration {
    status
        .start_time
        .as_ref()
        .and_then(|start| Duration::try_from(now.0.duration_since(start.0)).ok())
        .unwrap_or_default()
}

/// How soon a plan that has waited `waited` for an API or a retry is looked at
/// again: every [`RETRY`] at first, so that a CRD created with the plan is
/// used at once, then a tenth of the time waited, at most [`MAX_RETRY`]. A plan
/// waiting for an API that never comes, or retrying a forbidden write, costs a
/// request a minute instead of twenty.
pub fn next_look(waited: Duration) -> Duration {
    (waited / 10).clamp(RETRY, MAX_RETRY)
}

/// When a plan that has waited `waited` for an API looks again on its own:
/// as [`next_look`] says during the first [`WAIT_FOR_API_ON_A_TIMER`], then
/// never (`None`): a CRD or APIService change wakes it.
pub fn look_again_for_api(waited: Duration) -> Option<Duration> {
    (waited < WAIT_FOR_API_ON_A_TIMER).then(|| next_look(waited))
}

#[cfg(test)]
mod tests;
