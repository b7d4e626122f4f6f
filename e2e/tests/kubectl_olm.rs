//! `kubectl olm` against the real control plane, with both operators and the
//! demo catalog in process, the catalog-operator serving PackageManifests and
//! plans through the API server's aggregator (all the CLI reads of catalogs):
//! every command is run as a user runs it and checked by reading the OLM
//! objects it leaves behind.
//!
//! The two scenarios run one after the other (each in its own namespace),
//! since each starts an olm-operator that watches every namespace.

use e2e::{
    inprocess::DemoStack,
    kubectl::{Run, kubectl_olm},
};
use kube::{Api, Client, api::DeleteParams};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{Approval, ClusterServiceVersion, CsvPhase, InstallPlan, Subscription},
};
use olm_testkit::{
    install_crds,
    objects::{DEMO_APP_INSTALL, STEP, wait_installed},
    wait_for_within, with_namespace,
};

/// Runs `kubectl olm <args> -n <ns>`, the namespace also standing for the global catalog namespace.
async fn olm(client: &Client, ns: &str, args: &[&str]) -> Run {
    let mut argv = args.to_vec();
    argv.extend_from_slice(&["-n", ns, "--global-catalog-namespace", ns]);
    kubectl_olm(client, &argv).await
}

async fn wait_csv(client: &Client, ns: &str, name: &str) {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    wait_for_within(
        STEP,
        &csvs,
        name,
        &format!("CSV {name} is Succeeded"),
        |c: Option<&ClusterServiceVersion>| {
            c.and_then(|c| c.status.as_ref()?.phase) == Some(CsvPhase::Succeeded)
        },
    )
    .await;
}

/// plan, install with Manual approval (creating the OperatorGroup), status,
/// approve, upgrade: demo-db from 1.0.0 to 1.1.0.
async fn manual_install_approve_upgrade(client: Client, ns: String) {
    let stack = DemoStack::start_with_package_server(&client, &ns).await;
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), &ns);
    groups
        .delete("demo", &DeleteParams::default())
        .await
        .expect("the demo OperatorGroup is deleted");
    let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);

    // plan: the resolution, nothing written.
    let plan = olm(&client, &ns, &["plan", "demo-db", "--version", "1.0.0"])
        .await
        .ok();
    assert!(plan.contains("demo-db.v1.0.0"), "{plan}");
    assert!(
        plan.contains(&format!("OperatorGroup {ns}: will be created, targeting {ns}")),
        "{plan}"
    );
    assert!(
        subs.get_opt("demo-db").await.expect("read").is_none(),
        "plan creates nothing"
    );
    assert!(
        groups.get_opt(&ns).await.expect("read").is_none(),
        "plan creates nothing"
    );

    // install with Manual approval: the OperatorGroup, the Subscription, then a plan to approve.
    let install = olm(
        &client,
        &ns,
        &["install", "demo-db", "--version", "1.0.0", "--approval", "Manual"],
    )
    .await
    .ok();
    assert!(install.contains("waits for approval"), "{install}");
    let group = groups.get(&ns).await.expect("install created an OperatorGroup");
    assert_eq!(group.spec.target_namespaces, Some(vec![ns.clone()]));
    let sub = subs
        .get("demo-db")
        .await
        .expect("install created the Subscription");
    assert_eq!(sub.spec.starting_csv.as_deref(), Some("demo-db.v1.0.0"));
    assert_eq!(sub.spec.install_plan_approval, Some(Approval::Manual));
    assert_eq!(sub.spec.catalog_source, "demo");

    // status: the pending approval.
    let status = olm(&client, &ns, &["status"]).await.ok();
    assert!(status.contains("PENDING APPROVAL"), "{status}");
    assert!(status.contains("demo-db.v1.0.0"), "{status}");

    // approve: the plan is approved and the CSV succeeds.
    let plan_name = subs
        .get("demo-db")
        .await
        .expect("the Subscription")
        .status
        .and_then(|s| s.install_plan_ref)
        .and_then(|r| r.name)
        .expect("an InstallPlan");
    let approved = olm(&client, &ns, &["approve", "demo-db"]).await.ok();
    assert!(
        approved.contains(&format!("InstallPlan {plan_name} approved")),
        "{approved}"
    );
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
    assert!(plans.get(&plan_name).await.expect("the plan").spec.approved);
    wait_csv(&client, &ns, "demo-db.v1.0.0").await;

    // upgrade --to a version that is not next is refused; then the upgrade to 1.1.0.
    let upgrade = olm(
        &client,
        &ns,
        &["upgrade", "demo-db", "--to", "1.1.0", "--timeout", "120"],
    )
    .await
    .ok();
    assert!(upgrade.contains("demo-db.v1.1.0"), "{upgrade}");
    wait_csv(&client, &ns, "demo-db.v1.1.0").await;
    // catalog-operator records the installed CSV once it sees it Succeeded, a moment later.
    wait_for_within(
        STEP,
        &subs,
        "demo-db",
        "the Subscription's installedCSV is demo-db.v1.1.0",
        |sub: Option<&Subscription>| {
            sub.and_then(|s| s.status.as_ref()?.installed_csv.as_deref()) == Some("demo-db.v1.1.0")
        },
    )
    .await;
    // status reads what the controllers wrote last: the old CSV may still be on its way out.
    let mut status = String::new();
    for _ in 0..60 {
        status = olm(&client, &ns, &["status", "-o", "json"]).await.ok();
        let report: serde_json::Value = serde_json::from_str(&status).expect("status -o json is JSON");
        if report["operators"][0]["version"] == "1.1.0" && report["operators"][0]["phase"] == "Succeeded" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    let report: serde_json::Value = serde_json::from_str(&status).expect("status -o json is JSON");
    assert_eq!(report["operators"][0]["version"], "1.1.0", "{status}");
    assert_eq!(report["operators"][0]["phase"], "Succeeded", "{status}");

    stack.stop().await;
}

/// install --dry-run -o yaml applied is what install writes; install, config,
/// status and uninstall of demo-app; errors that name the fix.
async fn dry_run_install_config_uninstall(client: Client, ns: String) {
    let stack = DemoStack::start_with_package_server(&client, &ns).await;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);

    // An unknown package names the closest ones.
    let unknown = olm(&client, &ns, &["install", "demo-ap"]).await;
    let error = unknown.error.expect("an unknown package fails").to_string();
    assert!(error.contains("did you mean demo-app"), "{error}");

    // A package whose dependency no catalog has: the resolver's explanation, nothing written.
    let broken = olm(&client, &ns, &["plan", "demo-broken"]).await;
    let error = broken.error.expect("demo-broken cannot be resolved").to_string();
    assert!(error.contains("cannot install demo-broken"), "{error}");
    assert!(error.contains("demo-missing"), "{error}");

    // The dry run's objects, applied as `kubectl apply` would, install demo-app.
    let yaml = olm(&client, &ns, &["install", "demo-app", "--dry-run", "-o", "yaml"])
        .await
        .ok();
    assert!(
        subs.get_opt("demo-app").await.expect("read").is_none(),
        "a dry run writes nothing"
    );
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).expect("a YAML stream");
    assert_eq!(
        docs.len(),
        1,
        "the namespace has its OperatorGroup: only a Subscription\n{yaml}"
    );
    assert_eq!(docs[0]["kind"], "Subscription");
    let applied: Subscription = serde_json::from_value(docs[0].clone()).expect("a Subscription");
    let applied = subs
        .patch(
            "demo-app",
            &kube::api::PatchParams::apply("kubectl"),
            &kube::api::Patch::Apply(&applied),
        )
        .await
        .expect("the dry run's Subscription applies");
    wait_installed(&client, &ns, &DEMO_APP_INSTALL, STEP).await;

    // install itself writes the very same object: nothing changes.
    let install = olm(&client, &ns, &["install", "demo-app"]).await.ok();
    assert!(install.contains("is installed"), "{install}");
    let after = subs.get("demo-app").await.expect("the Subscription");
    assert_eq!(
        after.metadata.generation, applied.metadata.generation,
        "install changed nothing"
    );
    assert_eq!(after.spec, applied.spec);

    // status: both operators, their Deployments, the catalog.
    let status = olm(&client, &ns, &["status"]).await.ok();
    for expected in ["demo-app", "demo-db", "Succeeded", "Deployment", "READY"] {
        assert!(status.contains(expected), "{expected} in\n{status}");
    }
    assert_eq!(status.matches("READY").count(), 1, "each catalog once:\n{status}");

    // config: the Subscription's spec.config.
    let config = olm(&client, &ns, &["config", "demo-app", "LOG_LEVEL=debug"])
        .await
        .ok();
    assert!(config.contains("LOG_LEVEL=debug"), "{config}");
    let sub = subs.get("demo-app").await.expect("the Subscription");
    let env = sub.spec.config.and_then(|c| c.env).unwrap_or_default();
    assert!(
        env.iter()
            .any(|v| v.name == "LOG_LEVEL" && v.value.as_deref() == Some("debug")),
        "{env:?}"
    );

    // demo-db came in as a dependency, with a Subscription of its own: a second one is refused.
    let twice = olm(&client, &ns, &["install", "demo-db"]).await;
    let error = twice
        .error
        .expect("a second Subscription to demo-db is refused")
        .to_string();
    assert!(error.contains("already subscribed"), "{error}");

    // uninstall: the Subscription and the CSV go; CRDs stay without --delete-crds.
    let uninstall = olm(&client, &ns, &["uninstall", "demo-app"]).await.ok();
    assert!(uninstall.contains("Subscription demo-app deleted"), "{uninstall}");
    assert!(subs.get_opt("demo-app").await.expect("read").is_none());
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
    wait_for_within(
        STEP,
        &csvs,
        "demo-app.v0.2.0",
        "the CSV is gone",
        |c: Option<&ClusterServiceVersion>| c.is_none(),
    )
    .await;
    let refused = olm(&client, &ns, &["uninstall", "demo-db", "--delete-crds"]).await;
    let error = refused.error.expect("--delete-crds needs --yes").to_string();
    assert!(error.contains("--yes"), "{error}");
    assert!(refused.err.contains("WARNING"), "{}", refused.err);
    let left = subs.list(&Default::default()).await.expect("list Subscriptions");
    assert!(
        left.items.iter().any(|s| s.spec.package == "demo-db"),
        "nothing deleted without --yes"
    );

    stack.stop().await;
}

#[tokio::test]
async fn kubectl_olm_drives_olm_objects() {
    with_namespace("cli-manual", |client: Client, ns: String| async move {
        install_crds(&client).await;
        manual_install_approve_upgrade(client, ns).await;
    })
    .await;
    with_namespace("cli-dryrun", |client: Client, ns: String| async move {
        install_crds(&client).await;
        dry_run_install_config_uninstall(client, ns).await;
    })
    .await;
}
