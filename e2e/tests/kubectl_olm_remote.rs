//! `kubectl olm` reads catalogs through the API server only: `packages`,
//! `show` and `plan` work against a catalog that only the cluster's
//! catalog-operator can read.
//!
//! The CatalogSource names its catalog image by a host that resolves nowhere
//! (`unreachable.invalid`, a reserved name); catalog-operator, run as its own
//! process, reaches the image only through its `--image-mirror` flag, which
//! sends that host to the test registry (hack/registry.sh). The test process,
//! where the CLI runs, is shown unable to pull the image; the CLI still lists
//! the packages, shows one and plans an install, from the PackageManifests and
//! the `packagemanifests/<package>/plan` dry run that catalog-operator serves
//! through the API server's aggregator. The API server authorizes plans: a
//! user needs `create` on packagemanifests/plan, which the ClusterRole of
//! manifests/packageserver.yaml grants and the built-in edit role aggregates.

use std::time::Duration;

use e2e::{
    images::{push_catalog_image, test_registry},
    inprocess::{demo_catalog, package_server, wait_package_manifests},
};
use k8s_openapi::api::{
    core::v1::ServiceAccount,
    rbac::v1::{ClusterRole, Role, RoleBinding},
};
use kube::{Api, Client, api::ListParams};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{CatalogSource, InstallPlan, Subscription},
};
use olm_oci::{DockerConfig, PullOptions, Puller};
use olm_testkit::{
    install_crds,
    objects::{apply_json, catalog_is_ready},
    process::{FAST_LEASE, Process},
    repo_root, wait_for_within, with_namespace,
};
use serde_json::json;

/// A host that resolves nowhere (RFC 2606).
const UNREACHABLE: &str = "unreachable.invalid";

/// Runs `kubectl olm <args> -n <ns>` (the namespace is also the global catalog
/// namespace) in this process as `client`'s user: stdout, or the error.
async fn try_olm(client: &Client, ns: &str, args: &[&str]) -> Result<String, kubectl_olm::Error> {
    let mut argv = args.to_vec();
    argv.extend_from_slice(&["-n", ns, "--global-catalog-namespace", ns]);
    let run = e2e::kubectl::kubectl_olm(client, &argv).await;
    match run.error {
        Some(error) => Err(error),
        None => Ok(run.out),
    }
}

/// [`try_olm`], panicking on an error.
async fn olm(client: &Client, ns: &str, args: &[&str]) -> String {
    try_olm(client, ns, args)
        .await
        .unwrap_or_else(|e| panic!("kubectl olm {args:?} failed: {e}"))
}

/// A client acting as ServiceAccount `name` of `ns` (impersonation).
async fn as_service_account(ns: &str, name: &str) -> Client {
    let mut config = kube::Config::infer().await.expect("the kubeconfig");
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:{name}"));
    Client::try_from(config).expect("a client")
}

/// The API server authorizes plans: a user who may read what `plan` reads but
/// not `create` packagemanifests/plan is refused, with the ClusterRole to ask
/// for; bound to that ClusterRole of manifests/packageserver.yaml, the user
/// gets the plan. The built-in edit role aggregates it.
async fn plans_are_authorized(client: &Client, ns: &str) {
    let manifests = std::fs::read_to_string(repo_root().join("manifests/packageserver.yaml"))
        .expect("manifests/packageserver.yaml");
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&manifests).expect("YAML");
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    for doc in docs.into_iter().filter(|d| d["kind"] == "ClusterRole") {
        apply_json(&cluster_roles, doc).await;
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    apply_json(
        &accounts,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "planner"}}),
    )
    .await;
    let roles: Api<Role> = Api::namespaced(client.clone(), ns);
    apply_json(
        &roles,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "olm-reader"},
               "rules": [{"apiGroups": ["operators.coreos.com"], "resources": ["catalogsources", "operatorgroups"], "verbs": ["get", "list"]},
                         {"apiGroups": ["packages.operators.coreos.com"], "resources": ["packagemanifests"], "verbs": ["get", "list"]}]}),
    )
    .await;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    let bind = |name: &str, kind: &str, role: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
               "subjects": [{"kind": "ServiceAccount", "name": "planner", "namespace": ns}]})
    };
    apply_json(&bindings, bind("olm-reader", "Role", "olm-reader")).await;
    let planner = as_service_account(ns, "planner").await;
    let packages = olm(&planner, ns, &["packages"]).await;
    assert!(packages.contains("demo-app"), "{packages}");
    let refused = try_olm(&planner, ns, &["plan", "demo-app"])
        .await
        .expect_err("a plan without create on packagemanifests/plan is refused")
        .to_string();
    assert!(refused.contains("olm-rs:packages-plan"), "{refused}");

    apply_json(&bindings, bind("planner", "ClusterRole", "olm-rs:packages-plan")).await;
    let mut last = String::new();
    for _ in 0..60 {
        match try_olm(&planner, ns, &["plan", "demo-app"]).await {
            Ok(plan) if plan.contains("demo-db.v") => {
                last.clear();
                break;
            }
            Ok(plan) => last = plan,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        last.is_empty(),
        "the planner bound to olm-rs:packages-plan gets a plan: {last}"
    );

    // The built-in edit role aggregates plans (kube-controller-manager fills it in).
    let mut aggregated = false;
    for _ in 0..60 {
        let edit = cluster_roles.get("edit").await.expect("ClusterRole edit");
        aggregated = edit.rules.iter().flatten().any(|rule| {
            rule.resources
                .iter()
                .flatten()
                .any(|r| r == "packagemanifests/plan")
                && rule.verbs.iter().any(|v| v == "create")
        });
        if aggregated {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        aggregated,
        "ClusterRole edit aggregates create on packagemanifests/plan"
    );
}

#[tokio::test]
async fn kubectl_olm_reads_a_catalog_only_the_catalog_operator_reaches() {
    with_namespace("cli-remote", |client: Client, ns: String| async move {
        install_crds(&client).await;
        let registry = test_registry();
        let puller = Puller::new(PullOptions::default());
        let catalog = demo_catalog(false);
        let pushed = format!("{}/kubectl-olm/{ns}:v1", registry.address);
        let digest = push_catalog_image(&puller, &catalog, &pushed, &registry.secrets)
            .await
            .expect("the catalog image is pushed");
        let image = format!("{UNREACHABLE}/kubectl-olm/{ns}@{digest}");

        // This process, where the CLI runs, cannot read the catalog.
        let here = Puller::new(PullOptions {
            attempts: 1,
            ..PullOptions::default()
        });
        let pulled = here.pull(&image, &DockerConfig::default()).await;
        assert!(
            pulled.is_err(),
            "{image} must not be pullable from the test process"
        );

        // catalog-operator, its own process, reaches it through a mirror, and
        // serves PackageManifests and plans to the API server's aggregator.
        let (config, _api_service) = package_server(&client, &ns).await;
        let mirror = format!("{UNREACHABLE}/kubectl-olm={}/kubectl-olm", registry.address);
        let address = config.address.to_string();
        let mut args = FAST_LEASE.to_vec();
        args.extend([
            "--global-catalog-namespace",
            ns.as_str(),
            "--watch-namespace",
            ns.as_str(),
            "--catalog-health-interval",
            "1s",
            "--image-mirror",
            mirror.as_str(),
            "--package-server-address",
            address.as_str(),
            "--package-server-namespace",
            ns.as_str(),
        ]);
        let operator = Process::catalog_operator_with("cli-remote", "catalog-operator", &ns, &args);
        assert!(
            operator.wait_ready(Duration::from_secs(120)).await,
            "catalog-operator is ready:\n{}",
            operator.log_tail(40)
        );
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        apply_json(
            &sources,
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                   "metadata": {"name": "demo", "namespace": ns},
                   "spec": {"sourceType": "grpc", "image": image, "displayName": "Demo"}}),
        )
        .await;
        wait_for_within(
            Duration::from_secs(120),
            &sources,
            "demo",
            "the CatalogSource is READY",
            catalog_is_ready,
        )
        .await;
        wait_package_manifests(&client, &ns, catalog.packages.len()).await;

        // catalogs: the image, READY, and the packages catalog-operator serves from it.
        let catalogs = olm(&client, &ns, &["catalogs"]).await;
        let row = catalogs
            .lines()
            .find(|l| l.contains(&image))
            .unwrap_or_else(|| panic!("a row for the catalog:\n{catalogs}"));
        assert!(row.contains("image") && row.contains("READY"), "{row}");
        assert!(
            row.trim_end().ends_with(&catalog.packages.len().to_string()),
            "{row}"
        );

        // packages: every package, its default channel and latest version.
        let packages = olm(&client, &ns, &["packages"]).await;
        for package in &catalog.packages {
            assert!(
                packages.contains(&package.name),
                "{} in\n{packages}",
                package.name
            );
        }
        let db = packages
            .lines()
            .find(|l| l.starts_with("demo-db "))
            .unwrap_or_else(|| panic!("demo-db in\n{packages}"));
        assert!(
            db.contains(&format!("{ns}/demo")) && db.contains("stable"),
            "{db}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&olm(&client, &ns, &["packages", "-o", "json"]).await).expect("JSON");
        let db = json
            .as_array()
            .expect("a list")
            .iter()
            .find(|p| p["name"] == "demo-db")
            .expect("demo-db");
        assert!(
            db["latest"].as_str().is_some_and(|v| !v.is_empty()),
            "the default channel's head has a version: {db}"
        );

        // show: channels, versions and what the head declares.
        let show = olm(&client, &ns, &["show", "demo-db"]).await;
        for expected in [
            "Package:          demo-db",
            &format!("Catalog:          {ns}/demo"),
            "Default channel:  stable",
            "demo-db.v1.0.0 (1.0.0)",
            "Install modes:",
            "Database.v1.demo.olm-rs.dev",
        ] {
            assert!(show.contains(expected), "{expected} in\n{show}");
        }

        // plan: catalog-operator's resolution, dependencies first, nothing created.
        let plan = olm(&client, &ns, &["plan", "demo-app"]).await;
        let db_step = plan.find("demo-db.v").expect("demo-db is in the plan");
        let app_step = plan.rfind("demo-app.v").expect("demo-app is in the plan");
        assert!(db_step < app_step, "the dependency first:\n{plan}");
        assert!(
            plan.contains(&format!("OperatorGroup {ns}: will be created, targeting {ns}")),
            "{plan}"
        );
        let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), &ns);
        let params = ListParams::default();
        assert!(
            subscriptions.list(&params).await.expect("list").items.is_empty(),
            "plan creates no Subscription"
        );
        assert!(
            plans.list(&params).await.expect("list").items.is_empty(),
            "plan creates no InstallPlan"
        );
        assert!(
            groups.list(&params).await.expect("list").items.is_empty(),
            "plan creates no OperatorGroup"
        );
        plans_are_authorized(&client, &ns).await;
        drop(operator);
    })
    .await;
}
