//! `kubectl olm run`, `operations`, `show-action` and `cancel` against the
//! real API server. The test plays olm-operator and the unit's agent: it
//! writes the status an accepted, then completed, Action would carry, and
//! checks what the commands print and the objects they write.

use std::time::Duration;

use e2e::kubectl::{Run, kubectl_olm};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams},
};
use olm_api::model::Action;
use olm_testkit::{install_crds, wait_for, with_namespace};

/// Runs `kubectl olm <args> -n <ns>`.
async fn olm(client: Client, ns: String, args: Vec<String>) -> Run {
    let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
    argv.extend(["-n", &ns]);
    kubectl_olm(&client, &argv).await
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// Writes `status` onto Action `name`, as olm-operator and the agents do.
async fn write_status(api: &Api<Action>, name: &str, status: serde_json::Value) {
    let patch = serde_json::json!({"status": status});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("write the status of Action {name}: {e}"));
}

#[tokio::test]
async fn run_waits_for_the_results_and_the_other_commands_read_them() {
    with_namespace("cli-actions", |client: Client, ns: String| async move {
        install_crds(&client).await;
        let api: Api<Action> = Api::namespaced(client.clone(), &ns);

        // --dry-run -o yaml prints the object and writes nothing.
        let yaml = olm(
            client.clone(),
            ns.clone(),
            words("run db/edge-n1 backup path=/srv level=3 --dry-run -o yaml"),
        )
        .await
        .ok();
        assert!(
            yaml.contains("kind: Action") && yaml.contains("generateName: db-backup-"),
            "{yaml}"
        );
        assert!(yaml.contains("level: 3") && yaml.contains("- edge-n1"), "{yaml}");
        assert!(
            api.list(&Default::default())
                .await
                .expect("list")
                .items
                .is_empty()
        );

        // run --wait, while the test plays the controller and the agent.
        let waiting = tokio::spawn(olm(
            client.clone(),
            ns.clone(),
            words("run db backup path=/srv --name b1 --wait --timeout 60"),
        ));
        let created = wait_for(&api, "b1", "Action b1 is created", |a: Option<&Action>| {
            a.is_some()
        })
        .await
        .expect("the Action");
        assert_eq!(created.spec.operator, "db");
        assert_eq!(
            created.spec.params,
            serde_json::json!({"path": "/srv"}).as_object().cloned()
        );
        write_status(
            &api,
            "b1",
            serde_json::json!({"phase": "running", "tasks": [{"unit": "edge-n1", "state": "running",
                "log": [{"time": "2026-01-01T00:00:00Z", "message": "dumping"}]}]}),
        )
        .await;
        write_status(
            &api,
            "b1",
            serde_json::json!({"phase": "completed", "message": "completed on edge-n1",
                "tasks": [{"unit": "edge-n1", "state": "completed", "exitCode": 0,
                    "results": {"path": "/srv/b1.tar", "size": "1024"},
                    "log": [{"time": "2026-01-01T00:00:00Z", "message": "dumping"}]}]}),
        )
        .await;
        let run = tokio::time::timeout(Duration::from_secs(90), waiting)
            .await
            .expect("run --wait ends")
            .expect("the task");
        let err = run.err.clone();
        let out = run.ok();
        assert!(err.contains("Action b1 created"), "{err}");
        for part in [
            "Action b1: db backup (completed)",
            "edge-n1: completed",
            "exit code: 0",
            "path: /srv/b1.tar",
            "size: 1024",
        ] {
            assert!(out.contains(part), "{part:?} in:\n{out}");
        }

        // A failed action makes run --wait fail, naming why.
        let failing = tokio::spawn(olm(
            client.clone(),
            ns.clone(),
            words("run db pause --name p1 --wait --timeout 60"),
        ));
        wait_for(&api, "p1", "Action p1 is created", |a: Option<&Action>| {
            a.is_some()
        })
        .await;
        write_status(
            &api,
            "p1",
            serde_json::json!({"phase": "failed", "message": "failed on edge-n1: disk full",
                "tasks": [{"unit": "edge-n1", "state": "failed", "exitCode": 1, "message": "disk full"}]}),
        )
        .await;
        let run = failing.await.expect("the task");
        let error = run.error.expect("a failed action is an error").to_string();
        assert!(
            error.contains("Action p1 is failed: failed on edge-n1: disk full"),
            "{error}"
        );

        // operations, show-action, cancel.
        let table = olm(client.clone(), ns.clone(), words("operations")).await.ok();
        assert!(table.contains("b1") && table.contains("completed"), "{table}");
        assert!(table.contains("p1") && table.contains("failed"), "{table}");
        let shown = olm(client.clone(), ns.clone(), words("show-action b1"))
            .await
            .ok();
        assert!(shown.contains("path: /srv/b1.tar"), "{shown}");
        olm(client.clone(), ns.clone(), words("run db pause --name c1"))
            .await
            .ok();
        let dry = olm(client.clone(), ns.clone(), words("cancel c1 --dry-run -o yaml"))
            .await
            .ok();
        assert!(dry.contains("cancel: true"), "{dry}");
        assert!(
            !api.get("c1").await.expect("c1").spec.cancel,
            "a dry run writes nothing"
        );
        olm(client.clone(), ns.clone(), words("cancel c1")).await.ok();
        let cancelled = api.get("c1").await.expect("c1");
        assert!(cancelled.spec.cancel, "{:?}", cancelled.name_any());
    })
    .await;
}
