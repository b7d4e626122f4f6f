//! The faults of the chaos campaign, and the ones it does not inject yet (printed at its start).

use std::{process::Command, time::Duration};

use kube::Client;
use olm_testkit::process::{apiserver_restart_command, restart_apiserver};

use super::{
    fleet::{Fleet, MAX_DOWN},
    pressure::{self, Level},
    rng::Rng,
};

/// One fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL of replica N (a crash), started again after a moment.
    Kill(usize),
    /// SIGTERM of replica N (a rollout or drain), started again after a moment.
    Term(usize),
    /// The API server restarts (`OLM_RS_RESTART_APISERVER`).
    ApiServerRestart,
    /// The registry stalls (SIGSTOP) for a few seconds, then goes on (SIGCONT).
    RegistryStall,
    /// The registry dies and comes back on its port a few seconds later: the catalog is
    /// unhealthy meanwhile.
    CatalogDown,
    /// For several seconds the API server squeezes the operators' requests to a few seats, or
    /// starves them of any share, and answers what does not fit with 429 ([`pressure`]).
    Pressure(Level),
}

impl Fault {
    /// The kind, as the figures name it.
    pub fn kind(self) -> &'static str {
        match self {
            Fault::Kill(_) => "sigkill-replica",
            Fault::Term(_) => "sigterm-replica",
            Fault::ApiServerRestart => "apiserver-restart",
            Fault::RegistryStall => "registry-stall",
            Fault::CatalogDown => "catalog-down",
            Fault::Pressure(Level::Starved) => "apiserver-starved",
            Fault::Pressure(_) => "apiserver-429s",
        }
    }
}

/// The faults of the campaign that are not injected, and why.
pub const NOT_INJECTED: [&str; 4] = [
    "machine agent kills: the campaign runs no machine agents yet",
    "node NotReady: the fake nodes' status is not driven by the campaign yet",
    "watches closed every few seconds, a slow API server: not part of the campaign yet",
    "catalog updates (a new bundle version served mid-run): not part of the campaign yet",
];

/// Prints what the campaign does not inject.
pub fn print_not_implemented() {
    for fault in NOT_INJECTED {
        println!("  not injected: {fault}");
    }
    if apiserver_restart_command().is_none() {
        println!("  not injected: API server restarts: OLM_RS_RESTART_APISERVER is not set");
    }
}

/// A fault drawn from `rng`: replicas are hurt most often (5 in 12), the API server and the
/// registry otherwise.
pub fn pick(rng: &mut Rng, fleet: &Fleet) -> Fault {
    let replica = rng.below(fleet.replicas.len() as u64) as usize;
    let api = apiserver_restart_command().is_some();
    match rng.below(12) {
        0..=2 => Fault::Kill(replica),
        3..=4 => Fault::Term(replica),
        5..=6 if api => Fault::ApiServerRestart,
        5..=7 => Fault::RegistryStall,
        8 => Fault::Pressure(Level::Squeezed),
        9 => Fault::Pressure(Level::Starved),
        _ => Fault::CatalogDown,
    }
}

/// One fault of each kind (the replica faults of replica 0).
pub const EACH_KIND: [Fault; 7] = [
    Fault::Kill(0),
    Fault::Term(0),
    Fault::ApiServerRestart,
    Fault::RegistryStall,
    Fault::CatalogDown,
    Fault::Pressure(Level::Squeezed),
    Fault::Pressure(Level::Starved),
];

/// A fault drawn from `rng` as [`pick`] draws it, of kind `only` when given (draws are
/// repeated until one is of that kind). Panics, naming the kinds, when `only` is never drawn.
pub fn pick_only(rng: &mut Rng, fleet: &Fleet, only: Option<&str>) -> Fault {
    for _ in 0..1000 {
        let fault = pick(rng, fleet);
        if only.is_none_or(|kind| kind == fault.kind()) {
            return fault;
        }
    }
    panic!(
        "--only {}: that fault is never drawn here (the kinds: {}; apiserver-restart needs OLM_RS_RESTART_APISERVER)",
        only.unwrap_or_default(),
        EACH_KIND.map(Fault::kind).join(", ")
    )
}

/// Injects `fault` and undoes it (a replica started again, the registry back); returns what was
/// done, for the round's line.
pub async fn inject(client: &Client, fleet: &mut Fleet, fault: Fault, rng: &mut Rng) -> String {
    let down = Duration::from_millis(rng.below(MAX_DOWN.as_millis() as u64));
    match fault {
        Fault::Kill(index) | Fault::Term(index) => {
            let leader = if fleet.leads(client, index).await {
                " (leader)"
            } else {
                ""
            };
            let who = fleet.replicas[index].identity();
            if let Some(process) = fleet.process(index) {
                if matches!(fault, Fault::Kill(_)) {
                    process.kill();
                } else {
                    process.terminate(Duration::from_secs(10));
                }
            }
            tokio::time::sleep(down).await;
            fleet.restart(index).await;
            format!("{} {who}{leader}, down {down:.1?}", fault.kind())
        }
        Fault::ApiServerRestart => {
            let command = apiserver_restart_command().unwrap_or_default();
            fleet.count_refusals();
            tokio::task::spawn_blocking(move || restart_apiserver(&command))
                .await
                .unwrap_or_else(|e| panic!("the API server restart: {e}"));
            fleet.count_refusals();
            fault.kind().to_owned()
        }
        Fault::RegistryStall => {
            let down = down * 3;
            if let Some(pid) = fleet.registry_pid() {
                signal("-STOP", pid);
                tokio::time::sleep(down).await;
                signal("-CONT", pid);
            }
            format!("{} for {down:.1?}", fault.kind())
        }
        Fault::Pressure(level) => {
            let hold = Duration::from_secs(5) + down * 3;
            fleet.pressure.read(client, Level::Normal).await;
            pressure::set(client, level).await;
            tokio::time::sleep(hold).await;
            fleet.pressure.read(client, level).await;
            pressure::set(client, Level::Normal).await;
            format!("{} for {hold:.1?}", fault.kind())
        }
        Fault::CatalogDown => {
            let down = down * 3;
            fleet.kill_registry();
            tokio::time::sleep(down).await;
            fleet.start_registry();
            format!("{}, registry gone for {down:.1?}", fault.kind())
        }
    }
}

fn signal(signal: &str, pid: u32) {
    let _ = Command::new("kill").args([signal, &pid.to_string()]).status();
}
