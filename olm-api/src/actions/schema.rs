//! Checks that a declared parameter is a JSON Schema that
//! [`super::validate_params`] can apply: a map whose keywords it knows
//! have values of the right kind.

use serde_json::Value;

/// The JSON Schema types.
pub(super) const TYPES: [&str; 7] = [
    "string", "integer", "number", "boolean", "array", "object", "null",
];

/// What is wrong with a parameter's JSON Schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaProblem {
    /// A schema that is not a map.
    #[error("expected a JSON Schema (a map such as {{type: string}}), found {0}")]
    NotAMap(String),
    /// A `type` that JSON Schema does not know.
    #[error(
        "unknown type {0}; use string, integer, number, boolean, array, object or null, or a list of them"
    )]
    UnknownType(String),
    /// A `type` other than `object` for the parameters as a whole.
    #[error("the parameters of an action are an object, found type {0}; leave type out or write object")]
    TopType(String),
    /// `properties` that is not a map of schemas.
    #[error("properties must be a map from name to JSON Schema")]
    PropertiesNotAMap,
    /// `required` that is not a list of names.
    #[error("required must be a list of property names")]
    RequiredNotAList,
    /// A required name that the schema's properties do not declare.
    #[error("{0:?} is required but not declared; declare it, or remove it from required")]
    UnknownRequired(String),
    /// A keyword whose value has the wrong kind.
    #[error("{keyword} must be {expected}")]
    Keyword {
        /// The keyword, e.g. `minLength`.
        keyword: &'static str,
        /// What it must be.
        expected: &'static str,
    },
}

/// Checks the schema `schema` found at `at`; the error says where, within it.
pub(super) fn check(at: &str, schema: &Value) -> Result<(), (String, SchemaProblem)> {
    let Some(map) = schema.as_object() else {
        return Err((at.to_owned(), SchemaProblem::NotAMap(schema.to_string())));
    };
    let fail = |keyword: &str, problem| Err((format!("{at}.{keyword}"), problem));
    if let Some(type_) = map.get("type")
        && !is_type(type_)
    {
        return fail("type", SchemaProblem::UnknownType(type_.to_string()));
    }
    for (keyword, expected, ok) in keyword_kinds(map) {
        if !ok {
            return fail(keyword, SchemaProblem::Keyword { keyword, expected });
        }
    }
    let properties = match map.get("properties") {
        None => None,
        Some(Value::Object(properties)) => Some(properties),
        Some(_) => return fail("properties", SchemaProblem::PropertiesNotAMap),
    };
    for (name, property) in properties.into_iter().flatten() {
        check(&format!("{at}.properties.{name}"), property)?;
    }
    if let Some(required) = map.get("required") {
        let Some(names) = required.as_array().filter(|r| r.iter().all(Value::is_string)) else {
            return fail("required", SchemaProblem::RequiredNotAList);
        };
        if let Some(missing) = names
            .iter()
            .filter_map(Value::as_str)
            .find(|n| !properties.is_some_and(|p| p.contains_key(*n)))
        {
            return fail("required", SchemaProblem::UnknownRequired(missing.to_owned()));
        }
    }
    match map.get("additionalProperties") {
        Some(extra @ Value::Object(_)) => check(&format!("{at}.additionalProperties"), extra)?,
        Some(Value::Bool(_)) | None => {}
        Some(_) => {
            return fail(
                "additionalProperties",
                SchemaProblem::Keyword {
                    keyword: "additionalProperties",
                    expected: "true, false or a JSON Schema",
                },
            );
        }
    }
    if let Some(items) = map.get("items") {
        check(&format!("{at}.items"), items)?;
    }
    Ok(())
}

/// Each simple keyword, what its value must be, and whether it is.
fn keyword_kinds(map: &serde_json::Map<String, Value>) -> [(&'static str, &'static str, bool); 6] {
    let is = |keyword: &str, ok: fn(&Value) -> bool| map.get(keyword).is_none_or(ok);
    let count = |v: &Value| v.is_u64();
    [
        ("description", "a string", is("description", Value::is_string)),
        ("enum", "a list of values", is("enum", Value::is_array)),
        ("minimum", "a number", is("minimum", Value::is_number)),
        ("maximum", "a number", is("maximum", Value::is_number)),
        ("minLength", "a whole number of 0 or more", is("minLength", count)),
        ("maxLength", "a whole number of 0 or more", is("maxLength", count)),
    ]
}

/// A type name of JSON Schema, or a non-empty list of them.
fn is_type(type_: &Value) -> bool {
    let known = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
    match type_ {
        Value::Array(types) => !types.is_empty() && types.iter().all(known),
        single => known(single),
    }
}
