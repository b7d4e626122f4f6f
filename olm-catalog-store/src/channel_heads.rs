//! The CSV descriptions of channel heads, kept with a catalog's content.
//!
//! A PackageManifest shows, for each channel, what the channel head's CSV says
//! of itself (display name, description, provider, install modes, CRD
//! descriptions...). The store drops bundle manifests and `olm.csv.metadata`
//! (most of a catalog's size) and reading a bundle back costs a registry call
//! or an image pull, too slow for a list of every package. So when content is
//! loaded, the heads' descriptions are taken out first: from `olm.csv.metadata`
//! where the catalog has it (current catalogs), else from the CSV among the
//! bundle's `olm.bundle.object`s (older catalogs, registries). Only heads are
//! kept: one description per channel, not per bundle.
//!
//! Each head's icon is kept beside its description, decoded, for the
//! `packagemanifests/icon` subresource (list and get answers leave icons out,
//! as OLM's do). It is the first icon of the head's CSV when the bundle carries
//! its CSV (registries, older catalogs), else the package's icon: OLM's
//! registry builds a catalog bundle's CSV from `olm.csv.metadata` with the
//! `olm.package` icon, since `olm.csv.metadata` carries none.
//!
//! olm-rs's relation endpoints reach the description as the CSV's
//! `olm-rs.dev/endpoints` annotation; a bundle that carries them only as its
//! catalog property (`olm-rs.endpoints`) gets the annotation from the property.
//! Its actions reach it the same way: the `olm-rs.dev/actions` annotation, or
//! else the `olm-rs.actions` property.
//!
//! All of it is for the PackageManifest API alone: when catalog-operator does
//! not serve it ([`Describe::Nothing`]), nothing here is read or kept, icons
//! included, and a registry is not even asked for its heads' CSVs.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt,
    hash::{DefaultHasher, Hash, Hasher},
};

use base64::Engine;
use bytes::Bytes;
use olm_api::{
    actions, endpoints,
    packages::{AppLink, CsvDescription, Descriptions, Maintainer},
};
use olm_catalog::{Bundle, Catalog, Channel, Icon, Package, Property};
use serde_json::{Map, Value};

/// What a PackageManifest reads of a channel head's CSV.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeadCsv {
    /// The presentation fields.
    pub description: CsvDescription,
    /// The CSV's labels (they become the PackageManifest's, for the default channel).
    pub labels: BTreeMap<String, String>,
    /// The icon consoles show, if the CSV (or package) has a readable one.
    pub icon: Option<HeadIcon>,
}

/// An image, decoded from a CSV's `spec.icon[0]` or a package's `icon`.
#[derive(Clone, PartialEq, Eq)]
pub struct HeadIcon {
    /// Its media type (`image/png`, `image/svg+xml`...), as the CSV names it.
    pub media_type: String,
    /// The image.
    pub data: Bytes,
}

impl HeadIcon {
    /// Decodes `icon`; `None` when its data is empty or not base64 (a console
    /// then shows the default icon).
    pub fn decode(icon: &Icon) -> Option<Self> {
        let text: Vec<u8> = icon
            .base64data
            .bytes()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        let data = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
        (!data.is_empty()).then(|| HeadIcon {
            media_type: icon.mediatype.trim().to_owned(),
            data: Bytes::from(data),
        })
    }
}

/// The image's size and a hash of it, not its bytes: descriptions are
/// compared and fingerprinted through `Debug`, and icons weigh kilobytes.
impl fmt::Debug for HeadIcon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut hasher = DefaultHasher::new();
        self.data.hash(&mut hasher);
        f.debug_struct("HeadIcon")
            .field("media_type", &self.media_type)
            .field("len", &self.data.len())
            .field("hash", &hasher.finish())
            .finish()
    }
}

/// The heads' CSVs of a catalog, by package and bundle name.
pub type HeadCsvs = HashMap<(String, String), HeadCsv>;

/// Whether catalog content keeps what the PackageManifest API shows of its
/// channel heads ([`HeadCsvs`]). Only that API reads them, and they are most of
/// what a loaded catalog keeps: they are kept only while it is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Describe {
    /// The package server runs: the heads' CSVs are read and kept.
    Heads,
    /// The package server does not run: nothing is read or kept.
    #[default]
    Nothing,
}

impl Describe {
    /// What to keep when the package server runs (`serving`) or not.
    pub fn when_serving(serving: bool) -> Describe {
        if serving {
            Describe::Heads
        } else {
            Describe::Nothing
        }
    }

    /// What a registry's listing keeps of the channel heads' CSVs for this.
    pub fn head_csv_json(self) -> olm_registry::client::HeadCsvJson {
        match self {
            Describe::Heads => olm_registry::client::HeadCsvJson::Keep,
            Describe::Nothing => olm_registry::client::HeadCsvJson::Skip,
        }
    }

    /// The CSVs of `catalog`'s channel heads this asks for ([`head_csvs`]), or none.
    pub fn head_csvs(self, catalog: &Catalog) -> HeadCsvs {
        match self {
            Describe::Heads => head_csvs(catalog),
            Describe::Nothing => HeadCsvs::new(),
        }
    }
}

/// The head of `channel`: the one entry that no other entry replaces or skips.
/// `None` when there is no such entry or more than one (OLM's registry serves no
/// head for such a channel either).
pub fn channel_head(channel: &Channel) -> Option<&str> {
    let incoming: BTreeSet<&str> = channel
        .entries
        .iter()
        .flat_map(|e| e.replaces.iter().chain(&e.skips))
        .map(String::as_str)
        .collect();
    let mut heads = channel
        .entries
        .iter()
        .map(|e| e.name.as_str())
        .filter(|name| !incoming.contains(name));
    match (heads.next(), heads.next()) {
        (Some(head), None) => Some(head),
        _ => None,
    }
}

/// The CSVs of every channel head of `catalog` (read before its manifests are dropped).
pub fn head_csvs(catalog: &Catalog) -> HeadCsvs {
    let mut out = HeadCsvs::new();
    for channel in &catalog.channels {
        let Some(head) = channel_head(channel) else {
            continue;
        };
        let key = (channel.package.clone(), head.to_owned());
        if out.contains_key(&key) {
            continue;
        }
        let Some(bundle) = catalog.bundle(&channel.package, head) else {
            continue;
        };
        if let Some(csv) = head_csv(bundle, catalog.package(&channel.package)) {
            out.insert(key, csv);
        }
    }
    out
}

/// What `bundle`'s CSV says of itself, from its `olm.csv.metadata` or else its
/// CSV object; `None` when it has neither. A CSV without a description takes
/// the package's, as OLM's registry does; the icon is the CSV's when the
/// bundle carries its CSV, else the package's.
pub fn head_csv(bundle: &Bundle, package: Option<&Package>) -> Option<HeadCsv> {
    let csv = csv_object(bundle);
    let metadata = bundle
        .properties
        .iter()
        .find_map(|p| match p {
            Property::CsvMetadata(raw) => Some(raw.to_value()),
            _ => None,
        })
        .or_else(|| csv.as_ref().map(metadata_of_csv))?;
    let icon = match &csv {
        Some(csv) => csv_icon(csv),
        None => package.and_then(|p| p.icon.as_ref()).and_then(HeadIcon::decode),
    };
    let package_description = package.and_then(|p| p.description.as_deref());
    let mut description = description(&metadata);
    if let Some(version) = bundle.version() {
        description.version = version.as_str().to_owned();
    }
    if description.long_description.is_empty() {
        description.long_description = package_description.unwrap_or_default().to_owned();
    }
    let images: BTreeSet<&str> = bundle
        .related_images
        .iter()
        .map(|i| i.image.as_str())
        .filter(|i| !i.is_empty())
        .collect();
    description.related_images = images.into_iter().map(str::to_owned).collect();
    carry_declaration(
        bundle,
        &mut description,
        endpoints::PROPERTY,
        endpoints::ANNOTATION,
    );
    carry_declaration(bundle, &mut description, actions::PROPERTY, actions::ANNOTATION);
    Some(HeadCsv {
        description,
        labels: string_map(&metadata, "labels"),
        icon,
    })
}

/// The bundle's olm-rs `property` (`olm-rs.endpoints`, `olm-rs.actions`) as
/// the CSV `annotation` it carries, when the CSV lacks the annotation.
fn carry_declaration(bundle: &Bundle, description: &mut CsvDescription, property: &str, annotation: &str) {
    if description.annotations.contains_key(annotation) {
        return;
    }
    let Some(Property::Other { value, .. }) = bundle.properties_of(property).next() else {
        return;
    };
    let text = match value.to_value() {
        Value::String(text) => text,
        declaration => declaration.to_string(),
    };
    description.annotations.insert(annotation.to_owned(), text);
}

/// The first icon of a CSV's `spec.icon`, decoded.
fn csv_icon(csv: &Value) -> Option<HeadIcon> {
    let icon = csv.pointer("/spec/icon/0")?;
    let field = |key: &str| {
        icon.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    HeadIcon::decode(&Icon {
        base64data: field("base64data"),
        mediatype: field("mediatype"),
    })
}

/// The CSV among the bundle's objects.
fn csv_object(bundle: &Bundle) -> Option<Value> {
    bundle.properties.iter().find_map(|p| match p {
        Property::BundleObject(object) => object
            .decode()
            .ok()
            .filter(|o| o.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion")),
        _ => None,
    })
}

/// A CSV's fields in the shape of `olm.csv.metadata` (what `opm render` writes).
pub fn metadata_of_csv(csv: &Value) -> Value {
    let mut out = Map::new();
    let meta = csv.get("metadata");
    for key in ["annotations", "labels"] {
        if let Some(value) = meta.and_then(|m| m.get(key)) {
            out.insert(key.to_owned(), value.clone());
        }
    }
    let spec = csv.get("spec");
    for (from, to) in [
        ("apiservicedefinitions", "apiServiceDefinitions"),
        ("customresourcedefinitions", "crdDescriptions"),
        ("description", "description"),
        ("displayName", "displayName"),
        ("installModes", "installModes"),
        ("keywords", "keywords"),
        ("links", "links"),
        ("maintainers", "maintainers"),
        ("maturity", "maturity"),
        ("minKubeVersion", "minKubeVersion"),
        ("nativeAPIs", "nativeAPIs"),
        ("provider", "provider"),
    ] {
        if let Some(value) = spec.and_then(|s| s.get(from)) {
            out.insert(to.to_owned(), value.clone());
        }
    }
    Value::Object(out)
}

/// The description in an `olm.csv.metadata` value. Fields of the wrong shape
/// are left empty rather than failing the package: a console shows the rest.
pub fn description(metadata: &Value) -> CsvDescription {
    CsvDescription {
        display_name: string(metadata, "displayName"),
        icon: Vec::new(),
        version: String::new(),
        provider: app_link(metadata.get("provider")),
        annotations: string_map(metadata, "annotations"),
        keywords: list(metadata, "keywords")
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect(),
        links: list(metadata, "links").map(|l| app_link(Some(l))).collect(),
        maintainers: list(metadata, "maintainers")
            .map(|m| Maintainer {
                name: string(m, "name"),
                email: string(m, "email"),
            })
            .collect(),
        maturity: string(metadata, "maturity"),
        long_description: string(metadata, "description"),
        install_modes: list(metadata, "installModes")
            .filter_map(|m| serde_json::from_value(m.clone()).ok())
            .collect(),
        custom_resource_definitions: descriptions(metadata.get("crdDescriptions")),
        api_service_definitions: descriptions(metadata.get("apiServiceDefinitions")),
        native_apis: list(metadata, "nativeAPIs")
            .filter_map(|g| serde_json::from_value(g.clone()).ok())
            .collect(),
        min_kube_version: string(metadata, "minKubeVersion"),
        related_images: Vec::new(),
    }
}

fn string(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn list<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> + 'a {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
}

fn string_map(value: &Value, key: &str) -> BTreeMap<String, String> {
    value
        .get(key)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

fn app_link(value: Option<&Value>) -> AppLink {
    value
        .map(|v| AppLink {
            name: string(v, "name"),
            url: string(v, "url"),
        })
        .unwrap_or_default()
}

fn descriptions(value: Option<&Value>) -> Descriptions {
    let items = |key: &str| -> Vec<Value> {
        value
            .and_then(|v| v.get(key))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    Descriptions {
        owned: items("owned"),
        required: items("required"),
    }
}

#[cfg(test)]
mod tests {
    use olm_api::{actions::Actions, endpoints::Endpoints};
    use olm_catalog::property::RawJson;
    use serde_json::json;

    use super::*;

    fn bundle(properties: Vec<Property>) -> Bundle {
        Bundle {
            name: "demo.v1.0.0".into(),
            package: "demo".into(),
            image: String::new(),
            properties,
            related_images: Vec::new(),
        }
    }

    fn metadata(annotations: Value) -> Property {
        Property::CsvMetadata(RawJson::from_value(&json!({"annotations": annotations})))
    }

    fn endpoints_property(value: Value) -> Property {
        Property::Other {
            type_: endpoints::PROPERTY.into(),
            value: RawJson::from_value(&value),
        }
    }

    #[test]
    fn the_endpoints_property_reaches_the_description_as_the_annotation() {
        let declared = json!({"provides": {"db": {"interface": "postgresql"}}});
        let annotated = |head: &HeadCsv| head.description.annotations.get(endpoints::ANNOTATION).cloned();
        // Only the property: the annotation is made from it, and reads back.
        let head = head_csv(
            &bundle(vec![
                metadata(json!({"a": "b"})),
                endpoints_property(declared.clone()),
            ]),
            None,
        )
        .unwrap();
        let text = annotated(&head).expect("the annotation");
        let read = Endpoints::parse("demo.v1.0.0", &text).unwrap();
        assert_eq!(
            read.get("db").map(|(_, e)| e.interface.as_str()),
            Some("postgresql")
        );
        assert_eq!(head.description.annotations["a"], "b");
        // The CSV's own annotation is kept as written.
        let head = head_csv(
            &bundle(vec![
                metadata(json!({endpoints::ANNOTATION: "peers: {ring: {interface: r}}"})),
                endpoints_property(declared),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(annotated(&head).as_deref(), Some("peers: {ring: {interface: r}}"));
        // Text carried as text stays text.
        let head = head_csv(
            &bundle(vec![
                metadata(json!({})),
                endpoints_property(json!("provides: [")),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(annotated(&head).as_deref(), Some("provides: ["));
    }

    #[test]
    fn the_actions_property_reaches_the_description_as_the_annotation() {
        let declared = json!({"backup": {"description": "Back up.", "params": {"path": {"type": "string"}}}});
        let property = |value: Value| Property::Other {
            type_: actions::PROPERTY.into(),
            value: RawJson::from_value(&value),
        };
        let annotated = |head: &HeadCsv| head.description.annotations.get(actions::ANNOTATION).cloned();
        // Only the property: the annotation is made from it, and reads back.
        let head = head_csv(
            &bundle(vec![metadata(json!({})), property(declared.clone())]),
            None,
        )
        .unwrap();
        let read = Actions::parse("demo.v1.0.0", &annotated(&head).expect("the annotation")).unwrap();
        assert_eq!(
            read.get("backup").map(|a| a.description.as_str()),
            Some("Back up.")
        );
        // The CSV's own annotation is kept as written.
        let head = head_csv(
            &bundle(vec![
                metadata(json!({actions::ANNOTATION: "pause: {description: Stop.}"})),
                property(declared),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(annotated(&head).as_deref(), Some("pause: {description: Stop.}"));
        // Text carried as text stays text.
        let head = head_csv(
            &bundle(vec![metadata(json!({})), property(json!("backup: ["))]),
            None,
        )
        .unwrap();
        assert_eq!(annotated(&head).as_deref(), Some("backup: ["));
    }
}
