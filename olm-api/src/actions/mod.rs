//! The actions a CSV declares, as Juju's charms declare them in
//! `actions.yaml`: day-2 operations (a backup, a failover, a re-index) that a
//! user runs on the operator's units, each with a description and a JSON
//! Schema for its parameters. The first step toward running actions: bundles,
//! catalogs and the PackageManifest API carry the declaration; nothing runs
//! yet.
//!
//! The declaration is the CSV annotation [`ANNOTATION`] (`olm-rs.dev/actions`),
//! YAML or JSON, a map from action name to the action, in Juju's form:
//!
//! ```yaml
//! olm-rs.dev/actions: |
//!   backup:
//!     description: Write a backup of the database.
//!     params:
//!       path: {type: string, description: Where to write it., minLength: 1}
//!       compress: {type: boolean}
//!     required: [path]
//!   pause:
//!     description: Stop serving writes.
//! ```
//!
//! `params` maps each parameter's name to its JSON Schema; `required` lists
//! the parameters a run must give; `additionalProperties` says whether a run
//! may give parameters that `params` does not name. olm-rs defaults it to
//! `false`, as charmcraft and Juju 4 do (Juju 3's `actions.yaml` defaulted to
//! `true`): a misspelt parameter is refused rather than ignored. Juju's
//! `parallel` and `execution-group` are not supported yet and are refused.
//!
//! An operator installed as Deployments runs an action as a Job: its
//! declaration names the command (`job`, see [`JobSpec`]), and the Job takes
//! the image, ServiceAccount and environment of one of the CSV's Deployments:
//!
//! ```yaml
//! olm-rs.dev/actions: |
//!   backup:
//!     description: Write a backup of the database.
//!     job: {command: [/manager, backup], deployment: db-operator, container: manager}
//! ```
//!
//! OLM ignores the annotation. A catalog render carries it on as the bundle
//! property [`PROPERTY`] (`olm-rs.actions`), whose value is the declaration as
//! JSON; OLM ignores property types it does not know.
//!
//! [`validate_params`] checks the parameters of a run against an action's
//! schema. It implements a subset of JSON Schema, the keywords actions use:
//! `type`, `enum`, `minimum`, `maximum`, `minLength`, `maxLength`,
//! `properties`, `required`, `additionalProperties` and `items`; other
//! keywords are carried but not checked.

mod params;
mod schema;

use std::{collections::BTreeMap, fmt};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use params::{ParamError, ParamProblem, validate_params};
pub use schema::SchemaProblem;

/// The CSV annotation that declares the actions.
pub const ANNOTATION: &str = crate::labels::ACTIONS;

/// The bundle property a catalog carries the declaration in.
pub const PROPERTY: &str = "olm-rs.actions";

/// The longest action name: a DNS label, so that it can name objects.
const MAX_NAME: usize = 63;

/// One action an operator offers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    /// The action's name: lowercase letters and '-'.
    pub name: String,
    /// What running it does.
    pub description: String,
    /// Each parameter's name and its JSON Schema.
    pub params: BTreeMap<String, Value>,
    /// The parameters a run must give.
    pub required: Vec<String>,
    /// Whether a run may give parameters `params` does not name.
    pub additional_properties: bool,
    /// How the action runs as a Job, for an operator installed as
    /// Deployments; `None` when it declares no command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<JobSpec>,
}

/// How an action of an operator installed as Deployments runs as a Job: the
/// command, and which Deployment of the CSV's install strategy and which of
/// its containers give the image, ServiceAccount and environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// The command the Job's container runs (its entrypoint and arguments).
    pub command: Vec<String>,
    /// The Deployment, by name; none: the first of the install strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<String>,
    /// The container of that Deployment, by name; none: its first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

impl Action {
    /// The JSON Schema of the action's parameters as a whole: an object of
    /// `params`, `required` and `additionalProperties`.
    pub fn schema(&self) -> Value {
        let properties: Map<String, Value> = self.params.clone().into_iter().collect();
        serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": self.required,
            "additionalProperties": self.additional_properties,
        })
    }

    /// Whether a run must give parameter `name`.
    pub fn requires(&self, name: &str) -> bool {
        self.required.iter().any(|r| r == name)
    }
}

/// Every action a CSV declares, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Actions(pub BTreeMap<String, Action>);

impl Actions {
    /// The action named `name`.
    pub fn get(&self, name: &str) -> Option<&Action> {
        self.0.get(name)
    }

    /// Every action, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Action> {
        self.0.values()
    }

    /// Whether no action is declared.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The declaration of `csv`'s annotations, `None` when they carry none.
    pub fn of_annotations<'a, I>(csv: &str, annotations: I) -> Result<Option<Actions>, ActionsError>
    where
        I: IntoIterator<Item = (&'a String, &'a String)>,
    {
        annotations
            .into_iter()
            .find(|(key, _)| key.as_str() == ANNOTATION)
            .map(|(_, text)| Actions::parse(csv, text))
            .transpose()
    }

    /// Parses the annotation's text (YAML or JSON) of CSV `csv`.
    pub fn parse(csv: &str, text: &str) -> Result<Actions, ActionsError> {
        Actions::from_value(csv, Declared::Annotation, Value::String(text.to_owned()))
    }

    /// Reads a declaration from JSON, from the annotation or the catalog
    /// property (`declared`) of CSV `csv`: a map of actions, or a string of
    /// YAML or JSON text that holds one (as a render carries an annotation
    /// that does not parse); `null` or empty text declares nothing.
    pub fn from_value(csv: &str, declared: Declared, value: Value) -> Result<Actions, ActionsError> {
        let fail = |cause| ActionsError {
            csv: csv.to_owned(),
            declared,
            cause,
        };
        let value = match value {
            Value::String(text) => declaration(&text).map_err(fail)?,
            value => value,
        };
        if value.is_null() {
            return Ok(Actions::default());
        }
        if !value.is_object() {
            return Err(fail(ActionsCause::Shape {
                field: ".".to_owned(),
                message: format!("expected a map, found {value}"),
            }));
        }
        if let Some((name, found)) = value
            .as_object()
            .and_then(|actions| actions.iter().find(|(_, action)| !action.is_object()))
        {
            return Err(fail(ActionsCause::Shape {
                field: name.clone(),
                message: format!("expected a map, found {found}"),
            }));
        }
        let wire: BTreeMap<String, WireAction> = serde_path_to_error::deserialize(value).map_err(|e| {
            fail(ActionsCause::Shape {
                field: e.path().to_string(),
                message: e.inner().to_string(),
            })
        })?;
        wire.into_iter()
            .map(|(name, wire)| Ok((name.clone(), action(name, wire)?)))
            .collect::<Result<_, _>>()
            .map(Actions)
            .map_err(fail)
    }
}

/// The declaration's text (YAML or JSON) as JSON; `null` when it is empty.
/// An action named twice is refused, never silently dropped.
pub fn declaration(text: &str) -> Result<Value, ActionsCause> {
    crate::declaration::parse(text).map_err(ActionsCause::Syntax)
}

/// The value of the catalog property [`PROPERTY`] that carries the
/// annotation's text unchanged ([`crate::declaration::property_value`]).
pub use crate::declaration::property_value;

/// Where a declaration was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declared {
    /// The CSV annotation [`ANNOTATION`].
    Annotation,
    /// The bundle property [`PROPERTY`] of a catalog.
    Property,
}

impl fmt::Display for Declared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Declared::Annotation => write!(f, "annotation {ANNOTATION}"),
            Declared::Property => write!(f, "property {PROPERTY}"),
        }
    }
}

/// A declaration of actions that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CSV {csv}: {declared}: {cause}")]
pub struct ActionsError {
    /// The CSV (bundle) that declares them.
    pub csv: String,
    /// Where the declaration was read from.
    pub declared: Declared,
    /// What is wrong.
    pub cause: ActionsCause,
}

/// What is wrong with a declaration of actions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionsCause {
    /// The text is neither YAML nor JSON.
    #[error("not YAML or JSON ({0}); write a map from action name to {{description, params, required}}")]
    Syntax(String),
    /// A field does not fit the declaration's shape.
    #[error(
        "at `{field}`: {message}; each action has description, params (a map from parameter name to its JSON Schema), required, additionalProperties and job ({{command, deployment, container}})"
    )]
    Shape {
        /// The path of the field, e.g. `backup.required`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// An action name that is not lowercase letters and '-'.
    #[error(
        "action name {0:?} is not valid; use lowercase letters and '-', starting and ending with a letter, at most 63 characters"
    )]
    BadName(String),
    /// An action whose parameters are not a JSON Schema object.
    #[error("action {action:?}: parameter schema at `{at}`: {problem}")]
    Schema {
        /// The action.
        action: String,
        /// Where in its schema, e.g. `params.compression.properties.kind`.
        at: String,
        /// What is wrong.
        problem: SchemaProblem,
    },
}

/// One action as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireAction {
    #[serde(default)]
    description: String,
    #[serde(default, rename = "type")]
    type_: Option<Value>,
    #[serde(default)]
    params: BTreeMap<String, Value>,
    #[serde(default)]
    required: Vec<String>,
    #[serde(default, rename = "additionalProperties")]
    additional_properties: Option<bool>,
    #[serde(default)]
    job: Option<JobSpec>,
}

/// One action checked.
fn action(name: String, wire: WireAction) -> Result<Action, ActionsCause> {
    if !is_action_name(&name) {
        return Err(ActionsCause::BadName(name));
    }
    let schema_error = |at: String, problem| ActionsCause::Schema {
        action: name.clone(),
        at,
        problem,
    };
    if let Some(type_) = wire.type_.filter(|t| t != "object") {
        return Err(schema_error(
            "type".into(),
            SchemaProblem::TopType(type_.to_string()),
        ));
    }
    for (param, schema) in &wire.params {
        schema::check(&format!("params.{param}"), schema).map_err(|(at, p)| schema_error(at, p))?;
    }
    if wire.job.as_ref().is_some_and(|job| job.command.is_empty()) {
        return Err(ActionsCause::Shape {
            field: format!("{name}.job.command"),
            message: "the command is empty".to_owned(),
        });
    }
    if let Some(missing) = wire.required.iter().find(|r| !wire.params.contains_key(*r)) {
        return Err(schema_error(
            "required".into(),
            SchemaProblem::UnknownRequired(missing.clone()),
        ));
    }
    Ok(Action {
        name,
        description: wire.description,
        params: wire.params,
        required: wire.required,
        additional_properties: wire.additional_properties.unwrap_or(false),
        job: wire.job,
    })
}

/// Lowercase letters and '-', starting and ending with a letter, at most 63
/// characters (Juju's rule for action names, within a DNS label).
fn is_action_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    name.len() <= MAX_NAME
        && bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes.last().is_some_and(u8::is_ascii_lowercase)
        && bytes.iter().all(|b| b.is_ascii_lowercase() || *b == b'-')
}

#[cfg(test)]
mod tests;
