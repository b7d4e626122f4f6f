//! Machines outside the cluster joining a MachinePool with its join token, on
//! the real control plane: olm-operator issues the token, admits the first
//! machine of each token with credentials of its own, refuses a second use,
//! revokes a used token and issues the next; the API server keeps the join
//! token and each joined machine to what they may do. The machine agent
//! binary joins as a machine outside the cluster would.

mod common;

use std::{
    path::{Path, PathBuf},
    process::Child,
    time::Duration,
};

use common::{eventually, wait_for, with_namespace};
use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Secret},
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
    config::AuthInfo,
};
use olm_api::substrate::{
    JOIN_TOKEN_ID, JOIN_TOKEN_USED_BY, Machine, MachinePool, credentials_secret, token_claims,
};

const POOL: &str = "edge";
const JOIN_SECRET: &str = "edge-join";

fn external_pool() -> MachinePool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "substrate.olm-rs.dev/v1alpha1",
        "kind": "MachinePool",
        "metadata": {"name": POOL},
        "spec": {
            "agent": {"image": "registry.k8s.io/pause", "version": "3.10"},
            "external": {"tokenSecretName": JOIN_SECRET},
        },
    }))
    .expect("a MachinePool")
}

/// A client of the test cluster that authenticates with `token`.
async fn client_with(token: &str) -> Client {
    let mut config = olm_testkit::config().await;
    config.auth_info =
        serde_json::from_value::<AuthInfo>(serde_json::json!({ "token": token })).expect("auth");
    Client::try_from(config).expect("a client")
}

/// The token in the pool's join Secret once it differs from `not`, and its id.
async fn join_token(secrets: &Api<Secret>, not: Option<&str>) -> (String, String) {
    let secret = wait_for(
        secrets,
        JOIN_SECRET,
        "a (new) join token",
        |s: Option<&Secret>| token_of(s).is_some_and(|t| Some(t.as_str()) != not),
    )
    .await
    .expect("the join Secret");
    let token = token_of(Some(&secret)).expect("a token");
    let id = token_claims(&token).expect("a JWT").id;
    assert_eq!(secret.annotations().get(JOIN_TOKEN_ID), Some(&id));
    (token, id)
}

fn token_of(secret: Option<&Secret>) -> Option<String> {
    let bytes = secret?.data.as_ref()?.get("token")?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// Registers Machine `<pool>-<id>` as an agent joining with a token would.
async fn register(machines: &Api<Machine>, id: &str, token_id: &str) -> Result<Machine, kube::Error> {
    let body = serde_json::json!({
        "apiVersion": "substrate.olm-rs.dev/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": format!("{POOL}-{id}"), "annotations": {JOIN_TOKEN_ID: token_id}},
        "spec": {"pool": POOL, "externalId": id},
    });
    machines
        .patch(
            &format!("{POOL}-{id}"),
            &PatchParams::apply("machine-agent").force(),
            &Patch::Apply(body),
        )
        .await
}

fn refused(result: Result<impl std::fmt::Debug, kube::Error>, what: &str) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) if [401, 403, 422].contains(&status.code) => {
            (status.code, status.message)
        }
        other => panic!("{what}: expected the API server to refuse, got {other:?}"),
    }
}

fn lease(name: &str) -> Lease {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 600,
                 "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::now())},
    }))
    .expect("a Lease")
}

fn ready(machine: Option<&Machine>) -> Option<(String, String, String)> {
    let condition = machine?
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some((
        condition.status.clone(),
        condition.reason.clone(),
        condition.message.clone(),
    ))
}

fn degraded(pool: Option<&MachinePool>) -> Option<(String, String)> {
    let condition = pool?
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Degraded")?;
    Some((condition.reason.clone(), condition.message.clone()))
}

/// A kubeconfig naming the test cluster with its CA and no user: the agent
/// brings its join token, then its own credentials.
fn anonymous_kubeconfig(dir: &Path) -> PathBuf {
    let admin = kube::config::Kubeconfig::read().expect("KUBECONFIG");
    let cluster = admin.clusters[0].cluster.as_ref().expect("a cluster");
    let (server, ca) = (
        cluster.server.clone().expect("a server"),
        cluster
            .certificate_authority_data
            .clone()
            .expect("the cluster's CA in KUBECONFIG"),
    );
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
    );
    let path = dir.join("cluster.kubeconfig");
    std::fs::write(&path, text).expect("write the kubeconfig");
    path
}

/// The agent binary joining as machine `id` with the token in `token_file`.
fn spawn_joining_agent(dir: &Path, namespace: &str, id: &str, token_file: &Path) -> Child {
    let log = std::fs::File::create(dir.join(format!("agent-{id}.log"))).expect("agent log");
    std::process::Command::new(olm_testkit::process::binary("machine-agent"))
        .args([
            "run",
            "--namespace",
            namespace,
            "--pool",
            POOL,
            "--external-id",
            id,
        ])
        .args(["--lease-duration-seconds", "12"])
        .arg("--admin-addr")
        .arg(format!("127.0.0.1:{}", olm_testkit::process::free_port()))
        .arg("--state-dir")
        .arg(dir.join(format!("state-{id}")))
        .arg("--kubeconfig")
        .arg(anonymous_kubeconfig(dir))
        .arg("--join-token-file")
        .arg(token_file)
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start machine-agent")
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_join_token_admits_one_machine_and_the_next_token_the_next() {
    common::machines::install_policy().await;
    with_namespace("machine-join", |admin, ns| async move {
        let dir = std::env::temp_dir().join(format!("olm-rs-joins-{ns}"));
        std::fs::create_dir_all(&dir).expect("a test directory");
        let pools = Api::<MachinePool>::namespaced(admin.clone(), &ns);
        common::apply(&pools, &external_pool()).await;
        let secrets = Api::<Secret>::namespaced(admin.clone(), &ns);
        let machines = Api::<Machine>::namespaced(admin.clone(), &ns);

        // olm-operator issues the pool's join token.
        let (first, first_id) = join_token(&secrets, None).await;
        let joiner = client_with(&first).await;
        let joining = Api::<Machine>::namespaced(joiner.clone(), &ns);

        // What the join token may not do.
        let (_, message) = refused(
            register(&joining, "ext-x", "another-id").await,
            "a Machine stamped with another id",
        );
        assert!(message.contains("must carry the token's id"), "{message}");
        let (_, message) = refused(
            Api::<Lease>::namespaced(joiner.clone(), &ns)
                .create(&Default::default(), &lease("edge-ext-x"))
                .await,
            "a Lease written with the join token",
        );
        assert!(!message.is_empty());
        let (_, message) = refused(
            Api::<Secret>::namespaced(joiner.clone(), &ns)
                .get(JOIN_SECRET)
                .await,
            "the join Secret read with its token",
        );
        assert!(!message.is_empty());

        // Its first use admits machine A; a second use registers B, which is refused.
        register(&joining, "ext-a", &first_id)
            .await
            .expect("the first use registers A");
        let credentials_a = wait_for(
            &secrets,
            &credentials_secret("edge-ext-a"),
            "A's credentials, filled by the token controller",
            |s: Option<&Secret>| token_of(s).is_some(),
        )
        .await
        .expect("A's credentials");
        let used = secrets.get(JOIN_SECRET).await.expect("the join Secret");
        assert_eq!(
            used.annotations().get(JOIN_TOKEN_USED_BY).map(String::as_str),
            Some("edge-ext-a")
        );
        register(&joining, "ext-b", &first_id)
            .await
            .expect("the API server lets the token register B");
        let b = wait_for(&machines, "edge-ext-b", "B refused", |m: Option<&Machine>| {
            ready(m).is_some_and(|(_, reason, _)| reason == "JoinTokenUsed")
        })
        .await;
        let (status, _, message) = ready(b.as_ref()).expect("B's Ready condition");
        assert_eq!(status, "False");
        assert!(
            message.contains("already admitted Machine edge-ext-a"),
            "{message}"
        );
        let pool = wait_for(&pools, POOL, "the pool names B", |p: Option<&MachinePool>| {
            degraded(p).is_some_and(|(reason, _)| reason == "JoinTokenUsed")
        })
        .await;
        assert!(degraded(pool.as_ref()).is_some_and(|(_, m)| m.contains("edge-ext-b")));
        assert!(
            Api::<Secret>::namespaced(joiner.clone(), &ns)
                .get(&credentials_secret("edge-ext-b"))
                .await
                .is_err(),
            "B gets no credentials"
        );
        // The token cannot take A's Machine over.
        let (_, message) = refused(register(&joining, "ext-a", &first_id).await, "A registered again");
        assert!(message.contains("may only register a new Machine"), "{message}");

        // A picks up its credentials with the join token and heartbeats on them:
        // the token is revoked and a new one issued.
        let own_a = Api::<Secret>::namespaced(joiner.clone(), &ns)
            .get(&credentials_secret("edge-ext-a"))
            .await
            .ok()
            .as_ref()
            .and_then(|s| token_of(Some(s)))
            .expect("the join token reads A's credentials");
        assert_eq!(Some(own_a.clone()), token_of(Some(&credentials_a)));
        let a_client = client_with(&own_a).await;
        Api::<Lease>::namespaced(a_client.clone(), &ns)
            .create(&Default::default(), &lease("edge-ext-a"))
            .await
            .expect("A takes its Lease with its own credentials");
        let (second, second_id) = join_token(&secrets, Some(&first)).await;
        assert_ne!(first_id, second_id);
        eventually("the used token stops working", || async {
            matches!(
                Api::<Machine>::namespaced(client_with(&first).await, &ns).get("edge-ext-a").await,
                Err(kube::Error::Api(status)) if status.code == 401
            )
        })
        .await;
        // A's credentials reach its own Machine and Lease only.
        let (_, message) = refused(
            Api::<Lease>::namespaced(a_client.clone(), &ns)
                .create(&Default::default(), &lease("edge-ext-b"))
                .await,
            "A writing B's Lease",
        );
        assert!(!message.is_empty());

        // The agent binary joins with the new token and runs on its own credentials.
        let token_file = dir.join("join-token");
        std::fs::write(&token_file, &second).expect("write the join token");
        let _agent = Killed(spawn_joining_agent(&dir, &ns, "ext-1", &token_file));
        wait_for(
            &machines,
            "edge-ext-1",
            "the joined agent Ready",
            |m: Option<&Machine>| {
                ready(m).is_some_and(|(status, reason, _)| status == "True" && reason == "AgentRunning")
            },
        )
        .await
        .expect("machine ext-1");
        let kept = std::fs::read_to_string(dir.join("state-ext-1").join("credentials").join("token"))
            .expect("the agent keeps its own credentials");
        assert_ne!(kept, second);
        let own_1 = Api::<Machine>::namespaced(client_with(&kept).await, &ns);
        let (_, message) = refused(
            own_1
                .patch_status(
                    "edge-ext-a",
                    &PatchParams::apply("machine-agent").force(),
                    &Patch::Apply(serde_json::json!({
                        "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
                        "status": {"agentVersion": "forged"},
                    })),
                )
                .await,
            "ext-1 writing A's Machine",
        );
        assert!(!message.is_empty());
        join_token(&secrets, Some(&second)).await;

        // A used token given to another agent: it stops with the reason. The API
        // server refuses the revoked token (once its cache of good tokens, 10 s,
        // forgets it); within that time olm-operator refuses the machine.
        let mut late = spawn_joining_agent(&dir, &ns, "ext-2", &token_file);
        let mut exited = None;
        for _ in 0..60 {
            if let Some(status) = late.try_wait().expect("the late agent") {
                exited = Some(status);
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let _ = late.kill();
        let status = exited.expect("an agent with a used join token stops");
        assert!(!status.success());
        let log = std::fs::read_to_string(dir.join("agent-ext-2.log")).unwrap_or_default();
        assert!(
            log.contains("no longer accepts this join token")
                || log.contains("refused Machine") && log.contains("join token that was used or replaced"),
            "{log}"
        );

        // Deleting the refused machines clears the pool's Degraded; deleting A revokes its credentials.
        let _ = machines.delete("edge-ext-2", &DeleteParams::default()).await;
        machines
            .delete("edge-ext-b", &DeleteParams::default())
            .await
            .expect("delete B");
        machines
            .delete("edge-ext-a", &DeleteParams::default())
            .await
            .expect("delete A");
        wait_for(
            &pools,
            POOL,
            "the pool no longer degraded",
            |p: Option<&MachinePool>| degraded(p).is_some_and(|(reason, _)| reason == "AsExpected"),
        )
        .await
        .expect("the pool");
        eventually(
            "A's credentials stop working once its Machine is gone",
            || async {
                matches!(
                    Api::<Lease>::namespaced(client_with(&own_a).await, &ns).get("edge-ext-a").await,
                    Err(kube::Error::Api(status)) if status.code == 401
                )
            },
        )
        .await;
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}
