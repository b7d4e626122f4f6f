//! Scale and peer relations of an application on machines, on the real
//! control plane: olm-operator in-process, and three agents as processes,
//! the three machines of pool `dbs`. Application `db` declares a `peers`
//! endpoint `ring`, and the pool asks for one unit of it.
//!
//! - At 1: one machine runs a unit (install, start), alone in its peer
//!   relation (`ring-relation-created`, no `-joined`).
//! - `kubectl olm scale db 3`: the two other machines install and start a
//!   unit; every unit runs `ring-relation-joined` then `-changed` for each
//!   other unit, in Juju's order, and reads what that unit set in the peer
//!   databag.
//! - `kubectl olm scale db 1`: each unit that goes runs `-departed` for each
//!   peer, `-broken`, `stop` and `remove`, in that order; the unit that stays
//!   runs `-departed` for each unit that went.
//! - Asking for more units than the pool has machines names the shortfall in
//!   the pool's condition `Scaled` (`NotEnoughMachines`).
//!
//! Every hook appends `<hook> <remote unit or ->` to a log per machine kept
//! outside the units' state (a removed unit's state directory goes with it).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    time::Duration,
};

use e2e::inprocess::OlmOperator;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use olm_api::{
    model::Relation,
    substrate::{ApplicationPlacement, MachinePool},
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};
use olm_testkit::{
    eventually, install_crds,
    objects::apply_json,
    process::{Process, binary, free_port},
    random_suffix, wait_for, with_namespace,
};
use serde_json::json;

/// The agents' Lease duration, for their machines and for leadership.
const LEASE_SECONDS: u64 = 30;

const POOL: &str = "dbs";
const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];

/// The hooks of `db`: each logs itself to `<logs>/<machine>.log`; in the peer
/// relation each unit sets its address, and `-changed` logs each peer's.
fn hooks(logs: &Path) -> BTreeMap<String, String> {
    let log = format!(
        "echo \"$OLM_RS_HOOK ${{OLM_RS_REMOTE_UNIT:--}}\" >> {}/\"$OLM_RS_MACHINE\".log",
        logs.display()
    );
    let plain = format!("#!/bin/sh\n{log}\n");
    let mut hooks: BTreeMap<String, String> = [
        "install",
        "config-changed",
        "start",
        "leader-elected",
        "stop",
        "remove",
        "ring-relation-joined",
        "ring-relation-departed",
        "ring-relation-broken",
    ]
    .into_iter()
    .map(|h| (h.to_owned(), plain.clone()))
    .collect();
    hooks.insert(
        "ring-relation-created".into(),
        format!("#!/bin/sh\nset -e\n{log}\nmachine-agent hook relation-set addr=\"$OLM_RS_MACHINE\"\n"),
    );
    hooks.insert(
        "ring-relation-changed".into(),
        format!(
            "#!/bin/sh\nset -e\n{log}\n\
             if [ -n \"$OLM_RS_REMOTE_UNIT\" ]; then addr=$(machine-agent hook relation-get addr); \
             echo \"addr of $OLM_RS_REMOTE_UNIT: $addr\" >> {}/\"$OLM_RS_MACHINE\".log; fi\n",
            logs.display()
        ),
    );
    hooks
}

async fn setup(client: &Client, ns: &str, logs: &Path) {
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), ns);
    apply_json(
        &groups,
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
               "metadata": {"name": "group", "namespace": ns}, "spec": {"targetNamespaces": [ns]}}),
    )
    .await;
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), ns);
    apply_json(
        &pools,
        json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
               "metadata": {"name": POOL, "namespace": ns},
               "spec": {"agent": {"image": "olm-rs/machine-agent:dev", "version": "0.1.0"},
                        "units": {"db": 1}}}),
    )
    .await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    apply_json(
        &config_maps,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "db-hooks", "namespace": ns}, "data": hooks(logs)}),
    )
    .await;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    apply_json(
        &csvs,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "db.v1.0.0", "namespace": ns,
                         "labels": {format!("operators.coreos.com/db.{ns}"): ""},
                         "annotations": {"olm-rs.dev/endpoints": "peers: {ring: {interface: db-ring}}"}},
            "spec": {"displayName": "db", "version": "1.0.0",
                "installModes": [
                    {"type": "OwnNamespace", "supported": true},
                    {"type": "SingleNamespace", "supported": true},
                    {"type": "MultiNamespace", "supported": false},
                    {"type": "AllNamespaces", "supported": true}],
                "install": {"strategy": "machine", "spec": {
                    "pool": POOL, "hooks": {"configMap": "db-hooks"},
                    "updateStatusIntervalSeconds": 3600}}}}),
    )
    .await;
}

fn spawn(ns: &str, node: &str, state: &Path) -> Process {
    let admin = free_port();
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG names the test cluster's kubeconfig");
    let args: Vec<String> = [
        "run",
        "--state-dir",
        &state.display().to_string(),
        "--namespace",
        ns,
        "--pool",
        POOL,
        "--node-name",
        node,
        "--kubeconfig",
        &kubeconfig,
        "--admin-addr",
        &format!("127.0.0.1:{admin}"),
        "--lease-duration-seconds",
        &LEASE_SECONDS.to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    Process::spawn(
        &format!("machine-agent-{POOL}-{node}"),
        &binary("machine-agent"),
        &args,
        Some(admin),
    )
}

/// The hook log of `machine`.
fn log(logs: &Path, machine: &str) -> Vec<String> {
    std::fs::read_to_string(logs.join(format!("{machine}.log")))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The log's lines that are hooks (not the data they logged).
fn hook_lines(log: &[String]) -> Vec<String> {
    log.iter().filter(|l| !l.contains(':')).cloned().collect()
}

/// Checks Juju's order of the peer relation's hooks in `log`: `-created`
/// once (in setup, before `start`, on a unit that comes up with the relation
/// in place; after it on the first unit, which the relation waits for); each
/// peer `-joined` once, after `start`, then at once its `-changed`; `-changed` and `-departed` only of joined peers; `-broken`
/// once every peer departed, then `stop` and `remove` only after it.
fn check_order(who: &str, log: &[String]) {
    let (mut started, mut created, mut broken) = (false, false, false);
    let mut joined: BTreeSet<String> = BTreeSet::new();
    let mut expect_changed: Option<String> = None;
    for line in hook_lines(log) {
        let (hook, unit) = line.split_once(' ').unwrap_or((&line, "-"));
        let Some((_, event)) = hook.split_once("-relation-") else {
            if hook == "stop" || hook == "remove" {
                assert!(
                    !created || broken,
                    "{who}: {hook} before the peer relation broke in {log:#?}"
                );
            }
            started |= hook == "start";
            continue;
        };
        let ok = match event {
            _ if expect_changed.is_some() => event == "changed" && Some(unit) == expect_changed.as_deref(),
            "created" => !created,
            "joined" => started && created && joined.insert(unit.to_owned()),
            "changed" => created && (unit == "-" || joined.contains(unit)),
            "departed" => joined.remove(unit),
            "broken" => created && joined.is_empty(),
            _ => false,
        };
        assert!(ok, "{who}: {line} is out of Juju's order in {log:#?}");
        expect_changed = (event == "joined").then(|| unit.to_owned());
        created |= event == "created";
        broken |= event == "broken";
    }
}

/// The placement of `db` in the pool's status once it is current and has
/// `units` units on `units` machines.
async fn placed(pools: &Api<MachinePool>, units: u32) -> Vec<String> {
    let pool = wait_for(
        pools,
        POOL,
        &format!("db placed with {units} unit(s)"),
        |p: Option<&MachinePool>| {
            p.and_then(|p| {
                let status = p.status.as_ref()?;
                (status.observed_generation == p.metadata.generation).then_some(())?;
                let db = db_placement(p)?;
                (db.desired_units == units && db.units == units && db.machines.len() == units as usize)
                    .then_some(())
            })
            .is_some()
        },
    )
    .await;
    db_placement(&pool.expect("the pool"))
        .expect("db's placement")
        .machines
}

fn db_placement(pool: &MachinePool) -> Option<ApplicationPlacement> {
    pool.status
        .as_ref()?
        .applications
        .iter()
        .flatten()
        .find(|a| a.application == "db")
        .cloned()
}

/// Runs `kubectl olm` with `args` in `ns`; returns what it printed.
async fn kubectl_olm(client: &Client, ns: &str, args: &[&str]) -> String {
    let argv: Vec<&str> = ["-n", ns].iter().chain(args).copied().collect();
    e2e::kubectl::kubectl_olm(client, &argv).await.ok()
}

#[tokio::test]
async fn scaling_one_three_one_installs_and_removes_units_with_peer_hooks_in_order() {
    let client = olm_testkit::client().await;
    install_crds(&client).await;
    with_namespace("scale", |client, ns| async move {
        let logs = std::env::temp_dir().join(format!("olm-rs-scale-logs-{}", random_suffix()));
        std::fs::create_dir_all(&logs).expect("a log directory");
        // Hooks may run as the unprivileged hook user (an agent running as root).
        std::fs::set_permissions(&logs, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .expect("a log directory every hook user may write");
        let operator = OlmOperator::start(&client).await;
        setup(&client, &ns, &logs).await;
        let states: Vec<PathBuf> = NODES
            .iter()
            .map(|node| {
                let state =
                    std::env::temp_dir().join(format!("olm-rs-agent-scale-{node}-{}", random_suffix()));
                std::fs::create_dir_all(&state).expect("a state directory");
                state
            })
            .collect();
        let mut agents: Vec<Process> = NODES
            .iter()
            .zip(&states)
            .map(|(node, state)| spawn(&ns, node, state))
            .collect();
        let machines: Vec<String> = NODES.iter().map(|n| format!("{POOL}-{n}")).collect();
        let pools: Api<MachinePool> = Api::namespaced(client.clone(), &ns);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);

        // 1: one unit, alone in its peer relation.
        let first = placed(&pools, 1).await;
        let one = first[0].clone();
        wait_for(
            &csvs,
            "db.v1.0.0",
            "Succeeded",
            |c: Option<&ClusterServiceVersion>| {
                c.and_then(|c| c.status.as_ref())
                    .is_some_and(|s| s.phase == Some(CsvPhase::Succeeded))
            },
        )
        .await;
        let relations: Api<Relation> = Api::namespaced(client.clone(), &ns);
        wait_for(
            &relations,
            "db.ring.peers",
            "the peer relation is Ready",
            |r: Option<&Relation>| {
                r.and_then(|r| r.status.as_ref()).is_some_and(|s| {
                    s.conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            },
        )
        .await;
        eventually(&format!("{one} joined its peer relation"), || async {
            log(&logs, &one).contains(&"ring-relation-created -".to_owned())
        })
        .await;
        for other in machines.iter().filter(|m| **m != one) {
            assert!(
                log(&logs, other).is_empty(),
                "{other} runs no unit: {:?}",
                log(&logs, other)
            );
        }

        // 1 → 3, through kubectl olm scale (its dry run writes nothing).
        let dry = kubectl_olm(&client, &ns, &["scale", "db", "3", "--dry-run", "-o", "yaml"]).await;
        assert!(
            dry.contains("kind: MachinePool") && dry.contains("db: 3"),
            "{dry}"
        );
        let out = kubectl_olm(&client, &ns, &["scale", "db", "3"]).await;
        assert!(out.contains("db scaled to 3 unit(s) on MachinePool dbs"), "{out}");
        assert_eq!(placed(&pools, 3).await, machines);
        for machine in &machines {
            eventually(&format!("{machine} joined and read both peers"), || async {
                let log = log(&logs, machine);
                machines.iter().filter(|m| *m != machine).all(|peer| {
                    log.contains(&format!("ring-relation-joined db/{peer}"))
                        && log.contains(&format!("addr of db/{peer}: {peer}"))
                })
            })
            .await;
            let log = log(&logs, machine);
            check_order(machine, &log);
            assert_eq!(log.iter().filter(|l| *l == "install -").count(), 1, "{log:#?}");
            if *machine != one {
                // Juju's setup order on a unit that joins an existing relation.
                let at = |hook: &str| log.iter().position(|l| l == hook).expect(hook);
                assert!(
                    at("install -") < at("ring-relation-created -")
                        && at("ring-relation-created -") < at("config-changed -")
                        && at("config-changed -") < at("start -"),
                    "{machine}: setup out of Juju's order in {log:#?}"
                );
            }
            assert_eq!(
                log.iter().filter(|l| *l == "ring-relation-created -").count(),
                1,
                "{log:#?}"
            );
        }

        // 3 → 1: the units that go leave their peers, then stop and are removed.
        kubectl_olm(&client, &ns, &["scale", "db", "1"]).await;
        let kept = placed(&pools, 1).await;
        let gone: Vec<&String> = machines.iter().filter(|m| !kept.contains(m)).collect();
        for machine in &gone {
            eventually(&format!("{machine} removed its unit"), || async {
                log(&logs, machine).last().map(String::as_str) == Some("remove -")
            })
            .await;
            let log = log(&logs, machine);
            check_order(machine, &log);
            let tail: Vec<String> = hook_lines(&log).into_iter().rev().take(2 + 2).collect();
            assert_eq!(
                tail[..3],
                ["remove -", "stop -", "ring-relation-broken -"],
                "{log:#?}"
            );
            for peer in machines.iter().filter(|m| *m != *machine) {
                let departed = format!("ring-relation-departed db/{peer}");
                assert_eq!(log.iter().filter(|l| **l == departed).count(), 1, "{log:#?}");
            }
        }
        let stays = &kept[0];
        eventually(&format!("{stays} saw each unit that went depart"), || async {
            let log = log(&logs, stays);
            gone.iter()
                .all(|m| log.contains(&format!("ring-relation-departed db/{m}")))
        })
        .await;
        let log_kept = log(&logs, stays);
        check_order(stays, &log_kept);
        assert!(!log_kept.contains(&"stop -".to_owned()), "{log_kept:#?}");
        assert!(
            !log_kept.contains(&"ring-relation-broken -".to_owned()),
            "{log_kept:#?}"
        );

        // More units than machines: the pool says so.
        kubectl_olm(&client, &ns, &["scale", "db", "5"]).await;
        wait_for(&pools, POOL, "Scaled is False", |p: Option<&MachinePool>| {
            p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.conditions.iter().flatten().any(|c| {
                    c.type_ == "Scaled"
                        && c.status == "False"
                        && c.reason == "NotEnoughMachines"
                        && c.message
                            .contains("db asks for 5 units and the pool has 3 ready machines")
                })
            })
        })
        .await;

        for agent in &mut agents {
            agent.terminate(Duration::from_secs(10));
        }
        operator.stop().await;
        let _ = std::fs::remove_dir_all(&logs);
    })
    .await;
}
