//! The hook tools of an action: `action-get`, `action-set`, `action-log` and
//! `action-fail`, as Juju's. They reach the agent through the hook tool's
//! socket like every other tool ([`crate::hook_tool`]); the agent answers them
//! from the [`ActionRun`] of the run they name, and refuses them in a hook run.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::model::LogEntry;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most results one task keeps, in bytes of keys and values.
pub const MAX_RESULTS_BYTES: usize = 16 * 1024;
/// The most progress messages one task keeps: the latest.
pub const MAX_LOG_ENTRIES: usize = 100;
/// The longest progress message (`action-log`) or failure message (`action-fail`) a task
/// keeps, in bytes. A request line may be 64 KiB long: a hundred such messages would make a
/// task larger than the API server stores, and the task's whole report would be lost with it.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Result keys the agent fills itself (Juju reserves the same).
const RESERVED: [&str; 5] = ["stdout", "stderr", "stdout-encoding", "stderr-encoding", "code"];

/// What an action's run asks of the agent through the hook tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum ActionCommand {
    /// `action-get [KEY] [--format json|yaml]`: the parameters, or one of them
    /// by its dotted path.
    ActionGet {
        /// The dotted path of a parameter; none: all of them.
        #[serde(default)]
        key: Option<String>,
        /// How to print; by default a string as it is, anything else as YAML.
        #[serde(default)]
        format: Option<Format>,
    },
    /// `action-set KEY=VALUE...`: results, keys lowercase with dots for nesting.
    ActionSet {
        /// The `KEY=VALUE` pairs.
        pairs: Vec<String>,
    },
    /// `action-log MESSAGE`: a progress message.
    ActionLog {
        /// The message.
        message: String,
    },
    /// `action-fail [MESSAGE]`: the task fails with this message when the
    /// action ends (the script goes on).
    ActionFail {
        /// Why.
        #[serde(default)]
        message: Option<String>,
    },
}

pub use crate::tool_format::Format;

/// What an action's run set through the tools, read once it ends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recorded {
    /// `action-set`.
    pub results: BTreeMap<String, String>,
    /// `action-log`, the latest [`MAX_LOG_ENTRIES`].
    pub log: Vec<LogEntry>,
    /// `action-fail`: the message.
    pub failed: Option<String>,
}

/// The action a run serves: its parameters and what it recorded.
#[derive(Clone, Debug)]
pub struct ActionRun {
    params: Arc<Value>,
    recorded: Arc<Mutex<Recorded>>,
}

impl ActionRun {
    /// A run of an action with `params` (a JSON object).
    pub fn new(params: Value) -> Self {
        ActionRun {
            params: Arc::new(params),
            recorded: Arc::default(),
        }
    }

    /// What the run recorded so far.
    pub fn recorded(&self) -> Recorded {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Answers `command`, at time `now`: what to print, or why it is refused.
    pub fn answer(&self, command: ActionCommand, now: &Time) -> Result<Option<String>, String> {
        match command {
            ActionCommand::ActionGet { key, format } => get(&self.params, key.as_deref(), format),
            ActionCommand::ActionSet { pairs } => {
                let parsed = pairs
                    .iter()
                    .map(|p| parse_pair(p))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut recorded = self.lock();
                let mut results = recorded.results.clone();
                results.extend(parsed);
                let size: usize = results.iter().map(|(k, v)| k.len() + v.len()).sum();
                if size > MAX_RESULTS_BYTES {
                    return Err(format!(
                        "the results would hold {size} bytes, more than the {MAX_RESULTS_BYTES} a task keeps: set less, or write it to a file and set its path"
                    ));
                }
                recorded.results = results;
                Ok(None)
            }
            ActionCommand::ActionLog { message } => {
                if message.len() > MAX_MESSAGE_BYTES {
                    return Err(format!(
                        "action-log: the message is {} bytes, more than the {MAX_MESSAGE_BYTES} a task keeps: log less, or write it to a file and log its path",
                        message.len()
                    ));
                }
                let mut recorded = self.lock();
                recorded.log.push(LogEntry {
                    time: now.clone(),
                    message,
                });
                let over = recorded.log.len().saturating_sub(MAX_LOG_ENTRIES);
                recorded.log.drain(..over);
                Ok(None)
            }
            ActionCommand::ActionFail { message } => {
                // Cut rather than refused: the task must fail whatever the message.
                let message = message
                    .filter(|m| !m.trim().is_empty())
                    .map(|m| cut(m, MAX_MESSAGE_BYTES))
                    .unwrap_or_else(|| "action failed without reason given".to_owned());
                self.lock().failed = Some(message);
                Ok(None)
            }
        }
    }
}

/// `text`, or when it is longer than `max` bytes its start up to a character boundary, and '…'.
fn cut(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let end = (0..=max).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
    format!("{}…", &text[..end])
}

/// The refusal of an action's tool in a hook run.
pub fn not_in_action(command: &ActionCommand) -> String {
    let tool = match command {
        ActionCommand::ActionGet { .. } => "action-get",
        ActionCommand::ActionSet { .. } => "action-set",
        ActionCommand::ActionLog { .. } => "action-log",
        ActionCommand::ActionFail { .. } => "action-fail",
    };
    format!("{tool} works only inside an action, and this is a hook")
}

/// `action-get`: the parameter at dotted path `key` (nothing when absent, as
/// Juju), or all of them.
fn get(params: &Value, key: Option<&str>, format: Option<Format>) -> Result<Option<String>, String> {
    let value = match key {
        None => params,
        Some(key) => match key.split('.').try_fold(params, |value, part| value.get(part)) {
            Some(value) => value,
            None => return Ok(None),
        },
    };
    let text = match (format, value) {
        (None, Value::String(text)) => text.clone(),
        (None | Some(Format::Yaml), value) => serde_saphyr::to_string(value)
            .map_err(|e| format!("cannot print the parameters as YAML: {e}"))?
            .trim_end()
            .to_owned(),
        (Some(Format::Json), value) => value.to_string(),
    };
    Ok(Some(text))
}

/// One `KEY=VALUE` of `action-set`: each dotted part of the key lowercase
/// letters, digits and '-', starting and ending with a letter or digit.
fn parse_pair(pair: &str) -> Result<(String, String), String> {
    let Some((key, value)) = pair.split_once('=') else {
        return Err(format!("{pair:?} is not KEY=VALUE"));
    };
    let part_ok = |part: &str| {
        let bytes = part.as_bytes();
        !bytes.is_empty()
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            && bytes.first().is_some_and(|b| *b != b'-')
            && bytes.last().is_some_and(|b| *b != b'-')
    };
    if !key.split('.').all(part_ok) {
        return Err(format!(
            "result key {key:?} is not valid: use lowercase letters, digits and '-', with '.' between nested keys"
        ));
    }
    if RESERVED.contains(&key) {
        return Err(format!(
            "result key {key:?} is kept by the agent (it records stdout, stderr and the exit code itself)"
        ));
    }
    Ok((key.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Time {
        Time("2026-01-01T00:00:00Z".parse().unwrap())
    }

    fn run() -> ActionRun {
        ActionRun::new(serde_json::json!({"path": "/srv", "level": 3, "opts": {"zip": true}}))
    }

    fn get(run: &ActionRun, key: Option<&str>, format: Option<Format>) -> Option<String> {
        let command = ActionCommand::ActionGet {
            key: key.map(str::to_owned),
            format,
        };
        run.answer(command, &now()).unwrap()
    }

    #[test]
    fn action_get_prints_a_parameter_by_dotted_key_or_all_of_them() {
        let run = run();
        assert_eq!(get(&run, Some("path"), None).as_deref(), Some("/srv"));
        assert_eq!(get(&run, Some("level"), None).as_deref(), Some("3"));
        assert_eq!(
            get(&run, Some("opts.zip"), Some(Format::Json)).as_deref(),
            Some("true")
        );
        assert_eq!(
            get(&run, Some("path"), Some(Format::Json)).as_deref(),
            Some("\"/srv\"")
        );
        assert_eq!(get(&run, Some("missing.key"), None), None);
        let all: Value = serde_json::from_str(&get(&run, None, Some(Format::Json)).unwrap()).unwrap();
        assert_eq!(all["opts"]["zip"], true);
        let yaml = get(&run, None, None).unwrap();
        assert!(yaml.contains("path: /srv") && yaml.contains("level: 3"), "{yaml}");
    }

    #[test]
    fn action_set_takes_dotted_lowercase_keys_and_refuses_others_naming_them() {
        let run = run();
        let set = |pairs: &[&str]| {
            run.answer(
                ActionCommand::ActionSet {
                    pairs: pairs.iter().map(|p| (*p).to_owned()).collect(),
                },
                &now(),
            )
        };
        set(&["path=/srv/b.tar", "backup.size=1024", "note=a=b"]).unwrap();
        for (bad, says) in [
            ("Path=x", "\"Path\" is not valid"),
            ("a..b=x", "\"a..b\" is not valid"),
            ("-a=x", "\"-a\" is not valid"),
            ("stdout=x", "kept by the agent"),
            ("novalue", "not KEY=VALUE"),
        ] {
            let error = set(&["fine=1", bad]).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
        let big = format!("big={}", "x".repeat(MAX_RESULTS_BYTES));
        assert!(set(&[&big]).unwrap_err().contains("more than"));
        let recorded = run.recorded();
        assert_eq!(
            recorded.results,
            BTreeMap::from([
                ("backup.size".to_owned(), "1024".to_owned()),
                ("note".to_owned(), "a=b".to_owned()),
                ("path".to_owned(), "/srv/b.tar".to_owned()),
            ]),
            "a refused call sets none of its pairs"
        );
    }

    #[test]
    fn action_log_keeps_the_latest_messages_and_action_fail_a_message() {
        let run = run();
        for n in 0..MAX_LOG_ENTRIES + 5 {
            let command = ActionCommand::ActionLog {
                message: format!("step {n}"),
            };
            run.answer(command, &now()).unwrap();
        }
        run.answer(ActionCommand::ActionFail { message: None }, &now())
            .unwrap();
        let recorded = run.recorded();
        assert_eq!(recorded.log.len(), MAX_LOG_ENTRIES);
        assert_eq!(recorded.log[0].message, "step 5");
        assert_eq!(
            recorded.failed.as_deref(),
            Some("action failed without reason given")
        );
        run.answer(
            ActionCommand::ActionFail {
                message: Some("disk full".into()),
            },
            &now(),
        )
        .unwrap();
        assert_eq!(run.recorded().failed.as_deref(), Some("disk full"));
    }
}
