//! Databags on a real control plane, with olm-operator and the admission
//! policies of `manifests/machine-agent-policy.yaml`: two machine operators on
//! two pools (`dbs` runs `db`, `webs` runs `web`) are related; olm-operator
//! makes each side's application bag and one bag per unit; the API server
//! lets each agent write only its own units' bags, the application bag only
//! while it holds the application's leader Lease, never the other side's
//! bags; deleting the Relation removes its bags.
//!
//! The agents are played by the test with the credentials a DaemonSet pod of
//! each pool on each fake node gets (a token bound to that pod).
//!
//! Run with `cargo test -p olm-operator --test databags -- --ignored`.

mod common;

use common::{eventually, wait_for, with_namespace};
use k8s_openapi::{
    api::{
        authentication::v1::TokenRequest,
        coordination::v1::Lease,
        core::v1::{ConfigMap, Pod, ServiceAccount},
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, Time},
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    config::AuthInfo,
};
use olm_api::{
    model::{Action, Databag, Relation, TaskState},
    substrate::{Machine, MachinePool},
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};
use serde_json::json;
use std::{
    future::Future,
    time::{Duration, Instant},
};

const AGENT_MANAGER: &str = "machine-agent";

fn from<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("an object")
}

/// A machine CSV of package `package` on `pool`, declaring `endpoints`.
fn machine_csv(package: &str, ns: &str, pool: &str, endpoints: &str) -> ClusterServiceVersion {
    from(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("{package}.v1.0.0"),
                     "labels": {format!("operators.coreos.com/{package}.{ns}"): ""},
                     "annotations": {"olm-rs.dev/endpoints": endpoints}},
        "spec": {
            "displayName": package, "version": "1.0.0",
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "SingleNamespace", "supported": true},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": true},
            ],
            "install": {"strategy": "machine", "spec": {"pool": pool, "hooks": {"configMap": "hooks"}}},
        },
    }))
}

/// The agent pods of `pool`, one per fake node, sorted by node.
async fn agent_pods(admin: &Client, ns: &str, pool: &str) -> Vec<Pod> {
    let pods = Api::<Pod>::namespaced(admin.clone(), ns);
    let selector = format!("substrate.olm-rs.dev/pool={pool}");
    let scheduled = || async {
        let mut found: Vec<Pod> = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .collect();
        found.sort_by_key(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()));
        found
    };
    eventually(
        &format!("pool {pool} has an agent pod on each fake node"),
        || async { scheduled().await.len() >= 2 },
    )
    .await;
    scheduled().await
}

/// One agent, as its pod's credentials make it: its client and Machine name.
struct Agent {
    client: Client,
    machine: String,
    node: String,
    pool: String,
}

impl Agent {
    async fn of(admin: &Client, ns: &str, pool: &str, pod: &Pod) -> Agent {
        let request: TokenRequest = from(json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": [], "expirationSeconds": 3600,
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.name_any(), "uid": pod.uid()}},
        }));
        let issued: TokenRequest = Api::<ServiceAccount>::namespaced(admin.clone(), ns)
            .create_subresource(
                "token",
                &format!("machine-agent-{pool}"),
                &PostParams::default(),
                &request,
            )
            .await
            .expect("a token for the agent pod");
        let token = issued.status.expect("a token").token;
        let mut config = olm_testkit::config().await;
        config.auth_info = from::<AuthInfo>(json!({ "token": token }));
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .expect("scheduled");
        Agent {
            client: Client::try_from(config).expect("an agent client"),
            machine: format!("{pool}-{node}"),
            node,
            pool: pool.to_owned(),
        }
    }

    /// Registers its Machine, reporting its unit of `csv` (of `application`) active.
    async fn register(&self, ns: &str, csv: &str, application: &str) {
        let machines = Api::<Machine>::namespaced(self.client.clone(), ns);
        let params = PatchParams::apply(AGENT_MANAGER).force();
        let machine = json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": self.machine}, "spec": {"pool": self.pool, "nodeName": self.node}});
        machines
            .patch(&self.machine, &params, &Patch::Apply(&machine))
            .await
            .expect("the agent registers its Machine");
        let now = Time(Timestamp::from_second(Timestamp::now().as_second()).expect("now"));
        let status = json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": self.machine},
            "status": {"agentVersion": "0.1.0",
                "units": [{"csv": csv, "version": "1.0.0", "state": "active", "application": application}],
                "conditions": [{"type": "Ready", "status": "True", "reason": "AgentRunning", "message": "", "lastTransitionTime": now}]}});
        machines
            .patch_status(&self.machine, &params, &Patch::Apply(&status))
            .await
            .expect("the agent reports its unit");
        let leases = Api::<Lease>::namespaced(self.client.clone(), ns);
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.machine},
            "spec": {"holderIdentity": self.machine, "leaseDurationSeconds": 3600, "renewTime": MicroTime(Timestamp::now())}});
        leases
            .patch(&self.machine, &params, &Patch::Apply(&lease))
            .await
            .expect("the agent heartbeats");
    }

    /// Sets `key=value` in bag `bag`, as `relation-set` does.
    async fn set(&self, ns: &str, bag: &str, key: &str, value: &str) -> Result<Databag, kube::Error> {
        let bags = Api::<Databag>::namespaced(self.client.clone(), ns);
        let body = json!({"apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Databag",
            "metadata": {"name": bag}, "status": {"data": {key: value}}});
        bags.patch_status(
            bag,
            &PatchParams::apply(&format!("unit-{}", self.machine)).force(),
            &Patch::Apply(&body),
        )
        .await
    }

    /// Takes (or keeps) the leader Lease of `application`, holding it as `holder`.
    async fn lead(&self, ns: &str, application: &str, holder: &str) -> Result<Lease, kube::Error> {
        let leases = Api::<Lease>::namespaced(self.client.clone(), ns);
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": format!("{application}.leader"),
                         "labels": {"model.olm-rs.dev/leader-of": application, "substrate.olm-rs.dev/pool": self.pool}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30, "renewTime": MicroTime(Timestamp::now())}});
        leases
            .patch(
                &format!("{application}.leader"),
                &PatchParams::apply(AGENT_MANAGER).force(),
                &Patch::Apply(&lease),
            )
            .await
    }
}

impl Agent {
    /// Gives up the leader Lease of `application` as the agents do: no holder.
    async fn release(&self, ns: &str, application: &str) -> Result<Lease, kube::Error> {
        let leases = Api::<Lease>::namespaced(self.client.clone(), ns);
        let name = format!("{application}.leader");
        let mut lease = leases.get(&name).await?;
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.renew_time = None;
        }
        leases.replace(&name, &Default::default(), &lease).await
    }
}

fn refused(result: Result<impl std::fmt::Debug, kube::Error>, what: &str) -> String {
    match result {
        Err(kube::Error::Api(status)) if is_refusal(&status) => status.message,
        other => panic!("{what}: expected the API server to refuse, got {other:?}"),
    }
}

/// Whether the API server refused a request on policy or permission grounds.
fn is_refusal(status: &kube::core::Status) -> bool {
    status.code == 403 || status.code == 422
}

/// How long the API server's cache of leader Leases may lag a change of holder.
const LEASE_CACHE_LAG: Duration = Duration::from_secs(30);

/// Sends `write` until the API server refuses it, for up to [`LEASE_CACHE_LAG`],
/// and returns the refusal's message. The leader rule of application bags
/// reads the Leases from the API server's cache (the policy's params), which
/// can lag a Lease's change by a moment.
async fn refused_once_seen<T, F, Fut>(what: &str, mut write: F) -> String
where
    T: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let deadline = Instant::now() + LEASE_CACHE_LAG;
    loop {
        match write().await {
            Err(kube::Error::Api(status)) if is_refusal(&status) => return status.message,
            Ok(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!("{what}: expected the API server to refuse, got {other:?}"),
        }
    }
}

/// Sends `write` until the API server accepts it, for up to
/// [`LEASE_CACHE_LAG`]: the counterpart of [`refused_once_seen`] for the
/// writes a new leader may make.
async fn accepted_once_seen<T, F, Fut>(what: &str, mut write: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let deadline = Instant::now() + LEASE_CACHE_LAG;
    loop {
        match write().await {
            Ok(done) => return done,
            Err(kube::Error::Api(status)) if is_refusal(&status) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// Changes the task of `unit` on Action `name` to Running, as `agent`'s agent
/// does (read, change the task, replace the status), trying again on conflicts
/// with olm-operator's own writes.
async fn start_task(agent: &Agent, ns: &str, name: &str, unit: &str) -> Result<Action, kube::Error> {
    let actions = Api::<Action>::namespaced(agent.client.clone(), ns);
    let mut attempts = 0;
    loop {
        let mut action = actions.get(name).await?;
        let status = action.status.as_mut().expect("a status");
        let task = status
            .tasks
            .iter_mut()
            .find(|t| t.unit == unit)
            .expect("the unit's task");
        task.state = TaskState::Running;
        match actions
            .replace_status(name, &PostParams::default(), &action)
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 409 && attempts < 20 => attempts += 1,
            other => return other,
        }
    }
}

/// An agent of pool `webs` (`web`) neither registers a Machine of pool `dbs`,
/// nor changes the task of `db`'s unit on an Action, nor reads anything in
/// another namespace; `db`'s own agent does change its task.
async fn other_pools_are_out_of_reach(admin: &Client, ns: &str, web: &Agent, db: &Agent) {
    let machine = json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
        "metadata": {"name": db.machine}, "spec": {"pool": db.pool, "nodeName": db.node}});
    let message = refused(
        Api::<Machine>::namespaced(web.client.clone(), ns)
            .patch(
                &db.machine,
                &PatchParams::apply(AGENT_MANAGER).force(),
                &Patch::Apply(&machine),
            )
            .await,
        "web's agent writing db's Machine",
    );
    assert!(
        message.contains(&format!("may write only {}", web.machine)),
        "{message}"
    );

    let actions = Api::<Action>::namespaced(admin.clone(), ns);
    common::apply(
        &actions,
        &from::<Action>(
            json!({"apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Action",
            "metadata": {"name": "pause"}, "spec": {"operator": "db", "action": "pause"}}),
        ),
    )
    .await;
    let unit = db.machine.clone();
    wait_for(&actions, "pause", "a task on db's unit", |a: Option<&Action>| {
        a.and_then(|a| a.status.as_ref())
            .is_some_and(|s| s.tasks.iter().any(|t| t.unit == unit))
    })
    .await;
    let message = refused(
        start_task(web, ns, "pause", &db.machine).await,
        "web's agent changing db's task",
    );
    assert!(
        message.contains("may write only the task of its own unit"),
        "{message}"
    );
    start_task(db, ns, "pause", &db.machine)
        .await
        .expect("db's agent changes its own task");

    // Nothing of another namespace, read or written.
    for (what, result) in [
        (
            "Databags",
            Api::<Databag>::namespaced(web.client.clone(), "default")
                .list(&ListParams::default())
                .await
                .map(|_| ()),
        ),
        (
            "Machines",
            Api::<Machine>::namespaced(web.client.clone(), "default")
                .list(&ListParams::default())
                .await
                .map(|_| ()),
        ),
        (
            "Actions",
            Api::<Action>::namespaced(web.client.clone(), "default")
                .list(&ListParams::default())
                .await
                .map(|_| ()),
        ),
    ] {
        refused(
            result,
            &format!("web's agent listing the {what} of namespace default"),
        );
    }
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn each_bag_is_written_by_its_writer_alone_and_goes_with_its_relation() {
    common::machines::install_policy().await;
    with_namespace("databags", |admin, ns| async move {
        let groups = Api::<OperatorGroup>::namespaced(admin.clone(), &ns);
        olm_testkit::objects::apply_json(
            &groups,
            json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "group"}, "spec": {"targetNamespaces": [ns.clone()]}}),
        )
        .await;
        let config_maps = Api::<ConfigMap>::namespaced(admin.clone(), &ns);
        common::apply(
            &config_maps,
            &from::<ConfigMap>(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hooks"}, "data": {"install": "#!/bin/sh\n", "start": "#!/bin/sh\n"}})),
        )
        .await;
        let pools = Api::<MachinePool>::namespaced(admin.clone(), &ns);
        for pool in ["dbs", "webs"] {
            common::apply(
                &pools,
                &from::<MachinePool>(json!({
                "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
                "metadata": {"name": pool},
                "spec": {"nodeSelector": {"type": "kwok"},
                         "agent": {"image": "registry.k8s.io/pause", "version": "3.10"}}})),
            )
            .await;
        }
        let csvs = Api::<ClusterServiceVersion>::namespaced(admin.clone(), &ns);
        let mut db_csv = machine_csv("db", &ns, "dbs", "provides: {db: {interface: pg}}");
        db_csv.annotations_mut().insert(
            olm_api::labels::ACTIONS.to_owned(),
            "pause: {description: Stop writes.}".to_owned(),
        );
        common::apply(&csvs, &db_csv).await;
        common::apply(
            &csvs,
            &machine_csv("web", &ns, "webs", "requires: {database: {interface: pg}}"),
        )
        .await;

        // Agents: db's on the first node, web's on both.
        let db_pods = agent_pods(&admin, &ns, "dbs").await;
        let web_pods = agent_pods(&admin, &ns, "webs").await;
        let db_a = Agent::of(&admin, &ns, "dbs", &db_pods[0]).await;
        let web_a = Agent::of(&admin, &ns, "webs", &web_pods[0]).await;
        let web_b = Agent::of(&admin, &ns, "webs", &web_pods[1]).await;
        db_a.register(&ns, "db.v1.0.0", "db").await;
        web_a.register(&ns, "web.v1.0.0", "web").await;
        web_b.register(&ns, "web.v1.0.0", "web").await;
        for csv in ["db.v1.0.0", "web.v1.0.0"] {
            wait_for(&csvs, csv, "Succeeded", |c: Option<&ClusterServiceVersion>| {
                c.and_then(|c| c.status.as_ref())
                    .is_some_and(|s| s.phase == Some(CsvPhase::Succeeded))
            })
            .await;
        }

        // Related: a bag per side and per unit, owned by the Relation.
        let relations = Api::<Relation>::namespaced(admin.clone(), &ns);
        common::apply(
            &relations,
            &from::<Relation>(json!({"apiVersion": "model.olm-rs.dev/v1alpha1",
            "kind": "Relation", "metadata": {"name": "r"},
            "spec": {"endpoints": [{"application": "web"}, {"application": "db"}]}})),
        )
        .await;
        let bags = Api::<Databag>::namespaced(admin.clone(), &ns);
        let (app_bag, unit_a, unit_b, db_bag, db_unit) = (
            "r.web".to_owned(),
            format!("r.web.{}", web_a.machine),
            format!("r.web.{}", web_b.machine),
            "r.db".to_owned(),
            format!("r.db.{}", db_a.machine),
        );
        let mut wanted = vec![
            app_bag.clone(),
            unit_a.clone(),
            unit_b.clone(),
            db_bag.clone(),
            db_unit.clone(),
        ];
        wanted.sort();
        eventually("the relation's five bags", || async {
            let mut names: Vec<String> = bags
                .list(&ListParams::default().labels("model.olm-rs.dev/relation=r"))
                .await
                .map(|l| l.items.iter().map(ResourceExt::name_any).collect())
                .unwrap_or_default();
            names.sort();
            names == wanted
        })
        .await;
        let bag = bags.get(&unit_a).await.expect("web's unit bag");
        assert_eq!(bag.spec.unit.as_deref(), Some(web_a.machine.as_str()));
        assert_eq!(bag.spec.pool.as_deref(), Some("webs"));
        assert_eq!(bag.spec.endpoint, "database");
        assert_eq!(bag.owner_references()[0].kind, "Relation");

        // A unit writes its own bag; the other side reads it.
        web_a
            .set(&ns, &unit_a, "host", "10.0.0.1")
            .await
            .expect("web/A writes its own bag");
        let read = Api::<Databag>::namespaced(db_a.client.clone(), &ns)
            .get(&unit_a)
            .await
            .expect("db reads web's bag");
        assert_eq!(read.status.expect("data").data["host"], "10.0.0.1");
        // Not another unit's bag, nor the other side's.
        let message = refused(
            web_a.set(&ns, &unit_b, "host", "forged").await,
            "web/A writing web/B's bag",
        );
        assert!(
            message.contains("may write only the Databags of its own units"),
            "{message}"
        );
        let message = refused(
            web_a.set(&ns, &db_unit, "host", "forged").await,
            "web/A writing db's unit bag",
        );
        assert!(message.contains("of applications of its pool"), "{message}");
        refused(
            web_a.set(&ns, &db_bag, "host", "forged").await,
            "web/A writing db's application bag",
        );
        refused(
            db_a.set(&ns, &unit_a, "host", "forged").await,
            "db/A writing web/A's bag",
        );
        // Nor the bags themselves: olm-operator makes and removes them.
        refused(
            Api::<Databag>::namespaced(web_a.client.clone(), &ns)
                .delete(&unit_a, &DeleteParams::default())
                .await,
            "web/A deleting its bag",
        );

        // The application bag: only its leader writes it.
        web_a
            .lead(&ns, "web", &web_a.machine)
            .await
            .expect("web/A takes web's leader Lease");
        accepted_once_seen("the leader writes its application's bag", || {
            web_a.set(&ns, &app_bag, "url", "http://web")
        })
        .await;
        let message = refused_once_seen("web/B writing web's bag", || {
            web_b.set(&ns, &app_bag, "url", "forged")
        })
        .await;
        assert!(
            message.contains(&format!(
                "{} does not hold its leader Lease web.leader",
                web_b.machine
            )),
            "{message}"
        );
        // Leadership is taken only as one's own holder, and only in one's own pool.
        refused(
            web_b.lead(&ns, "web", &web_a.machine).await,
            "web/B naming web/A the holder",
        );
        refused(
            db_a.lead(&ns, "web", &db_a.machine).await,
            "db/A taking web's Lease",
        );
        web_b
            .lead(&ns, "web", &web_b.machine)
            .await
            .expect("web/B takes the Lease over");
        accepted_once_seen("the new leader writes", || {
            web_b.set(&ns, &app_bag, "url", "http://web-b")
        })
        .await;
        refused_once_seen("the former leader writing", || {
            web_a.set(&ns, &app_bag, "url", "stale")
        })
        .await;
        // Only the holder gives the Lease up (a leader whose unit goes does).
        refused(web_a.release(&ns, "web").await, "web/A giving up web/B's Lease");
        web_b.release(&ns, "web").await.expect("web/B gives its Lease up");

        // Security: an agent of one pool cannot reach the other pool's data.
        other_pools_are_out_of_reach(&admin, &ns, &web_a, &db_a).await;

        // The relation goes: its bags go with it.
        relations
            .delete("r", &DeleteParams::default())
            .await
            .expect("delete the Relation");
        eventually("the relation's bags are gone", || async {
            bags.list(&ListParams::default().labels("model.olm-rs.dev/relation=r"))
                .await
                .is_ok_and(|l| l.items.is_empty())
        })
        .await;
    })
    .await;
}
