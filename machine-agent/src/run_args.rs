//! The flags of `machine-agent run`, which the agent reads.

use std::{net::SocketAddr, path::PathBuf};

use olm_runtime::{admin::AdminArgs, telemetry::TelemetryArgs};

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
