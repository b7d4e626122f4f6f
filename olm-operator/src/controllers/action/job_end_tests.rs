use k8s_openapi::jiff::Timestamp;

use super::*;

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("a time"))
}

fn from<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("an object")
}

/// Job `backup-1` with `condition` (type, reason, message) true since second 100.
fn job(condition: Option<(&str, &str, &str)>) -> Job {
    let conditions: Vec<serde_json::Value> = condition
        .into_iter()
        .map(|(type_, reason, message)| {
            serde_json::json!({"type": type_, "status": "True", "reason": reason, "message": message,
                               "lastTransitionTime": "1970-01-01T00:01:40Z"})
        })
        .collect();
    from(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "backup-1", "namespace": "ns", "uid": "job-uid"},
        "status": {"startTime": "1970-01-01T00:00:50Z", "conditions": conditions},
    }))
}

/// A Pod of the Job whose container ended with `exit` and `message`.
fn pod(owner: &str, exit: i32, message: &str) -> Pod {
    from(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "backup-1-x", "namespace": "ns",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "backup-1", "uid": owner}]},
        "status": {"containerStatuses": [{"name": "action", "image": "i", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"terminated": {"exitCode": exit, "message": message,
            "finishedAt": "1970-01-01T00:01:39Z"}}}]},
    }))
}

fn task(state: TaskState) -> UnitTask {
    UnitTask {
        state,
        job: Some("backup-1".into()),
        ..UnitTask::pending("db-operator")
    }
}

#[test]
fn results_are_key_value_lines_and_anything_else_is_named() {
    let results = parse_results("path=/srv/b.tgz\n\nsize=42\nnested.key-1=a=b\nsize=43\n").unwrap();
    assert_eq!(
        results,
        BTreeMap::from([
            ("nested.key-1".to_owned(), "a=b".to_owned()),
            ("path".to_owned(), "/srv/b.tgz".to_owned()),
            ("size".to_owned(), "43".to_owned()),
        ])
    );
    assert_eq!(parse_results("").unwrap(), BTreeMap::new());
    for (text, line) in [
        ("path=/srv\njust words", 2),
        ("Path=/srv", 1),
        ("=x", 1),
        ("key.=x", 1),
    ] {
        match parse_results(text) {
            Err(ResultsError::Malformed { line: found, .. }) => assert_eq!(found, line, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    let huge = format!("big={}", "x".repeat(MAX_RESULTS_BYTES));
    assert!(matches!(parse_results(&huge), Err(ResultsError::TooLarge { .. })));
    let long = format!("{}é", "x".repeat(100));
    let err = parse_results(&long).unwrap_err().to_string();
    assert!(err.contains("line 1"), "{err}");
}

#[test]
fn a_task_follows_its_job() {
    let now = at(110);
    /// (the task's state, the Job's condition, the Pod's owner, exit code and
    /// message; the state, a part of the message and the results after)
    type Case<'a> = (
        TaskState,
        Option<Option<(&'a str, &'a str, &'a str)>>,
        Option<(&'a str, i32, &'a str)>,
        TaskState,
        Option<&'a str>,
        &'a [(&'a str, &'a str)],
    );
    let cases: &[Case] = &[
        // No Job yet: a pending task waits; a running one lost its Job.
        (TaskState::Pending, None, None, TaskState::Pending, None, &[]),
        (
            TaskState::Running,
            None,
            None,
            TaskState::Aborted,
            Some("its Job backup-1 is gone"),
            &[],
        ),
        // The Job runs.
        (
            TaskState::Pending,
            Some(None),
            None,
            TaskState::Running,
            None,
            &[],
        ),
        // Complete: the results from the termination message.
        (
            TaskState::Running,
            Some(Some(("Complete", "", ""))),
            Some(("job-uid", 0, "path=/srv/b.tgz\nsize=42\n")),
            TaskState::Completed,
            None,
            &[("path", "/srv/b.tgz"), ("size", "42")],
        ),
        // A Pod of another Job of the name is not read; within the grace the task waits.
        (
            TaskState::Running,
            Some(Some(("Complete", "", ""))),
            Some(("other-uid", 0, "path=/x")),
            TaskState::Running,
            None,
            &[],
        ),
        (
            TaskState::Running,
            Some(Some(("Complete", "", ""))),
            Some(("job-uid", 0, "not a result")),
            TaskState::Failed,
            Some("Job backup-1: line 1 of the termination message is not a result"),
            &[],
        ),
        (
            TaskState::Running,
            Some(Some((
                "Failed",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ))),
            Some(("job-uid", 3, "disk full")),
            TaskState::Failed,
            Some(
                "Job backup-1 failed (BackoffLimitExceeded, exit code 3): Job has reached the specified backoff limit; disk full",
            ),
            &[],
        ),
        (
            TaskState::Running,
            Some(Some((
                "Failed",
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
            ))),
            None,
            TaskState::Failed,
            Some("timed out: Job backup-1 ran past its timeout of 30s and was stopped"),
            &[],
        ),
    ];
    for (before, job_state, pod_state, after, message, results) in cases {
        let job = job_state.map(job);
        let pods: Vec<Pod> = pod_state
            .iter()
            .map(|(owner, exit, message)| pod(owner, *exit, message))
            .collect();
        let pods: Vec<&Pod> = pods.iter().collect();
        let mut moved = task(*before);
        advance(&mut moved, job.as_ref(), &pods, 30, &now);
        let case = format!("{before:?} {job_state:?} {pod_state:?}");
        assert_eq!(moved.state, *after, "{case}");
        match message {
            Some(part) => assert!(
                moved.message.as_deref().is_some_and(|m| m.contains(part)),
                "{case}: {:?}",
                moved.message
            ),
            None => assert_eq!(moved.message, None, "{case}"),
        }
        let expected: BTreeMap<String, String> = results
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(moved.results, expected, "{case}");
        assert_eq!(moved.completed_at.is_some(), after.is_finished(), "{case}");
        if *before == TaskState::Pending && *after == TaskState::Running {
            assert_eq!(moved.started_at, Some(at(50)), "started when the Job did: {case}");
        }
    }
}

#[test]
fn a_complete_job_whose_pod_never_shows_completes_without_results_after_a_grace() {
    let complete = job(Some(("Complete", "", "")));
    let mut waiting = task(TaskState::Running);
    advance(&mut waiting, Some(&complete), &[], 30, &at(110));
    assert_eq!(waiting.state, TaskState::Running);
    let mut late = task(TaskState::Running);
    advance(&mut late, Some(&complete), &[], 30, &at(200));
    assert_eq!(late.state, TaskState::Completed);
    assert_eq!(
        late.message.as_deref(),
        Some("no results: the Pod of Job backup-1 is gone")
    );
}
