//! What the cluster says its catalogs offer, read through the API server only:
//! the CatalogSources, and the PackageManifests that the cluster's
//! catalog-operator serves (`packages.operators.coreos.com/v1`, an aggregated
//! API) from the catalogs it holds. The CLI reads no catalog content itself:
//! it dials no registry and pulls no image, so what it shows is what the
//! catalog-operator sees, and it works wherever the API server is reachable.

use kube::{Api, Client, ResourceExt, api::ListParams};
use olm_api::{
    packages::{self, PackageChannel, PackageManifest},
    v1alpha1::{CatalogSource, ConnectivityState},
};

pub use crate::catalog_id::CatalogId;
use crate::error::Error;

/// Where the catalog content comes from, as the CatalogSource's spec names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A registry at an address.
    Address(String),
    /// A ConfigMap in the catalog's namespace.
    ConfigMap(String),
    /// A catalog image.
    Image(String),
    /// Nothing usable.
    None,
}

impl Origin {
    /// The origin `spec` names, chosen as the catalog-operator chooses.
    pub fn of(source: &CatalogSource) -> Origin {
        let non_empty = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
        if let Some(name) = non_empty(&source.spec.config_map) {
            Origin::ConfigMap(name)
        } else if let Some(address) = non_empty(&source.spec.address) {
            Origin::Address(address)
        } else if let Some(image) = non_empty(&source.spec.image) {
            Origin::Image(image)
        } else {
            Origin::None
        }
    }

    /// The kind of source, as a word.
    pub fn kind(&self) -> &'static str {
        match self {
            Origin::Address(_) => "grpc",
            Origin::ConfigMap(_) => "configmap",
            Origin::Image(_) => "image",
            Origin::None => "none",
        }
    }

    /// The address, ConfigMap or image.
    pub fn target(&self) -> &str {
        match self {
            Origin::Address(s) | Origin::ConfigMap(s) | Origin::Image(s) => s,
            Origin::None => "",
        }
    }
}

/// One CatalogSource.
#[derive(Debug, Clone)]
pub struct CatalogView {
    /// The CatalogSource.
    pub source: CatalogSource,
    /// Its id.
    pub id: CatalogId,
}

impl CatalogView {
    /// What the catalog-operator last reported (`status.connectionState.lastObservedState`).
    pub fn operator_state(&self) -> Option<ConnectivityState> {
        self.source
            .status
            .as_ref()?
            .connection_state
            .as_ref()
            .map(|s| s.last_observed_state)
    }

    /// What the catalog-operator says of it (`status.message`).
    pub fn message(&self) -> String {
        self.source
            .status
            .as_ref()
            .and_then(|s| s.message.clone())
            .unwrap_or_default()
    }

    /// Its priority.
    pub fn priority(&self) -> i32 {
        self.source.spec.priority.unwrap_or(0)
    }
}

/// The catalogs visible from a namespace and the packages the cluster serves from them.
#[derive(Debug, Clone, Default)]
pub struct Catalogs {
    /// Each CatalogSource, sorted by namespace and name.
    pub views: Vec<CatalogView>,
    /// The PackageManifests of the namespace (its catalogs' and the global ones').
    pub manifests: Vec<PackageManifest>,
}

impl Catalogs {
    /// The view of `id`.
    pub fn view(&self, id: &CatalogId) -> Option<&CatalogView> {
        self.views.iter().find(|v| &v.id == id)
    }

    /// The PackageManifests of catalog `id`.
    pub fn packages_of(&self, id: &CatalogId) -> Vec<&PackageManifest> {
        self.manifests
            .iter()
            .filter(|m| &CatalogId::of_manifest(m) == id)
            .collect()
    }

    /// The PackageManifest of `package` in catalog `id`.
    pub fn manifest(&self, id: &CatalogId, package: &str) -> Option<&PackageManifest> {
        self.packages_of(id)
            .into_iter()
            .find(|m| m.status.package_name == package)
    }

    /// The catalogs the catalog-operator does not report READY, as `namespace/name`.
    pub fn unhealthy(&self) -> Vec<String> {
        self.views
            .iter()
            .filter(|v| v.operator_state() != Some(ConnectivityState::Ready))
            .map(|v| v.id.to_string())
            .collect()
    }
}

/// The channel `name` of a PackageManifest.
pub fn channel<'a>(manifest: &'a PackageManifest, name: &str) -> Option<&'a PackageChannel> {
    manifest.status.channels.iter().find(|c| c.name == name)
}

/// The version of a channel's head (`currentCSV`): its description's, else its entry's.
pub fn head_version(channel: &PackageChannel) -> String {
    if !channel.current_csv_desc.version.is_empty() {
        return channel.current_csv_desc.version.clone();
    }
    channel
        .entries
        .iter()
        .find(|e| e.name == channel.current_csv)
        .map(|e| e.version.clone())
        .unwrap_or_default()
}

/// Lists the CatalogSources of `namespace` and `global`, and the PackageManifests of `namespace`.
pub async fn load(client: &Client, namespace: &str, global: &str) -> Result<Catalogs, Error> {
    let mut views = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for ns in [namespace, global] {
        if seen.contains(&ns) {
            continue;
        }
        seen.push(ns);
        let api: Api<CatalogSource> = Api::namespaced(client.clone(), ns);
        let sources = api
            .list(&ListParams::default())
            .await
            .map_err(Error::kube(format!("list CatalogSources in namespace {ns}")))?
            .items;
        views.extend(sources.into_iter().map(|source| CatalogView {
            id: CatalogId::new(source.name_any(), source.namespace().unwrap_or_default()),
            source,
        }));
    }
    views.sort_by(|a, b| a.id.cmp(&b.id));
    let manifests = package_manifests(client, namespace).await?;
    Ok(Catalogs { views, manifests })
}

/// The PackageManifests of `namespace`, sorted by package and catalog.
pub async fn package_manifests(client: &Client, namespace: &str) -> Result<Vec<PackageManifest>, Error> {
    let api: Api<PackageManifest> = Api::namespaced(client.clone(), namespace);
    let mut items = api
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::package_server(namespace, source))?
        .items;
    items.sort_by(|a, b| {
        (&a.status.package_name, CatalogId::of_manifest(a))
            .cmp(&(&b.status.package_name, CatalogId::of_manifest(b)))
    });
    Ok(items)
}

/// The PackageManifests of the catalogs in `namespaces` (each catalog's packages once).
pub async fn manifests_of_catalog_namespaces(
    client: &Client,
    namespaces: &[String],
) -> Result<Vec<PackageManifest>, Error> {
    let mut out = Vec::new();
    for ns in namespaces {
        let selector = format!("{}={ns}", packages::labels::CATALOG_NAMESPACE);
        let api: Api<PackageManifest> = Api::namespaced(client.clone(), ns);
        let items = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| Error::package_server(ns, source))?
            .items;
        out.extend(
            items
                .into_iter()
                .filter(|m| &m.status.catalog_source_namespace == ns),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use olm_api::packages::{ChannelEntry, CsvDescription};

    use super::*;

    #[test]
    fn a_heads_version_comes_from_its_description_else_its_entry() {
        let mut channel = PackageChannel {
            name: "stable".into(),
            current_csv: "db.v1.1.0".into(),
            entries: vec![
                ChannelEntry {
                    name: "db.v1.1.0".into(),
                    version: "1.1.0".into(),
                    deprecation: None,
                },
                ChannelEntry {
                    name: "db.v1.0.0".into(),
                    version: "1.0.0".into(),
                    deprecation: None,
                },
            ],
            ..PackageChannel::default()
        };
        assert_eq!(head_version(&channel), "1.1.0");
        channel.current_csv_desc = CsvDescription {
            version: "1.1.0-rc".into(),
            ..CsvDescription::default()
        };
        assert_eq!(head_version(&channel), "1.1.0-rc");
        assert_eq!(CatalogId::new("demo", "olm").to_string(), "olm/demo");
    }
}
