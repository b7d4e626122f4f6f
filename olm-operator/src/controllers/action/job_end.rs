//! How an action's Job went, read back into its task (pure): running once the
//! Job exists; completed, with the results its container wrote as
//! `key=value` lines to its termination message, when the Job is Complete;
//! failed, with the Job's reason and the message, when the Job failed or
//! ran past its deadline; aborted when the Job is gone before it ended.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        batch::v1::Job,
        core::v1::{ContainerStateTerminated, Pod},
    },
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::SignedDuration,
};
use kube::ResourceExt;
use olm_api::model::{TaskState, UnitTask};

use super::job::CONTAINER;

/// The most results one task keeps, in bytes of keys and values (as the
/// machine agent's `action-set`).
pub const MAX_RESULTS_BYTES: usize = 16 * 1024;
/// The longest failure message a task keeps from a termination message.
const MAX_MESSAGE_BYTES: usize = 1024;
/// How long after its Job completed a task waits for the Pod's termination
/// message to show before it completes without results.
const POD_GRACE: SignedDuration = SignedDuration::from_secs(30);

/// Why a termination message does not hold results.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultsError {
    /// A line is not `key=value`, or its key is not lowercase letters,
    /// digits, '-' and '.'.
    #[error(
        "line {line} of the termination message is not a result: {text:?}; write `key=value` lines, keys of lowercase letters, digits, '-' and '.'"
    )]
    Malformed {
        /// The line, from 1.
        line: usize,
        /// Its text (its start).
        text: String,
    },
    /// The results are larger than a task keeps.
    #[error("the results are {size} bytes, more than the {MAX_RESULTS_BYTES} a task keeps")]
    TooLarge {
        /// Their size.
        size: usize,
    },
}

/// The results in a termination message: one `key=value` a line; blank lines
/// are skipped, a key given twice keeps its last value.
pub fn parse_results(message: &str) -> Result<BTreeMap<String, String>, ResultsError> {
    let mut results = BTreeMap::new();
    for (index, line) in message.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let malformed = || ResultsError::Malformed {
            line: index + 1,
            text: bounded(line, 80),
        };
        let (key, value) = line.split_once('=').ok_or_else(malformed)?;
        if !is_key(key) {
            return Err(malformed());
        }
        results.insert(key.to_owned(), value.to_owned());
    }
    let size: usize = results.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_RESULTS_BYTES {
        return Err(ResultsError::TooLarge { size });
    }
    Ok(results)
}

/// Lowercase letters, digits, '-' and '.', starting and ending with a letter
/// or digit (the keys `action-set` takes, dots for nesting).
fn is_key(key: &str) -> bool {
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = key.as_bytes();
    bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-' || *b == b'.')
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn bounded(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// How a Job ended, from its conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    /// `Complete`.
    Complete,
    /// `Failed`, with its reason and message.
    Failed { reason: String, message: String },
}

fn end_of(job: &Job) -> Option<(End, Option<Time>)> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .filter(|c| c.status == "True")
        .find_map(|c| match c.type_.as_str() {
            "Complete" => Some((End::Complete, c.last_transition_time.clone())),
            "Failed" => Some((
                End::Failed {
                    reason: c.reason.clone().unwrap_or_default(),
                    message: c.message.clone().unwrap_or_default(),
                },
                c.last_transition_time.clone(),
            )),
            _ => None,
        })
}

/// How the Job's container ended, from the newest of `pods` that belongs to
/// `job` and shows it terminated.
fn terminated<'p>(job: &Job, pods: &[&'p Pod]) -> Option<&'p ContainerStateTerminated> {
    let uid = job.uid()?;
    pods.iter()
        .filter(|pod| pod.owner_references().iter().any(|o| o.uid == uid))
        .filter_map(|pod| {
            let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
            let status = statuses.iter().find(|s| s.name == CONTAINER)?;
            status.state.as_ref()?.terminated.as_ref()
        })
        .max_by_key(|t| t.finished_at.as_ref().map(|f| f.0))
}

/// `task` moved on from how its Job `job` (with the Pods of its namespace's
/// action Jobs, `pods`) stands at `now`; `timeout` is the Job's deadline, in
/// seconds, for the message of a Job that ran past it.
pub fn advance(task: &mut UnitTask, job: Option<&Job>, pods: &[&Pod], timeout: i64, now: &Time) {
    let name = task.job.clone().unwrap_or_default();
    let Some(job) = job else {
        if task.state == TaskState::Running {
            finish(
                task,
                TaskState::Aborted,
                Some(format!("its Job {name} is gone")),
                now,
            );
        }
        return;
    };
    if task.state == TaskState::Pending {
        task.state = TaskState::Running;
        task.started_at = Some(
            job.status
                .as_ref()
                .and_then(|s| s.start_time.clone())
                .unwrap_or_else(|| now.clone()),
        );
    }
    let Some((end, since)) = end_of(job) else {
        return;
    };
    let container = terminated(job, pods);
    if let Some(container) = container {
        task.exit_code = Some(container.exit_code);
    }
    let text = container.and_then(|c| c.message.clone()).unwrap_or_default();
    match end {
        End::Complete => match (container, parse_results(&text)) {
            (None, _) if waiting_for_pod(since.as_ref(), now) => {}
            (None, _) => finish(
                task,
                TaskState::Completed,
                Some(format!("no results: the Pod of Job {name} is gone")),
                now,
            ),
            (Some(_), Ok(results)) => {
                task.results = results;
                finish(task, TaskState::Completed, None, now);
            }
            (Some(_), Err(e)) => finish(task, TaskState::Failed, Some(format!("Job {name}: {e}")), now),
        },
        End::Failed { reason, message } => {
            if let Ok(results) = parse_results(&text) {
                task.results = results;
            }
            let why = if reason == "DeadlineExceeded" {
                format!("timed out: Job {name} ran past its timeout of {timeout}s and was stopped")
            } else {
                let exit = container
                    .map(|c| format!(", exit code {}", c.exit_code))
                    .unwrap_or_default();
                format!("Job {name} failed ({reason}{exit}): {message}")
            };
            let why = match text.trim() {
                "" => why,
                text => format!("{why}; {}", bounded(text, MAX_MESSAGE_BYTES)),
            };
            finish(task, TaskState::Failed, Some(why), now);
        }
    }
}

/// Whether a Job that completed `since` may still show its Pod's end at `now`.
fn waiting_for_pod(since: Option<&Time>, now: &Time) -> bool {
    since.is_some_and(|since| now.0.duration_since(since.0) < POD_GRACE)
}

fn finish(task: &mut UnitTask, state: TaskState, message: Option<String>, now: &Time) {
    task.state = state;
    task.message = message;
    task.completed_at = Some(now.clone());
}

#[cfg(test)]
#[path = "job_end_tests.rs"]
mod tests;
