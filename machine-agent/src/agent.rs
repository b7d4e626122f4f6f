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
//!    planner that starts and feeds one task per unit, endpoint learning, and the
//!    hook tool's socket.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{Arc, OnceLock},
    time::Duration,
};

use anyhow::Context as _;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Secret},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DynamicObject, ListParams},
    config::{
        AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
    },
    runtime::{reflector::ObjectRef, watcher},
};
use olm_api::{
    substrate::{
        CREDENTIALS_TOKEN_KEY, JOIN_TOKEN_ID, MACHINE_READY, Machine, MachinePool, REASON_JOIN_TOKEN_USED,
        UnitStatus, credentials_secret, effective_config_name, machine_name, token_claims,
    },
    v1alpha1::StrategyDetailsMachine,
};
use olm_runtime::{ErrorClass, Runtime, RuntimeArgs, Shutdown, classify, leader::LeaderElectionArgs};
use tokio::sync::watch;

use crate::{
    cli::RunArgs,
    csv_view::{self, MachineCsv, PoolCsv},
    endpoints::{self, EndpointList},
    failover::Failover,
    hook_tool::Runs,
    host::{self, HostFacts},
    machine::{self, Identity},
    state::{self, StateDir},
    units::{
        self, UnitInput, Units,
        plan::{Target, plan},
        privilege::{Ids, Users, hook_ids},
        sequence::{Problem, Want},
    },
};

/// The binary's name: the runtime's name and its metrics' `binary`.
const NAME: &str = "machine-agent";

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
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
    let mut identity = identity(&args, &state)?;
    let mut config = client_config(&args, &state).await?;
    if let Some(join_token) = args.join_token_file.as_deref()
        && !state.token_file().is_file()
    {
        identity.join_token_id = Some(join(join_token, &state, &identity, &config).await?);
    }
    if state.token_file().is_file() {
        // A joined machine connects with its own credentials from now on.
        config.auth_info = AuthInfo {
            token_file: Some(state.token_file().display().to_string()),
            ..Default::default()
        };
    }
    state::write_json(&state.identity_file(), &identity)?;

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
    let failover = slot
        .get()
        .cloned()
        .context("the runtime did not build the agent's client")?;
    let client = runtime.client().clone();
    let shutdown = runtime.shutdown().clone();
    tracing::info!(
        machine = identity.machine,
        pool = identity.pool,
        namespace = identity.namespace,
        "starting"
    );

    let machines: Api<Machine> = Api::namespaced(client.clone(), &identity.namespace);
    let leases: Api<Lease> = Api::namespaced(client.clone(), &identity.namespace);
    let lease_duration = Duration::from_secs(args.lease_duration_seconds.max(4));
    let Some(registered) = retry("register the Machine", &shutdown, || {
        machine::register(&machines, &identity)
    })
    .await
    else {
        return Ok(());
    };
    tracing::info!(machine = identity.machine, "Machine registered");
    if retry("take the Lease", &shutdown, || {
        machine::take_lease(&leases, &registered, lease_duration)
    })
    .await
    .is_none()
    {
        return Ok(());
    }

    let facts = HostFacts::read(config_host(&failover.list().current).as_deref());
    let registered_at = olm_runtime::conditions::now();

    let namespaced_csvs: Api<MachineCsv> = Api::namespaced(client.clone(), &identity.namespace);
    let mut csvs = runtime.reflector(namespaced_csvs, watcher::Config::default());
    let mut config_maps = runtime.reflector(
        Api::<ConfigMap>::namespaced(client.clone(), &identity.namespace),
        watcher::Config::default(),
    );
    let mut own = runtime.reflector(
        machines.clone(),
        watcher::Config::default().fields(&format!("metadata.name={}", identity.machine)),
    );
    let plan_triggers = futures::stream::select_all([
        csvs.subscribe().map(|_| ()).boxed(),
        csvs.deleted().map(|_| ()).boxed(),
        config_maps.subscribe().map(|_| ()).boxed(),
        config_maps.deleted().map(|_| ()).boxed(),
    ]);
    let machine_events = futures::stream::select(own.subscribe().map(|_| ()), own.deleted().map(|_| ()));

    let (statuses, _) = watch::channel(BTreeMap::<String, UnitStatus>::new());
    let runs = Runs::default();
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
    let socket_group = users.agent.is_root().then_some(users.hook.gid);
    let units = Arc::new(Units {
        state: state.clone(),
        machine: identity.machine.clone(),
        pool: identity.pool.clone(),
        namespace: identity.namespace.clone(),
        runs: runs.clone(),
        users,
        statuses,
    });
    let socket = state.socket_path();

    let planner = Planner {
        units: units.clone(),
        csvs: csvs.store(),
        csvs_synced: csvs.synced(),
        config_maps: config_maps.store(),
        config_maps_synced: config_maps.synced(),
        shutdown: shutdown.clone(),
    };
    let status = StatusWriter {
        machines: machines.clone(),
        identity: identity.clone(),
        store: own.store(),
        synced: own.synced(),
        facts,
        registered_at,
        units: units.statuses.subscribe(),
        shutdown: shutdown.clone(),
    };
    let learn = learn_endpoints(
        client.clone(),
        failover.clone(),
        identity.clone(),
        Duration::from_secs(args.endpoint_refresh_seconds.max(1)),
        shutdown.clone(),
    );
    let beat = heartbeat(leases, registered, lease_duration, shutdown.clone());
    let watches = futures::future::join3(csvs.run(), config_maps.run(), own.run());
    let hook_socket = async move {
        if let Err(error) = runs.serve(&socket, socket_group).await {
            tracing::error!(%error, socket = %socket.display(), "the hook tool's socket failed: hooks cannot set their status");
        }
        std::future::pending::<()>().await;
    };
    let work = async move {
        let loops = futures::future::join4(
            planner.run(plan_triggers),
            status.run(machine_events),
            learn,
            beat,
        );
        tokio::select! {
            _ = loops => {},
            _ = watches => {},
            () = hook_socket => {},
        }
    };
    runtime.run(work).await?;
    Ok(())
}

/// Who this agent is: the flags, else the saved identity; the flags win, since a
/// DaemonSet's pod always gives them.
fn identity(args: &RunArgs, state: &StateDir) -> anyhow::Result<Identity> {
    let saved = state::read_json::<Identity>(&state.identity_file())?;
    let namespace = args
        .namespace
        .clone()
        .or_else(|| saved.as_ref().map(|s| s.namespace.clone()))
        .context("no namespace: give --namespace (or POD_NAMESPACE)")?;
    let pool = args
        .pool
        .clone()
        .or_else(|| saved.as_ref().map(|s| s.pool.clone()))
        .context("no pool: give --pool")?;
    let (node_name, external_id) = match (&args.node_name, &args.external_id) {
        (Some(node), _) => (Some(node.clone()), None),
        (None, Some(id)) => (None, Some(host::dns_label(id))),
        (None, None) => match &saved {
            Some(saved) => (saved.node_name.clone(), saved.external_id.clone()),
            None => (
                None,
                Some(host::default_external_id().context(
                    "no machine identity: give --node-name or --external-id (no machine-id or host name to default to)",
                )?),
            ),
        },
    };
    let id = node_name
        .as_deref()
        .or(external_id.as_deref())
        .unwrap_or_default();
    if id.is_empty() {
        anyhow::bail!("the machine identity is empty: give --node-name or --external-id");
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
async fn client_config(args: &RunArgs, state: &StateDir) -> anyhow::Result<kube::Config> {
    if let Some(path) = &args.kubeconfig {
        let kubeconfig = Kubeconfig::read_from(path)
            .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
        return kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("kubeconfig {} does not give a client", path.display()));
    }
    if let Some(server) = &args.server {
        let token = args
            .token_file
            .clone()
            .or_else(|| state.token_file().is_file().then(|| state.token_file()))
            .or_else(|| args.join_token_file.clone());
        return server_config(server, args.ca_file.as_deref(), token.as_deref()).await;
    }
    kube::Config::infer()
        .await
        .context("no client configuration: give --kubeconfig or --server, or run in a pod")
}

async fn server_config(
    server: &str,
    ca_file: Option<&Path>,
    token_file: Option<&Path>,
) -> anyhow::Result<kube::Config> {
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
        .with_context(|| format!("no client configuration for server {server}"))
}

/// Joins the pool from outside the cluster: with the join token (in
/// `token_file`), registers the Machine stamped with the token's id, then waits
/// for olm-operator to issue the machine's own credentials (Secret
/// `<machine>-credentials`, key `token`) and keeps them in the state directory.
/// Returns the join token's id. The join token is not used again.
///
/// A token that was used or replaced is refused, by the API server (401) or by
/// olm-operator (the Machine's `Ready` condition says `JoinTokenUsed`): the
/// agent stops with that message, since only a new token helps.
async fn join(
    token_file: &Path,
    state: &StateDir,
    identity: &Identity,
    base: &kube::Config,
) -> anyhow::Result<String> {
    let token = std::fs::read_to_string(token_file)
        .with_context(|| format!("cannot read the join token from {}", token_file.display()))?;
    let id = token_claims(&token).map(|claims| claims.id).with_context(|| {
        format!(
            "{} holds no join token (a ServiceAccount token with an id)",
            token_file.display()
        )
    })?;
    let mut config = base.clone();
    config.auth_info = AuthInfo {
        token_file: Some(token_file.display().to_string()),
        ..Default::default()
    };
    let client = Client::try_from(config).context("cannot build a client with the join token")?;
    let machines: Api<Machine> = Api::namespaced(client.clone(), &identity.namespace);
    let joining = Identity {
        join_token_id: Some(id.clone()),
        ..identity.clone()
    };
    let refused = |error: kube::Error| {
        let cause = match &error {
            kube::Error::Api(status) if status.code == 401 => {
                "the API server no longer accepts this join token: it was used, replaced or has expired; ask for the pool's current token".to_owned()
            }
            kube::Error::Api(status) => status.message.clone(),
            other => other.to_string(),
        };
        anyhow::anyhow!(
            "cannot join Machine {}/{} with the join token from {}: {cause}",
            identity.namespace,
            identity.machine,
            token_file.display()
        )
    };
    // Registered already by an earlier run of this agent with this token (it
    // stopped before its credentials came): wait for them, do not register again.
    let existing = machines.get_opt(&identity.machine).await.map_err(refused)?;
    match existing {
        Some(machine) if machine.annotations().get(JOIN_TOKEN_ID) == Some(&id) => {}
        Some(_) => anyhow::bail!(
            "cannot join Machine {}/{}: it exists, registered by another machine or another join; delete it to join again",
            identity.namespace,
            identity.machine
        ),
        None => {
            machine::register(&machines, &joining).await.map_err(refused)?;
        }
    }
    let secrets: Api<Secret> = Api::namespaced(client, &identity.namespace);
    let secret_name = credentials_secret(&identity.machine);
    tracing::info!(
        machine = identity.machine,
        secret = secret_name,
        "joined: waiting for the machine's credentials"
    );
    for _ in 0..120 {
        match secrets.get_opt(&secret_name).await {
            Ok(Some(secret)) => {
                if let Some(token) = secret.data.as_ref().and_then(|d| d.get(CREDENTIALS_TOKEN_KEY)) {
                    state::write_file(&state.token_file(), &token.0)?;
                    tracing::info!(
                        machine = identity.machine,
                        "credentials received and kept in the state directory"
                    );
                    return Ok(id);
                }
            }
            Err(kube::Error::Api(status)) if status.code == 401 => {
                return Err(refused(kube::Error::Api(status)));
            }
            // Not readable until olm-operator admits the machine.
            Ok(None) | Err(_) => {}
        }
        if let Ok(Some(machine)) = machines.get_opt(&identity.machine).await
            && let Some(refusal) = join_refusal(&machine)
        {
            anyhow::bail!(
                "olm-operator refused Machine {}/{}: {refusal}",
                identity.namespace,
                identity.machine
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    anyhow::bail!(
        "Machine {}/{} registered, but Secret {secret_name} with its credentials did not appear within 2 minutes: is olm-operator running?",
        identity.namespace,
        identity.machine
    )
}

/// Why olm-operator refused `machine`'s join, if it did.
fn join_refusal(machine: &Machine) -> Option<String> {
    machine
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == MACHINE_READY && c.reason == REASON_JOIN_TOKEN_USED)
        .map(|c| c.message.clone())
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
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let pools: Api<DynamicObject> = Api::namespaced_with(
        client,
        &identity.namespace,
        &ApiResource::erase::<MachinePool>(&()),
    );
    let mut said_forbidden = false;
    loop {
        let mut learned = Vec::new();
        match slices
            .list(&ListParams::default().labels("kubernetes.io/service-name=kubernetes"))
            .await
        {
            Ok(list) => learned.extend(list.items.iter().flat_map(endpoints::from_endpoint_slice)),
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
    shutdown: Shutdown,
}

struct UnitHandle {
    csv: String,
    input: watch::Sender<UnitInput>,
    task: tokio::task::JoinHandle<()>,
}

impl Planner {
    async fn run(self, mut triggers: impl futures::Stream<Item = ()> + Unpin) {
        let mut handles: BTreeMap<String, UnitHandle> = BTreeMap::new();
        let mut known: BTreeMap<String, String> = BTreeMap::new();
        for unit in self.units.state.unit_names().unwrap_or_default() {
            let record = state::read_json::<units::sequence::UnitRecord>(&self.units.state.unit_file(&unit));
            if let Ok(Some(record)) = record {
                known.insert(unit, record.csv);
            }
        }
        loop {
            if self.csvs_synced.get() && self.config_maps_synced.get() {
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
                let planned = plan(&current, &pool_csvs);
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
