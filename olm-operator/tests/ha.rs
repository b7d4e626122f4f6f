//! Two replicas of the olm-operator binary against a real control plane: both
//! become ready, one leads through the Lease and installs, and when it is
//! killed the standby takes over and installs what comes next.
//!
//! A test binary of its own, so that no in-process operator runs beside the
//! replicas. Run with `cargo test -p olm-operator --test ha -- --ignored`.

use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api,
    api::{DeleteParams, ObjectMeta, PostParams},
};
use olm_api::{
    v1::{OperatorGroup, OperatorGroupSpec},
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};
use olm_testkit::{
    apply, eventually, install_crds,
    objects::{lease_holder, wait_for_csv},
    process::Process,
    wait_for, wait_gone, with_namespace,
};

#[tokio::test]
#[ignore = "needs a cluster"]
async fn the_standby_takes_over_when_the_leader_dies() {
    with_namespace("olm-ha", |client, ns| async move {
        install_crds(&client).await;
        let lease_name = format!("olm-operator-{ns}");
        let mut replicas = [
            Process::olm_operator("replica-a", &lease_name, &ns),
            Process::olm_operator("replica-b", &lease_name, &ns),
        ];

        // Both replicas become ready: the leader and the standby keep their caches warm.
        eventually("both replicas are ready", || {
            let ready = replicas
                .iter()
                .all(|r| r.admin_get("/readyz").is_some_and(|(code, _)| code == 200));
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
        csvs.create(&PostParams::default(), &csv("first.v1.0.0"))
            .await
            .expect("create the first CSV");
        wait_for_csv(&csvs, "first.v1.0.0", CsvPhase::Succeeded).await;

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
            .position(|r| r.label == holder)
            .unwrap_or_else(|| panic!("the holder {holder} is one of the replicas"));
        let standby = 1 - leader;
        // The standby has written nothing: only the holder of the Lease writes.
        let (_, standby_metrics) = replicas[standby]
            .admin_get("/metrics")
            .expect("the standby's metrics");
        assert!(
            !standby_metrics
                .lines()
                .any(|line| line.starts_with("olm_writes_total{") && line.contains(r#"outcome="ok""#)),
            "the standby wrote:\n{standby_metrics}"
        );
        replicas[leader].kill();

        // The standby takes the Lease over and installs what comes next.
        let standby_identity = replicas[standby].label.clone();
        wait_for(
            &leases,
            &lease_name,
            &format!("{standby_identity} holds the Lease {lease_name}"),
            move |lease: Option<&Lease>| lease_holder(lease) == Some(standby_identity.as_str()),
        )
        .await;
        csvs.create(&PostParams::default(), &csv("second.v1.0.0"))
            .await
            .expect("create the second CSV");
        wait_for_csv(&csvs, "second.v1.0.0", CsvPhase::Succeeded).await;
        let (_, metrics) = replicas[standby]
            .admin_get("/metrics")
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
    })
    .await;
}
