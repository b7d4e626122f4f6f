//! A client of the operator-registry API: health, a whole catalog, one bundle.

use std::{collections::HashMap, time::Duration};

use futures::TryStreamExt;
use olm_catalog::Catalog;
use tonic::{
    Code,
    transport::{Channel, Endpoint},
};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use super::{
    MAX_MESSAGE_BYTES,
    api::{self, registry_client::RegistryClient as Stub},
    convert,
};

/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request (a whole `ListBundles` stream included) may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Errors of the registry client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The address is not `host:port` or a URL.
    #[error("registry address {address:?} is invalid")]
    Address {
        /// The address.
        address: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// A call failed: the registry is unreachable or answered with an error.
    #[error("{call} on registry {address} failed")]
    Call {
        /// The call, e.g. `ListBundles`.
        call: &'static str,
        /// The address.
        address: String,
        /// The gRPC status.
        #[source]
        source: Box<tonic::Status>,
    },
    /// The registry reports itself as not serving.
    #[error("registry {address} reports {status:?}")]
    NotServing {
        /// The address.
        address: String,
        /// What it reported.
        status: ServingStatus,
    },
}

impl ClientError {
    /// Whether the registry could not be reached at all (as opposed to answering
    /// with an error).
    pub fn is_unreachable(&self) -> bool {
        match self {
            ClientError::Call { source, .. } => {
                matches!(
                    source.code(),
                    Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled
                )
            }
            ClientError::Address { .. } | ClientError::NotServing { .. } => false,
        }
    }
}

/// A catalog loaded from a registry, with what had to be left out of it.
#[derive(Debug, Clone)]
pub struct LoadedCatalog {
    /// The catalog, with every bundle's manifests the registry listed.
    pub catalog: Catalog,
    /// Properties, bundles or manifests left out, in words.
    pub problems: Vec<String>,
    /// The CSV (JSON) of each channel head, by package and CSV name, when the
    /// load left the manifests out ([`RegistryClient::load_listing`]).
    pub head_csvs: HashMap<(String, String), String>,
}

/// Whether a listing load keeps the channel heads' CSVs (`csvJson`) apart, for
/// what PackageManifests show of them ([`LoadedCatalog::head_csvs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeadCsvJson {
    /// Keep them, reading with `GetBundleForChannel` those the listing leaves out.
    Keep,
    /// Keep and read none.
    #[default]
    Skip,
}

/// Whether a load keeps the manifests the registry lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Manifests {
    Keep,
    Drop,
}

/// A client of one registry. The connection is made lazily and re-made after a
/// failure, so one client can be kept for the life of a CatalogSource.
#[derive(Clone, Debug)]
pub struct RegistryClient {
    address: String,
    registry: Stub<Channel>,
    health: HealthClient<Channel>,
}

impl RegistryClient {
    /// A client for `address`: `host:port` (OLM's `spec.address`) or an `http://` URL.
    pub fn new(address: &str) -> Result<Self, ClientError> {
        let uri = if address.contains("://") {
            address.to_owned()
        } else {
            format!("http://{address}")
        };
        let endpoint = Endpoint::from_shared(uri)
            .map_err(|source| ClientError::Address {
                address: address.to_owned(),
                source,
            })?
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .tcp_nodelay(true);
        let channel = endpoint.connect_lazy();
        Ok(RegistryClient {
            address: address.to_owned(),
            registry: Stub::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            health: HealthClient::new(channel),
        })
    }

    /// The address this client talks to.
    pub fn address(&self) -> &str {
        &self.address
    }

    fn call_error(&self, call: &'static str) -> impl FnOnce(tonic::Status) -> ClientError + '_ {
        move |status| ClientError::Call {
            call,
            address: self.address.clone(),
            source: Box::new(status),
        }
    }

    /// Asks `grpc.health.v1` whether the registry serves. A registry without the
    /// health service counts as serving if it answers `ListPackages`.
    pub async fn check_health(&mut self) -> Result<(), ClientError> {
        let request = HealthCheckRequest {
            service: String::new(),
        };
        match self.health.check(request).await {
            Ok(response) => match response.into_inner().status() {
                ServingStatus::Serving => Ok(()),
                status => Err(ClientError::NotServing {
                    address: self.address.clone(),
                    status,
                }),
            },
            Err(status) if status.code() == Code::Unimplemented => {
                let mut packages = self
                    .registry
                    .list_packages(api::ListPackageRequest {})
                    .await
                    .map_err(self.call_error("ListPackages"))?
                    .into_inner();
                packages
                    .message()
                    .await
                    .map_err(self.call_error("ListPackages"))?;
                Ok(())
            }
            Err(status) => Err(self.call_error("Check")(status)),
        }
    }

    /// Loads the whole catalog: `ListPackages`, `GetPackage` for each, `ListBundles`,
    /// with every manifest the registry lists.
    pub async fn load(&mut self) -> Result<LoadedCatalog, ClientError> {
        self.load_with(Manifests::Keep, HeadCsvJson::Skip).await
    }

    /// Loads the catalog as [`RegistryClient::load`] does, but drops each bundle's
    /// manifests as its message arrives, so that a registry that lists them
    /// (bundles without an image) never has them all in memory here at once:
    /// they are read again with `GetBundle` when a plan needs them.
    ///
    /// With [`HeadCsvJson::Keep`], the channel heads' CSVs (`csvJson`), which
    /// PackageManifests show, are kept apart ([`LoadedCatalog::head_csvs`]): as
    /// listed, or, where the listing leaves them out (OLM's registry does for
    /// bundles with an image), read with `GetBundleForChannel`, as OLM's
    /// package server does. With [`HeadCsvJson::Skip`] none is kept or read.
    pub async fn load_listing(&mut self, head_csv_json: HeadCsvJson) -> Result<LoadedCatalog, ClientError> {
        self.load_with(Manifests::Drop, head_csv_json).await
    }

    async fn load_with(
        &mut self,
        manifests: Manifests,
        head_csv_json: HeadCsvJson,
    ) -> Result<LoadedCatalog, ClientError> {
        let names: Vec<api::PackageName> = self
            .registry
            .list_packages(api::ListPackageRequest {})
            .await
            .map_err(self.call_error("ListPackages"))?
            .into_inner()
            .try_collect()
            .await
            .map_err(self.call_error("ListPackages"))?;
        let mut packages = Vec::with_capacity(names.len());
        for name in names {
            let package = self
                .registry
                .get_package(api::GetPackageRequest { name: name.name })
                .await
                .map_err(self.call_error("GetPackage"))?
                .into_inner();
            packages.push(package);
        }
        // Each channel head, by package and CSV name, with its channel: only
        // when the heads are described.
        let heads: HashMap<(String, String), String> = packages
            .iter()
            .filter(|_| head_csv_json == HeadCsvJson::Keep)
            .flat_map(|package| {
                package.channels.iter().map(|channel| {
                    (
                        (package.name.clone(), channel.csv_name.clone()),
                        channel.name.clone(),
                    )
                })
            })
            .collect();
        let mut head_csvs = HashMap::new();
        let bundles: Vec<api::Bundle> = self
            .registry
            .list_bundles(api::ListBundlesRequest {})
            .await
            .map_err(self.call_error("ListBundles"))?
            .into_inner()
            .map_ok(|mut bundle| {
                if manifests == Manifests::Drop {
                    let key = (bundle.package_name.clone(), bundle.csv_name.clone());
                    let csv = std::mem::take(&mut bundle.csv_json);
                    if heads.contains_key(&key) && !csv.is_empty() {
                        head_csvs.insert(key, csv);
                    }
                    bundle.object = Vec::new();
                }
                bundle
            })
            .try_collect()
            .await
            .map_err(self.call_error("ListBundles"))?;
        let mut problems = Vec::new();
        if manifests == Manifests::Drop {
            problems.extend(self.read_head_csvs(&heads, &mut head_csvs).await);
        }
        let (catalog, converted) = convert::catalog_from_api(packages, bundles);
        problems.extend(converted);
        Ok(LoadedCatalog {
            catalog,
            problems,
            head_csvs,
        })
    }

    /// Reads with `GetBundleForChannel` the CSV of each channel head of `heads`
    /// that the listing left out of `head_csvs`. A head that cannot be read only
    /// lacks its description: said in the returned problems.
    async fn read_head_csvs(
        &mut self,
        heads: &HashMap<(String, String), String>,
        head_csvs: &mut HashMap<(String, String), String>,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        for ((package, name), channel) in heads {
            let key = (package.clone(), name.clone());
            if head_csvs.contains_key(&key) {
                continue;
            }
            let request = api::GetBundleInChannelRequest {
                pkg_name: package.clone(),
                channel_name: channel.clone(),
            };
            match self.registry.get_bundle_for_channel(request).await {
                Ok(head) => {
                    let head = head.into_inner();
                    if !head.csv_json.is_empty() {
                        head_csvs.insert(key, head.csv_json);
                    }
                }
                Err(status) => problems.push(format!(
                    "bundle {name}: no description for PackageManifests, GetBundleForChannel {package}/{channel} failed: {}",
                    status.message()
                )),
            }
        }
        problems
    }

    /// One bundle with its manifests (`GetBundle`), as a catalog bundle.
    pub async fn bundle(
        &mut self,
        package: &str,
        channel: &str,
        name: &str,
    ) -> Result<(olm_catalog::Bundle, Vec<String>), ClientError> {
        let message = self
            .registry
            .get_bundle(api::GetBundleRequest {
                pkg_name: package.to_owned(),
                channel_name: channel.to_owned(),
                csv_name: name.to_owned(),
            })
            .await
            .map_err(self.call_error("GetBundle"))?
            .into_inner();
        Ok(convert::bundle_from_api(message))
    }

    /// The raw `api.Registry` stub, for the less common calls.
    pub fn stub(&mut self) -> &mut Stub<Channel> {
        &mut self.registry
    }
}
