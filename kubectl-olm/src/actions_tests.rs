use olm_api::model::LogEntry;

use super::*;
use crate::{Cli, Command};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn params_parse_as_juju_reads_them() {
    let params = parse_params(&args(&[
        "path=/srv/backups",
        "level=3",
        "ratio=0.5",
        "compress=true",
        "label=a=b",
        "note=",
        "s3.bucket=b1",
        "s3.region=eu",
        "version=1.2.3",
    ]))
    .expect("parameters");
    assert_eq!(
        Value::Object(params),
        serde_json::json!({
            "path": "/srv/backups", "level": 3, "ratio": 0.5, "compress": true,
            "label": "a=b", "note": "", "s3": {"bucket": "b1", "region": "eu"},
            "version": "1.2.3",
        })
    );
    for (bad, part) in [
        (&["path"][..], "is not key=value"),
        (&["a..b=1"][..], "has an empty part"),
        (&["a=1", "a.b=2"][..], "a is given both as a value and as a map"),
    ] {
        let err = parse_params(&args(bad)).unwrap_err().to_string();
        assert!(err.contains(part), "{bad:?}: {err}");
    }
}

#[test]
fn run_builds_one_action_for_every_unit_or_one() {
    let action = build("team", "db", "backup", &args(&["path=/srv"]), None, None).expect("an Action");
    assert_eq!(action.metadata.generate_name.as_deref(), Some("db-backup-"));
    assert_eq!(action.metadata.name, None);
    assert_eq!(action.metadata.namespace.as_deref(), Some("team"));
    assert_eq!(action.spec.operator, "db");
    assert!(action.spec.units.is_empty(), "every unit");
    assert_eq!(
        action.spec.params,
        serde_json::json!({"path": "/srv"}).as_object().cloned()
    );

    let action = build("team", "db/edge-n1", "pause", &[], Some("p1".into()), None).expect("an Action");
    assert_eq!(action.metadata.name.as_deref(), Some("p1"));
    assert_eq!(action.metadata.generate_name, None);
    assert_eq!(action.spec.units, ["edge-n1"]);
    assert_eq!(action.spec.params, None);
    assert!(!action.spec.leader);
    assert_eq!(action.spec.timeout_seconds, None);

    // Juju's `app/leader`: whichever unit leads; and a timeout of its own.
    let action = build("team", "db/leader", "pause", &[], None, Some(30)).expect("an Action");
    assert!(action.spec.leader, "the leader");
    assert!(action.spec.units.is_empty(), "no named unit");
    assert_eq!(action.spec.timeout_seconds, Some(30));

    for bad in ["", "/u", "db/", "db/a/b"] {
        let err = build("team", bad, "x", &[], None, None).unwrap_err().to_string();
        assert!(err.contains("is not OPERATOR[/UNIT]"), "{bad:?}: {err}");
    }
    // What `--dry-run -o yaml` prints: an object `kubectl create -f` takes.
    let yaml = serde_saphyr::to_string(&build("team", "My.DB", "backup", &[], None, None).unwrap()).unwrap();
    assert!(yaml.contains("apiVersion: model.olm-rs.dev/v1alpha1"), "{yaml}");
    assert!(yaml.contains("kind: Action"), "{yaml}");
    assert!(yaml.contains("generateName: my-db-backup-"), "{yaml}");
}

#[test]
fn the_commands_parse() {
    let parse = |list: &[&str]| {
        Cli::parse_from_args(std::iter::once("kubectl-olm").chain(list.iter().copied())).expect("valid")
    };
    let cli = parse(&["run", "db/edge-n1", "backup", "path=/srv", "--wait", "-n", "team"]);
    assert!(
        matches!(cli.command, Command::Action(ActionCommand::Run { target, action, params, wait: true, .. })
        if target == "db/edge-n1" && action == "backup" && params == ["path=/srv"])
    );
    let cli = parse(&["run", "db", "backup", "--dry-run", "-o", "yaml"]);
    assert!(
        matches!(cli.command, Command::Action(ActionCommand::Run { dry_run, .. })
        if dry_run.is_dry_run() && dry_run.output == Some(Output::Yaml))
    );
    assert!(matches!(
        parse(&["actions", "db"]).command,
        Command::Action(ActionCommand::Actions { .. })
    ));
    assert!(matches!(
        parse(&["operations"]).command,
        Command::Action(ActionCommand::Operations { .. })
    ));
    assert!(matches!(
        parse(&["show-action", "a1"]).command,
        Command::Action(ActionCommand::ShowAction { .. })
    ));
    assert!(matches!(
        parse(&["cancel", "a1"]).command,
        Command::Action(ActionCommand::Cancel { .. })
    ));
}

fn finished_action() -> Action {
    let mut action = build(
        "team",
        "db",
        "backup",
        &args(&["path=/srv"]),
        Some("b1".into()),
        None,
    )
    .unwrap();
    let time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap(),
    );
    let mut done = UnitTask::pending("edge-n1");
    done.state = TaskState::Completed;
    done.exit_code = Some(0);
    done.results = [("path".to_owned(), "/srv/b1.tar".to_owned())].into();
    done.log = vec![LogEntry {
        time,
        message: "dumping".into(),
    }];
    done.stdout = Some("42 rows\n".into());
    let mut failed = UnitTask::pending("edge-n2");
    failed.state = TaskState::Failed;
    failed.exit_code = Some(1);
    failed.message = Some("disk full".into());
    failed.job = Some("b1".into());
    action.status = Some(olm_api::model::ActionStatus {
        phase: Some(TaskState::Failed),
        message: Some("completed on edge-n1; failed on edge-n2: disk full".into()),
        tasks: vec![done, failed],
        ..Default::default()
    });
    action
}

#[test]
fn show_action_prints_each_units_results_log_and_output() {
    let text = details(&finished_action());
    for part in [
        "Action b1: db backup (failed)",
        "  completed on edge-n1; failed on edge-n2: disk full",
        "  edge-n1: completed\n    exit code: 0\n    results:\n      path: /srv/b1.tar\n    log:\n      2027-01-15T08:00:00Z dumping\n    stdout: |\n      42 rows\n",
        "  edge-n2: failed\n    job: b1\n    exit code: 1\n    message: disk full\n",
    ] {
        assert!(text.contains(part), "{part:?} in:\n{text}");
    }
    let table = operations_table(&[finished_action()]).render(false);
    assert!(table.contains("b1"), "{table}");
    assert!(table.contains("edge-n1,edge-n2"), "{table}");
    assert!(table.contains("failed"), "{table}");
}

#[test]
fn log_lines_are_printed_once_as_they_arrive() {
    let mut printed = Printed::default();
    let mut action = finished_action();
    let tasks = &action.status.as_ref().unwrap().tasks;
    assert_eq!(printed.new_lines(tasks), ["edge-n1: dumping"]);
    assert!(printed.new_lines(tasks).is_empty());
    let task = &mut action.status.as_mut().unwrap().tasks[0];
    task.log.push(LogEntry {
        time: task.log[0].time.clone(),
        message: "uploading".into(),
    });
    assert_eq!(
        printed.new_lines(&action.status.as_ref().unwrap().tasks),
        ["edge-n1: uploading"]
    );
}

#[test]
fn actions_lists_what_the_installed_csv_declares() {
    let csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "db.v1.0.0", "namespace": "team",
            "labels": {"operators.coreos.com/db.team": ""}},
        "spec": {"displayName": "db", "install": {"strategy": "deployment"}},
        "status": {"phase": "Succeeded"},
    }))
    .unwrap();
    let csvs = [csv];
    assert!(installed(&csvs, "db", "team").is_some());
    assert!(installed(&csvs, "db.v1.0.0", "team").is_some());
    assert!(installed(&csvs, "web", "team").is_none());
    let declared = Actions::parse(
        "db.v1.0.0",
        "backup: {description: Back up.\n  More., params: {path: {type: string}, level: {}}, required: [path]}\npause: {}",
    )
    .unwrap();
    let table = offered_table("db", "db.v1.0.0", &declared);
    assert!(
        table.contains("backup  level (any), path (string, required)  Back up."),
        "{table}"
    );
    assert!(table.contains("pause   -"), "{table}");
    assert_eq!(
        offered_table("db", "db.v1.0.0", &Actions::default()),
        "db (db.v1.0.0) declares no actions\n"
    );
}
