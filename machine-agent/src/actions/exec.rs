//! Running one action on one unit: its script from the unit's hooks ConfigMap
//! (key `actions.<name>`), in the unit's sandbox, as the user its hooks run
//! as, with the unit's config, its parameters through `action-get`, and the
//! timeout of the unit's hooks.

use std::{path::Path, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::{ObjectRef, Store};
use olm_api::{model::UnitTask, substrate::effective_config_name};

use super::{
    task::{Due, Outcome},
    tool::{ActionRun, Recorded},
};
use crate::{
    csv_view::{self, MachineCsv, PoolCsv},
    units::{
        Units,
        hooks::{ScriptError, config_env_name, run_script},
        privilege::{self, hook_ids},
    },
};

/// The key of action `action`'s script in the hooks ConfigMap.
pub fn script_key(action: &str) -> String {
    format!("actions.{action}")
}

/// What an action run reads of the cluster: the namespace's CSVs and ConfigMaps.
#[derive(Clone)]
pub struct Sources {
    /// The CSVs.
    pub csvs: Store<MachineCsv>,
    /// The ConfigMaps (hooks, effective config).
    pub config_maps: Store<ConfigMap>,
}

/// An action ready to run: its script, its unit's CSV and config.
struct Ready {
    csv: PoolCsv,
    script: String,
    config: crate::units::sequence::Config,
}

impl Sources {
    fn data(&self, namespace: &str, name: &str) -> Option<std::collections::BTreeMap<String, String>> {
        self.config_maps
            .get(&ObjectRef::new(name).within(namespace))
            .map(|cm| cm.data.clone().unwrap_or_default())
    }

    /// The script and settings of `due` on `unit`, or why it cannot run.
    fn ready(&self, units: &Units, unit: &str, due: &Due) -> Result<Ready, String> {
        let csv_name = units
            .statuses
            .borrow()
            .get(unit)
            .map(|s| s.csv.clone())
            .ok_or_else(|| format!("unit {unit} is not on machine {} any more", units.machine))?;
        let csv = self
            .csvs
            .get(&ObjectRef::new(&csv_name).within(&units.namespace))
            .and_then(|csv| csv_view::pool_csv(&csv, &units.pool))
            .ok_or_else(|| {
                format!(
                    "the CSV {csv_name} that unit {unit} runs is gone from pool {}",
                    units.pool
                )
            })?;
        let hooks = &csv.strategy.hooks.config_map;
        let key = script_key(&due.action);
        let script = self
            .data(&units.namespace, hooks)
            .ok_or_else(|| format!("the hooks ConfigMap {hooks} of CSV {csv_name} is missing"))?
            .remove(&key)
            .ok_or_else(|| {
                format!(
                    "the hooks ConfigMap {hooks} of CSV {csv_name} has no script for action {} (key `{key}`)",
                    due.action
                )
            })?;
        let config = self
            .data(&units.namespace, &effective_config_name(&csv_name))
            .unwrap_or_default();
        Ok(Ready { csv, script, config })
    }
}

/// Runs `due` on `unit` (its turn taken); `progress` gets what the run
/// recorded so far, every few seconds while it records more.
pub async fn run(
    units: &Units,
    sources: &Sources,
    unit: &str,
    due: &Due,
    progress: tokio::sync::watch::Sender<Recorded>,
) -> (Recorded, Outcome) {
    let ready = match sources.ready(units, unit, due) {
        Ok(ready) => ready,
        Err(why) => return (Recorded::default(), Outcome::NotRun(why)),
    };
    let action = ActionRun::new(due.params.clone());
    let run = units
        .runs
        .start_action(unit, Some(&ready.csv.application), action.clone());
    let (ids, prepared) = match prepare(units, unit, due, &ready) {
        Ok(prepared) => prepared,
        Err(why) => return (Recorded::default(), Outcome::NotRun(why)),
    };
    let env = action_env(units, due, &ready, &prepared.config_file, &run.id);
    let timeout = due.timeout.unwrap_or_else(|| {
        Duration::from_secs(ready.csv.strategy.hook_timeout_seconds().max(1).unsigned_abs())
    });
    let user = (ids != units.users.agent).then_some(ids);
    tracing::info!(
        unit,
        action = due.action,
        object = due.object,
        uid = ids.uid,
        "running action"
    );
    let script = run_script(&prepared.script, &prepared.sandbox, &env, timeout, user);
    tokio::pin!(script);
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    let result = loop {
        tokio::select! {
            result = &mut script => break result,
            _ = tick.tick() => {
                let now = action.recorded();
                progress.send_if_modified(|reported| {
                    let changed = *reported != now;
                    *reported = now;
                    changed
                });
            }
        }
    };
    drop(run);
    let outcome = match result {
        Ok(ran) => Outcome::Exited {
            code: ran.status.code(),
            stdout: String::from_utf8_lossy(&ran.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&ran.stderr).into_owned(),
        },
        Err(ScriptError::TimedOut) => Outcome::TimedOut(timeout),
        Err(ScriptError::Spawn(why)) => Outcome::NotRun(format!("the action could not start: {why}")),
    };
    (action.recorded(), outcome)
}

fn prepare(
    units: &Units,
    unit: &str,
    due: &Due,
    ready: &Ready,
) -> Result<(privilege::Ids, privilege::Prepared), String> {
    let ids = hook_ids(&units.users, unit, ready.csv.strategy.privileged).map_err(|e| e.to_string())?;
    let prepared = privilege::prepare_script(
        &units.state,
        &units.users,
        unit,
        &script_key(&due.action),
        ready.script.as_bytes(),
        &ready.config,
        ids,
    )
    .map_err(|error| format!("the action could not start: {error}"))?;
    Ok((ids, prepared))
}

/// The environment of an action: as a hook's, with `OLM_RS_ACTION` (its
/// name) and `OLM_RS_ACTION_ID` (the Action's name) instead of `OLM_RS_HOOK`.
fn action_env(
    units: &Units,
    due: &Due,
    ready: &Ready,
    config_file: &Path,
    run: &str,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("OLM_RS_MACHINE".to_owned(), units.machine.clone()),
        ("OLM_RS_POOL".to_owned(), units.pool.clone()),
        ("OLM_RS_NAMESPACE".to_owned(), units.namespace.clone()),
        ("OLM_RS_CSV".to_owned(), ready.csv.name.clone()),
        ("OLM_RS_VERSION".to_owned(), ready.csv.version.clone()),
        ("OLM_RS_ACTION".to_owned(), due.action.clone()),
        ("OLM_RS_ACTION_ID".to_owned(), due.object.clone()),
        ("OLM_RS_CONFIG_FILE".to_owned(), config_file.display().to_string()),
        (
            crate::hook_tool::SOCKET_ENV.to_owned(),
            units.state.socket_path().display().to_string(),
        ),
        (crate::hook_tool::RUN_ENV.to_owned(), run.to_owned()),
    ];
    env.extend(ready.config.iter().map(|(k, v)| (config_env_name(k), v.clone())));
    env
}

/// The task as the run is aborted by the agent's stop.
pub fn stopped(task: &UnitTask, now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> UnitTask {
    super::task::aborted(task, "the machine agent stopped while the action ran", now)
}
