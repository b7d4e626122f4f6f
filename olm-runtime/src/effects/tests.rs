use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::ObjectMeta;
use olm_testkit::mock_api::{Answer, MockApi};

use super::*;
use crate::Leadership;

/// A client whose API server answers every request with a ConfigMap, and
/// records each.
fn recording() -> (Client, MockApi) {
    MockApi::new(|_| {
        Some(Answer::ok(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
        })))
    })
}

fn config_map(name: &str, data: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("k".to_owned(), data.to_owned())])),
        ..ConfigMap::default()
    }
}

#[test]
fn objects_are_written_in_waves_of_those_alongside_the_one_before() {
    let desired = |name: &str| Desired::owned(&config_map(name, "1")).unwrap();
    let objects = [
        desired("account"),
        desired("role").alongside_previous(),
        desired("binding").alongside_previous(),
        desired("first"),
        desired("second"),
    ];
    let names: Vec<Vec<&str>> = waves(&objects)
        .iter()
        .map(|wave| wave.iter().map(Desired::name).collect())
        .collect();
    assert_eq!(
        names,
        [vec!["account", "role", "binding"], vec!["first"], vec!["second"]]
    );
    assert!(waves(&[]).is_empty());
}

/// Live copies: the hashes a store would hold, by name.
struct Hashes(BTreeMap<String, String>);

impl Live for Hashes {
    fn desired_hash(&self, _: &ApiResource, _: Option<&str>, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

#[test]
fn an_owned_object_carries_the_hash_of_its_content() {
    let a = Desired::owned(&config_map("a", "1")).unwrap();
    let same = Desired::owned(&config_map("a", "1")).unwrap();
    let other = Desired::owned(&config_map("a", "2")).unwrap();
    let hash = |d: &Desired| d.object.metadata.annotations.as_ref().unwrap()[DESIRED_HASH].clone();
    assert_eq!(hash(&a), hash(&same));
    assert_ne!(hash(&a), hash(&other));
    assert_eq!(a.object.types.as_ref().unwrap().kind, "ConfigMap");
    assert_eq!((a.namespace(), a.name()), (Some("ns"), "a"));
    let fields = Desired::fields(&config_map("a", "1")).unwrap();
    assert!(
        fields.object.metadata.annotations.is_none(),
        "fields carry no hash"
    );
}

#[tokio::test]
async fn objects_then_removals_then_status_and_unchanged_objects_are_skipped() {
    let (client, seen) = recording();
    let writer = Writer::new(Leadership::standalone(), "olm-rs-test");
    let unchanged = Desired::owned(&config_map("same", "1")).unwrap();
    let live = Hashes(BTreeMap::from([(
        "same".to_owned(),
        unchanged.hash.clone().unwrap(),
    )]));
    let effects = Effects {
        objects: vec![
            Desired::owned(&config_map("changed", "2")).unwrap(),
            unchanged,
            Desired::fields(&config_map("shared", "3")).unwrap(),
        ],
        statuses: Vec::new(),
        removals: vec![Removal::of::<Service>(Some("ns"), "old")],
        status: Some(StatusWrite {
            name: "x".to_owned(),
            status: serde_json::json!({"phase": "Done"}),
        }),
    };
    let reconciled: Api<ConfigMap> = Api::namespaced(client.clone(), "ns");
    let done = writer
        .perform(&client, &reconciled, &effects, &live)
        .await
        .unwrap();
    assert_eq!(
        done,
        Performed {
            applied: 2,
            unchanged: 1,
            removed: 1,
            status: true,
            ..Performed::default()
        }
    );
    assert_eq!(
        seen.lines(),
        [
            "PATCH /api/v1/namespaces/ns/configmaps/changed",
            "PATCH /api/v1/namespaces/ns/configmaps/shared",
            "DELETE /api/v1/namespaces/ns/services/old",
            "PATCH /api/v1/namespaces/ns/configmaps/x/status",
        ]
    );
}

#[tokio::test]
async fn a_replica_that_does_not_lead_writes_nothing() {
    let (client, seen) = recording();
    let (_tx, rx) = tokio::sync::watch::channel(crate::LeaderState::Following { holder: None });
    let writer = Writer::new(Leadership::from_receiver(rx), "olm-rs-test");
    let effects: Effects<()> = Effects {
        objects: vec![Desired::owned(&config_map("a", "1")).unwrap()],
        ..Effects::none()
    };
    let reconciled: Api<ConfigMap> = Api::namespaced(client.clone(), "ns");
    let error = writer
        .perform(&client, &reconciled, &effects, &())
        .await
        .unwrap_err();
    assert!(error.is_not_leader(), "{error}");
    assert!(seen.requests().is_empty());
}

/// A client whose API server answers `METHOD path` with the status code
/// `code` gives (200 with a ConfigMap body, else a Kubernetes `Status`),
/// and records each request ([`serving`]).
fn answering(code: fn(&str) -> u16) -> (Client, MockApi) {
    serving(move |line| {
        let status = code(line);
        let body = if status == 200 {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
        } else {
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                               "message": "no", "reason": "Conflict", "code": status})
        };
        (status, body)
    })
}

#[tokio::test]
async fn statuses_of_others_follow_the_objects_and_a_taken_name_is_left_alone() {
    let (client, seen) = answering(|line| match line {
        // `taken` exists already; `gone` does not; `replaced` has another UID now.
        "POST /api/v1/namespaces/ns/configmaps" => 409,
        "PATCH /api/v1/namespaces/ns/configmaps/gone/status" => 404,
        "DELETE /api/v1/namespaces/ns/configmaps/replaced" => 409,
        _ => 200,
    });
    let writer = Writer::new(Leadership::standalone(), "olm-rs-test");
    let status = |name: &str| {
        StatusOf::of::<ConfigMap, _>(Some("ns"), name, &serde_json::json!({"phase": "Succeeded"})).unwrap()
    };
    let effects: Effects<()> = Effects {
        objects: vec![
            Desired::owned(&config_map("kept", "1")).unwrap(),
            Desired::owned(&config_map("taken", "1")).unwrap().create_only(),
        ],
        statuses: vec![status("kept"), status("taken"), status("gone")],
        removals: vec![Removal::of::<ConfigMap>(Some("ns"), "replaced").with_uid("u1")],
        ..Effects::none()
    };
    let reconciled: Api<ConfigMap> = Api::namespaced(client.clone(), "ns");
    let done = writer.perform(&client, &reconciled, &effects, &()).await.unwrap();
    assert_eq!(
        done,
        Performed {
            applied: 1,
            refused: 1,
            statuses: 1,
            ..Performed::default()
        }
    );
    assert_eq!(
        seen.lines(),
        [
            "PATCH /api/v1/namespaces/ns/configmaps/kept",
            "POST /api/v1/namespaces/ns/configmaps",
            // No status for `taken`: it is not ours.
            "PATCH /api/v1/namespaces/ns/configmaps/kept/status",
            "PATCH /api/v1/namespaces/ns/configmaps/gone/status",
            "DELETE /api/v1/namespaces/ns/configmaps/replaced",
        ]
    );
}

/// A client whose API server answers `METHOD path` with what `answer` gives
/// (a status code, and the body), and records each request with its body.
fn serving(answer: impl Fn(&str) -> (u16, serde_json::Value) + Send + Sync + 'static) -> (Client, MockApi) {
    MockApi::new(move |request| {
        let (status, body) = answer(&request.line);
        Some(Answer { status, body })
    })
}

#[tokio::test]
async fn a_status_referring_to_a_refused_create_is_not_written_and_one_to_a_created_object_gets_its_uid() {
    let (client, seen) = serving(|line| match line {
        "POST /api/v1/namespaces/ns/configmaps" => (409, refusal(409, &[])),
        "POST /api/v1/namespaces/ns/secrets" => (
            200,
            serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": "made", "uid": "u-made"}}),
        ),
        _ => (
            200,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        ),
    });
    let writer = Writer::new(Leadership::standalone(), "olm-rs-test");
    let taken = Desired::fields(&config_map("taken", "1")).unwrap().create_only();
    let secret = k8s_openapi::api::core::v1::Secret {
        metadata: ObjectMeta {
            name: Some("made".into()),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        ..Default::default()
    };
    let made = Desired::fields(&secret).unwrap().create_only();
    let status = |name: &str, of: &str| {
        StatusOf::of::<ConfigMap, _>(
            Some("ns"),
            name,
            &serde_json::json!({"ref": {"name": of}, "legacy": {"uuid": ""}}),
        )
        .unwrap()
    };
    let effects: Effects<()> = Effects {
        objects: vec![taken.clone(), made.clone()],
        statuses: vec![
            status("a", "taken").refers_to(&taken, &["/ref/uid"]),
            status("b", "made").refers_to(&made, &["/ref/uid", "/legacy/uuid", "/absent/uid"]),
        ],
        ..Effects::none()
    };
    let reconciled: Api<ConfigMap> = Api::namespaced(client.clone(), "ns");
    let done = writer.perform(&client, &reconciled, &effects, &()).await.unwrap();
    assert_eq!(
        done,
        Performed {
            applied: 1,
            refused: 2,
            statuses: 1,
            ..Performed::default()
        }
    );
    assert_eq!(
        seen.lines(),
        [
            "POST /api/v1/namespaces/ns/configmaps",
            "POST /api/v1/namespaces/ns/secrets",
            // No status for `a`: what it refers to is not the object decided.
            "PATCH /api/v1/namespaces/ns/configmaps/b/status",
        ]
    );
    assert_eq!(
        seen.requests()[2].body["status"],
        serde_json::json!({"ref": {"name": "made", "uid": "u-made"}, "legacy": {"uuid": "u-made"}})
    );
}

/// A Kubernetes `Status` of HTTP `code`, naming invalid `fields`.
fn refusal(code: u16, fields: &[&str]) -> serde_json::Value {
    let causes: Vec<serde_json::Value> = fields
        .iter()
        .map(|field| serde_json::json!({"reason": "FieldValueInvalid", "field": field}))
        .collect();
    serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "code": code, "details": {"causes": causes}})
}

#[tokio::test]
async fn writes_bound_to_an_object_never_land_on_another_of_its_name() {
    let (client, seen) = serving(|line| match line {
        // `fresh` is created as UID u-fresh; `replaced` and `taken` are held by other objects.
        "POST /api/v1/namespaces/ns/configmaps" => (
            200,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "fresh", "uid": "u-fresh"}}),
        ),
        "PATCH /api/v1/namespaces/ns/configmaps/replaced" => (422, refusal(422, &["metadata.uid"])),
        // A JSON Patch whose `test` failed: 422 naming no field.
        "PATCH /api/v1/namespaces/ns/configmaps/taken/status" => (422, refusal(422, &[])),
        _ => (
            200,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        ),
    });
    let writer = Writer::new(Leadership::standalone(), "olm-rs-test");
    let status = |name: &str| {
        StatusOf::of::<ConfigMap, _>(Some("ns"), name, &serde_json::json!({"phase": "Copied"}))
            .unwrap()
            .if_labelled("olm.copiedFrom", "ops")
    };
    let effects: Effects<()> = Effects {
        objects: vec![
            Desired::owned(&config_map("fresh", "1")).unwrap().create_only(),
            Desired::owned(&config_map("replaced", "1"))
                .unwrap()
                .with_uid("u-old"),
        ],
        statuses: vec![
            status("fresh"),
            status("replaced"),
            status("taken").with_uid("u-taken").at_version("7"),
        ],
        ..Effects::none()
    };
    let reconciled: Api<ConfigMap> = Api::namespaced(client.clone(), "ns");
    let done = writer.perform(&client, &reconciled, &effects, &()).await.unwrap();
    assert_eq!(
        done,
        Performed {
            applied: 1,
            refused: 2,
            statuses: 1,
            ..Performed::default()
        }
    );
    assert_eq!(
        seen.lines(),
        [
            "POST /api/v1/namespaces/ns/configmaps",
            "PATCH /api/v1/namespaces/ns/configmaps/replaced",
            // No status for `replaced`: the name is taken.
            "PATCH /api/v1/namespaces/ns/configmaps/fresh/status",
            "PATCH /api/v1/namespaces/ns/configmaps/taken/status",
        ]
    );
    let seen = seen.requests();
    assert_eq!(
        seen[1].body["metadata"]["uid"], "u-old",
        "the apply names the UID"
    );
    let tests = |body: &serde_json::Value| -> Vec<(String, String)> {
        body.as_array()
            .unwrap()
            .iter()
            .filter(|op| op["op"] == "test")
            .map(|op| {
                (
                    op["path"].as_str().unwrap().to_owned(),
                    op["value"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let label = ("/metadata/labels/olm.copiedFrom".to_owned(), "ops".to_owned());
    assert_eq!(
        tests(&seen[2].body),
        [("/metadata/uid".to_owned(), "u-fresh".to_owned()), label.clone()],
        "the created object's status goes only onto the object created"
    );
    assert_eq!(
        tests(&seen[3].body),
        [
            ("/metadata/uid".to_owned(), "u-taken".to_owned()),
            label,
            ("/metadata/resourceVersion".to_owned(), "7".to_owned())
        ],
        "a status decided from one copy goes only onto that copy"
    );
    assert_eq!(
        seen[3].body[3],
        serde_json::json!({"op": "add", "path": "/status", "value": {"phase": "Copied"}})
    );
}
