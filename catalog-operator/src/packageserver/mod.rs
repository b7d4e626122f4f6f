//! The `packages.operators.coreos.com/v1` PackageManifest API, as OLM's
//! packageserver serves it, served by catalog-operator itself from the catalogs
//! it already holds (no second copy, no second process).
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
//! - [`describe`]: the channel heads' CSV descriptions and icons, kept with catalog
//!   content only while this API is served.
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
pub mod describe;
pub mod icon;
pub mod manifest;
pub mod plan;
pub mod renewal;
pub mod selector;
pub mod server;
pub mod serving;
pub mod tls;
pub mod view;

use std::{net::SocketAddr, sync::Arc, time::Duration};

use k8s_openapi::{
    ByteString,
    kube_aggregator::pkg::apis::apiregistration::v1::{APIService, APIServiceSpec, ServiceReference},
};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams},
    runtime::reflector::Store,
};
use olm_api::{
    packages,
    v1alpha1::{CatalogSource, ClusterServiceVersion, Subscription},
};
use olm_runtime::apply::FIELD_MANAGER_CATALOG;
use serving::{Current, Serving};

use crate::catalogs::CatalogStore;

/// How the package server is run (`catalog-operator run --package-server-address ...`).
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct PackageServerArgs {
    /// Serve the PackageManifest API on this address (e.g. `0.0.0.0:5443`);
    /// not served when unset.
    #[arg(long, env = "OLM_PACKAGE_SERVER_ADDRESS")]
    pub package_server_address: Option<SocketAddr>,
    /// The Service the APIService names (its DNS names are in the certificate).
    #[arg(long, default_value = "packageserver")]
    pub package_server_service: String,
    /// The namespace of that Service and of the certificate's Secret.
    #[arg(long, env = "POD_NAMESPACE", default_value = "olm")]
    pub package_server_namespace: String,
    /// The Service port the APIService names [default: the port served on].
    #[arg(long)]
    pub package_server_service_port: Option<u16>,
    /// The Secret holding the serving certificate (made when absent).
    #[arg(long, default_value = "packageserver-serving-cert")]
    pub package_server_secret: String,
    /// Apply the APIService `v1.packages.operators.coreos.com` with the certificate's CA.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub package_server_register: bool,
    /// How long a serving certificate is valid (renewed at two thirds of it;
    /// its CA lives ten times longer). Short values are for tests.
    #[arg(long, default_value = "8760h", value_parser = olm_runtime::leader::parse_duration, hide = true)]
    pub package_server_cert_lifetime: Duration,
}

/// The package server's settings, once enabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where to serve.
    pub address: SocketAddr,
    /// The Service the APIService names.
    pub service: String,
    /// Its namespace, and the Secret's.
    pub namespace: String,
    /// The Service's port.
    pub service_port: u16,
    /// The certificate's Secret.
    pub secret: String,
    /// Whether to apply the APIService.
    pub register: bool,
    /// How long a serving certificate is valid.
    pub cert_lifetime: Duration,
}

impl PackageServerArgs {
    /// The settings, when the server is enabled.
    pub fn config(&self) -> Option<Config> {
        let address = self.package_server_address?;
        Some(Config {
            address,
            service: self.package_server_service.clone(),
            namespace: self.package_server_namespace.clone(),
            service_port: self.package_server_service_port.unwrap_or(address.port()),
            secret: self.package_server_secret.clone(),
            register: self.package_server_register,
            cert_lifetime: self.package_server_cert_lifetime,
        })
    }
}

/// Why the server could not start (it tries again).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// TLS could not be set up.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The APIService could not be applied.
    #[error(
        "cannot apply APIService {}: check catalog-operator's RBAC",
        packages::API_SERVICE
    )]
    Register(#[source] kube::Error),
    /// The address is taken.
    #[error("cannot listen on {address}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The APIService that registers the API, with `ca_pem` as its `caBundle`.
pub fn api_service(config: &Config, ca_pem: &str) -> APIService {
    APIService {
        metadata: ObjectMeta {
            name: Some(packages::API_SERVICE.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(APIServiceSpec {
            group: Some(packages::GROUP.to_owned()),
            version: Some(packages::VERSION.to_owned()),
            group_priority_minimum: 2000,
            version_priority: 15,
            service: Some(ServiceReference {
                name: Some(config.service.clone()),
                namespace: Some(config.namespace.clone()),
                port: Some(i32::from(config.service_port)),
            }),
            ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
            insecure_skip_tls_verify: None,
        }),
        status: None,
    }
}

/// Applies the APIService with `ca_pem` as its `caBundle`.
async fn register(client: &Client, config: &Config, ca_pem: &str) -> Result<(), StartError> {
    Api::<APIService>::all(client.clone())
        .patch(
            packages::API_SERVICE,
            &PatchParams::apply(FIELD_MANAGER_CATALOG).force(),
            &Patch::Apply(&api_service(config, ca_pem)),
        )
        .await
        .map_err(StartError::Register)?;
    Ok(())
}

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
