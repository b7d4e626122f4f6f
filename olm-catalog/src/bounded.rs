//! JSON values read from YAML within a budget of bytes. A YAML alias repeats the node its anchor
//! names, so aliases of aliases make a few kilobytes of text stand for gigabytes of values (the
//! YAML form of a decompression bomb); the YAML parser's own limits count events, not the bytes
//! an alias repeats. Each value read here is charged its bytes, and reading stops with an error
//! once a text's budget is spent.

use std::cell::Cell;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// What a text may expand to: this many times its own bytes...
pub(crate) const EXPANSION: usize = 16;
/// ...and this much more, for short texts.
pub(crate) const SLACK: usize = 1 << 20;
/// What a value costs besides the bytes of its strings.
const NODE: usize = 8;

thread_local! {
    /// The bytes the YAML being read on this thread may still expand to.
    static LEFT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The budget of a YAML text of `len` bytes.
pub(crate) fn budget(len: usize) -> usize {
    len.saturating_mul(EXPANSION).saturating_add(SLACK)
}

/// Runs `read` (which reads YAML as [`Bounded`] values) with `budget` bytes to expand to.
pub(crate) fn within<T>(budget: usize, read: impl FnOnce() -> T) -> T {
    let before = LEFT.replace(budget);
    let out = read();
    LEFT.set(before);
    out
}

/// A JSON value, read within the budget of [`within`].
#[derive(Debug)]
pub(crate) struct Bounded(pub(crate) Value);

fn charge<E: de::Error>(bytes: usize) -> Result<(), E> {
    let left = LEFT.get();
    let cost = bytes.saturating_add(NODE);
    if cost > left {
        return Err(E::custom(format!(
            "the YAML expands to more than {EXPANSION} times its size (aliases repeating aliases?): refused before it fills memory"
        )));
    }
    LEFT.set(left - cost);
    Ok(())
}

impl<'de> Deserialize<'de> for Bounded {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(BoundedVisitor).map(Bounded)
    }
}

struct BoundedVisitor;

impl<'de> Visitor<'de> for BoundedVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        charge(0)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        charge(0)?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        charge(0)?;
        Ok(Value::from(v))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        // As serde_json reads an integer too large for 64 bits: a float.
        self.visit_f64(v as f64)
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        self.visit_f64(v as f64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        charge(0)?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        charge(v.len())?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        charge(v.len())?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        charge(0)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Bounded::deserialize(deserializer).map(|b| b.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        charge(0)?;
        let mut out = Vec::new();
        while let Some(Bounded(value)) = seq.next_element()? {
            out.push(value);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        charge(0)?;
        let mut out = Map::new();
        // Keys as a JSON value reads them: as strings.
        while let Some(key) = map.next_key::<String>()? {
            charge(key.len())?;
            let Bounded(value) = map.next_value()?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, budget: usize) -> Result<Value, serde_saphyr::Error> {
        within(budget, || serde_saphyr::from_str::<Bounded>(text).map(|b| b.0))
    }

    #[test]
    fn values_read_as_the_yaml_parser_reads_them_within_the_budget() {
        let text = "a: [1, -2, 1.5, true, null, x]\nb: {c: ''}\n";
        let plain: Value = serde_saphyr::from_str(text).unwrap();
        assert_eq!(read(text, budget(text.len())).unwrap(), plain);
    }

    #[test]
    fn a_text_that_expands_past_its_budget_is_refused() {
        let text = "a: &a xxxxxxxxxx\nb: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n";
        assert!(read(text, 1000).is_ok());
        let error = read(text, 100).unwrap_err().to_string();
        assert!(error.contains("aliases repeating aliases"), "{error}");
    }
}
