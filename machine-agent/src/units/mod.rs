//! Units: one operator's software on this machine, driven by its hooks.
//!
//! - [`plan`]: which unit runs which CSV (pure).
//! - [`sequence`]: which hook a unit runs next (pure).
//! - [`hooks`]: running one hook (environment, sandbox, timeout).
//! - [`privilege`]: who a hook runs as, and the files it may use.
//! - [`reach`]: whether the hook user can reach the state directory (checked at start).
//! - [`relation_hooks`]: running a unit's relation hooks (see [`crate::relations`]).
//! - [`turns`]: one hook or action at a time on a unit.
//! - [`run_unit`]: the task of one unit, one hook at a time.

pub mod hooks;
pub mod plan;
pub mod privilege;
pub mod reach;
pub mod relation_hooks;
pub mod sequence;
pub mod turns;

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use olm_api::{
    substrate::{UnitStatus, WorkloadState},
    v1alpha1::MachineHook as Hook,
};
use olm_runtime::Shutdown;
use tokio::sync::watch;

use self::{
    hooks::{HookContext, HookError, run_hook_as},
    sequence::{Config, Problem, UnitRecord, Want, next_hook, retry_delay, unit_state, waits_for_election},
};
use crate::{
    hook_tool::Runs,
    leadership::Leadership,
    relations::{self, Relations},
    state::{self, StateDir},
};

/// What the cluster gives a unit: what to run, its hooks, and the settings of its CSV.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitInput {
    /// What to run (or to remove the unit).
    pub want: Want,
    /// The hook scripts by name, when read (kept in the state directory, so that a
    /// unit whose hooks ConfigMap is gone can still be stopped and removed).
    pub hooks: Option<BTreeMap<String, String>>,
    /// Why the unit cannot run its hooks for now.
    pub problem: Option<Problem>,
    /// How long one hook may run.
    pub timeout: Duration,
    /// How often `update-status` runs.
    pub update_status: Duration,
    /// The hooks need root (the CSV's `privileged`); for a unit being removed,
    /// its record says how its hooks last ran.
    pub privileged: bool,
    /// The application the unit is of ([`olm_api::model::application_of`]).
    pub application: Option<String>,
}

/// What every unit of this agent shares.
pub struct Units {
    /// The state directory.
    pub state: StateDir,
    /// This machine.
    pub machine: String,
    /// Its pool.
    pub pool: String,
    /// Its namespace.
    pub namespace: String,
    /// The hook tool's runs.
    pub runs: Runs,
    /// The agent's user and the user of unprivileged hooks.
    pub users: privilege::Users,
    /// Every unit's status, by unit name, for the Machine's status.
    pub statuses: watch::Sender<BTreeMap<String, UnitStatus>>,
    /// Which applications this machine leads, and which units may.
    pub leadership: Leadership,
    /// The relations of the units.
    pub relations: Relations,
    /// Each unit's turn: its hooks and actions run one at a time.
    pub turns: turns::Turns,
}

/// Runs unit `name` until it is removed or the agent shuts down: one hook at a
/// time, in the order [`next_hook`] gives, retrying a failed hook with backoff.
pub async fn run_unit(
    name: String,
    units: Arc<Units>,
    mut input: watch::Receiver<UnitInput>,
    shutdown: Shutdown,
) {
    let mut record = read_record(&units.state, &name);
    let mut leading = units.leadership.leading.subscribe();
    let mut decided = units.leadership.decided.subscribe();
    let mut related = units.relations.subscribe();
    let mut retry_at: Option<Instant> = None;
    let mut status_due = Instant::now();
    loop {
        let current = input.borrow_and_update().clone();
        leading.mark_unchanged();
        decided.mark_unchanged();
        related.mark_unchanged();
        if let Some(hooks) = &current.hooks {
            save_hooks(&units.state, &name, hooks);
        }
        let (leader, electing) = lead(&units, &name, &mut record, &current);
        publish(&units, &name, &record, &current, leader);
        let next = match (&current.problem, &current.want) {
            (Some(_), Want::Run { .. }) => None,
            _ => next_hook(&record, &current.want, leader),
        };
        // A settled unit runs its relations' hooks before any periodic one.
        let relation = relation_hooks::settled_step(&units, &name, &mut record, &current, next).await;
        if relation == relation_hooks::Step::Ran {
            save_record(&units.state, &name, &record);
            continue;
        }
        let wait_for = match next {
            _ if relation == relation_hooks::Step::Waiting => None,
            // Setup: leader-elected (or not) before config-changed and start.
            _ if waits_for_election(&record, next, electing) => None,
            None if current.want == Want::Remove => {
                if let Err(error) = units.state.remove_unit(&name) {
                    tracing::warn!(unit = name, %error, "cannot forget the removed unit");
                }
                units.statuses.send_if_modified(|all| all.remove(&name).is_some());
                units.leadership.set_candidate(&name, None);
                tracing::info!(unit = name, "unit removed");
                return;
            }
            None if current.problem.is_some() => None,
            None => {
                // Settled: update-status is due periodically (or, after it failed, on retry).
                let due = match &record.failure {
                    Some(failure) if failure.hook == Hook::UpdateStatus.as_str() => {
                        *retry_at.get_or_insert_with(|| Instant::now() + retry_delay(failure.attempts))
                    }
                    _ => status_due,
                };
                Some((Hook::UpdateStatus, due))
            }
            Some(hook) => match record.failed_with(hook, &current.want) {
                Some(failure) => Some((
                    hook,
                    *retry_at.get_or_insert_with(|| Instant::now() + retry_delay(failure.attempts)),
                )),
                None => Some((hook, Instant::now())),
            },
        };
        let watches = Watches {
            input: &mut input,
            leading: &mut leading,
            decided: &mut decided,
            relations: &mut related,
        };
        let hook = match wait(watches, &shutdown, wait_for).await {
            Woke::Stop => return,
            Woke::Changed => continue,
            Woke::Due(hook) => hook,
        };
        retry_at = None;
        run_one(&units, &name, &mut record, hook, &current).await;
        if hook == Hook::UpdateStatus || hook == Hook::Start {
            status_due = Instant::now() + current.update_status;
        }
        save_record(&units.state, &name, &record);
    }
}

fn save_record(state: &StateDir, name: &str, record: &UnitRecord) {
    if let Err(error) = state::write_json(&state.unit_file(name), record) {
        tracing::error!(unit = name, %error, "cannot save the unit's record");
    }
}

/// The record of unit `name` kept in `state`; a new one when there is none,
/// or when it cannot be read (said in the log).
fn read_record(state: &StateDir, name: &str) -> UnitRecord {
    match state::read_json::<UnitRecord>(&state.unit_file(name)) {
        Ok(Some(record)) => record,
        Ok(None) => UnitRecord::new(name),
        Err(error) => {
            tracing::error!(unit = name, %error, "cannot read the unit's record: starting it afresh");
            UnitRecord::new(name)
        }
    }
}

/// Whether unit `name` leads its application now, and whether it waits for
/// its application's election (a candidate whose machine does not yet know
/// who leads). A unit installed and not being removed is a candidate; a unit
/// that stopped leading forgets its `leader-elected`, so that the next
/// leadership runs it again.
fn lead(units: &Units, name: &str, record: &mut UnitRecord, input: &UnitInput) -> (bool, bool) {
    let application = input.application.as_deref();
    let candidate = record.installed && matches!(input.want, Want::Run { .. });
    units
        .leadership
        .set_candidate(name, application.filter(|_| candidate));
    let leader = candidate && application.is_some_and(|a| units.leadership.leads(a));
    let electing = candidate && !application.is_some_and(|a| units.leadership.decided(a));
    if record.leader && !leader {
        tracing::info!(unit = name, "the unit no longer leads its application");
        record.leader = false;
        save_record(&units.state, name, record);
    }
    (leader, electing)
}

/// Why a unit task woke up.
enum Woke {
    /// Its input or its leadership changed: look again.
    Changed,
    /// This hook is due.
    Due(Hook),
    /// The agent shuts down, or the unit's input is gone.
    Stop,
}

/// What a unit task watches between hooks.
struct Watches<'a> {
    input: &'a mut watch::Receiver<UnitInput>,
    leading: &'a mut watch::Receiver<crate::leadership::Leading>,
    decided: &'a mut watch::Receiver<std::collections::BTreeSet<String>>,
    relations: &'a mut watch::Receiver<u64>,
}

/// Waits for `due` (a hook and when it is due; `None`: nothing is), a change
/// of the unit's input, leadership or relations, or shutdown.
async fn wait(watches: Watches<'_>, shutdown: &Shutdown, due: Option<(Hook, Instant)>) -> Woke {
    let Watches {
        input,
        leading,
        decided,
        relations,
    } = watches;
    let (hook, at) = match due {
        Some((hook, at)) if at <= Instant::now() => return Woke::Due(hook),
        Some((hook, at)) => (Some(hook), at),
        None => (None, Instant::now() + Duration::from_secs(24 * 3600)),
    };
    tokio::select! {
        changed = input.changed() => if changed.is_err() { Woke::Stop } else { Woke::Changed },
        changed = leading.changed() => if changed.is_err() { Woke::Stop } else { Woke::Changed },
        changed = decided.changed() => if changed.is_err() { Woke::Stop } else { Woke::Changed },
        changed = relations.changed() => if changed.is_err() { Woke::Stop } else { Woke::Changed },
        () = shutdown.signaled() => Woke::Stop,
        () = tokio::time::sleep_until(at.into()) => hook.map_or(Woke::Changed, Woke::Due),
    }
}

/// Runs `hook` of unit `name` and records how it went.
async fn run_one(units: &Units, name: &str, record: &mut UnitRecord, hook: Hook, input: &UnitInput) {
    let _turn = units.turns.take(name).await;
    let script = units.state.hooks_dir(name).join(hook.as_str());
    if !script.is_file() {
        // Only install and start are required (checked before); others are no-ops.
        tracing::debug!(unit = name, hook = hook.as_str(), "no such hook: nothing to run");
        record.succeeded(hook, &input.want);
        return;
    }
    let subject = HookSubject::of(record, input);
    let (ids, prepared) = match prepare_run(units, name, hook, &subject) {
        Ok(prepared) => prepared,
        Err(message) => {
            record.failed(hook, &input.want, message);
            return;
        }
    };
    let run = units.runs.start(name, input.application.as_deref());
    let context = HookContext {
        machine: units.machine.clone(),
        pool: units.pool.clone(),
        namespace: units.namespace.clone(),
        csv: subject.csv,
        version: subject.version,
        hook: hook.as_str().to_owned(),
        config_file: prepared.config_file.clone(),
        socket: units.state.socket_path(),
        run_id: run.id.clone(),
    };
    let env = hooks::hook_env(&context, &subject.config);
    tracing::info!(
        unit = name,
        csv = context.csv,
        hook = hook.as_str(),
        uid = ids.uid,
        "running hook"
    );
    let user = (ids != units.users.agent).then_some(ids);
    let result = run_hook_as(
        &prepared.script,
        &prepared.sandbox,
        &env,
        hook,
        input.timeout,
        user,
    )
    .await;
    let set = run.workload.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(run);
    record_run(record, name, hook, input, subject.privileged, result, set);
}

/// What a hook runs for: the CSV, version and config it is given, and whether it
/// runs as root. A unit being removed runs its hooks as its record says they last ran.
#[derive(Debug, PartialEq, Eq)]
struct HookSubject {
    csv: String,
    version: String,
    config: Config,
    privileged: bool,
}

impl HookSubject {
    fn of(record: &UnitRecord, input: &UnitInput) -> Self {
        match &input.want {
            Want::Run { csv, version, config } => HookSubject {
                csv: csv.clone(),
                version: version.clone(),
                config: config.clone(),
                privileged: input.privileged,
            },
            Want::Remove => HookSubject {
                csv: record.csv.clone(),
                version: record.version.clone().unwrap_or_default(),
                config: record.config.clone().unwrap_or_default(),
                privileged: record.privileged,
            },
        }
    }
}

/// Who the hook runs as and its prepared files, or why it cannot run.
fn prepare_run(
    units: &Units,
    name: &str,
    hook: Hook,
    subject: &HookSubject,
) -> Result<(privilege::Ids, privilege::Prepared), String> {
    let ids = privilege::hook_ids(&units.users, name, subject.privileged)
        .map_err(|error| format!("{hook} hook cannot run: {error}"))?;
    let prepared = privilege::prepare(
        &units.state,
        &units.users,
        name,
        hook.as_str(),
        &subject.config,
        ids,
    )
    .map_err(|error| format!("{hook} hook could not start: {error}"))?;
    Ok((ids, prepared))
}

/// Records how a run of `hook` went: what it set of the workload, and its success
/// or failure.
fn record_run(
    record: &mut UnitRecord,
    name: &str,
    hook: Hook,
    input: &UnitInput,
    privileged: bool,
    result: Result<(), HookError>,
    set: Option<SetWorkload>,
) {
    if matches!(input.want, Want::Run { .. }) {
        record.privileged = privileged;
    }
    if let Some(set) = &set {
        record.workload = Some(set.clone());
    }
    match result {
        Ok(()) => {
            tracing::info!(unit = name, hook = hook.as_str(), "hook succeeded");
            record.succeeded(hook, &input.want);
        }
        Err(error) => {
            let message = failure_message(hook, set.as_ref(), &error);
            tracing::warn!(unit = name, hook = hook.as_str(), message, "hook failed");
            record.failed(hook, &input.want, message);
        }
    }
}

/// What a workload status set by a hook holds: its state and message.
type SetWorkload = (WorkloadState, Option<String>);

/// Why a hook failed: what the hook said of itself, if it did, else how it ended.
fn failure_message(hook: Hook, set: Option<&SetWorkload>, error: &HookError) -> String {
    match set {
        Some((_, Some(message))) if !message.is_empty() => format!("{hook} hook failed: {message}"),
        _ => error.to_string(),
    }
}

fn publish(units: &Units, name: &str, record: &UnitRecord, input: &UnitInput, leader: bool) {
    let (state, message) = unit_state(record, input.problem.as_ref());
    let version = match (&record.version, &input.want) {
        (Some(version), _) => version.clone(),
        (None, Want::Run { version, .. }) => version.clone(),
        (None, Want::Remove) => String::new(),
    };
    let status = UnitStatus {
        csv: record.csv.clone(),
        version,
        state,
        message,
        application: input.application.clone(),
        leader,
    };
    units.statuses.send_if_modified(|all| {
        if all.get(name) == Some(&status) {
            return false;
        }
        all.insert(name.to_owned(), status);
        true
    });
}

/// Keeps the unit's hook scripts in the state directory, executable, and drops
/// hooks no longer shipped.
fn save_hooks(state: &StateDir, unit: &str, hooks: &BTreeMap<String, String>) {
    relation_hooks::save_hooks(state, unit, hooks);
    let dir = state.hooks_dir(unit);
    for hook in Hook::ALL {
        let path: PathBuf = dir.join(hook.as_str());
        let result = match hooks.get(hook.as_str()) {
            Some(script) => {
                if std::fs::read_to_string(&path).ok().as_deref() == Some(script.as_str()) {
                    continue;
                }
                state::write_file(&path, script.as_bytes()).and_then(|()| make_executable(&path))
            }
            None => match std::fs::remove_file(&path) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(state::StateError::Io {
                    action: "remove",
                    path: path.clone(),
                    source: error,
                }),
                _ => Ok(()),
            },
        };
        if let Err(error) = result {
            tracing::error!(unit, hook = hook.as_str(), %error, "cannot save the hook script");
        }
    }
}

fn make_executable(path: &std::path::Path) -> Result<(), state::StateError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(|source| {
        state::StateError::Io {
            action: "make executable",
            path: path.to_owned(),
            source,
        }
    })
}

/// The hooks of a hooks ConfigMap, or the problem with it: a missing required hook
/// names the ConfigMap and the hook.
pub fn read_hooks(
    config_map: &str,
    data: Option<&BTreeMap<String, String>>,
) -> Result<BTreeMap<String, String>, Problem> {
    let Some(data) = data else {
        return Err(Problem::Waiting(format!(
            "waiting for hooks ConfigMap {config_map}"
        )));
    };
    for hook in Hook::REQUIRED {
        if !data.contains_key(hook.as_str()) {
            return Err(Problem::Error(format!(
                "hooks ConfigMap {config_map} has no `{hook}` hook (install and start are required)"
            )));
        }
    }
    Ok(data
        .iter()
        .filter(|(name, _)| {
            Hook::ALL.iter().any(|h| h.as_str() == name.as_str())
                || relations::sequence::is_relation_hook(name)
        })
        .map(|(name, script)| (name.clone(), script.clone()))
        .collect())
}

/// The unit's config from its effective-config ConfigMap, or what it waits for.
pub fn read_config(config_map: &str, data: Option<&BTreeMap<String, String>>) -> Result<Config, Problem> {
    data.cloned().ok_or_else(|| {
        Problem::Waiting(format!(
            "waiting for the effective config, ConfigMap {config_map} (written by olm-operator)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hooks_config_map_without_a_required_hook_is_an_error_naming_both() {
        let data = BTreeMap::from([("install".to_owned(), "#!/bin/sh".to_owned())]);
        assert_eq!(
            read_hooks("demo-hooks", Some(&data)),
            Err(Problem::Error(
                "hooks ConfigMap demo-hooks has no `start` hook (install and start are required)".into()
            ))
        );
        assert!(matches!(read_hooks("demo-hooks", None), Err(Problem::Waiting(_))));
        let mut data = data;
        data.insert("start".into(), "#!/bin/sh".into());
        data.insert("README".into(), "not a hook".into());
        assert_eq!(read_hooks("demo-hooks", Some(&data)).unwrap().len(), 2);
    }

    fn input(want: Want, privileged: bool) -> UnitInput {
        UnitInput {
            want,
            hooks: None,
            problem: None,
            timeout: Duration::from_secs(1),
            update_status: Duration::from_secs(1),
            privileged,
            application: None,
        }
    }

    #[test]
    fn a_unit_being_removed_runs_its_hooks_as_they_last_ran() {
        let mut record = UnitRecord::new("demo");
        record.csv = "demo.v1".into();
        record.version = Some("1.0.0".into());
        record.privileged = true;
        let run = Want::Run {
            csv: "demo.v2".into(),
            version: "2.0.0".into(),
            config: Config::from([("port".into(), "80".into())]),
        };
        let subject = HookSubject::of(&record, &input(run, false));
        assert_eq!(
            (subject.csv.as_str(), subject.version.as_str()),
            ("demo.v2", "2.0.0")
        );
        assert!(!subject.privileged);
        let subject = HookSubject::of(&record, &input(Want::Remove, false));
        assert_eq!(
            (subject.csv.as_str(), subject.version.as_str()),
            ("demo.v1", "1.0.0")
        );
        assert!(subject.privileged);
        assert!(subject.config.is_empty());
    }

    #[test]
    fn a_failed_hook_is_reported_by_what_it_said_else_by_how_it_ended() {
        let error = HookError::Spawn {
            hook: Hook::Start.to_string(),
            reason: "no such file".into(),
        };
        let said = (WorkloadState::Blocked, Some("needs a license".into()));
        assert_eq!(
            failure_message(Hook::Start, Some(&said), &error),
            "start hook failed: needs a license"
        );
        let silent = (WorkloadState::Blocked, Some(String::new()));
        assert_eq!(
            failure_message(Hook::Start, Some(&silent), &error),
            error.to_string()
        );
        assert_eq!(failure_message(Hook::Start, None, &error), error.to_string());
    }
}
