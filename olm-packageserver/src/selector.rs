//! Label and field selectors of list and watch requests, in the Kubernetes
//! syntax: `a=b`, `a==b`, `a!=b`, `a in (b,c)`, `a notin (b,c)`, `a`, `!a`.

use std::collections::BTreeMap;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// The label has one of the values.
    In(String, Vec<String>),
    /// The label is absent or has none of the values.
    NotIn(String, Vec<String>),
    /// The label is set.
    Exists(String),
    /// The label is not set.
    DoesNotExist(String),
}

/// A label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

/// Why a selector cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unable to parse selector {selector:?}: {reason}")]
pub struct SelectorError {
    /// The selector as given.
    pub selector: String,
    /// What is wrong.
    pub reason: String,
}

impl LabelSelector {
    /// Parses `text` (empty: everything).
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let fail = |reason: String| SelectorError {
            selector: text.to_owned(),
            reason,
        };
        split_top_level(text)
            .into_iter()
            .map(|part| requirement(part.trim()).map_err(fail))
            .collect::<Result<Vec<_>, _>>()
            .map(LabelSelector)
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(key) => labels.contains_key(key),
            Requirement::DoesNotExist(key) => !labels.contains_key(key),
        })
    }
}

/// Splits on the commas outside parentheses; empty parts are dropped.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

fn requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key_of(key)?));
    }
    for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((key, value)) = part.split_once(op) {
            let (key, value) = (key_of(key)?, value.trim().to_owned());
            return Ok(if negated {
                Requirement::NotIn(key, vec![value])
            } else {
                Requirement::In(key, vec![value])
            });
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim();
        for (op, negated) in [("notin", true), ("in", false)] {
            if let Some(list) = rest.strip_prefix(op) {
                let list = list.trim();
                let values = list
                    .strip_prefix('(')
                    .and_then(|l| l.strip_suffix(')'))
                    .ok_or_else(|| format!("expected a parenthesised list after {op:?} in {part:?}"))?
                    .split(',')
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty())
                    .collect();
                let key = key_of(key)?;
                return Ok(if negated {
                    Requirement::NotIn(key, values)
                } else {
                    Requirement::In(key, values)
                });
            }
        }
        return Err(format!("unknown operator in {part:?}"));
    }
    Ok(Requirement::Exists(key_of(part)?))
}

fn key_of(key: &str) -> Result<String, String> {
    let key = key.trim();
    if key.is_empty() || key.contains(char::is_whitespace) {
        return Err(format!("invalid label key {key:?}"));
    }
    Ok(key.to_owned())
}

/// The name a field selector asks for: only `metadata.name` is supported, as in OLM.
pub fn name_of_field_selector(text: &str) -> Result<Option<String>, SelectorError> {
    let mut name = None;
    for part in split_top_level(text) {
        let part = part.trim();
        let Some((field, value)) = part.split_once("==").or_else(|| part.split_once('=')) else {
            return Err(SelectorError {
                selector: text.to_owned(),
                reason: format!("field label not supported: {part}"),
            });
        };
        if field.trim() != "metadata.name" {
            return Err(SelectorError {
                selector: text.to_owned(),
                reason: format!("field label not supported: {}", field.trim()),
            });
        }
        name = Some(value.trim().to_owned());
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn every_operator_selects_as_kubernetes_does() {
        let l = labels(&[
            ("catalog", "community"),
            ("operatorframework.io/arch.amd64", "supported"),
        ]);
        for (selector, expected) in [
            ("", true),
            ("catalog=community", true),
            ("catalog==community", true),
            ("catalog!=community", false),
            ("catalog in (a, community)", true),
            ("catalog notin (a,community)", false),
            ("catalog in (a,community),operatorframework.io/arch.amd64", true),
            ("catalog in (a,b),operatorframework.io/arch.amd64", false),
            ("operatorframework.io/arch.arm64", false),
            ("!operatorframework.io/arch.arm64", true),
            ("provider=Acme", false),
            ("provider!=Acme", true),
        ] {
            assert_eq!(
                LabelSelector::parse(selector).unwrap().matches(&l),
                expected,
                "{selector}"
            );
        }
        assert!(LabelSelector::parse("a b").is_err());
        assert!(LabelSelector::parse("a in b").is_err());
    }

    #[test]
    fn only_the_name_field_is_selectable() {
        assert_eq!(
            name_of_field_selector("metadata.name=etcd").unwrap(),
            Some("etcd".into())
        );
        assert_eq!(name_of_field_selector("").unwrap(), None);
        let err = name_of_field_selector("status.catalogSource=x").unwrap_err();
        assert!(
            err.to_string()
                .contains("field label not supported: status.catalogSource")
        );
    }
}
