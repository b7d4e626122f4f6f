//! `Action`: one run of an action that an installed operator declares
//! ([`crate::actions`]), on some or all of its units, as Juju's
//! `juju run mysql/0 backup path=/srv`. Its status holds one task per unit,
//! with Juju's task states, results, log, output and exit code.
//!
//! Who may run actions on an operator is whoever may create Actions in its
//! namespace: RBAC, audit and GitOps apply to them as to any object.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use crate::schema;

/// The spec of an Action: what to run, where, with which parameters.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "model.olm-rs.dev",
    version = "v1alpha1",
    kind = "Action",
    plural = "actions",
    namespaced,
    status = "ActionStatus",
    shortname = "act",
    category = "olm",
    derive = "PartialEq",
    doc = "Action runs an action that an installed operator declares on its units, and records each unit's task: state, results, log and exit code.",
    printcolumn(name = "Operator", type_ = "string", json_path = ".spec.operator"),
    printcolumn(name = "Action", type_ = "string", json_path = ".spec.action"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Accepted')].reason"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        json_path = ".status.message"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ActionSpec {
    /// The operator: the package of an installed operator (what
    /// `kubectl olm install` takes), or the name of its CSV, in the Action's
    /// namespace.
    pub operator: String,
    /// The action, as the operator's CSV declares it (annotation
    /// `olm-rs.dev/actions`).
    pub action: String,
    /// The parameters, checked against the action's schema before anything
    /// runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::open_object")]
    pub params: Option<serde_json::Map<String, serde_json::Value>>,
    /// The units to run on, by name (a machine unit is named after its
    /// Machine). Empty: every unit of the operator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<String>,
    /// Run on the operator's leader unit only, whichever unit leads when
    /// the action is accepted (Juju's `app/leader`). `units` must then be
    /// empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leader: bool,
    /// How long each unit's task may run before it is killed and failed, in
    /// seconds. Unset: the operator's hook timeout on machines, 600 for a
    /// Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<i64>,
    /// Set to cancel the action: tasks still pending never run; running
    /// ones finish.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel: bool,
}

/// The observed state of an Action.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The state of the action as a whole, from its tasks' states.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<TaskState>,
    /// The CSV the action was accepted against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csv: Option<String>,
    /// What happened, in plain words: why the action was refused, or how
    /// its tasks ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// One task per targeted unit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "tasks_list_map")]
    pub tasks: Vec<UnitTask>,
    /// When the first task started running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the action finished (its last task ended, or it was refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// Standard conditions: `Accepted`, with the reason an action is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}

/// The task of one unit: its state and what the action's run left behind.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitTask {
    /// The unit.
    pub unit: String,
    /// Its state.
    pub state: TaskState,
    /// The results the action set (`action-set key=value`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub results: BTreeMap<String, String>,
    /// The progress messages the action logged (`action-log`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<LogEntry>,
    /// The end of its standard output, bounded in size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// The end of its standard error, bounded in size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// The exit code of the action's executable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why the task failed (`action-fail`), was cancelled or aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it started running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// The Job that runs the task, for an operator installed as Deployments
    /// (whose unit is named after its Deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

impl UnitTask {
    /// A task of `unit` that has not started.
    pub fn pending(unit: &str) -> UnitTask {
        UnitTask {
            unit: unit.to_owned(),
            state: TaskState::Pending,
            results: BTreeMap::new(),
            log: Vec::new(),
            stdout: None,
            stderr: None,
            exit_code: None,
            message: None,
            started_at: None,
            completed_at: None,
            job: None,
        }
    }
}

/// One progress message of a task.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    /// When it was logged.
    pub time: Time,
    /// The message.
    pub message: String,
}

/// The states of a task (and of an action as a whole), as Juju's.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    /// Accepted, waiting for its unit.
    Pending,
    /// Running on its unit.
    Running,
    /// Ran and succeeded.
    Completed,
    /// Ran and failed (`action-fail`, a non-zero exit, a timeout), or was
    /// refused before anything ran.
    Failed,
    /// Cancelled while pending: it never ran.
    Cancelled,
    /// Its unit was lost (or stopped) before it ended.
    Aborted,
}

impl TaskState {
    /// Every state.
    pub const ALL: [TaskState; 6] = [
        TaskState::Pending,
        TaskState::Running,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Cancelled,
        TaskState::Aborted,
    ];

    /// Whether the task has ended and will not change again.
    pub fn is_finished(self) -> bool {
        !matches!(self, TaskState::Pending | TaskState::Running)
    }

    /// The state as written, e.g. `completed`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Running => "running",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
            TaskState::Aborted => "aborted",
        }
    }
}

/// The condition types of an Action.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ActionConditionType {
    /// The action was checked and its tasks queued: the operator is
    /// installed, declares it, the parameters fit its schema and the units
    /// exist.
    Accepted,
}

impl ActionConditionType {
    /// The condition type as written in `status.conditions[].type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "Accepted",
        }
    }
}

/// The reasons of an Action's `Accepted` condition.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ActionReason {
    /// Accepted: its tasks are queued on its units.
    Queued,
    /// No CSV of the operator is in the namespace, or none has succeeded.
    NotInstalled,
    /// The CSV's declaration of actions cannot be read.
    InvalidDeclaration,
    /// The operator declares no action of that name.
    UnknownAction,
    /// The parameters do not fit the action's schema.
    InvalidParams,
    /// A unit the spec names is not a unit of the operator.
    UnknownUnit,
    /// The operator has no unit to run on: no machine runs it yet.
    NoUnits,
    /// The operator is installed as Deployments and the action declares no
    /// command to run in a Job (`job.command`).
    NoCommand,
    /// The action's `job` names a Deployment that the CSV's install strategy
    /// does not have, or a container that Deployment does not have, or the
    /// Deployment's spec cannot be read.
    UnknownDeployment,
    /// The spec asks for the leader and names units as well.
    ConflictingTargets,
    /// The spec asks for the leader, and no unit of the operator leads.
    NoLeader,
}

impl ActionReason {
    /// Every reason.
    pub const ALL: [ActionReason; 11] = [
        Self::Queued,
        Self::NotInstalled,
        Self::InvalidDeclaration,
        Self::UnknownAction,
        Self::InvalidParams,
        Self::UnknownUnit,
        Self::NoUnits,
        Self::NoCommand,
        Self::UnknownDeployment,
        Self::ConflictingTargets,
        Self::NoLeader,
    ];

    /// The reason as written in `status.conditions[].reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "Queued",
            Self::NotInstalled => "NotInstalled",
            Self::InvalidDeclaration => "InvalidDeclaration",
            Self::UnknownAction => "UnknownAction",
            Self::InvalidParams => "InvalidParams",
            Self::UnknownUnit => "UnknownUnit",
            Self::NoUnits => "NoUnits",
            Self::NoCommand => "NoCommand",
            Self::UnknownDeployment => "UnknownDeployment",
            Self::ConflictingTargets => "ConflictingTargets",
            Self::NoLeader => "NoLeader",
        }
    }
}

/// The tasks as a list keyed on `unit`.
fn tasks_list_map(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = <Vec<UnitTask>>::json_schema(generator);
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert("x-kubernetes-list-map-keys".into(), serde_json::json!(["unit"]));
    schema
}
