use k8s_openapi::jiff::Timestamp;
use olm_api::model::ActionSpec;

use super::*;

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("a time"))
}

fn now() -> Time {
    at(1_800_000_000)
}

fn from<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("an object")
}

const DB_ACTIONS: &str = "backup:\n  description: Back up.\n  params:\n    path: {type: string, minLength: 1}\n    level: {type: integer, maximum: 9}\n  required: [path]\npause: {description: Stop writes.}";

/// A CSV of package `package` in `phase`, on machine pool `edge` (or as a
/// Deployment when `machine` is false), declaring `actions`.
fn csv(package: &str, phase: &str, machine: bool, actions: &str) -> ClusterServiceVersion {
    let install = if machine {
        serde_json::json!({"strategy": "machine", "spec": {"pool": "edge", "hooks": {"configMap": "hooks"}}})
    } else {
        serde_json::json!({"strategy": "deployment", "spec": {"deployments": []}})
    };
    from(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": format!("{package}.v1.0.0"), "namespace": "ns",
            "labels": {format!("operators.coreos.com/{package}.ns"): ""},
            "annotations": {"olm-rs.dev/actions": actions},
        },
        "spec": {"displayName": package, "install": install},
        "status": {"phase": phase},
    }))
}

/// Machine `name` of pool `edge` running a unit of `csv`, its agent `lost` or not.
fn machine(name: &str, csv: &str, lost: bool) -> Machine {
    let (status, reason) = if lost {
        ("Unknown", "AgentLost")
    } else {
        ("True", "AgentRunning")
    };
    from(serde_json::json!({
        "apiVersion": "substrate.olm-rs.dev/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"pool": "edge"},
        "status": {
            "units": [{"csv": csv, "version": "1.0.0", "state": "active"}],
            "conditions": [{"type": "Ready", "status": status, "reason": reason, "message": "",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        },
    }))
}

fn action(name: &str, operator: &str, act: &str, params: serde_json::Value, units: &[&str]) -> Action {
    let mut action = Action::new(
        name,
        ActionSpec {
            operator: operator.to_owned(),
            action: act.to_owned(),
            params: params.as_object().cloned(),
            units: units.iter().map(|u| (*u).to_owned()).collect(),
            leader: false,
            timeout_seconds: None,
            cancel: false,
        },
    );
    action.metadata.namespace = Some("ns".into());
    action.metadata.uid = Some(format!("uid-{name}"));
    action.metadata.resource_version = Some("1".into());
    action.metadata.generation = Some(1);
    action
}

struct World {
    csvs: Vec<ClusterServiceVersion>,
    machines: Vec<Machine>,
    jobs: Vec<Job>,
    pods: Vec<Pod>,
}

const SHOP_ACTIONS: &str = "backup:\n  params: {path: {type: string}}\n  required: [path]\n  job: {command: [/shop, backup]}\nmisplaced:\n  job: {command: [/shop], deployment: nope}";

/// A CSV of package `shop` installed as Deployment `shop-operator`, whose
/// actions run in Jobs.
fn shop() -> ClusterServiceVersion {
    let mut csv = csv("shop", "Succeeded", false, SHOP_ACTIONS);
    csv.spec.install = from(
        serde_json::json!({"strategy": "deployment", "spec": {"deployments": [
        {"name": "shop-operator", "spec": {"selector": {"matchLabels": {"app": "shop"}}, "template": {
            "metadata": {"labels": {"app": "shop"}},
            "spec": {"serviceAccountName": "shop", "containers": [{"name": "m", "image": "shop:1"}]}}}}]}}),
    );
    csv
}

impl World {
    fn new() -> World {
        World {
            csvs: vec![
                csv("db", "Succeeded", true, DB_ACTIONS),
                csv("web", "Succeeded", false, DB_ACTIONS),
                csv("late", "Installing", true, DB_ACTIONS),
                csv("bare", "Succeeded", true, ""),
                csv("bad", "Succeeded", true, "backup: ["),
                csv("empty", "Succeeded", true, DB_ACTIONS),
                shop(),
            ],
            machines: vec![
                machine("edge-a", "db.v1.0.0", false),
                machine("edge-b", "db.v1.0.0", false),
                machine("edge-c", "bare.v1.0.0", false),
            ],
            jobs: Vec::new(),
            pods: Vec::new(),
        }
    }

    fn decide(&self, action: &Action, others: &[&Action], retention: Retention) -> Effects<ActionStatus> {
        let csvs: Vec<&ClusterServiceVersion> = self.csvs.iter().collect();
        let machines: Vec<&Machine> = self.machines.iter().collect();
        let jobs: Vec<&Job> = self.jobs.iter().collect();
        let pods: Vec<&Pod> = self.pods.iter().collect();
        let inputs = Inputs {
            csvs: &csvs,
            machines: &machines,
            actions: others,
            jobs: &jobs,
            pods: &pods,
            retention,
        };
        decide(action, &inputs, &now()).expect("a decision")
    }

    /// `action` with the status decided for it.
    fn settled(&self, mut action: Action) -> Action {
        action.status = Some(written(&self.decide(&action, &[], Retention::default())));
        action
    }
}

fn written(effects: &Effects<ActionStatus>) -> ActionStatus {
    assert_eq!(effects.statuses.len(), 1, "one status write: {effects:?}");
    from(effects.statuses[0].status.clone())
}

fn accepted(status: &ActionStatus) -> (String, String, String) {
    let c = &status.conditions.as_ref().expect("conditions")[0];
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn states(status: &ActionStatus) -> Vec<(String, TaskState)> {
    status.tasks.iter().map(|t| (t.unit.clone(), t.state)).collect()
}

#[test]
fn every_refusal_names_its_cause_and_queues_nothing() {
    let world = World::new();
    let path = serde_json::json!({"path": "/srv"});
    /// (operator, action, params, units, reason, a part of the message)
    type Case<'a> = (
        &'a str,
        &'a str,
        serde_json::Value,
        &'a [&'a str],
        &'a str,
        &'a str,
    );
    let cases: &[Case] = &[
        (
            "nope",
            "backup",
            path.clone(),
            &[],
            "NotInstalled",
            "operator nope is not installed in namespace ns",
        ),
        (
            "late",
            "backup",
            path.clone(),
            &[],
            "NotInstalled",
            "CSV late.v1.0.0 is in phase Installing",
        ),
        (
            "bad",
            "backup",
            path.clone(),
            &[],
            "InvalidDeclaration",
            "annotation olm-rs.dev/actions",
        ),
        (
            "db",
            "restore",
            path.clone(),
            &[],
            "UnknownAction",
            "declares no action restore; it declares: backup, pause",
        ),
        (
            "bare",
            "backup",
            path.clone(),
            &[],
            "UnknownAction",
            "it declares none",
        ),
        (
            "db",
            "backup",
            serde_json::json!({}),
            &[],
            "InvalidParams",
            "parameter `path`: is required",
        ),
        (
            "db",
            "backup",
            serde_json::json!({"path": "/srv", "level": 12}),
            &[],
            "InvalidParams",
            "more than the maximum 9",
        ),
        (
            "db",
            "backup",
            serde_json::json!({"path": "/srv", "colour": "red"}),
            &[],
            "InvalidParams",
            "`colour`: is not a parameter",
        ),
        (
            "db",
            "backup",
            path.clone(),
            &["edge-c"],
            "UnknownUnit",
            "edge-c is not a unit of operator db; its units are: edge-a, edge-b",
        ),
        (
            "web",
            "backup",
            path.clone(),
            &[],
            "NoCommand",
            "operator web (CSV web.v1.0.0) is installed as Deployments, and its action backup declares no command to run in a Job",
        ),
        (
            "shop",
            "misplaced",
            serde_json::json!({}),
            &[],
            "UnknownDeployment",
            "CSV shop.v1.0.0 installs no Deployment nope (its Deployments: shop-operator)",
        ),
        (
            "shop",
            "backup",
            path.clone(),
            &["edge-a"],
            "UnknownUnit",
            "edge-a is not a unit of operator shop; its one unit is: shop-operator",
        ),
        (
            "empty",
            "backup",
            path.clone(),
            &[],
            "NoUnits",
            "no Machine of pool edge reports a unit of it",
        ),
    ];
    for (operator, act, params, units, reason, part) in cases {
        let status = written(&world.decide(
            &action("a", operator, act, params.clone(), units),
            &[],
            Retention::default(),
        ));
        let (s, r, message) = accepted(&status);
        assert_eq!(
            (s.as_str(), r.as_str()),
            ("False", *reason),
            "{operator} {act}: {message}"
        );
        assert!(message.contains(part), "{operator} {act}: {message}");
        assert_eq!(status.phase, Some(TaskState::Failed), "{operator} {act}");
        assert!(status.tasks.is_empty(), "nothing runs: {status:?}");
        assert_eq!(status.completed_at, Some(now()));
        assert_eq!(status.message.as_deref(), Some(message.as_str()));
    }
}

/// `object` moved to namespace `namespace`.
fn moved<K: kube::Resource>(mut object: K, namespace: &str) -> K {
    object.meta_mut().namespace = Some(namespace.to_owned());
    object
}

/// Security: an Action reaches only the operators and units of its own
/// namespace. An operator installed in another namespace, named plainly or
/// as `namespace/name`, is not installed as far as the Action is concerned;
/// and a Machine of another namespace reporting a unit of a same-named CSV
/// gets no task.
#[test]
fn an_action_never_reaches_an_operator_or_unit_of_another_namespace() {
    let path = serde_json::json!({"path": "/srv"});
    let elsewhere = World {
        csvs: vec![moved(csv("db", "Succeeded", true, DB_ACTIONS), "other")],
        machines: vec![moved(machine("edge-a", "db.v1.0.0", false), "other")],
        jobs: Vec::new(),
        pods: Vec::new(),
    };
    for operator in ["db", "db.v1.0.0", "other/db"] {
        let status = written(&elsewhere.decide(
            &action("a", operator, "backup", path.clone(), &[]),
            &[],
            Retention::default(),
        ));
        let (s, reason, message) = accepted(&status);
        assert_eq!(
            (s.as_str(), reason.as_str()),
            ("False", "NotInstalled"),
            "{operator}: {message}"
        );
        assert!(
            message.contains("not installed in namespace ns"),
            "{operator}: {message}"
        );
        assert!(status.tasks.is_empty(), "{operator}: nothing runs: {status:?}");
    }

    // The operator is installed here too: only this namespace's unit runs it,
    // and a unit of the other namespace cannot be named.
    let mut both = World::new();
    both.machines
        .push(moved(machine("edge-z", "db.v1.0.0", false), "other"));
    let status = written(&both.decide(
        &action("a", "db", "backup", path.clone(), &[]),
        &[],
        Retention::default(),
    ));
    assert_eq!(
        states(&status),
        vec![
            ("edge-a".to_owned(), TaskState::Pending),
            ("edge-b".to_owned(), TaskState::Pending)
        ]
    );
    let status = written(&both.decide(
        &action("a", "db", "backup", path, &["edge-z"]),
        &[],
        Retention::default(),
    ));
    let (_, reason, message) = accepted(&status);
    assert_eq!(reason, "UnknownUnit", "{message}");
    assert!(status.tasks.is_empty());
}

#[test]
fn a_valid_action_is_queued_on_its_units_and_then_left_alone() {
    let world = World::new();
    let params = serde_json::json!({"path": "/srv", "level": 3});
    for (units, expected) in [
        (&[][..], &["edge-a", "edge-b"][..]),
        (&["edge-b"][..], &["edge-b"][..]),
    ] {
        let status = written(&world.decide(
            &action("a", "db", "backup", params.clone(), units),
            &[],
            Retention::default(),
        ));
        let (s, r, message) = accepted(&status);
        assert_eq!((s.as_str(), r.as_str()), ("True", "Queued"), "{message}");
        assert_eq!(status.phase, Some(TaskState::Pending));
        assert_eq!(status.csv.as_deref(), Some("db.v1.0.0"));
        let expected: Vec<(String, TaskState)> = expected
            .iter()
            .map(|u| ((*u).to_owned(), TaskState::Pending))
            .collect();
        assert_eq!(states(&status), expected);
        assert_eq!(status.completed_at, None);
    }
    // By CSV name too; and once queued, an unchanged action decides nothing.
    let queued = world.settled(action("a", "db.v1.0.0", "pause", serde_json::json!({}), &[]));
    assert!(world.decide(&queued, &[], Retention::default()).is_empty());
}

/// `world` with machine `name`'s unit leading.
fn leading(mut world: World, name: &str) -> World {
    for machine in &mut world.machines {
        if machine.metadata.name.as_deref() == Some(name) {
            for unit in machine
                .status
                .iter_mut()
                .flat_map(|s| s.units.iter_mut().flatten())
            {
                unit.leader = true;
            }
        }
    }
    world
}

#[test]
fn an_action_for_the_leader_runs_on_the_unit_that_leads_or_is_refused() {
    let path = serde_json::json!({"path": "/srv"});
    let for_leader = |units: &[&str]| {
        let mut action = action("a", "db", "backup", path.clone(), units);
        action.spec.leader = true;
        action
    };

    let world = leading(World::new(), "edge-b");
    let status = written(&world.decide(&for_leader(&[]), &[], Retention::default()));
    assert_eq!(accepted(&status).1, "Queued", "{status:?}");
    assert_eq!(states(&status), vec![("edge-b".to_owned(), TaskState::Pending)]);

    // No unit leads (a hand-over in progress): refused, naming the units.
    let status = written(&World::new().decide(&for_leader(&[]), &[], Retention::default()));
    let (s, reason, message) = accepted(&status);
    assert_eq!((s.as_str(), reason.as_str()), ("False", "NoLeader"), "{message}");
    assert!(
        message.contains("operator db has no leader unit now (its units: edge-a, edge-b)"),
        "{message}"
    );
    assert!(status.tasks.is_empty());

    // The leader and named units at once: refused before anything else.
    let status = written(&world.decide(&for_leader(&["edge-a"]), &[], Retention::default()));
    let (s, reason, message) = accepted(&status);
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("False", "ConflictingTargets"),
        "{message}"
    );
    assert!(message.contains("names units (edge-a) as well"), "{message}");
}

#[test]
fn cancel_stops_pending_tasks_only_and_the_phase_follows_the_tasks() {
    let world = World::new();
    let mut running = world.settled(action("a", "db", "pause", serde_json::json!({}), &[]));
    let status = running.status.as_mut().unwrap();
    status.tasks[0].state = TaskState::Running;
    status.tasks[0].started_at = Some(at(1_799_999_990));
    let status = written(&world.decide(&running, &[], Retention::default()));
    assert_eq!(status.phase, Some(TaskState::Running));
    assert_eq!(status.started_at, Some(at(1_799_999_990)));
    running.status = Some(status);

    running.spec.cancel = true;
    running.metadata.generation = Some(2);
    let status = written(&world.decide(&running, &[], Retention::default()));
    assert_eq!(
        states(&status),
        [
            ("edge-a".to_owned(), TaskState::Running),
            ("edge-b".to_owned(), TaskState::Cancelled)
        ]
    );
    assert_eq!(
        status.tasks[1].message.as_deref(),
        Some("cancelled before it ran")
    );
    assert_eq!(status.phase, Some(TaskState::Running));
    assert_eq!(status.observed_generation, Some(2));
    running.status = Some(status);

    // The running task completes: the action ends cancelled, as one unit never ran.
    running.status.as_mut().unwrap().tasks[0].state = TaskState::Completed;
    let status = written(&world.decide(&running, &[], Retention::default()));
    assert_eq!(status.phase, Some(TaskState::Cancelled));
    assert_eq!(status.completed_at, Some(now()));
    assert_eq!(
        status.message.as_deref(),
        Some("completed on edge-a; cancelled on edge-b: cancelled before it ran")
    );

    // Cancelled before it was even queued: accepted, and nothing is left to run.
    let mut early = action("b", "db", "pause", serde_json::json!({}), &[]);
    early.spec.cancel = true;
    let status = written(&world.decide(&early, &[], Retention::default()));
    assert_eq!(accepted(&status).1, "Queued");
    assert_eq!(status.phase, Some(TaskState::Cancelled));
}

/// The Job the decision creates, as its object.
fn created_job(effects: &Effects<ActionStatus>) -> Job {
    assert_eq!(effects.objects.len(), 1, "one Job: {effects:?}");
    assert!(effects.objects[0].creates(), "created, never merged into another");
    from(serde_json::to_value(&effects.objects[0].object).expect("JSON"))
}

/// Job `name` of the action of UID `uid`, with its conditions.
fn job(name: &str, uid: &str, conditions: serde_json::Value) -> Job {
    from(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("job-{name}"),
            "ownerReferences": [{"apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Action",
                                 "name": name, "uid": uid, "controller": true}]},
        "status": {"startTime": "2027-01-15T08:00:00Z", "conditions": conditions},
    }))
}

#[test]
fn an_action_of_an_operator_installed_as_deployments_runs_in_a_job_and_reads_its_results() {
    let mut world = World::new();
    let params = serde_json::json!({"path": "/srv"});
    let fresh = action("a", "shop", "backup", params.clone(), &[]);
    let effects = world.decide(&fresh, &[], Retention::default());
    let status = written(&effects);
    assert_eq!(accepted(&status).1, "Queued", "{status:?}");
    assert_eq!(
        states(&status),
        vec![("shop-operator".to_owned(), TaskState::Pending)]
    );
    assert_eq!(status.tasks[0].job.as_deref(), Some("a"));
    let created = created_job(&effects);
    assert_eq!(created.metadata.name.as_deref(), Some("a"));
    let container = &created
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    assert_eq!(container.image.as_deref(), Some("shop:1"));

    // The Job is there: the task runs, and nothing more is created.
    let mut queued = fresh.clone();
    queued.status = Some(status);
    world.jobs = vec![job("a", "uid-a", serde_json::json!([]))];
    let effects = world.decide(&queued, &[], Retention::default());
    assert!(effects.objects.is_empty(), "{effects:?}");
    let running = written(&effects);
    assert_eq!(running.phase, Some(TaskState::Running));
    assert!(running.started_at.is_some());

    // Complete, its Pod's termination message holding the results.
    queued.status = Some(running);
    world.jobs = vec![job(
        "a",
        "uid-a",
        serde_json::json!([{"type": "Complete", "status": "True", "lastTransitionTime": "2027-01-15T08:00:01Z"}]),
    )];
    world.pods = vec![from(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "a-x", "namespace": "ns",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "a", "uid": "job-a"}]},
        "status": {"phase": "Succeeded", "containerStatuses": [{"name": "action", "image": "shop:1",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "message": "file=/srv/b.tgz\nsize=42"}}}]},
    }))];
    let done = written(&world.decide(&queued, &[], Retention::default()));
    assert_eq!(done.phase, Some(TaskState::Completed), "{done:?}");
    assert_eq!(done.tasks[0].results["file"], "/srv/b.tgz");
    assert_eq!(done.tasks[0].results["size"], "42");
    assert_eq!(done.tasks[0].exit_code, Some(0));
    assert_eq!(done.completed_at, Some(now()));

    // A Job of the name that another Action owns is not this one's.
    world.jobs = vec![job("a", "uid-other", serde_json::json!([]))];
    let effects = world.decide(&fresh, &[], Retention::default());
    assert_eq!(created_job(&effects).metadata.name.as_deref(), Some("a"));
}

#[test]
fn a_cancelled_or_queued_behind_action_creates_no_job() {
    let world = World::new();
    let params = serde_json::json!({"path": "/srv"});
    let mut cancelled = action("a", "shop", "backup", params.clone(), &[]);
    cancelled.spec.cancel = true;
    let effects = world.decide(&cancelled, &[], Retention::default());
    assert!(effects.objects.is_empty(), "{effects:?}");
    assert_eq!(written(&effects).phase, Some(TaskState::Cancelled));

    // An earlier action runs on the unit: this one waits its turn.
    let mut earlier = world.settled(action("e", "shop", "backup", params.clone(), &[]));
    earlier.metadata.creation_timestamp = Some(at(1));
    let mut later = action("l", "shop", "backup", params, &[]);
    later.metadata.creation_timestamp = Some(at(2));
    let effects = world.decide(&later, &[&earlier], Retention::default());
    assert!(effects.objects.is_empty(), "{effects:?}");
    assert_eq!(written(&effects).phase, Some(TaskState::Pending));
    // Once it ended, this one's Job is created.
    if let Some(status) = earlier.status.as_mut() {
        status.tasks[0].state = TaskState::Completed;
    }
    let effects = world.decide(&later, &[&earlier], Retention::default());
    assert_eq!(created_job(&effects).metadata.name.as_deref(), Some("l"));
}

#[test]
fn phases_of_finished_tasks() {
    use TaskState::*;
    let task = |state| UnitTask {
        state,
        ..UnitTask::pending("u")
    };
    for (states, expected) in [
        (&[Pending, Pending][..], Pending),
        (&[Running, Pending][..], Running),
        (&[Completed, Pending][..], Running),
        (&[Completed, Completed][..], Completed),
        (&[Completed, Failed][..], Failed),
        (&[Aborted, Failed][..], Failed),
        (&[Aborted, Completed][..], Aborted),
        (&[Cancelled, Completed][..], Cancelled),
    ] {
        let tasks: Vec<UnitTask> = states.iter().map(|s| task(*s)).collect();
        assert_eq!(phase(&tasks), expected, "{states:?}");
    }
}

#[test]
fn the_tasks_of_a_lost_unit_are_aborted_with_the_reason() {
    let mut world = World::new();
    let queued = world.settled(action("a", "db", "pause", serde_json::json!({}), &[]));
    world.machines[0] = machine("edge-a", "db.v1.0.0", true);
    world.machines.remove(1);
    let status = written(&world.decide(&queued, &[], Retention::default()));
    assert_eq!(
        states(&status),
        [
            ("edge-a".to_owned(), TaskState::Aborted),
            ("edge-b".to_owned(), TaskState::Aborted)
        ]
    );
    assert_eq!(
        status.tasks[0].message.as_deref(),
        Some("unit edge-a is lost: its agent stopped renewing its Lease")
    );
    assert_eq!(
        status.tasks[1].message.as_deref(),
        Some("unit edge-b is lost: its Machine is gone")
    );
    assert_eq!(status.phase, Some(TaskState::Aborted));
}

#[test]
fn the_status_is_written_only_onto_the_copy_it_was_decided_from() {
    let world = World::new();
    let effects = world.decide(
        &action("a", "db", "pause", serde_json::json!({}), &[]),
        &[],
        Retention::default(),
    );
    let guard = &effects.statuses[0].guard;
    assert_eq!(guard.uid.as_deref(), Some("uid-a"));
    assert_eq!(guard.resource_version.as_deref(), Some("1"));
}

/// A refused action (finished at once) whose status says it finished at `second`.
fn finished(name: &str, second: i64) -> Action {
    let mut done = World::new().settled(action(name, "nope", "backup", serde_json::json!({}), &[]));
    done.status.as_mut().unwrap().completed_at = Some(at(second));
    done
}

#[test]
fn finished_actions_past_their_age_or_count_are_removed() {
    let world = World::new();
    let retention = Retention {
        age: Duration::from_secs(100),
        count: 2,
    };
    let now = now().0.as_second();
    let (old, newer, newest) = (
        finished("old", now - 50),
        finished("newer", now - 20),
        finished("newest", now - 10),
    );
    let removed = |effects: &Effects<ActionStatus>| -> Vec<String> {
        effects.removals.iter().map(|r| r.name.clone()).collect()
    };
    // Three finished, two kept: the oldest goes, whichever Action is reconciled.
    let effects = world.decide(&newest, &[&old, &newer, &newest], retention);
    assert_eq!(removed(&effects), ["old"]);
    assert_eq!(effects.removals[0].uid.as_deref(), Some("uid-old"));
    let effects = world.decide(&old, &[&newer, &newest], retention);
    assert_eq!(removed(&effects), ["old"]);
    assert!(effects.statuses.is_empty(), "no status for an action removed");
    // Past its age, even alone.
    let ancient = finished("ancient", now - 101);
    assert_eq!(removed(&world.decide(&ancient, &[], retention)), ["ancient"]);
    assert_eq!(kept_for(&ancient, retention, &self::now()), Some(Duration::ZERO));
    assert_eq!(
        kept_for(&newest, retention, &self::now()),
        Some(Duration::from_secs(90))
    );
    // Running ones are never removed, and do not count.
    let running = world.settled(action("run", "db", "pause", serde_json::json!({}), &[]));
    let effects = world.decide(&running, &[&newer, &newest], retention);
    assert!(effects.removals.is_empty(), "{effects:?}");
    assert_eq!(kept_for(&running, retention, &self::now()), None);
}

#[test]
fn every_reason_is_a_valid_condition_reason() {
    for reason in ActionReason::ALL {
        assert!(
            olm_runtime::conditions::is_valid_reason(reason.as_str()),
            "{reason:?}"
        );
    }
}
