//! The parameters of a run checked against an action's JSON Schema, before
//! anything runs. A subset of JSON Schema: `type`, `enum`, `minimum`,
//! `maximum`, `minLength`, `maxLength`, `properties`, `required`,
//! `additionalProperties` and `items`; other keywords are not checked.

use serde_json::{Map, Value};

use super::Action;

/// Parameters that do not fit an action's schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("action {action:?}: parameter `{at}`: {problem}")]
pub struct ParamError {
    /// The action.
    pub action: String,
    /// Where, e.g. `compression.kind`; `.` for the parameters as a whole.
    pub at: String,
    /// What is wrong.
    pub problem: ParamProblem,
}

/// What is wrong with a parameter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamProblem {
    /// A value of another type than the schema's.
    #[error("expected {expected}, found {found}")]
    Type {
        /// The schema's type(s).
        expected: String,
        /// The value given.
        found: Value,
    },
    /// A value outside the schema's `enum`.
    #[error("{found} is not one of {allowed}")]
    NotInEnum {
        /// The value given.
        found: Value,
        /// The values allowed.
        allowed: Value,
    },
    /// A number below `minimum`.
    #[error("{found} is less than the minimum {minimum}")]
    BelowMinimum {
        /// The value given.
        found: Value,
        /// The minimum.
        minimum: Value,
    },
    /// A number above `maximum`.
    #[error("{found} is more than the maximum {maximum}")]
    AboveMaximum {
        /// The value given.
        found: Value,
        /// The maximum.
        maximum: Value,
    },
    /// A string shorter than `minLength`.
    #[error("is {length} characters long, shorter than minLength {limit}")]
    TooShort {
        /// Its length in characters.
        length: usize,
        /// The limit.
        limit: u64,
    },
    /// A string longer than `maxLength`.
    #[error("is {length} characters long, longer than maxLength {limit}")]
    TooLong {
        /// Its length in characters.
        length: usize,
        /// The limit.
        limit: u64,
    },
    /// A required parameter not given.
    #[error("is required; give it")]
    Missing,
    /// A parameter the schema does not declare, where it allows none other.
    #[error("is not a parameter of this action; check its spelling")]
    Unexpected,
}

/// Checks `params` (the parameters of one run, a JSON object) against
/// `action`'s schema; the first thing wrong is named.
pub fn validate_params(action: &Action, params: &Value) -> Result<(), ParamError> {
    check(&action.schema(), params, "").map_err(|(at, problem)| ParamError {
        action: action.name.clone(),
        at: if at.is_empty() { ".".to_owned() } else { at },
        problem,
    })
}

type Checked = Result<(), (String, ParamProblem)>;

/// Checks `value`, found at `at`, against `schema`.
fn check(schema: &Value, value: &Value, at: &str) -> Checked {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    let fail = |problem| Err((at.to_owned(), problem));
    if let Some(type_) = schema.get("type")
        && !has_type(value, type_)
    {
        return fail(ParamProblem::Type {
            expected: type_names(type_),
            found: value.clone(),
        });
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.iter().any(|a| same(a, value))
    {
        return fail(ParamProblem::NotInEnum {
            found: value.clone(),
            allowed: Value::Array(allowed.clone()),
        });
    }
    if let Some(problem) = number_problem(schema, value).or_else(|| length_problem(schema, value)) {
        return fail(problem);
    }
    match value {
        Value::Object(members) => check_members(schema, members, at),
        Value::Array(items) => match schema.get("items") {
            Some(item) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, v)| check(item, v, &format!("{at}[{i}]"))),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The members of an object: required ones given, each declared one fits its
/// schema, and the others are allowed by `additionalProperties`.
fn check_members(schema: &Map<String, Value>, members: &Map<String, Value>, at: &str) -> Checked {
    let path = |name: &str| {
        if at.is_empty() {
            name.to_owned()
        } else {
            format!("{at}.{name}")
        }
    };
    let required = schema.get("required").and_then(Value::as_array);
    if let Some(missing) = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|name| !members.contains_key(*name))
    {
        return Err((path(missing), ParamProblem::Missing));
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, value) in members {
        match (
            properties.and_then(|p| p.get(name)),
            schema.get("additionalProperties"),
        ) {
            (Some(declared), _) => check(declared, value, &path(name))?,
            (None, Some(Value::Bool(false))) => return Err((path(name), ParamProblem::Unexpected)),
            (None, Some(extra)) => check(extra, value, &path(name))?,
            (None, None) => {}
        }
    }
    Ok(())
}

/// `minimum` and `maximum` of a number.
fn number_problem(schema: &Map<String, Value>, value: &Value) -> Option<ParamProblem> {
    let n = value.as_f64()?;
    let bound = |keyword| schema.get(keyword).filter(|b| b.is_number());
    if let Some(minimum) = bound("minimum").filter(|m| m.as_f64().is_some_and(|m| n < m)) {
        return Some(ParamProblem::BelowMinimum {
            found: value.clone(),
            minimum: minimum.clone(),
        });
    }
    let maximum = bound("maximum").filter(|m| m.as_f64().is_some_and(|m| n > m))?;
    Some(ParamProblem::AboveMaximum {
        found: value.clone(),
        maximum: maximum.clone(),
    })
}

/// `minLength` and `maxLength` of a string, in characters.
fn length_problem(schema: &Map<String, Value>, value: &Value) -> Option<ParamProblem> {
    let length = value.as_str()?.chars().count();
    let limit = |keyword| schema.get(keyword).and_then(Value::as_u64);
    if let Some(limit) = limit("minLength").filter(|l| (length as u64) < *l) {
        return Some(ParamProblem::TooShort { length, limit });
    }
    let limit = limit("maxLength").filter(|l| (length as u64) > *l)?;
    Some(ParamProblem::TooLong { length, limit })
}

/// Whether `value` has the type, or one of the types, `type_` names.
fn has_type(value: &Value, type_: &Value) -> bool {
    let one = |t: &Value| match t.as_str() {
        Some("string") => value.is_string(),
        Some("integer") => is_integer(value),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("array") => value.is_array(),
        Some("object") => value.is_object(),
        Some("null") => value.is_null(),
        _ => true,
    };
    match type_ {
        Value::Array(types) => types.iter().any(one),
        single => one(single),
    }
}

/// A number without a fractional part, `2.0` included, as JSON Schema counts integers.
fn is_integer(value: &Value) -> bool {
    value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// Equal as JSON Schema compares: numbers by value, so that `1` is `1.0`.
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The type(s) for a message: `string`, or `string or null`.
fn type_names(type_: &Value) -> String {
    match type_ {
        Value::Array(types) => types
            .iter()
            .map(|t| t.as_str().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join(" or "),
        single => single.as_str().unwrap_or("?").to_owned(),
    }
}
