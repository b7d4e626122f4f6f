//! Actions run by the machine agent on the real control plane: two agents as
//! processes, each playing one machine of a pool, run a unit each of the test
//! operator `keeper` (e2e/fixtures/machine-actions: a CSV declaring three
//! actions, and its hooks ConfigMap with their scripts). The test plays
//! olm-operator's part: the effective config, and the Action controller's
//! acceptance (its tasks queued, pending); the agents run the tasks and
//! write their ends, as `kubectl olm show-action` reads them.
//!
//! - `backup` completes on every unit, with its results (`action-set`), its
//!   log (`action-log`), its output and exit code 0; its parameters reach it
//!   through `action-get`, by key and whole;
//! - `fail` ends failed with `action-fail`'s message, or with the exit code;
//! - `slow` is killed at the operator's timeout, or at the Action's own, and
//!   ends failed, timed out;
//! - a task running when its agent is killed ends aborted when the agent
//!   starts again;
//! - a unit's actions and hooks never run at the same time, and its actions
//!   run in the order they were created;
//! - the action tools refuse to work inside a hook.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use olm_api::{
    model::{Action, TaskState, UnitTask},
    substrate::{Machine, MachinePool, WorkloadState},
    v1alpha1::ClusterServiceVersion,
};
use olm_testkit::{
    eventually, install_crds,
    objects::apply_json,
    process::{Process, binary},
    random_suffix, repo_root, wait_for, with_namespace, yaml_file,
};
use serde_json::json;

const POOL: &str = "edge";
const CSV: &str = "keeper.v1.0.0";
const NODES: [&str; 2] = ["node-a", "node-b"];

fn fixture(name: &str) -> serde_json::Value {
    yaml_file(&repo_root().join("e2e/fixtures/machine-actions").join(name))
}

async fn setup(client: &Client, ns: &str) {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), ns);
    apply_json(
        &pools,
        json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
               "metadata": {"name": POOL, "namespace": ns},
               "spec": {"agent": {"image": "olm-rs/machine-agent:dev", "version": "0.1.0"}}}),
    )
    .await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut hooks = fixture("hooks.yaml");
    hooks["metadata"]["namespace"] = json!(ns);
    apply_json(&config_maps, hooks).await;
    // olm-operator's part: the effective config.
    apply_json(
        &config_maps,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": format!("{CSV}-config"), "namespace": ns}, "data": {"port": "8080"}}),
    )
    .await;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let mut csv = fixture("csv.yaml");
    csv["metadata"]["namespace"] = json!(ns);
    apply_json(&csvs, csv).await;
}

fn state_dir(node: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olm-rs-agent-actions-{node}-{}", random_suffix()));
    std::fs::create_dir_all(&dir).expect("a state directory");
    dir
}

/// An agent playing node `node` of the pool, with the test's credentials.
fn agent(namespace: &str, node: &str, state: &Path) -> Process {
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG names the test cluster's kubeconfig");
    let state = state.display().to_string();
    let args: Vec<String> = [
        "run",
        "--state-dir",
        &state,
        "--namespace",
        namespace,
        "--pool",
        POOL,
        "--node-name",
        node,
        "--kubeconfig",
        &kubeconfig,
        // Port 0: the agent binds whatever port is free when it starts.
        "--admin-addr",
        "127.0.0.1:0",
        "--lease-duration-seconds",
        "8",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    Process::spawn(
        &format!("machine-agent-{node}"),
        &binary("machine-agent"),
        &args,
        None,
    )
}

/// A file of the unit's sandbox on the machine whose state is in `state`.
fn sandbox_file(state: &Path, file: &str) -> String {
    std::fs::read_to_string(state.join("units").join(CSV).join("sandbox").join(file)).unwrap_or_default()
}

/// Creates Action `name` and accepts it on `machines`, as olm-operator does.
async fn run(api: &Api<Action>, name: &str, action: &str, params: serde_json::Value, machines: &[String]) {
    run_for(api, name, action, params, machines, None).await;
}

/// As [`run`], with a timeout of the Action's own when `timeout` is set.
async fn run_for(
    api: &Api<Action>,
    name: &str,
    action: &str,
    params: serde_json::Value,
    machines: &[String],
    timeout: Option<i64>,
) {
    let mut spec = json!({"operator": "keeper", "action": action, "params": params});
    if let Some(seconds) = timeout {
        spec["timeoutSeconds"] = json!(seconds);
    }
    apply_json(
        api,
        json!({"apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Action",
               "metadata": {"name": name}, "spec": spec}),
    )
    .await;
    let tasks: Vec<UnitTask> = machines.iter().map(|m| UnitTask::pending(m)).collect();
    let status = json!({"status": {"phase": "pending", "csv": CSV,
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Queued", "observedGeneration": 1,
                        "message": format!("queued on {}", machines.join(", ")),
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "tasks": tasks}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("accept Action {name}: {e}"));
}

/// Waits until every task of Action `name` has ended; its tasks by unit.
async fn ended(api: &Api<Action>, name: &str) -> BTreeMap<String, UnitTask> {
    let action = wait_for(
        api,
        name,
        &format!("every task of Action {name} ended"),
        |a: Option<&Action>| {
            a.and_then(|a| a.status.as_ref())
                .is_some_and(|s| !s.tasks.is_empty() && s.tasks.iter().all(|t| t.state.is_finished()))
        },
    )
    .await
    .expect("the Action");
    let status = action.status.expect("a status");
    status.tasks.into_iter().map(|t| (t.unit.clone(), t)).collect()
}

/// The begin and end lines of turns.log pair up: nothing began before what
/// ran before it ended. The names that ran, in order.
fn one_at_a_time(log: &str) -> Vec<String> {
    let mut ran = Vec::new();
    let mut lines = log.lines();
    while let Some(begin) = lines.next() {
        let name = begin
            .strip_prefix("begin ")
            .unwrap_or_else(|| panic!("{begin:?} is not a beginning, in:\n{log}"));
        match lines.next() {
            Some(end) if end.strip_prefix("end ") == Some(name) => ran.push(name.to_owned()),
            // The last one may still run.
            None => {}
            Some(other) => panic!("{other:?} ran while {name} did, in:\n{log}"),
        }
    }
    ran
}

#[tokio::test]
async fn actions_run_on_every_unit_with_results_failures_and_timeouts() {
    let client = olm_testkit::client().await;
    install_crds(&client).await;
    with_namespace("actions", |client, ns| async move {
        setup(&client, &ns).await;
        let machines: Vec<String> = NODES.iter().map(|n| format!("{POOL}-{n}")).collect();
        let states: Vec<PathBuf> = NODES.iter().map(|n| state_dir(n)).collect();
        let agents: Vec<Process> = NODES
            .iter()
            .zip(&states)
            .map(|(node, state)| agent(&ns, node, state))
            .collect();
        let machine_api: Api<Machine> = Api::namespaced(client.clone(), &ns);
        eventually("every unit is active", || async {
            let mut active = 0;
            for name in &machines {
                let unit = machine_api
                    .get(name)
                    .await
                    .ok()
                    .and_then(|m| m.status?.units?.into_iter().find(|u| u.csv == CSV));
                active += usize::from(unit.is_some_and(|u| u.state == WorkloadState::Active));
            }
            active == machines.len()
        })
        .await;
        let actions: Api<Action> = Api::namespaced(client.clone(), &ns);

        // backup completes on every unit, with its results, log, output and exit code.
        run(
            &actions,
            "backup-1",
            "backup",
            json!({"path": "/srv/b1.tar"}),
            &machines,
        )
        .await;
        let tasks = ended(&actions, "backup-1").await;
        for machine in &machines {
            let task = &tasks[machine];
            assert_eq!(task.state, TaskState::Completed, "{task:?}");
            assert_eq!(task.exit_code, Some(0), "{task:?}");
            assert_eq!(task.results["path"], "/srv/b1.tar", "{task:?}");
            assert_eq!(task.results["unit.machine"], *machine, "{task:?}");
            assert_eq!(
                task.results["size"],
                (format!("backup of {machine}\n").len()).to_string()
            );
            let params: serde_json::Value = serde_json::from_str(&task.results["params"]).expect("JSON");
            assert_eq!(params, json!({"path": "/srv/b1.tar"}));
            assert_eq!(
                task.log.first().map(|l| l.message.as_str()),
                Some("writing /srv/b1.tar")
            );
            assert_eq!(task.stdout.as_deref(), Some("backed up to /srv/b1.tar"));
            assert!(
                task.started_at.is_some() && task.completed_at.is_some(),
                "{task:?}"
            );
        }

        // Failures: action-fail's message, or the exit code with stderr.
        let a = std::slice::from_ref(&machines[0]);
        run(&actions, "fail-said", "fail", json!({"message": "disk full"}), a).await;
        run(&actions, "fail-exit", "fail", json!({"code": 3}), a).await;
        run(&actions, "slow-1", "slow", json!({}), a).await;
        let said = &ended(&actions, "fail-said").await[&machines[0]];
        assert_eq!(
            (said.state, said.message.as_deref()),
            (TaskState::Failed, Some("disk full"))
        );
        assert_eq!(said.exit_code, Some(0));
        let exit = &ended(&actions, "fail-exit").await[&machines[0]];
        assert_eq!(
            (exit.state, exit.message.as_deref(), exit.exit_code),
            (TaskState::Failed, Some("the action exited with code 3"), Some(3))
        );
        assert_eq!(exit.stderr.as_deref(), Some("giving up"));
        // slow is killed at the operator's timeout (hookTimeoutSeconds: 3).
        let slow = &ended(&actions, "slow-1").await[&machines[0]];
        assert_eq!(slow.state, TaskState::Failed, "{slow:?}");
        assert_eq!(
            slow.message.as_deref(),
            Some("timed out: the action ran past its timeout of 3s and was killed")
        );
        assert_eq!(slow.log.first().map(|l| l.message.as_str()), Some("sleeping"));
        // An Action's own timeout wins over the operator's.
        run_for(&actions, "slow-own", "slow", json!({}), a, Some(1)).await;
        let own = &ended(&actions, "slow-own").await[&machines[0]];
        assert_eq!(
            (own.state, own.message.as_deref()),
            (
                TaskState::Failed,
                Some("timed out: the action ran past its timeout of 1s and was killed")
            )
        );

        // Two actions on one unit run in order, never during each other or a hook.
        run(&actions, "backup-2", "backup", json!({"path": "/srv/2"}), a).await;
        run(&actions, "backup-3", "backup", json!({"path": "/srv/3"}), a).await;
        ended(&actions, "backup-3").await;
        ended(&actions, "backup-2").await;
        for state in &states {
            let ran = one_at_a_time(&sandbox_file(state, "turns.log"));
            assert!(
                ran.contains(&"update-status".to_owned()),
                "hooks ran meanwhile: {ran:?}"
            );
            assert!(ran.contains(&"backup backup-1".to_owned()), "{ran:?}");
        }
        let ran = one_at_a_time(&sandbox_file(&states[0], "turns.log"));
        let position = |name: &str| ran.iter().position(|r| r == name);
        assert!(
            position("backup backup-2") < position("backup backup-3")
                && position("backup backup-2").is_some(),
            "{ran:?}"
        );

        // The action tools refuse to work inside a hook.
        let refused = sandbox_file(&states[0], "action-get-in-hook.err");
        assert!(
            refused.contains("action-get works only inside an action"),
            "{refused:?}"
        );
        // Killing the agent mid-action: its next start aborts the task with the reason.
        let mut agents = agents;
        run_for(&actions, "slow-killed", "slow", json!({}), a, Some(120)).await;
        wait_for(
            &actions,
            "slow-killed",
            "the task of slow-killed running",
            |action: Option<&Action>| {
                action
                    .and_then(|a| a.status.as_ref())
                    .is_some_and(|s| s.tasks.iter().any(|t| t.state == TaskState::Running))
            },
        )
        .await;
        agents[0].kill();
        agents[0] = agent(&ns, NODES[0], &states[0]);
        let killed = &ended(&actions, "slow-killed").await[&machines[0]];
        assert_eq!(
            (killed.state, killed.message.as_deref()),
            (
                TaskState::Aborted,
                Some("the machine agent stopped while the action ran")
            ),
            "{killed:?}"
        );
        drop(agents);
        for state in states {
            let _ = std::fs::remove_dir_all(state);
        }
    })
    .await;
}
