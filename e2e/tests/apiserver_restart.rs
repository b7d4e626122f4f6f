//! Both binaries survive the loss of the API server: it is restarted in the
//! middle of an install, and afterwards the install completes, both processes
//! still run, and their watches work again (new objects are acted on, a
//! deleted Deployment is put back).
//!
//! The restart is done by the command in `OLM_RS_RESTART_APISERVER`, which
//! hack/test.sh sets for its own control plane (`hack/cluster.sh
//! restart-apiserver`); against another cluster, set it to a command that
//! restarts that cluster's API server and returns once it serves again.
//!
//! A test binary of its own: nothing else may run while the API server is
//! down, and olm-operator watches every namespace.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, ResourceExt, api::DeleteParams};
use olm_api::v1alpha1::Subscription;
use olm_testkit::{
    install_crds,
    objects::{
        DEMO_APP_INSTALL, STEP, ready_catalog_source, subscribe_to_demo_app, wait_for_install_plan,
        wait_installed, wait_subscription_at,
    },
    process::{Process, RESTART_APISERVER_ENV, apiserver_restart_command, free_port, restart_apiserver},
    repo_root, wait_for_within, with_namespace,
};

/// How long each step of the install may take after the restart.
const AFTER_RESTART: Duration = Duration::from_secs(300);

#[tokio::test]
async fn both_binaries_survive_an_api_server_restart_during_an_install() {
    let Some(restart) = apiserver_restart_command() else {
        panic!(
            "no way to restart this cluster's API server is known, so this test cannot run: set \
             {RESTART_APISERVER_ENV} to a command that restarts it and returns once it serves again \
             (hack/test.sh sets it for its own control plane; README's \"On kind\" shows one for kind)"
        );
    };
    with_namespace("restart", |client, ns| async move {
        install_crds(&client).await;
        let port = free_port();
        let _registry = Process::registry(
            "restart-registry",
            &repo_root().join("catalogs/demo-bundles"),
            port,
        );
        let mut catalog =
            Process::catalog_operator("catalog-operator", "catalog-operator", &ns, Some(&ns), &ns);
        let mut olm = Process::olm_operator("olm-operator", "olm-operator", &ns);
        for replica in [&catalog, &olm] {
            assert!(replica.wait_ready(STEP).await, "{} is ready", replica.label);
        }

        ready_catalog_source(&client, &ns, "demo", &format!("127.0.0.1:{port}")).await;
        subscribe_to_demo_app(&client, &ns, ("demo", &ns)).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        wait_for_install_plan(&subs, "demo-app").await;

        // The API server goes away in the middle of the install, and comes back.
        // A restarted API server refuses what RBAC grants until its authorizer's
        // caches fill again: refusals count only up to the restart.
        for process in [&mut catalog, &mut olm] {
            process.stop_checking_refusals();
        }
        let started = Instant::now();
        tokio::task::spawn_blocking(move || restart_apiserver(&restart))
            .await
            .expect("the restart command ran");
        println!("the API server was restarted in {:.1?}", started.elapsed());
        for process in [&mut catalog, &mut olm] {
            assert!(
                process.is_running(),
                "{} survived the restart; its log ends with:\n{}",
                process.label,
                process.log_tail(30)
            );
        }

        // The control plane's own controllers (ReplicaSets, the fake kubelets)
        // may take a while to catch up after a restart; give the install longer.
        wait_installed(&client, &ns, &DEMO_APP_INSTALL, AFTER_RESTART).await;
        wait_subscription_at(&subs, "demo-app", "demo-app.v0.2.0").await;

        // Their watches work again: catalog-operator connects a new CatalogSource,
        // olm-operator puts back a Deployment that was deleted.
        ready_catalog_source(&client, &ns, "again", &format!("127.0.0.1:{port}")).await;
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let old = deployments.get("demo-db").await.expect("Deployment demo-db");
        deployments
            .delete("demo-db", &DeleteParams::foreground())
            .await
            .expect("delete Deployment demo-db");
        let old_uid = old.uid();
        wait_for_within(
            STEP,
            &deployments,
            "demo-db",
            "olm-operator puts back Deployment demo-db",
            |d: Option<&Deployment>| d.is_some_and(|d| d.uid() != old_uid),
        )
        .await;
        for process in [&mut catalog, &mut olm] {
            assert!(process.is_running(), "{} still runs", process.label);
            let health = process.admin_get("/healthz").map(|(code, _)| code);
            assert_eq!(health, Some(200), "{} is healthy", process.label);
        }
    })
    .await;
}
