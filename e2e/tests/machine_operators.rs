//! A machine operator through its whole life with both operators: the demo
//! catalog's `demo-machine` (strategy `machine`) subscribed to, installed,
//! reconfigured, broken and fixed through the Subscription's config, upgraded by a
//! catalog update, and removed, on two machines played by agent processes. Here
//! olm-operator writes what the agents read (the effective config), unlike in
//! `machine_agent.rs`, where the test plays that part. A second test rolls
//! the operator back from 1.1.0 to 1.0.0: every unit runs `upgrade` toward
//! 1.0.0, a unit whose `upgrade` fails is named on the Subscription, and
//! 1.0.0 succeeds only once every unit is active at it.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use e2e::{
    inprocess::{DemoStack, demo_catalog},
    rollbacks::rolled_back,
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams},
};
use olm_api::{
    model::OperatorRevision,
    substrate::{Machine, MachinePool, UnitStatus, WorkloadState},
    v1alpha1::{ClusterServiceVersion, ConditionStatus, CsvPhase, Subscription},
};
use olm_catalog::Catalog;
use olm_registry::server::RegistryIndex;
use olm_testkit::{
    eventually, install_crds,
    objects::apply_json,
    process::{Process, binary, free_port},
    random_suffix, wait_for, wait_gone, with_namespace,
};
use serde_json::json;

const POOL: &str = "edge";
const V1: &str = "demo-machine.v1.0.0";
const V2: &str = "demo-machine.v1.1.0";

/// The demo catalog without `bundle` (in neither its bundles nor its channels).
fn catalog_without(bundle: &str) -> Catalog {
    let mut catalog = demo_catalog(false);
    catalog.bundles.retain(|b| b.name != bundle);
    for channel in &mut catalog.channels {
        channel.entries.retain(|e| e.name != bundle);
    }
    catalog
}

fn state_dir(machine: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olm-rs-agent-{machine}-{}", random_suffix()));
    std::fs::create_dir_all(&dir).expect("a state directory");
    dir
}

/// An agent playing node `node` of the pool, with the test's credentials.
fn agent(namespace: &str, node: &str, state: &Path) -> Process {
    let admin = free_port();
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG names the test cluster's kubeconfig");
    let args: Vec<String> = [
        "run",
        "--state-dir",
        &state.display().to_string(),
        "--namespace",
        namespace,
        "--pool",
        POOL,
        "--node-name",
        node,
        "--kubeconfig",
        &kubeconfig,
        "--admin-addr",
        &format!("127.0.0.1:{admin}"),
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
        Some(admin),
    )
}

/// The Subscription to demo-machine with `port` in its config.
async fn subscribe(client: &Client, namespace: &str, port: &str) {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    apply_json(
        &subs,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
               "metadata": {"name": "demo-machine", "namespace": namespace},
               "spec": {"name": "demo-machine", "channel": "stable", "source": "demo",
                        "sourceNamespace": namespace,
                        "config": {"env": [{"name": "greeting", "value": "hello from the Subscription"},
                                           {"name": "port", "value": port}]}}}),
    )
    .await;
}

fn units(machine: &Machine) -> Vec<UnitStatus> {
    machine
        .status
        .as_ref()
        .and_then(|s| s.units.clone())
        .unwrap_or_default()
}

/// Waits until every machine reports its unit on `csv` in `state` with `message`.
async fn wait_units(
    machines: &Api<Machine>,
    names: &[String],
    csv: &str,
    state: WorkloadState,
    message: &str,
) {
    for name in names {
        eventually(
            &format!("Machine {name} reports unit {csv} {state}: {message}"),
            || async {
                machines.get(name).await.is_ok_and(|machine| {
                    units(&machine)
                        .iter()
                        .any(|u| u.csv == csv && u.state == state && u.message.as_deref() == Some(message))
                })
            },
        )
        .await;
    }
}

fn hook_log(state: &Path) -> Vec<String> {
    std::fs::read_to_string(state.join("units").join(V1).join("sandbox").join("hooks.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `text` without its terminal colour sequences (`ESC [ ... m`).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether the agent's log says `hook` succeeded (text or JSON logs).
fn ran(log: &str, hook: &str) -> bool {
    let log = plain(log);
    let forms = [
        format!("hook={hook}"),
        format!("hook=\"{hook}\""),
        format!("\"hook\":\"{hook}\""),
    ];
    log.lines()
        .any(|line| line.contains("hook succeeded") && forms.iter().any(|f| line.contains(f.as_str())))
}

fn in_phase(phase: CsvPhase) -> impl Fn(Option<&ClusterServiceVersion>) -> bool {
    move |c| {
        c.and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.phase == Some(phase))
    }
}

#[tokio::test]
async fn a_machine_operator_lives_through_olm_on_two_machines() {
    let client = olm_testkit::client().await;
    install_crds(&client).await;
    with_namespace("machine-olm", |client, ns| async move {
        let stack =
            DemoStack::start_with(&client, &ns, Arc::new(RegistryIndex::new(catalog_without(V2)))).await;
        let (mut agents, states, names) = two_machines(&client, &ns, "olm").await;
        let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);

        // Subscribed: every machine runs install, config-changed, start with the
        // Subscription's config, and the CSV succeeds.
        subscribe(&client, &ns, "8080").await;
        wait_for(&csvs, V1, "1.0.0 Succeeded", in_phase(CsvPhase::Succeeded)).await;
        for (name, state) in names.iter().zip(&states) {
            assert_eq!(
                hook_log(state),
                ["install 1.0.0", "config-changed port=8080", "start"],
                "hooks on {name}"
            );
            let page = std::fs::read_to_string(state.join("units").join(V1).join("sandbox/www/index.html"))
                .expect("the page the hooks wrote");
            assert_eq!(
                page.trim(),
                format!("hello from the Subscription from {name} (1.0.0)")
            );
        }
        wait_units(
            &machines,
            &names,
            V1,
            WorkloadState::Active,
            "serving on port 8080",
        )
        .await;

        // The Subscription's config changes: config-changed runs on every machine.
        subscribe(&client, &ns, "9090").await;
        wait_units(
            &machines,
            &names,
            V1,
            WorkloadState::Active,
            "serving on port 9090",
        )
        .await;
        for state in &states {
            assert_eq!(
                hook_log(state).last().map(String::as_str),
                Some("config-changed port=9090")
            );
        }

        // A config its hook refuses: the units are in error with the hook's message
        // and the CSV does not succeed; fixing the config recovers both.
        subscribe(&client, &ns, "bad").await;
        let refused = "config-changed hook failed: port bad is not a number";
        wait_units(&machines, &names, V1, WorkloadState::Error, refused).await;
        let failed = wait_for(
            &csvs,
            V1,
            "1.0.0 names the machines in error",
            |c: Option<&ClusterServiceVersion>| {
                c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
                    s.phase != Some(CsvPhase::Succeeded)
                        && s.message
                            .as_deref()
                            .is_some_and(|m| m.contains("machines in error") && m.contains(refused))
                })
            },
        )
        .await
        .expect("the CSV");
        let phase = failed.status.and_then(|s| s.phase);
        assert!(
            matches!(phase, Some(CsvPhase::Failed | CsvPhase::Installing)),
            "{phase:?}"
        );
        subscribe(&client, &ns, "7070").await;
        wait_units(
            &machines,
            &names,
            V1,
            WorkloadState::Active,
            "serving on port 7070",
        )
        .await;
        wait_for(&csvs, V1, "1.0.0 Succeeded again", in_phase(CsvPhase::Succeeded)).await;

        // A catalog update brings 1.1.0: every unit runs upgrade, 1.1.0 succeeds
        // and 1.0.0 goes, with no stop or remove.
        stack.update_catalog(Arc::new(RegistryIndex::new(demo_catalog(false))));
        wait_for(&csvs, V2, "1.1.0 Succeeded", in_phase(CsvPhase::Succeeded)).await;
        wait_gone(&csvs, V1).await;
        for (name, state) in names.iter().zip(&states) {
            let log = hook_log(state);
            assert!(
                log.iter().any(|l| l == "upgrade to 1.1.0"),
                "hooks on {name}: {log:?}"
            );
            assert!(
                !log.iter().any(|l| l == "stop" || l == "remove"),
                "hooks on {name}: {log:?}"
            );
            let machine = machines.get(name).await.expect("the Machine");
            let found = units(&machine);
            assert_eq!(found.len(), 1, "one unit on {name}: {found:?}");
            assert_eq!((found[0].csv.as_str(), found[0].version.as_str()), (V2, "1.1.0"));
        }

        // The Subscription and the CSV deleted: stop and remove on every machine,
        // and the units are gone.
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        subs.delete("demo-machine", &DeleteParams::default())
            .await
            .expect("delete the Subscription");
        csvs.delete(V2, &DeleteParams::default())
            .await
            .expect("delete the CSV");
        for name in &names {
            eventually(&format!("Machine {name} has no unit left"), || async {
                machines.get(name).await.is_ok_and(|m| units(&m).is_empty())
            })
            .await;
        }
        for (agent, state) in agents.iter().zip(&states) {
            assert!(!state.join("units").join(V1).exists(), "the unit's state is gone");
            // The hooks' own log went with the unit: the agent's log says they ran.
            let log = agent.log_tail(400);
            if !log.is_empty() {
                for hook in ["stop", "remove"] {
                    assert!(ran(&log, hook), "{hook} ran on {state:?}: {log}");
                }
            }
        }
        for agent in &mut agents {
            agent.terminate(Duration::from_secs(10));
        }
        stack.stop().await;
    })
    .await;
}

/// The pool `edge` with two machines played by agent processes (their state
/// directories named `<prefix>-<node>`): the agents, their state directories
/// and the Machines' names, once both are ready.
async fn two_machines(client: &Client, ns: &str, prefix: &str) -> (Vec<Process>, Vec<PathBuf>, Vec<String>) {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), ns);
    apply_json(
        &pools,
        json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
               "metadata": {"name": POOL, "namespace": ns},
               "spec": {"agent": {"image": "olm-rs/machine-agent:dev", "version": "0.1.0"}}}),
    )
    .await;
    let nodes = ["node-a", "node-b"];
    let states: Vec<PathBuf> = nodes
        .iter()
        .map(|n| state_dir(&format!("{prefix}-{n}")))
        .collect();
    let agents: Vec<Process> = nodes
        .iter()
        .zip(&states)
        .map(|(node, state)| agent(ns, node, state))
        .collect();
    // Polled, not watched: a request that fails on a loaded machine is retried.
    eventually("both machines are ready", || async {
        pools
            .get(POOL)
            .await
            .ok()
            .and_then(|p| p.status)
            .is_some_and(|s| s.ready_machines == Some(2))
    })
    .await;
    let names = nodes.iter().map(|n| format!("{POOL}-{n}")).collect();
    (agents, states, names)
}

#[tokio::test]
async fn a_machine_operator_rolls_back_on_every_unit() {
    let client = olm_testkit::client().await;
    install_crds(&client).await;
    with_namespace("machine-rollback", |client, ns| async move {
        let stack =
            DemoStack::start_with(&client, &ns, Arc::new(RegistryIndex::new(catalog_without(V2)))).await;
        let (mut agents, states, names) = two_machines(&client, &ns, "rb").await;
        let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let revisions: Api<OperatorRevision> = Api::namespaced(client.clone(), &ns);

        // 1.0.0 installed and recorded, then upgraded to 1.1.0 by the catalog.
        subscribe(&client, &ns, "8080").await;
        wait_for(&csvs, V1, "1.0.0 Succeeded", in_phase(CsvPhase::Succeeded)).await;
        wait_for(
            &revisions,
            V1,
            "the revision of 1.0.0",
            |r: Option<&OperatorRevision>| r.is_some(),
        )
        .await;
        stack.update_catalog(Arc::new(RegistryIndex::new(demo_catalog(false))));
        wait_for(&csvs, V2, "1.1.0 Succeeded", in_phase(CsvPhase::Succeeded)).await;
        wait_gone(&csvs, V1).await;
        wait_units(
            &machines,
            &names,
            V2,
            WorkloadState::Active,
            "serving on port 8080",
        )
        .await;

        // node-b's hooks cannot write their log: its upgrade back fails.
        let log_b = states[1].join("units").join(V1).join("sandbox").join("hooks.log");
        let saved_b = log_b.with_extension("saved");
        std::fs::rename(&log_b, &saved_b).expect("move node-b's hook log aside");
        std::fs::create_dir(&log_b).expect("a directory in the way of node-b's hook log");

        // The rollback, asked for as GitOps would: the Subscription's annotation.
        let ask = json!({"metadata": {"annotations": {"olm-rs.dev/rollback-to": V1}}});
        subs.patch("demo-machine", &PatchParams::default(), &Patch::Merge(&ask))
            .await
            .expect("ask for the rollback");

        // node-a moves back with upgrade; node-b's failure is named, and 1.0.0
        // does not succeed while a unit is not active at it.
        wait_units(
            &machines,
            &names[..1],
            V1,
            WorkloadState::Active,
            "serving on port 8080",
        )
        .await;
        let named = wait_for(
            &subs,
            "demo-machine",
            "the Subscription names node-b's failed upgrade",
            |s: Option<&Subscription>| {
                rolled_back(s).is_some_and(|(status, reason, message)| {
                    status == ConditionStatus::False
                        && reason == "RollingBack"
                        && message.contains("edge-node-b")
                        && message.contains("upgrade hook failed")
                })
            },
        )
        .await
        .expect("the Subscription");
        let csv = csvs.get(V1).await.expect("1.0.0 is back");
        let phase = csv.status.as_ref().and_then(|s| s.phase);
        assert_ne!(
            phase,
            Some(CsvPhase::Succeeded),
            "{:?}",
            rolled_back(Some(&named))
        );

        // node-b fixed: its upgrade is retried, 1.0.0 succeeds, 1.1.0 goes.
        std::fs::remove_dir(&log_b).expect("clear node-b's hook log");
        std::fs::rename(&saved_b, &log_b).expect("put node-b's hook log back");
        wait_for(&csvs, V1, "1.0.0 Succeeded again", in_phase(CsvPhase::Succeeded)).await;
        wait_gone(&csvs, V2).await;
        wait_for(&subs, "demo-machine", "RolledBack", |s: Option<&Subscription>| {
            rolled_back(s).is_some_and(|(status, _, _)| status == ConditionStatus::True)
        })
        .await;
        for (name, state) in names.iter().zip(&states) {
            let log = hook_log(state);
            let up = log.iter().position(|l| l == "upgrade to 1.1.0");
            let back = log.iter().rposition(|l| l == "upgrade to 1.0.0");
            assert!(
                matches!((up, back), (Some(up), Some(back)) if back > up),
                "hooks on {name}: {log:?}"
            );
            assert!(
                !log.iter().any(|l| l == "stop" || l == "remove"),
                "no unit was removed on {name}: {log:?}"
            );
            let machine = machines.get(name).await.expect("the Machine");
            let found = units(&machine);
            assert_eq!(found.len(), 1, "one unit on {name}: {found:?}");
            assert_eq!(
                (found[0].csv.as_str(), found[0].version.as_str(), found[0].state),
                (V1, "1.0.0", WorkloadState::Active),
                "on {name}"
            );
        }
        for agent in &mut agents {
            agent.terminate(Duration::from_secs(10));
        }
        stack.stop().await;
    })
    .await;
}
