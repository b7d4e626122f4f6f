//! The machine agent on the real control plane: agents run as local processes, each
//! playing one machine with a state directory of its own. The test plays
//! olm-operator's part where the agent reads what olm-operator writes (the effective
//! config ConfigMap, the pool's API server endpoints, the lost machine's condition).

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::ConfigMap};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use olm_api::{
    substrate::{Machine, MachinePool, UnitStatus, WorkloadState},
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

/// Appends `<hook> <version> <port>` to `hooks.log` in the sandbox.
const LOG_LINE: &str = r#"echo "$OLM_RS_HOOK $OLM_RS_VERSION ${CONFIG_PORT:-}" >> hooks.log"#;

fn hooks() -> BTreeMap<String, String> {
    let plain = format!("#!/bin/sh\n{LOG_LINE}\n");
    let serve = format!(
        "#!/bin/sh\n{LOG_LINE}\n\
         if [ \"$CONFIG_PORT\" = bad ]; then\n\
           machine-agent hook status-set blocked \"port $CONFIG_PORT is not a number\"\n\
           exit 1\n\
         fi\n\
         machine-agent hook log \"serving on $CONFIG_PORT\"\n\
         machine-agent hook status-set active \"serving on $CONFIG_PORT\"\n"
    );
    ["install", "upgrade", "stop", "remove"]
        .into_iter()
        .map(|h| (h.to_owned(), plain.clone()))
        .chain(
            ["config-changed", "start"]
                .into_iter()
                .map(|h| (h.to_owned(), serve.clone())),
        )
        .collect()
}

async fn config_map(client: &Client, namespace: &str, name: &str, data: BTreeMap<String, String>) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    apply_json(
        &api,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}),
    )
    .await;
}

/// The effective config olm-operator writes for `csv`.
async fn effective_config(client: &Client, namespace: &str, csv: &str, port: &str) {
    config_map(
        client,
        namespace,
        &format!("{csv}-config"),
        BTreeMap::from([("port".to_owned(), port.to_owned())]),
    )
    .await;
}

async fn machine_csv(client: &Client, namespace: &str, version: &str, replaces: Option<&str>) -> String {
    let name = format!("demo.v{version}");
    csv_with(client, namespace, &name, version, replaces, "demo-hooks", 20).await;
    name
}

async fn csv_with(
    client: &Client,
    namespace: &str,
    name: &str,
    version: &str,
    replaces: Option<&str>,
    hooks: &str,
    timeout_seconds: u64,
) {
    let api: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let mut spec = json!({
        "displayName": "Demo machine operator",
        "version": version,
        "install": {"strategy": "machine", "spec": {
            "pool": POOL, "hooks": {"configMap": hooks}, "config": {"port": "8080"},
            "hookTimeoutSeconds": timeout_seconds,
        }},
    });
    if let Some(replaces) = replaces {
        spec["replaces"] = replaces.into();
    }
    apply_json(
        &api,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
               "metadata": {"name": name, "namespace": namespace}, "spec": spec}),
    )
    .await;
}

async fn pool(client: &Client, namespace: &str) {
    let api: Api<MachinePool> = Api::namespaced(client.clone(), namespace);
    apply_json(
        &api,
        json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
               "metadata": {"name": POOL, "namespace": namespace},
               "spec": {"agent": {"image": "olm-rs/machine-agent:dev", "version": "0.1.0"}}}),
    )
    .await;
}

/// A state directory for one machine.
fn state_dir(machine: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olm-rs-agent-{machine}-{}", random_suffix()));
    std::fs::create_dir_all(&dir).expect("a state directory");
    dir
}

/// An agent playing node `node` of the pool, connecting with `kubeconfig`.
fn agent(label: &str, namespace: &str, node: &str, state: &Path, kubeconfig: &Path) -> Process {
    let admin = free_port();
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
        &kubeconfig.display().to_string(),
        "--admin-addr",
        &format!("127.0.0.1:{admin}"),
        "--lease-duration-seconds",
        "8",
        "--endpoint-refresh-seconds",
        "2",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    Process::spawn(
        &format!("machine-agent-{label}"),
        &binary("machine-agent"),
        &args,
        Some(admin),
    )
}

fn kubeconfig() -> PathBuf {
    PathBuf::from(std::env::var("KUBECONFIG").expect("KUBECONFIG names the test cluster's kubeconfig"))
}

fn ready(machine: &Machine) -> Option<(String, String)> {
    machine
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone()))
}

fn units(machine: &Machine) -> Vec<UnitStatus> {
    machine
        .status
        .as_ref()
        .and_then(|s| s.units.clone())
        .unwrap_or_default()
}

/// Waits until the Machine's only unit is `state` on `csv`.
async fn wait_unit(machines: &Api<Machine>, name: &str, csv: &str, state: WorkloadState) -> UnitStatus {
    let what = format!("Machine {name} reports unit {csv} {state}");
    let seen = std::sync::Mutex::new(None);
    eventually(&what, || async {
        let Ok(machine) = machines.get(name).await else {
            return false;
        };
        let found = units(&machine)
            .into_iter()
            .find(|u| u.csv == csv && u.state == state);
        let is = found.is_some();
        *seen.lock().unwrap() = found;
        is
    })
    .await;
    seen.into_inner().unwrap().expect("the unit was seen")
}

/// Waits until the Machine reports unit `csv` active with `message`.
async fn wait_active(machines: &Api<Machine>, name: &str, csv: &str, message: &str) {
    eventually(
        &format!("Machine {name} reports unit {csv} active: {message}"),
        || async {
            machines.get(name).await.is_ok_and(|machine| {
                units(&machine).iter().any(|u| {
                    u.csv == csv && u.state == WorkloadState::Active && u.message.as_deref() == Some(message)
                })
            })
        },
    )
    .await;
}

fn hook_log(state: &Path, unit: &str) -> Vec<String> {
    std::fs::read_to_string(state.join("units").join(unit).join("sandbox").join("hooks.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

async fn wait_log(state: &Path, unit: &str, line: &str) {
    eventually(&format!("hook log of {unit} has {line:?}"), || async {
        hook_log(state, unit).iter().any(|l| l == line)
    })
    .await;
}

/// One machine through a unit's whole life: registration, install, config change,
/// upgrade, a failing hook and its recovery, removal; then a restart that re-adopts
/// the same Machine, and a lost mark that the agent clears.
#[tokio::test]
async fn an_agent_runs_a_machine_operator_through_its_life() {
    let client = olm_testkit::client().await;
    install_crds(&client).await;
    with_namespace("agent", |client, ns| async move {
        pool(&client, &ns).await;
        config_map(&client, &ns, "demo-hooks", hooks()).await;
        let state = state_dir("life");
        let mut process = agent("life", &ns, "node-a", &state, &kubeconfig());
        let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
        let name = format!("{POOL}-node-a");

        // Registration: Ready, with the host's facts and a Lease.
        eventually("the Machine registers and is Ready", || async {
            machines.get(&name).await.ok().as_ref().and_then(ready) == Some(("True".into(), "AgentRunning".into()))
        })
        .await;
        let machine = machines.get(&name).await.unwrap();
        assert_eq!(machine.spec.node_name.as_deref(), Some("node-a"));
        let status = machine.status.clone().unwrap();
        assert_eq!(status.os.as_deref(), Some(std::env::consts::OS));
        assert!(status.agent_version.is_some() && status.architecture.is_some());
        let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
        let lease = leases.get(&name).await.expect("the Machine's Lease");
        let spec = lease.spec.clone().unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some(name.as_str()));
        assert_eq!(spec.lease_duration_seconds, Some(8));
        assert_eq!(lease.owner_references()[0].uid, machine.uid().unwrap());

        // Install: waiting for its config, then install, config-changed, start.
        let v1 = machine_csv(&client, &ns, "1.0.0", None).await;
        wait_unit(&machines, &name, &v1, WorkloadState::Waiting).await;
        effective_config(&client, &ns, &v1, "8080").await;
        let unit = wait_unit(&machines, &name, &v1, WorkloadState::Active).await;
        assert_eq!(unit.version, "1.0.0");
        assert_eq!(unit.message.as_deref(), Some("serving on 8080"));
        assert_eq!(
            hook_log(&state, &v1),
            ["install 1.0.0 8080", "config-changed 1.0.0 8080", "start 1.0.0 8080"]
        );

        // A config change runs config-changed only.
        effective_config(&client, &ns, &v1, "9090").await;
        wait_log(&state, &v1, "config-changed 1.0.0 9090").await;
        wait_active(&machines, &name, &v1, "serving on 9090").await;

        // An upgrade: a CSV that replaces the unit's.
        effective_config(&client, &ns, "demo.v2.0.0", "9090").await;
        let v2 = machine_csv(&client, &ns, "2.0.0", Some(&v1)).await;
        let unit = wait_unit(&machines, &name, &v2, WorkloadState::Active).await;
        assert_eq!(unit.version, "2.0.0");
        wait_log(&state, &v1, "upgrade 2.0.0 9090").await;
        // The old CSV goes: the unit moved, nothing stops.
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        csvs.delete(&v1, &DeleteParams::default()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!hook_log(&state, &v1).iter().any(|l| l.starts_with("stop")));
        assert_eq!(units(&machines.get(&name).await.unwrap()).len(), 1);

        // A failing hook: error with its message; fixing the config recovers it.
        effective_config(&client, &ns, &v2, "bad").await;
        let unit = wait_unit(&machines, &name, &v2, WorkloadState::Error).await;
        assert_eq!(
            unit.message.as_deref(),
            Some("config-changed hook failed: port bad is not a number")
        );
        effective_config(&client, &ns, &v2, "7070").await;
        wait_active(&machines, &name, &v2, "serving on 7070").await;

        // olm-operator marks the machine lost: the living agent sets Ready back.
        let lost = json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "Unknown",
            "reason": "AgentLost", "message": "the Lease expired", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        machines
            .patch_status(&name, &PatchParams::apply("olm-operator").force(), &Patch::Apply(lost))
            .await
            .unwrap();
        eventually("the agent sets Ready back to True", || async {
            machines.get(&name).await.ok().as_ref().and_then(ready) == Some(("True".into(), "AgentRunning".into()))
        })
        .await;

        // Killed and restarted: the same Machine, no second one, the unit as it was.
        let uid = machines.get(&name).await.unwrap().uid();
        let registered = machines.get(&name).await.unwrap().status.unwrap().last_heartbeat;
        // `kill` returns once the process has exited: the restart follows at once.
        process.kill();
        let mut process = agent("life-restarted", &ns, "node-a", &state, &kubeconfig());
        eventually("the restarted agent re-adopts its Machine", || async {
            machines.get(&name).await.ok().and_then(|m| m.status).and_then(|s| s.last_heartbeat) != registered
        })
        .await;
        let all = machines.list(&ListParams::default()).await.unwrap();
        assert_eq!(all.items.len(), 1, "no second Machine");
        assert_eq!(all.items[0].uid(), uid);
        let installs = hook_log(&state, &v1).iter().filter(|l| l.starts_with("install")).count();
        assert_eq!(installs, 1, "a restart does not install again");

        // Removal: the CSV goes with no successor: stop, remove, no unit.
        csvs.delete(&v2, &DeleteParams::default()).await.unwrap();
        eventually("the unit is removed", || async {
            machines.get(&name).await.map(|m| units(&m).is_empty()).unwrap_or(false)
        })
        .await;
        assert!(!state.join("units").join(&v1).exists(), "the unit's state is gone");
        process.terminate(Duration::from_secs(10));
    })
    .await;
}

/// A TCP forwarder to the API server: the endpoint an agent is first given, which
/// the test then takes away.
struct Forwarder {
    port: u16,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Forwarder {
    async fn start(target: SocketAddr) -> Forwarder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let mut accept_stopped = stopped.clone();
            loop {
                let (mut inbound, _) = tokio::select! {
                    accepted = listener.accept() => match accepted { Ok(a) => a, Err(_) => return },
                    _ = accept_stopped.changed() => return,
                };
                let mut stopped = stopped.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = stopped.changed() => {}
                    }
                });
            }
        });
        Forwarder { port, stop }
    }

    /// Closes the listener and every connection through it.
    fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

/// The agent's first endpoint goes away: it moves to another it learned from the
/// pool, keeps working, and a restart with the same (dead) first endpoint starts
/// from the saved list.
#[tokio::test]
async fn an_agent_survives_the_loss_of_its_first_api_server_endpoint() {
    let client = olm_testkit::client().await;
    install_crds(&client).await;
    with_namespace("agent-failover", |client, ns| async move {
        pool(&client, &ns).await;
        config_map(&client, &ns, "demo-hooks", hooks()).await;
        let config = olm_testkit::config().await;
        let real = config.cluster_url.to_string().trim_end_matches('/').to_owned();
        let authority = config.cluster_url.authority().unwrap().as_str().to_owned();
        let target: SocketAddr = authority
            .parse()
            .expect("the test API server listens on an IP address");
        let forwarder = Forwarder::start(target).await;
        let first = format!("https://127.0.0.1:{}", forwarder.port);

        // A kubeconfig that names only the forwarder.
        let original = std::fs::read_to_string(kubeconfig()).unwrap();
        assert!(original.contains(&real), "the kubeconfig names {real}");
        let state = state_dir("failover");
        let forwarded = state.with_extension("kubeconfig");
        std::fs::write(&forwarded, original.replace(&real, &first)).unwrap();

        // olm-operator publishes every endpoint in the pool's status.
        let pools: Api<MachinePool> = Api::namespaced(client.clone(), &ns);
        pools
            .patch_status(
                POOL,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"apiServerEndpoints": [first, real]}})),
            )
            .await
            .unwrap();

        let mut process = agent("failover", &ns, "node-b", &state, &forwarded);
        let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
        let name = format!("{POOL}-node-b");
        let v1 = machine_csv(&client, &ns, "1.0.0", None).await;
        effective_config(&client, &ns, &v1, "8080").await;
        wait_unit(&machines, &name, &v1, WorkloadState::Active).await;
        let endpoints_file = state.join("endpoints.json");
        eventually("the agent saved every endpoint", || async {
            std::fs::read_to_string(&endpoints_file).is_ok_and(|s| s.contains(&real) && s.contains(&first))
        })
        .await;

        // The endpoint in use goes: the agent keeps working through the other.
        forwarder.stop();
        effective_config(&client, &ns, &v1, "9090").await;
        wait_log(&state, &v1, "config-changed 1.0.0 9090").await;
        wait_active(&machines, &name, &v1, "serving on 9090").await;
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&endpoints_file).unwrap()).unwrap();
        assert_eq!(
            saved["current"],
            real.as_str(),
            "the agent moved to the other endpoint"
        );
        let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
        let renewed = |lease: Lease| lease.spec.and_then(|s| s.renew_time).map(|t| t.0);
        let before = renewed(leases.get(&name).await.unwrap());
        eventually("the Lease is still renewed", || async {
            renewed(leases.get(&name).await.unwrap()) != before
        })
        .await;

        // Restarted with the same kubeconfig (naming the dead endpoint): it starts
        // from the saved list and works.
        process.kill();
        let mut process = agent("failover-restarted", &ns, "node-b", &state, &forwarded);
        effective_config(&client, &ns, &v1, "6060").await;
        wait_log(&state, &v1, "config-changed 1.0.0 6060").await;
        wait_active(&machines, &name, &v1, "serving on 6060").await;
        process.terminate(Duration::from_secs(10));
        let _ = std::fs::remove_file(forwarded);
    })
    .await;
}

/// A Role and a ServiceAccount bound to it; returns a fresh token of the account.
async fn account_with_role(client: &Client, ns: &str, name: &str, rules: serde_json::Value) -> String {
    use k8s_openapi::api::{
        authentication::v1::{TokenRequest, TokenRequestSpec},
        core::v1::ServiceAccount,
        rbac::v1::{Role, RoleBinding},
    };
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    apply_json(
        &accounts,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}}),
    )
    .await;
    let roles: Api<Role> = Api::namespaced(client.clone(), ns);
    apply_json(
        &roles,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": ns}, "rules": rules}),
    )
    .await;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    apply_json(
        &bindings,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name, "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]}),
    )
    .await;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    accounts
        .create_token_request(name, &Default::default(), &request)
        .await
        .expect("a token for the account")
        .status
        .and_then(|status| status.token)
        .expect("the token")
}

/// A machine outside the cluster joins with the pool's join token: it registers its
/// Machine, receives its own credentials (the test issues them, as olm-operator
/// does), keeps them in its state directory, and runs on them, also after a restart
/// once the join token no longer works.
#[tokio::test]
async fn an_external_machine_joins_with_a_token_and_runs_on_its_own_credentials() {
    let client = olm_testkit::client().await;
    install_crds(&client).await;
    with_namespace("agent-join", |client, ns| async move {
        pool(&client, &ns).await;
        config_map(&client, &ns, "demo-hooks", hooks()).await;
        let joiner = account_with_role(
            &client,
            &ns,
            "edge-joiner",
            json!([
                {"apiGroups": ["substrate.olm-rs.dev"], "resources": ["machines"], "verbs": ["create", "patch", "get"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
            ]),
        )
        .await;
        let state = state_dir("join");
        let join_file = state.with_extension("join-token");
        std::fs::write(&join_file, &joiner).unwrap();
        let ca = kubeconfig().parent().unwrap().join("pki").join("ca.crt");
        assert!(ca.is_file(), "the test control plane's CA is at {}", ca.display());
        let server = olm_testkit::config().await.cluster_url.to_string();
        let admin = free_port();
        let args: Vec<String> = [
            "run", "--state-dir", &state.display().to_string(), "--namespace", &ns, "--pool", POOL,
            "--external-id", "Ext-1", "--server", &server, "--ca-file", &ca.display().to_string(),
            "--join-token-file", &join_file.display().to_string(), "--admin-addr", &format!("127.0.0.1:{admin}"),
            "--lease-duration-seconds", "8",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let spawn = |label: &str| Process::spawn(label, &binary("machine-agent"), &args, Some(admin));
        let mut process = spawn("machine-agent-join");

        let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
        let name = format!("{POOL}-ext-1");
        eventually("the external machine registers with the join token", || async {
            machines.get(&name).await.is_ok_and(|m| m.spec.external_id.as_deref() == Some("ext-1"))
        })
        .await;

        // olm-operator's part: the machine's own account, limited to what an agent needs.
        let own = account_with_role(
            &client,
            &ns,
            &name,
            json!([
                {"apiGroups": ["substrate.olm-rs.dev"], "resources": ["machines", "machines/status"], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": ["substrate.olm-rs.dev"], "resources": ["machinepools"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["model.olm-rs.dev"], "resources": ["relations", "databags", "actions"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "patch"]},
                {"apiGroups": ["operators.coreos.com"], "resources": ["clusterserviceversions"], "verbs": ["list", "watch"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]},
            ]),
        )
        .await;
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
        apply_json(
            &secrets,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("{name}-credentials"), "namespace": ns},
                   "stringData": {"token": own}}),
        )
        .await;
        eventually("the joined machine is Ready", || async {
            machines.get(&name).await.ok().as_ref().and_then(ready) == Some(("True".into(), "AgentRunning".into()))
        })
        .await;
        let kept = std::fs::read_to_string(state.join("credentials").join("token")).expect("the credentials are kept");
        assert_eq!(kept, own);

        // The join token stops working; a restart runs on the kept credentials.
        let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> = Api::namespaced(client.clone(), &ns);
        bindings.delete("edge-joiner", &DeleteParams::default()).await.unwrap();
        process.kill();
        let mut process = spawn("machine-agent-join-restarted");
        let v1 = machine_csv(&client, &ns, "1.0.0", None).await;
        effective_config(&client, &ns, &v1, "8080").await;
        wait_active(&machines, &name, &v1, "serving on 8080").await;
        process.terminate(Duration::from_secs(10));
        let _ = std::fs::remove_file(join_file);
    })
    .await;
}

/// Malformed input ends in a named error on the unit, never a stuck unit: a hooks
/// ConfigMap without a required hook, and a hook that hangs past its timeout.
#[tokio::test]
async fn malformed_hooks_put_the_unit_in_a_named_error() {
    let client = olm_testkit::client().await;
    install_crds(&client).await;
    with_namespace("agent-malformed", |client, ns| async move {
        pool(&client, &ns).await;
        let mut missing_start = hooks();
        missing_start.remove("start");
        config_map(&client, &ns, "no-start-hooks", missing_start).await;
        let mut hanging = hooks();
        hanging.insert("install".into(), "#!/bin/sh\nsleep 600\n".into());
        config_map(&client, &ns, "hanging-hooks", hanging).await;
        csv_with(
            &client,
            &ns,
            "nostart.v1.0.0",
            "1.0.0",
            None,
            "no-start-hooks",
            20,
        )
        .await;
        effective_config(&client, &ns, "nostart.v1.0.0", "8080").await;
        csv_with(&client, &ns, "hang.v1.0.0", "1.0.0", None, "hanging-hooks", 2).await;
        effective_config(&client, &ns, "hang.v1.0.0", "8080").await;

        let state = state_dir("malformed");
        let mut process = agent("malformed", &ns, "node-c", &state, &kubeconfig());
        let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
        let name = format!("{POOL}-node-c");
        let unit = wait_unit(&machines, &name, "nostart.v1.0.0", WorkloadState::Error).await;
        assert_eq!(
            unit.message.as_deref(),
            Some("hooks ConfigMap no-start-hooks has no `start` hook (install and start are required)")
        );
        let unit = wait_unit(&machines, &name, "hang.v1.0.0", WorkloadState::Error).await;
        assert_eq!(
            unit.message.as_deref(),
            Some("install hook ran past its timeout of 2s and was killed")
        );
        assert!(
            hook_log(&state, "nostart.v1.0.0").is_empty(),
            "no hook ran without its required hooks"
        );

        // Fixing the hooks ConfigMap recovers the unit.
        config_map(&client, &ns, "no-start-hooks", hooks()).await;
        wait_active(&machines, &name, "nostart.v1.0.0", "serving on 8080").await;
        process.terminate(Duration::from_secs(10));
    })
    .await;
}
