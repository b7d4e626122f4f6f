//! The decision, case by case: what was read → what is written.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::{
    api::core::v1::{ContainerStatus, PodCondition, PodStatus},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
    jiff::Timestamp,
};
use olm_api::{
    labels,
    v1alpha1::{CatalogSource, CatalogSourceReason, ConfigMapResourceReference, ConnectivityState},
};

use super::*;
use crate::controllers::catalogsource::{
    registry_pod::{POD_SPEC_HASH, RegistryObjects},
    status::{Serving, ServingReason},
    validate,
};

const HEALTH: Duration = Duration::from_secs(10);
const IMAGE: &str = "quay.io/operatorhubio/catalog:latest";

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("a time"))
}

fn source(spec: serde_json::Value) -> Arc<CatalogSource> {
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "CatalogSource",
            "metadata": {"name": "community", "namespace": "olm", "uid": "uid-1", "generation": 1},
            "spec": spec,
        }))
        .expect("a CatalogSource"),
    )
}

fn image_source(poll: Option<&str>) -> Arc<CatalogSource> {
    let mut spec = serde_json::json!({"sourceType": "grpc", "image": IMAGE});
    if let Some(interval) = poll {
        spec["updateStrategy"] = serde_json::json!({"registryPoll": {"interval": interval}});
    }
    source(spec)
}

/// What a reconcile of `source` read at `now`, with `observed` found.
fn read(source: Arc<CatalogSource>, observed: Option<Observed>, now: i64) -> Read {
    let spec = validate(&source.spec, Duration::from_secs(900));
    Read {
        source,
        spec,
        now: at(now),
        leading: true,
        observed,
        polled: None,
        serving: None,
        registry: None,
    }
}

/// An image catalog a registry Pod serves, with `pods` in the store.
fn by_pod(source: Arc<CatalogSource>, observed: Option<Observed>, pods: Vec<Arc<Pod>>, now: i64) -> Read {
    Read {
        serving: Some(Serving::pod(
            ServingReason::NoFileBasedCatalog,
            "a SQLite index".into(),
        )),
        registry: Some(Registry {
            image: IMAGE.into(),
            by_pod: true,
            objects: RegistryObjects {
                pods,
                services: vec![Arc::new(registry_pod::service(&source))],
                restricted_namespace: false,
            },
        }),
        ..read(source, observed, now)
    }
}

/// The spec hash of the registry Pod `source` wants.
fn current_hash(source: &CatalogSource) -> String {
    registry_pod::spec_hash(&registry_pod::pod(source, IMAGE, false))
}

/// A registry Pod of the catalog.
fn pod(name: &str, hash: &str, created: i64, ready: bool) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("olm".into()),
            uid: Some(format!("uid-{name}")),
            labels: Some(BTreeMap::from([
                (labels::CATALOG_SOURCE.to_owned(), "community".to_owned()),
                (POD_SPEC_HASH.to_owned(), hash.to_owned()),
            ])),
            owner_references: Some(vec![OwnerReference {
                uid: "uid-1".into(),
                ..OwnerReference::default()
            }]),
            creation_timestamp: Some(at(created)),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..PodCondition::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                image_id: "sha256:1".into(),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        }),
    })
}

fn ready_at(address: Option<&str>) -> Observed {
    ready_with(address, None, true)
}

fn ready_with(
    address: Option<&str>,
    registry_service: Option<olm_api::v1alpha1::RegistryServiceStatus>,
    changed: bool,
) -> Observed {
    Observed::Ready {
        address: address.map(str::to_owned),
        config_map: None,
        registry_service,
        changed,
        left_out: None,
    }
}

/// The objects of `effects`: kind, name, and whether created.
fn objects(effects: &Effects<CatalogSourceStatus>) -> Vec<(String, String, bool)> {
    effects
        .objects
        .iter()
        .map(|d| (d.resource.kind.clone(), d.name().to_owned(), d.creates()))
        .collect()
}

/// The removals of `effects`: kind, name, UID.
fn removed(effects: &Effects<CatalogSourceStatus>) -> Vec<(String, String, Option<String>)> {
    effects
        .removals
        .iter()
        .map(|r| (r.resource.kind.clone(), r.name.clone(), r.uid.clone()))
        .collect()
}

fn written(decision: &Decision) -> &CatalogSourceStatus {
    &decision.effects.status.as_ref().expect("a status").status
}

fn ready_condition(status: &CatalogSourceStatus) -> (String, String, String) {
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition");
    (ready.status.clone(), ready.reason.clone(), ready.message.clone())
}

fn service() -> (String, String, bool) {
    ("Service".into(), "community".into(), false)
}

/// A registry Pod created under `name`.
fn new_pod(name: &str) -> (String, String, bool) {
    ("Pod".into(), name.into(), true)
}

/// Sources read directly (no registry object): only the status is written.
#[test]
fn direct_sources_write_only_their_status() {
    let config_map = Observed::Ready {
        address: None,
        config_map: Some(ConfigMapResourceReference {
            name: "catalog".into(),
            namespace: "olm".into(),
            uid: Some("cm-uid".into()),
            resource_version: Some("7".into()),
            last_update_time: Some(at(5)),
        }),
        registry_service: None,
        changed: true,
        left_out: None,
    };
    let unreachable = Observed::Unreachable {
        address: Some("registry:50051".into()),
        config_map: None,
        registry_service: None,
        reason: CatalogSourceReason::RegistryServer,
        message: "connection refused".into(),
        changed: true,
    };
    let grpc = || source(serde_json::json!({"sourceType": "grpc", "address": "registry:50051"}));
    let invalid = Observed::Invalid {
        reason: CatalogSourceReason::SpecInvalid,
        message: "a grpc CatalogSource needs spec.image or spec.address: set one of them".into(),
    };
    // case, source, observed, connection state, Ready condition (status, reason), requeue
    let cases = [
        (
            "a ConfigMap catalog",
            source(serde_json::json!({"sourceType": "configmap", "configMap": "catalog"})),
            config_map,
            Some(ConnectivityState::Ready),
            ("True", "Serving"),
            Some(HEALTH),
        ),
        (
            "a registry at an address, ready",
            grpc(),
            ready_at(Some("registry:50051")),
            Some(ConnectivityState::Ready),
            ("True", "Serving"),
            Some(HEALTH),
        ),
        (
            "a registry at an address, unreachable",
            grpc(),
            unreachable,
            Some(ConnectivityState::TransientFailure),
            ("False", "RegistryServerError"),
            Some(HEALTH),
        ),
        (
            "an invalid spec",
            source(serde_json::json!({"sourceType": "grpc"})),
            invalid,
            None,
            ("False", "SpecInvalidError"),
            None,
        ),
    ];
    for (case, source, observed, connection, (ready, reason), requeue) in cases {
        let decision = decide(&read(source, Some(observed.clone()), 100), HEALTH).expect(case);
        assert!(decision.effects.objects.is_empty(), "{case}");
        assert!(decision.effects.removals.is_empty(), "{case}");
        let status = written(&decision);
        assert_eq!(
            status.connection_state.as_ref().map(|c| c.last_observed_state),
            connection,
            "{case}"
        );
        let (status_of_ready, reason_of_ready, _) = ready_condition(status);
        assert_eq!(
            (status_of_ready.as_str(), reason_of_ready.as_str()),
            (ready, reason),
            "{case}"
        );
        assert_eq!(decision.requeue, requeue, "{case}");
        assert_eq!(decision.ready, observed.is_ready(), "{case}");
    }
}

/// A status that did not change is not written; a standby writes nothing.
#[test]
fn an_unchanged_status_and_a_standby_write_nothing() {
    let grpc = source(serde_json::json!({"sourceType": "grpc", "address": "registry:50051"}));
    let first = decide(
        &read(grpc.clone(), Some(ready_at(Some("registry:50051"))), 100),
        HEALTH,
    )
    .unwrap();
    let mut settled = (*grpc).clone();
    settled.status = Some(written(&first).clone());
    let quiet = ready_with(Some("registry:50051"), None, false);
    let again = decide(&read(Arc::new(settled), Some(quiet), 110), HEALTH).unwrap();
    assert!(again.effects.is_empty(), "{:?}", again.effects);

    let standby = Read {
        leading: false,
        ..by_pod(image_source(None), None, Vec::new(), 100)
    };
    let decision = decide(&standby, HEALTH).unwrap();
    assert!(decision.effects.is_empty(), "{:?}", decision.effects);
    assert_eq!(decision.requeue, Some(HEALTH));
}

/// An image a registry Pod serves: the Service and Pods through its life.
#[test]
fn an_image_catalog_through_its_registry_pod() {
    let source = image_source(None);
    let hash = current_hash(&source);
    let registry_ready = ready_with(
        Some("community.olm.svc:50051"),
        Some(registry_pod::service_status(
            &source,
            &[Arc::new(registry_pod::service(&source))],
        )),
        true,
    );

    // Before its Pod exists: the Service and a new Pod, named after its spec
    // (so a reconcile that decides this again gets a 409, not a second Pod);
    // the status waits for the Pod.
    let named = format!("community-{hash}");
    let before = decide(&by_pod(source.clone(), None, Vec::new(), 100), HEALTH).unwrap();
    assert_eq!(objects(&before.effects), [service(), new_pod(&named)]);
    assert!(before.effects.removals.is_empty());
    assert_eq!(before.effects.status, None);

    // The Pod starting: the Service (skipped while live), and the status says so.
    let starting = by_pod(source.clone(), None, vec![pod("a", &hash, 90, false)], 100);
    let decision = decide(&starting, HEALTH).unwrap();
    assert_eq!(objects(&decision.effects), [service()]);
    let status = written(&decision);
    assert_eq!(
        status.connection_state.as_ref().unwrap().last_observed_state,
        ConnectivityState::Connecting
    );
    let (_, reason, message) = ready_condition(status);
    assert_eq!(
        (reason.as_str(), message.as_str()),
        ("Connecting", "registry pod a is not ready yet")
    );

    // The Pod running: the catalog read through it is reported.
    let running = by_pod(
        source.clone(),
        Some(registry_ready.clone()),
        vec![pod("a", &hash, 90, true)],
        100,
    );
    let decision = decide(&running, HEALTH).unwrap();
    assert_eq!(objects(&decision.effects), [service()]);
    assert!(decision.effects.removals.is_empty());
    let status = written(&decision);
    assert_eq!(
        status.registry_service.as_ref().unwrap().service_name.as_deref(),
        Some("community")
    );
    assert_eq!(ready_condition(status).0, "True");
    let serving = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "ServedFromMemory")
        .unwrap();
    assert_eq!(
        (serving.status.as_str(), serving.reason.as_str()),
        ("False", "NoFileBasedCatalog")
    );

    // An outdated Pod (another spec): a new Pod first; it goes once the new one is Ready.
    let outdated = vec![pod("old", "0123456789", 50, true)];
    let decision = decide(&by_pod(source.clone(), None, outdated.clone(), 100), HEALTH).unwrap();
    assert_eq!(objects(&decision.effects), [service(), new_pod(&named)]);
    assert!(
        decision.effects.removals.is_empty(),
        "served until the new Pod is Ready"
    );
    let both = [outdated, vec![pod("new", &hash, 90, true)]].concat();
    let decision = decide(&by_pod(source, Some(registry_ready), both, 100), HEALTH).unwrap();
    assert_eq!(objects(&decision.effects), [service()]);
    assert_eq!(
        removed(&decision.effects),
        [("Pod".to_owned(), "old".to_owned(), Some("uid-old".to_owned()))]
    );
}

/// Polling a tag: an update Pod once the interval passed since the serving Pod
/// started, and the time of the poll in the status; nothing before.
#[test]
fn a_poll_starts_an_update_pod_only_when_due() {
    let source = image_source(Some("1m"));
    let hash = current_hash(&source);
    let ready = ready_with(
        Some("community.olm.svc:50051"),
        Some(registry_pod::service_status(
            &source,
            &[Arc::new(registry_pod::service(&source))],
        )),
        true,
    );
    let serving = || vec![pod("a", &hash, 1000, true)];
    // case, now, objects, the poll's time in the status
    let cases = [
        ("not due", 1030, vec![service()], None),
        // Named after when the poll became due (1000 + 60 s), alike in every
        // reconcile that starts it.
        (
            "due",
            1061,
            vec![service(), new_pod(&format!("community-{hash}-1060"))],
            Some(at(1061)),
        ),
    ];
    for (case, now, expected, polled) in cases {
        let decision = decide(
            &by_pod(source.clone(), Some(ready.clone()), serving(), now),
            HEALTH,
        )
        .expect(case);
        assert_eq!(objects(&decision.effects), expected, "{case}");
        assert_eq!(written(&decision).latest_image_registry_poll, polled, "{case}");
    }
}

/// An image served from memory: the registry Pods and Service of before go.
#[test]
fn an_image_served_from_memory_removes_its_registry_objects() {
    let source = image_source(None);
    let mut memory = by_pod(
        source.clone(),
        Some(ready_at(None)),
        vec![pod("a", "h", 1, true)],
        100,
    );
    memory.serving = Some(Serving::memory("from memory".into()));
    if let Some(registry) = memory.registry.as_mut() {
        registry.by_pod = false;
    }
    let decision = decide(&memory, HEALTH).unwrap();
    assert!(decision.effects.objects.is_empty());
    assert_eq!(
        removed(&decision.effects),
        [
            ("Pod".to_owned(), "a".to_owned(), Some("uid-a".to_owned())),
            ("Service".to_owned(), "community".to_owned(), None),
        ]
    );
    assert_eq!(ready_condition(written(&decision)).0, "True");
}
