//! What the declarations olm-rs reads from a CSV annotation (relation
//! [endpoints](crate::endpoints), [actions](crate::actions)) share: the
//! annotation's text read as YAML or JSON, and the catalog property value
//! that carries it unchanged.

use serde_json::Value;

/// The declaration's text (YAML or JSON) as JSON; `null` when it is empty.
/// The error is the parser's own words.
pub fn parse(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_saphyr::from_str::<Value>(text).map_err(|e| e.to_string())
}

/// The value of the catalog property that carries the annotation's `text`
/// unchanged: the declaration as JSON, or the text itself when it is not YAML
/// (validation then names what is wrong); `None` when the text is empty.
pub fn property_value(text: &str) -> Option<Value> {
    match parse(text) {
        Ok(Value::Null) => None,
        Ok(value) => Some(value),
        Err(_) => Some(Value::String(text.to_owned())),
    }
}
