//! MachinePools on the real control plane: the agent DaemonSet on the fake
//! nodes, the API server refusing one agent's writes to another machine's
//! Machine and Lease, lost machines, a selector that matches no node, and a
//! CSV with the `machine` strategy walking its phases from Machine status.
//!
//! The agents here are played by the test itself, with the credentials a
//! DaemonSet pod of each fake node gets (a token bound to that pod), so that
//! what the API server enforces is tested without the agent binary.

mod common;

use std::time::Duration;

use common::{eventually, wait_for, with_namespace};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        authentication::v1::TokenRequest,
        coordination::v1::Lease,
        core::v1::{ConfigMap, Pod, ServiceAccount},
    },
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
    config::AuthInfo,
};
use olm_api::{
    substrate::{Machine, MachinePool},
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};

const POOL: &str = "edge";
const AGENT_MANAGER: &str = "machine-agent";

fn pool(selector: serde_json::Value) -> MachinePool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "substrate.olm-rs.dev/v1alpha1",
        "kind": "MachinePool",
        "metadata": {"name": POOL},
        "spec": {
            "nodeSelector": selector,
            "agent": {"image": "registry.k8s.io/pause", "version": "3.10"},
            "upgrade": {"maxUnavailable": 1},
        },
    }))
    .expect("a MachinePool")
}

fn condition(pool: &MachinePool, type_: &str) -> Option<(String, String, String)> {
    pool.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// A client that acts as the agent pod `pod` (a token of the agents'
/// ServiceAccount bound to that pod, so it carries the pod's node).
async fn agent_client(admin: &Client, namespace: &str, pod: &Pod) -> Client {
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": [],
            "expirationSeconds": 3600,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.name_any(), "uid": pod.uid()},
        },
    }))
    .expect("a TokenRequest");
    let accounts = Api::<ServiceAccount>::namespaced(admin.clone(), namespace);
    let issued: TokenRequest = accounts
        .create_subresource(
            "token",
            &format!("machine-agent-{POOL}"),
            &PostParams::default(),
            &request,
        )
        .await
        .expect("a token for the agent pod");
    let token = issued.status.expect("a token").token;
    let mut config = olm_testkit::config().await;
    config.auth_info =
        serde_json::from_value::<AuthInfo>(serde_json::json!({ "token": token })).expect("auth");
    Client::try_from(config).expect("an agent client")
}

fn machine(node: &str) -> Machine {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "substrate.olm-rs.dev/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": format!("{POOL}-{node}")},
        "spec": {"pool": POOL, "nodeName": node},
    }))
    .expect("a Machine")
}

fn lease(name: &str, renewed: Timestamp) -> Lease {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(renewed)},
    }))
    .expect("a Lease")
}

async fn agent_apply<K>(api: &Api<K>, object: &K) -> Result<K, kube::Error>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    api.patch(
        &object.name_any(),
        &PatchParams::apply(AGENT_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
}

fn refused(result: Result<impl std::fmt::Debug, kube::Error>, what: &str) -> String {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 || status.code == 422 => status.message,
        other => panic!("{what}: expected the API server to refuse, got {other:?}"),
    }
}

/// Reports `node`'s machine Ready, as its agent would.
async fn report_ready(machines: &Api<Machine>, node: &str, units: serde_json::Value) {
    let now = Timestamp::now();
    let status = serde_json::json!({
        "apiVersion": "substrate.olm-rs.dev/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": format!("{POOL}-{node}")},
        "status": {
            "agentVersion": "3.10",
            "units": units,
            "conditions": [{"type": "Ready", "status": "True", "reason": "AgentRunning", "message": "", "lastTransitionTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::from_second(now.as_second()).expect("now"))}],
        },
    });
    machines
        .patch_status(
            &format!("{POOL}-{node}"),
            &PatchParams::apply(AGENT_MANAGER).force(),
            &Patch::Apply(&status),
        )
        .await
        .expect("the agent reports its machine");
}

/// The two agent pods of the pool's DaemonSet, once scheduled, by node.
async fn agent_pods(admin: &Client, namespace: &str) -> Vec<Pod> {
    let pods = Api::<Pod>::namespaced(admin.clone(), namespace);
    let selector = format!("substrate.olm-rs.dev/pool={POOL}");
    let scheduled = || async {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let mut found: Vec<Pod> = list
            .into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .collect();
        found.sort_by_key(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()));
        found
    };
    eventually("the agent DaemonSet has a pod on each fake node", || async {
        scheduled().await.len() >= 2
    })
    .await;
    scheduled().await
}

/// The API server endpoints that hack/cluster.sh's control plane serves on (two),
/// from `OLM_RS_APISERVER_ENDPOINTS`, which hack/test.sh sets. Required: the steps
/// that use them prove nothing without them.
fn apiserver_endpoints() -> Vec<String> {
    let list = std::env::var("OLM_RS_APISERVER_ENDPOINTS").unwrap_or_else(|_| {
        panic!(
            "OLM_RS_APISERVER_ENDPOINTS is not set: this test checks the API server endpoints published \
             for agents and fails agents over between two API servers; run it through `make test`, or \
             set it with `eval \"$(hack/cluster.sh env)\"` and OLM_RS_CLUSTER_DIR for hack/cluster.sh's \
             control plane"
        )
    });
    list.split(',').map(str::to_owned).collect()
}

/// The API server other than `first` that agents can fail over to, stopped and
/// started through hack/cluster.sh (which finds the control plane through
/// `OLM_RS_CLUSTER_DIR`, set by hack/test.sh).
fn second_apiserver(first: &str) -> String {
    assert!(
        std::env::var_os("OLM_RS_CLUSTER_DIR").is_some(),
        "OLM_RS_CLUSTER_DIR is not set: this test stops and starts the second API server of \
         hack/cluster.sh's control plane and needs its state directory (hack/test.sh sets it)"
    );
    let endpoints = apiserver_endpoints();
    endpoints
        .iter()
        .find(|e| **e != first)
        .cloned()
        .unwrap_or_else(|| {
            panic!("OLM_RS_APISERVER_ENDPOINTS={endpoints:?} names no API server besides {first}")
        })
}

fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("scheduled")
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn an_agent_writes_only_its_own_machine_and_lease_and_a_silent_one_is_lost() {
    common::machines::install_policy().await;
    with_namespace("machines", |admin, ns| async move {
        let pools = Api::<MachinePool>::namespaced(admin.clone(), &ns);
        common::apply(&pools, &pool(serde_json::json!({"type": "kwok"}))).await;

        // The agent DaemonSet, as the pool says.
        let daemonsets = Api::<DaemonSet>::namespaced(admin.clone(), &ns);
        let ds = wait_for(
            &daemonsets,
            "machine-agent-edge",
            "the agent DaemonSet",
            |d: Option<&DaemonSet>| d.is_some(),
        )
        .await
        .expect("the DaemonSet");
        let pod = ds
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("a pod spec");
        assert_eq!(pod.host_network, Some(true));
        assert_eq!(pod.service_account_name.as_deref(), Some("machine-agent-edge"));
        wait_for(
            &pools,
            POOL,
            "two desired machines, none registered",
            |p: Option<&MachinePool>| {
                p.and_then(|p| p.status.as_ref())
                    .is_some_and(|s| s.desired_machines == Some(2) && s.machines == Some(0))
            },
        )
        .await;

        // Two agents, each with its own pod's credentials.
        let pods = agent_pods(&admin, &ns).await;
        let (node_a, node_b) = (node_of(&pods[0]), node_of(&pods[1]));
        let agent_a = agent_client(&admin, &ns, &pods[0]).await;
        let machines_a = Api::<Machine>::namespaced(agent_a.clone(), &ns);
        let leases_a = Api::<Lease>::namespaced(agent_a.clone(), &ns);

        // Its own Machine and Lease: allowed.
        agent_apply(&machines_a, &machine(&node_a))
            .await
            .expect("agent A registers its machine");
        agent_apply(&leases_a, &lease(&format!("{POOL}-{node_a}"), Timestamp::now()))
            .await
            .expect("agent A heartbeats");
        report_ready(&machines_a, &node_a, serde_json::json!([])).await;

        // Another machine's: refused by the API server.
        let message = refused(
            agent_apply(&machines_a, &machine(&node_b)).await,
            "agent A creating B's Machine",
        );
        assert!(
            message.contains(&format!("may write only {POOL}-{node_a}")),
            "{message}"
        );
        let admin_leases = Api::<Lease>::namespaced(admin.clone(), &ns);
        common::apply(
            &admin_leases,
            &lease(&format!("{POOL}-{node_b}"), Timestamp::now()),
        )
        .await;
        refused(
            agent_apply(&leases_a, &lease(&format!("{POOL}-{node_b}"), Timestamp::now())).await,
            "agent A renewing B's Lease",
        );
        let admin_machines = Api::<Machine>::namespaced(admin.clone(), &ns);
        common::apply(&admin_machines, &machine(&node_b)).await;
        refused(
            machines_a
                .patch_status(
                    &format!("{POOL}-{node_b}"),
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"status": {"agentVersion": "forged"}})),
                )
                .await,
            "agent A writing B's Machine status",
        );
        refused(
            machines_a
                .delete(&format!("{POOL}-{node_b}"), &Default::default())
                .await,
            "agent A deleting B's Machine",
        );
        // A Machine for its own node but another name: refused too.
        let mut renamed = machine(&node_a);
        renamed.metadata.name = Some(format!("{POOL}-elsewhere"));
        refused(
            agent_apply(&machines_a, &renamed).await,
            "agent A registering a second machine",
        );

        // B's agent is silent (its Lease was renewed once, by the admin): lost
        // within the Lease duration; A stays ready while it heartbeats.
        let heartbeat = {
            let leases_a = leases_a.clone();
            let name = format!("{POOL}-{node_a}");
            tokio::spawn(async move {
                loop {
                    let _ = agent_apply(&leases_a, &lease(&name, Timestamp::now())).await;
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            })
        };
        let expired = Timestamp::now() - SignedDuration::from_secs(60);
        common::apply(&admin_leases, &lease(&format!("{POOL}-{node_b}"), expired)).await;
        let lost = wait_for(
            &pools,
            POOL,
            "machine B lost, A ready",
            |p: Option<&MachinePool>| {
                p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                    s.lost_machines == Some(1) && s.ready_machines == Some(1) && s.machines == Some(2)
                })
            },
        )
        .await
        .expect("the pool");
        assert_eq!(
            lost.status.as_ref().and_then(|s| s.lost.clone()),
            Some(vec![format!("{POOL}-{node_b}")])
        );
        let degraded = condition(&lost, "Degraded").expect("Degraded");
        assert_eq!(
            (degraded.0.as_str(), degraded.1.as_str()),
            ("True", "MachinesLost")
        );
        wait_for(
            &admin_machines,
            &format!("{POOL}-{node_b}"),
            "B's Ready is Unknown/AgentLost",
            |m: Option<&Machine>| {
                m.and_then(|m| m.status.as_ref())
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Ready").cloned())
                    .is_some_and(|c| c.status == "Unknown" && c.reason == "AgentLost")
            },
        )
        .await;
        let a = admin_machines.get(&format!("{POOL}-{node_a}")).await.expect("A");
        assert!(
            a.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
            "a heartbeating machine is not lost"
        );

        // The API server endpoints are published for the agents.
        let published = lost
            .status
            .and_then(|s| s.api_server_endpoints)
            .unwrap_or_default();
        for endpoint in apiserver_endpoints() {
            assert!(published.contains(&endpoint), "{endpoint} not in {published:?}");
        }
        heartbeat.abort();
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_selector_that_matches_no_node_is_named() {
    with_namespace("machines-none", |admin, ns| async move {
        let pools = Api::<MachinePool>::namespaced(admin.clone(), &ns);
        common::apply(
            &pools,
            &pool(serde_json::json!({"olm-rs.dev/no-such-label": "x"})),
        )
        .await;
        let found = wait_for(
            &pools,
            POOL,
            "Degraded NoMatchingNodes",
            |p: Option<&MachinePool>| {
                p.and_then(|p| condition(p, "Degraded"))
                    .is_some_and(|c| c.1 == "NoMatchingNodes")
            },
        )
        .await
        .expect("the pool");
        let ready = condition(&found, "Ready").expect("Ready");
        assert_eq!((ready.0.as_str(), ready.1.as_str()), ("False", "NoMatchingNodes"));
        assert!(ready.2.contains("olm-rs.dev/no-such-label=x"), "{}", ready.2);
        assert_eq!(
            found.status.and_then(|s| s.observed_generation),
            found.metadata.generation
        );
    })
    .await;
}

fn machine_csv(version: &str) -> ClusterServiceVersion {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("demo-machine.v{version}")},
        "spec": {
            "displayName": "Demo on machines",
            "version": version,
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "SingleNamespace", "supported": true},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": true},
            ],
            "install": {
                "strategy": "machine",
                "spec": {"pool": POOL, "hooks": {"configMap": "demo-hooks"}, "config": {"port": "8080"}},
            },
        },
    }))
    .expect("a machine CSV")
}

fn hooks(names: &[&str]) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "demo-hooks"},
        "data": names
            .iter()
            .map(|n| ((*n).to_owned(), serde_json::Value::from("#!/bin/sh\nexit 0\n")))
            .collect::<serde_json::Map<_, _>>(),
    }))
    .expect("a hooks ConfigMap")
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_machine_csv_succeeds_when_every_ready_machine_runs_it() {
    with_namespace("machine-csv", |admin, ns| async move {
        let groups = Api::<OperatorGroup>::namespaced(admin.clone(), &ns);
        olm_testkit::objects::apply_json(&groups, serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "group"}, "spec": {"targetNamespaces": [ns.clone()]},
        }))
        .await;
        let config_maps = Api::<ConfigMap>::namespaced(admin.clone(), &ns);
        common::apply(&config_maps, &hooks(&["install"])).await;
        let csvs = Api::<ClusterServiceVersion>::namespaced(admin.clone(), &ns);
        common::apply(&csvs, &machine_csv("1.0.0")).await;
        let name = "demo-machine.v1.0.0";

        // No pool and no start hook: Pending, saying which.
        let pending = wait_for(&csvs, name, "Pending with unmet requirements", |c: Option<&ClusterServiceVersion>| {
            c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
                s.phase == Some(CsvPhase::Pending)
                    && s.message.as_deref().is_some_and(|m| m.contains("MachinePool edge"))
                    && s.requirement_status.as_ref().is_some_and(|r| r.iter().any(|r| r.message.contains("no start hook")))
            })
        })
        .await
        .expect("the CSV");
        let message = pending.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains("MachinePool edge") && message.contains("ConfigMap demo-hooks"), "{message}");

        // Pool, complete hooks and one machine reporting the unit active.
        let pools = Api::<MachinePool>::namespaced(admin.clone(), &ns);
        common::apply(&pools, &pool(serde_json::json!({"olm-rs.dev/no-such-label": "x"}))).await;
        common::apply(&config_maps, &hooks(&["install", "start"])).await;
        let installing = wait_for(&csvs, name, "Installing, waiting for machines", |c: Option<&ClusterServiceVersion>| {
            c.and_then(|c| c.status.as_ref()).is_some_and(|s| s.phase == Some(CsvPhase::Installing))
        })
        .await
        .expect("the CSV");
        assert!(installing.status.and_then(|s| s.message).is_some());
        // The effective config, owned by the CSV.
        let config = wait_for(&config_maps, "demo-machine.v1.0.0-config", "the effective config", |c: Option<&ConfigMap>| c.is_some())
            .await
            .expect("the config");
        assert_eq!(config.data.and_then(|d| d.get("port").cloned()).as_deref(), Some("8080"));
        assert_eq!(config.metadata.labels.and_then(|l| l.get("substrate.olm-rs.dev/pool").cloned()).as_deref(), Some(POOL));

        let machines = Api::<Machine>::namespaced(admin.clone(), &ns);
        let leases = Api::<Lease>::namespaced(admin.clone(), &ns);
        common::apply(&machines, &machine("m1")).await;
        common::apply(&leases, &lease(&format!("{POOL}-m1"), Timestamp::now())).await;
        report_ready(&machines, "m1", serde_json::json!([{"csv": name, "version": "1.0.0", "state": "error", "message": "hook install failed: exit 3"}])).await;
        let waiting = wait_for(&csvs, name, "the machine in error named", |c: Option<&ClusterServiceVersion>| {
            c.and_then(|c| c.status.as_ref()).and_then(|s| s.message.clone()).is_some_and(|m| m.contains("machines in error: edge-m1 (hook install failed: exit 3)"))
        })
        .await;
        assert!(waiting.is_some());
        report_ready(&machines, "m1", serde_json::json!([{"csv": name, "version": "1.0.0", "state": "active"}])).await;
        wait_for(&csvs, name, "Succeeded", |c: Option<&ClusterServiceVersion>| {
            c.and_then(|c| c.status.as_ref()).is_some_and(|s| s.phase == Some(CsvPhase::Succeeded))
        })
        .await;
    })
    .await;
}

/// Agent processes, killed when the test ends however it ends.
struct Agents(Vec<(String, std::process::Child)>);

impl Agents {
    fn kill(&mut self, node: &str) {
        if let Some((_, child)) = self.0.iter_mut().find(|(n, _)| n == node) {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.0.retain(|(n, _)| n != node);
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A kubeconfig for `server` with the cluster's CA and `token`: what an agent
/// pod's credentials amount to.
async fn agent_kubeconfig(
    admin: &Client,
    namespace: &str,
    pod: &Pod,
    server: &str,
    dir: &std::path::Path,
) -> std::path::PathBuf {
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": [],
            "expirationSeconds": 3600,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.name_any(), "uid": pod.uid()},
        },
    }))
    .expect("a TokenRequest");
    let issued: TokenRequest = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_subresource(
            "token",
            &format!("machine-agent-{POOL}"),
            &PostParams::default(),
            &request,
        )
        .await
        .expect("a token for the agent pod");
    let token = issued.status.and_then(|s| s.token).expect("a token");
    let admin_config = kube::config::Kubeconfig::read().expect("KUBECONFIG");
    let ca = admin_config.clusters[0]
        .cluster
        .as_ref()
        .and_then(|c| c.certificate_authority_data.clone())
        .expect("the cluster's CA in KUBECONFIG");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: {namespace}\ncurrent-context: c\n"
    );
    let path = dir.join(format!("{}.kubeconfig", node_of(pod)));
    std::fs::write(&path, text).expect("write the agent kubeconfig");
    path
}

fn spawn_agent(
    dir: &std::path::Path,
    kubeconfig: &std::path::Path,
    namespace: &str,
    node: &str,
) -> std::process::Child {
    let state = dir.join(format!("state-{node}"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("agent-{node}.log")))
        .expect("agent log");
    std::process::Command::new(olm_testkit::process::binary("machine-agent"))
        .args([
            "run",
            "--namespace",
            namespace,
            "--pool",
            POOL,
            "--node-name",
            node,
            "--lease-duration-seconds",
            "12",
        ])
        // Port 0: the agent binds whatever port is free when it starts. A port
        // found free beforehand can be taken in between (by the other agent, or
        // by an outgoing connection), and the agent then exits at once.
        .args(["--admin-addr", "127.0.0.1:0"])
        .arg("--state-dir")
        .arg(&state)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("RUST_LOG", "machine_agent=debug")
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start machine-agent")
}

fn hook_logs(dir: &std::path::Path, node: &str) -> String {
    fn walk(path: &std::path::Path, out: &mut String) {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.file_name().is_some_and(|n| n == "hooks.log") {
                out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    let mut out = String::new();
    walk(&dir.join(format!("state-{node}")), &mut out);
    out
}

fn lease_renewed(lease: Option<&Lease>) -> Option<Timestamp> {
    lease?.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn agents_install_a_machine_csv_get_lost_and_fail_over_between_api_servers() {
    common::machines::install_policy().await;
    with_namespace("machine-agents", |admin, ns| async move {
        let dir = std::env::temp_dir().join(format!("olm-rs-agents-{ns}"));
        std::fs::create_dir_all(&dir).expect("a test directory");
        let groups = Api::<OperatorGroup>::namespaced(admin.clone(), &ns);
        olm_testkit::objects::apply_json(
            &groups,
            serde_json::json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "group"}, "spec": {"targetNamespaces": [ns.clone()]},
            }),
        )
        .await;
        let pools = Api::<MachinePool>::namespaced(admin.clone(), &ns);
        common::apply(&pools, &pool(serde_json::json!({"type": "kwok"}))).await;
        let config_maps = Api::<ConfigMap>::namespaced(admin.clone(), &ns);
        let script =
            |hook: &str| format!("#!/bin/sh\necho \"{hook} port=$CONFIG_PORT\" >> \"$PWD/hooks.log\"\n");
        let data: serde_json::Map<String, serde_json::Value> =
            ["install", "config-changed", "start", "stop", "remove"]
                .iter()
                .map(|h| ((*h).to_owned(), serde_json::Value::from(script(h))))
                .collect();
        olm_testkit::objects::apply_json(
            &config_maps,
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo-hooks"}, "data": data,
            }),
        )
        .await;

        // Two agents, one per fake node, with their pods' credentials; A
        // starts on the second API server.
        let pods = agent_pods(&admin, &ns).await;
        let first = olm_testkit::config()
            .await
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_owned();
        let second = second_apiserver(&first);
        let (node_a, node_b) = (node_of(&pods[0]), node_of(&pods[1]));
        let kubeconfig_a = agent_kubeconfig(&admin, &ns, &pods[0], &second, &dir).await;
        let kubeconfig_b = agent_kubeconfig(&admin, &ns, &pods[1], &first, &dir).await;
        let mut agents = Agents(vec![
            (node_a.clone(), spawn_agent(&dir, &kubeconfig_a, &ns, &node_a)),
            (node_b.clone(), spawn_agent(&dir, &kubeconfig_b, &ns, &node_b)),
        ]);
        wait_for(
            &pools,
            POOL,
            "both machines registered and ready",
            |p: Option<&MachinePool>| {
                p.and_then(|p| p.status.as_ref())
                    .is_some_and(|s| s.ready_machines == Some(2))
            },
        )
        .await;

        // The machine CSV installs on both.
        let csvs = Api::<ClusterServiceVersion>::namespaced(admin.clone(), &ns);
        common::apply(&csvs, &machine_csv("1.0.0")).await;
        let name = "demo-machine.v1.0.0";
        let succeeded = |c: Option<&ClusterServiceVersion>| {
            c.and_then(|c| c.status.as_ref())
                .is_some_and(|s| s.phase == Some(CsvPhase::Succeeded))
        };
        wait_for(&csvs, name, "Succeeded on both machines", succeeded).await;
        for node in [&node_a, &node_b] {
            let log = hook_logs(&dir, node);
            let order: Vec<&str> = log
                .lines()
                .map(|l| l.split(' ').next().unwrap_or_default())
                .collect();
            assert_eq!(
                order,
                ["install", "config-changed", "start"],
                "hooks on {node}: {log}"
            );
            assert!(log.contains("port=8080"), "{log}");
        }

        // Losing the API server agent A uses does not interrupt it, also across its restart.
        {
            let cluster = |command: &str| {
                let status = std::process::Command::new(olm_testkit::repo_root().join("hack/cluster.sh"))
                    .arg(command)
                    .status()
                    .expect("hack/cluster.sh");
                assert!(status.success(), "hack/cluster.sh {command}");
            };
            let leases = Api::<Lease>::namespaced(admin.clone(), &ns);
            let lease_a = format!("{POOL}-{node_a}");
            cluster("stop-apiserver-2");
            let stopped_at = Timestamp::now();
            let renewed_after =
                |at: Timestamp| move |l: Option<&Lease>| lease_renewed(l).is_some_and(|r| r > at);
            let survived = wait_for(
                &leases,
                &lease_a,
                "agent A heartbeats through the first server",
                renewed_after(stopped_at),
            )
            .await;
            assert!(survived.is_some());
            agents.kill(&node_a);
            let restarted_at = Timestamp::now();
            agents
                .0
                .push((node_a.clone(), spawn_agent(&dir, &kubeconfig_a, &ns, &node_a)));
            wait_for(
                &leases,
                &lease_a,
                "restarted agent A heartbeats from its saved endpoints",
                renewed_after(restarted_at),
            )
            .await;
            cluster("start-apiserver-2");
        }

        // Killing agent B: its machine is lost and the CSV says so; restarted,
        // it re-adopts the same Machine.
        agents.kill(&node_b);
        let lost_b = format!("{POOL}-{node_b}");
        let said = wait_for(
            &csvs,
            name,
            "the CSV names the lost machine",
            |c: Option<&ClusterServiceVersion>| {
                c.and_then(|c| c.status.as_ref())
                    .and_then(|s| s.message.clone())
                    .is_some_and(|m| m.contains(&lost_b) && m.contains("lost"))
            },
        )
        .await;
        assert!(said.is_some());
        agents
            .0
            .push((node_b.clone(), spawn_agent(&dir, &kubeconfig_b, &ns, &node_b)));
        wait_for(&csvs, name, "Succeeded again once B is back", succeeded).await;
        let machines = Api::<Machine>::namespaced(admin.clone(), &ns);
        let all = machines.list(&ListParams::default()).await.expect("machines");
        assert_eq!(all.items.len(), 2, "no duplicate Machine after a restart");
        drop(agents);
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}

/// An upgrade that arrives while the first version still installs: the agents
/// finish the install of 1.0.0 (olm-operator installs 1.1.0 only once 1.0.0
/// succeeded and stepped aside, and writes 1.1.0's config only then), and
/// upgrade their units once 1.1.0's config is written. Before, the agents
/// moved their units to 1.1.0 at once, waiting for a config olm-operator
/// never wrote, and 1.0.0 failed on its install timeout.
#[tokio::test]
#[ignore = "needs a cluster"]
async fn an_upgrade_that_arrives_while_the_first_version_installs_completes() {
    common::machines::install_policy().await;
    with_namespace("machine-upgrade", |admin, ns| async move {
        let dir = std::env::temp_dir().join(format!("olm-rs-agents-{ns}"));
        std::fs::create_dir_all(&dir).expect("a test directory");
        let groups = Api::<OperatorGroup>::namespaced(admin.clone(), &ns);
        olm_testkit::objects::apply_json(
            &groups,
            serde_json::json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "group"}, "spec": {"targetNamespaces": [ns.clone()]},
            }),
        )
        .await;
        let pools = Api::<MachinePool>::namespaced(admin.clone(), &ns);
        common::apply(&pools, &pool(serde_json::json!({"type": "kwok"}))).await;
        // A slow install, so that 1.1.0 surely arrives while 1.0.0 installs.
        let script = |hook: &str, extra: &str| {
            format!("#!/bin/sh\necho \"{hook} $OLM_RS_VERSION\" >> \"$PWD/hooks.log\"\n{extra}")
        };
        let data: serde_json::Map<String, serde_json::Value> = [
            ("install", script("install", "sleep 6\n")),
            ("config-changed", script("config-changed", "")),
            ("start", script("start", "")),
            ("upgrade", script("upgrade", "")),
        ]
        .into_iter()
        .map(|(hook, text)| (hook.to_owned(), serde_json::Value::from(text)))
        .collect();
        let config_maps = Api::<ConfigMap>::namespaced(admin.clone(), &ns);
        olm_testkit::objects::apply_json(
            &config_maps,
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo-hooks"}, "data": data,
            }),
        )
        .await;

        let pods = agent_pods(&admin, &ns).await;
        let first = olm_testkit::config()
            .await
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_owned();
        let mut children = Vec::new();
        for pod in &pods[..2] {
            let node = node_of(pod);
            let kubeconfig = agent_kubeconfig(&admin, &ns, pod, &first, &dir).await;
            children.push((node.clone(), spawn_agent(&dir, &kubeconfig, &ns, &node)));
        }
        let agents = Agents(children);
        wait_for(
            &pools,
            POOL,
            "both machines registered and ready",
            |p: Option<&MachinePool>| {
                p.and_then(|p| p.status.as_ref())
                    .is_some_and(|s| s.ready_machines == Some(2))
            },
        )
        .await;

        let csvs = Api::<ClusterServiceVersion>::namespaced(admin.clone(), &ns);
        common::apply(&csvs, &machine_csv("1.0.0")).await;
        let machines = Api::<Machine>::namespaced(admin.clone(), &ns);
        let nodes: Vec<String> = agents.0.iter().map(|(node, _)| node.clone()).collect();
        eventually("both machines run the install of 1.0.0", || async {
            let mut installing = 0;
            for node in &nodes {
                if hook_logs(&dir, node).contains("install 1.0.0") {
                    installing += 1;
                }
            }
            installing == nodes.len()
        })
        .await;
        let mut next = machine_csv("1.1.0");
        next.spec.replaces = Some("demo-machine.v1.0.0".to_owned());
        common::apply(&csvs, &next).await;

        wait_for(
            &csvs,
            "demo-machine.v1.1.0",
            "1.1.0 Succeeded on both machines",
            |c: Option<&ClusterServiceVersion>| {
                c.and_then(|c| c.status.as_ref())
                    .is_some_and(|s| s.phase == Some(CsvPhase::Succeeded))
            },
        )
        .await;
        common::wait_gone(&csvs, "demo-machine.v1.0.0").await;
        for node in &nodes {
            let log = hook_logs(&dir, node);
            let ran: Vec<&str> = log.lines().collect();
            assert_eq!(
                ran,
                [
                    "install 1.0.0",
                    "config-changed 1.0.0",
                    "start 1.0.0",
                    "upgrade 1.1.0"
                ],
                "hooks on {node}"
            );
            let machine = machines
                .get(&format!("{POOL}-{node}"))
                .await
                .expect("the Machine");
            let units = machine.status.and_then(|s| s.units).unwrap_or_default();
            assert_eq!(units.len(), 1, "one unit on {node}: {units:?}");
            assert_eq!(
                (units[0].csv.as_str(), units[0].version.as_str()),
                ("demo-machine.v1.1.0", "1.1.0")
            );
        }
        drop(agents);
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}
