//! What every reconcile gets: a client, the metrics, the fenced writer, an
//! event recorder and the settings.
//!
//! Every write olm-operator makes goes through its fenced writer
//! ([`Context::writer`], directly or through [`Context::apply`],
//! [`Context::apply_status`], [`Context::delete`]): server-side apply with one
//! field manager, fenced by [`olm_runtime::apply::Writer`] so that only the
//! replica holding the leader lease writes. Events are published by the leader only.

use std::{collections::BTreeMap, fmt::Debug, sync::Arc, time::Duration};

use kube::{
    Api, Client, Resource,
    api::DeleteParams,
    runtime::events::{Event, Recorder, Reporter},
};
use olm_runtime::{
    apply::{FIELD_MANAGER_OLM, WriteError, Writer},
    events::Outbox,
};
use serde::{Serialize, de::DeserializeOwned};
use tokio::sync::{Mutex, OnceCell};

use crate::metrics::Metrics;

/// The field manager of every write olm-operator makes.
pub const FIELD_MANAGER: &str = FIELD_MANAGER_OLM;

/// Tunable behaviour of the controllers.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How long an install may go without progress before the CSV fails with
    /// `InstallCheckFailed` (OLM: 5 minutes).
    pub install_timeout: Duration,
    /// How often a settled object is checked again even without any event.
    pub resync: Duration,
    /// How long serving certificates live and when they are renewed.
    pub cert_lifetimes: crate::controllers::csv::certs::Lifetimes,
    /// API server endpoints (`https://host:port`) that MachinePools publish
    /// beside those of the `kubernetes` EndpointSlices.
    pub apiserver_endpoints: Vec<String>,
    /// How long, and how many, finished Actions are kept per namespace.
    pub action_retention: crate::controllers::action::decide::Retention,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            install_timeout: Duration::from_secs(5 * 60),
            resync: Duration::from_secs(10 * 60),
            cert_lifetimes: Default::default(),
            apiserver_endpoints: Vec::new(),
            action_retention: Default::default(),
        }
    }
}

/// Shared state of the controllers.
pub struct Context {
    /// The operator's own client: reads, and the client writes go through.
    pub client: Client,
    /// The metrics registry and OLM's metrics.
    pub metrics: Arc<Metrics>,
    /// Fenced server-side apply: writes only while this replica leads.
    pub writer: Writer,
    /// Settings.
    pub settings: Settings,
    events: Outbox,
    /// The client configuration, kept to derive clients that impersonate an
    /// OperatorGroup's service account.
    config: Option<kube::Config>,
    scoped_clients: Mutex<BTreeMap<String, Client>>,
    server_version: OnceCell<semver::Version>,
}

impl Context {
    /// A context for `client` that writes through `writer`. Without `config`,
    /// scoped installs (an OperatorGroup with `serviceAccountName`) fail with a
    /// clear message.
    pub fn new(
        client: Client,
        config: Option<kube::Config>,
        metrics: Arc<Metrics>,
        writer: Writer,
        settings: Settings,
    ) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            events: Outbox::new(Recorder::new(client.clone(), reporter)),
            client,
            metrics,
            writer,
            settings,
            config,
            scoped_clients: Mutex::new(BTreeMap::new()),
            server_version: OnceCell::new(),
        }
    }

    /// A context for tests: `client` (a mocked API server, say), leading
    /// alone, default settings, metrics of its own.
    #[cfg(test)]
    pub fn for_tests(client: Client) -> Self {
        let metrics = olm_runtime::metrics::Metrics::new().expect("metrics");
        Context::new(
            client,
            None,
            Arc::new(Metrics::register(&metrics).expect("metrics")),
            Writer::new(olm_runtime::Leadership::standalone(), FIELD_MANAGER),
            Settings::default(),
        )
    }

    /// Whether this replica leads and may write now.
    pub fn is_leader(&self) -> bool {
        self.writer.leadership().is_leader()
    }

    /// Server-side applies `obj` (forcing ownership of the fields it sets) and
    /// returns the object the API server stored.
    pub async fn apply<K>(&self, api: &Api<K>, obj: &K) -> Result<K, WriteError>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        let name = obj.meta().name.clone().unwrap_or_default();
        self.writer.apply(api, &name, obj).await
    }

    /// Server-side applies `status` to the status subresource of `name`.
    pub async fn apply_status<K, S>(&self, api: &Api<K>, name: &str, status: &S) -> Result<K, WriteError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
        S: Serialize,
    {
        self.writer.apply_status(api, name, status).await
    }

    /// Deletes `name`; an object that is already gone is not an error.
    pub async fn delete<K>(&self, api: &Api<K>, name: &str) -> Result<(), WriteError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
    {
        self.writer
            .delete(api, name, &DeleteParams::background())
            .await
            .map(|_| ())
    }

    /// Publishes a Kubernetes Event about `object` when this replica leads,
    /// in the background ([`Outbox`]): the reconcile does not wait for it,
    /// and a failure is logged, never returned (an event is not worth failing
    /// a reconcile for).
    pub fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, event: Event) {
        if self.is_leader() {
            self.events.send(event, object.object_ref(&()));
        }
    }

    /// A client that acts as service account `name` of `namespace`
    /// (impersonation), for installs scoped by an OperatorGroup.
    pub async fn client_as_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Client, ScopedClientError> {
        let user = format!("system:serviceaccount:{namespace}:{name}");
        let mut clients = self.scoped_clients.lock().await;
        if let Some(client) = clients.get(&user) {
            return Ok(client.clone());
        }
        let mut config = self.config.clone().ok_or(ScopedClientError::NoConfig)?;
        config.auth_info.impersonate = Some(user.clone());
        // No Impersonate-Group: for a service account user the API server adds its groups
        // (system:serviceaccounts, system:serviceaccounts:<namespace>, system:authenticated)
        // itself, and naming them would take `impersonate` on groups, which manifests/ does
        // not grant (only on serviceaccounts).
        config.auth_info.impersonate_groups = None;
        let client = Client::try_from(config).map_err(ScopedClientError::Build)?;
        clients.insert(user, client.clone());
        Ok(client)
    }

    /// The API server's version, asked until it is known, then remembered. An
    /// answer that did not come (the API server is away) is not remembered, so
    /// that the next reconcile asks again.
    pub async fn server_version(&self) -> Option<semver::Version> {
        if let Some(version) = self.server_version.get() {
            return Some(version.clone());
        }
        match self.client.apiserver_version().await {
            Ok(info) => {
                let version = parse_kube_version(&info.git_version);
                if version.is_none() {
                    tracing::warn!(version = info.git_version, "the server version is not a version");
                }
                let version = version?;
                Some(
                    self.server_version
                        .get_or_init(|| async { version })
                        .await
                        .clone(),
                )
            }
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "cannot read the server version; asking again at the next reconcile"
                );
                None
            }
        }
    }
}

/// Why a client for an OperatorGroup's service account could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ScopedClientError {
    /// The context was made without a client configuration.
    #[error("scoped installs need the client configuration, and this operator was started without one")]
    NoConfig,
    /// The configuration did not give a client.
    #[error("cannot build a client that impersonates the service account")]
    Build(#[source] kube::Error),
}

/// Now, to the second (all a status timestamp keeps), so that a status
/// computed now compares equal to the same status read back.
pub fn now() -> k8s_openapi::jiff::Timestamp {
    use k8s_openapi::jiff::Timestamp;
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now())
}

/// A Kubernetes version such as `v1.36.3` or `v1.30.2+k3s1` as a semantic version.
pub fn parse_kube_version(text: &str) -> Option<semver::Version> {
    let text = text.trim().trim_start_matches('v');
    let core = text.split(['-', '+']).next().unwrap_or(text);
    let mut parts = core.split('.').map(|part| part.parse::<u64>().ok());
    let major = parts.next()??;
    let minor = parts.next().unwrap_or(Some(0))?;
    let patch = parts.next().unwrap_or(Some(0))?;
    if parts.next().is_some() {
        return None;
    }
    Some(semver::Version::new(major, minor, patch))
}

#[cfg(test)]
mod tests {
    use olm_testkit::mock_api::{Answer, MockApi};

    use super::*;

    #[test]
    fn kube_versions_parse_with_and_without_suffixes() {
        assert_eq!(
            parse_kube_version("v1.36.3"),
            Some(semver::Version::new(1, 36, 3))
        );
        assert_eq!(
            parse_kube_version("v1.30.2+k3s1"),
            Some(semver::Version::new(1, 30, 2))
        );
        assert_eq!(
            parse_kube_version("v1.29.0-rc.1"),
            Some(semver::Version::new(1, 29, 0))
        );
        assert_eq!(parse_kube_version("1.11"), Some(semver::Version::new(1, 11, 0)));
        assert_eq!(parse_kube_version("banana"), None);
        assert_eq!(parse_kube_version("1.2.3.4"), None);
    }

    /// A client for an API server that is away for the first `down` requests
    /// (503), then answers `/version` with v1.36.3; it records the requests.
    fn flaky_server(down: usize) -> (Client, MockApi) {
        use std::sync::atomic::{AtomicUsize, Ordering};

        let calls = AtomicUsize::new(0);
        MockApi::new(move |request| {
            assert_eq!(request.line, "GET /version");
            if calls.fetch_add(1, Ordering::SeqCst) < down {
                return Some(Answer::failure(503, "ServiceUnavailable"));
            }
            Some(Answer::ok(serde_json::json!({
                "major": "1", "minor": "36", "gitVersion": "v1.36.3", "gitCommit": "",
                "gitTreeState": "clean", "buildDate": "", "goVersion": "", "compiler": "gc",
                "platform": "linux/amd64",
            })))
        })
    }

    fn context(client: Client) -> Context {
        Context::for_tests(client)
    }

    #[tokio::test]
    async fn the_server_version_is_asked_again_until_it_is_known() {
        let (client, api) = flaky_server(1);
        let ctx = context(client);
        assert_eq!(ctx.server_version().await, None, "the API server is away");
        assert_eq!(ctx.server_version().await, Some(semver::Version::new(1, 36, 3)));
        assert_eq!(ctx.server_version().await, Some(semver::Version::new(1, 36, 3)));
        assert_eq!(api.lines().len(), 2, "known once, it is remembered");
    }
}
