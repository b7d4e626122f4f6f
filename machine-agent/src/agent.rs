//! `machine-agent run`: the agent's parts, wired on the shared runtime.
//!
//! The agent is not leader-elected (one agent per machine), so the runtime runs
//! without election; it gives the admin server, logging, the request-counting
//! client, signals and drain. Its client fails over between API server endpoints
//! ([`Failover`]). Then:
//!
//! 1. identity: the saved one, or from the flags; an external machine joins first;
//! 2. registration: the Machine (re-adopted when it exists) and its Lease;
//! 3. loops: the heartbeat, the Machine's status (written on change only), the
//!    planner that starts and feeds one task per unit, endpoint learning, the
//!    watches of the namespace's Relations and Databags (which wake the units'
//!    relation hooks), and the hook tool's socket.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
    time::Duration,
};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::ConfigMap, discovery::v1::EndpointSlice};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, ListParams},
    config::{
        AuthInfo, Cluster, Context, InferConfigError, KubeConfigOptions, Kubeconfig, KubeconfigError,
        NamedAuthInfo, NamedCluster, NamedContext,
    },
    runtime::{reflector::ObjectRef, watcher},
};
use olm_api::{
    substrate::{Machine, MachinePool, UnitStatus, effective_config_name, machine_name},
    v1alpha1::StrategyDetailsMachine,
};
use olm_runtime::{
    ErrorClass, Runtime, RuntimeArgs, RuntimeError, Shutdown, classify, leader::LeaderElectionArgs,
    reflector::Reflector,
};
use tokio::sync::watch;

use crate::{
    csv_view::{self, MachineCsv, PoolCsv},
    endpoints::EndpointList,
    failover::Failover,
    hook_tool::Runs,
    host::{self, HostFacts},
    join::{JoinError, join},
    leadership::{self, Leadership},
    machine::{self, Identity},
    relations::Relations,
    run_args::RunArgs,
    state::{self, StateDir, StateError},
    units::{
        self, UnitInput, Units,
        plan::{Target, placed, plan_placed},
        privilege::{Ids, Users, hook_ids},
        reach::ReachError,
        sequence::{Problem, Want},
    },
};

/// The binary's name: the runtime's name and its metrics' `binary`.
const NAME: &str = "machine-agent";

/// Why the agent could not start, or stopped other than by a shutdown signal.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The state directory could not be opened, read or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// The hook user cannot reach the state directory.
    #[error(transparent)]
    Reach(#[from] ReachError),
    /// Neither the flags nor the saved identity name the namespace.
    #[error("no namespace: give --namespace (or POD_NAMESPACE)")]
    NoNamespace,
    /// Neither the flags nor the saved identity name the pool.
    #[error("no pool: give --pool")]
    NoPool,
    /// Nothing names the machine, and the host has nothing to default to.
    #[error(
        "no machine identity: give --node-name or --external-id (no machine-id or host name to default to)"
    )]
    NoMachineIdentity,
    /// The machine's name or external id is empty.
    #[error("the machine identity is empty: give --node-name or --external-id")]
    EmptyMachineIdentity,
    /// The kubeconfig given could not be read.
    #[error("cannot read kubeconfig {}", path.display())]
    ReadKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// The kubeconfig given does not give a client configuration.
    #[error("kubeconfig {} does not give a client", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// `--server` with its CA and token do not give a client configuration.
    #[error("no client configuration for server {server}")]
    Server {
        /// The server.
        server: String,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// No flag gives the client configuration, and neither does the environment.
    #[error("no client configuration: give --kubeconfig or --server, or run in a pod")]
    NoClientConfig(#[source] InferConfigError),
    /// The machine could not join its pool.
    #[error(transparent)]
    Join(#[from] JoinError),
    /// The shared runtime could not start, or failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The runtime started without calling the agent's client builder.
    #[error("the runtime did not build the agent's client")]
    NoClient,
}

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(args: RunArgs) -> Result<(), AgentError> {
    let state = StateDir::open(&args.state_dir)?;
    let users = Users {
        agent: Ids::current(),
        hook: Ids {
            uid: args.hook_uid,
            gid: args.hook_gid,
        },
    };
    // Before anything else: hooks that could never run must not wait for the first one to say so.
    units::reach::check(state.root(), &users)?;
    let (identity, config) = connect(&args, &state).await?;
    let (runtime, failover) = start_runtime(&args, &state, config).await?;
    tracing::info!(
        machine = identity.machine,
        pool = identity.pool,
        namespace = identity.namespace,
        "starting"
    );
    let lease_duration = Duration::from_secs(args.lease_duration_seconds.max(4));
    let Some(registered) = register(runtime.client(), identity, lease_duration, runtime.shutdown()).await
    else {
        return Ok(());
    };
    let work = work(&runtime, &args, &state, users, failover, registered);
    runtime.run(work).await?;
    Ok(())
}

/// Who this agent is and how it reaches the API server: an external machine
/// joins first, and a joined machine connects with its own credentials from then on.
/// The identity is saved in the state directory.
async fn connect(args: &RunArgs, state: &StateDir) -> Result<(Identity, kube::Config), AgentError> {
    let mut identity = identity(args, state)?;
    let mut config = client_config(args, state).await?;
    if let Some(join_token) = args.join_token_file.as_deref()
        && !state.token_file().is_file()
    {
        identity.join_token_id = Some(join(join_token, state, &identity, &config).await?);
    }
    if state.token_file().is_file() {
        config.auth_info = AuthInfo {
            token_file: Some(state.token_file().display().to_string()),
            ..Default::default()
        };
    }
    state::write_json(&state.identity_file(), &identity)?;
    Ok((identity, config))
}

/// Starts the shared runtime (not leader-elected) with a client that fails over
/// between the API server endpoints, resumed from the state directory.
async fn start_runtime(
    args: &RunArgs,
    state: &StateDir,
    config: kube::Config,
) -> Result<(Runtime, Failover), AgentError> {
    let saved = state::read_json::<EndpointList>(&state.endpoints_file())?;
    let endpoints = EndpointList::resume(saved, &config.cluster_url.to_string());
    tracing::debug!(?endpoints, "API server endpoints");
    let slot: Arc<OnceLock<Failover>> = Arc::default();
    let runtime = Runtime::builder(NAME)
        .with_args(RuntimeArgs {
            telemetry: args.telemetry.clone(),
            admin: args.admin(),
            leader_election: LeaderElectionArgs::off(),
        })
        .with_client_from({
            let slot = slot.clone();
            let save_to = state.endpoints_file();
            move |requests| {
                let failover = Failover::new(config, endpoints, requests.clone(), save_to);
                let client = failover.client();
                let _ = slot.set(failover);
                Ok(client)
            }
        })
        .build()
        .await?;
    let failover = slot.get().cloned().ok_or(AgentError::NoClient)?;
    Ok((runtime, failover))
}

/// The agent's Machine once registered, with its Lease taken.
struct Registered {
    identity: Identity,
    machines: Api<Machine>,
    leases: Api<Lease>,
    machine: Machine,
    lease_duration: Duration,
}

/// Registers the Machine (re-adopted when it exists) and takes its Lease,
/// retrying until both succeed; `None` on shutdown.
async fn register(
    client: &Client,
    identity: Identity,
    lease_duration: Duration,
    shutdown: &Shutdown,
) -> Option<Registered> {
    let machines: Api<Machine> = Api::namespaced(client.clone(), &identity.namespace);
    let leases: Api<Lease> = Api::namespaced(client.clone(), &identity.namespace);
    let machine = retry("register the Machine", shutdown, || {
        machine::register(&machines, &identity)
    })
    .await?;
    tracing::info!(machine = identity.machine, "Machine registered");
    retry("take the Lease", shutdown, || {
        machine::take_lease(&leases, &machine, lease_duration)
    })
    .await?;
    Some(Registered {
        identity,
        machines,
        leases,
        machine,
        lease_duration,
    })
}

/// The watches the agent plans and reports from: the namespace's CSVs and
/// ConfigMaps, and its own Machine.
struct Watches {
    csvs: Reflector<MachineCsv>,
    config_maps: Reflector<ConfigMap>,
    own: Reflector<Machine>,
    pool: Reflector<MachinePool>,
}

impl Watches {
    fn new(runtime: &Runtime, registered: &Registered) -> Self {
        let client = runtime.client();
        let namespace = &registered.identity.namespace;
        Watches {
            csvs: runtime.reflector(
                Api::namespaced(client.clone(), namespace),
                watcher::Config::default(),
            ),
            config_maps: runtime.reflector(
                Api::namespaced(client.clone(), namespace),
                watcher::Config::default(),
            ),
            own: runtime.reflector(
                registered.machines.clone(),
                watcher::Config::default().fields(&format!("metadata.name={}", registered.identity.machine)),
            ),
            pool: runtime.reflector(
                Api::namespaced(client.clone(), namespace),
                watcher::Config::default().fields(&format!("metadata.name={}", registered.identity.pool)),
            ),
        }
    }

    /// Any change of a CSV, a ConfigMap or the pool (its placement): time to plan again.
    fn plan_triggers(&mut self) -> impl futures::Stream<Item = ()> + Unpin + use<> {
        futures::stream::select_all([
            self.pool.subscribe().map(|_| ()).boxed(),
            self.pool.deleted().map(|_| ()).boxed(),
            self.csvs.subscribe().map(|_| ()).boxed(),
            self.csvs.deleted().map(|_| ()).boxed(),
            self.config_maps.subscribe().map(|_| ()).boxed(),
            self.config_maps.deleted().map(|_| ()).boxed(),
        ])
    }

    /// Any change of the agent's own Machine.
    fn machine_events(&mut self) -> impl futures::Stream<Item = ()> + Unpin + use<> {
        futures::stream::select(self.own.subscribe().map(|_| ()), self.own.deleted().map(|_| ()))
    }

    /// Runs the watches (until one ends).
    fn run(self) -> impl Future<Output = ()> {
        futures::future::join4(
            self.csvs.run(),
            self.config_maps.run(),
            self.own.run(),
            self.pool.run(),
        )
        .map(|_| ())
    }
}

/// The agent's loops, until one ends: the heartbeat, the Machine's status (written
/// on change only), the planner that starts and feeds one task per unit, endpoint
/// learning, and the hook tool's socket.
fn work(
    runtime: &Runtime,
    args: &RunArgs,
    state: &StateDir,
    users: Users,
    failover: Failover,
    registered: Registered,
) -> impl Future<Output = ()> + use<> {
    let shutdown = runtime.shutdown().clone();
    let mut watches = Watches::new(runtime, &registered);
    let (plan_triggers, machine_events) = (watches.plan_triggers(), watches.machine_events());
    log_hook_users(&users);
    let socket_group = users.agent.is_root().then_some(users.hook.gid);
    let (relations, relation_watches) = crate::relations::Relations::watch(
        runtime,
        runtime.client(),
        &registered.identity.namespace,
        &registered.identity.machine,
    );
    let units = Arc::new(shared_units(state, &registered, users, relations));
    let planner = Planner::new(units.clone(), &watches, shutdown.clone());
    let status = StatusWriter {
        machines: registered.machines.clone(),
        identity: registered.identity.clone(),
        store: watches.own.store(),
        synced: watches.own.synced(),
        facts: HostFacts::read(config_host(&failover.list().current).as_deref()),
        registered_at: olm_runtime::conditions::now(),
        units: units.statuses.subscribe(),
        shutdown: shutdown.clone(),
    };
    let learn = learn_endpoints(
        runtime.client().clone(),
        failover,
        registered.identity.clone(),
        Duration::from_secs(args.endpoint_refresh_seconds.max(1)),
        shutdown.clone(),
    );
    let elections = leadership::run(
        registered.leases.clone(),
        units.leadership.clone(),
        registered.identity.machine.clone(),
        registered.identity.pool.clone(),
        shutdown.clone(),
    );
    let beat = heartbeat(
        registered.leases,
        registered.machine,
        registered.lease_duration,
        shutdown,
    );
    let hook_socket = serve_hook_tool(units.runs.clone(), state.socket_path(), socket_group);
    let actions = crate::actions::Actions::new(runtime, units.clone(), action_sources(&watches)).run();
    let watches = futures::future::join(watches.run(), relation_watches);
    async move {
        let loops = futures::future::join5(
            planner.run(plan_triggers),
            status.run(machine_events),
            learn,
            beat,
            elections,
        );
        tokio::select! {
            _ = loops => {},
            _ = watches => {},
            () = hook_socket => {},
            () = actions => {},
        }
    }
}

/// What running actions reads: the CSVs and ConfigMaps the planner watches.
fn action_sources(watches: &Watches) -> crate::actions::exec::Sources {
    crate::actions::exec::Sources {
        csvs: watches.csvs.store(),
        config_maps: watches.config_maps.store(),
    }
}

/// Says who hooks run as: the hook user when the agent is root, else the agent's user.
fn log_hook_users(users: &Users) {
    if users.agent.is_root() {
        tracing::info!(
            uid = users.hook.uid,
            gid = users.hook.gid,
            "hooks of units not marked privileged run as the hook user"
        );
    } else {
        tracing::warn!(
            uid = users.agent.uid,
            "the agent does not run as root: every hook runs as its user, and units marked privileged cannot run"
        );
    }
}

/// What every unit task of this machine shares; the units' statuses start as
/// the Machine last reported them ([`machine::last_reported`]).
fn shared_units(state: &StateDir, registered: &Registered, users: Users, relations: Relations) -> Units {
    let identity = &registered.identity;
    let leadership = Leadership::new(registered.lease_duration);
    let reported = machine::last_reported(&registered.machine, &units_on_disk(state));
    let (statuses, _) = watch::channel(reported);
    Units {
        state: state.clone(),
        machine: identity.machine.clone(),
        pool: identity.pool.clone(),
        namespace: identity.namespace.clone(),
        runs: Runs::new(leadership.clone()).with_relations(relations.clone()),
        users,
        statuses,
        leadership,
        relations,
        turns: units::turns::Turns::default(),
    }
}

/// The units whose state is on disk, each with the CSV it runs.
fn units_on_disk(state: &StateDir) -> BTreeMap<String, String> {
    let mut known = BTreeMap::new();
    for unit in state.unit_names().unwrap_or_default() {
        let record = state::read_json::<units::sequence::UnitRecord>(&state.unit_file(&unit));
        if let Ok(Some(record)) = record {
            known.insert(unit, record.csv);
        }
    }
    known
}

/// Serves the hook tool's socket; a failure is logged, and the agent runs on
/// (hooks then cannot set their status).
async fn serve_hook_tool(runs: Runs, socket: PathBuf, group: Option<u32>) {
    if let Err(error) = runs.serve(&socket, group).await {
        tracing::error!(%error, socket = %socket.display(), "the hook tool's socket failed: hooks cannot set their status");
    }
    std::future::pending::<()>().await;
}

/// Who this agent is: the flags, else the saved identity; the flags win, since a
/// DaemonSet's pod always gives them.
fn identity(args: &RunArgs, state: &StateDir) -> Result<Identity, AgentError> {
    let saved = state::read_json::<Identity>(&state.identity_file())?;
    let namespace = args
        .namespace
        .clone()
        .or_else(|| saved.as_ref().map(|s| s.namespace.clone()))
        .ok_or(AgentError::NoNamespace)?;
    let pool = args
        .pool
        .clone()
        .or_else(|| saved.as_ref().map(|s| s.pool.clone()))
        .ok_or(AgentError::NoPool)?;
    let (node_name, external_id) = match (&args.node_name, &args.external_id) {
        (Some(node), _) => (Some(node.clone()), None),
        (None, Some(id)) => (None, Some(host::dns_label(id))),
        (None, None) => match &saved {
            Some(saved) => (saved.node_name.clone(), saved.external_id.clone()),
            None => (
                None,
                Some(host::default_external_id().ok_or(AgentError::NoMachineIdentity)?),
            ),
        },
    };
    let id = node_name
        .as_deref()
        .or(external_id.as_deref())
        .unwrap_or_default();
    if id.is_empty() {
        return Err(AgentError::EmptyMachineIdentity);
    }
    let machine = machine_name(&pool, id);
    // The join token's id stays with the Machine it registered.
    let join_token_id = saved
        .filter(|saved| saved.machine == machine && saved.namespace == namespace)
        .and_then(|saved| saved.join_token_id);
    Ok(Identity {
        machine,
        namespace,
        pool,
        node_name,
        external_id,
        join_token_id,
    })
}

/// The client configuration from the flags: a kubeconfig, or a server with its CA
/// and a token (or join token) file, else in-cluster or KUBECONFIG.
async fn client_config(args: &RunArgs, state: &StateDir) -> Result<kube::Config, AgentError> {
    if let Some(path) = &args.kubeconfig {
        let kubeconfig = Kubeconfig::read_from(path).map_err(|source| AgentError::ReadKubeconfig {
            path: path.clone(),
            source,
        })?;
        return kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|source| AgentError::Kubeconfig {
                path: path.clone(),
                source,
            });
    }
    if let Some(server) = &args.server {
        let token = args
            .token_file
            .clone()
            .or_else(|| state.token_file().is_file().then(|| state.token_file()))
            .or_else(|| args.join_token_file.clone());
        return server_config(server, args.ca_file.as_deref(), token.as_deref()).await;
    }
    kube::Config::infer().await.map_err(AgentError::NoClientConfig)
}

async fn server_config(
    server: &str,
    ca_file: Option<&Path>,
    token_file: Option<&Path>,
) -> Result<kube::Config, AgentError> {
    let kubeconfig = Kubeconfig {
        clusters: vec![NamedCluster {
            name: "cluster".into(),
            cluster: Some(Cluster {
                server: Some(server.to_owned()),
                certificate_authority: ca_file.map(|p| p.display().to_string()),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: "agent".into(),
            auth_info: Some(AuthInfo {
                token_file: token_file.map(|p| p.display().to_string()),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: "agent".into(),
            context: Some(Context {
                cluster: "cluster".into(),
                user: Some("agent".into()),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        current_context: Some("agent".into()),
        ..Default::default()
    };
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|source| AgentError::Server {
            server: server.to_owned(),
            source,
        })
}

/// The host of an endpoint URL, to find the address the machine reaches it from.
fn config_host(endpoint: &str) -> Option<String> {
    endpoint
        .parse::<http::Uri>()
        .ok()
        .and_then(|uri| uri.host().map(str::to_owned))
}

/// Retries `attempt` every 2 s until it succeeds (or shutdown: `None`).
async fn retry<T, F, Fut>(what: &str, shutdown: &Shutdown, mut attempt: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    loop {
        match attempt().await {
            Ok(value) => return Some(value),
            Err(error) => tracing::warn!(%error, class = %classify(&error), "cannot {what}: retrying"),
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
            () = shutdown.signaled() => return None,
        }
    }
}

/// Renews the Lease every quarter of its duration (at most 10 s); takes it again
/// when it is gone.
async fn heartbeat(leases: Api<Lease>, machine: Machine, duration: Duration, shutdown: Shutdown) {
    let name = kube::ResourceExt::name_any(&machine);
    let every = machine::renew_interval(duration);
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shutdown.signaled() => return,
        }
        match machine::renew_lease(&leases, &name).await {
            Ok(()) => {}
            Err(error) if classify(&error) == ErrorClass::Gone => {
                if let Err(error) = machine::take_lease(&leases, &machine, duration).await {
                    tracing::warn!(%error, "cannot take the Lease again");
                }
            }
            Err(error) => tracing::warn!(%error, "cannot renew the Lease"),
        }
    }
}

/// Learns the API server endpoints: the `kubernetes` EndpointSlices (where the
/// agent may read them) and the pool's `status.apiServerEndpoints`.
async fn learn_endpoints(
    client: Client,
    failover: Failover,
    identity: Identity,
    every: Duration,
    shutdown: Shutdown,
) {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), olm_runtime::endpoints::NAMESPACE);
    let pools: Api<DynamicObject> = Api::namespaced_with(
        client,
        &identity.namespace,
        &ApiResource::erase::<MachinePool>(&()),
    );
    let mut said_forbidden = false;
    loop {
        let mut learned = Vec::new();
        match slices
            .list(&ListParams::default().labels(olm_runtime::endpoints::SELECTOR))
            .await
        {
            Ok(list) => learned.extend(olm_runtime::endpoints::from_slices(&list.items)),
            Err(error) if classify(&error) == ErrorClass::Forbidden => {
                if !said_forbidden {
                    tracing::info!(
                        "the kubernetes EndpointSlices are not readable: learning endpoints from the pool only"
                    );
                    said_forbidden = true;
                }
            }
            Err(error) => tracing::debug!(%error, "cannot list the kubernetes EndpointSlices"),
        }
        match pools.get_opt(&identity.pool).await {
            Ok(Some(pool)) => learned.extend(pool_endpoints(&pool.data)),
            Ok(None) => tracing::debug!(pool = identity.pool, "no such MachinePool"),
            Err(error) => tracing::debug!(%error, "cannot read the MachinePool"),
        }
        failover.learn(&learned);
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shutdown.signaled() => return,
        }
    }
}

/// `status.apiServerEndpoints` of a MachinePool.
pub fn pool_endpoints(pool: &serde_json::Value) -> Vec<String> {
    pool.pointer("/status/apiServerEndpoints")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_owned))
        .collect()
}

/// Writes the Machine's status when it differs from what the Machine says.
struct StatusWriter {
    machines: Api<Machine>,
    identity: Identity,
    store: kube::runtime::reflector::Store<Machine>,
    synced: olm_runtime::reflector::Synced,
    facts: HostFacts,
    registered_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    units: watch::Receiver<BTreeMap<String, UnitStatus>>,
    shutdown: Shutdown,
}

impl StatusWriter {
    async fn run(mut self, mut machine_events: impl futures::Stream<Item = ()> + Unpin) {
        let key = ObjectRef::new(&self.identity.machine).within(&self.identity.namespace);
        let mut last_written = None;
        loop {
            let observed = self.store.get(&key);
            match observed {
                None if self.synced.get() => {
                    tracing::warn!(
                        machine = self.identity.machine,
                        "the Machine is gone: registering it again"
                    );
                    if let Err(error) = machine::register(&self.machines, &self.identity).await {
                        tracing::warn!(%error, "cannot register the Machine again");
                    }
                    last_written = None;
                }
                None => {}
                Some(machine) => {
                    let units = self.units.borrow_and_update().clone();
                    let now = olm_runtime::conditions::now();
                    let desired = machine::desired_status(
                        &self.facts,
                        &units,
                        &self.registered_at,
                        machine.status.as_ref(),
                        &now,
                    );
                    if let Some(desired) = desired
                        && last_written.as_ref() != Some(&desired)
                    {
                        match machine::write_status(&self.machines, &self.identity, &desired).await {
                            Ok(()) => last_written = Some(desired),
                            Err(error) => {
                                tracing::warn!(%error, "cannot write the Machine's status: retrying");
                                tokio::time::sleep(Duration::from_secs(2)).await;
                                continue;
                            }
                        }
                    }
                }
            }
            tokio::select! {
                changed = self.units.changed() => if changed.is_err() { return },
                Some(()) = machine_events.next() => {}
                () = tokio::time::sleep(Duration::from_secs(60)) => {}
                () = self.shutdown.signaled() => return,
            }
        }
    }
}

/// Starts and feeds one task per unit from the pool's CSVs and ConfigMaps.
struct Planner {
    units: Arc<Units>,
    csvs: kube::runtime::reflector::Store<MachineCsv>,
    csvs_synced: olm_runtime::reflector::Synced,
    config_maps: kube::runtime::reflector::Store<ConfigMap>,
    config_maps_synced: olm_runtime::reflector::Synced,
    pool: kube::runtime::reflector::Store<MachinePool>,
    pool_synced: olm_runtime::reflector::Synced,
    shutdown: Shutdown,
}

struct UnitHandle {
    csv: String,
    input: watch::Sender<UnitInput>,
    task: tokio::task::JoinHandle<()>,
}

impl Planner {
    fn new(units: Arc<Units>, watches: &Watches, shutdown: Shutdown) -> Self {
        Planner {
            units,
            csvs: watches.csvs.store(),
            csvs_synced: watches.csvs.synced(),
            config_maps: watches.config_maps.store(),
            config_maps_synced: watches.config_maps.synced(),
            pool: watches.pool.store(),
            pool_synced: watches.pool.synced(),
            shutdown,
        }
    }

    async fn run(self, mut triggers: impl futures::Stream<Item = ()> + Unpin) {
        let mut handles: BTreeMap<String, UnitHandle> = BTreeMap::new();
        let mut known = units_on_disk(&self.units.state);
        loop {
            if self.csvs_synced.get() && self.config_maps_synced.get() && self.pool_synced.get() {
                handles.retain(|_, h| !h.task.is_finished());
                let pool_csvs: Vec<PoolCsv> = self
                    .csvs
                    .state()
                    .iter()
                    .filter_map(|c| csv_view::pool_csv(c, &self.units.pool))
                    .map(|mut csv| {
                        csv.admitted = self.has_config_map(&effective_config_name(&csv.name));
                        csv
                    })
                    .collect();
                let current: BTreeMap<String, String> = handles
                    .iter()
                    .map(|(name, h)| (name.clone(), h.csv.clone()))
                    .chain(std::mem::take(&mut known))
                    .collect();
                let pool = self
                    .pool
                    .get(&ObjectRef::new(&self.units.pool).within(&self.units.namespace));
                let planned = plan_placed(&current, &pool_csvs, |application| {
                    placed(pool.as_deref(), application, &self.units.machine)
                });
                let starts = planned.units.into_iter().chain(
                    planned
                        .new_units
                        .into_iter()
                        .map(|csv| (csv.clone(), Target::Run(csv))),
                );
                for (unit, target) in starts {
                    let input = self.input(&unit, &target, &pool_csvs, handles.get(&unit));
                    let csv = match &target {
                        Target::Run(csv) => csv.clone(),
                        Target::Remove => current.get(&unit).cloned().unwrap_or_default(),
                    };
                    match handles.get_mut(&unit) {
                        Some(handle) => {
                            handle.csv = csv;
                            handle.input.send_if_modified(|now| {
                                let changed = *now != input;
                                *now = input;
                                changed
                            });
                        }
                        None => {
                            let (tx, rx) = watch::channel(input);
                            let task = tokio::spawn(units::run_unit(
                                unit.clone(),
                                self.units.clone(),
                                rx,
                                self.shutdown.clone(),
                            ));
                            handles.insert(unit, UnitHandle { csv, input: tx, task });
                        }
                    }
                }
            }
            tokio::select! {
                Some(()) = triggers.next() => {}
                () = tokio::time::sleep(Duration::from_secs(15)) => {}
                () = self.shutdown.signaled() => return,
            }
            // Let a burst of events land before planning again.
            tokio::time::sleep(Duration::from_millis(200)).await;
            while triggers.next().now_or_never().flatten().is_some() {}
        }
    }

    fn has_config_map(&self, name: &str) -> bool {
        self.config_maps
            .get(&ObjectRef::new(name).within(&self.units.namespace))
            .is_some()
    }

    fn input(
        &self,
        unit: &str,
        target: &Target,
        csvs: &[PoolCsv],
        previous: Option<&UnitHandle>,
    ) -> UnitInput {
        let previous = previous.map(|h| h.input.borrow().clone());
        let seconds = |s: i64| Duration::from_secs(s.max(1).unsigned_abs());
        let default_timeout = seconds(StrategyDetailsMachine::DEFAULT_HOOK_TIMEOUT_SECONDS);
        let default_interval = seconds(StrategyDetailsMachine::DEFAULT_UPDATE_STATUS_INTERVAL_SECONDS);
        let csv = match target {
            Target::Run(name) => csvs.iter().find(|c| c.name == *name),
            Target::Remove => None,
        };
        let Some(csv) = csv else {
            return UnitInput {
                want: Want::Remove,
                hooks: None,
                problem: None,
                timeout: previous.as_ref().map_or(default_timeout, |p| p.timeout),
                update_status: previous.as_ref().map_or(default_interval, |p| p.update_status),
                privileged: previous.as_ref().is_some_and(|p| p.privileged),
                application: previous.and_then(|p| p.application),
            };
        };
        let namespace = &self.units.namespace;
        let data = |name: &str| {
            self.config_maps
                .get(&ObjectRef::new(name).within(namespace))
                .map(|cm| cm.data.clone().unwrap_or_default())
        };
        let hooks_name = &csv.strategy.hooks.config_map;
        let hooks = units::read_hooks(hooks_name, data(hooks_name).as_ref());
        let config_name = effective_config_name(&csv.name);
        let config = units::read_config(&config_name, data(&config_name).as_ref());
        let needs_root = hook_ids(&self.units.users, unit, csv.strategy.privileged)
            .err()
            .map(|error| Problem::Error(error.to_string()));
        let problem: Option<Problem> = hooks
            .as_ref()
            .err()
            .or(config.as_ref().err())
            .cloned()
            .or(needs_root);
        UnitInput {
            want: Want::Run {
                csv: csv.name.clone(),
                version: csv.version.clone(),
                config: config.unwrap_or_default(),
            },
            hooks: hooks.ok(),
            problem,
            timeout: seconds(csv.strategy.hook_timeout_seconds()),
            update_status: seconds(csv.strategy.update_status_interval_seconds()),
            privileged: csv.strategy.privileged,
            application: Some(csv.application.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_publishes_endpoints_in_its_status() {
        let pool = serde_json::json!({"status": {"apiServerEndpoints": ["https://127.0.0.1:6443", "https://127.0.0.1:6444"]}});
        assert_eq!(
            pool_endpoints(&pool),
            ["https://127.0.0.1:6443", "https://127.0.0.1:6444"]
        );
        assert!(pool_endpoints(&serde_json::json!({"status": {}})).is_empty());
        assert_eq!(config_host("https://10.0.0.1:6443").as_deref(), Some("10.0.0.1"));
    }
}
