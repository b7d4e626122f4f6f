//! Structural mutations of JSON trees, shared by the property tests of the bundle and ConfigMap
//! readers: a node (picked by pre-order index) loses a key, gets a value of another type, or is
//! wrapped in nesting.

use proptest::prelude::*;
use serde_json::{Value, json};

/// One structural change; `at` picks the node (modulo the number of nodes), `key` a key or
/// element of it.
#[derive(Debug, Clone)]
pub enum Mutation {
    Remove { at: usize, key: usize },
    Replace { at: usize, with: Value },
    Nest { at: usize, depth: usize },
}

/// Values of every JSON type, including edge numbers, odd text and a long string.
pub fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        Just(Value::from(f64::MAX)),
        "[ -~]{0,12}".prop_map(Value::String),
        Just(Value::String(String::new())),
        Just(Value::String("\u{feff}\0\u{202e}é,,".to_owned())),
        Just(Value::String("x".repeat(10_000))),
        Just(Value::String(">=1.0.0 <".to_owned())),
        Just(json!([])),
        Just(json!({})),
        Just(json!([1, "a", null])),
        Just(json!({"kind": "ClusterServiceVersion"})),
    ]
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0usize..400;
    prop_oneof![
        1 => (at.clone(), any::<usize>()).prop_map(|(at, key)| Mutation::Remove { at, key }),
        2 => (at.clone(), odd_value()).prop_map(|(at, with)| Mutation::Replace { at, with }),
        1 => (at, 1usize..40).prop_map(|(at, depth)| Mutation::Nest { at, depth }),
    ]
}

fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(map) => map.values().map(count).sum(),
        _ => 0,
    }
}

/// The node of pre-order index `index` (the root is 0); `index` must be below `count(root)`.
fn node_mut(root: &mut Value, index: usize) -> &mut Value {
    if index == 0 {
        return root;
    }
    let mut rest = index - 1;
    let children: Vec<&mut Value> = match root {
        Value::Array(items) => items.iter_mut().collect(),
        Value::Object(map) => map.values_mut().collect(),
        _ => unreachable!("index {index} is beyond a leaf"),
    };
    for child in children {
        let size = count(child);
        if rest < size {
            return node_mut(child, rest);
        }
        rest -= size;
    }
    unreachable!("index beyond the tree")
}

pub fn apply(root: &mut Value, mutation: &Mutation) {
    let nodes = count(root);
    match mutation {
        Mutation::Remove { at, key } => match node_mut(root, at % nodes) {
            Value::Array(items) if !items.is_empty() => {
                items.remove(key % items.len());
            }
            Value::Object(map) if !map.is_empty() => {
                let k = map.keys().nth(key % map.len()).cloned().unwrap_or_default();
                map.remove(&k);
            }
            _ => {}
        },
        Mutation::Replace { at, with } => *node_mut(root, at % nodes) = with.clone(),
        Mutation::Nest { at, depth } => {
            let node = node_mut(root, at % nodes);
            let mut value = node.take();
            for i in 0..*depth {
                value = if i % 2 == 0 {
                    json!({ "n": value })
                } else {
                    json!([value])
                };
            }
            *node = value;
        }
    }
}

/// `value` after `mutations`.
pub fn mutated(mut value: Value, mutations: &[Mutation]) -> Value {
    for m in mutations {
        apply(&mut value, m);
    }
    value
}

/// YAML text of a JSON value.
pub fn yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).expect("JSON values serialize as YAML")
}
