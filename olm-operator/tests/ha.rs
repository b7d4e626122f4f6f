//! Two replicas of the olm-operator binary against a real control plane: both
//! become ready, one leads through the Lease and installs, and when it is
//! killed the standby takes over and installs what comes next.
//!
//! A test binary of its own, so that no in-process operator runs beside the
//! replicas. Run with `cargo test -p olm-operator --test ha -- --ignored`.

mod common;

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    time::Duration,
};

use common::*;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Namespace};
use kube::{
    Api,
    api::{DeleteParams, ObjectMeta, PostParams},
};
use olm_api::{
    v1::{OperatorGroup, OperatorGroupSpec},
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};

/// One replica of the binary, killed when dropped (also when a test fails).
struct Replica {
    identity: String,
    admin: u16,
    child: Child,
}

impl Replica {
    fn start(identity: &str, lease: &str, namespace: &str) -> Self {
        let admin = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_olm-operator"))
            .args([
                "--leader-elect=true",
                "--lease-name",
                lease,
                "--lease-namespace",
                namespace,
                "--leader-identity",
                identity,
                "--lease-duration",
                "4s",
                "--renew-deadline",
                "3s",
                "--retry-period",
                "1s",
                "--admin-addr",
                &format!("127.0.0.1:{admin}"),
                "--resync-seconds",
                "30",
            ])
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned()),
            )
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start replica {identity}: {e}"));
        Replica {
            identity: identity.to_owned(),
            admin,
            child,
        }
    }

    /// The status code of `GET path` on the replica's admin port, if it answers.
    fn get(&self, path: &str) -> Option<u16> {
        self.fetch(path).map(|(code, _)| code)
    }

    /// The status code and body of `GET path` on the replica's admin port.
    fn fetch(&self, path: &str) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.admin)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let code = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned())?;
        Some((code, body))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free local port")
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn the_standby_takes_over_when_the_leader_dies() {
    let client = client().await;
    install_crds(&client).await;
    let ns = format!("olm-ha-{}", random_suffix());
    create_namespace(&client, &ns, &[]).await;
    let lease_name = format!("olm-operator-{ns}");
    let mut replicas = [
        Replica::start("replica-a", &lease_name, &ns),
        Replica::start("replica-b", &lease_name, &ns),
    ];

    // Both replicas become ready: the leader and the standby keep their caches warm.
    eventually("both replicas are ready", || {
        let ready = replicas.iter().all(|r| r.get("/readyz") == Some(200));
        async move { ready }
    })
    .await;

    let group = OperatorGroup {
        metadata: ObjectMeta {
            name: Some("operators".to_owned()),
            namespace: Some(ns.clone()),
            ..ObjectMeta::default()
        },
        spec: OperatorGroupSpec {
            target_namespaces: Some(vec![ns.clone()]),
            ..OperatorGroupSpec::default()
        },
        status: None,
    };
    apply(&Api::<OperatorGroup>::namespaced(client.clone(), &ns), &group).await;
    let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
    let csv = |name: &str| -> ClusterServiceVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": name},
            "spec": {
                "displayName": "HA demo",
                "installModes": [{"type": "OwnNamespace", "supported": true}],
                "install": {"strategy": "deployment", "spec": {"deployments": [{
                    "name": name.split('.').next().unwrap_or(name),
                    "spec": {
                        "selector": {"matchLabels": {"app": name}},
                        "template": {
                            "metadata": {"labels": {"app": name}},
                            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
                        },
                    },
                }]}},
            },
        }))
        .expect("a valid CSV")
    };
    let succeeded = |c: Option<&ClusterServiceVersion>| {
        c.and_then(|c| c.status.as_ref()).and_then(|s| s.phase) == Some(CsvPhase::Succeeded)
    };
    csvs.create(&PostParams::default(), &csv("first.v1.0.0"))
        .await
        .expect("create the first CSV");
    wait_for(&csvs, "first.v1.0.0", succeeded).await;

    // Kill the leader without a chance to release the Lease.
    let leases = Api::<Lease>::namespaced(client.clone(), &ns);
    let holder = leases
        .get(&lease_name)
        .await
        .expect("the Lease exists")
        .spec
        .and_then(|s| s.holder_identity)
        .expect("a holder");
    let leader = replicas
        .iter()
        .position(|r| r.identity == holder)
        .unwrap_or_else(|| panic!("the holder {holder} is one of the replicas"));
    let standby = 1 - leader;
    // The standby has written nothing: only the holder of the Lease writes.
    let (_, standby_metrics) = replicas[standby]
        .fetch("/metrics")
        .expect("the standby's metrics");
    assert!(
        !standby_metrics
            .lines()
            .any(|line| line.starts_with("olm_writes_total{") && line.contains(r#"outcome="ok""#)),
        "the standby wrote:\n{standby_metrics}"
    );
    replicas[leader].kill();

    // The standby takes the Lease over and installs what comes next.
    let standby_identity = replicas[standby].identity.clone();
    wait_for(&leases, &lease_name, move |lease: Option<&Lease>| {
        lease
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.as_ref())
            == Some(&standby_identity)
    })
    .await;
    csvs.create(&PostParams::default(), &csv("second.v1.0.0"))
        .await
        .expect("create the second CSV");
    wait_for(&csvs, "second.v1.0.0", succeeded).await;
    let (_, metrics) = replicas[standby]
        .fetch("/metrics")
        .expect("the new leader's metrics");
    assert!(
        metrics
            .lines()
            .any(|line| line.starts_with("olm_writes_total{") && line.contains(r#"outcome="ok""#)),
        "the new leader writes:\n{metrics}"
    );

    // Clean up while the new leader still runs (it releases the finalizers).
    for name in ["first.v1.0.0", "second.v1.0.0"] {
        csvs.delete(name, &DeleteParams::default())
            .await
            .expect("delete a CSV");
    }
    for name in ["first.v1.0.0", "second.v1.0.0"] {
        wait_gone(&csvs, name).await;
    }
    drop(replicas);
    Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::background())
        .await
        .expect("delete the namespace");
}
