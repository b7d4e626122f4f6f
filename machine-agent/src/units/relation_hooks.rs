//! Running a unit's relation hooks, in its task, one at a time with its other
//! hooks: a unit in setup (installed, not started) runs `-relation-created`
//! for each relation that exists, before `leader-elected`, `config-changed`
//! and `start`, as in Juju's setup phase; a settled unit (started, nothing of
//! its own life left to do) runs the rest, before `update-status`; a unit
//! being removed leaves its relations (`-departed`, `-broken`) before `stop`.
//!
//! A relation hook that fails is recorded as the unit's failure (the unit
//! shows `error` with its message) and is retried after the same backoff as
//! other hooks, or at once when the next relation hook is another one (the
//! relation changed meanwhile); until then the unit runs no periodic hook.

use std::{collections::BTreeMap, path::PathBuf};

use olm_api::v1alpha1::MachineHook as Hook;

use super::{
    UnitInput, Units,
    hooks::{self, HookContext, HookError},
    privilege,
    sequence::{Failure, UnitRecord, Want, retry_delay},
};
use crate::{
    relations::{
        self, RELATION_ENV, RELATION_ID_ENV, REMOTE_APP_ENV, REMOTE_UNIT_ENV,
        sequence::{self, RelationHook},
        view::RelationView,
    },
    state::{self, StateDir},
};

/// What a settled unit's relations ask of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A relation hook ran (or failed): look again.
    Ran,
    /// A failed relation hook waits for its retry: run nothing else meanwhile.
    Waiting,
    /// Nothing to do for relations.
    Idle,
}

/// Which relation hooks a unit may run now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// In setup: only `-relation-created`.
    Setup,
    /// Settled: any.
    Settled,
    /// Being removed: leaving every relation.
    Leaving,
}

/// Runs the next relation hook of unit `name`, when one is due: a unit that
/// runs its CSV without a problem runs `-relation-created` in setup
/// ([`sequence::in_setup`](super::sequence::in_setup)) and the others once
/// settled (`next`, its next hook of its own life, is `None`); a unit being
/// removed leaves its relations (every remote unit departs, every relation
/// breaks) before it stops, best effort: a failure there is logged, and the
/// unit goes on.
pub async fn settled_step(
    units: &Units,
    name: &str,
    record: &mut UnitRecord,
    input: &UnitInput,
    next: Option<Hook>,
) -> Step {
    let phase = match (&input.want, next) {
        (Want::Run { .. }, None) if input.problem.is_none() => Phase::Settled,
        (Want::Run { .. }, _) if input.problem.is_none() && super::sequence::in_setup(record, next) => {
            Phase::Setup
        }
        (Want::Remove, Some(Hook::Stop)) => Phase::Leaving,
        _ => return Step::Idle,
    };
    if phase == Phase::Setup && setup_awaits_bags(units, input) {
        return Step::Waiting;
    }
    let views = match phase {
        Phase::Leaving => BTreeMap::new(),
        Phase::Setup | Phase::Settled => {
            let views = input
                .application
                .as_deref()
                .and_then(|application| units.relations.views(application));
            let Some(views) = views else {
                return Step::Idle;
            };
            views
        }
    };
    step(units, name, record, input, &views, phase).await
}

/// Whether a unit in setup waits for its bag in a Ready relation of its
/// application before it goes on. Not while the relation watches have not
/// synced: a unit never waits on a watch that may not sync (an API server
/// without the Relation kind).
fn setup_awaits_bags(units: &Units, input: &UnitInput) -> bool {
    let Some(application) = input.application.as_deref() else {
        return false;
    };
    units
        .relations
        .awaited(application)
        .is_some_and(|awaited| !awaited.is_empty())
}

/// Runs the next relation hook of unit `name` for `views` in `phase`, if one is due.
async fn step(
    units: &Units,
    name: &str,
    record: &mut UnitRecord,
    input: &UnitInput,
    views: &BTreeMap<String, RelationView>,
    phase: Phase,
) -> Step {
    let leaving = phase == Phase::Leaving;
    let mut relations = relations::read_record(&units.state, name);
    let failing = record
        .failure
        .as_ref()
        .filter(|f| sequence::is_relation_hook(&f.hook))
        .map(|f| (f.hook.clone(), f.attempts));
    let due = match phase {
        Phase::Setup => sequence::next_created(&relations, views),
        Phase::Settled | Phase::Leaving => sequence::next(&relations, views),
    };
    let Some(hook) = due else {
        if failing.is_some() {
            // What failed is no longer to run (its relation changed): the unit is fine.
            record.failure = None;
            return Step::Ran;
        }
        return Step::Idle;
    };
    let attempts = match &failing {
        Some((failed, attempts)) if *failed == hook.name() => {
            if units
                .relations
                .retry_at(name)
                .is_some_and(|at| at > std::time::Instant::now())
            {
                return Step::Waiting;
            }
            *attempts
        }
        _ => 0,
    };
    let (result, set) = run_hook(units, name, record, input, &hook).await;
    if let Some(set) = set {
        record.workload = Some(set);
    }
    match result {
        Ok(()) => {
            tracing::info!(unit = name, hook = hook.name(), "hook succeeded");
            relations.succeeded(&hook);
            relations::save_record(&units.state, name, &relations);
            if failing.is_some() {
                record.failure = None;
            }
            units.relations.set_retry(name, None);
        }
        Err(message) if leaving => {
            tracing::warn!(
                unit = name,
                hook = hook.name(),
                message,
                "hook failed: the unit leaves the relation all the same"
            );
            relations.succeeded(&hook);
            relations::save_record(&units.state, name, &relations);
        }
        Err(message) => {
            tracing::warn!(unit = name, hook = hook.name(), message, "hook failed");
            let (csv, config) = match &input.want {
                Want::Run { csv, config, .. } => (csv.clone(), config.clone()),
                Want::Remove => (record.csv.clone(), record.config.clone().unwrap_or_default()),
            };
            record.failure = Some(Failure {
                hook: hook.name(),
                message,
                attempts: attempts + 1,
                csv,
                config,
            });
            units.relations.set_retry(name, Some(retry_delay(attempts + 1)));
        }
    }
    Step::Ran
}

/// What a run ended with, and the workload status the hook set, if any.
type Outcome = (
    Result<(), String>,
    Option<(olm_api::substrate::WorkloadState, Option<String>)>,
);

/// Runs `hook` of unit `name`; a hook the unit does not ship succeeds at once.
async fn run_hook(
    units: &Units,
    name: &str,
    record: &UnitRecord,
    input: &UnitInput,
    hook: &RelationHook,
) -> Outcome {
    let hook_name = hook.name();
    if !units.state.hooks_dir(name).join(&hook_name).is_file() {
        tracing::debug!(unit = name, hook = hook_name, "no such hook: nothing to run");
        return (Ok(()), None);
    }
    // Never beside another hook or an action of the unit.
    let _turn = units.turns.take(name).await;
    let (csv, version, config) = match &input.want {
        Want::Run { csv, version, config } => (csv.clone(), version.clone(), config.clone()),
        Want::Remove => (
            record.csv.clone(),
            record.version.clone().unwrap_or_default(),
            record.config.clone().unwrap_or_default(),
        ),
    };
    // A unit being removed runs its hooks as its record says they last ran.
    let privileged = match input.want {
        Want::Run { .. } => input.privileged,
        Want::Remove => record.privileged,
    };
    let prepared = privilege::hook_ids(&units.users, name, privileged)
        .map_err(|error| format!("{hook_name} hook cannot run: {error}"))
        .and_then(|ids| {
            privilege::prepare(&units.state, &units.users, name, &hook_name, &config, ids)
                .map(|prepared| (ids, prepared))
                .map_err(|error| format!("{hook_name} hook could not start: {error}"))
        });
    let (ids, prepared) = match prepared {
        Ok(prepared) => prepared,
        Err(message) => return (Err(message), None),
    };
    let run = units.runs.start(name, input.application.as_deref());
    let context = HookContext {
        machine: units.machine.clone(),
        pool: units.pool.clone(),
        namespace: units.namespace.clone(),
        csv,
        version,
        hook: hook_name.clone(),
        config_file: prepared.config_file.clone(),
        socket: units.state.socket_path(),
        run_id: run.id.clone(),
    };
    let mut env = hooks::hook_env(&context, &config);
    env.extend(relation_env(hook));
    tracing::info!(unit = name, hook = hook_name, uid = ids.uid, "running hook");
    let user = (ids != units.users.agent).then_some(ids);
    let result = hooks::run_hook_as(
        &prepared.script,
        &prepared.sandbox,
        &env,
        &hook_name,
        input.timeout,
        user,
    )
    .await;
    let set = run.workload.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(run);
    let result = result.map_err(|error| failure_message(&hook_name, set.as_ref(), &error));
    (result, set)
}

/// Why a relation hook failed: what it said of itself, if it did, else how it ended.
fn failure_message(
    hook: &str,
    set: Option<&(olm_api::substrate::WorkloadState, Option<String>)>,
    error: &HookError,
) -> String {
    match set {
        Some((_, Some(message))) if !message.is_empty() => format!("{hook} hook failed: {message}"),
        _ => error.to_string(),
    }
}

/// The relation context of a relation hook's environment.
pub fn relation_env(hook: &RelationHook) -> Vec<(String, String)> {
    let mut env = vec![
        (RELATION_ENV.to_owned(), hook.endpoint.clone()),
        (RELATION_ID_ENV.to_owned(), hook.relation_id()),
        (REMOTE_APP_ENV.to_owned(), hook.remote_app.clone()),
    ];
    if let Some(unit) = &hook.remote_unit {
        env.push((REMOTE_UNIT_ENV.to_owned(), unit.clone()));
    }
    env
}

/// Keeps the unit's relation hook scripts in its hooks directory, beside its
/// other hooks, and drops those no longer shipped.
pub fn save_hooks(state: &StateDir, unit: &str, hooks: &std::collections::BTreeMap<String, String>) {
    let dir = state.hooks_dir(unit);
    let shipped = hooks.iter().filter(|(name, _)| sequence::is_relation_hook(name));
    for (name, script) in shipped {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(script.as_str()) {
            continue;
        }
        if let Err(error) = state::write_file(&path, script.as_bytes()) {
            tracing::error!(unit, hook = name, %error, "cannot save the hook script");
        }
    }
    let kept: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .collect();
    for path in kept {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if sequence::is_relation_hook(&name) && !hooks.contains_key(&name) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relations::sequence::Event;

    #[test]
    fn a_relation_hook_is_told_its_relation_and_remote_side() {
        let hook = RelationHook {
            relation: "r".into(),
            uid: "uid-r".into(),
            endpoint: "database".into(),
            remote_app: "db".into(),
            remote_unit: Some("db/dbs-a".into()),
            event: Event::Joined,
            seen: Default::default(),
        };
        let env = relation_env(&hook);
        let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get(RELATION_ENV), Some("database"));
        assert_eq!(get(RELATION_ID_ENV), Some("database:r"));
        assert_eq!(get(REMOTE_APP_ENV), Some("db"));
        assert_eq!(get(REMOTE_UNIT_ENV), Some("db/dbs-a"));
        let broken = RelationHook {
            remote_unit: None,
            event: Event::Broken,
            ..hook
        };
        assert_eq!(broken.name(), "database-relation-broken");
        assert!(relation_env(&broken).iter().all(|(k, _)| k != REMOTE_UNIT_ENV));
    }

    #[test]
    fn relation_hook_scripts_are_kept_and_dropped_with_the_config_map() {
        let state = StateDir::open(crate::state::tests::temp_dir("relation-hooks")).unwrap();
        let mut hooks = std::collections::BTreeMap::from([
            ("install".to_owned(), "#!/bin/sh\n".to_owned()),
            (
                "db-relation-joined".to_owned(),
                "#!/bin/sh\necho joined\n".to_owned(),
            ),
        ]);
        save_hooks(&state, "web.v1", &hooks);
        let path = state.hooks_dir("web.v1").join("db-relation-joined");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "#!/bin/sh\necho joined\n"
        );
        // Only relation hooks are this module's: install is the unit's to save.
        assert!(!state.hooks_dir("web.v1").join("install").exists());
        hooks.remove("db-relation-joined");
        save_hooks(&state, "web.v1", &hooks);
        assert!(!path.exists());
        std::fs::remove_dir_all(state.root()).unwrap();
    }
}
