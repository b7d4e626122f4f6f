//! The agent's command line: `machine-agent run` and the hook tool, and running them.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use olm_api::substrate::WorkloadState;

pub use crate::run_args::{DEFAULT_HOOK_ID, RunArgs};
use crate::{
    actions::tool::{ActionCommand, Format},
    agent::{self, AgentError},
    hook_tool::{self, CallError},
    relations::tools::RelationCommand,
};

/// The olm-rs machine agent.
#[derive(Parser, Debug)]
#[command(name = "machine-agent", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The agent's commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the agent: register the Machine, heartbeat, run the units' hooks.
    Run(Box<RunArgs>),
    /// The hook tool, for hooks to call while they run.
    #[command(subcommand)]
    Hook(HookCommand),
}

/// What a hook can do through the hook tool.
#[derive(Subcommand, Debug)]
pub enum HookCommand {
    /// Set the unit's workload status.
    StatusSet {
        /// active, blocked, maintenance, waiting or error.
        #[arg(value_parser = parse_state)]
        state: WorkloadState,
        /// What the workload says about its state.
        message: Option<String>,
    },
    /// Write a line to the agent's log, tagged with the unit.
    Log {
        /// The line.
        message: String,
    },
    /// Print `True` when the unit leads its application (for at least half the
    /// leader Lease's duration more), else `False`.
    IsLeader,
    /// The relation tools.
    #[command(flatten)]
    Relation(RelationCommand),
    /// Inside an action: print its parameters, or the one at a dotted KEY.
    ActionGet {
        /// The dotted path of a parameter (e.g. `options.level`).
        key: Option<String>,
        /// Print as JSON or YAML (default: a string as it is, anything else as YAML).
        #[arg(long, value_enum)]
        format: Option<Format>,
    },
    /// Inside an action: set results, KEY=VALUE (keys lowercase, '.' between nested keys).
    ActionSet {
        /// The results.
        #[arg(required = true)]
        pairs: Vec<String>,
    },
    /// Inside an action: record a progress message.
    ActionLog {
        /// The message.
        message: String,
    },
    /// Inside an action: mark it failed with MESSAGE (the script goes on; the task fails when it ends).
    ActionFail {
        /// Why it failed.
        message: Option<String>,
    },
}

fn parse_state(value: &str) -> Result<WorkloadState, String> {
    WorkloadState::parse(value).ok_or_else(|| {
        let all: Vec<&str> = WorkloadState::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown state {value:?}: use one of {}", all.join(", "))
    })
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The async runtime of `machine-agent run` could not start.
    #[error("cannot start the async runtime")]
    AsyncRuntime(#[source] std::io::Error),
    /// The agent could not start, or failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The hook tool's call failed.
    #[error(transparent)]
    Hook(#[from] CallError),
}

impl Cli {
    /// Runs the command; a failure is printed with its causes and exits 1.
    pub fn main(self) -> ExitCode {
        match self.run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("machine-agent: {}", error_chain(&error));
                ExitCode::FAILURE
            }
        }
    }

    /// Runs the command: the agent on its own async runtime, or one call of the hook tool.
    pub fn run(self) -> Result<(), CommandError> {
        let command = match self.command {
            Command::Run(args) => {
                return Ok(tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .map_err(CommandError::AsyncRuntime)?
                    .block_on(agent::run(*args))?);
            }
            Command::Hook(HookCommand::StatusSet { state, message }) => {
                hook_tool::Command::StatusSet { state, message }
            }
            Command::Hook(HookCommand::Log { message }) => hook_tool::Command::Log { message },
            Command::Hook(HookCommand::IsLeader) => hook_tool::Command::IsLeader,
            Command::Hook(HookCommand::Relation(command)) => {
                hook_tool::Command::Relation(command.into_tool())
            }
            Command::Hook(HookCommand::ActionGet { key, format }) => {
                hook_tool::Command::Action(ActionCommand::ActionGet { key, format })
            }
            Command::Hook(HookCommand::ActionSet { pairs }) => {
                hook_tool::Command::Action(ActionCommand::ActionSet { pairs })
            }
            Command::Hook(HookCommand::ActionLog { message }) => {
                hook_tool::Command::Action(ActionCommand::ActionLog { message })
            }
            Command::Hook(HookCommand::ActionFail { message }) => {
                hook_tool::Command::Action(ActionCommand::ActionFail { message })
            }
        };
        if let Some(output) = hook_tool::call(command)? {
            println!("{output}");
        }
        Ok(())
    }
}

pub use olm_runtime::errors::error_chain;

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_parses() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "machine-agent",
            "hook",
            "status-set",
            "blocked",
            "needs a license",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            Command::Hook(HookCommand::StatusSet {
                state: WorkloadState::Blocked,
                message: Some(_)
            })
        ));
        assert!(Cli::try_parse_from(["machine-agent", "hook", "status-set", "fine"]).is_err());
        let cli = Cli::try_parse_from([
            "machine-agent",
            "run",
            "--state-dir",
            "/tmp/a",
            "--pool",
            "edge",
            "--namespace",
            "apps",
            "--node-name",
            "node-1",
            "--admin-addr",
            "127.0.0.1:0",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.lease_duration_seconds, 40);
        assert_eq!(run.admin().admin_addr.port(), 0);
        assert_eq!(run.node_name.as_deref(), Some("node-1"));
        if std::env::var_os("OLM_RS_HOOK_UID").is_none() && std::env::var_os("OLM_RS_HOOK_GID").is_none() {
            assert_eq!((run.hook_uid, run.hook_gid), (65534, 65534));
        }
        let cli = Cli::try_parse_from(["machine-agent", "run", "--hook-uid", "1001", "--hook-gid", "1002"])
            .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!((run.hook_uid, run.hook_gid), (1001, 1002));
        let cli = Cli::try_parse_from(["machine-agent", "run", "--state-dir", "/tmp/a"]).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        if std::env::var_os(olm_api::substrate::AGENT_ADMIN_ADDR_ENV).is_none() {
            assert_eq!(run.admin_addr.to_string(), "127.0.0.1:9740");
        }
    }

    #[test]
    fn an_error_is_printed_with_its_causes() {
        let error = CommandError::Hook(CallError::NotInHook {
            variable: hook_tool::SOCKET_ENV,
            source: std::env::VarError::NotPresent,
        });
        assert_eq!(
            error_chain(&error),
            "OLM_RS_AGENT_SOCKET is not set: the hook tool works only inside a hook: environment variable not found"
        );
    }
}
