//! The runtime of a binary: what every olm-rs binary needs once, built by
//! [`Runtime::builder`].
//!
//! A [`Runtime`] owns the logging setup, the kube client (and its configuration),
//! the metrics registry, the admin server, leader election and the fenced
//! [`Writer`], the readiness of the binary's stores, and the one [`Shutdown`]
//! signal. The binary builds its controllers from these parts, then hands them to
//! [`Runtime::run`], which runs until SIGTERM or SIGINT (or the end of the election),
//! then drains: controllers finish the reconciles in flight, the admin server stops,
//! the Lease is released.

use std::net::SocketAddr;

use kube::{
    Api, Client, Resource,
    runtime::{Controller, controller::Config as ControllerConfig, watcher},
};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::{
    RuntimeArgs,
    admin::{AdminError, AdminServer},
    apply::Writer,
    backoff::TriggerBackoff,
    client::{self, RequestMetrics},
    leader::{ElectionTask, LeaderElectionArgs, LeaderElectionError, Leadership, owner},
    metrics::Metrics,
    readiness::Readiness,
    reflector::Reflector,
    shutdown::Shutdown,
    telemetry::TelemetryError,
};

/// Why a runtime could not start, or stopped other than by a shutdown signal.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Logging could not be set up.
    #[error("cannot set up logging")]
    Telemetry(#[source] TelemetryError),
    /// No client configuration was found (in-cluster or KUBECONFIG).
    #[error("cannot load a Kubernetes client configuration (in-cluster or from KUBECONFIG)")]
    Config(#[source] kube::config::InferConfigError),
    /// The configuration did not give a client.
    #[error("cannot build a Kubernetes client")]
    Client(#[source] kube::Error),
    /// Metrics could not be registered.
    #[error("cannot register the metrics")]
    Metrics(#[source] prometheus::Error),
    /// The admin server could not start.
    #[error("cannot start the admin server")]
    Admin(#[source] AdminError),
    /// Leader election could not start, or its task failed.
    #[error("leader election failed")]
    LeaderElection(#[source] LeaderElectionError),
    /// The election task ended while the binary ran.
    #[error("leader election ended unexpectedly")]
    ElectionEnded,
    /// Shutdown signals could not be watched.
    #[error("cannot listen for shutdown signals")]
    Signal(#[source] std::io::Error),
    /// The controllers stopped before any shutdown (a watch or controller ended).
    #[error("the controllers stopped unexpectedly")]
    ControllersEnded,
    /// The controllers' task panicked.
    #[error("the controllers' task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// Makes a binary's own client from the runtime's request counter (see
/// [`RuntimeBuilder::with_client_from`]).
pub type MakeClient = Box<dyn FnOnce(&RequestMetrics) -> Result<Client, kube::Error> + Send>;

/// Builds a [`Runtime`]. See [`Runtime::builder`].
#[must_use = "a builder does nothing until built"]
pub struct RuntimeBuilder {
    name: &'static str,
    args: Option<RuntimeArgs>,
    client: Option<Client>,
    make_client: Option<MakeClient>,
    leader_election: Option<LeaderElectionArgs>,
}

impl RuntimeBuilder {
    /// The binary's runtime flags: logging is set up, the admin server listens,
    /// leader election runs as the flags say, and SIGTERM and SIGINT stop
    /// [`Runtime::run`]. Without them (in tests) there is none of that, and the
    /// runtime writes without a Lease unless [`with_leader_election`] is given.
    ///
    /// [`with_leader_election`]: Self::with_leader_election
    pub fn with_args(mut self, args: RuntimeArgs) -> Self {
        self.args = Some(args);
        self
    }

    /// Uses `client` instead of inferring one (in-cluster or KUBECONFIG) and
    /// counting its requests ([`client::instrumented`]). The runtime then has no
    /// [`Runtime::config`].
    pub fn with_client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Uses the client that `make` builds, given the runtime's request counter so
    /// that the client counts its requests like an inferred one (for a binary that
    /// makes its own client, e.g. one that fails over between API server
    /// endpoints). The runtime then has no [`Runtime::config`].
    pub fn with_client_from(
        mut self,
        make: impl FnOnce(&RequestMetrics) -> Result<Client, kube::Error> + Send + 'static,
    ) -> Self {
        self.make_client = Some(Box::new(make));
        self
    }

    /// Elects a leader with these settings (instead of those of
    /// [`with_args`](Self::with_args)).
    pub fn with_leader_election(mut self, args: LeaderElectionArgs) -> Self {
        self.leader_election = Some(args);
        self
    }

    /// Sets up logging, the client, the metrics, leader election and the admin
    /// server.
    pub async fn build(self) -> Result<Runtime, RuntimeError> {
        if let Some(args) = &self.args {
            args.telemetry.init().map_err(RuntimeError::Telemetry)?;
        }
        let metrics = Metrics::new().map_err(RuntimeError::Metrics)?;
        let (client, config) = match (self.client, self.make_client) {
            (Some(client), _) => (client, None),
            (None, Some(make)) => {
                let requests = RequestMetrics::register(metrics.registry()).map_err(RuntimeError::Metrics)?;
                (make(&requests).map_err(RuntimeError::Client)?, None)
            }
            (None, None) => {
                let config = kube::Config::infer().await.map_err(RuntimeError::Config)?;
                // Every request the binary sends is counted by verb and resource.
                let requests = RequestMetrics::register(metrics.registry()).map_err(RuntimeError::Metrics)?;
                let client = client::instrumented(config.clone(), &requests).map_err(RuntimeError::Client)?;
                (client, Some(config))
            }
        };
        let readiness = Readiness::new();
        let shutdown = Shutdown::new();

        let election = self
            .leader_election
            .or_else(|| self.args.as_ref().map(|args| args.leader_election.clone()));
        let (leadership, election) = match election {
            Some(election) => {
                let lease = election
                    .lease_config(&client, self.name)
                    .map_err(RuntimeError::LeaderElection)?;
                let owner = match &lease {
                    // Only in a cluster: tests and local runs have no pod.
                    Some(lease) if config.is_some() => {
                        owner::find_lease_owner(&client, &lease.namespace).await
                    }
                    _ => None,
                };
                election
                    .start_owned(
                        client.clone(),
                        self.name,
                        Some(&metrics.leader),
                        owner,
                        shutdown.signaled(),
                    )
                    .map_err(RuntimeError::LeaderElection)?
            }
            None => (Leadership::standalone(), ElectionTask::none()),
        };
        let writer = Writer::new(leadership.clone(), self.name).with_metrics(&metrics.writes);

        let admin = match &self.args {
            Some(args) => Some(
                AdminServer::bind(
                    args.admin.admin_addr,
                    metrics.registry().clone(),
                    readiness.clone(),
                )
                .await
                .map_err(RuntimeError::Admin)?,
            ),
            None => None,
        };
        Ok(Runtime {
            name: self.name,
            config,
            parts: Parts {
                client,
                writer,
                metrics,
                readiness,
                shutdown,
            },
            election,
            admin,
            signals: self.args.is_some(),
        })
    }
}

/// What controllers get from the runtime: cheap to clone. A [`Runtime`] has one
/// ([`Runtime::parts`]); tests that run controllers without a whole runtime make
/// their own with [`Parts::new`].
#[derive(Clone)]
pub struct Parts {
    /// The client.
    pub client: Client,
    /// The fenced writer; its leadership is this replica's.
    pub writer: Writer,
    /// The metrics: a binary registers its own on [`Metrics::registry`].
    pub metrics: Metrics,
    /// The readiness behind `/readyz`; [`Parts::reflector`] gates each store in it.
    pub readiness: Readiness,
    /// The one shutdown signal: give [`Shutdown::signaled`] to every controller's
    /// `graceful_shutdown_on`.
    pub shutdown: Shutdown,
}

impl Parts {
    /// Parts around `client` that write as `manager` while `leadership` leads,
    /// with fresh metrics (the writer counts in them), readiness and shutdown signal.
    pub fn new(
        client: Client,
        leadership: Leadership,
        manager: &'static str,
    ) -> Result<Self, prometheus::Error> {
        let metrics = Metrics::new()?;
        Ok(Parts {
            client,
            writer: Writer::new(leadership, manager).with_metrics(&metrics.writes),
            metrics,
            readiness: Readiness::new(),
            shutdown: Shutdown::new(),
        })
    }

    /// This replica's leadership; [`Leadership::terms`] for `reconcile_all_on`.
    pub fn leadership(&self) -> &Leadership {
        self.writer.leadership()
    }

    /// A shared watch of `api`, gated in [`readiness`](Self::readiness).
    pub fn reflector<K>(&self, api: Api<K>, config: watcher::Config) -> Reflector<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    {
        Reflector::new(api, config, &self.readiness)
    }

    /// The one way a controller is made: for the objects `reflector`
    /// watches, reconciling at most [`CONCURRENCY`] objects at once, hearing
    /// its watches again soon after an error ([`TriggerBackoff`]),
    /// reconciling everything each time this replica starts leading, and
    /// stopping on the shutdown signal. The caller adds what else wakes it
    /// (`owns_shared_stream`, `watches_shared_stream`, `reconcile_on`) and runs it.
    pub fn controller<K>(&self, reflector: &Reflector<K>) -> Controller<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    {
        Controller::for_shared_stream(reflector.subscribe(), reflector.store())
            .with_config(ControllerConfig::default().concurrency(CONCURRENCY))
            .trigger_backoff(TriggerBackoff::default())
            .reconcile_all_on(self.leadership().terms())
            .graceful_shutdown_on(self.shutdown.signaled())
    }
}

/// How many objects one controller reconciles at once: enough for a burst of
/// installs, few enough that a resync of thousands of objects does not open
/// thousands of requests together.
pub const CONCURRENCY: u16 = 8;

/// What every binary shares; see the [module docs](self).
pub struct Runtime {
    name: &'static str,
    config: Option<kube::Config>,
    parts: Parts,
    election: ElectionTask,
    admin: Option<AdminServer>,
    signals: bool,
}

impl Runtime {
    /// A builder for binary `name`: the name is also the Lease's default name and
    /// the field manager of every write.
    pub fn builder(name: &'static str) -> RuntimeBuilder {
        RuntimeBuilder {
            name,
            args: None,
            client: None,
            make_client: None,
            leader_election: None,
        }
    }

    /// The binary's name (Lease name, field manager).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// What the controllers get.
    pub fn parts(&self) -> &Parts {
        &self.parts
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.parts.client
    }

    /// The client's configuration, to derive other clients (e.g. impersonating a
    /// service account); `None` when the runtime was given a client.
    pub fn config(&self) -> Option<&kube::Config> {
        self.config.as_ref()
    }

    /// The metrics: register the binary's own on [`Metrics::registry`].
    pub fn metrics(&self) -> &Metrics {
        &self.parts.metrics
    }

    /// The readiness behind `/readyz`.
    pub fn readiness(&self) -> &Readiness {
        &self.parts.readiness
    }

    /// The one shutdown signal: give [`Shutdown::signaled`] to every controller's
    /// `graceful_shutdown_on`; [`Shutdown::trigger`] stops [`run`](Self::run).
    pub fn shutdown(&self) -> &Shutdown {
        &self.parts.shutdown
    }

    /// This replica's leadership; [`Leadership::terms`] for `reconcile_all_on`.
    pub fn leadership(&self) -> &Leadership {
        self.parts.leadership()
    }

    /// The fenced writer, as field manager [`name`](Self::name).
    pub fn writer(&self) -> &Writer {
        &self.parts.writer
    }

    /// Where the admin server listens, if it does.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(AdminServer::local_addr)
    }

    /// A shared watch of `api`, gated in this runtime's readiness.
    pub fn reflector<K>(&self, api: Api<K>, config: watcher::Config) -> Reflector<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    {
        self.parts.reflector(api, config)
    }

    /// Runs `controllers` (and the admin server) until a shutdown signal, a
    /// [`Shutdown::trigger`], or the end of the election; then triggers shutdown
    /// and waits for the controllers to drain, the admin server to stop and the
    /// Lease to be released. `controllers` should end only on shutdown: if it ends
    /// before, that is [`RuntimeError::ControllersEnded`].
    pub async fn run<F>(self, controllers: F) -> Result<(), RuntimeError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Runtime {
            name,
            parts: Parts { shutdown, .. },
            mut election,
            admin,
            signals,
            ..
        } = self;
        let admin: Option<JoinHandle<()>> = admin.map(|admin| tokio::spawn(admin.serve(shutdown.signaled())));
        let mut controllers = tokio::spawn(controllers);
        let signal = async {
            if signals {
                crate::shutdown_signal().await
            } else {
                std::future::pending().await
            }
        };
        tracing::info!(binary = name, version = env!("CARGO_PKG_VERSION"), "running");
        let (outcome, controllers) = tokio::select! {
            signal = signal => (signal.map_err(RuntimeError::Signal), Some(controllers)),
            () = shutdown.signaled() => (Ok(()), Some(controllers)),
            ended = election.finished() => {
                let error = ended.err().map_or(RuntimeError::ElectionEnded, RuntimeError::LeaderElection);
                // It has ended: do not wait for it again.
                election = ElectionTask::none();
                (Err(error), Some(controllers))
            }
            ended = &mut controllers => {
                (Err(ended.map_or_else(RuntimeError::Task, |()| RuntimeError::ControllersEnded)), None)
            }
        };
        shutdown.trigger();
        tracing::info!(binary = name, "shutting down: draining the controllers");
        let drained = match controllers {
            Some(controllers) => controllers.await.map_err(RuntimeError::Task),
            None => Ok(()),
        };
        let released = election.stopped().await.map_err(RuntimeError::LeaderElection);
        if let Some(admin) = admin {
            // The admin server only ends by shutdown; a panic there changes nothing now.
            let _ = admin.await;
        }
        tracing::info!(binary = name, "stopped");
        outcome.and(drained).and(released)
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
        time::Duration,
    };

    use super::*;

    fn client() -> Client {
        olm_testkit::mock_api::MockApi::echo().0
    }

    #[tokio::test]
    async fn a_runtime_for_tests_writes_and_drains_on_trigger() {
        let runtime = Runtime::builder("olm-operator")
            .with_client(client())
            .build()
            .await
            .unwrap();
        assert!(runtime.config().is_none());
        assert!(runtime.admin_addr().is_none());
        assert_eq!(runtime.writer().manager(), "olm-operator");
        assert!(
            runtime.leadership().is_leader(),
            "no election: a standalone writer"
        );

        let drained = Arc::new(AtomicBool::new(false));
        let controllers = {
            let stop = runtime.shutdown().signaled();
            let drained = drained.clone();
            async move {
                stop.await;
                // A reconcile in flight finishes after the signal.
                tokio::time::sleep(Duration::from_millis(50)).await;
                drained.store(true, Ordering::SeqCst);
            }
        };
        let shutdown = runtime.shutdown().clone();
        let running = tokio::spawn(runtime.run(controllers));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!running.is_finished());
        shutdown.trigger();
        tokio::time::timeout(Duration::from_secs(10), running)
            .await
            .expect("run returns after the trigger")
            .unwrap()
            .unwrap();
        assert!(drained.load(Ordering::SeqCst), "run waited for the controllers");
    }

    #[tokio::test]
    async fn controllers_that_end_early_are_an_error() {
        let runtime = Runtime::builder("catalog-operator")
            .with_client(client())
            .build()
            .await
            .unwrap();
        let shutdown = runtime.shutdown().clone();
        let error = runtime.run(async {}).await.unwrap_err();
        assert!(matches!(error, RuntimeError::ControllersEnded), "{error}");
        assert!(shutdown.is_triggered(), "the rest was told to stop");
    }

    #[tokio::test]
    async fn a_made_client_counts_its_requests_and_off_means_no_election() {
        let runtime = Runtime::builder("machine-agent")
            .with_leader_election(LeaderElectionArgs::off())
            .with_client_from(|requests| {
                requests.observe(&client::classify_request(&http::Method::GET, "/version", None));
                Ok(client())
            })
            .build()
            .await
            .unwrap();
        assert!(runtime.leadership().is_leader(), "no election: always writes");
        let families = runtime.metrics().registry().gather();
        assert!(
            families.iter().any(|f| f.name() == "olm_kube_requests_total"),
            "the request counter is registered for a made client"
        );
    }
}
