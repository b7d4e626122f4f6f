//! How many replicas the Deployments of an operator in pods run, as its
//! Subscription asks through olm-rs's own annotation
//! [`REPLICAS`](crate::labels::REPLICAS). OLM's `spec.config` has no such
//! field, so an annotation carries it: OLM ignores it, and a GitOps
//! repository can hold it beside the Subscription.

use std::collections::BTreeMap;

use crate::labels::REPLICAS;

/// The most replicas the annotation may ask for.
pub const MAX_REPLICAS: i32 = 1000;

/// An annotation value that is not a replica count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "annotation {REPLICAS} is {value:?}, not a whole number from 0 to {MAX_REPLICAS}; the Deployments keep the replicas their CSV declares until it is fixed"
)]
pub struct InvalidReplicas {
    /// The value found.
    pub value: String,
}

/// The replicas `annotations` ask for: none when the annotation is unset.
pub fn replicas(annotations: &BTreeMap<String, String>) -> Result<Option<i32>, InvalidReplicas> {
    let Some(value) = annotations.get(REPLICAS) else {
        return Ok(None);
    };
    match value.trim().parse::<i32>() {
        Ok(n) if (0..=MAX_REPLICAS).contains(&n) => Ok(Some(n)),
        _ => Err(InvalidReplicas { value: value.clone() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_number_in_range_is_read_and_anything_else_is_named() {
        let of = |value: &str| replicas(&BTreeMap::from([(REPLICAS.to_owned(), value.to_owned())]));
        assert_eq!(replicas(&BTreeMap::new()), Ok(None));
        assert_eq!(of("3"), Ok(Some(3)));
        assert_eq!(of(" 0 "), Ok(Some(0)));
        assert_eq!(of("1000"), Ok(Some(1000)));
        for bad in ["-1", "1001", "three", "", "2.5", "99999999999"] {
            let err = of(bad).unwrap_err();
            assert_eq!(err.value, bad);
            assert!(err.to_string().contains(REPLICAS), "{err}");
        }
    }
}
