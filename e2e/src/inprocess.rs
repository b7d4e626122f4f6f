//! catalog-operator in-process: its registry server and its controllers, run by
//! the tests inside the test binary and scoped to the test's namespace, so
//! that many tests can run side by side and a test can stop either at any
//! moment.
//!
//! The controllers act as their binary's ServiceAccount of `manifests/`, with
//! the RBAC of `manifests/` ([`IdentityClient`]), not as the test: a request
//! the API server refuses them fails the test.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use catalog_operator::{controllers::Options, run::controllers};
use k8s_openapi::api::core::v1::Service;
use kube::{Api, Client, api::ListParams, client::ClientBuilder};
use olm_catalog::Catalog;
use olm_packageserver as packageserver;
use olm_registry::server::{self, RegistryIndex, RegistryService};
use olm_runtime::{
    LeaderElectionArgs, Leadership, Parts, Shutdown,
    apply::{FIELD_MANAGER_CATALOG, Writer},
    refusals::{Refusal, RefusalLayer},
};
use tokio::{sync::oneshot, task::JoinHandle};

use crate::api_service::PackageApiService;
use olm_api::{
    packages::PackageManifest,
    v1::OperatorGroup,
    v1alpha1::{CatalogSource, ConnectivityState},
};
use olm_testkit::{
    identity::{self, Binary},
    objects::{STEP, apply_json},
    repo_root, wait_for_within,
};
use serde_json::json;

/// A registry server serving a catalog on loopback, as `catalog-operator serve` does.
pub struct Registry {
    /// Where it serves.
    pub addr: SocketAddr,
    /// The service, whose index a test may replace (a catalog update).
    pub service: RegistryService,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Registry {
    /// Serves `index` on `addr` (port 0: any free port).
    pub async fn start(index: Arc<RegistryIndex>, addr: SocketAddr) -> Registry {
        let listener = server::bind(addr).await.expect("bind the registry server");
        let addr = listener.local_addr().expect("the bound address");
        let (stop, stopped) = oneshot::channel::<()>();
        let service = RegistryService::new(index);
        let serving = service.clone();
        let task = tokio::spawn(async move {
            server::serve_service(listener, serving, async move {
                let _ = stopped.await;
            })
            .await
            .expect("the registry server runs");
        });
        Registry {
            addr,
            service,
            stop,
            task,
        }
    }

    /// Stops serving; returns the address it served on.
    pub async fn stop(self) -> SocketAddr {
        let _ = self.stop.send(());
        self.task.await.expect("the registry server stops");
        self.addr
    }
}

/// The demo catalog, and with `tools` also the unrelated `demo-tools` package.
pub fn demo_catalog(tools: bool) -> Catalog {
    let root = repo_root();
    let (mut catalog, _) =
        catalog_operator::source::load(&root.join("catalogs/demo-bundles")).expect("the demo catalog loads");
    if tools {
        let (extra, _) = catalog_operator::source::load(&root.join("e2e/fixtures/demo-tools"))
            .expect("the demo-tools fixture loads");
        catalog.extend(extra);
        catalog.sort();
    }
    catalog
}

/// [`demo_catalog`] as a registry index.
pub fn demo_index(tools: bool) -> Arc<RegistryIndex> {
    Arc::new(RegistryIndex::new(demo_catalog(tools)))
}

/// A free port on loopback, never handed out twice in one process
/// ([`olm_testkit::process::free_port`]).
pub use olm_testkit::process::free_port;

/// Settings for serving the PackageManifest API from this process on a free
/// loopback port, with the Service `packageserver` of `namespace` that the
/// APIService names: of type ExternalName naming 127.0.0.1, so the API
/// server's aggregator dials this process with no Pod or Endpoints. The
/// APIService is removed when the returned guard is dropped.
pub async fn package_server(client: &Client, namespace: &str) -> (packageserver::Config, PackageApiService) {
    let port = free_port();
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    apply_json(
        &services,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "packageserver", "namespace": namespace},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
        }),
    )
    .await;
    // The APIService as deployed; catalog-operator, under the RBAC of manifests/, only updates it.
    let registered = PackageApiService::of(namespace);
    identity::apply_manifest_object(client, &manifest_api_service(namespace, port)).await;
    let config = packageserver::Config {
        address: format!("127.0.0.1:{port}").parse().expect("an address"),
        service: "packageserver".into(),
        namespace: namespace.to_owned(),
        service_port: port,
        secret: "packageserver-serving-cert".into(),
        register: true,
        cert_lifetime: std::time::Duration::from_secs(365 * 24 * 3600),
    };
    (config, registered)
}

/// The APIService of `manifests/packageserver.yaml`, pointed at Service
/// `packageserver` of `namespace` on `port` instead of the one in `olm`.
pub fn manifest_api_service(namespace: &str, port: u16) -> serde_json::Value {
    let mut api_service = identity::kustomization_files(&identity::manifests_dir())
        .into_iter()
        .map(|(_, doc)| doc)
        .find(|doc| doc["kind"] == "APIService" && doc["metadata"]["name"] == olm_api::packages::API_SERVICE)
        .expect("manifests/ registers the PackageManifest API");
    api_service["spec"]["service"]["namespace"] = namespace.into();
    api_service["spec"]["service"]["port"] = port.into();
    api_service
}

/// Waits until the API server serves at least `wanted` PackageManifests in `namespace`
/// (an APIService that was just applied takes a moment to become available).
pub async fn wait_package_manifests(client: &Client, namespace: &str, wanted: usize) -> Vec<PackageManifest> {
    let api: Api<PackageManifest> = Api::namespaced(client.clone(), namespace);
    let mut last = String::new();
    for _ in 0..240 {
        match api.list(&ListParams::default()).await {
            Ok(list) if list.items.len() >= wanted => return list.items,
            Ok(list) => last = format!("{} PackageManifests", list.items.len()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("{wanted} PackageManifests in {namespace} are not served: {last}");
}

/// A client that acts as `binary`'s ServiceAccount of `manifests/`
/// ([`identity::config`]), for controllers run in-process, and the requests
/// the API server refused it. When it is dropped (after its controllers
/// stopped, unless the test already fails), a refusal fails the test.
pub struct IdentityClient {
    /// The client.
    pub client: Client,
    /// Its configuration (for clients derived from it, e.g. impersonating ones).
    pub config: kube::Config,
    binary: Binary,
    refusals: Arc<Mutex<Vec<Refusal>>>,
}

impl IdentityClient {
    /// A client of `binary`'s ServiceAccount, with its leader-election Role
    /// granted in `lease_namespace` when given; `admin` (the test's client)
    /// applies the RBAC of `manifests/` and requests the token.
    pub async fn new(admin: &Client, binary: Binary, lease_namespace: Option<&str>) -> IdentityClient {
        let config = identity::config(admin, binary, lease_namespace).await;
        let refusals: Arc<Mutex<Vec<Refusal>>> = Arc::default();
        let record = refusals.clone();
        let layer = RefusalLayer::new(Arc::new(move |refusal: Refusal| {
            record.lock().unwrap_or_else(|e| e.into_inner()).push(refusal);
        }));
        let client = ClientBuilder::try_from(config.clone())
            .expect("a client for the operator's ServiceAccount")
            .with_layer(&layer)
            .build();
        IdentityClient {
            client,
            config,
            binary,
            refusals,
        }
    }

    /// The requests the API server refused this ServiceAccount so far, one a
    /// line ([`identity::forbidden_lines`]: refusals naming its user).
    pub fn forbidden_lines(&self) -> Vec<String> {
        let text = self
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|r| format!("{} {}: {}", r.method, r.path, r.message))
            .collect::<Vec<_>>()
            .join("\n");
        identity::forbidden_lines(&text, &identity::deployment(self.binary).user())
    }

    /// Panics, with the refused requests, when there are any.
    pub fn assert_no_forbidden(&self) {
        let user = identity::deployment(self.binary).user();
        let who = format!("{} (in-process)", self.binary.name());
        identity::assert_no_forbidden(&who, &user, &self.forbidden_lines());
    }
}

impl Drop for IdentityClient {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.assert_no_forbidden();
        }
    }
}

/// The catalog-operator's controllers, in-process, watching only `namespace`.
pub struct Operator {
    shutdown: Shutdown,
    task: JoinHandle<()>,
    metrics: prometheus::Registry,
    /// Dropped after the controllers stop: then a refusal fails the test.
    _identity: IdentityClient,
}

impl Operator {
    /// Starts the controllers, standalone (no leader election), watching `namespace`,
    /// whose CatalogSources are also the global ones. They act as
    /// catalog-operator's ServiceAccount ([`IdentityClient`]); `client` (the
    /// test's) sets that up.
    pub async fn start(client: &Client, namespace: &str) -> Operator {
        Operator::start_serving(client, namespace, None).await
    }

    /// [`Operator::start`], serving the PackageManifest API as `package_server` says.
    pub async fn start_serving(
        client: &Client,
        namespace: &str,
        package_server: Option<packageserver::Config>,
    ) -> Operator {
        // E2E_LOG=debug (or any filter) shows what the controllers do.
        if let Ok(filter) = std::env::var("E2E_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_ansi(false)
                .with_test_writer()
                .try_init();
        }
        let options = Options {
            global_catalog_namespace: namespace.to_owned(),
            namespace: Some(namespace.to_owned()),
            catalog_health_interval: Duration::from_secs(1),
            package_server,
            ..Options::default()
        };
        let identity = IdentityClient::new(client, Binary::CatalogOperator, None).await;
        let parts = Parts::new(
            identity.client.clone(),
            Leadership::standalone(),
            FIELD_MANAGER_CATALOG,
        )
        .expect("a metrics registry");
        let controllers = controllers(&parts, options).expect("the controllers' metrics register");
        Operator {
            shutdown: parts.shutdown.clone(),
            task: tokio::spawn(controllers),
            metrics: parts.metrics.registry().clone(),
            _identity: identity,
        }
    }

    /// The metrics, as `/metrics` shows them.
    pub fn metrics_text(&self) -> String {
        prometheus::TextEncoder::new()
            .encode_to_string(&self.metrics.gather())
            .expect("metrics encode")
    }

    /// A replica that writes only while it holds the Lease `catalog-operator` in
    /// `namespace`, as `catalog-operator run` does; returns its leadership too.
    /// It acts as catalog-operator's ServiceAccount, with its leader-election
    /// Role granted in `namespace`.
    pub async fn start_elected(client: &Client, namespace: &str, identity: &str) -> (Operator, Leadership) {
        let account = IdentityClient::new(client, Binary::CatalogOperator, Some(namespace)).await;
        let client = &account.client;
        let options = Options {
            global_catalog_namespace: namespace.to_owned(),
            namespace: Some(namespace.to_owned()),
            catalog_health_interval: Duration::from_secs(1),
            ..Options::default()
        };
        let election = LeaderElectionArgs {
            leader_elect: true,
            lease_name: None,
            lease_namespace: Some(namespace.to_owned()),
            leader_identity: Some(identity.to_owned()),
            lease_duration: Duration::from_secs(4),
            renew_deadline: Duration::from_secs(3),
            retry_period: Duration::from_millis(500),
        };
        let shutdown = Shutdown::new();
        let metrics = olm_runtime::metrics::Metrics::new().expect("a metrics registry");
        let (leadership, election) = election
            .start(
                client.clone(),
                "catalog-operator",
                Some(&metrics.leader),
                shutdown.signaled(),
            )
            .expect("leader election starts");
        let parts = Parts {
            client: client.clone(),
            writer: Writer::new(leadership.clone(), FIELD_MANAGER_CATALOG),
            metrics,
            readiness: olm_runtime::Readiness::new(),
            shutdown: shutdown.clone(),
        };
        let controllers = controllers(&parts, options).expect("the controllers' metrics register");
        let task = tokio::spawn(async move {
            controllers.await;
            election.stopped().await.expect("the lease is released");
        });
        (
            Operator {
                shutdown,
                task,
                metrics: parts.metrics.registry().clone(),
                _identity: account,
            },
            leadership,
        )
    }

    /// Stops the controllers (reconciles in flight finish first).
    pub async fn stop(self) {
        self.shutdown.trigger();
        let _ = tokio::time::timeout(Duration::from_secs(20), self.task).await;
    }
}

/// olm-operator's controllers alone, in-process, acting as its ServiceAccount
/// of `manifests/` (for tests that need no catalog: CSVs applied as they are).
pub struct OlmOperator {
    parts: Parts,
    task: JoinHandle<()>,
    identity: IdentityClient,
}

impl OlmOperator {
    /// Starts olm-operator's controllers; `client` (the test's) grants its RBAC.
    pub async fn start(client: &Client) -> OlmOperator {
        let identity = IdentityClient::new(client, Binary::OlmOperator, None).await;
        let parts = Parts::new(
            identity.client.clone(),
            Leadership::standalone(),
            olm_runtime::apply::FIELD_MANAGER_OLM,
        )
        .expect("metrics");
        let ctx = Arc::new(olm_operator::context::Context::new(
            identity.client.clone(),
            Some(identity.config.clone()),
            Arc::new(olm_operator::metrics::Metrics::register(&parts.metrics).expect("metrics")),
            parts.writer.clone(),
            olm_operator::context::Settings::default(),
        ));
        let task = tokio::spawn(olm_operator::controllers(&parts, ctx));
        OlmOperator {
            parts,
            task,
            identity,
        }
    }

    /// Stops the controllers (reconciles in flight finish first); fails the
    /// test if the API server refused olm-operator anything.
    pub async fn stop(self) {
        self.parts.shutdown.trigger();
        let _ = tokio::time::timeout(Duration::from_secs(20), self.task).await;
        self.identity.assert_no_forbidden();
    }
}

/// What a user meets: the demo catalog's registry, both operators in-process
/// (the catalog-operator scoped to the namespace), an OperatorGroup `demo`
/// targeting the namespace and a CatalogSource `demo` on the registry, READY.
pub struct DemoStack {
    registry: Registry,
    catalog_operator: Operator,
    olm_parts: Parts,
    olm_operator: JoinHandle<()>,
    olm_identity: IdentityClient,
    /// Dropped last: the APIService goes after the server it names.
    _api_service: Option<PackageApiService>,
}

impl DemoStack {
    /// Starts everything in `namespace` and waits until the catalog is READY.
    pub async fn start(client: &Client, namespace: &str) -> DemoStack {
        Self::start_serving(client, namespace, demo_index(false), None, false).await
    }

    /// [`DemoStack::start`] with the catalog-operator also serving the
    /// PackageManifest API (and plans) through the API server, as `kubectl olm`
    /// reads it; returns once the demo packages are served in `namespace`.
    pub async fn start_with_package_server(client: &Client, namespace: &str) -> DemoStack {
        let stack = Self::start_serving(client, namespace, demo_index(false), None, true).await;
        wait_package_manifests(client, namespace, demo_catalog(false).packages.len()).await;
        stack
    }

    /// [`DemoStack::start`] serving `index`, with the CatalogSource polling its
    /// registry every second, so that [`DemoStack::update_catalog`] is seen soon.
    pub async fn start_with(client: &Client, namespace: &str, index: Arc<RegistryIndex>) -> DemoStack {
        Self::start_serving(client, namespace, index, Some("1s"), false).await
    }

    /// Serves `index` from now on: a catalog update.
    pub fn update_catalog(&self, index: Arc<RegistryIndex>) {
        self.registry.service.replace(index);
    }

    async fn start_serving(
        client: &Client,
        namespace: &str,
        index: Arc<RegistryIndex>,
        poll: Option<&str>,
        serve_packages: bool,
    ) -> DemoStack {
        let registry = Registry::start(index, "127.0.0.1:0".parse().expect("an address")).await;
        let address = registry.addr.to_string();
        let (package_server, api_service) = if serve_packages {
            let (config, registered) = package_server(client, namespace).await;
            (Some(config), Some(registered))
        } else {
            (None, None)
        };
        let catalog_operator = Operator::start_serving(client, namespace, package_server).await;
        // olm-operator acts as its ServiceAccount too.
        let olm_identity = IdentityClient::new(client, Binary::OlmOperator, None).await;
        let olm_parts = Parts::new(
            olm_identity.client.clone(),
            Leadership::standalone(),
            olm_runtime::apply::FIELD_MANAGER_OLM,
        )
        .expect("metrics");
        let ctx = Arc::new(olm_operator::context::Context::new(
            olm_identity.client.clone(),
            Some(olm_identity.config.clone()),
            Arc::new(olm_operator::metrics::Metrics::register(&olm_parts.metrics).expect("metrics")),
            olm_parts.writer.clone(),
            olm_operator::context::Settings::default(),
        ));
        let olm_operator = tokio::spawn(olm_operator::controllers(&olm_parts, ctx));

        let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), namespace);
        apply_json(
            &groups,
            json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "demo", "namespace": namespace}, "spec": {"targetNamespaces": [namespace]}}),
        )
        .await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
        let mut source = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "demo", "namespace": namespace},
        "spec": {"sourceType": "grpc", "address": address}});
        if let Some(interval) = poll {
            source["spec"]["updateStrategy"] = json!({"registryPoll": {"interval": interval}});
        }
        apply_json(&sources, source).await;
        wait_for_within(
            STEP,
            &sources,
            "demo",
            "CatalogSource demo is READY",
            |c: Option<&CatalogSource>| {
                c.and_then(|c| c.status.as_ref()?.connection_state.as_ref())
                    .is_some_and(|s| s.last_observed_state == ConnectivityState::Ready)
            },
        )
        .await;
        DemoStack {
            registry,
            catalog_operator,
            olm_parts,
            olm_operator,
            olm_identity,
            _api_service: api_service,
        }
    }

    /// Stops both operators (reconciles in flight finish first) and the registry.
    pub async fn stop(self) {
        self.olm_parts.shutdown.trigger();
        let _ = tokio::time::timeout(Duration::from_secs(20), self.olm_operator).await;
        self.olm_identity.assert_no_forbidden();
        self.catalog_operator.stop().await;
        self.registry.stop().await;
    }
}
