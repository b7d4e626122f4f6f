//! Whether an Action may run, checked once before anything runs (pure): its
//! operator is installed, declares the action, the parameters fit the
//! action's schema, and the units it names are units of the operator. An
//! operator installed as Deployments has one unit, named after the
//! Deployment its actions' Jobs are made from ([`super::job::target`]).

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use olm_api::{
    actions::{Action as Declared, Actions, validate_params},
    model::{Action, ActionReason},
    substrate::Machine,
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};

use crate::controllers::csv::naming::package_of;

/// Why an action is refused: the reason and a message in plain words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The reason of the `Accepted=False` condition.
    pub reason: ActionReason,
    /// What is wrong and what to do.
    pub message: String,
}

impl Refusal {
    fn new(reason: ActionReason, message: String) -> Refusal {
        Refusal { reason, message }
    }
}

/// An accepted action: the CSV it runs against and the units it runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The installed CSV of the operator.
    pub csv: String,
    /// The units, sorted.
    pub units: Vec<String>,
    /// The Job that runs the action, for an operator installed as
    /// Deployments.
    pub job: Option<String>,
}

/// Checks `action` against the CSVs and Machines of its namespace.
pub fn check(
    action: &Action,
    csvs: &[&ClusterServiceVersion],
    machines: &[&Machine],
) -> Result<Accepted, Refusal> {
    let operator = &action.spec.operator;
    let csv = installed(operator, &action.namespace().unwrap_or_default(), csvs)?;
    let name = csv.name_any();
    let declared = Actions::of_annotations(&name, csv.annotations())
        .map_err(|e| {
            Refusal::new(
                ActionReason::InvalidDeclaration,
                format!("operator {operator}: {e}"),
            )
        })?
        .unwrap_or_default();
    let Some(declaration) = declared.get(&action.spec.action) else {
        let offered: Vec<&str> = declared.iter().map(|a| a.name.as_str()).collect();
        let offered = if offered.is_empty() {
            "it declares none".to_owned()
        } else {
            format!("it declares: {}", offered.join(", "))
        };
        return Err(Refusal::new(
            ActionReason::UnknownAction,
            format!(
                "operator {operator} (CSV {name}) declares no action {}; {offered}",
                action.spec.action
            ),
        ));
    };
    let params = serde_json::Value::Object(action.spec.params.clone().unwrap_or_default());
    validate_params(declaration, &params)
        .map_err(|e| Refusal::new(ActionReason::InvalidParams, format!("operator {operator}: {e}")))?;
    if action.spec.leader && !action.spec.units.is_empty() {
        return Err(Refusal::new(
            ActionReason::ConflictingTargets,
            format!(
                "the action asks for operator {operator}'s leader and names units ({}) as well; ask for one or the other",
                action.spec.units.join(", ")
            ),
        ));
    }
    if csv.spec.install.deployment().is_some() {
        let unit = job_unit(action, csv, declaration)?;
        return Ok(Accepted {
            csv: name,
            units: vec![unit],
            job: Some(super::job::job_name(&action.name_any())),
        });
    }
    let units = units(action, csv, csvs, machines)?;
    Ok(Accepted {
        csv: name,
        units,
        job: None,
    })
}

/// The one unit of `csv`, installed as Deployments, that runs `declared` in
/// a Job: named after the Deployment the Job is made from.
fn job_unit(action: &Action, csv: &ClusterServiceVersion, declared: &Declared) -> Result<String, Refusal> {
    let operator = &action.spec.operator;
    let Some(job) = &declared.job else {
        return Err(Refusal::new(
            ActionReason::NoCommand,
            format!(
                "operator {operator} (CSV {}) is installed as Deployments, and its action {} declares no command to run in a Job; its CSV must declare one (job.command in annotation olm-rs.dev/actions)",
                csv.name_any(),
                declared.name
            ),
        ));
    };
    let target = super::job::target(csv, job).map_err(|e| {
        Refusal::new(
            ActionReason::UnknownDeployment,
            format!("operator {operator}: {e}"),
        )
    })?;
    let unit = target.deployment;
    if let Some(unknown) = action.spec.units.iter().find(|u| **u != unit) {
        return Err(Refusal::new(
            ActionReason::UnknownUnit,
            format!("{unknown} is not a unit of operator {operator}; its one unit is: {unit}"),
        ));
    }
    Ok(unit)
}

/// The installed CSV of `operator` (a package or a CSV name) in `namespace`:
/// the Succeeded one.
fn installed<'c>(
    operator: &str,
    namespace: &str,
    csvs: &[&'c ClusterServiceVersion],
) -> Result<&'c ClusterServiceVersion, Refusal> {
    let mut of_operator: Vec<&ClusterServiceVersion> = csvs
        .iter()
        .copied()
        .filter(|csv| csv.namespace().as_deref() == Some(namespace))
        .filter(|csv| package_of(csv).as_deref() == Some(operator) || csv.name_any() == operator)
        .collect();
    of_operator.sort_by_key(|csv| csv.name_any());
    let phase = |csv: &ClusterServiceVersion| csv.status.as_ref().and_then(|s| s.phase);
    let succeeded = of_operator
        .iter()
        .copied()
        .find(|csv| phase(csv) == Some(CsvPhase::Succeeded));
    match (succeeded, of_operator.first()) {
        (Some(csv), _) => Ok(csv),
        (None, Some(csv)) => Err(Refusal::new(
            ActionReason::NotInstalled,
            format!(
                "operator {operator} is not installed yet: its CSV {} is in phase {}, not Succeeded",
                csv.name_any(),
                phase(csv).map_or_else(|| "(none)".to_owned(), |p| format!("{p:?}"))
            ),
        )),
        (None, None) => Err(Refusal::new(
            ActionReason::NotInstalled,
            format!(
                "operator {operator} is not installed in namespace {namespace}: no CSV there has that package or name; install it first (kubectl olm install {operator})"
            ),
        )),
    }
}

/// The units `action` runs on: its operator's leader when it asks for it,
/// those it names, or every unit of `csv`'s operator. A machine unit is
/// named after its Machine, which reports a unit of one of the operator's
/// CSVs.
fn units(
    action: &Action,
    csv: &ClusterServiceVersion,
    csvs: &[&ClusterServiceVersion],
    machines: &[&Machine],
) -> Result<Vec<String>, Refusal> {
    let operator = &action.spec.operator;
    let Some(strategy) = csv.spec.install.machine() else {
        return Err(Refusal::new(
            ActionReason::NoUnits,
            format!(
                "operator {operator} (CSV {}) has neither a machine nor a deployment install strategy",
                csv.name_any()
            ),
        ));
    };
    let existing = existing_units(csv, csvs, machines, &strategy.pool);
    if existing.is_empty() {
        return Err(Refusal::new(
            ActionReason::NoUnits,
            format!(
                "operator {operator} has no unit yet: no Machine of pool {} reports a unit of it",
                strategy.pool
            ),
        ));
    }
    if action.spec.leader {
        return leader_of(operator, &existing).map(|leader| vec![leader]);
    }
    if action.spec.units.is_empty() {
        return Ok(existing.into_keys().collect());
    }
    if let Some(unknown) = action.spec.units.iter().find(|u| !existing.contains_key(*u)) {
        let known: Vec<&str> = existing.keys().map(String::as_str).collect();
        return Err(Refusal::new(
            ActionReason::UnknownUnit,
            format!(
                "{unknown} is not a unit of operator {operator}; its units are: {}",
                known.join(", ")
            ),
        ));
    }
    let named: BTreeSet<String> = action.spec.units.iter().cloned().collect();
    Ok(named.into_iter().collect())
}

/// The units of `csv`'s operator on the Machines of `pool`: each Machine
/// that reports a unit of one of the operator's CSVs, and whether that unit
/// leads.
fn existing_units(
    csv: &ClusterServiceVersion,
    csvs: &[&ClusterServiceVersion],
    machines: &[&Machine],
    pool: &str,
) -> BTreeMap<String, bool> {
    let package = package_of(csv);
    let of_operator: BTreeSet<String> = csvs
        .iter()
        .filter(|c| c.namespace() == csv.namespace())
        .filter(|c| c.name_any() == csv.name_any() || (package.is_some() && package_of(c) == package))
        .map(|c| c.name_any())
        .collect();
    machines
        .iter()
        .filter(|m| m.namespace() == csv.namespace() && m.spec.pool == pool)
        .filter_map(|m| {
            let mut units = m
                .status
                .iter()
                .flat_map(|s| s.units.iter().flatten())
                .filter(|unit| of_operator.contains(&unit.csv))
                .peekable();
            units.peek()?;
            let leads = units.any(|unit| unit.leader);
            Some((m.name_any(), leads))
        })
        .collect()
}

/// The unit that leads among `units`, or why there is none to run on.
fn leader_of(operator: &str, units: &BTreeMap<String, bool>) -> Result<String, Refusal> {
    units
        .iter()
        .find(|(_, leads)| **leads)
        .map(|(unit, _)| unit.clone())
        .ok_or_else(|| {
            let known: Vec<&str> = units.keys().map(String::as_str).collect();
            Refusal::new(
                ActionReason::NoLeader,
                format!(
                    "operator {operator} has no leader unit now (its units: {}); run the action on named units, or again once a unit leads",
                    known.join(", ")
                ),
            )
        })
}
