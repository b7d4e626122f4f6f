//! `catalog-operator serve`: the operator-registry API over catalog content read
//! from disk, answering as `opm serve` does.
//!
//! [`RegistryIndex`] indexes a [`Catalog`] once; every query is then a lookup.
//! [`serve`] runs it on a listener beside `grpc.health.v1`, which reports
//! `SERVING` for `""` and `api.Registry` as opm's health server does.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, RwLock},
};

use futures::Stream;
use olm_catalog::{Catalog, ChannelEntry};
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};

use super::{
    MAX_MESSAGE_BYTES,
    api::{
        self,
        registry_server::{Registry, RegistryServer},
    },
    convert::{self, BundleContent},
};

/// Errors of [`serve`].
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("the registry server failed")]
    Serve(#[source] tonic::transport::Error),
}

struct ChannelIndex {
    /// Index into `catalog.channels`.
    channel: usize,
    /// The head: the entry that no other entry replaces or skips.
    head: Option<String>,
}

struct PackageIndex {
    /// Index into `catalog.packages`.
    package: usize,
    channels: BTreeMap<String, ChannelIndex>,
}

/// A catalog indexed for the queries of the registry API.
pub struct RegistryIndex {
    catalog: Catalog,
    packages: BTreeMap<String, PackageIndex>,
    /// `(package, bundle)` → index into `catalog.bundles` and `contents`.
    bundles: HashMap<(String, String), usize>,
    contents: Vec<BundleContent>,
    problems: Vec<String>,
}

type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn stream<T: Send + 'static>(items: Vec<T>) -> Stream_<T> {
    Box::pin(futures::stream::iter(items.into_iter().map(Ok)))
}

impl RegistryIndex {
    /// Indexes `catalog`. Bundles whose manifests do not decode are served without
    /// them; [`RegistryIndex::problems`] says which.
    pub fn new(catalog: Catalog) -> Self {
        let mut problems = Vec::new();
        let mut bundles = HashMap::new();
        let mut contents = Vec::with_capacity(catalog.bundles.len());
        for (i, bundle) in catalog.bundles.iter().enumerate() {
            let (content, mut more) = convert::bundle_content(bundle);
            problems.append(&mut more);
            contents.push(content);
            bundles.insert((bundle.package.clone(), bundle.name.clone()), i);
        }
        let mut packages = BTreeMap::new();
        for (p, package) in catalog.packages.iter().enumerate() {
            let channels = catalog
                .channels
                .iter()
                .enumerate()
                .filter(|(_, c)| c.package == package.name)
                .map(|(c, channel)| {
                    let head = head(&catalog, &package.name, &channel.entries);
                    (channel.name.clone(), ChannelIndex { channel: c, head })
                })
                .collect();
            packages.insert(package.name.clone(), PackageIndex { package: p, channels });
        }
        RegistryIndex {
            catalog,
            packages,
            bundles,
            contents,
            problems,
        }
    }

    /// Loads the catalog at `path` in any layout [`olm_catalog::source::load`] reads.
    pub fn load(path: &std::path::Path) -> Result<(Self, Vec<String>), olm_catalog::source::SourceError> {
        let (catalog, warnings) = olm_catalog::source::load(path)?;
        Ok((Self::new(catalog), warnings))
    }

    /// Manifests that could not be decoded, in words.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// How many packages and bundles are served.
    pub fn counts(&self) -> (usize, usize) {
        (self.packages.len(), self.catalog.bundles.len())
    }

    fn deprecation(&self, package: &str, schema: &str, name: Option<&str>) -> Option<String> {
        self.catalog
            .deprecation_message(package, schema, name)
            .map(str::to_owned)
    }

    fn package(&self, name: &str) -> Result<&PackageIndex, Status> {
        self.packages
            .get(name)
            .ok_or_else(|| Status::not_found(format!("package {name:?} not found")))
    }

    fn channel(&self, package: &str, channel: &str) -> Result<&ChannelIndex, Status> {
        self.package(package)?
            .channels
            .get(channel)
            .ok_or_else(|| Status::not_found(format!("package {package:?}, channel {channel:?} not found")))
    }

    fn entries(&self, channel: &ChannelIndex) -> &[ChannelEntry] {
        &self.catalog.channels[channel.channel].entries
    }

    /// The message of bundle `name` in `channel` of `package`.
    fn bundle_message(
        &self,
        package: &str,
        channel: &str,
        name: &str,
        with_manifests: bool,
    ) -> Result<api::Bundle, Status> {
        let index = self.channel(package, channel)?;
        let entry = self
            .entries(index)
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| {
                Status::not_found(format!(
                    "package {package:?}, channel {channel:?}: bundle {name:?} not found"
                ))
            })?;
        self.message(package, channel, entry, with_manifests)
    }

    fn message(
        &self,
        package: &str,
        channel: &str,
        entry: &ChannelEntry,
        with_manifests: bool,
    ) -> Result<api::Bundle, Status> {
        let &b = self
            .bundles
            .get(&(package.to_owned(), entry.name.clone()))
            .ok_or_else(|| {
                Status::not_found(format!(
                    "package {package:?}: channel {channel:?} names bundle {:?}, which the catalog lacks",
                    entry.name
                ))
            })?;
        Ok(convert::api_bundle(
            &self.catalog.bundles[b],
            &self.contents[b],
            channel,
            Some(entry),
            self.deprecation(package, olm_catalog::model::schema::BUNDLE, Some(&entry.name)),
            with_manifests,
        ))
    }

    fn content(&self, package: &str, bundle: &str) -> Option<&BundleContent> {
        self.bundles
            .get(&(package.to_owned(), bundle.to_owned()))
            .map(|&b| &self.contents[b])
    }

    /// Every (package, channel, entry), packages and channels by name, entries in
    /// catalog order.
    fn all_entries(&self) -> impl Iterator<Item = (&str, &str, &ChannelEntry)> + '_ {
        self.packages.iter().flat_map(move |(package, index)| {
            index.channels.iter().flat_map(move |(channel, c)| {
                self.entries(c)
                    .iter()
                    .map(move |entry| (package.as_str(), channel.as_str(), entry))
            })
        })
    }

    /// `ListPackages`: package names, sorted.
    pub fn list_packages(&self) -> Vec<api::PackageName> {
        self.packages
            .keys()
            .map(|name| api::PackageName { name: name.clone() })
            .collect()
    }

    /// `GetPackage`: the package with each channel's head.
    pub fn get_package(&self, name: &str) -> Result<api::Package, Status> {
        let index = self.package(name)?;
        let package = &self.catalog.packages[index.package];
        Ok(api::Package {
            name: package.name.clone(),
            channels: index
                .channels
                .iter()
                .map(|(channel, c)| api::Channel {
                    name: channel.clone(),
                    csv_name: c.head.clone().unwrap_or_default(),
                    deprecation: self
                        .deprecation(name, olm_catalog::model::schema::CHANNEL, Some(channel))
                        .map(|message| api::Deprecation { message }),
                })
                .collect(),
            default_channel_name: package.default_channel.clone().unwrap_or_default(),
            deprecation: self
                .deprecation(name, olm_catalog::model::schema::PACKAGE, None)
                .map(|message| api::Deprecation { message }),
        })
    }

    /// `GetBundle`: one bundle of a channel, with its manifests.
    pub fn get_bundle(&self, package: &str, channel: &str, name: &str) -> Result<api::Bundle, Status> {
        self.bundle_message(package, channel, name, true)
    }

    /// `GetBundleForChannel`: the head of a channel, with its manifests.
    pub fn get_bundle_for_channel(&self, package: &str, channel: &str) -> Result<api::Bundle, Status> {
        let index = self.channel(package, channel)?;
        let head = index.head.as_deref().ok_or_else(|| {
            Status::not_found(format!("package {package:?}, channel {channel:?} has no head"))
        })?;
        self.bundle_message(package, channel, head, true)
    }

    /// `GetBundleThatReplaces`: the bundle of a channel that replaces or skips `name`.
    pub fn get_bundle_that_replaces(
        &self,
        name: &str,
        package: &str,
        channel: &str,
    ) -> Result<api::Bundle, Status> {
        let index = self.channel(package, channel)?;
        let entry = self
            .entries(index)
            .iter()
            .find(|e| e.replaces.as_deref() == Some(name) || e.skips.iter().any(|s| s == name))
            .ok_or_else(|| {
                Status::not_found(format!(
                    "no bundle replaces {name:?} in package {package:?}, channel {channel:?}"
                ))
            })?;
        self.message(package, channel, entry, true)
    }

    /// `GetChannelEntriesThatReplace`: every entry, in every channel, that replaces
    /// or skips `name`.
    pub fn get_channel_entries_that_replace(&self, name: &str) -> Result<Vec<api::ChannelEntry>, Status> {
        let mut out = Vec::new();
        for (package, channel, entry) in self.all_entries() {
            let replaces = entry.replaces.clone().unwrap_or_default();
            if entry.replaces.as_deref() == Some(name) {
                out.push(channel_entry(package, channel, &entry.name, &replaces));
            }
            if entry.replaces.as_deref() != Some(name) && entry.skips.iter().any(|s| s == name) {
                out.push(channel_entry(package, channel, &entry.name, &replaces));
            }
        }
        if out.is_empty() {
            return Err(Status::not_found(format!("no channel entries replace {name:?}")));
        }
        Ok(out)
    }

    /// `GetChannelEntriesThatProvide`: entries of every bundle that provides the API.
    pub fn get_channel_entries_that_provide(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Vec<api::ChannelEntry>, Status> {
        let mut out = Vec::new();
        for (package, channel, entry) in self.all_entries() {
            if self
                .content(package, &entry.name)
                .is_some_and(|c| c.provides(group, version, kind))
            {
                out.extend(entries_for_bundle(package, channel, entry, None));
            }
        }
        if out.is_empty() {
            return Err(Status::not_found(format!(
                "no channel entries provide {group}/{version}/{kind}"
            )));
        }
        Ok(out)
    }

    /// `GetLatestChannelEntriesThatProvide`: the channel heads that provide the API.
    pub fn get_latest_channel_entries_that_provide(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Vec<api::ChannelEntry>, Status> {
        let mut out = Vec::new();
        for (package, index) in &self.packages {
            for (channel, c) in &index.channels {
                let Some(head) = &c.head else { continue };
                let Some(entry) = self.entries(c).iter().find(|e| &e.name == head) else {
                    continue;
                };
                if self
                    .content(package, head)
                    .is_some_and(|content| content.provides(group, version, kind))
                {
                    let members: HashSet<&str> = self.entries(c).iter().map(|e| e.name.as_str()).collect();
                    out.extend(entries_for_bundle(package, channel, entry, Some(&members)));
                }
            }
        }
        if out.is_empty() {
            return Err(Status::not_found(format!(
                "no channel heads provide {group}/{version}/{kind}"
            )));
        }
        Ok(out)
    }

    /// `GetDefaultBundleThatProvides`: the default channel head of the first package
    /// (by name) whose default channel head provides the API.
    pub fn get_default_bundle_that_provides(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<api::Bundle, Status> {
        for (package, index) in &self.packages {
            let Some(default) = &self.catalog.packages[index.package].default_channel else {
                continue;
            };
            let Some(head) = index.channels.get(default).and_then(|c| c.head.as_deref()) else {
                continue;
            };
            if self
                .content(package, head)
                .is_some_and(|c| c.provides(group, version, kind))
            {
                return self.bundle_message(package, default, head, true);
            }
        }
        Err(Status::not_found(format!(
            "no default channel head provides {group}/{version}/{kind}"
        )))
    }

    /// `ListBundles`: one message per bundle and channel it is in. As with opm, a
    /// bundle that has an image is listed without its manifests (`csvJson` and
    /// `object`): clients fetch those with `GetBundle`.
    pub fn list_bundles(&self) -> Vec<api::Bundle> {
        self.all_entries()
            .filter_map(|(package, channel, entry)| {
                let with_manifests = self
                    .bundles
                    .get(&(package.to_owned(), entry.name.clone()))
                    .is_some_and(|&b| self.catalog.bundles[b].image.is_empty());
                self.message(package, channel, entry, with_manifests).ok()
            })
            .collect()
    }
}

/// The head of a channel: the entry no other entry replaces or skips (the one with
/// the highest version, should there be several).
fn head(catalog: &Catalog, package: &str, entries: &[ChannelEntry]) -> Option<String> {
    let replaced: HashSet<&str> = entries
        .iter()
        .flat_map(|e| e.replaces.iter().chain(&e.skips))
        .map(String::as_str)
        .collect();
    entries
        .iter()
        .filter(|e| !replaced.contains(e.name.as_str()))
        .max_by(|a, b| {
            let version = |name: &str| catalog.bundle(package, name).and_then(|b| b.version().cloned());
            match (version(&a.name), version(&b.name)) {
                (Some(x), Some(y)) => x.cmp_precedence(&y),
                _ => std::cmp::Ordering::Equal,
            }
        })
        .map(|e| e.name.clone())
}

fn channel_entry(package: &str, channel: &str, bundle: &str, replaces: &str) -> api::ChannelEntry {
    api::ChannelEntry {
        package_name: package.to_owned(),
        channel_name: channel.to_owned(),
        bundle_name: bundle.to_owned(),
        replaces: replaces.to_owned(),
    }
}

/// One entry for the bundle's `replaces`, and one per skipped bundle (when that is
/// in the channel, or always when `members` is `None`), as opm lists them.
fn entries_for_bundle(
    package: &str,
    channel: &str,
    entry: &ChannelEntry,
    members: Option<&HashSet<&str>>,
) -> Vec<api::ChannelEntry> {
    let replaces = entry.replaces.as_deref().unwrap_or_default();
    let mut out = vec![channel_entry(package, channel, &entry.name, replaces)];
    for skip in &entry.skips {
        if skip != replaces && members.is_none_or(|m| m.contains(skip.as_str())) {
            out.push(channel_entry(package, channel, &entry.name, skip));
        }
    }
    out
}

/// The gRPC service over an index. Clones share the index, which
/// [`RegistryService::replace`] swaps for new content without a restart.
#[derive(Clone)]
pub struct RegistryService {
    index: Arc<RwLock<Arc<RegistryIndex>>>,
}

impl RegistryService {
    /// Serves `index`.
    pub fn new(index: Arc<RegistryIndex>) -> Self {
        RegistryService {
            index: Arc::new(RwLock::new(index)),
        }
    }

    /// Serves `index` from now on; requests under way finish with the old one.
    pub fn replace(&self, index: Arc<RegistryIndex>) {
        *self
            .index
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = index;
    }

    fn current(&self) -> Arc<RegistryIndex> {
        self.index
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

#[tonic::async_trait]
impl Registry for RegistryService {
    type ListPackagesStream = Stream_<api::PackageName>;
    type GetChannelEntriesThatReplaceStream = Stream_<api::ChannelEntry>;
    type GetChannelEntriesThatProvideStream = Stream_<api::ChannelEntry>;
    type GetLatestChannelEntriesThatProvideStream = Stream_<api::ChannelEntry>;
    type ListBundlesStream = Stream_<api::Bundle>;

    async fn list_packages(
        &self,
        _request: Request<api::ListPackageRequest>,
    ) -> Result<Response<Self::ListPackagesStream>, Status> {
        Ok(Response::new(stream(self.current().list_packages())))
    }

    async fn get_package(
        &self,
        request: Request<api::GetPackageRequest>,
    ) -> Result<Response<api::Package>, Status> {
        self.current()
            .get_package(&request.get_ref().name)
            .map(Response::new)
    }

    async fn get_bundle(
        &self,
        request: Request<api::GetBundleRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let r = request.get_ref();
        self.current()
            .get_bundle(&r.pkg_name, &r.channel_name, &r.csv_name)
            .map(Response::new)
    }

    async fn get_bundle_for_channel(
        &self,
        request: Request<api::GetBundleInChannelRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let r = request.get_ref();
        self.current()
            .get_bundle_for_channel(&r.pkg_name, &r.channel_name)
            .map(Response::new)
    }

    async fn get_channel_entries_that_replace(
        &self,
        request: Request<api::GetAllReplacementsRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatReplaceStream>, Status> {
        let entries = self
            .current()
            .get_channel_entries_that_replace(&request.get_ref().csv_name)?;
        Ok(Response::new(stream(entries)))
    }

    async fn get_bundle_that_replaces(
        &self,
        request: Request<api::GetReplacementRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let r = request.get_ref();
        self.current()
            .get_bundle_that_replaces(&r.csv_name, &r.pkg_name, &r.channel_name)
            .map(Response::new)
    }

    async fn get_channel_entries_that_provide(
        &self,
        request: Request<api::GetAllProvidersRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatProvideStream>, Status> {
        let r = request.get_ref();
        let entries = self
            .current()
            .get_channel_entries_that_provide(&r.group, &r.version, &r.kind)?;
        Ok(Response::new(stream(entries)))
    }

    async fn get_latest_channel_entries_that_provide(
        &self,
        request: Request<api::GetLatestProvidersRequest>,
    ) -> Result<Response<Self::GetLatestChannelEntriesThatProvideStream>, Status> {
        let r = request.get_ref();
        let entries = self
            .current()
            .get_latest_channel_entries_that_provide(&r.group, &r.version, &r.kind)?;
        Ok(Response::new(stream(entries)))
    }

    async fn get_default_bundle_that_provides(
        &self,
        request: Request<api::GetDefaultProviderRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let r = request.get_ref();
        self.current()
            .get_default_bundle_that_provides(&r.group, &r.version, &r.kind)
            .map(Response::new)
    }

    async fn list_bundles(
        &self,
        _request: Request<api::ListBundlesRequest>,
    ) -> Result<Response<Self::ListBundlesStream>, Status> {
        Ok(Response::new(stream(self.current().list_bundles())))
    }
}

/// Binds `addr` (so that a taken port fails at once).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// Serves `index` on `listener` until `shutdown` resolves, with `grpc.health.v1`
/// reporting `SERVING`.
pub async fn serve(
    listener: TcpListener,
    index: Arc<RegistryIndex>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    serve_service(listener, RegistryService::new(index), shutdown).await
}

/// [`serve`] for a service whose index may be replaced while it serves.
pub async fn serve_service(
    listener: TcpListener,
    service: RegistryService,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<RegistryServer<RegistryService>>().await;
    let registry = RegistryServer::new(service)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    tonic::transport::Server::builder()
        .add_service(health)
        .add_service(registry)
        .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener), shutdown)
        .await
        .map_err(ServeError::Serve)
}
