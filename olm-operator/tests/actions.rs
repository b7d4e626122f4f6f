//! Actions with olm-operator on a real control plane: a machine operator
//! that declares actions succeeds on two machines (the test plays their
//! agents); a valid Action is queued on its units, and those that cannot run
//! are refused with the reason before anything runs; a cancelled one never
//! runs; the tasks of a lost unit are aborted; old finished Actions go.
//!
//! Run with `cargo test -p olm-operator --test actions -- --ignored`.

mod common;

use std::time::Duration;

use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::ConfigMap},
    apimachinery::pkg::apis::meta::v1::{MicroTime, Time},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use olm_api::{
    model::{Action, ActionSpec, TaskState},
    substrate::{Machine, MachinePool},
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};
use olm_operator::{context::Settings, controllers::action::decide::Retention};

use common::{apply, start_operator_with, test_settings, wait_for, with_namespace};

const POOL: &str = "edge";
const CSV: &str = "db.v1.0.0";
const ACTIONS: &str = "backup:\n  description: Back up.\n  params:\n    path: {type: string, minLength: 1}\n  required: [path]\npause: {description: Stop writes.}";
/// How many finished Actions the operator of this test keeps per namespace.
const KEPT: usize = 6;

fn from<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("an object")
}

fn machine_csv() -> ClusterServiceVersion {
    from(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": CSV, "annotations": {"olm-rs.dev/actions": ACTIONS}},
        "spec": {
            "displayName": "db on machines",
            "version": "1.0.0",
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "SingleNamespace", "supported": true},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": true},
            ],
            "install": {"strategy": "machine",
                "spec": {"pool": POOL, "hooks": {"configMap": "db-hooks"}}},
        },
    }))
}

/// The operator, a pool that selects no node, and machines `m1` and `m2`
/// reporting its unit active, as their agents would.
async fn install(client: &Client, ns: &str) {
    let groups = Api::<OperatorGroup>::namespaced(client.clone(), ns);
    apply(
        &groups,
        &from(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "group"}, "spec": {"targetNamespaces": [ns]},
        })),
    )
    .await;
    let hooks: ConfigMap = from(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "db-hooks"},
        "data": {"install": "#!/bin/sh\n", "start": "#!/bin/sh\n"},
    }));
    apply(&Api::<ConfigMap>::namespaced(client.clone(), ns), &hooks).await;
    let pool: MachinePool = from(serde_json::json!({
        "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
        "metadata": {"name": POOL},
        "spec": {"nodeSelector": {"olm-rs.dev/no-such-label": "x"},
            "agent": {"image": "registry.k8s.io/pause", "version": "3.10"}},
    }));
    apply(&Api::<MachinePool>::namespaced(client.clone(), ns), &pool).await;
    let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), ns);
    let mut csv = machine_csv();
    csv.metadata.labels = Some([(format!("operators.coreos.com/db.{ns}"), String::new())].into());
    apply(&csvs, &csv).await;
    for node in ["m1", "m2"] {
        report_unit(client, ns, node).await;
    }
    common::wait_for_csv(&csvs, CSV, CsvPhase::Succeeded).await;
}

/// Machine `edge-<node>` with a fresh Lease, reporting the unit active.
async fn report_unit(client: &Client, ns: &str, node: &str) {
    let name = format!("{POOL}-{node}");
    let machines = Api::<Machine>::namespaced(client.clone(), ns);
    apply(
        &machines,
        &from(serde_json::json!({
            "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name}, "spec": {"pool": POOL, "nodeName": node},
        })),
    )
    .await;
    let lease: Lease = from(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 600,
            "renewTime": MicroTime(Timestamp::now())},
    }));
    apply(&Api::<Lease>::namespaced(client.clone(), ns), &lease).await;
    let now = Time(Timestamp::from_second(Timestamp::now().as_second()).expect("now"));
    let status = serde_json::json!({
        "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
        "metadata": {"name": name},
        "status": {
            "units": [{"csv": CSV, "version": "1.0.0", "state": "active"}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "AgentRunning",
                "message": "", "lastTransitionTime": now}],
        },
    });
    machines
        .patch_status(
            &name,
            &PatchParams::apply("machine-agent").force(),
            &Patch::Apply(&status),
        )
        .await
        .expect("the agent reports its machine");
}

async fn run(api: &Api<Action>, name: &str, operator: &str, action: &str, params: serde_json::Value) {
    let action = Action::new(
        name,
        ActionSpec {
            operator: operator.to_owned(),
            action: action.to_owned(),
            params: params.as_object().cloned(),
            units: Vec::new(),
            leader: false,
            timeout_seconds: None,
            cancel: false,
        },
    );
    api.create(&PostParams::default(), &action)
        .await
        .unwrap_or_else(|e| panic!("create Action {name}: {e}"));
}

/// Waits until Action `name` is in `phase` with `Accepted` of `reason`.
async fn wait_phase(api: &Api<Action>, name: &str, phase: TaskState, reason: &str) -> Action {
    let what = format!("Action {name} is {} ({reason})", phase.as_str());
    wait_for(api, name, &what, |action: Option<&Action>| {
        action.and_then(|a| a.status.as_ref()).is_some_and(|s| {
            s.phase == Some(phase)
                && s.conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Accepted" && c.reason == reason)
        })
    })
    .await
    .expect("the Action")
}

fn tasks(action: &Action) -> Vec<(String, TaskState)> {
    let status = action.status.as_ref().expect("a status");
    status.tasks.iter().map(|t| (t.unit.clone(), t.state)).collect()
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn actions_are_queued_refused_cancelled_aborted_and_removed() {
    let settings = Settings {
        action_retention: Retention {
            age: Duration::from_secs(3600),
            count: KEPT,
        },
        ..test_settings()
    };
    start_operator_with(&common::client().await, settings).await;
    with_namespace("actions", |client, ns| async move {
        install(&client, &ns).await;
        let api = Api::<Action>::namespaced(client.clone(), &ns);

        // Valid: one pending task per unit.
        run(
            &api,
            "backup",
            "db",
            "backup",
            serde_json::json!({"path": "/srv"}),
        )
        .await;
        let queued = wait_phase(&api, "backup", TaskState::Pending, "Queued").await;
        assert_eq!(
            tasks(&queued),
            [
                ("edge-m1".to_owned(), TaskState::Pending),
                ("edge-m2".to_owned(), TaskState::Pending)
            ]
        );
        assert_eq!(queued.status.as_ref().unwrap().csv.as_deref(), Some(CSV));

        // Refused before anything runs, each with its reason.
        for (name, operator, action, params, reason, part) in [
            (
                "no-path",
                "db",
                "backup",
                serde_json::json!({}),
                "InvalidParams",
                "`path`: is required",
            ),
            (
                "restore",
                "db",
                "restore",
                serde_json::json!({}),
                "UnknownAction",
                "declares no action restore",
            ),
            (
                "ghost",
                "ghost",
                "backup",
                serde_json::json!({}),
                "NotInstalled",
                "not installed",
            ),
        ] {
            run(&api, name, operator, action, params).await;
            let refused = wait_phase(&api, name, TaskState::Failed, reason).await;
            let status = refused.status.as_ref().unwrap();
            assert!(status.tasks.is_empty(), "nothing runs: {status:?}");
            let message = status.message.clone().unwrap_or_default();
            assert!(message.contains(part), "{name}: {message}");
        }
        let mut on_unit = Action::new(
            "elsewhere",
            ActionSpec {
                operator: "db".into(),
                action: "pause".into(),
                params: None,
                units: vec!["edge-m9".into()],
                leader: false,
                timeout_seconds: None,
                cancel: false,
            },
        );
        on_unit.metadata.namespace = Some(ns.clone());
        api.create(&PostParams::default(), &on_unit)
            .await
            .expect("create");
        wait_phase(&api, "elsewhere", TaskState::Failed, "UnknownUnit").await;

        // Cancelled while pending: it never runs.
        let cancel = serde_json::json!({"spec": {"cancel": true}});
        api.patch("backup", &PatchParams::default(), &Patch::Merge(&cancel))
            .await
            .expect("cancel");
        let cancelled = wait_phase(&api, "backup", TaskState::Cancelled, "Queued").await;
        assert!(
            tasks(&cancelled).iter().all(|(_, s)| *s == TaskState::Cancelled),
            "{:?}",
            tasks(&cancelled)
        );

        // A unit whose Machine goes: its task is aborted with the reason.
        run(&api, "pause", "db", "pause", serde_json::json!({})).await;
        wait_phase(&api, "pause", TaskState::Pending, "Queued").await;
        Api::<Machine>::namespaced(client.clone(), &ns)
            .delete("edge-m2", &DeleteParams::default())
            .await
            .expect("delete edge-m2");
        let aborted = wait_for(&api, "pause", "edge-m2's task aborted", |a: Option<&Action>| {
            a.and_then(|a| a.status.as_ref())
                .is_some_and(|s| s.tasks.iter().any(|t| t.state == TaskState::Aborted))
        })
        .await
        .expect("the Action");
        let status = aborted.status.as_ref().unwrap();
        assert_eq!(status.phase, Some(TaskState::Running), "one task still waits");
        assert_eq!(
            status.tasks[1].message.as_deref(),
            Some("unit edge-m2 is lost: its Machine is gone")
        );

        // Five finished so far; two more, and the oldest finished one goes.
        for name in ["late-1", "late-2"] {
            run(&api, name, "ghost", "backup", serde_json::json!({})).await;
            wait_phase(&api, name, TaskState::Failed, "NotInstalled").await;
        }
        let finished = || async {
            common::list(&api, "")
                .await
                .into_iter()
                .filter(|a| {
                    a.status
                        .as_ref()
                        .and_then(|s| s.phase)
                        .is_some_and(|p| p.is_finished())
                })
                .map(|a| kube::ResourceExt::name_any(&a))
                .collect::<Vec<String>>()
        };
        common::eventually(&format!("{KEPT} finished Actions kept"), || async {
            finished().await.len() == KEPT
        })
        .await;
        let kept = finished().await;
        for newest in ["late-1", "late-2", "backup"] {
            assert!(kept.iter().any(|n| n == newest), "{newest} stays: {kept:?}");
        }
        assert!(
            api.get_opt("pause").await.expect("get").is_some(),
            "a running one stays"
        );
    })
    .await;
}
