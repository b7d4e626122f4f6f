//! An unprivileged unit's hook, run by an agent that is root, runs as the hook
//! user: it can write its sandbox and call the hook tool, and cannot read the
//! agent's own files. Needs root (CI runs as root): as another user these tests
//! fail and say so, since a test that skips itself proves nothing.

use std::{
    collections::BTreeMap,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    time::Duration,
};

use machine_agent::{
    hook_tool::Runs,
    state::{self, StateDir},
    units::{
        hooks::{HookContext, hook_env, run_hook_as},
        privilege::{self, Ids, Users},
    },
};
use olm_api::{substrate::WorkloadState, v1alpha1::MachineHook as Hook};

const NOBODY: Ids = Ids {
    uid: 65534,
    gid: 65534,
};
const UNIT: &str = "demo.v1.0.0";

/// What the hook does: it says who it is, writes its sandbox, tries the agent's
/// files, and sets its status through the hook tool.
const HOOK: &str = r#"#!/bin/sh
id -u > uid
id -G > groups
echo "$HOME" > home
if cat "$CONFIG_STATE/credentials/token" > stolen 2>/dev/null; then echo read > token; else echo denied > token; fi
if ls "$CONFIG_STATE" > /dev/null 2>&1; then echo listed > listing; else echo denied > listing; fi
if cat "$CONFIG_STATE/units/$OLM_RS_CSV/unit.json" > /dev/null 2>&1; then echo read > record; else echo denied > record; fi
if cat "$OLM_RS_CONFIG_FILE" > /dev/null; then echo read > config; fi
"$CONFIG_AGENT" hook status-set active "running as $(id -u)"
"#;

fn temp_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir = std::env::temp_dir().join(format!("ma-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The test's own directory, like /var/lib: others pass.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The agent's ids, which must be root's: running hooks as another user needs root.
fn require_root() -> Ids {
    let agent = Ids::current();
    assert!(
        agent.is_root(),
        "this test runs hooks as another user, which needs root, and it runs as uid {}: run it as root \
         (`sudo -E cargo test -p machine-agent --test hook_user`; CI runs as root)",
        agent.uid
    );
    agent
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"))
        .trim()
        .to_owned()
}

/// Prepares and runs `hook` of the unit as `ids`, like the agent's unit task.
async fn run(
    state: &StateDir,
    runs: &Runs,
    users: &Users,
    ids: Ids,
    config: &BTreeMap<String, String>,
) -> Option<(WorkloadState, Option<String>)> {
    let prepared = privilege::prepare(state, users, UNIT, Hook::Install.as_str(), config, ids).unwrap();
    let guard = runs.start(UNIT, None);
    let context = HookContext {
        machine: "edge-m1".into(),
        pool: "edge".into(),
        namespace: "apps".into(),
        csv: UNIT.into(),
        version: "1.0.0".into(),
        hook: Hook::Install.to_string(),
        config_file: prepared.config_file.clone(),
        socket: state.socket_path(),
        run_id: guard.id.clone(),
    };
    let env = hook_env(&context, config);
    let user = (ids != users.agent).then_some(ids);
    run_hook_as(
        &prepared.script,
        &prepared.sandbox,
        &env,
        Hook::Install,
        Duration::from_secs(30),
        user,
    )
    .await
    .unwrap();
    guard.workload.lock().unwrap().clone()
}

#[tokio::test]
async fn an_unprivileged_hook_runs_as_the_hook_user_and_reaches_only_its_own() {
    let agent = require_root();
    let dir = temp_dir("hook-user");
    let state = StateDir::open(dir.join("state")).unwrap();
    state::write_file(&state.token_file(), b"the agent's token").unwrap();
    state::write_file(&state.hooks_dir(UNIT).join("install"), HOOK.as_bytes()).unwrap();
    state::write_json(&state.unit_file(UNIT), &serde_json::json!({"csv": UNIT})).unwrap();
    // A sandbox an earlier agent left, root's: handed over to the hook user.
    std::fs::create_dir_all(state.sandbox_dir(UNIT).join("www")).unwrap();
    std::fs::write(state.sandbox_dir(UNIT).join("www/index.html"), "hello").unwrap();

    let users = Users { agent, hook: NOBODY };
    let runs = Runs::default();
    let socket = state.socket_path();
    let server = tokio::spawn({
        let (runs, socket) = (runs.clone(), socket.clone());
        async move { runs.serve(&socket, Some(NOBODY.gid)).await }
    });
    for _ in 0..100 {
        if socket.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let config = BTreeMap::from([
        ("state".to_owned(), state.root().display().to_string()),
        ("agent".to_owned(), env!("CARGO_BIN_EXE_machine-agent").to_owned()),
    ]);

    let ids = privilege::hook_ids(&users, UNIT, false).unwrap();
    assert_eq!(ids, NOBODY);
    let set = run(&state, &runs, &users, ids, &config).await;
    let sandbox = state.sandbox_dir(UNIT);
    assert_eq!(read(&sandbox, "uid"), "65534");
    assert_eq!(read(&sandbox, "groups"), "65534", "no supplementary group");
    assert_eq!(read(&sandbox, "home"), sandbox.display().to_string());
    assert_eq!(std::fs::metadata(sandbox.join("uid")).unwrap().uid(), 65534);
    assert_eq!(
        read(&sandbox, "token"),
        "denied",
        "the hook read credentials/token"
    );
    assert_eq!(read(&sandbox, "stolen"), "");
    assert_eq!(
        read(&sandbox, "listing"),
        "denied",
        "the hook listed the state directory"
    );
    assert_eq!(
        read(&sandbox, "record"),
        "denied",
        "the hook read the unit's record"
    );
    assert_eq!(read(&sandbox, "config"), "read");
    assert_eq!(
        set,
        Some((WorkloadState::Active, Some("running as 65534".to_owned())))
    );
    assert_eq!(
        std::fs::metadata(sandbox.join("www/index.html")).unwrap().uid(),
        65534,
        "the old sandbox is the hook user's"
    );

    // The same unit made privileged runs as root, in a fresh sandbox.
    let root = privilege::hook_ids(&users, UNIT, true).unwrap();
    let set = run(&state, &runs, &users, root, &config).await;
    assert_eq!(read(&sandbox, "uid"), "0");
    assert_eq!(std::fs::metadata(&sandbox).unwrap().uid(), 0);
    assert!(!sandbox.join("www").exists(), "root got the hook user's sandbox");
    assert_eq!(
        set,
        Some((WorkloadState::Active, Some("running as 0".to_owned())))
    );

    server.abort();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_state_directory_lets_hooks_pass_and_keeps_the_agents_files() {
    let dir = temp_dir("modes");
    let state = StateDir::open(dir.join("state")).unwrap();
    state::write_file(&state.token_file(), b"token").unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(state.root()), 0o711);
    assert_eq!(mode(&state.root().join("units")), 0o711);
    assert_eq!(mode(&state.token_file()), 0o600);
    assert_eq!(mode(state.token_file().parent().unwrap()), 0o700);
    // A directory made by someone else (kubelet's hostPath) is made private too.
    std::fs::set_permissions(state.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = StateDir::open(state.root()).unwrap();
    assert_eq!(mode(state.root()), 0o711);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Starts the agent with its state in `state_dir` and a kubeconfig that does not
/// exist, so it stops early: whether it exited 0, and what it printed.
fn start_agent(state_dir: &Path) -> (bool, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_machine-agent"))
        .args(["run", "--namespace", "ns", "--pool", "edge", "--node-name", "n1"])
        .arg("--state-dir")
        .arg(state_dir)
        .args(["--kubeconfig", "/nonexistent/kubeconfig"])
        .args(["--admin-addr", "127.0.0.1:0"])
        .output()
        .expect("run machine-agent");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_root_agent_refuses_to_start_when_the_hook_user_cannot_reach_its_state() {
    require_root();
    let dir = temp_dir("unreachable");
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    // A private home, as Debian gives root.
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let state_dir = home.join(".cache/agent");
    let (started, stderr) = start_agent(&state_dir);
    assert!(!started, "the agent started: {stderr}");
    let blocked = format!("{} (mode 0700, owner uid 0) does not let it pass", home.display());
    assert!(stderr.contains(&blocked), "{stderr}");
    assert!(stderr.contains("uid 65534"), "{stderr}");

    // Once the home lets others pass, the same agent gets past the check (and
    // stops at the missing kubeconfig).
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o711)).unwrap();
    let (started, stderr) = start_agent(&state_dir);
    assert!(!started, "the agent started without a kubeconfig: {stderr}");
    assert!(!stderr.contains("cannot reach the state directory"), "{stderr}");
    assert!(stderr.contains("kubeconfig"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}
