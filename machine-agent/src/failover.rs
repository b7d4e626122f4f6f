//! A kube client that fails over between API server endpoints.
//!
//! [`Failover`] is a tower service in front of one ordinary kube client per
//! endpoint (each built by the runtime's `instrumented`, so requests are counted as
//! in every binary). Each request goes to the endpoint in use; when it fails at
//! the transport (connection refused, reset, timed out), the request's error is
//! returned as usual and the endpoint list moves to the next endpoint, so the
//! caller's retry (every watch and loop of the agent retries) reaches a live
//! server. HTTP answers, errors included, are the server's and do not move it.
//!
//! One client per endpoint, rather than rewriting the base URI of one client,
//! keeps each connection pool bound to its server, and lets kube's own TLS and
//! authentication set-up stay as it is.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use futures::future::BoxFuture;
use http::{Request, Response};
use kube::client::Body;
use olm_runtime::client::RequestMetrics;

use crate::{endpoints::EndpointList, state};

/// How long a connection attempt to one endpoint may take before the agent moves on.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A failover client over the known endpoints; cheap to clone (one shared state).
#[derive(Clone)]
pub struct Failover {
    shared: Arc<Shared>,
}

struct Shared {
    template: kube::Config,
    metrics: RequestMetrics,
    save_to: PathBuf,
    inner: Mutex<Inner>,
}

struct Inner {
    list: EndpointList,
    clients: HashMap<String, kube::Client>,
}

impl Failover {
    /// Fails over between `list`'s endpoints with `template`'s credentials and TLS
    /// settings, saving the list to `save_to` whenever it changes.
    pub fn new(
        mut template: kube::Config,
        list: EndpointList,
        metrics: RequestMetrics,
        save_to: PathBuf,
    ) -> Self {
        template.connect_timeout = Some(CONNECT_TIMEOUT);
        let failover = Failover {
            shared: Arc::new(Shared {
                template,
                metrics,
                save_to,
                inner: Mutex::new(Inner {
                    list,
                    clients: HashMap::new(),
                }),
            }),
        };
        failover.save(&failover.list());
        failover
    }

    /// A kube client whose every request goes through this failover.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.clone(), self.shared.template.default_namespace.clone())
    }

    /// The endpoints and the one in use.
    pub fn list(&self) -> EndpointList {
        self.lock().list.clone()
    }

    /// Adds learned endpoints; saves the list when it grew.
    pub fn learn(&self, learned: &[String]) {
        let changed = {
            let mut inner = self.lock();
            inner
                .list
                .merge(learned.iter().map(String::as_str))
                .then(|| inner.list.clone())
        };
        if let Some(list) = changed {
            tracing::info!(endpoints = ?list.endpoints, "learned API server endpoints");
            self.save(&list);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the list whole: keep using it.
        self.shared
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn pick(&self) -> Result<(String, kube::Client), kube::Error> {
        let mut inner = self.lock();
        let endpoint = inner.list.current.clone();
        if let Some(client) = inner.clients.get(&endpoint) {
            return Ok((endpoint, client.clone()));
        }
        let mut config = self.shared.template.clone();
        config.cluster_url = endpoint
            .parse()
            .map_err(|error: http::uri::InvalidUri| kube::Error::Service(Box::new(error)))?;
        let client = olm_runtime::client::instrumented(config, &self.shared.metrics)?;
        inner.clients.insert(endpoint.clone(), client.clone());
        Ok((endpoint, client))
    }

    fn failed(&self, endpoint: &str, error: &kube::Error) {
        let moved = {
            let mut inner = self.lock();
            inner
                .list
                .fail(endpoint)
                .map(str::to_owned)
                .map(|to| (to, inner.list.clone()))
        };
        if let Some((to, list)) = moved {
            tracing::warn!(from = endpoint, to, %error, "API server endpoint failed: moving to the next");
            self.save(&list);
        }
    }

    fn save(&self, list: &EndpointList) {
        if let Err(error) = state::write_json(&self.shared.save_to, list) {
            tracing::warn!(%error, "cannot save the API server endpoints");
        }
    }
}

impl tower::Service<Request<Body>> for Failover {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let (endpoint, client) = this.pick()?;
            match client.send(request).await {
                Ok(response) => Ok(response),
                Err(error) => {
                    this.failed(&endpoint, &error);
                    Err(error)
                }
            }
        })
    }
}
