//! Which step of an Action's life a status write marks (pure): it started
//! running, or it ended, and how. The controller turns a milestone into an
//! Event on the Action and into the `olm_rs_actions_total` and
//! `olm_rs_action_duration_seconds` metrics, once, when the write that marks
//! it succeeds.

use olm_api::model::{ActionConditionType, ActionStatus, TaskState};

/// How an action ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Refused before anything ran (its `Accepted` condition says why).
    Refused,
    /// Every task completed.
    Completed,
    /// A task failed.
    Failed,
    /// Cancelled before it ran.
    Cancelled,
    /// A unit was lost, or its agent stopped, while it ran.
    Aborted,
}

impl Outcome {
    /// The outcome as a metric label and an Event's reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Refused => "Refused",
            Outcome::Completed => "Completed",
            Outcome::Failed => "Failed",
            Outcome::Cancelled => "Cancelled",
            Outcome::Aborted => "Aborted",
        }
    }

    /// Whether the outcome is one a user should look at.
    pub fn is_warning(self) -> bool {
        !matches!(self, Outcome::Completed | Outcome::Cancelled)
    }
}

/// A step of an Action's life.
#[derive(Clone, Debug, PartialEq)]
pub enum Milestone {
    /// Its first task started running.
    Started,
    /// It ended: how, and how long it ran (from its first task's start to
    /// its end) when it ran at all.
    Ended {
        /// How it ended.
        outcome: Outcome,
        /// Seconds from start to end, when it started.
        seconds: Option<f64>,
    },
}

/// The milestone that writing `after` over `before` marks, if any.
pub fn milestone(before: Option<&ActionStatus>, after: &ActionStatus) -> Option<Milestone> {
    let was = before.and_then(|s| s.phase);
    let now = after.phase?;
    if was == Some(now) {
        return None;
    }
    let started = || was.is_none_or(|p| p == TaskState::Pending) && now != TaskState::Pending;
    if !now.is_finished() {
        return (now == TaskState::Running && started()).then_some(Milestone::Started);
    }
    if was.is_some_and(TaskState::is_finished) {
        return None;
    }
    let outcome = match now {
        TaskState::Completed => Outcome::Completed,
        TaskState::Failed if refused(after) => Outcome::Refused,
        TaskState::Failed => Outcome::Failed,
        TaskState::Cancelled => Outcome::Cancelled,
        _ => Outcome::Aborted,
    };
    Some(Milestone::Ended {
        outcome,
        seconds: ran_for(after),
    })
}

/// Whether `status` says the action was refused.
fn refused(status: &ActionStatus) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == ActionConditionType::Accepted.as_str() && c.status == "False")
}

/// Seconds from the first task's start to the action's end.
fn ran_for(status: &ActionStatus) -> Option<f64> {
    let (start, end) = (status.started_at.as_ref()?, status.completed_at.as_ref()?);
    let span = end.0.duration_since(start.0);
    Some(span.as_secs_f64().max(0.0))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        apimachinery::pkg::apis::meta::v1::{Condition, Time},
        jiff::Timestamp,
    };

    use super::*;

    fn status(phase: Option<TaskState>, accepted: &str, times: Option<(i64, i64)>) -> ActionStatus {
        let at = |s: i64| Time(Timestamp::from_second(s).expect("a time"));
        ActionStatus {
            phase,
            conditions: Some(vec![Condition {
                type_: "Accepted".into(),
                status: accepted.into(),
                reason: "Queued".into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: at(0),
            }]),
            started_at: times.map(|(s, _)| at(s)),
            completed_at: times.map(|(_, e)| at(e)),
            ..ActionStatus::default()
        }
    }

    #[test]
    fn a_status_write_marks_the_start_the_end_or_nothing() {
        use TaskState::*;
        let ended = |outcome, seconds| Some(Milestone::Ended { outcome, seconds });
        /// (phase before, phase after, Accepted's status, the milestone)
        type Case = (
            Option<TaskState>,
            Option<TaskState>,
            &'static str,
            Option<Milestone>,
        );
        let cases: &[Case] = &[
            (None, Some(Pending), "True", None),
            (Some(Pending), Some(Running), "True", Some(Milestone::Started)),
            (Some(Running), Some(Running), "True", None),
            (
                Some(Running),
                Some(Completed),
                "True",
                ended(Outcome::Completed, Some(7.0)),
            ),
            (
                Some(Running),
                Some(Failed),
                "True",
                ended(Outcome::Failed, Some(7.0)),
            ),
            (
                Some(Running),
                Some(Aborted),
                "True",
                ended(Outcome::Aborted, Some(7.0)),
            ),
            (
                Some(Pending),
                Some(Cancelled),
                "True",
                ended(Outcome::Cancelled, Some(7.0)),
            ),
            // A quick action can go from pending to done between two writes.
            (
                Some(Pending),
                Some(Completed),
                "True",
                ended(Outcome::Completed, Some(7.0)),
            ),
            (None, Some(Failed), "False", ended(Outcome::Refused, Some(7.0))),
            // Once ended, a later write (its retention) marks nothing again.
            (Some(Completed), Some(Failed), "True", None),
            (Some(Running), None, "True", None),
        ];
        for (before, after, accepted, expected) in cases {
            let before = before.map(|p| status(Some(p), "True", None));
            let after = status(*after, accepted, Some((100, 107)));
            assert_eq!(
                milestone(before.as_ref(), &after),
                *expected,
                "{before:?} -> {after:?}"
            );
        }
        // An action that never started has no duration.
        let refused = status(Some(TaskState::Failed), "False", None);
        assert_eq!(milestone(None, &refused), ended(Outcome::Refused, None));
    }
}
