//! The status of a CatalogSource, computed from what reading it found (pure).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{
    CatalogSource, CatalogSourceReason, CatalogSourceStatus, ConfigMapResourceReference, ConnectivityState,
    GrpcConnectionState,
};
use olm_runtime::conditions::{
    ConditionReason, ConditionType, Outcome, Status, remove_condition, set_condition, set_kstatus_conditions,
};

use super::{observed::Observed, validate::SourceSpec};

/// Why a CatalogSource's kstatus conditions have their status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CatalogReason {
    /// The catalog is read and serving.
    Serving,
    /// The registry Pod is starting.
    Connecting,
    /// The registry server cannot be reached or read.
    RegistryServerError,
    /// The ConfigMap is missing or invalid.
    ConfigMapError,
    /// The spec names no usable source.
    SpecInvalidError,
}

impl ConditionReason for CatalogReason {
    fn as_str(&self) -> &'static str {
        match self {
            CatalogReason::Serving => "Serving",
            CatalogReason::Connecting => "Connecting",
            CatalogReason::RegistryServerError => "RegistryServerError",
            CatalogReason::ConfigMapError => "ConfigMapError",
            CatalogReason::SpecInvalidError => "SpecInvalidError",
        }
    }
}

impl CatalogReason {
    /// Every reason, for tests.
    pub const ALL: [CatalogReason; 5] = [
        CatalogReason::Serving,
        CatalogReason::Connecting,
        CatalogReason::RegistryServerError,
        CatalogReason::ConfigMapError,
        CatalogReason::SpecInvalidError,
    ];

    fn of(reason: CatalogSourceReason) -> Self {
        match reason {
            CatalogSourceReason::ConfigMap => CatalogReason::ConfigMapError,
            CatalogSourceReason::SpecInvalid | CatalogSourceReason::InvalidInterval => {
                CatalogReason::SpecInvalidError
            }
            CatalogSourceReason::RegistryServer => CatalogReason::RegistryServerError,
        }
    }
}

/// The condition that says how an image catalog is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServedFromMemory;

impl ConditionType for ServedFromMemory {
    fn as_str(&self) -> &'static str {
        "ServedFromMemory"
    }
}

/// Why an image catalog is served from memory or by a registry Pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServingReason {
    /// The image holds a file-based catalog: served from memory (True).
    FileBasedCatalog,
    /// The image holds no file-based catalog (a SQLite index image): a Pod serves it.
    NoFileBasedCatalog,
    /// The image is larger than the pull limits: a Pod serves it.
    ImageTooLarge,
    /// catalog-operator could not pull the image: a Pod serves it.
    PullFailed,
    /// The image's file-based catalog is invalid: nothing serves it.
    InvalidCatalog,
}

impl ConditionReason for ServingReason {
    fn as_str(&self) -> &'static str {
        match self {
            ServingReason::FileBasedCatalog => "FileBasedCatalog",
            ServingReason::NoFileBasedCatalog => "NoFileBasedCatalog",
            ServingReason::ImageTooLarge => "ImageTooLarge",
            ServingReason::PullFailed => "PullFailed",
            ServingReason::InvalidCatalog => "InvalidCatalog",
        }
    }
}

impl ServingReason {
    /// Every reason, for tests.
    pub const ALL: [ServingReason; 5] = [
        ServingReason::FileBasedCatalog,
        ServingReason::NoFileBasedCatalog,
        ServingReason::ImageTooLarge,
        ServingReason::PullFailed,
        ServingReason::InvalidCatalog,
    ];
}

/// How an image catalog is served, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Serving {
    /// Whether from memory.
    pub from_memory: bool,
    /// Why.
    pub reason: ServingReason,
    /// In words.
    pub message: String,
}

impl Serving {
    /// Served from memory.
    pub fn memory(message: String) -> Self {
        Serving {
            from_memory: true,
            reason: ServingReason::FileBasedCatalog,
            message,
        }
    }

    /// Served by a registry Pod, for `reason`.
    pub fn pod(reason: ServingReason, message: String) -> Self {
        Serving {
            from_memory: false,
            reason,
            message,
        }
    }

    /// Not served at all, for `reason`.
    pub fn failed(reason: ServingReason, message: String) -> Self {
        Serving::pod(reason, message)
    }
}

/// Sets condition `ServedFromMemory` from `serving`, or removes it when the
/// catalog is not an image.
pub fn set_serving(
    status: &mut CatalogSourceStatus,
    serving: Option<&Serving>,
    generation: Option<i64>,
    now: &Time,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match serving {
        Some(serving) => {
            set_condition(
                conditions,
                ServedFromMemory,
                Status::from(serving.from_memory),
                serving.reason,
                &serving.message,
                generation,
                now,
            );
        }
        None => {
            remove_condition(conditions, ServedFromMemory);
        }
    }
}

/// The status `source` should have after `observed`.
pub fn compute(
    source: &CatalogSource,
    spec: &SourceSpec,
    observed: &Observed,
    now: &Time,
) -> CatalogSourceStatus {
    let old = source.status.clone().unwrap_or_default();
    let generation = source.metadata.generation;
    let connection = |address: &Option<String>, state: ConnectivityState, changed: bool| {
        connection_state(&old, address, state, changed, now)
    };
    let mut status = CatalogSourceStatus {
        observed_generation: generation,
        latest_image_registry_poll: old.latest_image_registry_poll.clone(),
        ..CatalogSourceStatus::default()
    };
    let outcome = match observed {
        Observed::Ready {
            address,
            config_map,
            registry_service,
            changed,
            left_out,
        } => {
            status.connection_state = connection(address, ConnectivityState::Ready, *changed);
            status.registry_service = registry_service.clone();
            set_ready(&mut status, &old, spec, config_map.as_ref(), left_out.as_deref())
        }
        Observed::Starting {
            address,
            registry_service,
            message,
        } => {
            status.connection_state = connection(address, ConnectivityState::Connecting, false);
            status.registry_service = registry_service.clone();
            Outcome::working(CatalogReason::Connecting, message.clone())
        }
        Observed::Unreachable {
            address,
            config_map,
            registry_service,
            reason,
            message,
            changed,
        } => {
            status.connection_state = connection(address, ConnectivityState::TransientFailure, *changed);
            status.config_map_resource = config_map.clone();
            status.registry_service = registry_service.clone();
            status.reason = Some(*reason);
            status.message = Some(message.clone());
            Outcome::working(CatalogReason::of(*reason), message.clone())
        }
        Observed::Invalid { reason, message } => {
            status.reason = Some(*reason);
            status.message = Some(message.clone());
            Outcome::stalled(CatalogReason::of(*reason), message.clone())
        }
    };
    let mut conditions = old.conditions.clone().unwrap_or_default();
    set_kstatus_conditions(&mut conditions, &outcome, generation, now);
    status.conditions = Some(conditions);
    status
}

/// The connection state for `state` at `address`; its time is kept while
/// neither the state, the address nor the content changed.
fn connection_state(
    old: &CatalogSourceStatus,
    address: &Option<String>,
    state: ConnectivityState,
    changed: bool,
    now: &Time,
) -> Option<GrpcConnectionState> {
    let old_state = old.connection_state.as_ref();
    let same = old_state.is_some_and(|c| c.last_observed_state == state && c.address == *address);
    Some(GrpcConnectionState {
        address: address.clone(),
        last_observed_state: state,
        last_connect_time: if same && !changed {
            old_state.and_then(|c| c.last_connect_time.clone())
        } else {
            Some(now.clone())
        },
    })
}

/// A catalog that is serving: the ConfigMap read (its update time kept when it
/// was not reloaded), and the reason and message for what it serves without or
/// an invalid poll interval.
fn set_ready(
    status: &mut CatalogSourceStatus,
    old: &CatalogSourceStatus,
    spec: &SourceSpec,
    config_map: Option<&ConfigMapResourceReference>,
    left_out: Option<&str>,
) -> Outcome<CatalogReason> {
    status.config_map_resource = config_map.cloned().map(|mut c| {
        if c.last_update_time.is_none() {
            c.last_update_time = old
                .config_map_resource
                .as_ref()
                .and_then(|o| o.last_update_time.clone());
        }
        c
    });
    let mut notes: Vec<&str> = Vec::new();
    if let Some(left_out) = left_out {
        status.reason = Some(CatalogSourceReason::ConfigMap);
        notes.push(left_out);
    }
    if let Some(error) = &spec.interval_error {
        status.reason = Some(CatalogSourceReason::InvalidInterval);
        notes.push(error);
    }
    if !notes.is_empty() {
        status.message = Some(notes.join("; "));
    }
    match left_out {
        Some(left_out) => Outcome::done(
            CatalogReason::Serving,
            format!("the catalog is serving without what is invalid: {left_out}"),
        ),
        None => Outcome::done(CatalogReason::Serving, "the catalog is serving"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::jiff::Timestamp;
    use kube::api::ObjectMeta;
    use olm_api::v1alpha1::{CatalogSourceSpec, SourceType};
    use olm_runtime::conditions::{KstatusResult, is_valid_reason, kstatus};

    use super::*;
    use crate::controllers::catalogsource::validate;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn source() -> CatalogSource {
        let mut spec: CatalogSourceSpec =
            serde_json::from_value(serde_json::json!({"sourceType": "grpc", "address": "r:50051"})).unwrap();
        spec.source_type = SourceType::Grpc;
        CatalogSource {
            metadata: ObjectMeta {
                name: Some("demo".into()),
                namespace: Some("olm".into()),
                generation: Some(3),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }

    #[test]
    fn every_reason_is_valid() {
        for reason in CatalogReason::ALL {
            assert!(is_valid_reason(reason.as_str()), "{reason:?}");
        }
        for reason in ServingReason::ALL {
            assert!(is_valid_reason(reason.as_str()), "{reason:?}");
        }
        assert!(olm_runtime::conditions::is_valid_condition_type(
            ServedFromMemory.as_str()
        ));
    }

    #[test]
    fn the_serving_condition_says_which_path_and_goes_for_other_sources() {
        let mut status = CatalogSourceStatus::default();
        let pod = Serving::pod(ServingReason::NoFileBasedCatalog, "a SQLite index".into());
        set_serving(&mut status, Some(&pod), Some(2), &at(10));
        let condition = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (
                condition.type_.as_str(),
                condition.status.as_str(),
                condition.reason.as_str()
            ),
            ("ServedFromMemory", "False", "NoFileBasedCatalog")
        );
        set_serving(
            &mut status,
            Some(&Serving::memory("fbc".into())),
            Some(2),
            &at(20),
        );
        let condition = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(condition.status, "True");
        assert_eq!(condition.last_transition_time, at(20));
        set_serving(&mut status, None, Some(2), &at(30));
        assert!(status.conditions.unwrap().is_empty());
    }

    #[test]
    fn ready_then_down_then_back() {
        let mut source = source();
        let spec = validate(&source.spec, Duration::from_secs(600));
        let ready = Observed::Ready {
            address: Some("r:50051".into()),
            config_map: None,
            registry_service: None,
            changed: true,
            left_out: None,
        };
        let status = compute(&source, &spec, &ready, &at(1));
        let connection = status.connection_state.clone().unwrap();
        assert_eq!(connection.last_observed_state, ConnectivityState::Ready);
        assert_eq!(connection.last_connect_time, Some(at(1)));
        assert_eq!(status.observed_generation, Some(3));
        let conditions = status.conditions.clone().unwrap();
        assert_eq!(
            kstatus(false, Some(3), Some(3), &conditions),
            KstatusResult::Current
        );
        source.status = Some(status.clone());

        // Nothing new: the same status, so nothing is written.
        let quiet = Observed::Ready {
            address: Some("r:50051".into()),
            config_map: None,
            registry_service: None,
            changed: false,
            left_out: None,
        };
        assert_eq!(compute(&source, &spec, &quiet, &at(2)), status);

        let down = Observed::Unreachable {
            address: Some("r:50051".into()),
            config_map: None,
            registry_service: None,
            reason: CatalogSourceReason::RegistryServer,
            message: "connection refused".into(),
            changed: true,
        };
        let status = compute(&source, &spec, &down, &at(3));
        assert_eq!(
            status.connection_state.as_ref().unwrap().last_observed_state,
            ConnectivityState::TransientFailure
        );
        assert_eq!(status.reason, Some(CatalogSourceReason::RegistryServer));
        assert_eq!(
            kstatus(false, Some(3), Some(3), status.conditions.as_deref().unwrap()),
            KstatusResult::InProgress
        );
        source.status = Some(status);
        let back = compute(&source, &spec, &ready, &at(4));
        assert_eq!(back.reason, None);
        assert_eq!(back.connection_state.unwrap().last_connect_time, Some(at(4)));
    }

    #[test]
    fn bundles_left_out_are_reported_while_the_catalog_serves() {
        let source = source();
        let spec = validate(&source.spec, Duration::from_secs(600));
        let why = "bundle foo.v1.1.0 left out: the CSV has no spec.version";
        let ready = Observed::Ready {
            address: None,
            config_map: None,
            registry_service: None,
            changed: true,
            left_out: Some(why.into()),
        };
        let status = compute(&source, &spec, &ready, &at(1));
        assert_eq!(
            status.connection_state.as_ref().unwrap().last_observed_state,
            ConnectivityState::Ready
        );
        assert_eq!(status.reason, Some(CatalogSourceReason::ConfigMap));
        assert_eq!(status.message.as_deref(), Some(why));
        let conditions = status.conditions.as_deref().unwrap();
        let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "True");
        assert!(ready.message.contains(why), "{}", ready.message);
        assert_eq!(
            kstatus(false, Some(3), Some(3), conditions),
            KstatusResult::Current
        );
    }

    #[test]
    fn an_invalid_spec_stalls() {
        let source = source();
        let spec = validate(&source.spec, Duration::from_secs(600));
        let invalid = Observed::Invalid {
            reason: CatalogSourceReason::SpecInvalid,
            message: "needs an address".into(),
        };
        let status = compute(&source, &spec, &invalid, &at(1));
        assert!(status.connection_state.is_none());
        assert_eq!(
            kstatus(false, Some(3), Some(3), status.conditions.as_deref().unwrap()),
            KstatusResult::Failed
        );
    }
}
