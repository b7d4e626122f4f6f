//! The catalog model: what a file-based catalog holds, typed.

use serde::{Serialize, Serializer, ser::SerializeStruct};

use crate::{
    property::{PackageProperty, Property, RawJson},
    version::Version,
};

/// Schema names of file-based catalog blobs.
pub mod schema {
    /// A package.
    pub const PACKAGE: &str = "olm.package";
    /// A channel of a package.
    pub const CHANNEL: &str = "olm.channel";
    /// A bundle (one version of a package).
    pub const BUNDLE: &str = "olm.bundle";
    /// Deprecation notices of a package.
    pub const DEPRECATIONS: &str = "olm.deprecations";
    /// The community pipeline's basic catalog template.
    pub const TEMPLATE_BASIC: &str = "olm.template.basic";
}

/// A catalog: packages, channels, bundles, deprecations, and blobs of other schemas, in the order
/// they were read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// `olm.package` blobs.
    pub packages: Vec<Package>,
    /// `olm.channel` blobs.
    pub channels: Vec<Channel>,
    /// `olm.bundle` blobs.
    pub bundles: Vec<Bundle>,
    /// `olm.deprecations` blobs.
    pub deprecations: Vec<Deprecation>,
    /// Blobs of any other schema, kept verbatim.
    pub others: Vec<Meta>,
}

/// Package icon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Icon {
    /// Base64 image data.
    pub base64data: String,
    /// Media type, e.g. `image/png`.
    pub mediatype: String,
}

/// `olm.package`.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    /// Package name.
    pub name: String,
    /// The channel a Subscription without a channel follows.
    pub default_channel: Option<String>,
    /// Icon shown by consoles.
    pub icon: Option<Icon>,
    /// Description shown by consoles.
    pub description: Option<String>,
    /// Package properties.
    pub properties: Vec<Property>,
}

/// One entry of a channel: a bundle and its upgrade edges.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ChannelEntry {
    /// Bundle name.
    pub name: String,
    /// The bundle this one replaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Bundles this one skips.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<String>,
    /// Range of versions this one replaces directly (blang/semver range syntax).
    #[serde(rename = "skipRange", skip_serializing_if = "Option::is_none")]
    pub skip_range: Option<String>,
}

/// `olm.channel`.
#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    /// Channel name.
    pub name: String,
    /// Package name.
    pub package: String,
    /// Entries, in the order written.
    pub entries: Vec<ChannelEntry>,
    /// Channel properties.
    pub properties: Vec<Property>,
}

impl Channel {
    /// The entry for bundle `name`, if any.
    pub fn entry(&self, name: &str) -> Option<&ChannelEntry> {
        self.entries.iter().find(|e| e.name == name)
    }
}

/// An image a bundle uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelatedImage {
    /// Name, often empty.
    pub name: String,
    /// Image reference.
    pub image: String,
}

/// `olm.bundle`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    /// Bundle name (the CSV name).
    pub name: String,
    /// Package name.
    pub package: String,
    /// Bundle image; empty when the bundle was rendered from a directory.
    pub image: String,
    /// Properties.
    pub properties: Vec<Property>,
    /// Images the bundle uses.
    pub related_images: Vec<RelatedImage>,
}

impl Bundle {
    /// The `olm.package` property (the first, if there are several).
    pub fn package_property(&self) -> Option<&PackageProperty> {
        self.properties.iter().find_map(|p| match p {
            Property::Package(p) => Some(p),
            _ => None,
        })
    }

    /// The bundle version, from its `olm.package` property.
    pub fn version(&self) -> Option<&Version> {
        self.package_property().map(|p| &p.version)
    }

    /// Properties of one type.
    pub fn properties_of<'a>(&'a self, type_: &'a str) -> impl Iterator<Item = &'a Property> + 'a {
        self.properties.iter().filter(move |p| p.type_name() == type_)
    }
}

/// What a deprecation entry points at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeprecationReference {
    /// `olm.package`, `olm.channel` or `olm.bundle`.
    pub schema: String,
    /// Channel or bundle name; absent for the package itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One deprecation notice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeprecationEntry {
    /// What is deprecated.
    pub reference: DeprecationReference,
    /// Message shown to users.
    pub message: String,
}

/// `olm.deprecations`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deprecation {
    /// Package name.
    pub package: String,
    /// Notices.
    pub entries: Vec<DeprecationEntry>,
}

/// A blob of a schema this crate does not model, kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The blob's `schema`.
    pub schema: String,
    /// The blob's `package`, if it has one.
    pub package: Option<String>,
    /// The blob's `name`, if it has one.
    pub name: Option<String>,
    /// The whole blob, as compact JSON.
    pub blob: RawJson,
}

impl Catalog {
    /// The package named `name`.
    pub fn package(&self, name: &str) -> Option<&Package> {
        self.packages.iter().find(|p| p.name == name)
    }

    /// The deprecation message this catalog gives `package`'s object of `schema`
    /// (`olm.package`, `olm.channel` or `olm.bundle`) named `name` (`None` for
    /// the package itself).
    pub fn deprecation_message(&self, package: &str, schema: &str, name: Option<&str>) -> Option<&str> {
        self.deprecations
            .iter()
            .filter(|d| d.package == package)
            .flat_map(|d| &d.entries)
            .find(|e| e.reference.schema == schema && e.reference.name.as_deref() == name)
            .map(|e| e.message.as_str())
    }

    /// Channels of package `package`.
    pub fn channels_of<'a>(&'a self, package: &'a str) -> impl Iterator<Item = &'a Channel> + 'a {
        self.channels.iter().filter(move |c| c.package == package)
    }

    /// Bundles of package `package`.
    pub fn bundles_of<'a>(&'a self, package: &'a str) -> impl Iterator<Item = &'a Bundle> + 'a {
        self.bundles.iter().filter(move |b| b.package == package)
    }

    /// The bundle `name` of package `package`.
    pub fn bundle(&self, package: &str, name: &str) -> Option<&Bundle> {
        self.bundles
            .iter()
            .find(|b| b.package == package && b.name == name)
    }

    /// Appends everything of `other`.
    pub fn extend(&mut self, other: Catalog) {
        self.packages.extend(other.packages);
        self.channels.extend(other.channels);
        self.bundles.extend(other.bundles);
        self.deprecations.extend(other.deprecations);
        self.others.extend(other.others);
    }

    /// Sorts blobs as `opm` writes them: by package, then packages, channels and bundles by name,
    /// deprecations, then other blobs by schema and name.
    pub fn sort(&mut self) {
        self.packages.sort_by(|a, b| a.name.cmp(&b.name));
        self.channels
            .sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
        self.bundles
            .sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
        self.deprecations.sort_by(|a, b| a.package.cmp(&b.package));
        self.others
            .sort_by(|a, b| (&a.package, &a.schema, &a.name).cmp(&(&b.package, &b.schema, &b.name)));
    }
}

fn ser_props<S: SerializeStruct>(st: &mut S, props: &[Property]) -> Result<(), S::Error> {
    if !props.is_empty() {
        st.serialize_field("properties", props)?;
    }
    Ok(())
}

impl Serialize for Package {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Package", 6)?;
        st.serialize_field("schema", schema::PACKAGE)?;
        st.serialize_field("name", &self.name)?;
        if let Some(d) = &self.default_channel {
            st.serialize_field("defaultChannel", d)?;
        }
        if let Some(i) = &self.icon {
            st.serialize_field("icon", i)?;
        }
        if let Some(d) = &self.description {
            st.serialize_field("description", d)?;
        }
        ser_props(&mut st, &self.properties)?;
        st.end()
    }
}

impl Serialize for Channel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Channel", 5)?;
        st.serialize_field("schema", schema::CHANNEL)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("package", &self.package)?;
        st.serialize_field("entries", &self.entries)?;
        ser_props(&mut st, &self.properties)?;
        st.end()
    }
}

impl Serialize for Bundle {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Bundle", 6)?;
        st.serialize_field("schema", schema::BUNDLE)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("package", &self.package)?;
        st.serialize_field("image", &self.image)?;
        ser_props(&mut st, &self.properties)?;
        if !self.related_images.is_empty() {
            st.serialize_field("relatedImages", &self.related_images)?;
        }
        st.end()
    }
}

impl Serialize for Deprecation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Deprecation", 3)?;
        st.serialize_field("schema", schema::DEPRECATIONS)?;
        st.serialize_field("package", &self.package)?;
        st.serialize_field("entries", &self.entries)?;
        st.end()
    }
}

impl Serialize for Meta {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.blob.serialize(s)
    }
}
