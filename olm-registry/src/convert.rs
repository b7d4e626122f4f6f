//! Registry messages ↔ the catalog model.
//!
//! The server side follows operator-registry's conversion of a file-based catalog
//! bundle: `olm.bundle.object` properties become `object` (and the CSV among them
//! `csvJson`) and are left out of `properties`; `olm.gvk` and `olm.gvk.required`
//! also become `providedApis` and `requiredApis`; required packages and APIs also
//! become the older `dependencies` form. The client side undoes it, filling in what
//! older registries only send in the older fields.

use std::collections::{HashMap, HashSet};

use olm_catalog::{
    Bundle, Catalog, Channel, ChannelEntry, Deprecation, DeprecationEntry, DeprecationReference, Gvk,
    Package, Property, Version,
    model::schema,
    property::{BundleObject, PackageProperty, PackageRequired},
};
use serde_json::{Map, Value};

use super::api;

/// The kind of a ClusterServiceVersion.
pub(crate) const CSV_KIND: &str = "ClusterServiceVersion";

/// The API form of one bundle, computed once per bundle; channel-specific fields
/// (channel, replaces, skips, skipRange) are added per channel entry.
#[derive(Debug, Clone, Default)]
pub(crate) struct BundleContent {
    pub(crate) csv_json: String,
    pub(crate) objects: Vec<String>,
    pub(crate) provided: Vec<api::GroupVersionKind>,
    pub(crate) required: Vec<api::GroupVersionKind>,
    pub(crate) dependencies: Vec<api::Dependency>,
    pub(crate) properties: Vec<api::Property>,
    pub(crate) version: String,
}

impl BundleContent {
    /// Whether the bundle provides `group/version/kind`.
    pub(crate) fn provides(&self, group: &str, version: &str, kind: &str) -> bool {
        self.provided
            .iter()
            .any(|g| g.group == group && g.version == version && g.kind == kind)
    }
}

fn api_gvk(gvk: &Gvk) -> api::GroupVersionKind {
    api::GroupVersionKind {
        group: gvk.group.clone(),
        version: gvk.version.clone(),
        kind: gvk.kind.clone(),
        plural: String::new(),
    }
}

/// The API form of `bundle`. Manifests that do not decode are reported, not served.
pub(crate) fn bundle_content(bundle: &Bundle) -> (BundleContent, Vec<String>) {
    let mut content = BundleContent::default();
    let mut problems = Vec::new();
    let mut csv_metadata = None;
    for property in &bundle.properties {
        match property {
            Property::BundleObject(object) => match object.decode() {
                Ok(value) => {
                    let text = value.to_string();
                    if content.csv_json.is_empty()
                        && value.get("kind").and_then(Value::as_str) == Some(CSV_KIND)
                    {
                        content.csv_json = text.clone();
                    }
                    content.objects.push(text);
                }
                Err(e) => problems.push(format!("bundle {}: {e}", bundle.name)),
            },
            Property::Package(package) if content.version.is_empty() => {
                content.version = package.version.as_str().to_owned();
            }
            Property::Gvk(gvk) => content.provided.push(api_gvk(gvk)),
            Property::GvkRequired(gvk) => {
                content.required.push(api_gvk(gvk));
                content.dependencies.push(api::Dependency {
                    r#type: olm_catalog::property::types::GVK.to_owned(),
                    value: property.value_json(),
                });
            }
            Property::PackageRequired(required) => content.dependencies.push(api::Dependency {
                r#type: olm_catalog::property::types::PACKAGE.to_owned(),
                value: serde_json::json!({
                    "packageName": required.package_name,
                    "version": required.version_range,
                })
                .to_string(),
            }),
            Property::CsvMetadata(metadata) => csv_metadata = Some(metadata.to_value()),
            _ => {}
        }
        if !matches!(property, Property::BundleObject(_)) {
            // Inline manifests are left out of the properties, as opm does: clients
            // copy properties into CSV annotations, where they would not fit.
            content.properties.push(api::Property {
                r#type: property.type_name().to_owned(),
                value: property.value_json(),
            });
        }
    }
    if content.csv_json.is_empty()
        && let Some(metadata) = csv_metadata
    {
        content.csv_json = csv_from_metadata(&bundle.name, &content.version, metadata).to_string();
        if content.objects.is_empty() {
            content.objects.push(content.csv_json.clone());
        }
    }
    (content, problems)
}

/// A CSV built from an `olm.csv.metadata` property, for catalogs that do not carry
/// the bundle's manifests: the annotations and labels go to `metadata`, the rest
/// to `spec`.
fn csv_from_metadata(name: &str, version: &str, metadata: Value) -> Value {
    let mut spec = match metadata {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let mut meta = Map::new();
    meta.insert("name".into(), Value::String(name.to_owned()));
    for key in ["annotations", "labels"] {
        if let Some(value) = spec.remove(key) {
            meta.insert(key.into(), value);
        }
    }
    if !version.is_empty() {
        spec.insert("version".into(), Value::String(version.to_owned()));
    }
    serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": CSV_KIND,
        "metadata": meta,
        "spec": spec,
    })
}

/// The bundle message for `bundle` in `channel` at channel entry `entry`.
pub(crate) fn api_bundle(
    bundle: &Bundle,
    content: &BundleContent,
    channel: &str,
    entry: Option<&ChannelEntry>,
    deprecation: Option<String>,
    with_manifests: bool,
) -> api::Bundle {
    api::Bundle {
        csv_name: bundle.name.clone(),
        package_name: bundle.package.clone(),
        channel_name: channel.to_owned(),
        csv_json: if with_manifests {
            content.csv_json.clone()
        } else {
            String::new()
        },
        object: if with_manifests {
            content.objects.clone()
        } else {
            Vec::new()
        },
        bundle_path: bundle.image.clone(),
        provided_apis: content.provided.clone(),
        required_apis: content.required.clone(),
        version: content.version.clone(),
        skip_range: entry.and_then(|e| e.skip_range.clone()).unwrap_or_default(),
        dependencies: content.dependencies.clone(),
        properties: content.properties.clone(),
        replaces: entry.and_then(|e| e.replaces.clone()).unwrap_or_default(),
        skips: entry.map(|e| e.skips.clone()).unwrap_or_default(),
        deprecation: deprecation.map(|message| api::Deprecation { message }),
    }
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

/// Rebuilds a catalog from what a registry served: its packages (`GetPackage`) and
/// its bundles (`ListBundles`, one message per channel a bundle is in).
///
/// Returns the catalog and what had to be left out, in words.
pub(crate) fn catalog_from_api(
    packages: Vec<api::Package>,
    bundles: Vec<api::Bundle>,
) -> (Catalog, Vec<String>) {
    let mut catalog = Catalog::default();
    let mut problems = Vec::new();
    let mut deprecations = Deprecations::default();
    // A package or bundle with no name cannot be referred to, nor written as a catalog.
    let (packages, nameless): (Vec<_>, Vec<_>) = packages.into_iter().partition(|p| !p.name.is_empty());
    if !nameless.is_empty() {
        problems.push(format!(
            "package with no name left out ({} of them): the registry sent a package without its name",
            nameless.len()
        ));
    }
    for package in &packages {
        catalog
            .packages
            .push(package_from_api(package, &mut deprecations));
    }
    let known: HashSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let mut channels = Channels::default();
    let mut seen_bundles: HashSet<(String, String)> = HashSet::new();
    let mut deprecated_bundles: HashSet<(String, String)> = HashSet::new();
    for message in bundles {
        if !known.contains(message.package_name.as_str()) {
            problems.push(format!(
                "bundle {} names package {}, which the registry does not list",
                message.csv_name, message.package_name
            ));
            continue;
        }
        if message.csv_name.is_empty() {
            problems.push(format!(
                "bundle with no name in package {} left out: the registry sent a bundle without its CSV's name",
                message.package_name
            ));
            continue;
        }
        channels.add(&message);
        let key = (message.package_name.clone(), message.csv_name.clone());
        if let Some(d) = &message.deprecation
            && deprecated_bundles.insert(key.clone())
        {
            deprecations.add(
                &message.package_name,
                schema::BUNDLE,
                Some(&message.csv_name),
                d.message.clone(),
            );
        }
        if !seen_bundles.insert(key) {
            continue;
        }
        let (bundle, mut more) = bundle_from_api(message);
        problems.append(&mut more);
        catalog.bundles.push(bundle);
    }
    catalog.channels = channels.channels;
    catalog.deprecations = deprecations.sorted();
    catalog.sort();
    (catalog, problems)
}

/// A package from its `GetPackage` answer; its deprecation and its channels' go to `deprecations`.
fn package_from_api(package: &api::Package, deprecations: &mut Deprecations) -> Package {
    if let Some(d) = &package.deprecation {
        deprecations.add(&package.name, schema::PACKAGE, None, d.message.clone());
    }
    for channel in &package.channels {
        if let Some(d) = &channel.deprecation {
            deprecations.add(
                &package.name,
                schema::CHANNEL,
                Some(&channel.name),
                d.message.clone(),
            );
        }
    }
    Package {
        name: package.name.clone(),
        default_channel: non_empty(&package.default_channel_name),
        icon: None,
        description: None,
        properties: Vec::new(),
    }
}

/// The deprecations a registry sent, gathered by package.
#[derive(Default)]
struct Deprecations(HashMap<String, Vec<DeprecationEntry>>);

impl Deprecations {
    /// Deprecates the package, channel or bundle `name` (of `schema`) of `package`.
    fn add(&mut self, package: &str, schema: &str, name: Option<&str>, message: String) {
        self.0
            .entry(package.to_owned())
            .or_default()
            .push(DeprecationEntry {
                reference: DeprecationReference {
                    schema: schema.to_owned(),
                    name: name.map(str::to_owned),
                },
                message,
            });
    }

    /// One `olm.deprecations` per package, by package name.
    fn sorted(self) -> Vec<Deprecation> {
        let mut deprecations: Vec<Deprecation> = self
            .0
            .into_iter()
            .map(|(package, entries)| Deprecation { package, entries })
            .collect();
        deprecations.sort_by(|a, b| a.package.cmp(&b.package));
        deprecations
    }
}

/// The channels rebuilt from bundle messages, in the order first seen.
#[derive(Default)]
struct Channels {
    channels: Vec<Channel>,
    index: HashMap<(String, String), usize>,
}

impl Channels {
    /// Adds the message's bundle as an entry of its channel (none when it names no channel).
    fn add(&mut self, message: &api::Bundle) {
        if message.channel_name.is_empty() {
            return;
        }
        let key = (message.package_name.clone(), message.channel_name.clone());
        let channels = &mut self.channels;
        let index = *self.index.entry(key).or_insert_with(|| {
            channels.push(Channel {
                name: message.channel_name.clone(),
                package: message.package_name.clone(),
                entries: Vec::new(),
                properties: Vec::new(),
            });
            channels.len() - 1
        });
        self.channels[index].entries.push(ChannelEntry {
            name: message.csv_name.clone(),
            replaces: non_empty(&message.replaces),
            skips: message.skips.clone(),
            skip_range: non_empty(&message.skip_range),
        });
    }
}

/// One bundle from its message. Properties that do not parse are left out and
/// reported; what older registries send only as `providedApis`, `requiredApis`,
/// `dependencies` or `version` becomes the matching property.
pub(crate) fn bundle_from_api(message: api::Bundle) -> (Bundle, Vec<String>) {
    let mut problems = Vec::new();
    let mut properties = Vec::new();
    for property in message.properties {
        if property.r#type.is_empty() {
            problems.push(format!(
                "bundle {}: a property has no type, left out",
                message.csv_name
            ));
            continue;
        }
        let value = match serde_json::from_str::<Value>(&property.value) {
            Ok(value) => value,
            Err(e) => {
                problems.push(format!(
                    "bundle {}: property {} is not JSON: {e}",
                    message.csv_name, property.r#type
                ));
                continue;
            }
        };
        match Property::from_parts(property.r#type, value) {
            Ok(property) => properties.push(property),
            Err(e) => problems.push(format!("bundle {}: {e}", message.csv_name)),
        }
    }
    let has = |properties: &[Property], wanted: &dyn Fn(&Property) -> bool| properties.iter().any(wanted);
    if !has(&properties, &|p| matches!(p, Property::Package(_))) && !message.version.is_empty() {
        properties.push(Property::Package(PackageProperty {
            package_name: message.package_name.clone(),
            version: Version::new(message.version.clone()),
            release: None,
        }));
    }
    let gvk = |g: &api::GroupVersionKind| Gvk {
        group: g.group.clone(),
        kind: g.kind.clone(),
        version: g.version.clone(),
    };
    if !has(&properties, &|p| matches!(p, Property::Gvk(_))) {
        properties.extend(message.provided_apis.iter().map(|g| Property::Gvk(gvk(g))));
    }
    let had_requirements = has(&properties, &|p| {
        matches!(p, Property::GvkRequired(_) | Property::PackageRequired(_))
    });
    if !had_requirements {
        let mut required: Vec<Property> = message
            .required_apis
            .iter()
            .map(|g| Property::GvkRequired(gvk(g)))
            .collect();
        for dependency in &message.dependencies {
            match dependency_property(dependency) {
                Ok(Some(property)) if !required.contains(&property) => required.push(property),
                Ok(_) => {}
                Err(e) => problems.push(format!("bundle {}: {e}", message.csv_name)),
            }
        }
        properties.extend(required);
    }
    let mut objects = message.object;
    if objects.is_empty() && !message.csv_json.is_empty() {
        objects.push(message.csv_json);
    }
    properties.extend(
        objects
            .iter()
            .map(|object| Property::BundleObject(BundleObject::from_json(object))),
    );
    let bundle = Bundle {
        name: message.csv_name,
        package: message.package_name,
        image: message.bundle_path,
        properties,
        related_images: Vec::new(),
    };
    (bundle, problems)
}

/// A dependency in the older form (`olm.gvk` / `olm.package` with `version`) as a property.
fn dependency_property(dependency: &api::Dependency) -> Result<Option<Property>, String> {
    let value: Value = serde_json::from_str(&dependency.value)
        .map_err(|e| format!("dependency {} is not JSON: {e}", dependency.r#type))?;
    match dependency.r#type.as_str() {
        olm_catalog::property::types::GVK => serde_json::from_value(value)
            .map(|g| Some(Property::GvkRequired(g)))
            .map_err(|e| format!("dependency olm.gvk is invalid: {e}")),
        olm_catalog::property::types::PACKAGE => {
            let field = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
            match (field("packageName"), field("version")) {
                (Some(package_name), Some(version_range)) => {
                    Ok(Some(Property::PackageRequired(PackageRequired {
                        package_name,
                        version_range,
                    })))
                }
                _ => Err(format!(
                    "dependency olm.package {} lacks packageName or version",
                    dependency.value
                )),
            }
        }
        // Label and other dependency types are carried as properties by every
        // registry that serves them.
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_metadata_becomes_a_csv() {
        let csv = csv_from_metadata(
            "db.v1.0.0",
            "1.0.0",
            serde_json::json!({"annotations": {"a": "b"}, "displayName": "DB"}),
        );
        assert_eq!(csv["metadata"]["name"], "db.v1.0.0");
        assert_eq!(csv["metadata"]["annotations"]["a"], "b");
        assert_eq!(csv["spec"]["displayName"], "DB");
        assert_eq!(csv["spec"]["version"], "1.0.0");
        assert_eq!(csv["kind"], CSV_KIND);
    }

    #[test]
    fn older_fields_become_properties() {
        let message = api::Bundle {
            csv_name: "app.v1".into(),
            package_name: "app".into(),
            version: "1.0.0".into(),
            provided_apis: vec![api::GroupVersionKind {
                group: "g".into(),
                version: "v1".into(),
                kind: "K".into(),
                plural: String::new(),
            }],
            dependencies: vec![api::Dependency {
                r#type: "olm.package".into(),
                value: r#"{"packageName":"db","version":">=1.0.0"}"#.into(),
            }],
            csv_json: r#"{"kind":"ClusterServiceVersion"}"#.into(),
            ..api::Bundle::default()
        };
        let (bundle, problems) = bundle_from_api(message);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(bundle.version().map(Version::as_str), Some("1.0.0"));
        assert!(
            bundle
                .properties
                .iter()
                .any(|p| matches!(p, Property::Gvk(g) if g.kind == "K"))
        );
        assert!(
            bundle
                .properties
                .iter()
                .any(|p| matches!(p, Property::PackageRequired(r) if r.package_name == "db"))
        );
        assert_eq!(bundle.properties_of("olm.bundle.object").count(), 1);
    }

    /// What a registry can send but a catalog cannot hold: a package or bundle without a name,
    /// a property without a type. Each is left out and said, and the rest still reads.
    #[test]
    fn nameless_packages_and_bundles_and_typeless_properties_are_left_out() {
        let package = |name: &str| api::Package {
            name: name.into(),
            ..api::Package::default()
        };
        let bundle = |name: &str| api::Bundle {
            csv_name: name.into(),
            package_name: "app".into(),
            channel_name: "stable".into(),
            properties: vec![api::Property {
                r#type: String::new(),
                value: "{}".into(),
            }],
            ..api::Bundle::default()
        };
        let (catalog, problems) = catalog_from_api(
            vec![package(""), package("app")],
            vec![bundle(""), bundle("app.v1")],
        );
        let names: Vec<&str> = catalog.packages.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["app"]);
        let bundles: Vec<&str> = catalog.bundles.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(bundles, ["app.v1"]);
        assert_eq!(catalog.channels[0].entries.len(), 1);
        assert!(catalog.bundles[0].properties.is_empty());
        assert_eq!(
            problems,
            [
                "package with no name left out (1 of them): the registry sent a package without its name",
                "bundle with no name in package app left out: the registry sent a bundle without its CSV's name",
                "bundle app.v1: a property has no type, left out",
            ]
        );
        let rendered = olm_catalog::fbc::to_json_stream(&catalog);
        olm_catalog::fbc::parse_str("registry.json", &rendered).expect("the catalog writes and reads back");
    }
}
