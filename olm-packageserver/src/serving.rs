//! Keeping the server's TLS current while it runs, without a restart.
//!
//! Each replica watches the serving certificate's Secret and the API server's
//! `kube-system/extension-apiserver-authentication` ConfigMap. When either
//! changes (another replica renewed the certificate; the cluster rotated its
//! request-header CA or allowed names), it builds a new TLS configuration and
//! hands it to the server, whose next connections use it (open ones finish
//! with the old). When its certificate is due ([`super::renewal`]), a replica
//! renews it in the Secret; the replicas that lose the race read the winner's.
//! Whenever the CA bundle changes, each replica applies it as the APIService's
//! `caBundle` (identically), so the API server trusts both the old and the new
//! CA while replicas switch.

use std::{sync::Arc, time::Duration};

use futures::{Stream, StreamExt};
use k8s_openapi::{
    NamespaceResourceScope,
    api::core::v1::{ConfigMap, Secret},
};
use kube::{
    Api, Client, Resource,
    runtime::{WatchStreamExt, watcher},
};
use rustls::ServerConfig;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use tokio::{sync::watch, time::Instant};

use super::{
    config::Config,
    registration::{StartError, register},
    renewal::{self, Renewal},
    tls::{self, FrontProxy, ServingCert, TlsError},
};

/// How soon a failed renewal or registration is tried again.
const RETRY: Duration = Duration::from_secs(10);

/// What the server accepts connections with.
#[derive(Debug)]
pub struct Serving {
    /// The TLS configuration: certificate and client verifier.
    pub tls: Arc<ServerConfig>,
    /// The names the front proxy's certificates may carry (empty: any).
    pub allowed_names: Vec<String>,
}

impl Serving {
    /// Serves `cert` to callers verified against `front_proxy`.
    pub fn new(cert: &ServingCert, front_proxy: &FrontProxy) -> Result<Self, TlsError> {
        Ok(Serving {
            tls: Arc::new(tls::server_config(cert, front_proxy)?),
            allowed_names: front_proxy.allowed_names.clone(),
        })
    }
}

/// The certificate and front proxy settings in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    /// The serving certificate.
    pub cert: ServingCert,
    /// The front proxy's CA and names.
    pub front_proxy: FrontProxy,
}

/// The object `namespace/name` of kind `K` each time it is written.
fn watch_one<K>(client: &Client, namespace: &str, name: &str) -> impl Stream<Item = K> + Send + use<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let what = format!("{namespace}/{name}");
    watcher(
        api,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
    .applied_objects()
    .filter_map(move |event| {
        let object = event
            .inspect_err(
                |e| tracing::warn!(object = %what, error = %e, "package server: watch failed; retrying"),
            )
            .ok();
        std::future::ready(object)
    })
}

/// When `cert` is next due: now when it is already.
fn due_at(cert: &ServingCert, lifetime: Duration) -> Instant {
    let now = OffsetDateTime::now_utc();
    match tls::renewal_of(cert, now, lifetime) {
        Renewal::Keep { until } => Instant::now() + renewal::until(now, until),
        Renewal::Leaf | Renewal::CaAndLeaf => Instant::now(),
    }
}

/// Keeps `current` (registered already when `config.register`) up to date and
/// publishes each change on `serving`; never returns.
pub async fn keep_current(
    client: Client,
    config: Config,
    mut current: Current,
    serving: watch::Sender<Arc<Serving>>,
) {
    let secrets = watch_one::<Secret>(&client, &config.namespace, &config.secret);
    let auth = watch_one::<ConfigMap>(
        &client,
        tls::AUTHENTICATION_NAMESPACE,
        tls::AUTHENTICATION_CONFIGMAP,
    );
    let (mut secrets, mut auth) = (std::pin::pin!(secrets), std::pin::pin!(auth));
    let mut registered = current.cert.ca_pem.clone();
    let mut retry_at: Option<Instant> = None;
    loop {
        let wake = retry_at.unwrap_or_else(|| due_at(&current.cert, config.cert_lifetime));
        let mut next = current.clone();
        tokio::select! {
            Some(secret) = secrets.next() => {
                if let Some(cert) = tls::secret_cert(&secret) {
                    next.cert = cert;
                }
            }
            Some(map) = auth.next() => match tls::front_proxy_of(&map) {
                Ok(front_proxy) => next.front_proxy = front_proxy,
                Err(e) => tracing::warn!(error = %e, "package server: keeping the request-header CA it has"),
            },
            () = tokio::time::sleep_until(wake) => {
                retry_at = None;
                match renew(&client, &config).await {
                    Ok(cert) => next.cert = cert,
                    Err(e) => {
                        tracing::warn!(error = %e, source = ?std::error::Error::source(&e), "package server: cannot renew its certificate; retrying in 10s");
                        retry_at = Some(Instant::now() + RETRY);
                    }
                }
            }
        }
        if next != current {
            publish(&serving, &current, &next);
            current = next;
        }
        if config.register && registered != current.cert.ca_pem {
            match register(&client, &config, &current.cert.ca_pem).await {
                Ok(()) => registered = current.cert.ca_pem.clone(),
                Err(e) => {
                    tracing::warn!(error = %e, source = ?std::error::Error::source(&e), "package server: retrying in 10s");
                    retry_at = Some(Instant::now() + RETRY);
                }
            }
        }
    }
}

/// Reads the Secret, renewing the certificate first if it is due.
async fn renew(client: &Client, config: &Config) -> Result<ServingCert, StartError> {
    let hosts = tls::service_hosts(&config.service, &config.namespace);
    let now = OffsetDateTime::now_utc();
    Ok(tls::serving_cert(
        client,
        &config.namespace,
        &config.secret,
        &hosts,
        now,
        config.cert_lifetime,
    )
    .await?)
}

/// Hands `next` to the server (or keeps `current` when `next` is unusable).
fn publish(serving: &watch::Sender<Arc<Serving>>, current: &Current, next: &Current) {
    match Serving::new(&next.cert, &next.front_proxy) {
        Ok(new) => {
            if next.cert != current.cert {
                tracing::info!("package server: serving its renewed certificate");
            }
            if next.front_proxy != current.front_proxy {
                tracing::info!(allowed_names = ?next.front_proxy.allowed_names, "package server: verifying the front proxy with the request-header CA it read again");
            }
            serving.send_replace(Arc::new(new));
        }
        Err(e) => {
            tracing::error!(error = %e, source = ?std::error::Error::source(&e), "package server: cannot use the new certificate or request-header CA; keeping the current ones");
        }
    }
}
