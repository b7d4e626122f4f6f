//! Property tests of the hook tool's input on generated data: the request lines a hook sends to
//! the agent's socket (arbitrary bytes, over-long lines, and well-formed requests with fields
//! removed, of other types, odd states, huge messages) and the tool's command line.
//!
//! The properties: nothing panics; a refused request is answered with a reason that says it is
//! the request (or the run) that is wrong; a request the agent accepts takes effect as sent and
//! round-trips through its JSON line; a refused command line says why.

use clap::Parser;
use machine_agent::{
    cli::{Cli, HookCommand},
    hook_tool::{MAX_REQUEST_BYTES, Request, Runs},
    relations::tools::RelationCommand,
};
use olm_api::substrate::WorkloadState;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Answers `line`; a refusal must say what was refused.
fn answer(runs: &Runs, line: &[u8]) -> Option<String> {
    // No relation tool is asked here: the answer never waits on the API server.
    let reply = futures::executor::block_on(runs.answer(line));
    if let Some(error) = &reply.error {
        assert!(
            error.starts_with("cannot read the request: ") || error.starts_with("no hook run "),
            "the refusal does not say what it refuses: {error}"
        );
        assert!(error.len() > 30, "no reason in {error:?}");
    }
    reply.error
}

fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(Value::from(f64::MAX)),
        "[ -~]{0,12}".prop_map(Value::String),
        Just(Value::String("\u{feff}\0\u{202e}é\n".to_owned())),
        Just(Value::String("m".repeat(MAX_REQUEST_BYTES))),
        Just(json!("active")),
        Just(json!("status-set")),
        Just(json!("log")),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"command": "log"})),
    ]
}

/// Field `name` kept as `good`, removed, or replaced with an odd value.
fn field(name: &'static str, good: Value) -> impl Strategy<Value = (&'static str, Option<Value>)> {
    prop_oneof![
        3 => Just(Some(good)),
        1 => Just(None),
        2 => odd_value().prop_map(Some),
    ]
    .prop_map(move |v| (name, v))
}

/// A request for `run` with each of its fields kept, removed or replaced.
fn request(run: String) -> impl Strategy<Value = Value> {
    let state = prop::sample::select(WorkloadState::ALL.to_vec()).prop_map(|s| json!(s.as_str()));
    (
        field("run", json!(run)),
        prop::sample::select(vec!["status-set", "log", "status_set", "StatusSet", ""])
            .prop_flat_map(|c| field("command", json!(c))),
        state.prop_flat_map(move |s| field("state", s)),
        field("message", json!("needs a license")),
    )
        .prop_map(|fields| {
            let (a, b, c, d) = fields;
            let map: serde_json::Map<String, Value> = [a, b, c, d]
                .into_iter()
                .filter_map(|(k, v)| Some((k.to_owned(), v?)))
                .collect();
            Value::Object(map)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_are_refused_with_a_reason(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let runs = Runs::default();
        let _guard = runs.start("demo.v1", None);
        // No run id is guessable: whatever the bytes, nothing is set.
        prop_assert!(answer(&runs, &bytes).is_some());
    }

    #[test]
    fn a_request_takes_effect_as_sent_or_is_refused(
        value in request(String::new()),
        known_run in any::<bool>(),
        newline in any::<bool>(),
    ) {
        let runs = Runs::default();
        let guard = runs.start("demo.v1", None);
        let mut value = value;
        if known_run && value.get("run").is_some_and(|r| r == "") {
            value["run"] = json!(guard.id);
        }
        let mut line = serde_json::to_vec(&value).unwrap();
        if newline {
            line.push(b'\n');
        }
        let parsed = serde_json::from_slice::<Request>(&line);
        match answer(&runs, &line) {
            None => {
                let request = parsed.expect("an accepted line is a request");
                prop_assert_eq!(&request.run, &guard.id);
                let again: Request = serde_json::from_str(&serde_json::to_string(&request).unwrap()).unwrap();
                prop_assert_eq!(&again, &request);
                if let machine_agent::hook_tool::Command::StatusSet { state, message } = request.command {
                    prop_assert_eq!(guard.workload.lock().unwrap().clone(), Some((state, message)));
                }
            }
            Some(_) => prop_assert!(guard.workload.lock().unwrap().is_none()),
        }
    }

    #[test]
    fn a_line_over_the_limit_is_refused_whatever_it_holds(extra in 1usize..4096, fill in any::<u8>()) {
        let runs = Runs::default();
        let line = vec![fill; MAX_REQUEST_BYTES + extra];
        let error = answer(&runs, &line).expect("refused");
        prop_assert!(error.contains("longer than"), "{}", error);
    }

    #[test]
    fn the_hook_command_line_parses_or_says_why(
        args in proptest::collection::vec(
            prop_oneof![
                Just("status-set".to_owned()), Just("log".to_owned()), Just("--".to_owned()),
                Just("--help".to_owned()), Just("-x".to_owned()), Just("active".to_owned()),
                Just("Active".to_owned()), Just("".to_owned()), "[ -~]{0,10}",
                Just("\u{feff}é\0".to_owned()),
                prop::sample::select(vec![
                    "relation-ids", "relation-list", "relation-get", "relation-set", "-r", "--app",
                    "database:r", "k=v", "=v", "k=", "a=b=c", "action-get", "action-set",
                    "action-log", "action-fail", "--format", "json", "yaml", "xml", "is-leader",
                ])
                .prop_map(str::to_owned),
            ],
            0..5,
        ),
    ) {
        let argv = ["machine-agent", "hook"].into_iter().map(str::to_owned).chain(args.clone());
        match Cli::try_parse_from(argv) {
            Ok(cli) => {
                let machine_agent::cli::Command::Hook(hook) = cli.command else {
                    panic!("not a hook command: {args:?}");
                };
                // A key the agent would refuse never leaves the command line.
                if let HookCommand::Relation(RelationCommand::RelationSet { settings, .. }) = hook {
                    prop_assert!(settings.iter().all(|(k, _)| !k.is_empty()), "{:?}", args);
                }
            }
            Err(error) => prop_assert!(!error.to_string().trim().is_empty(), "{:?}", args),
        }
    }
}

#[test]
fn an_unknown_state_on_the_command_line_is_named() {
    let error = Cli::try_parse_from(["machine-agent", "hook", "status-set", "sleepy"]).unwrap_err();
    assert!(error.to_string().contains("sleepy"), "{error}");
}

#[test]
fn a_well_formed_request_of_the_run_sets_the_status() {
    let runs = Runs::default();
    let guard = runs.start("demo.v1", None);
    let line = json!({"run": guard.id, "command": "status-set", "state": "blocked", "message": "m"});
    assert_eq!(answer(&runs, line.to_string().as_bytes()), None);
    assert_eq!(
        guard.workload.lock().unwrap().clone(),
        Some((WorkloadState::Blocked, Some("m".to_owned())))
    );
}
