//! Registering the API with the API server: the APIService
//! `v1.packages.operators.coreos.com`, and why the server could not start.

use std::net::SocketAddr;

use k8s_openapi::{
    ByteString,
    kube_aggregator::pkg::apis::apiregistration::v1::{APIService, APIServiceSpec, ServiceReference},
};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams},
};
use olm_api::packages;
use olm_runtime::apply::FIELD_MANAGER_CATALOG;

use super::{config::Config, tls};

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
pub(super) async fn register(client: &Client, config: &Config, ca_pem: &str) -> Result<(), StartError> {
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
