//! `config` settings (`KEY=value`, `env.KEY=value`, `nodeSelector.KEY=value`,
//! `annotations.KEY=value`, `resources.limits.memory=1Gi`, `KEY-` to remove)
//! and their effect on a Subscription's `spec.config` (pure).

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{EnvVar, ResourceRequirements},
    apimachinery::pkg::api::resource::Quantity,
};
use olm_api::v1alpha1::SubscriptionConfig;

use crate::error::Error;

/// Which part of the config a setting changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// An environment variable of every container.
    Env(String),
    /// A node selector label.
    NodeSelector(String),
    /// An annotation of the operator's Deployments and Pods.
    Annotation(String),
    /// `resources.requests.<name>`.
    Request(String),
    /// `resources.limits.<name>`.
    Limit(String),
}

/// One setting: a field and its new value (`None` removes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The field.
    pub field: Field,
    /// The value, or `None` to remove.
    pub value: Option<String>,
}

/// Parses `KEY=value` or `KEY-`.
pub fn parse(text: &str) -> Result<Setting, Error> {
    let (key, value) = match text.split_once('=') {
        Some((key, value)) => (key, Some(value.to_owned())),
        None => match text.strip_suffix('-') {
            Some(key) => (key, None),
            None => {
                return Err(Error::Usage(format!(
                    "setting {text:?} is neither KEY=value nor KEY- (to remove KEY)"
                )));
            }
        },
    };
    let bad = || {
        Error::Usage(format!(
            "setting {text:?}: the key must be NAME or env.NAME, nodeSelector.KEY, annotations.KEY, resources.requests.NAME or resources.limits.NAME"
        ))
    };
    let field = if let Some(name) = key.strip_prefix("env.") {
        Field::Env(name.to_owned())
    } else if let Some(name) = key.strip_prefix("nodeSelector.") {
        Field::NodeSelector(name.to_owned())
    } else if let Some(name) = key.strip_prefix("annotations.") {
        Field::Annotation(name.to_owned())
    } else if let Some(name) = key.strip_prefix("resources.requests.") {
        Field::Request(name.to_owned())
    } else if let Some(name) = key.strip_prefix("resources.limits.") {
        Field::Limit(name.to_owned())
    } else if !key.contains('.') {
        Field::Env(key.to_owned())
    } else {
        return Err(bad());
    };
    let name = match &field {
        Field::Env(n)
        | Field::NodeSelector(n)
        | Field::Annotation(n)
        | Field::Request(n)
        | Field::Limit(n) => n,
    };
    if name.is_empty() {
        return Err(bad());
    }
    if let Field::Env(name) = &field {
        let valid = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(Error::Usage(format!(
                "setting {text:?}: {name:?} is not an environment variable name (letters, digits, _)"
            )));
        }
    }
    Ok(Setting { field, value })
}

fn set_map(map: &mut Option<BTreeMap<String, String>>, key: &str, value: &Option<String>) {
    let mut current = map.take().unwrap_or_default();
    match value {
        Some(value) => {
            current.insert(key.to_owned(), value.clone());
        }
        None => {
            current.remove(key);
        }
    }
    *map = (!current.is_empty()).then_some(current);
}

fn set_quantity(map: &mut Option<BTreeMap<String, Quantity>>, key: &str, value: &Option<String>) {
    let mut current = map.take().unwrap_or_default();
    match value {
        Some(value) => {
            current.insert(key.to_owned(), Quantity(value.clone()));
        }
        None => {
            current.remove(key);
        }
    }
    *map = (!current.is_empty()).then_some(current);
}

/// `config` with `settings` applied in order; `None` when nothing is left.
pub fn apply(config: Option<SubscriptionConfig>, settings: &[Setting]) -> Option<SubscriptionConfig> {
    let mut config = config.unwrap_or_default();
    for setting in settings {
        match &setting.field {
            Field::Env(name) => {
                let mut env = config.env.take().unwrap_or_default();
                match &setting.value {
                    Some(value) => match env.iter_mut().find(|v| &v.name == name) {
                        Some(var) => {
                            var.value = Some(value.clone());
                            var.value_from = None;
                        }
                        None => env.push(EnvVar {
                            name: name.clone(),
                            value: Some(value.clone()),
                            value_from: None,
                        }),
                    },
                    None => env.retain(|v| &v.name != name),
                }
                config.env = (!env.is_empty()).then_some(env);
            }
            Field::NodeSelector(key) => set_map(&mut config.node_selector, key, &setting.value),
            Field::Annotation(key) => set_map(&mut config.annotations, key, &setting.value),
            Field::Request(name) | Field::Limit(name) => {
                let mut resources = config.resources.take().unwrap_or_default();
                let map = if matches!(setting.field, Field::Request(_)) {
                    &mut resources.requests
                } else {
                    &mut resources.limits
                };
                set_quantity(map, name, &setting.value);
                config.resources = (resources != ResourceRequirements::default()).then_some(resources);
            }
        }
    }
    (config != SubscriptionConfig::default()).then_some(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(texts: &[&str]) -> Vec<Setting> {
        texts.iter().map(|t| parse(t).expect("a valid setting")).collect()
    }

    #[test]
    fn settings_parse() {
        assert_eq!(
            parse("LOG_LEVEL=debug").unwrap(),
            Setting {
                field: Field::Env("LOG_LEVEL".into()),
                value: Some("debug".into())
            }
        );
        assert_eq!(parse("nodeSelector.disk-").unwrap().value, None);
        assert_eq!(parse("env.A=b=c").unwrap().value.as_deref(), Some("b=c"));
        assert!(parse("LOG").is_err());
        assert!(parse("foo.bar=1").is_err());
        assert!(parse("1X=1").is_err());
    }

    #[test]
    fn settings_change_the_config_and_removing_everything_leaves_none() {
        let config = apply(
            None,
            &settings(&[
                "LOG=debug",
                "env.MODE=fast",
                "LOG=info",
                "nodeSelector.disk=ssd",
                "resources.limits.memory=1Gi",
            ]),
        )
        .expect("a config");
        let env: Vec<(String, Option<String>)> = config
            .env
            .clone()
            .unwrap()
            .into_iter()
            .map(|v| (v.name, v.value))
            .collect();
        assert_eq!(
            env,
            [
                ("LOG".into(), Some("info".into())),
                ("MODE".into(), Some("fast".into()))
            ]
        );
        assert_eq!(config.node_selector.as_ref().unwrap()["disk"], "ssd");
        assert_eq!(
            config.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"],
            Quantity("1Gi".into())
        );
        let cleared = apply(
            Some(config),
            &settings(&["LOG-", "MODE-", "nodeSelector.disk-", "resources.limits.memory-"]),
        );
        assert_eq!(cleared, None);
    }
}
