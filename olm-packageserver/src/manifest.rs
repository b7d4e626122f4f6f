//! Catalog content → PackageManifests, as OLM's packageserver renders them.
//!
//! One PackageManifest per package of a catalog: its channels sorted by name,
//! each with its head (`currentCSV`, `currentCSVDesc`) and every bundle of the
//! channel newest first (`entries`, bundles marked `olm.deprecated` left out);
//! the provider of the default channel's head; labels from the CatalogSource,
//! `catalog`, `catalog-namespace`, `provider`, `provider-url`, the default
//! head's CSV labels and the default os/arch labels. A channel whose head
//! cannot be found is left out (and the default channel becomes the first
//! channel if it was that one); a package left with no channel is left out.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use olm_api::{
    packages::{
        self, ChannelEntry, CsvDescription, Deprecation, PackageChannel, PackageManifest,
        PackageManifestStatus,
    },
    v1alpha1::CatalogSource,
};
use olm_catalog::{Catalog, Package, Property};

use olm_catalog_store::channel_heads::{HeadCsv, HeadCsvs, channel_head};

/// What a PackageManifest shows of its CatalogSource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.displayName`.
    pub display_name: String,
    /// `spec.publisher`.
    pub publisher: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.creationTimestamp`.
    pub created: Option<Time>,
}

impl CatalogInfo {
    /// The information of `source`.
    pub fn from_source(source: &CatalogSource) -> Self {
        CatalogInfo {
            namespace: source.metadata.namespace.clone().unwrap_or_default(),
            name: source.metadata.name.clone().unwrap_or_default(),
            display_name: source.spec.display_name.clone().unwrap_or_default(),
            publisher: source.spec.publisher.clone().unwrap_or_default(),
            labels: source.metadata.labels.clone().unwrap_or_default(),
            created: source.metadata.creation_timestamp.clone(),
        }
    }
}

/// Every package of `catalog` as a PackageManifest in the catalog's namespace.
pub fn package_manifests(info: &CatalogInfo, catalog: &Catalog, heads: &HeadCsvs) -> Vec<PackageManifest> {
    catalog
        .packages
        .iter()
        .filter_map(|package| package_manifest(info, catalog, heads, package))
        .collect()
}

/// `package` of `catalog` as a PackageManifest; `None` when none of its channels has a head.
pub fn package_manifest(
    info: &CatalogInfo,
    catalog: &Catalog,
    heads: &HeadCsvs,
    package: &Package,
) -> Option<PackageManifest> {
    let default_channel = package.default_channel.clone().unwrap_or_default();
    let mut channels: Vec<&olm_catalog::Channel> = catalog.channels_of(&package.name).collect();
    channels.sort_by(|a, b| a.name.cmp(&b.name));

    let mut labels = info.labels.clone();
    labels.insert(packages::labels::CATALOG.into(), info.name.clone());
    labels.insert(packages::labels::CATALOG_NAMESPACE.into(), info.namespace.clone());
    let mut status = PackageManifestStatus {
        catalog_source: info.name.clone(),
        catalog_source_display_name: info.display_name.clone(),
        catalog_source_publisher: info.publisher.clone(),
        catalog_source_namespace: info.namespace.clone(),
        package_name: package.name.clone(),
        deprecation: deprecation(catalog, &package.name, "olm.package", None),
        default_channel: default_channel.clone(),
        ..PackageManifestStatus::default()
    };
    let mut default_elided = false;
    let mut provider_set = false;
    let mut default_labels: Option<&BTreeMap<String, String>> = None;
    let empty = HeadCsv::default();
    for channel in channels {
        let Some(head) = channel_head(channel).filter(|h| catalog.bundle(&package.name, h).is_some()) else {
            default_elided |= channel.name == default_channel;
            continue;
        };
        let csv = heads
            .get(&(package.name.clone(), head.to_owned()))
            .unwrap_or(&empty);
        let mut description = csv.description.clone();
        if description.version.is_empty()
            && let Some(version) = catalog.bundle(&package.name, head).and_then(|b| b.version())
        {
            description.version = version.as_str().to_owned();
        }
        if default_labels.is_none() || channel.name == default_channel {
            default_labels = Some(&csv.labels);
        }
        if (!default_channel.is_empty() && channel.name == default_channel) || !provider_set {
            status.provider = description.provider.clone();
            labels.insert(packages::labels::PROVIDER.into(), status.provider.name.clone());
            labels.insert(packages::labels::PROVIDER_URL.into(), status.provider.url.clone());
            provider_set = true;
        }
        status.channels.push(PackageChannel {
            name: channel.name.clone(),
            current_csv: head.to_owned(),
            current_csv_desc: strip_icons(description),
            deprecation: deprecation(catalog, &package.name, "olm.channel", Some(&channel.name)),
            entries: entries(catalog, &package.name, channel),
        });
    }
    if status.channels.is_empty() {
        return None;
    }
    if default_elided {
        status.default_channel = status.channels[0].name.clone();
    }
    if let Some(csv_labels) = default_labels {
        labels.extend(csv_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    default_os_arch(&mut labels);
    Some(PackageManifest {
        metadata: ObjectMeta {
            name: Some(package.name.clone()),
            namespace: Some(info.namespace.clone()),
            labels: Some(labels),
            creation_timestamp: info.created.clone(),
            ..ObjectMeta::default()
        },
        spec: packages::PackageManifestSpec {},
        status,
    })
}

/// List and get answers carry no icons (OLM serves them apart).
fn strip_icons(mut description: CsvDescription) -> CsvDescription {
    description.icon.clear();
    description
}

/// The bundles of `channel`, newest first, without those marked `olm.deprecated`.
fn entries(catalog: &Catalog, package: &str, channel: &olm_catalog::Channel) -> Vec<ChannelEntry> {
    let zero = semver::Version::new(0, 0, 0);
    let mut bundles: Vec<&olm_catalog::Bundle> = channel
        .entries
        .iter()
        .filter_map(|e| catalog.bundle(package, &e.name))
        .filter(|b| !b.properties.iter().any(|p| matches!(p, Property::Deprecated(_))))
        .collect();
    bundles.sort_by(|a, b| {
        let version = |x: &olm_catalog::Bundle| x.version().and_then(|v| v.semver()).cloned();
        version(b)
            .unwrap_or_else(|| zero.clone())
            .cmp(&version(a).unwrap_or_else(|| zero.clone()))
    });
    bundles
        .into_iter()
        .map(|b| ChannelEntry {
            name: b.name.clone(),
            version: b.version().map(|v| v.as_str().to_owned()).unwrap_or_default(),
            deprecation: deprecation(catalog, package, "olm.bundle", Some(&b.name)),
        })
        .collect()
}

/// The catalog's deprecation notice for a package, channel or bundle.
fn deprecation(catalog: &Catalog, package: &str, schema: &str, name: Option<&str>) -> Option<Deprecation> {
    catalog
        .deprecation_message(package, schema, name)
        .map(|message| Deprecation {
            message: message.to_owned(),
        })
}

/// Adds `operatorframework.io/os.linux` and `operatorframework.io/arch.amd64`
/// unless the labels name an os or an arch already.
fn default_os_arch(labels: &mut BTreeMap<String, String>) {
    let has = |prefix: &str| labels.keys().any(|k| k.starts_with(prefix));
    let (os, arch) = (
        has(packages::labels::OS_PREFIX),
        has(packages::labels::ARCH_PREFIX),
    );
    if !os {
        labels.insert(
            packages::labels::DEFAULT_OS.into(),
            packages::labels::SUPPORTED.into(),
        );
    }
    if !arch {
        labels.insert(
            packages::labels::DEFAULT_ARCH.into(),
            packages::labels::SUPPORTED.into(),
        );
    }
}
