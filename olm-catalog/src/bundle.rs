//! Bundle directories: `manifests/` (the CSV, CRDs and other objects) and `metadata/`, read as
//! operator-registry reads them.
//!
//! Every file of `metadata/` is read by content, not by name: the first file with a non-empty
//! `annotations:` map of bundle annotations gives package and channels, the first with a non-empty
//! `dependencies:` list gives the dependencies, and the first with a non-empty `properties:` list
//! gives extra properties (so a `properties.yaml` holding `dependencies:` works, as it does in OLM).
//! In `manifests/`, every non-hidden file holds one object (only its first document is read, as
//! `opm` does); files that do not parse are skipped with a warning; the first CSV is the bundle's.
//! A version directory may also nest the bundle one level deeper, in `bundle/`.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use olm_api::{
    actions::{self, Actions, ActionsError},
    endpoints::{self, Endpoints, EndpointsError},
};
use serde_json::Value;

use crate::{
    docs,
    error::{LoadError, Position},
    model::{Icon, RelatedImage},
    property::{self, Constraint, Gvk, Property, RawJson},
};

/// Bundle annotation keys.
pub mod annotations {
    /// Package name.
    pub const PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";
    /// Comma-separated channels.
    pub const CHANNELS: &str = "operators.operatorframework.io.bundle.channels.v1";
    /// Default channel.
    pub const DEFAULT_CHANNEL: &str = "operators.operatorframework.io.bundle.channel.default.v1";
    /// Prefix shared by the bundle annotations.
    pub const BUNDLE_PREFIX: &str = "operators.operatorframework.io.bundle.";
    /// CSV annotation: range of versions the CSV replaces directly.
    pub const SKIP_RANGE: &str = "olm.skipRange";
    /// CSV annotation: extra properties, as a JSON list.
    pub const PROPERTIES: &str = "olm.properties";
}

/// Kind of the ClusterServiceVersion object.
pub const CSV_KIND: &str = "ClusterServiceVersion";
/// Kind of the CustomResourceDefinition object.
pub const CRD_KIND: &str = "CustomResourceDefinition";

/// One object of a bundle, with the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Source file (or a synthetic name for objects from a ConfigMap).
    pub file: PathBuf,
    /// The object.
    pub object: Value,
}

impl Manifest {
    /// `kind`.
    pub fn kind(&self) -> &str {
        self.object.get("kind").and_then(Value::as_str).unwrap_or("")
    }

    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        self.object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// Whether this is an `apiextensions.k8s.io` v1 or v1beta1 CRD.
    pub fn is_crd(&self) -> bool {
        self.kind() == CRD_KIND
            && matches!(
                self.api_version(),
                "apiextensions.k8s.io/v1" | "apiextensions.k8s.io/v1beta1"
            )
    }

    /// For a CRD, the APIs it serves: one per `spec.versions[].name`, plus `spec.version` (v1beta1).
    pub fn crd_apis(&self) -> Vec<Gvk> {
        if !self.is_crd() {
            return Vec::new();
        }
        let spec = &self.object["spec"];
        let group = spec["group"].as_str().unwrap_or("").to_owned();
        let kind = spec
            .pointer("/names/kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let mut versions: Vec<String> = spec["versions"]
            .as_array()
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| v["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(v) = spec["version"].as_str().filter(|v| !v.is_empty()) {
            versions.push(v.to_owned());
        }
        versions
            .into_iter()
            .map(|version| Gvk {
                group: group.clone(),
                kind: kind.clone(),
                version,
            })
            .collect()
    }
}

/// A CRD named by a CSV (`spec.customresourcedefinitions.owned|required[]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CrdKey {
    /// `<plural>.<group>`.
    pub name: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl CrdKey {
    /// The API, with the group taken from the name (`plural.group`), or `None` if the name has no dot.
    pub fn gvk(&self) -> Option<Gvk> {
        let (_, group) = self.name.split_once('.')?;
        Some(Gvk {
            group: group.to_owned(),
            kind: self.kind.clone(),
            version: self.version.clone(),
        })
    }
}

/// An API service named by a CSV (`spec.apiservicedefinitions.owned|required[]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiServiceKey {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Resource plural name.
    pub name: String,
}

impl ApiServiceKey {
    /// The API.
    pub fn gvk(&self) -> Gvk {
        Gvk {
            group: self.group.clone(),
            kind: self.kind.clone(),
            version: self.version.clone(),
        }
    }
}

/// An install mode of a CSV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallMode {
    /// `OwnNamespace`, `SingleNamespace`, `MultiNamespace` or `AllNamespaces`.
    pub type_: String,
    /// Whether it is supported.
    pub supported: bool,
}

/// Read-only typed access to a ClusterServiceVersion kept as JSON.
#[derive(Debug, Clone, Copy)]
pub struct Csv<'a>(pub &'a Value);

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

impl<'a> Csv<'a> {
    /// `metadata.name`.
    pub fn name(&self) -> &'a str {
        self.0
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `spec.version`, if it is a string.
    pub fn version(&self) -> Option<&'a str> {
        self.0.pointer("/spec/version").and_then(Value::as_str)
    }

    /// `spec.replaces`, if set and not empty.
    pub fn replaces(&self) -> Option<&'a str> {
        self.0
            .pointer("/spec/replaces")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// `spec.skips`.
    pub fn skips(&self) -> Vec<String> {
        self.0.pointer("/spec/skips").map(strs).unwrap_or_default()
    }

    /// An annotation of `metadata.annotations`.
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.0.pointer("/metadata/annotations")?.get(key)?.as_str()
    }

    /// `metadata.annotations`, as a JSON object (or `None`).
    pub fn annotations(&self) -> Option<&'a serde_json::Map<String, Value>> {
        self.0.pointer("/metadata/annotations").and_then(Value::as_object)
    }

    /// The `olm.skipRange` annotation, if set and not empty.
    pub fn skip_range(&self) -> Option<&'a str> {
        self.annotation(annotations::SKIP_RANGE)
            .filter(|s| !s.trim().is_empty())
    }

    /// The relation endpoints the CSV declares in olm-rs's annotation
    /// ([`olm_api::endpoints::ANNOTATION`]); `None` without it.
    pub fn endpoints(&self) -> Result<Option<Endpoints>, EndpointsError> {
        self.annotation(endpoints::ANNOTATION)
            .map(|text| Endpoints::parse(self.name(), text))
            .transpose()
    }

    /// The catalog property ([`olm_api::endpoints::PROPERTY`]) that carries
    /// the CSV's endpoints annotation unchanged, even when it does not parse
    /// (the catalog's validation says why); `None` without the annotation.
    pub fn endpoints_property(&self) -> Option<Property> {
        self.carried(endpoints::ANNOTATION, endpoints::PROPERTY)
    }

    /// The actions the CSV declares in olm-rs's annotation
    /// ([`olm_api::actions::ANNOTATION`]); `None` without it.
    pub fn actions(&self) -> Result<Option<Actions>, ActionsError> {
        self.annotation(actions::ANNOTATION)
            .map(|text| Actions::parse(self.name(), text))
            .transpose()
    }

    /// The catalog property ([`olm_api::actions::PROPERTY`]) that carries
    /// the CSV's actions annotation unchanged, even when it does not parse
    /// (the catalog's validation says why); `None` without the annotation.
    pub fn actions_property(&self) -> Option<Property> {
        self.carried(actions::ANNOTATION, actions::PROPERTY)
    }

    /// The catalog property `property` that carries the CSV's `annotation`
    /// unchanged ([`olm_api::declaration::property_value`]); `None` without
    /// the annotation.
    fn carried(&self, annotation: &str, property: &str) -> Option<Property> {
        let value = olm_api::declaration::property_value(self.annotation(annotation)?)?;
        Some(Property::Other {
            type_: property.to_owned(),
            value: RawJson::from_value(&value),
        })
    }

    /// Properties of the `olm.properties` annotation (a JSON list), or why it does not parse.
    pub fn annotation_properties(&self) -> Result<Vec<Property>, String> {
        let Some(text) = self.annotation(annotations::PROPERTIES) else {
            return Ok(Vec::new());
        };
        let value: Value = serde_json::from_str(text)
            .map_err(|e| format!("annotation {} is not JSON: {e}", annotations::PROPERTIES))?;
        property::parse_list(value).map_err(|e| format!("annotation {}: {e}", annotations::PROPERTIES))
    }

    fn keys(&self, pointer: &str) -> Vec<CrdKey> {
        let Some(items) = self.0.pointer(pointer).and_then(Value::as_array) else {
            return Vec::new();
        };
        items
            .iter()
            .map(|i| CrdKey {
                name: i["name"].as_str().unwrap_or("").to_owned(),
                version: i["version"].as_str().unwrap_or("").to_owned(),
                kind: i["kind"].as_str().unwrap_or("").to_owned(),
            })
            .collect()
    }

    /// `spec.customresourcedefinitions.owned`.
    pub fn owned_crds(&self) -> Vec<CrdKey> {
        self.keys("/spec/customresourcedefinitions/owned")
    }

    /// `spec.customresourcedefinitions.required`.
    pub fn required_crds(&self) -> Vec<CrdKey> {
        self.keys("/spec/customresourcedefinitions/required")
    }

    fn api_services(&self, pointer: &str) -> Vec<ApiServiceKey> {
        let Some(items) = self.0.pointer(pointer).and_then(Value::as_array) else {
            return Vec::new();
        };
        let s = |i: &Value, k: &str| i[k].as_str().unwrap_or("").to_owned();
        items
            .iter()
            .map(|i| ApiServiceKey {
                group: s(i, "group"),
                version: s(i, "version"),
                kind: s(i, "kind"),
                name: s(i, "name"),
            })
            .collect()
    }

    /// `spec.apiservicedefinitions.owned`.
    pub fn owned_api_services(&self) -> Vec<ApiServiceKey> {
        self.api_services("/spec/apiservicedefinitions/owned")
    }

    /// `spec.apiservicedefinitions.required`.
    pub fn required_api_services(&self) -> Vec<ApiServiceKey> {
        self.api_services("/spec/apiservicedefinitions/required")
    }

    /// `spec.installModes`.
    pub fn install_modes(&self) -> Vec<InstallMode> {
        let Some(items) = self.0.pointer("/spec/installModes").and_then(Value::as_array) else {
            return Vec::new();
        };
        items
            .iter()
            .map(|m| InstallMode {
                type_: m["type"].as_str().unwrap_or("").to_owned(),
                supported: m["supported"].as_bool().unwrap_or(false),
            })
            .collect()
    }

    /// `spec.relatedImages`.
    pub fn related_images(&self) -> Vec<RelatedImage> {
        let Some(items) = self.0.pointer("/spec/relatedImages").and_then(Value::as_array) else {
            return Vec::new();
        };
        items
            .iter()
            .map(|i| RelatedImage {
                name: i["name"].as_str().unwrap_or("").to_owned(),
                image: i["image"].as_str().unwrap_or("").to_owned(),
            })
            .collect()
    }

    /// Images of the containers and init containers of the install strategy's deployments.
    pub fn operator_images(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let Some(deployments) = self
            .0
            .pointer("/spec/install/spec/deployments")
            .and_then(Value::as_array)
        else {
            return out;
        };
        for d in deployments {
            for list in ["containers", "initContainers"] {
                let Some(cs) = d
                    .pointer(&format!("/spec/template/spec/{list}"))
                    .and_then(Value::as_array)
                else {
                    continue;
                };
                out.extend(
                    cs.iter()
                        .filter_map(|c| c["image"].as_str())
                        .filter(|i| !i.is_empty())
                        .map(str::to_owned),
                );
            }
        }
        out
    }

    /// `spec.minKubeVersion`.
    pub fn min_kube_version(&self) -> Option<&'a str> {
        self.0
            .pointer("/spec/minKubeVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// `spec.displayName`.
    pub fn display_name(&self) -> Option<&'a str> {
        self.0.pointer("/spec/displayName").and_then(Value::as_str)
    }

    /// `spec.description`.
    pub fn description(&self) -> Option<&'a str> {
        self.0.pointer("/spec/description").and_then(Value::as_str)
    }

    /// The first icon of `spec.icon`.
    pub fn icon(&self) -> Option<Icon> {
        let icon = self.0.pointer("/spec/icon/0")?;
        Some(Icon {
            base64data: icon["base64data"].as_str().unwrap_or("").to_owned(),
            mediatype: icon["mediatype"].as_str().unwrap_or("").to_owned(),
        })
    }
}

/// A dependency declared in a bundle's metadata.
#[derive(Debug, Clone, PartialEq)]
pub enum Dependency {
    /// `olm.package`: a package in a version range (a bare version pins it).
    Package {
        /// Package name.
        package_name: String,
        /// Version range.
        version: String,
    },
    /// `olm.gvk`: an API.
    Gvk(Gvk),
    /// `olm.label`: a label some bundle must provide.
    Label(String),
    /// `olm.constraint`: a generic constraint.
    Constraint(Constraint),
    /// Another type, kept verbatim.
    Other {
        /// The type.
        type_: String,
        /// The value.
        value: RawJson,
    },
}

impl Dependency {
    /// Parses one `{type, value}` item of a `dependencies:` list.
    pub fn from_value(item: Value) -> Result<Self, String> {
        let type_ = item
            .get("type")
            .and_then(Value::as_str)
            .ok_or("dependency has no `type`")?
            .to_owned();
        let value = item
            .get("value")
            .cloned()
            .ok_or_else(|| format!("dependency {type_} has no `value`"))?;
        let field = |k: &str| -> Result<String, String> {
            match value.get(k) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(Value::Number(n)) => Ok(n.to_string()),
                Some(_) => Err(format!("dependency {type_}: `{k}` must be a string")),
                None => Err(format!("dependency {type_}: missing `{k}`")),
            }
        };
        Ok(match type_.as_str() {
            "olm.package" => Self::Package {
                package_name: field("packageName")?,
                version: field("version")?,
            },
            "olm.gvk" => Self::Gvk(Gvk {
                group: field("group")?,
                version: field("version")?,
                kind: field("kind")?,
            }),
            "olm.label" => Self::Label(field("label")?),
            "olm.constraint" => {
                if !value.is_object() {
                    return Err(format!("dependency {type_}: the value must be an object"));
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
            _ => Self::Other {
                value: RawJson::from_value(&value),
                type_,
            },
        })
    }

    /// The property a render emits for this dependency: `olm.package.required`,
    /// `olm.gvk.required`, `olm.label.required`, `olm.constraint`, or the type as written.
    pub fn to_property(&self) -> Property {
        match self {
            Self::Package {
                package_name,
                version,
            } => Property::PackageRequired(property::PackageRequired {
                package_name: package_name.clone(),
                version_range: version.clone(),
            }),
            Self::Gvk(g) => Property::GvkRequired(g.clone()),
            Self::Label(l) => Property::LabelRequired(l.clone()),
            Self::Constraint(c) => Property::Constraint(c.clone()),
            Self::Other { type_, value } => Property::Other {
                type_: type_.clone(),
                value: value.clone(),
            },
        }
    }
}

/// A bundle read from a directory (or built from a package manifest or ConfigMap).
#[derive(Debug, Clone, PartialEq)]
pub struct BundleDir {
    /// The bundle root (the directory holding `manifests/` and `metadata/`).
    pub path: PathBuf,
    /// Package, from the package annotation.
    pub package: String,
    /// Channels, from the channels annotation.
    pub channels: Vec<String>,
    /// Default channel, from the default-channel annotation.
    pub default_channel: Option<String>,
    /// All annotations of the annotations file.
    pub annotations: BTreeMap<String, String>,
    /// Objects of `manifests/`, in file name order; one of them is the CSV.
    pub objects: Vec<Manifest>,
    /// Index of the CSV in `objects`.
    pub csv_index: usize,
    /// Dependencies from the metadata file that has them.
    pub dependencies: Vec<Dependency>,
    /// Properties from the metadata file that has them.
    pub properties: Vec<Property>,
    /// Files skipped and other oddities, in plain words.
    pub warnings: Vec<String>,
}

impl BundleDir {
    /// The CSV (an empty one if `csv_index` points nowhere, which the loaders never do).
    pub fn csv(&self) -> Csv<'_> {
        static NONE: Value = Value::Null;
        Csv(self.objects.get(self.csv_index).map_or(&NONE, |m| &m.object))
    }

    /// The CSV's name, which is the bundle name.
    pub fn name(&self) -> &str {
        self.csv().name()
    }

    /// The CRD objects of the bundle.
    pub fn crds(&self) -> impl Iterator<Item = &Manifest> {
        self.objects.iter().filter(|m| m.is_crd())
    }
}

/// Where the bundle of a version directory is: the directory itself if it holds `manifests/` and
/// `metadata/`, else its `bundle/` subdirectory if that does.
pub fn bundle_root(dir: &Path) -> Option<PathBuf> {
    let is_bundle = |d: &Path| d.join("manifests").is_dir() && d.join("metadata").is_dir();
    if is_bundle(dir) {
        Some(dir.to_path_buf())
    } else if is_bundle(&dir.join("bundle")) {
        Some(dir.join("bundle"))
    } else {
        None
    }
}

/// Regular, non-hidden files of `dir`, sorted by name.
pub(crate) fn files_of(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| LoadError::io(dir, e))? {
        let entry = entry.map_err(|e| LoadError::io(dir, e))?;
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if !hidden && entry.file_type().map_err(|e| LoadError::io(&path, e))?.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Reads the objects of a manifests directory: the first document of each file; files that do not
/// parse or hold no object are skipped with a warning.
pub(crate) fn read_manifests(dir: &Path, warnings: &mut Vec<String>) -> Result<Vec<Manifest>, LoadError> {
    let mut objects = Vec::new();
    for file in files_of(dir)? {
        let text = docs::read_text(&file)?;
        match docs::parse_documents(&file, &text) {
            Ok(docs) => {
                if docs.len() > 1 {
                    warnings.push(format!(
                        "{}: {} documents, only the first is read (as opm does)",
                        file.display(),
                        docs.len()
                    ));
                }
                match docs.into_iter().next() {
                    Some(object @ Value::Object(_)) => objects.push(Manifest { file, object }),
                    _ => warnings.push(format!("{}: no object, skipped", file.display())),
                }
            }
            Err(e) => warnings.push(format!("skipped: {}", crate::error::display_chain(&e))),
        }
    }
    Ok(objects)
}

/// Index of the first CSV; later CSVs are dropped with a warning.
pub(crate) fn take_csv(
    objects: &mut Vec<Manifest>,
    dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<usize, LoadError> {
    let Some(first) = objects.iter().position(|m| m.kind() == CSV_KIND) else {
        let mut message = "no ClusterServiceVersion among the manifests".to_owned();
        if !warnings.is_empty() {
            message.push_str(&format!(" ({})", warnings.join("; ")));
        }
        return Err(LoadError::invalid(dir, Position::default(), message));
    };
    let mut i = 0;
    objects.retain(|m| {
        let keep = i <= first || m.kind() != CSV_KIND;
        if !keep {
            warnings.push(format!(
                "{}: a second ClusterServiceVersion, ignored",
                m.file.display()
            ));
        }
        i += 1;
        keep
    });
    if objects[first]
        .object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        return Err(LoadError::invalid(
            &objects[first].file,
            Position::default(),
            "the CSV has no metadata.name",
        ));
    }
    Ok(first)
}

fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Splits the channels annotation.
pub(crate) fn split_channels(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What a bundle's `metadata/` directory gives: the first file with an
/// `annotations:` map of bundle annotations, the first with `dependencies`, the
/// first with `properties`.
#[derive(Default)]
struct Metadata {
    annotations: Option<BTreeMap<String, String>>,
    dependencies: Option<Vec<Dependency>>,
    properties: Option<Vec<Property>>,
}

impl Metadata {
    /// Reads the files of `dir`; a file that does not parse is skipped with a warning.
    fn read(dir: &Path, warnings: &mut Vec<String>) -> Result<Metadata, LoadError> {
        let mut metadata = Metadata::default();
        for file in files_of(dir)? {
            let text = docs::read_text(&file)?;
            match docs::parse_first_document(&file, &text) {
                Ok(Some(doc)) => metadata.take(&file, &doc)?,
                Ok(None) => {}
                Err(e) => warnings.push(format!("skipped: {}", crate::error::display_chain(&e))),
            }
        }
        Ok(metadata)
    }

    /// Takes from `doc` (of `file`) what is not found yet.
    fn take(&mut self, file: &Path, doc: &Value) -> Result<(), LoadError> {
        if self.annotations.is_none()
            && let Some(map) = doc.get("annotations").and_then(Value::as_object)
        {
            let map: BTreeMap<String, String> = map
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), scalar_string(v)?)))
                .collect();
            if map.keys().any(|k| k.starts_with(annotations::BUNDLE_PREFIX)) {
                self.annotations = Some(map);
            }
        }
        if self.dependencies.is_none()
            && let Some(items) = doc
                .get("dependencies")
                .and_then(Value::as_array)
                .filter(|a| !a.is_empty())
        {
            let deps = items
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    Dependency::from_value(d.clone()).map_err(|m| format!("dependencies[{i}]: {m}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|m| LoadError::invalid(file, Position::default(), m))?;
            self.dependencies = Some(deps);
        }
        if self.properties.is_none()
            && let Some(items) = doc
                .get("properties")
                .filter(|p| p.as_array().is_some_and(|a| !a.is_empty()))
        {
            let props = property::parse_list(items.clone())
                .map_err(|m| LoadError::invalid(file, Position::default(), m))?;
            self.properties = Some(props);
        }
        Ok(())
    }
}

/// Loads a bundle directory. `path` may be the bundle root or a version directory with a nested
/// `bundle/`.
pub fn load_bundle_dir(path: impl AsRef<Path>) -> Result<BundleDir, LoadError> {
    let path = path.as_ref();
    let root = bundle_root(path).ok_or_else(|| {
        LoadError::invalid(
            path,
            Position::default(),
            "not a bundle: no manifests/ and metadata/ directories",
        )
    })?;
    let mut warnings = Vec::new();

    let mut objects = read_manifests(&root.join("manifests"), &mut warnings)?;
    let csv_index = take_csv(&mut objects, &root.join("manifests"), &mut warnings)?;

    let metadata = Metadata::read(&root.join("metadata"), &mut warnings)?;
    let annotations = metadata.annotations.ok_or_else(|| {
        LoadError::invalid(
            root.join("metadata"),
            Position::default(),
            "no annotations file: no metadata file has an `annotations:` map of bundle annotations",
        )
    })?;
    let (dependencies, properties) = (metadata.dependencies, metadata.properties);
    let package = annotations
        .get(annotations::PACKAGE)
        .filter(|p| !p.is_empty())
        .cloned()
        .ok_or_else(|| {
            LoadError::invalid(
                root.join("metadata"),
                Position::default(),
                format!("the annotations have no {}", annotations::PACKAGE),
            )
        })?;
    let channels = annotations
        .get(annotations::CHANNELS)
        .map(|c| split_channels(c))
        .unwrap_or_default();
    if channels.is_empty() {
        return Err(LoadError::invalid(
            root.join("metadata"),
            Position::default(),
            format!("the annotations have no {}", annotations::CHANNELS),
        ));
    }
    let default_channel = annotations
        .get(annotations::DEFAULT_CHANNEL)
        .filter(|c| !c.is_empty())
        .cloned();
    if let Err(e) = Csv(&objects[csv_index].object).annotation_properties() {
        warnings.push(format!(
            "{}: {e}; ignored, as opm does",
            objects[csv_index].file.display()
        ));
    }
    if let Err(e) = Csv(&objects[csv_index].object).endpoints() {
        warnings.push(format!(
            "{}: {e}; the catalog's validation refuses the bundle",
            objects[csv_index].file.display()
        ));
    }
    if let Err(e) = Csv(&objects[csv_index].object).actions() {
        warnings.push(format!(
            "{}: {e}; the catalog's validation refuses the bundle",
            objects[csv_index].file.display()
        ));
    }
    Ok(BundleDir {
        path: root,
        package,
        channels,
        default_channel,
        annotations,
        objects,
        csv_index,
        dependencies: dependencies.unwrap_or_default(),
        properties: properties.unwrap_or_default(),
        warnings,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::display_chain;

    pub(crate) const CSV: &str = r#"apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: foo.v1.2.0
  annotations:
    olm.skipRange: ">=1.0.0 <1.2.0"
    olm.properties: '[{"type": "olm.maxOpenShiftVersion", "value": "4.8"}]'
    alm-examples: '[]'
spec:
  version: 1.2.0
  replaces: foo.v1.1.0
  skips: [foo.v1.1.1]
  displayName: Foo
  description: The foo operator
  icon: [{base64data: aWNvbg==, mediatype: image/png}]
  installModes:
    - {type: OwnNamespace, supported: true}
    - {type: AllNamespaces, supported: false}
  customresourcedefinitions:
    owned:
      - {name: foos.foo.io, version: v1, kind: Foo}
    required:
      - {name: bars.bar.io, version: v1alpha1, kind: Bar}
  install:
    strategy: deployment
    spec:
      deployments:
        - name: foo
          spec:
            template:
              spec:
                containers: [{name: m, image: "quay.io/foo/op:1.2.0"}]
                initContainers: [{name: i, image: "quay.io/foo/init:1.2.0"}]
  relatedImages:
    - {name: op, image: "quay.io/foo/op:1.2.0"}
"#;

    pub(crate) const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: foos.foo.io}
spec:
  group: foo.io
  names: {kind: Foo, plural: foos}
  scope: Namespaced
  versions:
    - {name: v1, served: true, storage: true}
    - {name: v1beta1, served: false, storage: false}
"#;

    /// Writes a bundle directory under a fresh temporary directory and returns its path.
    pub(crate) fn write_bundle(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("olm-catalog-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (rel, text) in files {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    const ANNOTATIONS: &str = "annotations:\n  operators.operatorframework.io.bundle.package.v1: foo\n  operators.operatorframework.io.bundle.channels.v1: stable, fast\n  operators.operatorframework.io.bundle.channel.default.v1: stable\n";

    #[test]
    fn metadata_files_are_read_by_content() {
        let dir = write_bundle(
            "by-content",
            &[
                ("manifests/foo.csv.yaml", CSV),
                ("manifests/foos.crd.yml", CRD),
                ("manifests/.hidden.yaml", "not: read"),
                ("metadata/annotations.yaml", ANNOTATIONS),
                (
                    "metadata/properties.yaml",
                    "dependencies:\n- type: olm.package\n  value: {packageName: bar, version: \">=1.0.0\"}\n- type: olm.gvk\n  value: {group: bar.io, version: v1, kind: Bar}\n- type: olm.label\n  value: {label: x}\n- type: olm.constraint\n  value: {failureMessage: needs x, cel: {rule: 'true'}}\n",
                ),
                (
                    "metadata/zz-more.yaml",
                    "properties:\n- type: olm.maxOpenShiftVersion\n  value: '4.9'\n",
                ),
            ],
        );
        let b = load_bundle_dir(&dir).unwrap();
        assert_eq!(b.package, "foo");
        assert_eq!(b.channels, ["stable", "fast"]);
        assert_eq!(b.default_channel.as_deref(), Some("stable"));
        assert_eq!(b.name(), "foo.v1.2.0");
        assert_eq!(b.objects.len(), 2);
        assert_eq!(b.crds().count(), 1);
        assert_eq!(b.dependencies.len(), 4);
        assert!(matches!(&b.dependencies[0], Dependency::Package { version, .. } if version == ">=1.0.0"));
        assert!(
            matches!(&b.dependencies[3], Dependency::Constraint(c) if c.failure_message.as_deref() == Some("needs x"))
        );
        assert_eq!(b.properties.len(), 1);
        let csv = b.csv();
        assert_eq!(csv.version(), Some("1.2.0"));
        assert_eq!(csv.replaces(), Some("foo.v1.1.0"));
        assert_eq!(csv.skips(), ["foo.v1.1.1"]);
        assert_eq!(csv.skip_range(), Some(">=1.0.0 <1.2.0"));
        assert_eq!(csv.annotation_properties().unwrap().len(), 1);
        assert_eq!(csv.owned_crds()[0].gvk().unwrap().group, "foo.io");
        assert_eq!(csv.required_crds()[0].kind, "Bar");
        assert_eq!(csv.install_modes().len(), 2);
        assert_eq!(csv.operator_images().len(), 2);
        assert_eq!(csv.related_images()[0].name, "op");
        assert_eq!(csv.icon().unwrap().mediatype, "image/png");
        assert_eq!(b.crds().next().unwrap().crd_apis().len(), 2);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn nested_bundle_layout() {
        let dir = write_bundle(
            "nested",
            &[
                ("bundle/manifests/csv.yaml", CSV),
                ("bundle/metadata/annotations.yaml", ANNOTATIONS),
            ],
        );
        let b = load_bundle_dir(&dir).unwrap();
        assert_eq!(b.path, dir.join("bundle"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn errors_name_the_file_and_cause() {
        let dir = write_bundle(
            "no-annotations",
            &[("manifests/csv.yaml", CSV), ("metadata/other.yaml", "x: 1")],
        );
        let msg = display_chain(&load_bundle_dir(&dir).unwrap_err());
        assert!(
            msg.contains("metadata") && msg.contains("no annotations file"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();

        let dir = write_bundle(
            "no-csv",
            &[
                ("manifests/crd.yaml", CRD),
                ("metadata/annotations.yaml", ANNOTATIONS),
            ],
        );
        let msg = display_chain(&load_bundle_dir(&dir).unwrap_err());
        assert!(
            msg.contains("manifests") && msg.contains("no ClusterServiceVersion"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();

        let dir = write_bundle(
            "bad-dep",
            &[
                ("manifests/csv.yaml", CSV),
                ("metadata/annotations.yaml", ANNOTATIONS),
                (
                    "metadata/dependencies.yaml",
                    "dependencies:\n- type: olm.gvk\n  value: {group: g}\n",
                ),
            ],
        );
        let msg = display_chain(&load_bundle_dir(&dir).unwrap_err());
        assert!(
            msg.contains("dependencies.yaml")
                && msg.contains("dependencies[0]: dependency olm.gvk: missing `version`"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();

        let dir = write_bundle(
            "broken-manifest",
            &[
                ("manifests/csv.yaml", CSV),
                ("manifests/bad.yaml", "a: [\n"),
                ("metadata/annotations.yaml", ANNOTATIONS),
            ],
        );
        let b = load_bundle_dir(&dir).unwrap();
        assert!(b.warnings[0].contains("bad.yaml"), "{:?}", b.warnings);
        std::fs::remove_dir_all(&dir).unwrap();

        let msg = display_chain(&load_bundle_dir("/nonexistent/bundle").unwrap_err());
        assert!(
            msg.contains("/nonexistent/bundle") && msg.contains("not a bundle"),
            "{msg}"
        );
    }
}
