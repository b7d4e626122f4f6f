//! Property tests of the action tools' input on generated data: `action-get` over generated
//! parameters (odd unicode, huge numbers, nesting, keys that look like YAML) with dotted keys
//! that exist or not, `action-set` pairs valid or not, `action-log` and `action-fail` messages up
//! to the longest request line, and request lines for the action tools with fields removed or of
//! other types.
//!
//! The properties: nothing panics; `action-get` prints what it reads, so that its JSON and YAML
//! parse back to the parameter; `action-set` records exactly the pairs of the calls it accepts
//! and a refusal quotes the pair or key it refuses and records nothing; what a task keeps of its
//! log and failure stays bounded whatever a run sends; a refused request line says why.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use machine_agent::{
    actions::tool::{
        ActionCommand, ActionRun, Format, MAX_LOG_ENTRIES, MAX_MESSAGE_BYTES, MAX_RESULTS_BYTES,
    },
    hook_tool::{MAX_REQUEST_BYTES, Runs},
};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn now() -> Time {
    Time("2026-01-01T00:00:00Z".parse().unwrap())
}

/// Text a YAML printer must quote to read back as the same string.
fn odd_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,6}",
        "\\PC{0,12}",
        prop::sample::select(vec![
            "",
            "null",
            "~",
            "true",
            "False",
            "yes",
            "no",
            "on",
            "1",
            "-1",
            "1e3",
            "0x1F",
            "0o17",
            ".inf",
            "-.nan",
            "1_000",
            "12:30",
            "- a",
            "a: b",
            "#x",
            "'",
            "\"",
            "&a",
            "*a",
            "!!str",
            "? k",
            "%YAML",
            "---",
            "...",
            "|",
            ">",
            "[a]",
            "{a: 1}",
            " lead",
            "trail ",
            "a\nb",
            "\t",
            "\u{feff}",
            "\u{0}",
            "\u{85}",
            "\u{2028}",
            "\u{202e}é",
            "é",
            "🦀",
        ])
        .prop_map(str::to_owned),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::num::f64::NORMAL.prop_map(Value::from),
        Just(Value::from(f64::MAX)),
        Just(Value::from(f64::MIN_POSITIVE)),
        Just(Value::from(0.5)),
        Just(Value::from(-0.0)),
        odd_text().prop_map(Value::String),
    ]
}

/// A JSON value of up to four levels, keys as odd as the strings.
fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(odd_text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The parameters (an object) and a dotted key into them: one that exists, or any text.
fn params_and_key() -> impl Strategy<Value = (Value, Option<String>)> {
    prop::collection::btree_map(odd_text(), value(), 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
        .prop_flat_map(|params| {
            let mut paths = Vec::new();
            collect_paths(&params, String::new(), &mut paths);
            let existing = if paths.is_empty() {
                Just(None).boxed()
            } else {
                prop::sample::select(paths).prop_map(Some).boxed()
            };
            let key = prop_oneof![
                1 => Just(None),
                3 => existing,
                1 => odd_text().prop_map(Some),
            ];
            (Just(params), key)
        })
}

/// The dotted paths to every value under objects whose keys have no dot.
fn collect_paths(value: &Value, prefix: String, out: &mut Vec<String>) {
    if let Value::Object(map) = value {
        for (k, v) in map {
            if k.contains('.') {
                continue;
            }
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            out.push(path.clone());
            collect_paths(v, path, out);
        }
    }
}

fn lookup<'a>(params: &'a Value, key: Option<&str>) -> Option<&'a Value> {
    match key {
        None => Some(params),
        Some(key) => key.split('.').try_fold(params, |v, part| v.get(part)),
    }
}

fn key_part_ok(part: &str) -> bool {
    !part.is_empty()
        && part
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !part.starts_with('-')
        && !part.ends_with('-')
}

/// What `action-set` should make of `pair`: the key and value, or `None` when it is refused.
fn expected_pair(pair: &str) -> Option<(String, String)> {
    let (key, value) = pair.split_once('=')?;
    let reserved = ["stdout", "stderr", "stdout-encoding", "stderr-encoding", "code"];
    (key.split('.').all(key_part_ok) && !reserved.contains(&key)).then(|| (key.to_owned(), value.to_owned()))
}

fn pair() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => ("[a-z][a-z0-9-]{0,5}[a-z0-9](\\.[a-z0-9]{1,4}){0,2}", odd_text())
            .prop_map(|(k, v)| format!("{k}={v}")),
        1 => (odd_text(), odd_text()).prop_map(|(k, v)| format!("{k}={v}")),
        1 => odd_text(),
        1 => prop::sample::select(vec!["stdout=x", "code=1", "a..b=1", "a-=1", "=v", "A=1", "a.=1"])
            .prop_map(str::to_owned),
        1 => (1usize..MAX_RESULTS_BYTES + 100).prop_map(|n| format!("big={}", "x".repeat(n))),
    ]
}

/// A message of any length a request line can carry, ASCII or multi-byte.
fn message() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => odd_text(),
        1 => (0usize..MAX_REQUEST_BYTES - 100, prop::sample::select(vec!["x", "é", "🦀", " "]))
            .prop_map(|(n, c)| c.repeat(n / c.len())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn action_get_prints_the_parameter_so_that_it_reads_back(
        (params, key) in params_and_key(),
        format in prop::option::of(prop_oneof![Just(Format::Json), Just(Format::Yaml)]),
    ) {
        let run = ActionRun::new(params.clone());
        let command = ActionCommand::ActionGet { key: key.clone(), format };
        let printed = run.answer(command, &now()).expect("action-get reads the parameters");
        let Some(expected) = lookup(&params, key.as_deref()) else {
            prop_assert_eq!(printed, None, "a key that is not there prints nothing");
            return Ok(());
        };
        let printed = printed.expect("a parameter that is there is printed");
        match (format, expected) {
            (None, Value::String(text)) => prop_assert_eq!(&printed, text),
            (Some(Format::Json), _) => {
                let read: Value = serde_json::from_str(&printed).expect("the JSON printed reads");
                prop_assert!(same(&read, expected), "JSON {printed:?} reads as {read} not {expected}");
            }
            _ => {
                let read: Value = serde_saphyr::from_str(&printed)
                    .unwrap_or_else(|e| panic!("the YAML printed does not read: {e}\n{printed}"));
                prop_assert!(same(&read, expected), "YAML {printed:?} reads as {read} not {expected}");
            }
        }
    }

    #[test]
    fn action_set_records_the_calls_it_accepts_and_quotes_what_it_refuses(
        calls in prop::collection::vec(prop::collection::vec(pair(), 0..4), 1..5),
    ) {
        let run = ActionRun::new(json!({}));
        let mut model = BTreeMap::new();
        for pairs in calls {
            let answer = run.answer(ActionCommand::ActionSet { pairs: pairs.clone() }, &now());
            let parsed: Option<Vec<_>> = pairs.iter().map(|p| expected_pair(p)).collect();
            let mut next = model.clone();
            next.extend(parsed.clone().unwrap_or_default());
            let size: usize = next.iter().map(|(k, v): (&String, &String)| k.len() + v.len()).sum();
            match answer {
                Ok(printed) => {
                    prop_assert_eq!(printed, None);
                    prop_assert!(parsed.is_some() && size <= MAX_RESULTS_BYTES, "accepted {pairs:?}");
                    model = next;
                }
                Err(error) => {
                    match parsed {
                        None => {
                            let bad = pairs.iter().find(|p| expected_pair(p).is_none()).unwrap();
                            let key = bad.split_once('=').map_or(bad.as_str(), |(k, _)| k);
                            prop_assert!(
                                error.contains(&format!("{key:?}")) || error.contains(&format!("{bad:?}")),
                                "{error} does not quote {bad:?}"
                            );
                        }
                        Some(_) => prop_assert!(size > MAX_RESULTS_BYTES && error.contains("more than"), "{error}"),
                    }
                }
            }
            prop_assert_eq!(&run.recorded().results, &model);
        }
    }

    #[test]
    fn what_a_task_keeps_of_log_and_failure_stays_bounded(
        calls in prop::collection::vec((any::<bool>(), message()), 1..(MAX_LOG_ENTRIES + 20)),
    ) {
        let run = ActionRun::new(json!({}));
        let mut logged = Vec::new();
        for (fail, message) in calls {
            if fail {
                run.answer(ActionCommand::ActionFail { message: Some(message.clone()) }, &now())
                    .expect("action-fail always fails the task");
                let failed = run.recorded().failed.expect("failed");
                prop_assert!(failed.len() <= MAX_MESSAGE_BYTES + "…".len(), "{} bytes kept", failed.len());
                if message.trim().is_empty() {
                    prop_assert_eq!(failed, "action failed without reason given");
                } else if message.len() <= MAX_MESSAGE_BYTES {
                    prop_assert_eq!(failed, message);
                } else {
                    prop_assert!(message.starts_with(failed.trim_end_matches('…')));
                }
            } else {
                match run.answer(ActionCommand::ActionLog { message: message.clone() }, &now()) {
                    Ok(_) => {
                        prop_assert!(message.len() <= MAX_MESSAGE_BYTES);
                        logged.push(message);
                    }
                    Err(error) => {
                        prop_assert!(message.len() > MAX_MESSAGE_BYTES, "{error}");
                        prop_assert!(error.starts_with("action-log: ") && error.contains("bytes"), "{error}");
                    }
                }
            }
        }
        let kept: Vec<String> = run.recorded().log.into_iter().map(|e| e.message).collect();
        let from = logged.len().saturating_sub(MAX_LOG_ENTRIES);
        prop_assert_eq!(&kept[..], &logged[from..]);
    }

    #[test]
    fn an_action_tool_request_takes_effect_or_says_why(
        command in prop::sample::select(vec!["action-get", "action-set", "action-log", "action-fail", "action_get", "ActionSet"]),
        fields in prop::collection::btree_map(
            prop::sample::select(vec!["key", "format", "pairs", "message", "run", "command"]),
            prop_oneof![
                Just(Value::Null), Just(json!("path")), Just(json!("json")), Just(json!("YAML")),
                Just(json!(["a=1"])), Just(json!([1])), Just(json!("a=1")), Just(json!({})), Just(json!(7)),
                Just(json!(true)), odd_text().prop_map(Value::String),
            ],
            0..4,
        ),
        in_action in any::<bool>(),
    ) {
        let runs = Runs::default();
        let action = ActionRun::new(json!({"path": "/srv"}));
        let guard = if in_action {
            runs.start_action("db.v1", Some("db"), action.clone())
        } else {
            runs.start("db.v1", Some("db"))
        };
        let mut request: serde_json::Map<String, Value> = fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        request.insert("run".to_owned(), json!(guard.id));
        request.insert("command".to_owned(), json!(command));
        let line = serde_json::to_vec(&Value::Object(request)).unwrap();
        let reply = futures::executor::block_on(runs.answer(&line));
        match &reply.error {
            Some(error) => prop_assert!(
                error.starts_with("cannot read the request: ")
                    || error.contains("works only inside an action")
                    || error.contains("is not KEY=VALUE")
                    || error.contains("is not valid"),
                "{}", error
            ),
            None => prop_assert!(in_action, "an action tool answered in a hook"),
        }
    }
}

/// Equal, reading a float printed with no fraction as that float, and a float as the nearest
/// one a reader without exact float parsing finds (serde_json's default: the printing is exact).
fn same(read: &Value, expected: &Value) -> bool {
    match (read, expected) {
        (Value::Number(a), Value::Number(b)) if b.is_f64() => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            a == b || (a - b).abs() <= b.abs() * 4.0 * f64::EPSILON
        }
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w)))
        }
        _ => read == expected,
    }
}

#[test]
fn a_long_progress_message_is_refused_naming_the_limit() {
    let run = ActionRun::new(json!({}));
    let message = "x".repeat(MAX_REQUEST_BYTES - 100);
    let error = run
        .answer(ActionCommand::ActionLog { message }, &now())
        .unwrap_err();
    assert!(
        error.contains(&format!("more than the {MAX_MESSAGE_BYTES}")),
        "{error}"
    );
    assert!(run.recorded().log.is_empty());
}

#[test]
fn a_long_failure_message_still_fails_the_task_cut_on_a_character() {
    let run = ActionRun::new(json!({}));
    let message = "é".repeat(MAX_MESSAGE_BYTES);
    run.answer(
        ActionCommand::ActionFail {
            message: Some(message),
        },
        &now(),
    )
    .unwrap();
    let failed = run.recorded().failed.unwrap();
    assert!(
        failed.len() <= MAX_MESSAGE_BYTES + "…".len() && failed.ends_with('…'),
        "{failed}"
    );
}
