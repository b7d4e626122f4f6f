//! The controller's wiring against a mocked API server: what one reconcile
//! reads and writes, and that a reconcile with the live objects in the stores
//! writes only what changed.

use std::sync::Arc;

use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Node, Secret, ServiceAccount},
    discovery::v1::EndpointSlice,
    rbac::v1::{Role, RoleBinding},
};
use kube::{Client, core::PartialObjectMeta};
use olm_api::substrate::{Machine, MachinePool, MachinePoolStatus};
use olm_testkit::mock_api::{Answer, MockApi, Request};
use serde::de::DeserializeOwned;

use super::reconcile;
use crate::{
    context::Context,
    stores::{Cache, PoolStores},
};

/// A client whose API server lists no Lease, answers a pool's status with
/// `pool`, and any other write with its own body; it records every request.
fn api_server(pool: &MachinePool) -> (Client, MockApi) {
    let pool = serde_json::to_value(pool).expect("JSON");
    MockApi::new(move |request| {
        if request.line.ends_with("/leases") {
            Some(Answer::empty_list("coordination.k8s.io/v1", "LeaseList"))
        } else if request.line.contains("/machinepools/") {
            Some(Answer::ok(pool.clone()))
        } else {
            None
        }
    })
}

fn context(client: Client) -> Arc<Context> {
    Arc::new(Context::for_tests(client))
}

fn from<K: DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("an object")
}

fn pool(version: &str) -> MachinePool {
    from(serde_json::json!({
        "apiVersion": "substrate.olm-rs.dev/v1alpha1",
        "kind": "MachinePool",
        "metadata": {"name": "edge", "namespace": "ops", "uid": "uid-1", "generation": 1},
        "spec": {"nodeSelector": {"edge": "true"},
                 "agent": {"image": "machine-agent", "version": version}},
    }))
}

/// The stores: one node of the pool, the `kubernetes` EndpointSlice, and the
/// live copies of what the API server was sent (`seen`, with the agent
/// DaemonSet rolled out).
fn stores(seen: &[Request]) -> PoolStores {
    let sent = |kind: &str| -> Vec<serde_json::Value> {
        seen.iter()
            .filter(|r| r.line.starts_with("PATCH") && r.body["kind"] == kind)
            .map(|r| r.body.clone())
            .collect()
    };
    let daemonsets: Vec<DaemonSet> = sent("DaemonSet")
        .into_iter()
        .map(|mut body| {
            body["metadata"]["generation"] = 1.into();
            body["status"] = serde_json::json!({"observedGeneration": 1, "desiredNumberScheduled": 1,
                "updatedNumberScheduled": 1, "currentNumberScheduled": 1, "numberMisscheduled": 0,
                "numberReady": 1});
            from::<DaemonSet>(body)
        })
        .collect();
    let node = from::<PartialObjectMeta<Node>>(serde_json::json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "a", "labels": {"edge": "true"}},
    }));
    let slice = from::<EndpointSlice>(serde_json::json!({
        "metadata": {"name": "kubernetes", "namespace": "default"},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"]}],
        "ports": [{"name": "https", "port": 6443}],
    }));
    PoolStores {
        machines: Cache::<Machine>::listed([]),
        nodes: Cache::listed([node]),
        daemonsets: Cache::listed(daemonsets),
        service_accounts: Cache::listed(
            sent("ServiceAccount")
                .into_iter()
                .map(from::<PartialObjectMeta<ServiceAccount>>),
        ),
        roles: Cache::listed(sent("Role").into_iter().map(from::<PartialObjectMeta<Role>>)),
        role_bindings: Cache::listed(
            sent("RoleBinding")
                .into_iter()
                .map(from::<PartialObjectMeta<RoleBinding>>),
        ),
        secrets: Cache::<PartialObjectMeta<Secret>>::listed([]),
        endpoint_slices: Cache::listed([slice]),
    }
}

/// The status the last reconcile wrote.
fn written_status(api: &MockApi) -> MachinePoolStatus {
    let body = api
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.line.ends_with("/status"))
        .expect("a status write")
        .body;
    from(body["status"].clone())
}

const LEASES: &str = "GET /apis/coordination.k8s.io/v1/namespaces/ops/leases";
const DAEMONSET: &str = "PATCH /apis/apps/v1/namespaces/ops/daemonsets/machine-agent-edge";
const STATUS: &str = "PATCH /apis/substrate.olm-rs.dev/v1alpha1/namespaces/ops/machinepools/edge/status";

#[tokio::test]
async fn a_reconcile_applies_the_agent_then_the_status_and_a_settled_pool_writes_nothing() {
    // A new pool, nothing live: the agent's objects, then the status.
    let (client, first) = api_server(&pool("0.1.0"));
    let empty = stores(&[]);
    reconcile(Arc::new(pool("0.1.0")), context(client), empty)
        .await
        .expect("reconciled");
    assert_eq!(
        first.lines(),
        [
            LEASES,
            "PATCH /api/v1/namespaces/ops/serviceaccounts/machine-agent-edge",
            "PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/ops/roles/machine-agent-edge",
            "PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/ops/rolebindings/machine-agent-edge",
            DAEMONSET,
            STATUS,
        ]
    );
    let status = written_status(&first);
    assert_eq!(
        status.api_server_endpoints,
        Some(vec!["https://10.0.0.1:6443".to_owned()])
    );
    assert_eq!(status.desired_machines, Some(1));

    // The same pool once its objects are live and its agent rolled out: only
    // the status changes (the rollout is over).
    let live = stores(&first.requests());
    let mut settled = pool("0.1.0");
    settled.status = Some(status);
    let (client, second) = api_server(&settled);
    let ctx = context(client);
    reconcile(Arc::new(settled.clone()), ctx.clone(), live.clone())
        .await
        .expect("reconciled");
    assert_eq!(second.lines(), [LEASES, STATUS]);

    // With that status too, a new leader sends no write at all.
    settled.status = Some(written_status(&second));
    second.clear();
    reconcile(Arc::new(settled.clone()), ctx.clone(), live.clone())
        .await
        .expect("reconciled");
    assert_eq!(second.lines(), [LEASES]);

    // A new agent version: the DaemonSet alone, and the rollout in the status.
    let mut upgraded = pool("0.2.0");
    upgraded.status = settled.status.clone();
    second.clear();
    reconcile(Arc::new(upgraded), ctx, live)
        .await
        .expect("reconciled");
    assert_eq!(second.lines(), [LEASES, DAEMONSET, STATUS]);
    let progressing = written_status(&second).conditions.unwrap_or_default();
    assert!(
        progressing
            .iter()
            .any(|c| c.type_ == "Progressing" && c.reason == "AgentRollout"),
        "{progressing:?}"
    );
}
