use olm_api::model::ActionSpec;

use super::*;

fn from<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("an object")
}

/// A CSV installing Deployments `db-operator` (containers `manager` and
/// `proxy`) and `runner`.
pub(super) fn csv() -> ClusterServiceVersion {
    let pod = |containers: serde_json::Value, sa: &str| {
        serde_json::json!({"selector": {"matchLabels": {"app": "x"}}, "template": {
            "metadata": {"labels": {"app": "x"}},
            "spec": {"serviceAccountName": sa, "nodeSelector": {"disk": "ssd"},
                     "imagePullSecrets": [{"name": "pull"}], "containers": containers}}})
    };
    from(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "db.v1.0.0", "namespace": "ns"},
        "spec": {"displayName": "db", "install": {"strategy": "deployment", "spec": {"deployments": [
            {"name": "db-operator", "spec": pod(serde_json::json!([
                {"name": "manager", "image": "example.com/db:1", "env": [{"name": "MODE", "value": "prod"},
                                                                         {"name": "OLM_RS_ACTION", "value": "stale"}]},
                {"name": "proxy", "image": "example.com/proxy:1"}]), "db-sa")},
            {"name": "runner", "spec": pod(serde_json::json!([{"name": "run", "image": "example.com/run:1"}]), "runner-sa")},
        ]}}},
    }))
}

fn declared(deployment: Option<&str>, container: Option<&str>) -> JobSpec {
    JobSpec {
        command: vec!["/manager".into(), "backup".into()],
        deployment: deployment.map(str::to_owned),
        container: container.map(str::to_owned),
    }
}

fn action(name: &str, timeout: Option<i64>) -> Action {
    let mut action = Action::new(
        name,
        ActionSpec {
            operator: "db".into(),
            action: "backup".into(),
            params: serde_json::json!({"path": "/srv", "level": 3})
                .as_object()
                .cloned(),
            units: Vec::new(),
            leader: false,
            timeout_seconds: timeout,
            cancel: false,
        },
    );
    action.metadata.namespace = Some("ns".into());
    action.metadata.uid = Some("uid-a".into());
    action
}

#[test]
fn the_target_is_the_named_deployment_and_container_or_the_first() {
    let csv = csv();
    let first = target(&csv, &declared(None, None)).unwrap();
    assert_eq!(
        (first.deployment.as_str(), first.container.name.as_str()),
        ("db-operator", "manager")
    );
    let named = target(&csv, &declared(Some("db-operator"), Some("proxy"))).unwrap();
    assert_eq!(named.container.name, "proxy");
    let runner = target(&csv, &declared(Some("runner"), None)).unwrap();
    assert_eq!(
        (runner.deployment.as_str(), runner.container.name.as_str()),
        ("runner", "run")
    );

    for (deployment, container, message) in [
        (
            Some("nope"),
            None,
            "CSV db.v1.0.0 installs no Deployment nope (its Deployments: db-operator, runner)",
        ),
        (
            Some("runner"),
            Some("manager"),
            "Deployment runner of CSV db.v1.0.0 has no container manager",
        ),
    ] {
        let err = target(&csv, &declared(deployment, container))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(message), "{err}");
    }
    let mut bare = csv.clone();
    bare.spec.install = from(serde_json::json!({"strategy": "deployment", "spec": {"deployments": []}}));
    assert_eq!(
        target(&bare, &declared(None, None)),
        Err(TargetError::NoDeployments {
            csv: "db.v1.0.0".into()
        })
    );
    let mut bad = csv;
    bad.spec.install = from(
        serde_json::json!({"strategy": "deployment", "spec": {"deployments": [
        {"name": "db-operator", "spec": {"replicas": "many"}}]}}),
    );
    let err = target(&bad, &declared(None, None)).unwrap_err().to_string();
    assert!(
        err.contains("the spec of Deployment db-operator cannot be read"),
        "{err}"
    );
}

#[test]
fn the_job_runs_the_command_once_with_the_operators_image_account_and_params() {
    let target = target(&csv(), &declared(None, None)).unwrap();
    let job = build(&action("backup-1", Some(30)), &target, &declared(None, None)).expect("a Job");
    assert_eq!(job.metadata.name.as_deref(), Some("backup-1"));
    assert_eq!(job.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(job.labels()[ACTION_LABEL], "backup-1");
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Action", "uid-a", Some(true))
    );
    let spec = job.spec.as_ref().unwrap();
    assert_eq!(
        (spec.backoff_limit, spec.active_deadline_seconds),
        (Some(0), Some(30))
    );
    let template = &spec.template;
    assert_eq!(
        template.metadata.as_ref().unwrap().labels.as_ref().unwrap()[ACTION_LABEL],
        "backup-1"
    );
    let pod = template.spec.as_ref().unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    assert_eq!(pod.service_account_name.as_deref(), Some("db-sa"));
    assert_eq!(
        pod.node_selector.as_ref().unwrap()["disk"],
        "ssd",
        "it runs where the operator may"
    );
    assert_eq!(pod.image_pull_secrets.as_ref().unwrap()[0].name, "pull");
    let container = &pod.containers[0];
    assert_eq!(container.name, CONTAINER);
    assert_eq!(container.image.as_deref(), Some("example.com/db:1"));
    assert_eq!(
        container.command.as_deref(),
        Some(&["/manager".to_owned(), "backup".to_owned()][..])
    );
    assert_eq!(container.termination_message_policy.as_deref(), Some("File"));
    let env: Vec<(String, String)> = container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        env,
        [
            ("MODE".to_owned(), "prod".to_owned()),
            (ACTION_ENV.to_owned(), "backup".to_owned()),
            (PARAMS_ENV.to_owned(), r#"{"level":3,"path":"/srv"}"#.to_owned()),
            (RESULTS_ENV.to_owned(), RESULTS_PATH.to_owned()),
        ],
        "the operator's environment, ours replacing any of the same name"
    );

    let untimed = build(&action("backup-2", None), &target, &declared(None, None)).unwrap();
    assert_eq!(
        untimed.spec.unwrap().active_deadline_seconds,
        Some(DEFAULT_TIMEOUT_SECONDS)
    );
    let mut unowned = action("backup-3", None);
    unowned.metadata.uid = None;
    assert_eq!(build(&unowned, &target, &declared(None, None)), None);
}

#[test]
fn a_job_is_named_after_its_action_within_a_labels_length() {
    assert_eq!(job_name("backup-1"), "backup-1");
    let long = format!("{}.x", "a".repeat(70));
    let name = job_name(&long);
    assert!(name.len() <= 63, "{name}");
    assert!(name.starts_with("aaaa") && name != job_name(&format!("{}.y", "a".repeat(70))));
    assert_eq!(name, job_name(&long), "stable");
}
