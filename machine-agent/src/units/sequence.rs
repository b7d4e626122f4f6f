//! Which hook a unit runs next: the pure state machine of a unit, as Juju runs a
//! unit's hooks.
//!
//! A unit's [`UnitRecord`] says what its hooks have done so far; what the cluster
//! wants of it is a [`Want`]. [`next_hook`] compares the two:
//!
//! - new unit, in Juju's setup order: `install` → each existing relation's
//!   `-relation-created` (run by the relation hooks) → `leader-elected` if it
//!   leads → `config-changed` → `start`. A unit is a candidate to lead only
//!   once installed, so a new unit waits for its application's election to
//!   settle before `config-changed` ([`waits_for_election`]);
//! - the unit has become its application's leader later: `leader-elected`,
//!   first of what is left;
//! - the CSV's version changed (a CSV that replaces the unit's): `upgrade`, then
//!   `config-changed` if the config differs from the one last applied;
//! - the config changed: `config-changed`;
//! - the CSV went with no successor: `stop` → `remove`, then the unit is dropped.
//!
//! A hook that fails leaves the record where it was, with the failure; the same hook
//! is retried after [`retry_delay`], or at once when what it runs with changes
//! (a config fix, a new CSV).

use std::{collections::BTreeMap, time::Duration};

use olm_api::{substrate::WorkloadState, v1alpha1::MachineHook as Hook};
use serde::{Deserialize, Serialize};

/// The config of a unit: key → value.
pub type Config = BTreeMap<String, String>;

/// What the cluster wants of a unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// Run CSV `csv` at `version` with `config`.
    Run {
        /// The CSV.
        csv: String,
        /// Its version.
        version: String,
        /// The effective config.
        config: Config,
    },
    /// The unit's CSV is gone with no successor: stop and remove it.
    Remove,
}

/// A hook that failed, and with what it ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// The hook.
    pub hook: String,
    /// What the unit reports: what the hook set, its stderr's tail, or its exit.
    pub message: String,
    /// How many times in a row it failed.
    pub attempts: u32,
    /// The CSV it ran for.
    pub csv: String,
    /// The config it ran with.
    pub config: Config,
}

/// What a unit's hooks have done: kept in the state directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnitRecord {
    /// The CSV the unit runs (it moves on upgrade).
    pub csv: String,
    /// The version `install` or `upgrade` last brought the unit to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `install` succeeded.
    #[serde(default)]
    pub installed: bool,
    /// `start` succeeded (and `stop` has not run since).
    #[serde(default)]
    pub started: bool,
    /// `stop` succeeded: only `remove` is left.
    #[serde(default)]
    pub stopped: bool,
    /// The config the last successful `config-changed` applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Config>,
    /// The workload status the hooks last set (`status-set`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<(WorkloadState, Option<String>)>,
    /// The hook that failed last, until a hook succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// The hooks last ran as root (the CSV said `privileged`): `stop` and
    /// `remove` run so too once the CSV is gone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub privileged: bool,
    /// `leader-elected` ran for the leadership the unit holds now; cleared when
    /// it stops leading, so that the next leadership runs it again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leader: bool,
}

impl UnitRecord {
    /// A unit not yet installed, for CSV `csv`.
    pub fn new(csv: &str) -> Self {
        UnitRecord {
            csv: csv.to_owned(),
            ..Default::default()
        }
    }

    /// Records that `hook` succeeded while the cluster wanted `want`.
    pub fn succeeded(&mut self, hook: Hook, want: &Want) {
        self.failure = None;
        match (hook, want) {
            (Hook::Install | Hook::Upgrade, Want::Run { csv, version, .. }) => {
                self.installed = true;
                self.csv.clone_from(csv);
                self.version = Some(version.clone());
            }
            (Hook::ConfigChanged, Want::Run { config, .. }) => self.config = Some(config.clone()),
            (Hook::Start, _) => self.started = true,
            (Hook::Stop, _) => {
                self.started = false;
                self.stopped = true;
            }
            (Hook::Remove, _) => self.installed = false,
            (Hook::LeaderElected, _) => self.leader = true,
            _ => {}
        }
    }

    /// Records that `hook` failed with `message` while the cluster wanted `want`.
    pub fn failed(&mut self, hook: Hook, want: &Want, message: String) {
        let attempts = match &self.failure {
            Some(failure) if failure.hook == hook.as_str() => failure.attempts + 1,
            _ => 1,
        };
        let (csv, config) = match want {
            Want::Run { csv, config, .. } => (csv.clone(), config.clone()),
            Want::Remove => (self.csv.clone(), self.config.clone().unwrap_or_default()),
        };
        self.failure = Some(Failure {
            hook: hook.as_str().to_owned(),
            message,
            attempts,
            csv,
            config,
        });
    }

    /// Whether the last failure was with exactly what the unit would run with now:
    /// then the retry waits for its backoff; otherwise it runs at once.
    pub fn failed_with(&self, hook: Hook, want: &Want) -> Option<&Failure> {
        let failure = self.failure.as_ref().filter(|f| f.hook == hook.as_str())?;
        match want {
            Want::Run { csv, config, .. } if *csv != failure.csv || *config != failure.config => None,
            _ => Some(failure),
        }
    }
}

/// The hook the unit runs next, or `None` when it is where the cluster wants it
/// (for [`Want::Remove`]: when it can be dropped). `leader`: the unit leads its
/// application now.
pub fn next_hook(record: &UnitRecord, want: &Want, leader: bool) -> Option<Hook> {
    match want {
        Want::Remove if !record.installed => None,
        Want::Remove if !record.stopped => Some(Hook::Stop),
        Want::Remove => Some(Hook::Remove),
        Want::Run { .. } if !record.installed => Some(Hook::Install),
        Want::Run { .. } if leader && !record.leader => Some(Hook::LeaderElected),
        Want::Run { version, .. } if record.version.as_ref() != Some(version) => Some(Hook::Upgrade),
        Want::Run { config, .. } if record.config.as_ref() != Some(config) => Some(Hook::ConfigChanged),
        Want::Run { .. } if !record.started => Some(Hook::Start),
        Want::Run { .. } => None,
    }
}

/// Whether a unit in setup (installed, not started) holds its `next` hook
/// back until its application's election settles (`electing`: it is a
/// candidate and nobody is known to lead yet), so that `leader-elected` comes
/// before `config-changed` and `start`, as in Juju's setup phase.
pub fn waits_for_election(record: &UnitRecord, next: Option<Hook>, electing: bool) -> bool {
    electing && in_setup(record, next) && next != Some(Hook::LeaderElected)
}

/// Whether a unit is in setup, before `next` (its next hook of its own
/// life): installed and not yet started, with `leader-elected`,
/// `config-changed` or `start` still to run. Relations that exist then get
/// their `-relation-created` first.
pub fn in_setup(record: &UnitRecord, next: Option<Hook>) -> bool {
    record.installed
        && !record.started
        && matches!(
            next,
            Some(Hook::LeaderElected | Hook::ConfigChanged | Hook::Start)
        )
}

/// The pause before retry `attempts` + 1 of a failed hook: 5 s doubling up to 5 min.
pub fn retry_delay(attempts: u32) -> Duration {
    let exponent = attempts.saturating_sub(1).min(6);
    Duration::from_secs(5 * 2u64.pow(exponent)).min(Duration::from_secs(300))
}

/// Why a unit cannot run its hooks for now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// It waits for something another component writes (its config, its hooks).
    Waiting(String),
    /// Its input is wrong (a hooks ConfigMap without a required hook): it waits
    /// for a fix, in `error`.
    Error(String),
}

/// The unit's state and message as reported in the Machine's status.
///
/// A failed hook shows as `error` with its message; then a [`Problem`]; otherwise
/// the workload's own status, and `active` for a started unit whose hooks never
/// set one.
pub fn unit_state(record: &UnitRecord, problem: Option<&Problem>) -> (WorkloadState, Option<String>) {
    if let Some(failure) = &record.failure {
        return (WorkloadState::Error, Some(failure.message.clone()));
    }
    match problem {
        Some(Problem::Waiting(message)) => return (WorkloadState::Waiting, Some(message.clone())),
        Some(Problem::Error(message)) => return (WorkloadState::Error, Some(message.clone())),
        None => {}
    }
    if let Some(workload) = &record.workload {
        return workload.clone();
    }
    if record.started {
        (WorkloadState::Active, None)
    } else {
        (WorkloadState::Maintenance, Some("installing".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(version: &str, port: &str) -> Want {
        Want::Run {
            csv: format!("demo.v{version}"),
            version: version.to_owned(),
            config: Config::from([("port".to_owned(), port.to_owned())]),
        }
    }

    /// Runs hooks (all succeeding) until the unit is settled; returns their order.
    fn settle(record: &mut UnitRecord, want: &Want) -> Vec<Hook> {
        let mut ran = Vec::new();
        while let Some(hook) = next_hook(record, want, false) {
            record.succeeded(hook, want);
            ran.push(hook);
            assert!(ran.len() < 10, "hooks never settle: {ran:?}");
        }
        ran
    }

    #[test]
    fn a_new_unit_installs_configures_and_starts() {
        let mut record = UnitRecord::new("demo.v1.0.0");
        let want = run("1.0.0", "8080");
        assert_eq!(
            settle(&mut record, &want),
            [Hook::Install, Hook::ConfigChanged, Hook::Start]
        );
        assert_eq!(unit_state(&record, None), (WorkloadState::Active, None));
    }

    #[test]
    fn a_new_unit_sets_up_in_jujus_order_when_it_leads() {
        let mut record = UnitRecord::new("demo.v1.0.0");
        let want = run("1.0.0", "8080");
        assert_eq!(next_hook(&record, &want, false), Some(Hook::Install));
        record.succeeded(Hook::Install, &want);
        // Installed: relations are created first, then the election is awaited.
        assert!(in_setup(&record, next_hook(&record, &want, false)));
        assert!(waits_for_election(
            &record,
            next_hook(&record, &want, false),
            true
        ));
        // It leads: leader-elected, still in setup, then config-changed and start.
        let mut ran = Vec::new();
        while let Some(hook) = next_hook(&record, &want, true) {
            assert!(!waits_for_election(&record, Some(hook), false));
            assert!(in_setup(&record, Some(hook)), "{hook:?} is part of setup");
            record.succeeded(hook, &want);
            ran.push(hook);
            assert!(ran.len() < 10, "hooks never settle: {ran:?}");
        }
        assert_eq!(ran, [Hook::LeaderElected, Hook::ConfigChanged, Hook::Start]);
        assert!(!in_setup(&record, None));
    }

    #[test]
    fn a_started_unit_never_waits_for_an_election() {
        let mut record = UnitRecord::new("demo.v1.0.0");
        let want = run("1.0.0", "8080");
        settle(&mut record, &want);
        let changed = run("1.0.0", "9090");
        let next = next_hook(&record, &changed, false);
        assert_eq!(next, Some(Hook::ConfigChanged));
        assert!(!waits_for_election(&record, next, true));
        assert!(!in_setup(&record, next));
    }

    #[test]
    fn a_config_change_runs_config_changed_only() {
        let mut record = UnitRecord::new("demo.v1.0.0");
        settle(&mut record, &run("1.0.0", "8080"));
        assert_eq!(settle(&mut record, &run("1.0.0", "9090")), [Hook::ConfigChanged]);
    }

    #[test]
    fn a_new_version_upgrades_then_configures_only_if_the_config_changed() {
        let mut record = UnitRecord::new("demo.v1.0.0");
        settle(&mut record, &run("1.0.0", "8080"));
        assert_eq!(settle(&mut record, &run("2.0.0", "8080")), [Hook::Upgrade]);
        assert_eq!(record.csv, "demo.v2.0.0");
        assert_eq!(
            settle(&mut record, &run("3.0.0", "9090")),
            [Hook::Upgrade, Hook::ConfigChanged]
        );
    }

    #[test]
    fn removal_stops_then_removes_and_a_never_installed_unit_just_goes() {
        let mut record = UnitRecord::new("demo.v1.0.0");
        settle(&mut record, &run("1.0.0", "8080"));
        assert_eq!(settle(&mut record, &Want::Remove), [Hook::Stop, Hook::Remove]);
        assert_eq!(next_hook(&UnitRecord::new("x"), &Want::Remove, false), None);
    }

    #[test]
    fn a_failed_hook_is_retried_and_a_config_fix_retries_it_at_once() {
        let mut record = UnitRecord::new("demo.v1.0.0");
        let bad = run("1.0.0", "bad");
        record.succeeded(Hook::Install, &bad);
        record.failed(Hook::ConfigChanged, &bad, "port must be a number".into());
        record.failed(Hook::ConfigChanged, &bad, "port must be a number".into());
        assert_eq!(record.failure.as_ref().unwrap().attempts, 2);
        assert_eq!(
            unit_state(&record, None),
            (WorkloadState::Error, Some("port must be a number".into()))
        );
        // Same inputs: the retry waits for its backoff.
        assert!(record.failed_with(Hook::ConfigChanged, &bad).is_some());
        // Fixed config: the same hook runs again, at once.
        let fixed = run("1.0.0", "8080");
        assert_eq!(next_hook(&record, &fixed, false), Some(Hook::ConfigChanged));
        assert!(record.failed_with(Hook::ConfigChanged, &fixed).is_none());
        assert_eq!(settle(&mut record, &fixed), [Hook::ConfigChanged, Hook::Start]);
        assert_eq!(unit_state(&record, None).0, WorkloadState::Active);
    }

    #[test]
    fn the_workload_status_and_waiting_show_as_the_unit_state() {
        let mut record = UnitRecord::new("demo.v1.0.0");
        assert_eq!(unit_state(&record, None).0, WorkloadState::Maintenance);
        assert_eq!(
            unit_state(&record, Some(&Problem::Waiting("no config yet".into()))),
            (WorkloadState::Waiting, Some("no config yet".into()))
        );
        record.workload = Some((WorkloadState::Blocked, Some("needs a license".into())));
        assert_eq!(unit_state(&record, None).0, WorkloadState::Blocked);
    }

    #[test]
    fn a_leader_runs_leader_elected_after_install_and_again_for_each_new_leadership() {
        let mut record = UnitRecord::new("demo.v1.0.0");
        let want = run("1.0.0", "8080");
        let mut ran = Vec::new();
        while let Some(hook) = next_hook(&record, &want, true) {
            record.succeeded(hook, &want);
            ran.push(hook);
        }
        assert_eq!(
            ran,
            [
                Hook::Install,
                Hook::LeaderElected,
                Hook::ConfigChanged,
                Hook::Start
            ]
        );
        assert_eq!(next_hook(&record, &want, true), None);
        // Leadership lost (the unit task clears it), then won again: once more.
        record.leader = false;
        assert_eq!(next_hook(&record, &want, false), None);
        assert_eq!(next_hook(&record, &want, true), Some(Hook::LeaderElected));
        // A unit being removed runs no leader-elected.
        assert_eq!(next_hook(&record, &Want::Remove, true), Some(Hook::Stop));
    }

    #[test]
    fn retries_back_off_up_to_five_minutes() {
        assert_eq!(retry_delay(1), Duration::from_secs(5));
        assert_eq!(retry_delay(2), Duration::from_secs(10));
        assert_eq!(retry_delay(40), Duration::from_secs(300));
    }
}
