//! What a CatalogSource's spec asks for, checked (pure).

use std::time::Duration;

use olm_api::v1alpha1::{CatalogSourceSpec, SourceType};

use crate::go_duration::parse_go_duration;

/// Where the catalog's content comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// A running registry server at `host:port`.
    Address(String),
    /// A catalog image, run as a registry Pod behind a Service.
    Image(String),
    /// A ConfigMap in OLM's catalog format, in the CatalogSource's namespace.
    ConfigMap(String),
    /// The spec names no usable source; the message says why.
    Invalid(String),
}

/// A CatalogSource's spec, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSpec {
    /// Where the content comes from.
    pub kind: SourceKind,
    /// How often the content is reloaded.
    pub poll_interval: Duration,
    /// Whether the CatalogSource asks for polling (`updateStrategy.registryPoll`
    /// with a valid interval): only then are catalog images polled for updates.
    pub polls: bool,
    /// Why `updateStrategy.registryPoll.interval` was ignored, if it was.
    pub interval_error: Option<String>,
}

/// Checks `spec`; `default_poll` applies when no valid interval is given.
pub fn validate(spec: &CatalogSourceSpec, default_poll: Duration) -> SourceSpec {
    fn non_empty(value: &Option<String>) -> Option<&str> {
        value.as_deref().map(str::trim).filter(|v| !v.is_empty())
    }
    let kind = match spec.source_type {
        SourceType::Grpc => match (non_empty(&spec.image), non_empty(&spec.address)) {
            (Some(image), _) => SourceKind::Image(image.to_owned()),
            (None, Some(address)) => SourceKind::Address(address.to_owned()),
            (None, None) => SourceKind::Invalid(
                "a grpc CatalogSource needs spec.image or spec.address: set one of them".to_owned(),
            ),
        },
        SourceType::ConfigMap | SourceType::Internal => match non_empty(&spec.config_map) {
            Some(name) => SourceKind::ConfigMap(name.to_owned()),
            None => SourceKind::Invalid(
                "a configmap CatalogSource needs spec.configMap: name the ConfigMap that holds the catalog"
                    .to_owned(),
            ),
        },
    };
    let interval = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.registry_poll.as_ref())
        .and_then(|p| p.interval.as_deref());
    let polls = matches!(interval.map(parse_go_duration), Some(Ok(d)) if !d.is_zero());
    let (poll_interval, interval_error) = match interval.map(parse_go_duration) {
        None => (default_poll, None),
        Some(Ok(d)) if !d.is_zero() => (d, None),
        Some(Ok(_)) => (
            default_poll,
            Some("spec.updateStrategy.registryPoll.interval must be longer than zero".to_owned()),
        ),
        Some(Err(e)) => (
            default_poll,
            Some(format!(
                "spec.updateStrategy.registryPoll.interval is invalid: {e}"
            )),
        ),
    };
    SourceSpec {
        kind,
        poll_interval,
        polls,
        interval_error,
    }
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::{RegistryPoll, UpdateStrategy};

    use super::*;

    fn spec(source_type: SourceType) -> CatalogSourceSpec {
        CatalogSourceSpec {
            source_type,
            priority: None,
            config_map: None,
            address: None,
            image: None,
            grpc_pod_config: None,
            update_strategy: None,
            secrets: None,
            display_name: None,
            description: None,
            publisher: None,
            icon: None,
        }
    }

    #[test]
    fn sources_are_chosen_as_olm_does() {
        let default = Duration::from_secs(900);
        let mut grpc = spec(SourceType::Grpc);
        assert!(matches!(validate(&grpc, default).kind, SourceKind::Invalid(_)));
        grpc.address = Some("registry:50051".into());
        assert_eq!(
            validate(&grpc, default).kind,
            SourceKind::Address("registry:50051".into())
        );
        grpc.image = Some("quay.io/x/catalog:latest".into());
        assert_eq!(
            validate(&grpc, default).kind,
            SourceKind::Image("quay.io/x/catalog:latest".into()),
            "the image wins"
        );
        let mut cm = spec(SourceType::ConfigMap);
        assert!(matches!(validate(&cm, default).kind, SourceKind::Invalid(_)));
        cm.config_map = Some("catalog".into());
        assert_eq!(
            validate(&cm, default).kind,
            SourceKind::ConfigMap("catalog".into())
        );

        grpc.update_strategy = Some(UpdateStrategy {
            registry_poll: Some(RegistryPoll {
                interval: Some("10m".into()),
            }),
        });
        assert_eq!(validate(&grpc, default).poll_interval, Duration::from_secs(600));
        grpc.update_strategy = Some(UpdateStrategy {
            registry_poll: Some(RegistryPoll {
                interval: Some("soon".into()),
            }),
        });
        let checked = validate(&grpc, default);
        assert_eq!(checked.poll_interval, default);
        assert!(checked.interval_error.unwrap().contains("soon"));
    }
}
