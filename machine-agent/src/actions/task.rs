//! Which of the namespace's action tasks this machine runs, and what a run
//! leaves on its task (pure).

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use olm_api::{
    model::{Action, ActionConditionType, TaskState, UnitTask},
    substrate::UnitStatus,
};
use serde_json::Value;

use super::tool::Recorded;
use crate::units::hooks::tail;

/// The most of an action's stdout and of its stderr kept on its task (bytes, the tail).
pub const OUTPUT_TAIL: usize = 4 * 1024;

/// A task of this machine that waits to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Due {
    /// The Action's name.
    pub object: String,
    /// Its uid: the same name may be another Action later.
    pub uid: String,
    /// The action to run.
    pub action: String,
    /// Its parameters (a JSON object).
    pub params: Value,
    /// The operator (a package or a CSV name).
    pub operator: String,
    /// The CSV it was accepted against.
    pub csv: Option<String>,
    /// How long it may run, when the Action sets it; else the operator's
    /// hook timeout applies.
    pub timeout: Option<Duration>,
}

/// Whether `action` was accepted (its tasks are queued).
fn accepted(action: &Action) -> bool {
    action
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == ActionConditionType::Accepted.as_str() && c.status == "True")
}

/// The task of `machine` on `action`, if it has one.
pub fn task_of<'a>(action: &'a Action, machine: &str) -> Option<&'a UnitTask> {
    // A task with a Job runs in a Pod, never on a machine.
    action
        .status
        .as_ref()?
        .tasks
        .iter()
        .find(|t| t.unit == machine && t.job.is_none())
}

/// The accepted, not cancelled Actions with a pending task on `machine`,
/// oldest first (then by name): the order they run in.
pub fn due<'a>(actions: impl IntoIterator<Item = &'a Action>, machine: &str) -> Vec<Due> {
    let mut due: Vec<(Option<&Time>, Due)> = actions
        .into_iter()
        .filter(|a| accepted(a) && !a.spec.cancel && a.metadata.deletion_timestamp.is_none())
        .filter(|a| task_of(a, machine).is_some_and(|t| t.state == TaskState::Pending))
        .filter_map(|a| {
            let due = Due {
                object: a.name_any(),
                uid: a.metadata.uid.clone()?,
                action: a.spec.action.clone(),
                params: Value::Object(a.spec.params.clone().unwrap_or_default()),
                operator: a.spec.operator.clone(),
                csv: a.status.as_ref().and_then(|s| s.csv.clone()),
                timeout: a
                    .spec
                    .timeout_seconds
                    .and_then(|seconds| u64::try_from(seconds).ok())
                    .map(Duration::from_secs),
            };
            Some((a.metadata.creation_timestamp.as_ref(), due))
        })
        .collect();
    due.sort_by(|(a_at, a), (b_at, b)| {
        a_at.map(|t| t.0)
            .cmp(&b_at.map(|t| t.0))
            .then_with(|| a.object.cmp(&b.object))
    });
    due.into_iter().map(|(_, due)| due).collect()
}

/// The Actions whose task on `machine` says running: when the agent starts,
/// these were cut short by its stop (it runs none yet).
pub fn interrupted<'a>(actions: impl IntoIterator<Item = &'a Action>, machine: &str) -> Vec<String> {
    actions
        .into_iter()
        .filter(|a| task_of(a, machine).is_some_and(|t| t.state == TaskState::Running))
        .map(ResourceExt::name_any)
        .collect()
}

/// The unit of this machine that `due` runs on: the one running the CSV it
/// was accepted against, else one of its operator's application (the unit
/// may have been upgraded since).
pub fn local_unit(units: &BTreeMap<String, UnitStatus>, due: &Due) -> Option<String> {
    let by_csv = units
        .iter()
        .find(|(_, unit)| due.csv.as_deref() == Some(unit.csv.as_str()));
    let by_application = || {
        units
            .iter()
            .find(|(_, unit)| unit.application.as_deref() == Some(due.operator.as_str()))
    };
    by_csv.or_else(by_application).map(|(name, _)| name.clone())
}

/// How a run of an action ended.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// It could not start: why.
    NotRun(String),
    /// It ran past its timeout and was killed.
    TimedOut(Duration),
    /// It exited: its code (none when a signal ended it) and output.
    Exited {
        /// The exit code.
        code: Option<i32>,
        /// Its stdout.
        stdout: String,
        /// Its stderr.
        stderr: String,
    },
}

/// `task` as it starts running at `now`.
pub fn started(task: &UnitTask, now: &Time) -> UnitTask {
    UnitTask {
        state: TaskState::Running,
        started_at: Some(now.clone()),
        ..task.clone()
    }
}

/// `task` as its agent stopped while it ran.
pub fn aborted(task: &UnitTask, message: &str, now: &Time) -> UnitTask {
    UnitTask {
        state: TaskState::Aborted,
        message: Some(message.to_owned()),
        completed_at: Some(now.clone()),
        ..task.clone()
    }
}

/// `task` with what the run recorded so far, still running.
pub fn progressed(task: &UnitTask, recorded: &Recorded) -> UnitTask {
    UnitTask {
        results: recorded.results.clone(),
        log: recorded.log.clone(),
        ..task.clone()
    }
}

/// `task` as its run ended at `now`: completed, or failed with why
/// (`action-fail`'s message first), with its results, log, output and exit code.
pub fn ended(task: &UnitTask, recorded: Recorded, outcome: Outcome, now: &Time) -> UnitTask {
    let mut task = UnitTask {
        completed_at: Some(now.clone()),
        ..progressed(task, &recorded)
    };
    let failure = match outcome {
        Outcome::NotRun(why) => Some(why),
        Outcome::TimedOut(timeout) => Some(format!(
            "timed out: the action ran past its timeout of {}s and was killed",
            timeout.as_secs()
        )),
        Outcome::Exited { code, stdout, stderr } => {
            let kept = |text: &str| Some(tail(text, OUTPUT_TAIL)).filter(|t| !t.is_empty());
            task.stdout = kept(&stdout);
            task.stderr = kept(&stderr);
            task.exit_code = code;
            match code {
                Some(0) => None,
                Some(code) => Some(format!("the action exited with code {code}")),
                None => Some("the action was killed by a signal".to_owned()),
            }
        }
    };
    // What the action said of itself says more than how it ended.
    let failure = recorded.failed.or(failure);
    task.state = if failure.is_some() {
        TaskState::Failed
    } else {
        TaskState::Completed
    };
    task.message = failure;
    task
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(text: &str) -> Time {
        Time(text.parse().unwrap())
    }

    fn action(name: &str, created: &str, tasks: &[(&str, TaskState)], cancel: bool) -> Action {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Action",
            "metadata": {"name": name, "namespace": "edge", "uid": format!("uid-{name}"),
                         "creationTimestamp": created},
            "spec": {"operator": "db", "action": "backup", "params": {"path": "/srv"}, "cancel": cancel},
            "status": {"csv": "db.v1", "conditions": [{"type": "Accepted", "status": "True",
                "reason": "Queued", "message": "", "lastTransitionTime": created}],
                "tasks": tasks.iter().map(|(unit, state)| serde_json::json!({"unit": unit, "state": state}))
                    .collect::<Vec<_>>()}
        }))
        .unwrap()
    }

    #[test]
    fn due_tasks_are_this_machines_pending_ones_oldest_first() {
        let pending = TaskState::Pending;
        let actions = [
            action("late", "2026-01-01T00:00:09Z", &[("m1", pending)], false),
            action(
                "early",
                "2026-01-01T00:00:01Z",
                &[("m1", pending), ("m2", pending)],
                false,
            ),
            action("other-unit", "2026-01-01T00:00:02Z", &[("m2", pending)], false),
            action("cancelled", "2026-01-01T00:00:03Z", &[("m1", pending)], true),
            action(
                "running",
                "2026-01-01T00:00:04Z",
                &[("m1", TaskState::Running)],
                false,
            ),
            action(
                "done",
                "2026-01-01T00:00:05Z",
                &[("m1", TaskState::Completed)],
                false,
            ),
        ];
        let names: Vec<String> = due(&actions, "m1").into_iter().map(|d| d.object).collect();
        assert_eq!(names, ["early", "late"]);
        let first = &due(&actions, "m1")[0];
        assert_eq!(first.params["path"], "/srv");
        assert_eq!(first.csv.as_deref(), Some("db.v1"));
        assert_eq!(interrupted(&actions, "m1"), ["running"]);

        let mut refused = action("refused", "2026-01-01T00:00:01Z", &[("m1", pending)], false);
        refused.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
        assert!(due([&refused], "m1").is_empty(), "a refused action runs nowhere");
    }

    #[test]
    fn the_local_unit_runs_the_accepted_csv_or_is_of_the_operators_application() {
        let unit = |csv: &str, application: &str| UnitStatus {
            csv: csv.into(),
            version: "1".into(),
            state: olm_api::substrate::WorkloadState::Active,
            message: None,
            application: Some(application.into()),
            leader: false,
        };
        let units = BTreeMap::from([
            ("web.v1".to_owned(), unit("web.v1", "web")),
            ("db.v1".to_owned(), unit("db.v2", "db")),
        ]);
        let mut due = due(
            &[action(
                "a",
                "2026-01-01T00:00:01Z",
                &[("m1", TaskState::Pending)],
                false,
            )],
            "m1",
        )
        .remove(0);
        assert_eq!(
            local_unit(&units, &due).as_deref(),
            Some("db.v1"),
            "upgraded since"
        );
        due.csv = Some("web.v1".into());
        assert_eq!(local_unit(&units, &due).as_deref(), Some("web.v1"));
        due.csv = None;
        due.operator = "cache".into();
        assert_eq!(local_unit(&units, &due), None);
    }

    #[test]
    fn a_run_ends_completed_or_failed_with_why() {
        let now = time("2026-01-01T00:00:10Z");
        let task = started(&UnitTask::pending("m1"), &time("2026-01-01T00:00:00Z"));
        let recorded = Recorded {
            results: BTreeMap::from([("path".to_owned(), "/srv/b.tar".to_owned())]),
            ..Recorded::default()
        };
        let exited = |code| Outcome::Exited {
            code,
            stdout: "dumped\n".into(),
            stderr: String::new(),
        };
        let done = ended(&task, recorded.clone(), exited(Some(0)), &now);
        assert_eq!(done.state, TaskState::Completed);
        assert_eq!(
            (done.exit_code, done.stdout.as_deref(), done.stderr),
            (Some(0), Some("dumped"), None)
        );
        assert_eq!(done.results["path"], "/srv/b.tar");
        assert_eq!(done.message, None);
        assert_eq!(done.completed_at, Some(now.clone()));
        assert!(done.started_at.is_some());

        let failed = ended(&task, recorded.clone(), exited(Some(3)), &now);
        assert_eq!(failed.state, TaskState::Failed);
        assert_eq!(failed.message.as_deref(), Some("the action exited with code 3"));

        let said = Recorded {
            failed: Some("disk full".into()),
            ..recorded
        };
        let failed = ended(&task, said, exited(Some(0)), &now);
        assert_eq!(
            (failed.state, failed.message.as_deref(), failed.exit_code),
            (TaskState::Failed, Some("disk full"), Some(0))
        );

        let timed_out = ended(
            &task,
            Recorded::default(),
            Outcome::TimedOut(Duration::from_secs(5)),
            &now,
        );
        assert_eq!(timed_out.state, TaskState::Failed);
        assert_eq!(
            timed_out.message.as_deref(),
            Some("timed out: the action ran past its timeout of 5s and was killed")
        );
        assert_eq!(timed_out.exit_code, None);

        let not_run = ended(
            &task,
            Recorded::default(),
            Outcome::NotRun("no script".into()),
            &now,
        );
        assert_eq!(
            (not_run.state, not_run.message.as_deref()),
            (TaskState::Failed, Some("no script"))
        );
    }
}
