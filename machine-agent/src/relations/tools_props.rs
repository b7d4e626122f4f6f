//! Property tests of the relation tools' input on generated calls: relation ids that exist,
//! name another endpoint, or are any text; keys and targets odd or unknown; `relation-set`
//! settings with empty keys, keys with '=', odd unicode, values up to the longest request line,
//! onto a bag already near its limit; callers that lead or not, or name no application.
//!
//! The properties: nothing panics; a refusal names what it refuses (the relation, the unit,
//! the key or the bag) or says which input is missing; `relation-get` of all keys prints a JSON
//! object that reads back as the data; `relation-set` writes, by one merge patch of the right
//! bag, exactly the settings it accepts, and writes nothing when it refuses.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{
    Relations,
    tools::{MAX_DATA_BYTES, RelationTool},
    view::tests::{bag, relation},
};
use crate::{
    hook_tool::MAX_REQUEST_BYTES,
    leadership::Leadership,
    tool_format::{Format, print_map},
};

/// The requests the API server was sent: method, path and body.
type Sent = Arc<Mutex<Vec<(String, String, Vec<u8>)>>>;

/// A client whose API server records each request and answers it with a Databag.
fn recording() -> (kube::Client, Sent) {
    let sent = Sent::default();
    let log = sent.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let log = log.clone();
        async move {
            let (parts, body) = request.into_parts();
            let body = body.collect_bytes().await.unwrap_or_default().to_vec();
            log.lock()
                .unwrap()
                .push((parts.method.to_string(), parts.uri.path().to_owned(), body));
            let answer = serde_json::to_vec(&bag("r", "web", Some("edge-a"), &[])).unwrap();
            Ok::<_, std::io::Error>(
                http::Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(answer))
                    .unwrap(),
            )
        }
    });
    (kube::Client::new(service, "ns"), sent)
}

/// Runs `future` on a runtime of its own: the client's buffer needs one.
fn block_on<T>(future: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// web's unit on edge-a, related to db (units dbs-a, dbs-b) by `r`; its own bag holds `own`.
fn web_on_edge_a(client: kube::Client, own: &[(&str, &str)]) -> Relations {
    let bags = vec![
        bag("r", "web", None, &[("url", "http://web")]),
        bag("r", "web", Some("edge-a"), own),
        bag("r", "db", None, &[("database", "main")]),
        bag("r", "db", Some("dbs-a"), &[("host", "10.0.0.1")]),
        bag("r", "db", Some("dbs-b"), &[]),
    ];
    Relations::of(client, "ns", "edge-a", vec![relation("r", true)], bags)
}

fn odd_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,6}",
        "\\PC{0,10}",
        prop::sample::select(vec![
            "",
            "-",
            "=",
            "a=b",
            ":",
            "r:",
            ":r",
            "database:",
            "db/dbs-a/",
            "db/",
            "/",
            "../r",
            "\u{0}",
            "\u{feff}",
            "\u{202e}é",
            "🦀",
            " r",
            "r\n",
        ])
        .prop_map(str::to_owned),
    ]
}

fn relation_id() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        3 => prop::sample::select(vec!["database:r", "r", "cache:r", "db:r", "database:s", "s"])
            .prop_map(|s| Some(s.to_owned())),
        1 => Just(None),
        1 => odd_text().prop_map(Some),
    ]
}

fn target() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        3 => prop::sample::select(vec!["db/dbs-a", "db/dbs-b", "db/dbs-z", "web/edge-a", "web/edge-b", "db", "web", "other"])
            .prop_map(|s| Some(s.to_owned())),
        1 => Just(None),
        1 => odd_text().prop_map(Some),
    ]
}

fn settings() -> impl Strategy<Value = BTreeMap<String, String>> {
    let value = prop_oneof![
        3 => odd_text(),
        1 => Just(String::new()),
        1 => (0usize..MAX_REQUEST_BYTES / 2).prop_map(|n| "v".repeat(n)),
    ];
    prop::collection::btree_map(prop_oneof![3 => "[a-z-]{1,8}", 1 => odd_text()], value, 0..4)
}

fn format() -> impl Strategy<Value = Option<Format>> {
    prop::sample::select(vec![None, Some(Format::Json), Some(Format::Yaml)])
}

fn tool() -> impl Strategy<Value = RelationTool> {
    let key = prop_oneof![
        Just(None),
        prop::sample::select(vec!["host", "url", "user", "database", "-"]).prop_map(|k| Some(k.to_owned())),
        odd_text().prop_map(Some),
    ];
    prop_oneof![
        prop::option::of(prop_oneof![Just("database".to_owned()), odd_text()])
            .prop_map(|endpoint| RelationTool::RelationIds { endpoint }),
        relation_id().prop_map(|relation| RelationTool::RelationList { relation }),
        (relation_id(), key, target(), any::<bool>(), format()).prop_map(
            |(relation, key, target, app, format)| {
                RelationTool::RelationGet {
                    relation,
                    key,
                    target,
                    app,
                    format,
                }
            }
        ),
        (relation_id(), any::<bool>(), settings()).prop_map(|(relation, app, settings)| {
            RelationTool::RelationSet {
                relation,
                app,
                settings,
            }
        }),
    ]
}

/// The inputs of `tool` a refusal may name.
fn subjects(tool: &RelationTool) -> Vec<String> {
    match tool {
        RelationTool::RelationIds { .. } => Vec::new(),
        RelationTool::RelationList { relation } => relation.iter().map(|r| format!("{r:?}")).collect(),
        RelationTool::RelationGet {
            relation,
            target,
            app,
            ..
        } => relation
            .iter()
            .chain(target)
            .map(|r| format!("{r:?}"))
            // With --app, the application a unit's name names.
            .chain(
                target
                    .iter()
                    .filter(|_| *app)
                    .map(|t| format!("{:?}", t.split('/').next().unwrap_or(t))),
            )
            .collect(),
        RelationTool::RelationSet {
            relation, settings, ..
        } => relation
            .iter()
            .chain(settings.keys())
            .map(|k| format!("{k:?}"))
            .collect(),
    }
}

/// What a refusal says when the input it is about is missing rather than wrong.
const MISSING: [&str; 5] = [
    "names no application",
    "give -r",
    "needs a unit",
    "only the leader of web",
    "Databag r.web",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_relation_tool_answers_or_names_what_it_refuses(
        tool in tool(),
        has_application in prop::bool::weighted(0.9),
        leads in any::<bool>(),
        own in prop_oneof![Just(0usize), Just(MAX_DATA_BYTES - 100), 0..MAX_DATA_BYTES],
    ) {
        let filler = "o".repeat(own);
        let leadership = Leadership::new(std::time::Duration::from_secs(30));
        if leads {
            leadership.leading.send_replace(crate::leadership::Leading::from([(
                "web".to_owned(),
                std::time::Instant::now() + std::time::Duration::from_secs(60),
            )]));
        }
        let application = has_application.then_some("web");
        let (answer, sent) = block_on(async {
            let (client, sent) = recording();
            let relations = web_on_edge_a(client, &[("user", "edge-a"), ("filler", &filler)]);
            (relations.answer("web.v1", application, &leadership, tool.clone()).await, sent)
        });
        let sent = sent.lock().unwrap().clone();
        match (&answer, &tool) {
            (Err(error), _) => {
                let subjects = subjects(&tool);
                prop_assert!(
                    subjects.iter().any(|s| error.contains(s.as_str()))
                        || MISSING.iter().any(|m| error.contains(m)),
                    "{error:?} names none of {subjects:?}"
                );
                let wrote = sent.iter().any(|(method, ..)| method == "PATCH");
                prop_assert!(!wrote || error.starts_with("cannot write Databag"), "{error}: wrote {sent:?}");
            }
            (Ok(output), RelationTool::RelationSet { app, settings, .. }) => {
                prop_assert_eq!(output, &None);
                prop_assert!(settings.keys().all(|k| !k.is_empty() && !k.contains('=')), "{settings:?}");
                let bag = if *app { "r.web" } else { "r.web.edge-a" };
                prop_assert_eq!(sent.len(), 1);
                let (method, path, body) = &sent[0];
                prop_assert_eq!(method, "PATCH");
                prop_assert!(path.ends_with(&format!("/databags/{bag}/status")), "{path}");
                let data: serde_json::Map<String, Value> = settings
                    .iter()
                    .map(|(k, v)| (k.clone(), if v.is_empty() { Value::Null } else { json!(v) }))
                    .collect();
                let body: Value = serde_json::from_slice(body).unwrap();
                prop_assert_eq!(body, json!({"status": {"data": data}}));
            }
            (Ok(output), RelationTool::RelationGet { key, format, .. }) => {
                prop_assert!(sent.is_empty());
                let output = output.as_deref().expect("relation-get prints");
                if matches!(key.as_deref(), None | Some("-")) {
                    let read: BTreeMap<String, String> = if *format == Some(Format::Json) {
                        serde_json::from_str(output)
                            .unwrap_or_else(|e| panic!("{output:?} is not the data as JSON: {e}"))
                    } else {
                        serde_saphyr::from_str(output)
                            .unwrap_or_else(|e| panic!("{output:?} is not the data as YAML: {e}"))
                    };
                    prop_assert_eq!(print_map(&read, *format).unwrap(), output);
                }
            }
            (Ok(_), _) => prop_assert!(sent.is_empty()),
        }
    }
}

#[tokio::test]
async fn an_empty_key_sent_past_the_command_line_is_refused_naming_it() {
    let (client, sent) = recording();
    let relations = web_on_edge_a(client, &[]);
    let leadership = Leadership::new(std::time::Duration::from_secs(30));
    for key in ["", "a=b"] {
        let tool = RelationTool::RelationSet {
            relation: Some("database:r".into()),
            app: false,
            settings: BTreeMap::from([(key.to_owned(), "x".to_owned())]),
        };
        let answer = relations.answer("web.v1", Some("web"), &leadership, tool).await;
        assert_eq!(
            answer,
            Err(format!(
                "relation-set: key {key:?} is not valid: a key is not empty and has no '='"
            ))
        );
    }
    assert!(sent.lock().unwrap().is_empty(), "nothing written");
}

#[tokio::test]
async fn a_bag_is_not_set_past_its_limit_but_may_shrink() {
    let (client, sent) = recording();
    let filler = "o".repeat(MAX_DATA_BYTES - 10);
    let relations = web_on_edge_a(client, &[("filler", &filler)]);
    let leadership = Leadership::new(std::time::Duration::from_secs(30));
    let set = async |settings: &[(&str, &str)]| {
        let tool = RelationTool::RelationSet {
            relation: Some("r".into()),
            app: false,
            settings: settings
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        };
        relations.answer("web.v1", Some("web"), &leadership, tool).await
    };
    let refused = set(&[("more", "0123456789")]).await.unwrap_err();
    assert!(
        refused
            .starts_with("relation-set: Databag r.web.edge-a would hold 262154 bytes, more than the 262144"),
        "{refused}"
    );
    assert!(sent.lock().unwrap().is_empty());
    assert_eq!(set(&[("filler", ""), ("more", "0123456789")]).await, Ok(None));
    assert_eq!(sent.lock().unwrap().len(), 1);
}
