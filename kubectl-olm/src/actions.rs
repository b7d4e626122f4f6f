//! Day-2 actions, as Juju's `juju run`, `juju actions`, `juju operations`,
//! `juju show-task` and `juju cancel-task`: `run` writes an Action
//! (`model.olm-rs.dev`) and may wait for its results; `actions` lists what an
//! installed operator offers; `operations` lists the Actions of the
//! namespace; `show-action` shows one; `cancel` cancels one that is pending.
//! The objects are built without I/O, so `--dry-run -o yaml` prints them.

use std::{fmt::Write as _, time::Duration};

use clap::Subcommand;
use kube::{
    Api, ResourceExt,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use olm_api::{
    actions::Actions,
    model::{Action, ActionSpec, TaskState, UnitTask},
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};
use serde_json::{Map, Value};

use crate::{
    DryRunArgs, Env, FIELD_MANAGER, Output,
    error::Error,
    table::{Cell, Table, Tone},
};

/// The unit name that targets whichever unit leads, as Juju's `app/leader`.
const LEADER: &str = "leader";

/// How often `run --wait` looks at the Action.
const POLL: Duration = Duration::from_secs(1);

/// The action commands.
#[derive(Subcommand, Debug)]
pub enum ActionCommand {
    /// Run an action of an installed operator: `OPERATOR[/UNIT] ACTION key=value...`
    /// (every unit without UNIT; `key.sub=value` nests; values that read as numbers or
    /// true/false are those).
    Run {
        /// The operator's package (or CSV), and optionally one unit: `db`, `db/edge-node-1`,
        /// or `db/leader` for whichever unit leads.
        target: String,
        /// The action (`kubectl olm actions OPERATOR` lists them).
        action: String,
        /// Parameters: `key=value`.
        params: Vec<String>,
        /// The Action's name (default: made from the operator and action, with a random end).
        #[arg(long)]
        name: Option<String>,
        /// Wait until the action ends, printing its log as it arrives and its results.
        #[arg(long)]
        wait: bool,
        /// How long to wait, in seconds.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// How long each unit's task may run before it is killed and failed, in seconds
        /// (default: the operator's hook timeout).
        #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
        action_timeout: Option<i64>,
        /// Dry run and output.
        #[command(flatten)]
        dry_run: DryRunArgs,
    },
    /// List the actions an installed operator offers, with their parameters.
    Actions {
        /// The operator's package (or CSV).
        operator: String,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// List the Actions of the namespace: running and past ones.
    Operations {
        /// Only those of this operator.
        #[arg(long)]
        operator: Option<String>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Show one Action: each unit's state, Job, results, log, output and exit code.
    ShowAction {
        /// The Action.
        name: String,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Cancel an Action: its tasks still pending never run (running ones finish).
    Cancel {
        /// The Action.
        name: String,
        /// Dry run and output.
        #[command(flatten)]
        dry_run: DryRunArgs,
    },
}

/// Runs an action command.
pub async fn dispatch(env: &mut Env<'_>, command: ActionCommand) -> Result<(), Error> {
    match command {
        ActionCommand::Run {
            target,
            action,
            params,
            name,
            wait,
            timeout,
            action_timeout,
            dry_run,
        } => {
            let action = build(&env.namespace, &target, &action, &params, name, action_timeout)?;
            run(env, action, &dry_run, wait.then(|| Duration::from_secs(timeout))).await
        }
        ActionCommand::Actions { operator, output } => offered(env, &operator, output).await,
        ActionCommand::Operations { operator, output } => operations(env, operator.as_deref(), output).await,
        ActionCommand::ShowAction { name, output } => show_action(env, &name, output).await,
        ActionCommand::Cancel { name, dry_run } => cancel(env, &name, &dry_run).await,
    }
}

/// The Action `run TARGET ACTION PARAMS` writes in `namespace`: named `name`,
/// or generated from the operator and action.
pub fn build(
    namespace: &str,
    target: &str,
    action: &str,
    params: &[String],
    name: Option<String>,
    timeout_seconds: Option<i64>,
) -> Result<Action, Error> {
    let (operator, unit) = match target.split_once('/') {
        Some((operator, unit)) => (operator, Some(unit)),
        None => (target, None),
    };
    if operator.is_empty() || unit.is_some_and(|u| u.is_empty() || u.contains('/')) {
        return Err(Error::Usage(format!(
            "{target:?} is not OPERATOR[/UNIT]; name an installed operator's package, and optionally one of its units (kubectl olm status lists them)"
        )));
    }
    let params = parse_params(params)?;
    let generate_name = name
        .is_none()
        .then(|| format!("{}-", dns_label(&format!("{operator}-{action}"))));
    Ok(Action {
        metadata: ObjectMeta {
            name,
            generate_name,
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: ActionSpec {
            operator: operator.to_owned(),
            action: action.to_owned(),
            params: (!params.is_empty()).then_some(params),
            units: unit
                .filter(|u| *u != LEADER)
                .map(|u| vec![u.to_owned()])
                .unwrap_or_default(),
            leader: unit == Some(LEADER),
            timeout_seconds,
            cancel: false,
        },
        status: None,
    })
}

/// `key=value` parameters as a JSON object: `a.b=value` nests, and a value
/// that reads as a number, `true`, `false` or `null` is that; others are strings.
pub fn parse_params(params: &[String]) -> Result<Map<String, Value>, Error> {
    let mut object = Map::new();
    for param in params {
        let Some((key, value)) = param.split_once('=') else {
            return Err(Error::Usage(format!("{param:?} is not key=value")));
        };
        let path: Vec<&str> = key.split('.').collect();
        if path.iter().any(|k| k.is_empty()) {
            return Err(Error::Usage(format!(
                "{param:?}: the key {key:?} has an empty part; write key=value or key.sub=value"
            )));
        }
        insert(&mut object, &path, scalar(value)).map_err(|clash| {
            Error::Usage(format!(
                "{param:?}: {clash} is given both as a value and as a map"
            ))
        })?;
    }
    Ok(object)
}

/// Sets `value` at `path` in `object`, making the maps on the way; the key
/// that is both a value and a map when one is in the way.
fn insert(object: &mut Map<String, Value>, path: &[&str], value: Value) -> Result<(), String> {
    let (first, rest) = path.split_first().ok_or_else(String::new)?;
    if rest.is_empty() {
        object.insert((*first).to_owned(), value);
        return Ok(());
    }
    let entry = object
        .entry((*first).to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    match entry {
        Value::Object(inner) => insert(inner, rest, value),
        _ => Err((*first).to_owned()),
    }
}

/// A parameter's value: a number, `true`, `false` or `null` as such; other text as a string.
fn scalar(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => value,
        _ => Value::String(text.to_owned()),
    }
}

/// `text` made a DNS label prefix: lowercase letters, digits and '-', at most 50 characters.
fn dns_label(text: &str) -> String {
    let mut label = String::new();
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && (label.is_empty() || label.ends_with('-'))) && label.len() < 50 {
            label.push(c);
        }
    }
    label.trim_end_matches('-').to_owned()
}

/// `run`: creates `action` (or prints it), and with `wait` follows it to its end.
async fn run(
    env: &mut Env<'_>,
    action: Action,
    dry_run: &DryRunArgs,
    wait: Option<Duration>,
) -> Result<(), Error> {
    let namespace = env.namespace.clone();
    if dry_run.is_dry_run() {
        return match dry_run.output {
            None => Ok(writeln!(
                env.out,
                "Action {} {} would be created (dry run)",
                action.spec.operator, action.spec.action
            )?),
            output => env.print_object(&action, output),
        };
    }
    let api: Api<Action> = Api::namespaced(env.client.clone(), &namespace);
    let created = api
        .create(&PostParams::default(), &action)
        .await
        .map_err(Error::kube(format!("create an Action in {namespace}")))?;
    let name = created.name_any();
    let Some(timeout) = wait else {
        writeln!(
            env.out,
            "Action {name} created in {namespace}; `kubectl olm show-action {name} -n {namespace}` shows its state and results"
        )?;
        return Ok(());
    };
    writeln!(
        env.err,
        "Action {name} created in {namespace}; waiting for it to end"
    )?;
    follow(env, &api, &name, timeout).await
}

/// Follows Action `name` until it ends, printing each unit's new log lines,
/// then its outcome; an action that did not complete is an error.
async fn follow(env: &mut Env<'_>, api: &Api<Action>, name: &str, timeout: Duration) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut printed = Printed::default();
    loop {
        let action = api
            .get(name)
            .await
            .map_err(Error::kube(format!("read Action {name}")))?;
        let status = action.status.clone().unwrap_or_default();
        for line in printed.new_lines(&status.tasks) {
            writeln!(env.err, "{line}")?;
        }
        if let Some(phase) = status.phase.filter(|p| p.is_finished()) {
            env.out.write_all(details(&action).as_bytes())?;
            return match phase {
                TaskState::Completed => Ok(()),
                _ => Err(Error::Failed(format!(
                    "Action {name} is {}: {}",
                    phase.as_str(),
                    status.message.unwrap_or_default()
                ))),
            };
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Failed(format!(
                "Action {name} has not ended after {}s (it is {}); `kubectl olm show-action {name}` shows where it stands",
                timeout.as_secs(),
                status.phase.map_or("not yet accepted", TaskState::as_str)
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// How many log lines of each unit were printed.
#[derive(Default)]
struct Printed(std::collections::BTreeMap<String, usize>);

impl Printed {
    /// The log lines of `tasks` not printed yet, as `unit: message`.
    fn new_lines(&mut self, tasks: &[UnitTask]) -> Vec<String> {
        let mut lines = Vec::new();
        for task in tasks {
            let seen = self.0.entry(task.unit.clone()).or_default();
            for entry in task.log.iter().skip(*seen) {
                lines.push(format!("{}: {}", task.unit, entry.message));
            }
            *seen = (*seen).max(task.log.len());
        }
        lines
    }
}

/// `actions OPERATOR`: what the installed operator's CSV declares.
async fn offered(env: &mut Env<'_>, operator: &str, output: Output) -> Result<(), Error> {
    let namespace = env.namespace.clone();
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(env.client.clone(), &namespace);
    let list = csvs
        .list(&Default::default())
        .await
        .map_err(Error::kube(format!("list CSVs in {namespace}")))?;
    let csv = installed(&list.items, operator, &namespace).ok_or_else(|| {
        Error::Usage(format!(
            "operator {operator} is not installed in namespace {namespace}: no Succeeded CSV there has that package or name; `kubectl olm status` lists what is installed"
        ))
    })?;
    let declared = Actions::of_annotations(&csv.name_any(), csv.annotations())
        .map_err(|e| Error::Failed(e.to_string()))?
        .unwrap_or_default();
    match output {
        Output::Table => {
            let text = offered_table(operator, &csv.name_any(), &declared);
            Ok(env.out.write_all(text.as_bytes())?)
        }
        output => env.print_object(&declared, Some(output)),
    }
}

/// The Succeeded CSV of `operator` (a package or CSV name) among `csvs` of `namespace`.
pub fn installed<'a>(
    csvs: &'a [ClusterServiceVersion],
    operator: &str,
    namespace: &str,
) -> Option<&'a ClusterServiceVersion> {
    let label = format!("operators.coreos.com/{operator}.{namespace}");
    csvs.iter()
        .filter(|csv| csv.name_any() == operator || csv.labels().contains_key(&label))
        .find(|csv| csv.status.as_ref().and_then(|s| s.phase) == Some(CsvPhase::Succeeded))
}

/// The table of the actions `declared` by `csv`.
pub fn offered_table(operator: &str, csv: &str, declared: &Actions) -> String {
    if declared.is_empty() {
        return format!("{operator} ({csv}) declares no actions\n");
    }
    let mut table = Table::new(&["ACTION", "PARAMETERS", "DESCRIPTION"]);
    for action in declared.iter() {
        let params: Vec<String> = action
            .params
            .iter()
            .map(|(name, schema)| {
                let type_ = schema.get("type").map_or("any".to_owned(), |t| match t {
                    Value::String(t) => t.clone(),
                    other => other.to_string(),
                });
                match action.requires(name) {
                    true => format!("{name} ({type_}, required)"),
                    false => format!("{name} ({type_})"),
                }
            })
            .collect();
        table.row(vec![
            action.name.clone().into(),
            if params.is_empty() {
                "-".to_owned()
            } else {
                params.join(", ")
            }
            .into(),
            action
                .description
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned()
                .into(),
        ]);
    }
    table.render(false)
}

/// `operations`: the Actions of the namespace, newest first.
async fn operations(env: &mut Env<'_>, operator: Option<&str>, output: Output) -> Result<(), Error> {
    let namespace = env.namespace.clone();
    let api: Api<Action> = Api::namespaced(env.client.clone(), &namespace);
    let mut actions = api
        .list(&Default::default())
        .await
        .map_err(Error::kube(format!("list Actions in {namespace}")))?
        .items;
    actions.retain(|a| operator.is_none_or(|o| a.spec.operator == o));
    actions.sort_by(|a, b| {
        b.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .cmp(&a.metadata.creation_timestamp.as_ref().map(|t| t.0))
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    match output {
        Output::Table if actions.is_empty() => Ok(writeln!(env.out, "No Actions in {namespace}")?),
        Output::Table => {
            let text = operations_table(&actions).render(env.colour);
            Ok(env.out.write_all(text.as_bytes())?)
        }
        output => env.print_object(&actions, Some(output)),
    }
}

/// One row per Action: name, operator, action, units, phase and its message.
pub fn operations_table(actions: &[Action]) -> Table {
    let mut table = Table::new(&["NAME", "OPERATOR", "ACTION", "UNITS", "STATUS", "MESSAGE"]);
    for action in actions {
        let status = action.status.clone().unwrap_or_default();
        let units: Vec<&str> = if status.tasks.is_empty() {
            action.spec.units.iter().map(String::as_str).collect()
        } else {
            status.tasks.iter().map(|t| t.unit.as_str()).collect()
        };
        table.row(vec![
            action.name_any().into(),
            action.spec.operator.clone().into(),
            action.spec.action.clone().into(),
            if units.is_empty() {
                "all".to_owned()
            } else {
                units.join(",")
            }
            .into(),
            state_cell(status.phase),
            status.message.unwrap_or_default().into(),
        ]);
    }
    table
}

fn state_cell(state: Option<TaskState>) -> Cell {
    let Some(state) = state else {
        return Cell::toned("new", Tone::Busy);
    };
    let tone = match state {
        TaskState::Completed => Tone::Good,
        TaskState::Pending | TaskState::Running => Tone::Busy,
        TaskState::Failed | TaskState::Aborted => Tone::Bad,
        TaskState::Cancelled => Tone::Plain,
    };
    Cell::toned(state.as_str(), tone)
}

/// `show-action NAME`.
async fn show_action(env: &mut Env<'_>, name: &str, output: Output) -> Result<(), Error> {
    let namespace = env.namespace.clone();
    let api: Api<Action> = Api::namespaced(env.client.clone(), &namespace);
    let action = api
        .get(name)
        .await
        .map_err(Error::kube(format!("read Action {name} in {namespace}")))?;
    match output {
        Output::Table => Ok(env.out.write_all(details(&action).as_bytes())?),
        output => env.print_object(&action, Some(output)),
    }
}

/// An Action for people: what ran where, then each unit's task.
pub fn details(action: &Action) -> String {
    let status = action.status.clone().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Action {}: {} {} ({})",
        action.name_any(),
        action.spec.operator,
        action.spec.action,
        status.phase.map_or("not yet accepted", TaskState::as_str)
    );
    if let Some(message) = &status.message {
        let _ = writeln!(out, "  {message}");
    }
    for task in &status.tasks {
        task_details(&mut out, task);
    }
    out
}

fn task_details(out: &mut String, task: &UnitTask) {
    let _ = writeln!(out, "  {}: {}", task.unit, task.state.as_str());
    if let Some(job) = &task.job {
        let _ = writeln!(out, "    job: {job}");
    }
    if let Some(code) = task.exit_code {
        let _ = writeln!(out, "    exit code: {code}");
    }
    if let Some(message) = &task.message {
        let _ = writeln!(out, "    message: {message}");
    }
    if !task.results.is_empty() {
        let _ = writeln!(out, "    results:");
        for (key, value) in &task.results {
            let _ = writeln!(out, "      {key}: {value}");
        }
    }
    if !task.log.is_empty() {
        let _ = writeln!(out, "    log:");
        for entry in &task.log {
            let _ = writeln!(out, "      {} {}", entry.time.0, entry.message);
        }
    }
    for (stream, text) in [("stdout", &task.stdout), ("stderr", &task.stderr)] {
        if let Some(text) = text.as_deref().filter(|t| !t.is_empty()) {
            let _ = writeln!(out, "    {stream}: |");
            for line in text.lines() {
                let _ = writeln!(out, "      {line}");
            }
        }
    }
}

/// `cancel NAME`: sets `spec.cancel`.
async fn cancel(env: &mut Env<'_>, name: &str, dry_run: &DryRunArgs) -> Result<(), Error> {
    let namespace = env.namespace.clone();
    let api: Api<Action> = Api::namespaced(env.client.clone(), &namespace);
    if dry_run.is_dry_run() {
        let mut action = api
            .get(name)
            .await
            .map_err(Error::kube(format!("read Action {name} in {namespace}")))?;
        action.spec.cancel = true;
        action.metadata.managed_fields = None;
        return match dry_run.output {
            None => Ok(writeln!(env.out, "Action {name} would be cancelled (dry run)")?),
            output => env.print_object(&action, output),
        };
    }
    let patch = serde_json::json!({"spec": {"cancel": true}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("cancel Action {name} in {namespace}")))?;
    writeln!(
        env.out,
        "Action {name} cancelled: its pending tasks will not run; `kubectl olm show-action {name} -n {namespace}` shows them"
    )?;
    Ok(())
}

#[cfg(test)]
#[path = "actions_tests.rs"]
mod tests;
