//! The figures of the HA and delivery targets, measured on the cluster in
//! `KUBECONFIG` with the binaries as they ship (default flags, the profile this
//! bench is built with; `hack/bench.sh` builds release and brings up the local
//! control plane):
//!
//! - RSS of each binary once its caches have synced, before any work;
//! - time from a Subscription to demo-app (which needs demo-db) being created to
//!   both CSVs Succeeded, over `--installs` installs (20 by default), each in a
//!   namespace of its own: median and worst, and where that time goes: the
//!   median time until a watch saw each state of the Subscriptions, InstallPlan
//!   and CSVs ([`e2e::milestones`]);
//! - RSS of each binary with those operators installed;
//! - failover: a standby of each binary is started, then the leader is killed
//!   (SIGKILL, a crash: the standby waits for the lease to expire) or stopped
//!   (SIGTERM, a rollout or drain: the lease is released); time until the
//!   standby holds the Lease.
//!
//! A bench, not a test: it prints what it measures and asserts nothing.

use std::time::{Duration, Instant};

use e2e::milestones::{Milestones, Seen, medians};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Namespace};
use kube::{Api, Client, ResourceExt, api::DeleteParams};
use olm_api::{
    labels,
    v1::OperatorGroup,
    v1alpha1::{Approval, ClusterServiceVersion, CsvPhase, Subscription},
};
use olm_testkit::{
    NAMESPACE_LABEL, client, create_namespace, install_crds,
    objects::{STEP, csv_in, global_operator_group, lease_holder, ready_catalog_source, subscribe},
    process::{Process, free_port},
    repo_root, wait_for_within,
};

/// What a Subscription to demo-app installs.
const CSVS: [&str; 2] = ["demo-db.v1.1.0", "demo-app.v0.2.0"];

#[tokio::main]
async fn main() {
    let installs: usize = std::env::args()
        .skip_while(|a| a != "--installs")
        .nth(1)
        .map(|n| n.parse().expect("--installs takes a number"))
        .unwrap_or(20);
    let client = client().await;
    install_crds(&client).await;
    let run = format!("bench-{:x}", std::process::id());
    let home = run.clone();
    create_namespace(&client, &home, &[(NAMESPACE_LABEL, "bench")]).await;
    let mut namespaces = vec![home.clone()];

    let port = free_port();
    let _registry = Process::registry("bench-registry", &repo_root().join("catalogs/demo-bundles"), port);
    let (catalog, olm) = (catalog_operator("a", &home), olm_operator("a", &home));
    for process in [&catalog, &olm] {
        assert!(process.wait_ready(STEP).await, "{} is ready", process.label);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = (catalog.rss_kib(), olm.rss_kib());

    ready_catalog_source(&client, &home, "demo", &format!("127.0.0.1:{port}")).await;
    let (mut times, mut steps) = (Vec::new(), Vec::new());
    for i in 0..installs {
        let ns = format!("{run}-{i}");
        namespaces.push(ns.clone());
        let (took, seen) = install(&client, &ns, &home).await;
        times.push(took);
        steps.push(seen);
        eprintln!("install {}/{installs}: {took:.2?}", i + 1);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let loaded = (catalog.rss_kib(), olm.rss_kib());
    let failovers = failovers(&client, &home, catalog, olm).await;
    report(installs, times, idle, loaded, &failovers);
    report_steps(&steps);

    for ns in namespaces {
        let _ = Api::<Namespace>::all(client.clone())
            .delete(&ns, &DeleteParams::background())
            .await;
    }
}

/// Replica `replica` of catalog-operator, with `home` as the global catalog namespace.
fn catalog_operator(replica: &str, home: &str) -> Process {
    Process::catalog_operator_with(
        &format!("catalog-operator-{replica}"),
        "catalog-operator",
        home,
        &["--global-catalog-namespace", home],
    )
}

/// Replica `replica` of olm-operator.
fn olm_operator(replica: &str, home: &str) -> Process {
    Process::olm_operator_with(&format!("olm-operator-{replica}"), "olm-operator", home, &[])
}

/// Installs demo-app in a new namespace `ns` from the catalog in `home`: the time
/// from the Subscription to both CSVs Succeeded, and the milestones on the way.
async fn install(client: &Client, ns: &str, home: &str) -> (Duration, Seen) {
    create_namespace(client, ns, &[(NAMESPACE_LABEL, "bench")]).await;
    global_operator_group(&Api::<OperatorGroup>::namespaced(client.clone(), ns), "global").await;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let milestones = Milestones::watch(client, ns).await;
    let started = Instant::now();
    subscribe(
        &subs,
        "demo-app",
        ("demo", home),
        "demo-app",
        "stable",
        Approval::Automatic,
    )
    .await;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    // Earlier installs serve all namespaces, so a copy of each CSV, Succeeded,
    // may stand in this one until the InstallPlan takes its place: only the
    // installed CSV counts.
    let installed = |c: Option<&ClusterServiceVersion>| {
        c.is_some_and(|c| !c.labels().contains_key(labels::COPIED_FROM)) && csv_in(CsvPhase::Succeeded)(c)
    };
    for csv in CSVS {
        wait_for_within(
            STEP,
            &csvs,
            csv,
            &format!("{ns}: CSV {csv} is installed and Succeeded"),
            installed,
        )
        .await;
    }
    let took = started.elapsed();
    // The bench's wait and the milestones' watch see the last change about together.
    tokio::time::sleep(Duration::from_millis(200)).await;
    (took, milestones.stop(started))
}

/// Prints where the installs' time went: each milestone's median time from the
/// Subscription, and in how many installs it was seen.
fn report_steps(steps: &[Seen]) {
    println!("  where an install's time goes (median time from the Subscription to when a watch saw it):");
    for (milestone, median, count) in medians(steps) {
        println!("    {median:>10.1?}  {milestone} ({count} of {})", steps.len());
    }
}

/// How long each binary's standby took to lead, after a SIGKILL and a SIGTERM of its leader.
struct Failovers {
    catalog_kill: Duration,
    catalog_term: Duration,
    olm_kill: Duration,
    olm_term: Duration,
}

/// Starts a standby of each binary and stops the leader (catalog-operator by
/// SIGKILL, olm-operator by SIGTERM); then the other way round, with the first
/// standbys leading and new ones waiting.
async fn failovers(client: &Client, home: &str, mut catalog: Process, mut olm: Process) -> Failovers {
    let leases: Api<Lease> = Api::namespaced(client.clone(), home);
    let (mut catalog_b, mut olm_b) = (catalog_operator("b", home), olm_operator("b", home));
    let catalog_kill = failover(&leases, "catalog-operator", &mut catalog, &catalog_b, Stop::Kill).await;
    let olm_term = failover(&leases, "olm-operator", &mut olm, &olm_b, Stop::Term).await;
    // And the other way round: the first replicas come back as standbys.
    let (catalog_c, olm_c) = (catalog_operator("c", home), olm_operator("c", home));
    let catalog_term = failover(
        &leases,
        "catalog-operator",
        &mut catalog_b,
        &catalog_c,
        Stop::Term,
    )
    .await;
    let olm_kill = failover(&leases, "olm-operator", &mut olm_b, &olm_c, Stop::Kill).await;
    Failovers {
        catalog_kill,
        catalog_term,
        olm_kill,
        olm_term,
    }
}

/// Prints the figures: install times, RSS idle and loaded (catalog-operator,
/// olm-operator), and the failovers.
fn report(
    installs: usize,
    mut times: Vec<Duration>,
    idle: (Option<u64>, Option<u64>),
    loaded: (Option<u64>, Option<u64>),
    failovers: &Failovers,
) {
    times.sort();
    let median = times[times.len() / 2];
    let worst = times[times.len() - 1];
    let mib = |kib: Option<u64>| kib.map_or("?".to_owned(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    let Failovers {
        catalog_kill,
        catalog_term,
        olm_kill,
        olm_term,
    } = failovers;
    println!(
        "olm-rs bench ({} build)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    println!(
        "  Subscription -> CSVs Succeeded (demo-app + demo-db), {installs} installs: median {median:.2?}, worst {worst:.2?}"
    );
    println!(
        "  RSS idle:                     catalog-operator {}, olm-operator {}",
        mib(idle.0),
        mib(idle.1)
    );
    println!(
        "  RSS after {installs} operators:       catalog-operator {}, olm-operator {}",
        mib(loaded.0),
        mib(loaded.1)
    );
    println!(
        "  failover after SIGKILL:       catalog-operator {catalog_kill:.1?}, olm-operator {olm_kill:.1?}"
    );
    println!(
        "  failover after SIGTERM:       catalog-operator {catalog_term:.1?}, olm-operator {olm_term:.1?}"
    );
}

/// How the leader is stopped.
#[derive(Clone, Copy)]
enum Stop {
    /// SIGKILL: a crash; the lease must expire.
    Kill,
    /// SIGTERM: a graceful stop; the lease is released.
    Term,
}

/// Waits until `standby` is ready and `leader` holds `lease`, stops `leader`,
/// and returns how long until `standby` holds the lease.
async fn failover(
    leases: &Api<Lease>,
    lease: &str,
    leader: &mut Process,
    standby: &Process,
    stop: Stop,
) -> Duration {
    assert!(standby.wait_ready(STEP).await, "{} is ready", standby.label);
    let holds = |who: &str| {
        let who = who.to_owned();
        move |l: Option<&Lease>| lease_holder(l) == Some(who.as_str())
    };
    wait_for_within(
        STEP,
        leases,
        lease,
        &format!("{} leads", leader.label),
        holds(&leader.label),
    )
    .await;
    let stopped = Instant::now();
    match stop {
        Stop::Kill => leader.kill(),
        Stop::Term => {
            leader.terminate(Duration::from_secs(30));
        }
    }
    wait_for_within(
        STEP,
        leases,
        lease,
        &format!("{} leads", standby.label),
        holds(&standby.label),
    )
    .await;
    stopped.elapsed()
}
