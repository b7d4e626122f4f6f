//! The agent's command line: `machine-agent run` and the hook tool, and running them.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use olm_api::substrate::WorkloadState;
use olm_runtime::{admin::AdminArgs, telemetry::TelemetryArgs};

use crate::{
    agent::{self, AgentError},
    hook_tool::{self, CallError},
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
}

fn parse_state(value: &str) -> Result<WorkloadState, String> {
    WorkloadState::parse(value).ok_or_else(|| {
        let all: Vec<&str> = WorkloadState::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown state {value:?}: use one of {}", all.join(", "))
    })
}

/// The uid and gid of unprivileged hooks by default: nobody and nogroup.
pub const DEFAULT_HOOK_ID: u32 = 65534;

/// The flags of `machine-agent run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Where the agent keeps its identity, endpoints, credentials and units.
    #[arg(long, env = "OLM_RS_AGENT_STATE_DIR", default_value = "/var/lib/olm-rs-agent")]
    pub state_dir: PathBuf,
    /// The namespace of the pool [default: $POD_NAMESPACE, else the saved identity].
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: Option<String>,
    /// The MachinePool [default: the saved identity].
    #[arg(long, env = "OLM_RS_POOL")]
    pub pool: Option<String>,
    /// The cluster node this machine is (in the DaemonSet: from `spec.nodeName`).
    #[arg(long, env = "NODE_NAME", conflicts_with = "external_id")]
    pub node_name: Option<String>,
    /// The identity of a machine outside the cluster [default: its machine-id or host name].
    #[arg(long)]
    pub external_id: Option<String>,
    /// A kubeconfig to connect with.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The API server (`https://host:port`), with `--ca-file` and `--token-file`
    /// or `--join-token-file`.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub server: Option<String>,
    /// A file with the bearer token to connect with.
    #[arg(long, requires = "server")]
    pub token_file: Option<PathBuf>,
    /// The CA bundle (PEM) of the API server.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// The pool's join token (a machine outside the cluster): used once to register
    /// and receive the machine's own credentials, kept in the state directory.
    #[arg(long)]
    pub join_token_file: Option<PathBuf>,
    /// How long the machine's Lease lasts without renewal (renewed every quarter of it, at most 10 s).
    #[arg(long, default_value_t = 40)]
    pub lease_duration_seconds: u64,
    /// How often the API server endpoints are learned again.
    #[arg(long, default_value_t = 30)]
    pub endpoint_refresh_seconds: u64,
    /// The user (numeric uid) that the hooks of units not marked `privileged`
    /// run as, when the agent runs as root [default: 65534, nobody]. An agent
    /// that does not run as root runs every hook as its own user.
    #[arg(long, env = "OLM_RS_HOOK_UID", default_value_t = DEFAULT_HOOK_ID)]
    pub hook_uid: u32,
    /// The group (numeric gid) of those hooks, their only group [default: 65534, nogroup].
    #[arg(long, env = "OLM_RS_HOOK_GID", default_value_t = DEFAULT_HOOK_ID)]
    pub hook_gid: u32,
    /// Logging.
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    /// Where the admin server (`/metrics`, `/healthz`, `/readyz`) listens: by
    /// default loopback on port 9740, since the agent shares the host's network.
    #[arg(long, env = olm_api::substrate::AGENT_ADMIN_ADDR_ENV, default_value = olm_api::substrate::AGENT_ADMIN_ADDR)]
    pub admin_addr: SocketAddr,
}

impl RunArgs {
    /// The admin server's settings.
    pub fn admin(&self) -> AdminArgs {
        AdminArgs {
            admin_addr: self.admin_addr,
        }
    }
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
        match self.command {
            Command::Run(args) => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .map_err(CommandError::AsyncRuntime)?
                .block_on(agent::run(*args))?,
            Command::Hook(HookCommand::StatusSet { state, message }) => {
                hook_tool::call(hook_tool::Command::StatusSet { state, message })?;
            }
            Command::Hook(HookCommand::Log { message }) => {
                hook_tool::call(hook_tool::Command::Log { message })?
            }
        }
        Ok(())
    }
}

/// `error` and its sources, joined by `: `.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

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
