//! The chaos campaign (`make chaos`, `make chaos-short`): on the cluster in `KUBECONFIG`, two
//! replicas of each operator (leader-elected, as processes), a registry serving
//! `catalogs/demo-bundles`, and a steady stream of work across several namespaces (installs,
//! upgrades from a starting CSV, manual approvals, uninstalls), its requests counted by the API
//! server's flow control (`e2e::chaos::pressure`). Each round does some work, then
//! injects one fault at a random moment from a seeded random source, then reads the cluster
//! until every invariant holds (`e2e::chaos::invariants`) or a deadline passes.
//!
//! Prints the seed (`--seed N` replays a run), each round, the faults by kind, the invariant
//! violations, and the time to converge after each fault (p50, p99, max). Exits non-zero when
//! any invariant was still violated at a round's deadline.
//!
//! `--faults N` (default 100), `--namespaces N` (default 4), `--seed N` (default: the clock),
//! `--only KIND` (faults of one kind only, e.g. `apiserver-429s` for a pressure run).

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use e2e::chaos::{
    faults,
    figures::{Tally, summary},
    fleet::Fleet,
    invariants::{self, Expect},
    pressure::{self, Level},
    rng::Rng,
    work,
};
use kube::Client;
use olm_testkit::{NAMESPACE_LABEL, client, create_namespace, install_crds, objects::ready_catalog_source};

/// How long the cluster may take to converge after a fault before its violations count.
const CONVERGE_WITHIN: Duration = Duration::from_secs(180);

/// The campaign's settings, from the command line.
struct Args {
    seed: u64,
    faults: usize,
    namespaces: usize,
    /// Only faults of this kind (`--only KIND`), e.g. a pressure run.
    only: Option<String>,
}

fn args() -> Args {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.parse::<u64>()
                    .unwrap_or_else(|e| panic!("{flag} takes a number: {e}"))
            })
    };
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    Args {
        seed: value("--seed").unwrap_or(clock),
        faults: value("--faults").unwrap_or(100) as usize,
        namespaces: value("--namespaces").unwrap_or(4) as usize,
        only: args
            .iter()
            .position(|a| a == "--only")
            .and_then(|i| args.get(i + 1))
            .cloned(),
    }
}

#[tokio::main]
async fn main() {
    let args = args();
    println!(
        "olm-rs chaos: seed {} (replay with --seed {}), {} faults, {} namespaces",
        args.seed, args.seed, args.faults, args.namespaces
    );
    faults::print_not_implemented();
    let client = client().await;
    install_crds(&client).await;
    // The operators' requests go through a priority level of the campaign's (the pressure
    // fault squeezes it), whose counters give their request rate.
    pressure::set(&client, Level::Normal).await;
    let run = format!("chaos-{:x}", std::process::id());
    create_namespace(&client, &run, &[(NAMESPACE_LABEL, "chaos")]).await;
    let mut fleet = Fleet::start(&run).await;
    ready_catalog_source(&client, &run, "demo", &fleet.registry_address()).await;
    let mut work = work::Work::new(&client, &run, args.namespaces).await;
    let mut rng = Rng::new(args.seed);
    let mut tally = Tally::default();
    fleet.pressure.read(&client, Level::Normal).await;
    for round in 1..=args.faults {
        campaign_round(
            &client,
            &mut fleet,
            &mut work,
            &mut rng,
            &mut tally,
            (round, args.faults, args.only.as_deref()),
        )
        .await;
    }
    fleet.pressure.read(&client, Level::Normal).await;
    let rates = fleet.pressure.summary();
    let refusals = fleet.stop();
    pressure::remove(&client).await;
    report(&args, &tally, refusals, &rates);
    work.delete(&client, &run).await;
    if !tally.violations.is_empty() {
        std::process::exit(1);
    }
}

/// One round: work in one or two namespaces, a fault at a random moment, then the wait for the
/// invariants to hold.
async fn campaign_round(
    client: &Client,
    fleet: &mut Fleet,
    work: &mut work::Work,
    rng: &mut Rng,
    tally: &mut Tally,
    (round, rounds, only): (usize, usize, Option<&str>),
) {
    let mut done = Vec::new();
    for _ in 0..=rng.below(2) {
        done.push(work.step(client, rng).await);
    }
    tokio::time::sleep(Duration::from_millis(rng.below(3000))).await;
    let fault = faults::pick_only(rng, fleet, only);
    let injected = Instant::now();
    let what = faults::inject(client, fleet, fault, rng).await;
    let (took, violations) = converge(client, &work.expected, injected).await;
    println!(
        "round {round}/{rounds}: work [{}]; fault {what}; converged {}",
        done.join("; "),
        if violations.is_empty() {
            format!("in {took:.1?}")
        } else {
            format!("NOT within {CONVERGE_WITHIN:?}")
        }
    );
    for violation in &violations {
        println!("  VIOLATION: {violation}");
        tally.violations.push((round, violation.clone()));
    }
    if violations.is_empty() {
        tally.fault(fault.kind(), took);
    } else {
        tally.fault(fault.kind(), CONVERGE_WITHIN);
    }
}

/// Reads the cluster until no invariant is violated, or [`CONVERGE_WITHIN`] passes: the time
/// from `injected` (the fault) until the invariants held, and the violations left.
async fn converge(
    client: &Client,
    expected: &BTreeMap<String, Expect>,
    injected: Instant,
) -> (Duration, Vec<String>) {
    let started = Instant::now();
    let mut violations = Vec::new();
    // Converged means: twice in a row, a second apart (a state passed through is not one held).
    let mut held_since: Option<Duration> = None;
    while started.elapsed() < CONVERGE_WITHIN {
        violations = match work::snapshot(client, expected.keys()).await {
            Ok(snapshot) => invariants::check(&snapshot, expected),
            Err(e) => vec![format!("cannot read the cluster: {e}")],
        };
        match (violations.is_empty(), held_since) {
            (true, Some(since)) if injected.elapsed() - since >= Duration::from_secs(1) => {
                return (since, Vec::new());
            }
            (true, None) => held_since = Some(injected.elapsed()),
            (false, _) => held_since = None,
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    (injected.elapsed(), violations)
}

/// Prints the campaign's figures.
fn report(args: &Args, tally: &Tally, refusals: usize, rates: &str) {
    println!("== olm-rs chaos: seed {}", args.seed);
    println!("  rounds: {}, faults injected: {}", args.faults, tally.faults());
    for (kind, times) in &tally.converged {
        println!(
            "  {kind:<18} {:>4} faults, converged {}",
            times.len(),
            summary(times)
        );
    }
    println!("  all faults: time to converge {}", summary(&tally.all_times()));
    println!("  invariant violations: {}", tally.violations.len());
    for (round, violation) in &tally.violations {
        println!("    round {round}: {violation}");
    }
    println!("  requests the API server refused the operators (log lines): {refusals}");
    println!("  {rates}");
}
