//! Bundle, package and channel properties (`{type, value}` pairs), typed where OLM gives the type a
//! meaning and kept verbatim otherwise.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer, ser::SerializeStruct};
use serde_json::{Value, value::RawValue};

use crate::version::Version;

/// Well-known property types.
pub mod types {
    /// The package and version a bundle provides.
    pub const PACKAGE: &str = "olm.package";
    /// A package (and version range) a bundle needs.
    pub const PACKAGE_REQUIRED: &str = "olm.package.required";
    /// An API (group, version, kind) a bundle provides.
    pub const GVK: &str = "olm.gvk";
    /// An API a bundle needs.
    pub const GVK_REQUIRED: &str = "olm.gvk.required";
    /// A label a bundle provides.
    pub const LABEL: &str = "olm.label";
    /// A label a bundle needs.
    pub const LABEL_REQUIRED: &str = "olm.label.required";
    /// A generic constraint (gvk, package, cel, all, any, not) with a failure message.
    pub const CONSTRAINT: &str = "olm.constraint";
    /// One manifest of the bundle, base64-encoded JSON.
    pub const BUNDLE_OBJECT: &str = "olm.bundle.object";
    /// The CSV fields a UI needs, in place of the bundle's objects.
    pub const CSV_METADATA: &str = "olm.csv.metadata";
    /// A channel the bundle belongs to (older catalogs).
    pub const CHANNEL: &str = "olm.channel";
    /// The bundle is deprecated (sqlite-era catalogs).
    pub const DEPRECATED: &str = "olm.deprecated";
}

/// JSON kept as compact text: opaque values that OLM passes on without looking inside.
#[derive(Clone)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// Compact text of `value`, object keys sorted.
    pub fn from_value(value: &Value) -> Self {
        // Serializing cannot fail for a Value; the fallback (`null`) is never taken.
        Self(serde_json::value::to_raw_value(&Sorted(value)).unwrap_or_default())
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Parses the text back into a [`Value`].
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RawJson {}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// Serializes a Value with object keys sorted, whatever the map type serde_json was built with.
struct Sorted<'a>(&'a Value);

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for i in items {
                    seq.serialize_element(&Sorted(i))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let mut m = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, &Sorted(v))?;
                }
                m.end()
            }
            other => other.serialize(s),
        }
    }
}

/// `olm.package`: the package and version a bundle provides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageProperty {
    /// Package name.
    pub package_name: String,
    /// Bundle version.
    pub version: Version,
    /// Release label of newer catalogs (`olm.package` with `release`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

/// `olm.package.required`: a package the bundle needs, in a semver range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageRequired {
    /// Package name.
    pub package_name: String,
    /// Range of acceptable versions, in blang/semver range syntax (e.g. `>=1.2.0 <2.0.0`).
    pub version_range: String,
}

/// A group/version/kind, the value of `olm.gvk` and `olm.gvk.required`.
/// Serialized in Go's field order (group, kind, version), which is also the sort order of renders.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Gvk {
    /// API group (empty for the core group).
    #[serde(default)]
    pub group: String,
    /// Kind.
    pub kind: String,
    /// API version.
    pub version: String,
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}

/// `olm.constraint`: a generic constraint, kept as JSON for the resolver, with its failure message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// `failureMessage`, shown when the constraint cannot be met.
    pub failure_message: Option<String>,
    /// The whole constraint value (`{"failureMessage": …, "gvk"|"package"|"cel"|"all"|"any"|"not": …}`).
    pub value: RawJson,
}

/// `olm.bundle.object`: one manifest of the bundle, as base64 of its JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleObject {
    /// Base64 (standard alphabet, padded) of the object's JSON.
    pub data: String,
}

impl BundleObject {
    /// Encodes `json` as the property value.
    pub fn from_json(json: &str) -> Self {
        use base64::Engine;
        Self {
            data: base64::engine::general_purpose::STANDARD.encode(json),
        }
    }

    /// Decodes the object.
    pub fn decode(&self) -> Result<Value, String> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.data.as_bytes())
            .map_err(|e| format!("olm.bundle.object data is not valid base64: {e}"))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("olm.bundle.object data is not JSON: {e}"))
    }
}

/// `olm.channel`: a channel the bundle belongs to, as written by older tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelProperty {
    /// Channel name.
    pub channel_name: String,
    /// Channel priority, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// The bundle this one replaces in that channel, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct LabelValue {
    label: String,
}

/// One property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Property {
    /// `olm.package`.
    Package(PackageProperty),
    /// `olm.package.required`.
    PackageRequired(PackageRequired),
    /// `olm.gvk`.
    Gvk(Gvk),
    /// `olm.gvk.required`.
    GvkRequired(Gvk),
    /// `olm.label` (`{"label": …}`).
    Label(String),
    /// `olm.label.required` (`{"label": …}`).
    LabelRequired(String),
    /// `olm.constraint`.
    Constraint(Constraint),
    /// `olm.bundle.object`.
    BundleObject(BundleObject),
    /// `olm.csv.metadata`, kept as JSON text.
    CsvMetadata(RawJson),
    /// `olm.channel`.
    Channel(ChannelProperty),
    /// `olm.deprecated`, kept as JSON text.
    Deprecated(RawJson),
    /// Any other type, kept verbatim (e.g. `olm.maxOpenShiftVersion`).
    Other {
        /// The property type.
        type_: String,
        /// The value.
        value: RawJson,
    },
}

impl Property {
    /// The property's `type`.
    pub fn type_name(&self) -> &str {
        match self {
            Self::Package(_) => types::PACKAGE,
            Self::PackageRequired(_) => types::PACKAGE_REQUIRED,
            Self::Gvk(_) => types::GVK,
            Self::GvkRequired(_) => types::GVK_REQUIRED,
            Self::Label(_) => types::LABEL,
            Self::LabelRequired(_) => types::LABEL_REQUIRED,
            Self::Constraint(_) => types::CONSTRAINT,
            Self::BundleObject(_) => types::BUNDLE_OBJECT,
            Self::CsvMetadata(_) => types::CSV_METADATA,
            Self::Channel(_) => types::CHANNEL,
            Self::Deprecated(_) => types::DEPRECATED,
            Self::Other { type_, .. } => type_,
        }
    }

    /// Builds a property from its `type` and JSON `value`; the message says what is wrong with a
    /// value that does not fit its (well-known) type.
    pub fn from_parts(type_: String, value: Value) -> Result<Self, String> {
        fn typed<T: serde::de::DeserializeOwned>(t: &str, v: Value) -> Result<T, String> {
            serde_json::from_value(v).map_err(|e| format!("invalid {t} property value: {e}"))
        }
        Ok(match type_.as_str() {
            types::PACKAGE => Self::Package(typed(&type_, value)?),
            types::PACKAGE_REQUIRED => Self::PackageRequired(typed(&type_, value)?),
            types::GVK => Self::Gvk(typed(&type_, value)?),
            types::GVK_REQUIRED => Self::GvkRequired(typed(&type_, value)?),
            types::LABEL => Self::Label(typed::<LabelValue>(&type_, value)?.label),
            types::LABEL_REQUIRED => Self::LabelRequired(typed::<LabelValue>(&type_, value)?.label),
            types::CONSTRAINT => {
                if !value.is_object() {
                    return Err(format!("invalid {type_} property value: not an object"));
                }
                let failure_message = value
                    .get("failureMessage")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                Self::Constraint(Constraint {
                    failure_message,
                    value: RawJson::from_value(&value),
                })
            }
            types::BUNDLE_OBJECT => {
                if value.get("ref").is_some() && value.get("data").is_none() {
                    return Err(format!(
                        "{type_} with a file reference (`ref`) is not supported: render the catalog with data"
                    ));
                }
                Self::BundleObject(typed(&type_, value)?)
            }
            types::CSV_METADATA => Self::CsvMetadata(RawJson::from_value(&value)),
            types::CHANNEL => Self::Channel(typed(&type_, value)?),
            types::DEPRECATED => Self::Deprecated(RawJson::from_value(&value)),
            _ => Self::Other {
                value: RawJson::from_value(&value),
                type_,
            },
        })
    }

    /// Builds a property from a `{"type": …, "value": …}` object.
    pub fn from_value(value: Value) -> Result<Self, String> {
        let Value::Object(mut map) = value else {
            return Err("property is not an object".to_owned());
        };
        let type_ = match map.remove("type") {
            Some(Value::String(t)) if !t.is_empty() => t,
            Some(_) => return Err("property `type` must be a non-empty string".to_owned()),
            None => return Err("property has no `type`".to_owned()),
        };
        let value = map
            .remove("value")
            .ok_or_else(|| format!("property {type_} has no `value`"))?;
        Self::from_parts(type_, value)
    }

    /// The value as compact JSON, written as operator-registry writes it (Go field order, no HTML
    /// escaping). Renders sort properties by type, then by this text.
    pub fn value_json(&self) -> String {
        serde_json::to_string(&ValueRef(self)).unwrap_or_default()
    }
}

/// Serializes the `value` of a property.
struct ValueRef<'a>(&'a Property);

impl Serialize for ValueRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Property::Package(v) => v.serialize(s),
            Property::PackageRequired(v) => v.serialize(s),
            Property::Gvk(v) | Property::GvkRequired(v) => v.serialize(s),
            Property::Label(l) | Property::LabelRequired(l) => LabelValue { label: l.clone() }.serialize(s),
            Property::Constraint(c) => c.value.serialize(s),
            Property::BundleObject(v) => v.serialize(s),
            Property::CsvMetadata(v) | Property::Deprecated(v) | Property::Other { value: v, .. } => {
                v.serialize(s)
            }
            Property::Channel(v) => v.serialize(s),
        }
    }
}

impl Serialize for Property {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Property", 2)?;
        st.serialize_field("type", self.type_name())?;
        st.serialize_field("value", &ValueRef(self))?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for Property {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::from_value(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// Parses a list of properties; errors name the index of the bad one.
pub(crate) fn parse_list(value: Value) -> Result<Vec<Property>, String> {
    let Value::Array(items) = value else {
        return Err("`properties` must be a list".to_owned());
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| Property::from_value(v).map_err(|e| format!("properties[{i}]: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_and_unknown_properties_round_trip() {
        let input = json!([
            {"type": "olm.package", "value": {"packageName": "p", "version": "1.0.0"}},
            {"type": "olm.gvk", "value": {"group": "g.io", "kind": "K", "version": "v1"}},
            {"type": "olm.package.required", "value": {"packageName": "q", "versionRange": ">2.0.0"}},
            {"type": "olm.constraint", "value": {"failureMessage": "need cel", "cel": {"rule": "true"}}},
            {"type": "olm.maxOpenShiftVersion", "value": "4.8"},
            {"type": "olm.bundle.object", "value": {"data": "e30="}},
        ]);
        let props = parse_list(input.clone()).unwrap();
        assert!(matches!(&props[0], Property::Package(p) if p.version.semver().is_some()));
        assert!(
            matches!(&props[3], Property::Constraint(c) if c.failure_message.as_deref() == Some("need cel"))
        );
        assert!(matches!(&props[4], Property::Other { type_, .. } if type_ == "olm.maxOpenShiftVersion"));
        assert_eq!(serde_json::to_value(&props).unwrap(), input);
        assert_eq!(
            props[1].value_json(),
            r#"{"group":"g.io","kind":"K","version":"v1"}"#
        );
        let Property::BundleObject(o) = &props[5] else {
            panic!()
        };
        assert_eq!(o.decode().unwrap(), json!({}));
    }

    #[test]
    fn bad_values_are_explained() {
        let err = parse_list(json!([{"type": "olm.gvk", "value": {"group": "g"}}])).unwrap_err();
        assert!(
            err.starts_with("properties[0]: invalid olm.gvk property value: missing field"),
            "{err}"
        );
        let err = parse_list(json!([{"value": 1}])).unwrap_err();
        assert_eq!(err, "properties[0]: property has no `type`");
    }
}
