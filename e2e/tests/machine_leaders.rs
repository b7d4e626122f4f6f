//! Application leaders on the real control plane: three agents as processes,
//! each playing one machine of a pool, run a unit each of one application.
//! Exactly one unit leads (it holds the application's leader Lease, its
//! Machine says so, it ran `leader-elected`, and `is-leader` answers `True`
//! for it alone); when its agent is killed, another unit takes the lead
//! within one Lease duration of the last renewal and runs `leader-elected`.
//! The test plays olm-operator's part (the effective config).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::ConfigMap};
use kube::{Api, Client};
use olm_api::{
    model::{LEADER_OF_LABEL, leader_lease},
    substrate::{Machine, MachinePool, POOL_LABEL, UnitStatus},
    v1alpha1::ClusterServiceVersion,
};
use olm_testkit::{
    eventually, install_crds,
    objects::apply_json,
    process::{Process, binary, free_port},
    random_suffix, with_namespace,
};
use serde_json::json;

const POOL: &str = "edge";
const APPLICATION: &str = "demo";
const CSV: &str = "demo.v1.0.0";
/// The agents' Lease duration, for their machines and for leadership.
const LEASE_SECONDS: u64 = 8;

/// Every hook appends its name to `hooks.log`; `start` and `update-status`
/// also log what `is-leader` answers.
fn hooks() -> BTreeMap<String, String> {
    let plain = "#!/bin/sh\necho \"$OLM_RS_HOOK\" >> hooks.log\n".to_owned();
    let asking = "#!/bin/sh\necho \"$OLM_RS_HOOK\" >> hooks.log\n\
                  echo \"is-leader $(machine-agent hook is-leader)\" >> hooks.log\n"
        .to_owned();
    ["install", "config-changed", "leader-elected", "stop", "remove"]
        .into_iter()
        .map(|h| (h.to_owned(), plain.clone()))
        .chain(
            ["start", "update-status"]
                .into_iter()
                .map(|h| (h.to_owned(), asking.clone())),
        )
        .collect()
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
    for (name, data) in [
        ("demo-hooks".to_owned(), hooks()),
        (
            format!("{CSV}-config"),
            BTreeMap::from([("port".to_owned(), "8080".to_owned())]),
        ),
    ] {
        apply_json(
            &config_maps,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}),
        )
        .await;
    }
    // As OLM labels a CSV of a Subscription: the package is the application.
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    apply_json(
        &csvs,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
               "metadata": {"name": CSV, "namespace": ns,
                            "labels": {format!("operators.coreos.com/{APPLICATION}.{ns}"): ""}},
               "spec": {"displayName": "Demo", "version": "1.0.0",
                        "install": {"strategy": "machine", "spec": {
                            "pool": POOL, "hooks": {"configMap": "demo-hooks"},
                            "updateStatusIntervalSeconds": 2}}}}),
    )
    .await;
}

fn state_dir(node: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olm-rs-agent-leader-{node}-{}", random_suffix()));
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
        &LEASE_SECONDS.to_string(),
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

fn unit(machine: &Machine) -> Option<UnitStatus> {
    machine
        .status
        .as_ref()?
        .units
        .as_ref()?
        .iter()
        .find(|u| u.csv == CSV)
        .cloned()
}

fn hook_log(state: &Path) -> Vec<String> {
    std::fs::read_to_string(state.join("units").join(CSV).join("sandbox").join("hooks.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn holder(lease: &Lease) -> String {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default()
}

/// The machines whose unit reports it leads, among `names`.
async fn reported_leaders(machines: &Api<Machine>, names: &[String]) -> Vec<String> {
    let mut leaders = Vec::new();
    for name in names {
        if let Ok(machine) = machines.get(name).await
            && unit(&machine).is_some_and(|u| u.leader && u.application.as_deref() == Some(APPLICATION))
        {
            leaders.push(name.clone());
        }
    }
    leaders
}

#[tokio::test]
async fn one_unit_leads_and_a_lost_leader_is_replaced_within_a_lease_duration() {
    let client = olm_testkit::client().await;
    install_crds(&client).await;
    with_namespace("leaders", |client, ns| async move {
        setup(&client, &ns).await;
        let nodes = ["node-a", "node-b", "node-c"];
        let names: Vec<String> = nodes.iter().map(|n| format!("{POOL}-{n}")).collect();
        let states: BTreeMap<String, PathBuf> = names
            .iter()
            .zip(nodes)
            .map(|(name, node)| (name.clone(), state_dir(node)))
            .collect();
        let mut agents: BTreeMap<String, Process> = names
            .iter()
            .zip(nodes)
            .map(|(name, node)| (name.clone(), agent(&ns, node, &states[name])))
            .collect();
        let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
        let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);

        // Exactly one leader: the Lease's holder, the only unit reporting it,
        // the only one that ran leader-elected and is told True.
        eventually(
            "every unit is active and exactly one reports it leads",
            || async {
                let mut active = 0;
                for name in &names {
                    if machines
                        .get(name)
                        .await
                        .ok()
                        .and_then(|m| unit(&m))
                        .is_some_and(|u| u.state == olm_api::substrate::WorkloadState::Active)
                    {
                        active += 1;
                    }
                }
                active == names.len() && reported_leaders(&machines, &names).await.len() == 1
            },
        )
        .await;
        let lease = leases
            .get(&leader_lease(APPLICATION))
            .await
            .expect("the leader Lease");
        let first = holder(&lease);
        assert_eq!(
            reported_leaders(&machines, &names).await,
            std::slice::from_ref(&first)
        );
        let labels = kube::ResourceExt::labels(&lease);
        assert_eq!(labels[LEADER_OF_LABEL], APPLICATION);
        assert_eq!(labels[POOL_LABEL], POOL);
        eventually("the leader is told it leads", || async {
            hook_log(&states[&first]).iter().any(|l| l == "is-leader True")
        })
        .await;
        for (name, state) in &states {
            let log = hook_log(state);
            let elected = log.iter().filter(|l| *l == "leader-elected").count();
            if *name == first {
                assert_eq!(elected, 1, "{name}: {log:?}");
                let at = |hook: &str| log.iter().position(|l| l == hook).expect(hook);
                // Juju's setup order: leader-elected before config-changed.
                assert!(at("install") < at("leader-elected"), "{log:?}");
                assert!(at("leader-elected") < at("config-changed"), "{log:?}");
            } else {
                assert_eq!(elected, 0, "{name} does not lead: {log:?}");
                assert!(!log.iter().any(|l| l == "is-leader True"), "{name}: {log:?}");
            }
        }

        // The leader's agent is killed: another unit takes the Lease once it
        // expired, within one Lease duration of its last renewal (and one look).
        let renewed_last = {
            agents.get_mut(&first).expect("the leader's agent").kill();
            let lease = leases
                .get(&leader_lease(APPLICATION))
                .await
                .expect("the leader Lease");
            lease.spec.and_then(|s| s.renew_time).expect("renewed").0
        };
        let survivors: Vec<String> = names.iter().filter(|n| **n != first).cloned().collect();
        eventually("another machine holds the leader Lease", || async {
            leases
                .get(&leader_lease(APPLICATION))
                .await
                .is_ok_and(|l| holder(&l) != first && !holder(&l).is_empty())
        })
        .await;
        let lease = leases
            .get(&leader_lease(APPLICATION))
            .await
            .expect("the leader Lease");
        let second = holder(&lease);
        assert!(survivors.contains(&second), "{second} is a living machine");
        let spec = lease.spec.expect("a spec");
        let acquired = spec.acquire_time.expect("acquired").0;
        let waited = acquired.duration_since(renewed_last);
        // The Lease's duration, and one look of a follower (an eighth of it).
        let bound = Duration::from_secs(LEASE_SECONDS) + Duration::from_secs(LEASE_SECONDS) / 8;
        assert!(
            waited.unsigned_abs() <= bound + Duration::from_secs(2),
            "the Lease changed hands {waited:?} after its last renewal (bound {bound:?})"
        );
        assert_eq!(spec.lease_transitions, Some(1));
        eventually(
            "the new leader ran leader-elected and reports it leads",
            || async {
                hook_log(&states[&second]).iter().any(|l| l == "leader-elected")
                    && reported_leaders(&machines, &survivors).await == std::slice::from_ref(&second)
            },
        )
        .await;
        eventually("the new leader is told it leads", || async {
            hook_log(&states[&second]).iter().any(|l| l == "is-leader True")
        })
        .await;
        for mut agent in agents.into_values() {
            agent.terminate(Duration::from_secs(10));
        }
    })
    .await;
}
