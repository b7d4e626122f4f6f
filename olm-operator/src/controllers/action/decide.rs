//! What reconciling an Action changes (pure): its status (accepted with one
//! pending task per unit, or refused with the reason; pending tasks
//! cancelled; tasks of lost units aborted; the phase from the tasks), and
//! which finished Actions of its namespace are past their retention. For an
//! operator installed as Deployments: the Job that runs the task, created
//! once the actions before it on the unit have ended, and the task moved on
//! as the Job goes ([`super::job_end`]).
//!
//! The status is shared with the agents, which write their units' tasks: it
//! is written only onto the copy it was decided from (its resource version),
//! so a decision made from a stale copy never overwrites an agent's write.

use std::time::Duration;

use k8s_openapi::{
    api::{batch::v1::Job, core::v1::Pod},
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::SignedDuration,
};
use kube::{Resource, ResourceExt};
use olm_api::{
    model::{Action, ActionConditionType, ActionReason, ActionStatus, TaskState, UnitTask},
    substrate::{MACHINE_READY, Machine, REASON_AGENT_LOST},
    v1alpha1::ClusterServiceVersion,
};
use olm_runtime::{
    conditions::{ConditionReason, ConditionType, Status, set_condition},
    effects::{Desired, Effects, Removal, StatusOf},
};

use super::{check::check, job, job_end};

/// How long, and how many, finished Actions are kept in a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// A finished Action older than this (since it finished) is removed.
    pub age: Duration,
    /// At most this many finished Actions are kept per namespace, the newest.
    pub count: usize,
}

impl Default for Retention {
    /// Juju's default (`max-action-results-age`: 336 hours), and 100 per namespace.
    fn default() -> Self {
        Retention {
            age: Duration::from_secs(336 * 3600),
            count: 100,
        }
    }
}

/// What a decision reads besides the Action: the objects of its namespace.
pub struct Inputs<'a> {
    /// The CSVs.
    pub csvs: &'a [&'a ClusterServiceVersion],
    /// The Machines.
    pub machines: &'a [&'a Machine],
    /// The Actions, this one included or not.
    pub actions: &'a [&'a Action],
    /// The Jobs of actions (labelled [`job::ACTION_LABEL`]).
    pub jobs: &'a [&'a Job],
    /// The Pods of those Jobs.
    pub pods: &'a [&'a Pod],
    /// How long finished Actions are kept.
    pub retention: Retention,
}

/// The `Accepted` condition type, for olm-runtime's typed conditions.
struct Accepted;

impl ConditionType for Accepted {
    fn as_str(&self) -> &'static str {
        ActionConditionType::Accepted.as_str()
    }
}

/// An Action's reason, for olm-runtime's typed conditions.
pub struct Reason(pub ActionReason);

impl ConditionReason for Reason {
    fn as_str(&self) -> &'static str {
        self.0.as_str()
    }
}

/// The effects of reconciling `action` among `inputs` at time `now`.
pub fn decide(
    action: &Action,
    inputs: &Inputs<'_>,
    now: &Time,
) -> Result<Effects<ActionStatus>, serde_json::Error> {
    let mut effects = Effects::none();
    effects.removals = expired(action, inputs, now);
    let gone = effects
        .removals
        .iter()
        .any(|r| r.uid.is_some() && r.uid == action.metadata.uid);
    let mut next = status(action, inputs, now);
    if !gone {
        effects.objects = start_jobs(action, &mut next, inputs, now)?;
    }
    if !gone && action.status.as_ref() != Some(&next) {
        let mut write = StatusOf::of::<Action, _>(action.namespace().as_deref(), &action.name_any(), &next)?;
        if let Some(uid) = &action.metadata.uid {
            write = write.with_uid(uid);
        }
        if let Some(version) = &action.metadata.resource_version {
            write = write.at_version(version);
        }
        effects.statuses.push(write);
    }
    Ok(effects)
}

/// How long until `action` may be removed for its age: `None` while it runs.
pub fn kept_for(action: &Action, retention: Retention, now: &Time) -> Option<Duration> {
    let finished = finished_at(action)?;
    let until = finished
        .0
        .checked_add(SignedDuration::try_from(retention.age).ok()?)
        .ok()?;
    Some(Duration::try_from(until.duration_since(now.0)).unwrap_or_default())
}

/// When `action` finished, if it did.
fn finished_at(action: &Action) -> Option<&Time> {
    let status = action.status.as_ref()?;
    status
        .phase
        .filter(|phase| phase.is_finished())
        .and(status.completed_at.as_ref())
}

/// The finished Actions of the namespace (`action` among them) past their
/// retention: finished longer ago than its age, or beyond its count.
fn expired(action: &Action, inputs: &Inputs<'_>, now: &Time) -> Vec<Removal> {
    let mut finished: Vec<(&Time, &Action)> = std::iter::once(action)
        .chain(
            inputs
                .actions
                .iter()
                .copied()
                .filter(|other| other.metadata.uid != action.metadata.uid),
        )
        .filter_map(|a| Some((finished_at(a)?, a)))
        .collect();
    // The newest first; one second apart at most, so the name decides ties alike everywhere.
    finished
        .sort_by(|(a_at, a), (b_at, b)| b_at.0.cmp(&a_at.0).then_with(|| a.name_any().cmp(&b.name_any())));
    finished
        .into_iter()
        .enumerate()
        .filter(|(index, (_, a))| {
            *index >= inputs.retention.count || kept_for(a, inputs.retention, now) == Some(Duration::ZERO)
        })
        .map(|(_, (_, a))| {
            let removal = Removal::of::<Action>(a.namespace().as_deref(), &a.name_any());
            match &a.meta().uid {
                Some(uid) => removal.with_uid(uid),
                None => removal,
            }
        })
        .collect()
}

/// The status `action` should hold.
fn status(action: &Action, inputs: &Inputs<'_>, now: &Time) -> ActionStatus {
    let generation = action.metadata.generation;
    let mut status = action.status.clone().unwrap_or_default();
    status.observed_generation = generation;
    let mut conditions = status.conditions.take().unwrap_or_default();
    let accepted = conditions
        .iter()
        .find(|c| c.type_ == ActionConditionType::Accepted.as_str())
        .map(|c| c.status == "True");
    match accepted {
        Some(false) => {}
        Some(true) => progress(action, &mut status, inputs, now),
        None => match check(action, inputs.csvs, inputs.machines) {
            Err(refusal) => {
                let message = format!("refused before anything ran: {}", refusal.message);
                set_condition(
                    &mut conditions,
                    Accepted,
                    Status::False,
                    Reason(refusal.reason),
                    &message,
                    generation,
                    now,
                );
                status.phase = Some(TaskState::Failed);
                status.message = Some(message);
                status.completed_at = Some(now.clone());
            }
            Ok(queued) => {
                let message = format!("queued on {}", queued.units.join(", "));
                set_condition(
                    &mut conditions,
                    Accepted,
                    Status::True,
                    Reason(ActionReason::Queued),
                    &message,
                    generation,
                    now,
                );
                status.csv = Some(queued.csv);
                status.tasks = queued
                    .units
                    .iter()
                    .map(|u| UnitTask {
                        job: queued.job.clone(),
                        ..UnitTask::pending(u)
                    })
                    .collect();
                progress(action, &mut status, inputs, now);
            }
        },
    }
    status.conditions = Some(conditions);
    status
}

/// The tasks of an accepted action moved on (cancelled, aborted), and the
/// phase and times they give.
fn progress(action: &Action, status: &mut ActionStatus, inputs: &Inputs<'_>, now: &Time) {
    for task in &mut status.tasks {
        let end = if task.state == TaskState::Pending && action.spec.cancel {
            Some((TaskState::Cancelled, "cancelled before it ran".to_owned()))
        } else if let Some(name) = task.job.clone() {
            if !task.state.is_finished() {
                let job = job_of(action, &name, inputs.jobs);
                job_end::advance(task, job, inputs.pods, job::timeout_seconds(action), now);
            }
            None
        } else if !task.state.is_finished() {
            lost(&task.unit, action, inputs.machines).map(|why| (TaskState::Aborted, why))
        } else {
            None
        };
        if let Some((state, message)) = end {
            task.state = state;
            task.message = Some(message);
            task.completed_at = Some(now.clone());
        }
    }
    status.started_at = status
        .tasks
        .iter()
        .filter_map(|t| t.started_at.as_ref())
        .min_by_key(|t| t.0)
        .cloned();
    let phase = phase(&status.tasks);
    status.phase = Some(phase);
    if phase.is_finished() {
        status.message = Some(summary(&status.tasks));
        if status.completed_at.is_none() {
            status.completed_at = Some(now.clone());
        }
    }
}

/// Job `name` of `action`: in its namespace, and owned by it.
fn job_of<'j>(action: &Action, name: &str, jobs: &[&'j Job]) -> Option<&'j Job> {
    let uid = action.metadata.uid.as_deref()?;
    jobs.iter().copied().find(|job| {
        job.name_any() == name
            && job.namespace() == action.namespace()
            && job.owner_references().iter().any(|o| o.uid == uid)
    })
}

/// The Jobs to create for `action`'s pending tasks that have none yet, once
/// no earlier action waits or runs on their unit; a task whose Job cannot be
/// made any more (its CSV or declaration changed) fails, in `status`.
fn start_jobs(
    action: &Action,
    status: &mut ActionStatus,
    inputs: &Inputs<'_>,
    now: &Time,
) -> Result<Vec<Desired>, serde_json::Error> {
    let mut objects = Vec::new();
    let mut failed = false;
    let csv = status.csv.clone().unwrap_or_default();
    for task in &mut status.tasks {
        let Some(name) = task.job.clone() else { continue };
        if task.state != TaskState::Pending
            || job_of(action, &name, inputs.jobs).is_some()
            || queued_behind(action, &task.unit, inputs.actions)
        {
            continue;
        }
        match job_for(action, &csv, inputs.csvs) {
            Ok(job) => objects.push(Desired::owned(&job)?.create_only()),
            Err(why) => {
                task.state = TaskState::Failed;
                task.message = Some(why);
                task.completed_at = Some(now.clone());
                failed = true;
            }
        }
    }
    if failed {
        let phase = phase(&status.tasks);
        status.phase = Some(phase);
        if phase.is_finished() {
            status.message = Some(summary(&status.tasks));
            status.completed_at.get_or_insert_with(|| now.clone());
        }
    }
    Ok(objects)
}

/// The Job of `action` from CSV `csv`, or why it cannot be made.
fn job_for(action: &Action, csv: &str, csvs: &[&ClusterServiceVersion]) -> Result<Job, String> {
    let found = csvs
        .iter()
        .find(|c| c.name_any() == csv && c.namespace() == action.namespace())
        .ok_or_else(|| format!("CSV {csv} is gone; its Job was not created"))?;
    let declared = olm_api::actions::Actions::of_annotations(csv, found.annotations())
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let spec = declared
        .get(&action.spec.action)
        .and_then(|a| a.job.clone())
        .ok_or_else(|| {
            format!(
                "CSV {csv} no longer declares a Job for action {}",
                action.spec.action
            )
        })?;
    let target = job::target(found, &spec).map_err(|e| e.to_string())?;
    job::build(action, &target, &spec).ok_or_else(|| "the Action has no UID to own its Job".to_owned())
}

/// Whether an action created before `action` has an unfinished task with a
/// Job on `unit`: actions on one unit run one at a time, in order.
fn queued_behind(action: &Action, unit: &str, actions: &[&Action]) -> bool {
    let key = |a: &Action| (a.metadata.creation_timestamp.as_ref().map(|t| t.0), a.name_any());
    actions.iter().any(|other| {
        other.metadata.uid != action.metadata.uid
            && other.namespace() == action.namespace()
            && key(other) < key(action)
            && other
                .status
                .iter()
                .flat_map(|s| s.tasks.iter())
                .any(|t| t.unit == unit && t.job.is_some() && !t.state.is_finished())
    })
}

/// Why unit `unit` is lost, if it is: its Machine is gone, or its agent
/// stopped renewing its Lease.
fn lost(unit: &str, action: &Action, machines: &[&Machine]) -> Option<String> {
    let machine = machines
        .iter()
        .find(|m| m.name_any() == unit && m.namespace() == action.namespace());
    let Some(machine) = machine else {
        return Some(format!("unit {unit} is lost: its Machine is gone"));
    };
    let agent_lost = machine
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == MACHINE_READY && c.reason == REASON_AGENT_LOST);
    agent_lost.then(|| format!("unit {unit} is lost: its agent stopped renewing its Lease"))
}

/// The state of the action as a whole: running while any task runs or some
/// have ended and others wait; once all ended, the worst of their ends.
fn phase(tasks: &[UnitTask]) -> TaskState {
    let any = |state: TaskState| tasks.iter().any(|t| t.state == state);
    if tasks.iter().all(|t| t.state == TaskState::Pending) {
        TaskState::Pending
    } else if !tasks.iter().all(|t| t.state.is_finished()) {
        TaskState::Running
    } else if any(TaskState::Failed) {
        TaskState::Failed
    } else if any(TaskState::Aborted) {
        TaskState::Aborted
    } else if any(TaskState::Cancelled) {
        TaskState::Cancelled
    } else {
        TaskState::Completed
    }
}

/// How the tasks ended, e.g. `completed on a; failed on b: disk full`.
fn summary(tasks: &[UnitTask]) -> String {
    tasks
        .iter()
        .map(|t| match &t.message {
            Some(message) => format!("{} on {}: {message}", t.state.as_str(), t.unit),
            None => format!("{} on {}", t.state.as_str(), t.unit),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
