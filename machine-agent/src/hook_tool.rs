//! The hook tool: `machine-agent hook status-set|log|is-leader`, the
//! relation tools (`relation-ids|relation-list|relation-get|relation-set`,
//! [`crate::relations::tools`]) and, inside an action,
//! `action-get|action-set|action-log|action-fail` ([`crate::actions::tool`]),
//! through which a running hook or action sets its unit's workload status,
//! logs, asks whether its unit leads its application, reads and writes its
//! relations' data and reports on its action; and the agent's end of it.
//!
//! The tool talks to the running agent over a Unix socket in the state directory
//! (path in `OLM_RS_AGENT_SOCKET`), one JSON line each way. A Unix socket because it
//! is local only (no port to allocate or expose, nothing for the network to reach),
//! only the agent's user and the group of its hooks may connect (mode 0660; the
//! state directory lets them pass through to it, not list it), it needs no
//! credentials, and the answer is synchronous, so a hook knows its status landed
//! before it exits. Each hook run gets a fresh run id (`OLM_RS_HOOK_RUN`) that the
//! agent knows only while that run lasts: a call names the run, so a stray process
//! or a finished hook cannot set a unit's status.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    path::Path,
    sync::{Arc, Mutex},
};

use olm_api::substrate::WorkloadState;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::{
    actions::tool::{ActionCommand, ActionRun},
    leadership::Leadership,
    relations::{Relations, tools::RelationTool},
};

/// The environment variable with the socket's path.
pub const SOCKET_ENV: &str = "OLM_RS_AGENT_SOCKET";
/// The environment variable with the hook run's id.
pub const RUN_ENV: &str = "OLM_RS_HOOK_RUN";

/// The longest request line the agent reads: a status message or log line is short, and a
/// hook must not make the agent hold an endless line in memory.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// One call of the hook tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// The hook run it comes from.
    pub run: String,
    /// What it asks.
    #[serde(flatten)]
    pub command: Command,
}

/// What a hook asks of the agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum Command {
    /// Sets the unit's workload status.
    StatusSet {
        /// The state.
        state: WorkloadState,
        /// The message.
        #[serde(default)]
        message: Option<String>,
    },
    /// Writes a line to the agent's log, tagged with the unit and hook.
    Log {
        /// The line.
        message: String,
    },
    /// Asks whether the unit leads its application: `True` holds for at least
    /// half the leader Lease's duration ([`Leadership::confirms`]).
    IsLeader,
    /// A relation tool ([`crate::relations::tools`]).
    Relation(RelationTool),
    /// A tool of an action's run ([`crate::actions::tool`]).
    #[serde(untagged)]
    Action(ActionCommand),
}

/// The agent's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reply {
    /// What went wrong, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the tool prints, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

impl Reply {
    fn ok() -> Reply {
        Reply {
            error: None,
            output: None,
        }
    }

    fn refused(error: String) -> Reply {
        Reply {
            error: Some(error),
            output: None,
        }
    }

    /// The reply of a tool that answers with output or refuses with a reason.
    fn of(answer: Result<Option<String>, String>) -> Reply {
        match answer {
            Ok(output) => Reply { error: None, output },
            Err(error) => Reply::refused(error),
        }
    }
}

/// What a hook run set, read by its unit once the hook ends.
pub type Workload = Arc<Mutex<Option<(WorkloadState, Option<String>)>>>;

/// The hook runs in progress, by run id.
#[derive(Clone)]
pub struct Runs {
    inner: Arc<Mutex<Runner>>,
    leadership: Leadership,
    relations: Option<Relations>,
}

impl Default for Runs {
    fn default() -> Self {
        Runs::new(Leadership::new(std::time::Duration::from_secs(40)))
    }
}

#[derive(Default)]
struct Runner {
    next: u64,
    runs: HashMap<String, Run>,
}

/// What the agent knows of a hook run in progress.
#[derive(Clone)]
struct Run {
    unit: String,
    application: Option<String>,
    workload: Workload,
    /// The action it runs; `None` for a hook.
    action: Option<ActionRun>,
}

/// A registered hook run; it is forgotten when dropped.
pub struct RunGuard {
    runs: Runs,
    /// The run's id, for the hook's environment.
    pub id: String,
    /// What the hook set.
    pub workload: Workload,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.runs.lock().runs.remove(&self.id);
    }
}

impl Runs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Runner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// No run in progress; `is-leader` answers from `leadership`.
    pub fn new(leadership: Leadership) -> Self {
        Runs {
            inner: Arc::default(),
            leadership,
            relations: None,
        }
    }

    /// These runs, with the relation tools answered from `relations`.
    pub fn with_relations(self, relations: Relations) -> Self {
        Runs {
            relations: Some(relations),
            ..self
        }
    }

    /// Registers a run of a hook of `unit` of `application`.
    pub fn start(&self, unit: &str, application: Option<&str>) -> RunGuard {
        self.start_run(unit, application, None)
    }

    /// Registers a run of action `action` on `unit` of `application`.
    pub fn start_action(&self, unit: &str, application: Option<&str>, action: ActionRun) -> RunGuard {
        self.start_run(unit, application, Some(action))
    }

    fn start_run(&self, unit: &str, application: Option<&str>, action: Option<ActionRun>) -> RunGuard {
        let mut runner = self.lock();
        runner.next += 1;
        // Not guessable from outside the agent: the counter, the process and the clock.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let id = format!("{}-{}-{nanos:x}", runner.next, std::process::id());
        let workload = Workload::default();
        let run = Run {
            unit: unit.to_owned(),
            application: application.map(str::to_owned),
            workload: workload.clone(),
            action,
        };
        runner.runs.insert(id.clone(), run);
        RunGuard {
            runs: self.clone(),
            id,
            workload,
        }
    }

    /// Answers one request.
    pub async fn handle(&self, request: Request) -> Reply {
        let Some(run) = self.lock().runs.get(&request.run).cloned() else {
            return Reply::refused(format!(
                "no hook run {} is in progress: the hook tool works only inside a hook",
                request.run
            ));
        };
        let unit = &run.unit;
        match request.command {
            Command::StatusSet { state, message } => {
                tracing::info!(unit, %state, message = message.as_deref().unwrap_or(""), "status-set");
                *run.workload.lock().unwrap_or_else(|p| p.into_inner()) = Some((state, message));
            }
            Command::Log { message } => tracing::info!(unit, "{message}"),
            Command::IsLeader => {
                let leads = run
                    .application
                    .as_deref()
                    .is_some_and(|a| self.leadership.confirms(a));
                let answer = if leads { "True" } else { "False" };
                return Reply {
                    error: None,
                    output: Some(answer.to_owned()),
                };
            }
            Command::Relation(tool) => {
                let Some(relations) = &self.relations else {
                    return Reply::refused("this agent keeps no relations".to_owned());
                };
                let answer = relations
                    .answer(unit, run.application.as_deref(), &self.leadership, tool)
                    .await;
                return Reply::of(answer);
            }
            Command::Action(command) => {
                let answer = match &run.action {
                    Some(action) => action.answer(command, &olm_runtime::conditions::now()),
                    None => Err(crate::actions::tool::not_in_action(&command)),
                };
                return Reply::of(answer);
            }
        }
        Reply::ok()
    }

    /// Answers one request line as read from the socket (at most [`MAX_REQUEST_BYTES`] of it
    /// is read, newline included): a line that is too long or not a request is refused with
    /// the reason.
    pub async fn answer(&self, line: &[u8]) -> Reply {
        if line.len() > MAX_REQUEST_BYTES {
            return Reply::refused(format!(
                "cannot read the request: it is longer than {MAX_REQUEST_BYTES} bytes"
            ));
        }
        match serde_json::from_slice::<Request>(line) {
            Ok(request) => self.handle(request).await,
            Err(error) => Reply::refused(format!("cannot read the request: {error}")),
        }
    }

    /// Serves the hook tool on a Unix socket at `path` until dropped. The socket
    /// is for the agent's user and group, or group `group` when given (the group
    /// unprivileged hooks run with): mode 0660.
    pub async fn serve(self, path: &Path, group: Option<u32>) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::remove_file(path);
        let listener = tokio::net::UnixListener::bind(path)?;
        std::os::unix::fs::chown(path, None, group)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
        loop {
            let (stream, _) = listener.accept().await?;
            let runs = self.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut line = Vec::new();
                // One byte over the limit is enough to know the request is too long.
                let mut bounded = tokio::io::BufReader::new(read).take(MAX_REQUEST_BYTES as u64 + 1);
                if bounded.read_until(b'\n', &mut line).await.is_err() {
                    return;
                }
                let reply = runs.answer(&line).await;
                let mut out = serde_json::to_vec(&reply).unwrap_or_default();
                out.push(b'\n');
                let _ = write.write_all(&out).await;
            });
        }
    }
}

/// Why the hook tool could not deliver a call.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The environment of a hook is missing.
    #[error("{variable} is not set: the hook tool works only inside a hook")]
    NotInHook {
        /// The variable.
        variable: &'static str,
        /// Why it cannot be read.
        #[source]
        source: std::env::VarError,
    },
    /// The agent's socket could not be reached.
    #[error("cannot reach the agent at {socket}")]
    Unreachable {
        /// The socket's path.
        socket: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The call could not be sent, or its answer read.
    #[error("cannot talk to the agent at {socket}")]
    Talk {
        /// The socket's path.
        socket: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The agent answered something that is not a reply.
    #[error("the agent's answer is not a reply")]
    NotAReply(#[source] serde_json::Error),
    /// The agent refused the call.
    #[error("{0}")]
    Refused(String),
}

/// The hook tool's side: sends `command` to the agent named by the environment;
/// what the agent answers to print, if anything.
pub fn call(command: Command) -> Result<Option<String>, CallError> {
    let variable = |variable: &'static str| {
        std::env::var(variable).map_err(|source| CallError::NotInHook { variable, source })
    };
    let socket = variable(SOCKET_ENV)?;
    let run = variable(RUN_ENV)?;
    let stream =
        std::os::unix::net::UnixStream::connect(&socket).map_err(|source| CallError::Unreachable {
            socket: socket.clone(),
            source,
        })?;
    let answer =
        exchange(stream, &Request { run, command }).map_err(|source| CallError::Talk { socket, source })?;
    let reply: Reply = serde_json::from_str(&answer).map_err(CallError::NotAReply)?;
    match reply.error {
        Some(error) => Err(CallError::Refused(error)),
        None => Ok(reply.output),
    }
}

/// Sends `request` as one JSON line and reads the one line of the answer.
fn exchange(mut stream: std::os::unix::net::UnixStream, request: &Request) -> std::io::Result<String> {
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    stream.write_all(&line)?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer)?;
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_run_in_progress_may_set_status() {
        let runs = Runs::default();
        let guard = runs.start("demo.v1", Some("demo"));
        let set = |run: &str| {
            runs.handle(Request {
                run: run.to_owned(),
                command: Command::StatusSet {
                    state: WorkloadState::Blocked,
                    message: Some("needs a license".into()),
                },
            })
        };
        assert_eq!(set(&guard.id).await.error, None);
        assert_eq!(
            *guard.workload.lock().unwrap(),
            Some((WorkloadState::Blocked, Some("needs a license".into())))
        );
        let id = guard.id.clone();
        drop(guard);
        assert!(set(&id).await.error.unwrap().contains("no hook run"));
    }

    #[tokio::test]
    async fn is_leader_answers_for_the_units_application() {
        let leadership = Leadership::new(std::time::Duration::from_secs(10));
        let runs = Runs::new(leadership.clone());
        let db = runs.start("db.v1", Some("db"));
        let web = runs.start("web.v1", Some("web"));
        let ask = async |run: &RunGuard| {
            runs.handle(Request {
                run: run.id.clone(),
                command: Command::IsLeader,
            })
            .await
            .output
        };
        assert_eq!(ask(&db).await.as_deref(), Some("False"));
        leadership
            .leading
            .send_replace(crate::leadership::Leading::from([(
                "db".to_owned(),
                std::time::Instant::now() + std::time::Duration::from_secs(10),
            )]));
        assert_eq!(ask(&db).await.as_deref(), Some("True"));
        assert_eq!(ask(&web).await.as_deref(), Some("False"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_endless_request_line_is_refused_at_the_limit() {
        let socket = std::env::temp_dir().join(format!("olm-rs-hook-limit-{}.sock", std::process::id()));
        let served = socket.clone();
        let server = tokio::spawn(async move { Runs::default().serve(&served, None).await });
        let path = socket.clone();
        let answer = tokio::task::spawn_blocking(move || {
            let mut stream = (0..100)
                .find_map(|_| {
                    std::os::unix::net::UnixStream::connect(&path)
                        .inspect_err(|_| std::thread::sleep(std::time::Duration::from_millis(20)))
                        .ok()
                })
                .expect("the agent's socket accepts");
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            // No newline: without a limit the agent would wait for more, holding all of it.
            stream.write_all(&vec![b'x'; MAX_REQUEST_BYTES + 10]).unwrap();
            let mut answer = String::new();
            BufReader::new(stream).read_line(&mut answer).unwrap();
            answer
        })
        .await
        .unwrap();
        server.abort();
        let _ = std::fs::remove_file(&socket);
        let reply: Reply = serde_json::from_str(&answer).unwrap();
        assert!(reply.error.unwrap().contains("longer than 65536 bytes"));
    }

    #[tokio::test]
    async fn action_tools_answer_inside_an_action_and_refuse_in_a_hook() {
        let runs = Runs::default();
        let action = ActionRun::new(serde_json::json!({"path": "/srv"}));
        let in_action = runs.start_action("db.v1", Some("db"), action.clone());
        let hook = runs.start("db.v1", Some("db"));
        let line = async |run: &RunGuard, command: &str| {
            let request = format!(r#"{{"run":"{}",{command}}}"#, run.id);
            runs.answer(request.as_bytes()).await
        };
        let get = r#""command":"action-get","key":"path""#;
        assert_eq!(line(&in_action, get).await.output.as_deref(), Some("/srv"));
        let set = r#""command":"action-set","pairs":["size=3"]"#;
        assert_eq!(line(&in_action, set).await.error, None);
        assert_eq!(action.recorded().results["size"], "3");
        assert_eq!(
            line(&hook, get).await.error.as_deref(),
            Some("action-get works only inside an action, and this is a hook")
        );
        let fail = Request {
            run: hook.id.clone(),
            command: Command::Action(ActionCommand::ActionFail { message: None }),
        };
        let sent = serde_json::to_string(&fail).unwrap();
        assert_eq!(
            sent,
            format!(
                r#"{{"run":"{}","command":"action-fail","message":null}}"#,
                hook.id
            )
        );
        assert_eq!(serde_json::from_str::<Request>(&sent).unwrap(), fail);
    }

    #[test]
    fn requests_are_one_json_line() {
        let request = Request {
            run: "1".into(),
            command: Command::StatusSet {
                state: WorkloadState::Active,
                message: None,
            },
        };
        let line = serde_json::to_string(&request).unwrap();
        assert_eq!(
            line,
            r#"{"run":"1","command":"status-set","state":"active","message":null}"#
        );
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), request);
    }
}
