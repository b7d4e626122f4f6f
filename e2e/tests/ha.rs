//! High availability as it runs in production: two replicas of each binary,
//! leading through their Leases. Both leaders are killed outright while an
//! operator and its dependency are being installed; the standbys take over and
//! finish the install, with nothing done twice.
//!
//! A test binary of its own: olm-operator watches every namespace, so no other
//! test may run beside it.

use std::time::{Duration, Instant};

use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease};
use kube::Api;
use olm_api::v1alpha1::{ClusterServiceVersion, InstallPlan, Subscription};
use olm_testkit::{
    install_crds,
    objects::{
        DEMO_APP_INSTALL, STEP, lease_holder, names, ready_catalog_source, subscribe_to_demo_app,
        wait_for_install_plan, wait_installed, wait_subscription_at,
    },
    process::{Process, free_port},
    repo_root, wait_for, wait_for_within, with_namespace,
};

/// Waits until one of `replicas` holds `lease`; returns its index.
async fn leader_of(leases: &Api<Lease>, lease: &str, replicas: &[Process]) -> usize {
    let held = wait_for(
        leases,
        lease,
        &format!("a replica holds Lease {lease}"),
        |l: Option<&Lease>| lease_holder(l).is_some_and(|h| replicas.iter().any(|r| r.label == h)),
    )
    .await;
    let holder = lease_holder(held.as_ref()).expect("a holder");
    replicas
        .iter()
        .position(|r| r.label == holder)
        .expect("the holder is a replica")
}

#[tokio::test]
async fn the_standbys_finish_an_install_whose_leaders_were_killed() {
    with_namespace("ha", |client, ns| async move {
        install_crds(&client).await;
        let port = free_port();
        let _registry = Process::registry("ha-registry", &repo_root().join("catalogs/demo-bundles"), port);
        let mut catalog = vec![
            Process::catalog_operator("catalog-operator-a", "catalog-operator", &ns, Some(&ns), &ns),
            Process::catalog_operator("catalog-operator-b", "catalog-operator", &ns, Some(&ns), &ns),
        ];
        let mut olm = vec![
            Process::olm_operator("olm-operator-a", "olm-operator", &ns),
            Process::olm_operator("olm-operator-b", "olm-operator", &ns),
        ];
        for replica in catalog.iter().chain(&olm) {
            assert!(
                replica.wait_ready(STEP).await,
                "{} is ready, standby or not; its log ends with:\n{}",
                replica.label,
                replica.log_tail(20)
            );
        }
        let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
        let catalog_leader = leader_of(&leases, "catalog-operator", &catalog).await;
        let olm_leader = leader_of(&leases, "olm-operator", &olm).await;

        ready_catalog_source(&client, &ns, "demo", &format!("127.0.0.1:{port}")).await;
        subscribe_to_demo_app(&client, &ns, ("demo", &ns)).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);

        // The install has begun: the plan exists. Both leaders die at once.
        wait_for_install_plan(&subs, "demo-app").await;
        catalog[catalog_leader].kill();
        olm[olm_leader].kill();
        let killed = Instant::now();
        println!(
            "killed the leaders {} and {}",
            catalog[catalog_leader].label, olm[olm_leader].label
        );

        for (lease, replicas, dead) in [
            ("catalog-operator", &catalog, catalog_leader),
            ("olm-operator", &olm, olm_leader),
        ] {
            let standby = replicas[1 - dead].label.clone();
            wait_for_within(
                Duration::from_secs(30),
                &leases,
                lease,
                &format!("the standby {standby} holds Lease {lease}"),
                |l: Option<&Lease>| lease_holder(l) == Some(standby.as_str()),
            )
            .await;
            println!(
                "{standby} took over Lease {lease} {:.1?} after the kill",
                killed.elapsed()
            );
        }

        wait_installed(&client, &ns, &DEMO_APP_INSTALL, STEP).await;
        wait_subscription_at(&subs, "demo-app", "demo-app.v0.2.0").await;
        println!("the install finished {:.1?} after the kill", killed.elapsed());

        // Nothing done twice: one plan, one CSV and one Deployment per operator.
        let plans = names(&Api::<InstallPlan>::namespaced(client.clone(), &ns)).await;
        assert_eq!(plans.len(), 1, "one InstallPlan for the one install: {plans:?}");
        let csvs = names(&Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns)).await;
        assert_eq!(csvs, ["demo-app.v0.2.0", "demo-db.v1.1.0"]);
        let deployments = names(&Api::<Deployment>::namespaced(client.clone(), &ns)).await;
        assert_eq!(
            deployments,
            ["demo-app", "demo-db"],
            "one Deployment per operator"
        );
        let dead = [
            catalog[catalog_leader].label.clone(),
            olm[olm_leader].label.clone(),
        ];
        for replica in catalog.iter_mut().chain(olm.iter_mut()) {
            if !dead.contains(&replica.label) {
                assert!(replica.is_running(), "{} still runs", replica.label);
            }
        }
    })
    .await;
}
