//! olm-packageserver: the `packages.operators.coreos.com/v1` PackageManifest
//! API, as OLM's packageserver serves it, served by catalog-operator itself from
//! the catalogs it already holds (no second copy, no second process): its `run`
//! command starts [`run`] with the store it fills (`olm-catalog-store`).
//!
//! The API server reaches it through the APIService
//! `v1.packages.operators.coreos.com` (aggregation): it authenticates and
//! authorizes the user, then forwards the request with its front-proxy client
//! certificate, which this server verifies against the request-header CA of
//! `kube-system/extension-apiserver-authentication`, read again whenever the
//! cluster changes it. The serving certificate is shared by the replicas
//! through a Secret and renewed before it expires; its CA bundle is the
//! APIService's `caBundle`, which every replica applies (identically).
//!
//! - [`describe`] ([`olm_catalog_store::channel_heads`]): the channel heads' CSV descriptions
//!   and icons, kept with catalog content only while this API is served.
//! - [`config`]: the flags and settings; [`registration`]: the APIService.
//! - [`manifest`]: catalog content → PackageManifests (pure).
//! - [`view`]: the PackageManifests of a namespace, from the store.
//! - [`selector`]: label and field selectors.
//! - [`plan`]: `packagemanifests/<package>/plan`, a Subscription's dry run (pure).
//! - [`api`]: discovery, list, get, Table output, errors (pure).
//! - [`icon`]: the `packagemanifests/icon` subresource (pure).
//! - [`tls`]: certificates and the front proxy's CA.
//! - [`renewal`]: when the certificate is renewed, which CAs are trusted (pure).
//! - [`serving`]: the certificate and request-header CA kept current at runtime.
//! - [`server`]: HTTPS, authentication, watch streams.

pub mod api;
mod config;
pub mod icon;
pub mod manifest;
pub mod plan;
mod registration;
pub mod renewal;
pub mod selector;
pub mod server;
pub mod serving;
pub mod tls;
pub mod view;

use std::{sync::Arc, time::Duration};

pub use config::{Config, PackageServerArgs};
use kube::{Client, runtime::reflector::Store};
use olm_api::v1alpha1::{CatalogSource, ClusterServiceVersion, Subscription};
use registration::register;
pub use registration::{StartError, api_service};
use serving::{Current, Serving};

use olm_catalog_store::catalogs::CatalogStore;
/// The channel heads' descriptions, under the name this API's users know.
pub use olm_catalog_store::channel_heads as describe;

async fn start(
    client: &Client,
    config: &Config,
) -> Result<(tokio::net::TcpListener, Serving, Current), StartError> {
    let hosts = tls::service_hosts(&config.service, &config.namespace);
    let now = time::OffsetDateTime::now_utc();
    let cert = tls::serving_cert(
        client,
        &config.namespace,
        &config.secret,
        &hosts,
        now,
        config.cert_lifetime,
    )
    .await?;
    let front_proxy = tls::front_proxy(client).await?;
    let serving = Serving::new(&cert, &front_proxy)?;
    let listener = server::bind(config.address)
        .await
        .map_err(|source| StartError::Bind {
            address: config.address,
            source,
        })?;
    if config.register {
        register(client, config, &cert.ca_pem).await?;
    }
    Ok((listener, serving, Current { cert, front_proxy }))
}

/// The stores the package server reads: catalogs and CatalogSources for
/// PackageManifests, Subscriptions and CSVs too for plans.
pub struct Sources {
    /// Catalog content.
    pub catalogs: CatalogStore,
    /// The CatalogSources.
    pub sources: Store<CatalogSource>,
    /// The Subscriptions.
    pub subscriptions: Store<Subscription>,
    /// The CSVs, copies left out.
    pub csvs: Store<ClusterServiceVersion>,
}

/// Sets up TLS (retrying every 10 seconds until it can), registers the API and
/// serves it, keeping its certificate and the front proxy's CA current; never returns.
pub async fn run(client: Client, config: Config, stores: Sources, global_namespace: String) {
    let (listener, serving, current) = loop {
        match start(&client, &config).await {
            Ok(started) => break started,
            Err(e) => {
                tracing::warn!(error = %e, source = ?std::error::Error::source(&e), "package server cannot start yet; retrying in 10s");
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        }
    };
    tracing::info!(address = %config.address, "package server serving packages.operators.coreos.com/v1");
    let packages = view::Packages {
        catalogs: stores.catalogs,
        sources: stores.sources,
        global_namespace,
        subscriptions: stores.subscriptions,
        csvs: stores.csvs,
    };
    let (sender, receiver) = tokio::sync::watch::channel(Arc::new(serving));
    tokio::join!(
        server::serve(listener, receiver, packages),
        serving::keep_current(client, config, current, sender),
    );
}

#[cfg(test)]
mod tests;
