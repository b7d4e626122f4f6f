//! Rendering bundles into file-based catalog content, as `opm render` does, and a directory of
//! bundle versions (a package, as in community-operators) into a whole catalog.
//!
//! A rendered bundle carries, sorted by type then by value as `opm` sorts them:
//! - `olm.package` (package annotation, CSV `spec.version`);
//! - `olm.gvk` for every version of every CRD object in the bundle, and every owned API service;
//! - `olm.gvk.required` for the CSV's required CRDs and API services, and `olm.gvk` dependencies;
//! - `olm.package.required` for `olm.package` dependencies (the version is the range);
//! - `olm.constraint`, `olm.label.required` and other dependencies, properties of the metadata
//!   properties file and of the CSV's `olm.properties` annotation, and `olm-rs.endpoints`, the
//!   relation endpoints of the CSV's `olm-rs.dev/endpoints` annotation, carried unchanged (as JSON,
//!   or as the text itself when it is not YAML: the catalog's validation says what is wrong);
//! - then one `olm.bundle.object` per manifest (base64 of its JSON, as Go writes it) and/or
//!   `olm.csv.metadata`, last.
//!
//! `opm` writes an `olm.label` dependency as an `olm.label` property, which would make the bundle
//! *provide* the label; here it becomes `olm.label.required`, which is what it means.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use serde_json::{Map, Value};

use crate::{
    bundle::{self, BundleDir, Csv, Dependency},
    docs,
    error::LoadError,
    gojson,
    model::{Bundle, Catalog, Channel, ChannelEntry, Icon, Package, RelatedImage, schema},
    property::{BundleObject, Gvk, PackageProperty, Property, RawJson},
    version::Version,
};

/// Failure to render a bundle or a package directory.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A file could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The bundle loads but cannot be rendered.
    #[error("cannot render bundle {bundle} ({}): {message}", path.display())]
    Bundle {
        /// Bundle directory.
        path: PathBuf,
        /// Bundle (CSV) name.
        bundle: String,
        /// What is wrong.
        message: String,
    },
    /// The bundles of a package directory do not make one package.
    #[error("cannot render package directory {}: {message}", path.display())]
    Package {
        /// Package directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What a render puts in a bundle besides its properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderOptions {
    /// Bundle image to record (`opm render` of an image records the image reference); `None` for a
    /// directory render, which leaves `image` empty.
    pub image: Option<String>,
    /// One `olm.bundle.object` per manifest (needed to install a bundle that has no image).
    pub bundle_objects: bool,
    /// An `olm.csv.metadata` property (what current catalogs carry in place of bundle objects).
    pub csv_metadata: bool,
}

impl Default for RenderOptions {
    /// A directory render: no image, bundle objects, no CSV metadata.
    fn default() -> Self {
        Self {
            image: None,
            bundle_objects: true,
            csv_metadata: false,
        }
    }
}

impl RenderOptions {
    /// What current `opm render` of a bundle image gives: the image and `olm.csv.metadata`, no
    /// bundle objects.
    pub fn image(image: impl Into<String>) -> Self {
        Self {
            image: Some(image.into()),
            bundle_objects: false,
            csv_metadata: true,
        }
    }
}

/// Renders one loaded bundle into an `olm.bundle` blob.
pub fn render_bundle(dir: &BundleDir, options: &RenderOptions) -> Result<Bundle, RenderError> {
    let csv = dir.csv();
    let name = csv.name().to_owned();
    let fail = |message: String| RenderError::Bundle {
        path: dir.path.clone(),
        bundle: name.clone(),
        message,
    };
    let version = csv
        .version()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| fail("the CSV has no spec.version".into()))?;

    // The bundle's own properties, as operator-registry's bundle parser collects them: the
    // properties file, then the package from the annotations, then the CSV's olm.properties;
    // then olm-rs's endpoints.
    let mut own: Vec<Property> = dir.properties.clone();
    own.push(Property::Package(PackageProperty {
        package_name: dir.package.clone(),
        version: Version::new(version),
        release: None,
    }));
    own.extend(csv.annotation_properties().unwrap_or_default());
    own.extend(csv.endpoints_property());
    let mut sorted = BundleProperties::default();
    sorted.add_own(own);
    sorted.add_dependencies(&dir.dependencies);
    sorted.add_apis(dir, &fail)?;
    let mut properties = sorted.into_properties();
    properties.extend(bundle_objects(dir, options));

    let image = options.image.clone().unwrap_or_default();
    Ok(Bundle {
        name,
        package: dir.package.clone(),
        related_images: related_images(csv, &image),
        image,
        properties,
    })
}

/// A bundle's properties by kind, in the order `opm render` writes them.
#[derive(Default)]
struct BundleProperties {
    package: Option<Property>,
    provided: BTreeSet<Gvk>,
    required: BTreeSet<Gvk>,
    package_required: Vec<Property>,
    others: Vec<Property>,
}

impl BundleProperties {
    /// The bundle's own properties: the package, provided APIs, and others.
    fn add_own(&mut self, own: Vec<Property>) {
        for p in own {
            match p {
                Property::Gvk(g) => {
                    self.provided.insert(g);
                }
                p @ Property::Package(_) => self.package = Some(p),
                p => self.others.push(p),
            }
        }
    }

    /// The bundle's dependencies: required APIs and packages, and others.
    fn add_dependencies(&mut self, dependencies: &[Dependency]) {
        for d in dependencies {
            match d {
                Dependency::Gvk(g) => {
                    self.required.insert(g.clone());
                }
                Dependency::Package { .. } => self.package_required.push(d.to_property()),
                other => self.others.push(other.to_property()),
            }
        }
    }

    /// Provided APIs: every version of every CRD object, and owned API services;
    /// required APIs: the CSV's required CRDs and API services. opm refuses a
    /// bundle whose CSV owns a CRD that the bundle does not ship.
    fn add_apis(&mut self, dir: &BundleDir, fail: &dyn Fn(String) -> RenderError) -> Result<(), RenderError> {
        let csv = dir.csv();
        for crd in dir.crds() {
            self.provided.extend(crd.crd_apis());
        }
        self.provided
            .extend(csv.owned_api_services().iter().map(|a| a.gvk()));
        for owned in csv.owned_crds() {
            let gvk = owned
                .gvk()
                .ok_or_else(|| fail(format!("owned CRD name {:?} is not <plural>.<group>", owned.name)))?;
            if !self.provided.contains(&gvk) {
                return Err(fail(format!(
                    "the CSV owns {gvk} ({}) but no CRD in the bundle provides it",
                    owned.name
                )));
            }
        }
        for r in csv.required_crds() {
            let gvk = r
                .gvk()
                .ok_or_else(|| fail(format!("required CRD name {:?} is not <plural>.<group>", r.name)))?;
            self.required.insert(gvk);
        }
        self.required
            .extend(csv.required_api_services().iter().map(|a| a.gvk()));
        Ok(())
    }

    /// The properties in order, sorted within their kinds.
    fn into_properties(self) -> Vec<Property> {
        let mut properties: Vec<Property> = self.package.into_iter().collect();
        properties.extend(self.provided.into_iter().map(Property::Gvk));
        properties.extend(self.required.into_iter().map(Property::GvkRequired));
        properties.extend(self.package_required);
        properties.extend(self.others);
        sort_properties(&mut properties);
        properties
    }
}

/// The bundle's objects (when `options` asks for them) and its CSV's metadata
/// (when asked), as properties.
fn bundle_objects(dir: &BundleDir, options: &RenderOptions) -> Vec<Property> {
    let mut objects: Vec<Property> = Vec::new();
    if options.bundle_objects {
        objects.extend(
            dir.objects.iter().map(|m| {
                Property::BundleObject(BundleObject::from_json(&gojson::to_string(&m.object, true)))
            }),
        );
        sort_properties(&mut objects);
    }
    if options.csv_metadata {
        objects.push(Property::CsvMetadata(csv_metadata(dir.csv())));
    }
    objects
}

/// Sorts by type, then by the value's JSON text, and drops exact duplicates.
pub(crate) fn sort_properties(props: &mut Vec<Property>) {
    let mut keyed: Vec<(String, Property)> = props.drain(..).map(|p| (p.value_json(), p)).collect();
    keyed.sort_by(|a, b| (a.1.type_name(), &a.0).cmp(&(b.1.type_name(), &b.0)));
    keyed.dedup_by(|a, b| a.1.type_name() == b.1.type_name() && a.0 == b.0);
    props.extend(keyed.into_iter().map(|(_, p)| p));
}

/// Related images as `opm` lists them: the CSV's `relatedImages`, the bundle image, and the
/// operator's container images, each once, sorted by image.
fn related_images(csv: Csv<'_>, bundle_image: &str) -> Vec<RelatedImage> {
    let mut out = csv.related_images();
    let mut seen: BTreeSet<String> = out.iter().map(|r| r.image.clone()).collect();
    if !bundle_image.is_empty() && seen.insert(bundle_image.to_owned()) {
        out.push(RelatedImage {
            name: String::new(),
            image: bundle_image.to_owned(),
        });
    }
    for image in csv.operator_images() {
        if seen.insert(image.clone()) {
            out.push(RelatedImage {
                name: String::new(),
                image,
            });
        }
    }
    out.sort_by(|a, b| a.image.cmp(&b.image));
    out
}

/// The `olm.csv.metadata` value of a CSV, shaped as operator-registry's Go types write it: fields
/// in their JSON names (Go matches keys case-insensitively, so `Kind` counts as `kind`), empty
/// optional fields left out, and required ones (`name`, `kind`, `version` of a resource, ...)
/// written even when empty.
pub fn csv_metadata(csv: Csv<'_>) -> RawJson {
    let spec = csv.0.get("spec").unwrap_or(&Value::Null);
    let mut m = Map::new();
    if let Some(a) = csv.annotations().filter(|a| !a.is_empty()) {
        m.insert("annotations".into(), Value::Object(a.clone()));
    }
    m.insert(
        "apiServiceDefinitions".into(),
        definitions(field(spec, "apiservicedefinitions"), api_service_description),
    );
    m.insert(
        "crdDescriptions".into(),
        definitions(field(spec, "customresourcedefinitions"), crd_description),
    );
    put_str(&mut m, "description", field(spec, "description"));
    put_str(&mut m, "displayName", field(spec, "displayName"));
    put_list(&mut m, "installModes", field(spec, "installModes"), |v| {
        shape(v, &[("type", Req::Str), ("supported", Req::Bool)])
    });
    put_list(&mut m, "keywords", field(spec, "keywords"), |v| {
        Value::String(v.as_str().unwrap_or("").into())
    });
    if let Some(l) = csv.0.pointer("/metadata/labels").filter(|v| !is_empty(v)) {
        m.insert("labels".into(), l.clone());
    }
    put_list(&mut m, "links", field(spec, "links"), |v| {
        shape(v, &[("name", Req::OptStr), ("url", Req::OptStr)])
    });
    put_list(&mut m, "maintainers", field(spec, "maintainers"), |v| {
        shape(v, &[("name", Req::OptStr), ("email", Req::OptStr)])
    });
    put_str(&mut m, "maturity", field(spec, "maturity"));
    put_str(&mut m, "minKubeVersion", field(spec, "minKubeVersion"));
    put_list(&mut m, "nativeAPIs", field(spec, "nativeAPIs"), |v| {
        shape(
            v,
            &[("group", Req::Str), ("version", Req::Str), ("kind", Req::Str)],
        )
    });
    let provider = field(spec, "provider").unwrap_or(&Value::Null);
    m.insert(
        "provider".into(),
        shape(provider, &[("name", Req::OptStr), ("url", Req::OptStr)]),
    );
    RawJson::from_value(&Value::Object(m))
}

/// How a Go struct field is written.
#[derive(Clone, Copy)]
enum Req {
    /// `string`, always written.
    Str,
    /// `string,omitempty`.
    OptStr,
    /// `bool`, always written.
    Bool,
    /// `int32,omitempty`.
    OptInt,
    /// A list (`omitempty`) of descriptors.
    Descriptors,
    /// A list (`omitempty`) of API resource references.
    Resources,
    /// `[]string,omitempty`.
    OptStrs,
    /// `json.RawMessage,omitempty`: any JSON, verbatim.
    OptRaw,
}

/// A field by its JSON name, exact match first, then ignoring ASCII case (as Go decodes).
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let o = v.as_object()?;
    o.get(key).or_else(|| {
        o.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

/// An object with exactly the given fields, written as Go writes its struct.
fn shape(v: &Value, fields: &[(&str, Req)]) -> Value {
    let mut out = Map::new();
    for &(key, req) in fields {
        let f = field(v, key).filter(|f| !f.is_null());
        let written = match req {
            Req::Str => Some(Value::String(f.and_then(Value::as_str).unwrap_or("").into())),
            Req::Bool => Some(Value::Bool(f.and_then(Value::as_bool).unwrap_or(false))),
            Req::OptStr => f
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.into())),
            Req::OptInt => f.filter(|n| n.as_i64().is_some_and(|n| n != 0)).cloned(),
            Req::OptRaw => f.cloned(),
            Req::OptStrs => f.filter(|a| a.as_array().is_some_and(|a| !a.is_empty())).cloned(),
            Req::Descriptors => list(f, |d| {
                shape(
                    d,
                    &[
                        ("path", Req::Str),
                        ("displayName", Req::OptStr),
                        ("description", Req::OptStr),
                        ("x-descriptors", Req::OptStrs),
                        ("value", Req::OptRaw),
                    ],
                )
            }),
            Req::Resources => list(f, |r| {
                shape(
                    r,
                    &[("name", Req::Str), ("kind", Req::Str), ("version", Req::Str)],
                )
            }),
        };
        if let Some(w) = written {
            out.insert(key.into(), w);
        }
    }
    Value::Object(out)
}

fn list(v: Option<&Value>, each: impl Fn(&Value) -> Value) -> Option<Value> {
    let items = v?.as_array().filter(|a| !a.is_empty())?;
    Some(Value::Array(items.iter().map(each).collect()))
}

const DESCRIPTORS: [(&str, Req); 4] = [
    ("resources", Req::Resources),
    ("statusDescriptors", Req::Descriptors),
    ("specDescriptors", Req::Descriptors),
    ("actionDescriptors", Req::Descriptors),
];

fn crd_description(v: &Value) -> Value {
    let mut fields = vec![
        ("name", Req::Str),
        ("version", Req::Str),
        ("kind", Req::Str),
        ("displayName", Req::OptStr),
        ("description", Req::OptStr),
    ];
    fields.extend(DESCRIPTORS);
    shape(v, &fields)
}

fn api_service_description(v: &Value) -> Value {
    let mut fields = vec![
        ("name", Req::Str),
        ("group", Req::Str),
        ("version", Req::Str),
        ("kind", Req::Str),
        ("deploymentName", Req::OptStr),
        ("containerPort", Req::OptInt),
        ("displayName", Req::OptStr),
        ("description", Req::OptStr),
    ];
    fields.extend(DESCRIPTORS);
    shape(v, &fields)
}

/// `{owned, required}`, both `omitempty`.
fn definitions(v: Option<&Value>, each: fn(&Value) -> Value) -> Value {
    let mut out = Map::new();
    for key in ["owned", "required"] {
        if let Some(l) = list(v.and_then(|v| field(v, key)), each) {
            out.insert(key.into(), l);
        }
    }
    Value::Object(out)
}

fn put_str(m: &mut Map<String, Value>, key: &str, v: Option<&Value>) {
    if let Some(s) = v.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        m.insert(key.into(), Value::String(s.into()));
    }
}

fn put_list(m: &mut Map<String, Value>, key: &str, v: Option<&Value>, each: impl Fn(&Value) -> Value) {
    if let Some(l) = list(v, each) {
        m.insert(key.into(), l);
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Loads and renders the bundle at `path` (bundle root or version directory with `bundle/`).
pub fn render_bundle_dir(path: impl AsRef<Path>, options: &RenderOptions) -> Result<Bundle, RenderError> {
    render_bundle(&bundle::load_bundle_dir(path)?, options)
}

/// How the upgrade edges of a package's channels are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GraphMode {
    /// Each CSV's `spec.replaces`, `spec.skips` and `olm.skipRange` (community-operators
    /// `updateGraph: replaces-mode`, the default).
    #[default]
    Replaces,
    /// Semver order within each channel: every bundle replaces the previous one, CSV `replaces`
    /// ignored, skips and skip ranges kept (`updateGraph: semver-mode`).
    Semver,
    /// As [`GraphMode::Semver`], and every bundle also skips the lower patch releases of its own
    /// minor version (`updateGraph: semver-skippatch-mode`).
    SemverSkipPatch,
}

/// A package directory rendered into a catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageRender {
    /// The package, its channels and its bundles.
    pub catalog: Catalog,
    /// How the edges were made.
    pub mode: GraphMode,
    /// Choices made for incomplete input (e.g. a default channel no bundle here belongs to), and
    /// warnings from loading the bundles.
    pub warnings: Vec<String>,
}

/// What `ci.yaml` of a community-operators package says.
#[derive(Debug, Clone, Default, PartialEq)]
struct CiConfig {
    mode: GraphMode,
    /// `fbc.catalog_mapping`: template file name and the catalogs it feeds.
    templates: Vec<(String, Vec<String>)>,
}

fn read_ci(dir: &Path) -> Result<CiConfig, RenderError> {
    let path = dir.join("ci.yaml");
    if !path.is_file() {
        return Ok(CiConfig::default());
    }
    let text = docs::read_text(&path)?;
    let Some(doc) = docs::parse_first_document(&path, &text)? else {
        return Ok(CiConfig::default());
    };
    let mode = match doc.get("updateGraph").and_then(Value::as_str) {
        None | Some("replaces-mode") => GraphMode::Replaces,
        Some("semver-mode") => GraphMode::Semver,
        Some("semver-skippatch-mode") => GraphMode::SemverSkipPatch,
        Some(other) => {
            return Err(LoadError::invalid(
                &path,
                Default::default(),
                format!("unknown updateGraph {other:?}"),
            )
            .into());
        }
    };
    let templates = doc
        .pointer("/fbc/catalog_mapping")
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .filter_map(|m| {
                    let name = m.get("template_name")?.as_str()?.to_owned();
                    let catalogs = m.get("catalog_names").map(|c| {
                        c.as_array()
                            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
                    });
                    Some((name, catalogs.flatten().unwrap_or_default()))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(CiConfig { mode, templates })
}

/// `v4.21` → (4, 21), for picking the newest catalog.
fn catalog_version(name: &str) -> Vec<u64> {
    name.trim_start_matches('v')
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect()
}

/// The basic catalog template the community pipeline renders the newest catalog from: the one
/// `ci.yaml` maps to the highest catalog version, else the last file of `catalog-templates/`.
fn chosen_template(dir: &Path, ci: &CiConfig) -> Result<Option<PathBuf>, RenderError> {
    let tdir = dir.join("catalog-templates");
    if !tdir.is_dir() {
        return Ok(None);
    }
    let newest_mapped = ci
        .templates
        .iter()
        .max_by_key(|(_, catalogs)| catalogs.iter().map(|c| catalog_version(c)).max())
        .map(|(t, _)| tdir.join(t))
        .filter(|p| p.is_file());
    Ok(match newest_mapped {
        Some(f) => Some(f),
        None => bundle::files_of(&tdir)?.pop(),
    })
}

/// The `olm.package` entry of the chosen basic catalog template, if the package has one.
fn template_package(file: Option<&Path>) -> Result<Option<(PathBuf, Package)>, RenderError> {
    let Some(file) = file else { return Ok(None) };
    let text = docs::read_text(file)?;
    for doc in docs::parse_documents(file, &text)? {
        if doc.get("schema").and_then(Value::as_str) != Some(schema::TEMPLATE_BASIC) {
            continue;
        }
        let entries = doc
            .get("entries")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for e in entries {
            if e.get("schema").and_then(Value::as_str) == Some(schema::PACKAGE) {
                let blob = crate::fbc::parse_blob(e).map_err(|m| {
                    LoadError::invalid(file, Default::default(), format!("olm.package entry: {m}"))
                })?;
                if let crate::fbc::Blob::Package(p) = blob {
                    return Ok(Some((file.to_path_buf(), p)));
                }
            }
        }
    }
    Ok(None)
}

/// The entry of a version directory's `release-config.yaml` (how the community pipeline adds a
/// bundle to a catalog template) for `template`, or its last entry.
fn release_config(version_dir: &Path, template: Option<&Path>) -> Result<Option<Value>, RenderError> {
    let path = version_dir.join("release-config.yaml");
    if !path.is_file() {
        return Ok(None);
    }
    let text = docs::read_text(&path)?;
    let Some(doc) = docs::parse_first_document(&path, &text)? else {
        return Ok(None);
    };
    let entries = doc
        .get("catalog_templates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let name = template.and_then(|t| t.file_name()).and_then(|n| n.to_str());
    let chosen = entries
        .iter()
        .find(|e| name.is_some() && e.get("template_name").and_then(Value::as_str) == name)
        .or(entries.last());
    Ok(chosen.cloned())
}

/// What channel building needs of each bundle.
struct Summary {
    dir: PathBuf,
    name: String,
    version: Version,
    channels: Vec<String>,
    default_channel: Option<String>,
    replaces: Option<String>,
    skips: Vec<String>,
    skip_range: Option<String>,
    icon: Option<Icon>,
    description: Option<String>,
}

/// Renders a package directory (version directories, each a bundle, with an optional `ci.yaml` and
/// `catalog-templates/`) into a catalog, with bundle objects and no image.
pub fn render_package_dir(path: impl AsRef<Path>) -> Result<PackageRender, RenderError> {
    render_package_dir_with(path, &RenderOptions::default())
}

/// As [`render_package_dir`], with render options for every bundle.
///
/// Channels come from the bundles' channel annotations; edges per [`GraphMode`], read from
/// `ci.yaml`. For packages built from catalog templates, a version directory's
/// `release-config.yaml` (its entry for the newest template) gives that bundle's channels and
/// edges instead, as it does in the community pipeline. The default channel is the catalog template's (for packages the community pipeline
/// builds from templates), else the default-channel annotation of the highest version that has one;
/// when that channel has no bundle here (the directory holds only a window of the package's
/// versions), the only channel or the channel of the highest version is used instead, with a
/// warning. Icon and description come from the template, else from the CSV of the default channel's
/// highest version.
pub fn render_package_dir_with(
    path: impl AsRef<Path>,
    options: &RenderOptions,
) -> Result<PackageRender, RenderError> {
    let dir = path.as_ref();
    let fail = |message: String| RenderError::Package {
        path: dir.to_path_buf(),
        message,
    };
    let ci = read_ci(dir)?;
    let template_file = chosen_template(dir, &ci)?;
    let mut warnings = Vec::new();
    let version_dirs = version_dirs(dir, &mut warnings)?;
    if version_dirs.is_empty() {
        return Err(fail("no bundle directories".into()));
    }
    let rendered = crate::par::map(&version_dirs, |d| {
        render_version(d, options, template_file.as_deref())
    });
    let mut bundles = Vec::new();
    let mut summaries = Vec::new();
    for r in rendered {
        let (b, s, w) = r?;
        warnings.extend(w);
        bundles.push(b);
        summaries.push(s);
    }
    let package = one_package(&bundles, &summaries).map_err(fail)?;
    let order = version_order(&summaries);
    let channels = build_channels(&package, &summaries, &order, ci.mode);
    let template = template_package(template_file.as_deref())?;
    let declared = declared_default_channel(template.as_ref(), &summaries, &order);
    let default_channel = default_channel(declared, &channels, &summaries, &order, &mut warnings);
    let (icon, description) = match template {
        Some((_, p)) => (p.icon, p.description),
        None => {
            let head = order
                .iter()
                .rev()
                .map(|&i| &summaries[i])
                .find(|s| s.channels.contains(&default_channel));
            (
                head.and_then(|h| h.icon.clone()),
                head.and_then(|h| h.description.clone()),
            )
        }
    };
    let pkg = Package {
        name: package,
        default_channel: Some(default_channel),
        icon,
        description,
        properties: Vec::new(),
    };
    let mut catalog = Catalog {
        packages: vec![pkg],
        channels,
        bundles,
        ..Catalog::default()
    };
    catalog.sort();
    Ok(PackageRender {
        catalog,
        mode: ci.mode,
        warnings,
    })
}

/// The version directories of package directory `dir` (those holding a bundle),
/// sorted; other directories but `catalog-templates/` are skipped with a warning.
fn version_dirs(dir: &Path, warnings: &mut Vec<String>) -> Result<Vec<PathBuf>, RenderError> {
    let mut version_dirs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| LoadError::io(dir, e))? {
        let entry = entry.map_err(|e| LoadError::io(dir, e))?;
        let p = entry.path();
        if entry.file_type().map_err(|e| LoadError::io(&p, e))?.is_dir() {
            if bundle::bundle_root(&p).is_some() {
                version_dirs.push(p);
            } else if entry.file_name() != "catalog-templates" {
                warnings.push(format!("{}: not a bundle directory, skipped", p.display()));
            }
        }
    }
    version_dirs.sort();
    Ok(version_dirs)
}

/// Loads and renders the bundle of version directory `d`, with what channel
/// building needs of it and its warnings.
fn render_version(
    d: &Path,
    options: &RenderOptions,
    template_file: Option<&Path>,
) -> Result<(Bundle, Summary, Vec<String>), RenderError> {
    let b = bundle::load_bundle_dir(d)?;
    let bundle = render_bundle(&b, options)?;
    let csv = b.csv();
    let mut summary = Summary {
        dir: b.path.clone(),
        name: bundle.name.clone(),
        version: Version::new(csv.version().unwrap_or_default()),
        channels: b.channels.clone(),
        default_channel: b.default_channel.clone(),
        replaces: csv.replaces().map(str::to_owned),
        skips: csv.skips(),
        skip_range: csv.skip_range().map(str::to_owned),
        icon: csv.icon(),
        description: csv.description().map(str::to_owned),
    };
    // Packages built from catalog templates take channels and edges from the release config.
    if let Some(rc) = release_config(d, template_file)? {
        let strs = |k: &str| -> Vec<String> {
            rc.get(k)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
                .unwrap_or_default()
        };
        let channels = strs("channels");
        if !channels.is_empty() {
            summary.channels = channels;
        }
        summary.replaces = rc.get("replaces").and_then(Value::as_str).map(str::to_owned);
        summary.skips = strs("skips");
        summary.skip_range = rc.get("skipRange").and_then(Value::as_str).map(str::to_owned);
    }
    Ok((bundle, summary, b.warnings))
}

/// The one package of `bundles`; `Err` says why there is not exactly one, or
/// names a bundle in two directories.
fn one_package(bundles: &[Bundle], summaries: &[Summary]) -> Result<String, String> {
    let package = bundles[0].package.clone();
    if let Some(other) = bundles.iter().find(|b| b.package != package) {
        return Err(format!(
            "bundles of two packages: {} and {}",
            package, other.package
        ));
    }
    let mut seen: BTreeMap<&str, &Path> = BTreeMap::new();
    for s in summaries {
        if let Some(first) = seen.insert(&s.name, &s.dir) {
            return Err(format!(
                "bundle {} is in both {} and {}",
                s.name,
                first.display(),
                s.dir.display()
            ));
        }
    }
    Ok(package)
}

/// Ascending version order (name breaks ties), the order channels list entries in.
fn version_order(summaries: &[Summary]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..summaries.len()).collect();
    order.sort_by(|&a, &b| {
        summaries[a]
            .version
            .cmp_precedence(&summaries[b].version)
            .then_with(|| summaries[a].name.cmp(&summaries[b].name))
    });
    order
}

/// The default channel declared, and by what: the template's, else the
/// default-channel annotation of the highest version that has one.
fn declared_default_channel(
    template: Option<&(PathBuf, Package)>,
    summaries: &[Summary],
    order: &[usize],
) -> Option<(String, String)> {
    if let Some((file, p)) = template
        && let Some(d) = &p.default_channel
    {
        return Some((d.clone(), format!("template {}", file.display())));
    }
    let &i = order
        .iter()
        .rev()
        .find(|&&i| summaries[i].default_channel.is_some())?;
    let d = summaries[i].default_channel.clone().unwrap_or_default();
    Some((d, format!("annotations of {}", summaries[i].name)))
}

/// The default channel: the `declared` one when it has a bundle here, else the
/// only channel, else the channel of the highest version (first by name); a
/// fallback is warned about unless it is the only channel and none was declared.
fn default_channel(
    declared: Option<(String, String)>,
    channels: &[Channel],
    summaries: &[Summary],
    order: &[usize],
    warnings: &mut Vec<String>,
) -> String {
    if let Some((d, from)) = &declared {
        if channels.iter().any(|ch| ch.name == *d) {
            return d.clone();
        }
        warnings.push(format!(
            "default channel {d:?} (from the {from}) has no bundle in this directory"
        ));
    }
    let only = channels.len() == 1;
    let fallback = if only {
        channels[0].name.clone()
    } else {
        // The channel of the highest version, first by name.
        let top = &summaries[order[order.len() - 1]];
        let mut cs = top.channels.clone();
        cs.sort();
        cs.into_iter().next().unwrap_or_default()
    };
    if declared.is_some() || !only {
        warnings.push(format!("default channel set to {fallback:?}"));
    }
    fallback
}

fn build_channels(package: &str, summaries: &[Summary], order: &[usize], mode: GraphMode) -> Vec<Channel> {
    let mut members: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for &i in order {
        for c in &summaries[i].channels {
            members.entry(c).or_default().push(i);
        }
    }
    members
        .into_iter()
        .map(|(name, idx)| {
            let entries = idx
                .iter()
                .enumerate()
                .map(|(pos, &i)| {
                    let s = &summaries[i];
                    let mut skips = s.skips.clone();
                    let replaces = match mode {
                        GraphMode::Replaces => s.replaces.clone(),
                        GraphMode::Semver | GraphMode::SemverSkipPatch => {
                            pos.checked_sub(1).map(|p| summaries[idx[p]].name.clone())
                        }
                    };
                    if mode == GraphMode::SemverSkipPatch
                        && let Some(v) = s.version.semver()
                    {
                        for &j in &idx[..pos.saturating_sub(1)] {
                            let other = &summaries[j];
                            if other
                                .version
                                .semver()
                                .is_some_and(|o| o.major == v.major && o.minor == v.minor)
                                && !skips.contains(&other.name)
                            {
                                skips.push(other.name.clone());
                            }
                        }
                    }
                    ChannelEntry {
                        name: s.name.clone(),
                        replaces,
                        skips,
                        skip_range: s.skip_range.clone(),
                    }
                })
                .collect();
            Channel {
                name: name.to_owned(),
                package: package.to_owned(),
                entries,
                properties: Vec::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        bundle::tests::{CRD, CSV, write_bundle},
        error::display_chain,
    };

    const ANNOTATIONS: &str = "annotations:\n  operators.operatorframework.io.bundle.package.v1: foo\n  operators.operatorframework.io.bundle.channels.v1: stable\n";

    fn bundle_files(csv: &str) -> Vec<(&'static str, String)> {
        vec![
            ("manifests/foo.csv.yaml", csv.to_owned()),
            ("manifests/foos.crd.yaml", CRD.to_owned()),
            ("metadata/annotations.yaml", ANNOTATIONS.to_owned()),
            (
                "metadata/dependencies.yaml",
                "dependencies:\n- {type: olm.package, value: {packageName: bar, version: '>=1.0.0'}}\n- {type: olm.gvk, value: {group: baz.io, version: v1, kind: Baz}}\n".to_owned(),
            ),
        ]
    }

    fn write(name: &str, files: &[(&'static str, String)]) -> PathBuf {
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
        write_bundle(name, &refs)
    }

    #[test]
    fn renders_properties_like_opm() {
        let dir = write("render", &bundle_files(CSV));
        let b = render_bundle_dir(&dir, &RenderOptions::default()).unwrap();
        let types: Vec<&str> = b.properties.iter().map(Property::type_name).collect();
        assert_eq!(
            types,
            [
                "olm.gvk",
                "olm.gvk",
                "olm.gvk.required",
                "olm.gvk.required",
                "olm.maxOpenShiftVersion",
                "olm.package",
                "olm.package.required",
                "olm.bundle.object",
                "olm.bundle.object",
            ]
        );
        let json: Vec<String> = b.properties[..7].iter().map(Property::value_json).collect();
        assert_eq!(json[0], r#"{"group":"foo.io","kind":"Foo","version":"v1"}"#);
        assert_eq!(json[1], r#"{"group":"foo.io","kind":"Foo","version":"v1beta1"}"#);
        assert_eq!(json[2], r#"{"group":"bar.io","kind":"Bar","version":"v1alpha1"}"#);
        assert_eq!(json[3], r#"{"group":"baz.io","kind":"Baz","version":"v1"}"#);
        assert_eq!(json[5], r#"{"packageName":"foo","version":"1.2.0"}"#);
        assert_eq!(json[6], r#"{"packageName":"bar","versionRange":">=1.0.0"}"#);
        let Property::BundleObject(o) = &b.properties[8] else {
            panic!()
        };
        let kinds: Vec<String> = b.properties[7..]
            .iter()
            .map(|p| match p {
                Property::BundleObject(o) => o.decode().unwrap()["kind"].as_str().unwrap().to_owned(),
                _ => panic!(),
            })
            .collect();
        assert!(
            kinds.contains(&"ClusterServiceVersion".to_owned())
                && kinds.contains(&"CustomResourceDefinition".to_owned())
        );
        assert!(o.decode().is_ok());
        assert_eq!(b.image, "");
        let images: Vec<&str> = b.related_images.iter().map(|r| r.image.as_str()).collect();
        assert_eq!(images, ["quay.io/foo/init:1.2.0", "quay.io/foo/op:1.2.0"]);

        let with_image = render_bundle_dir(&dir, &RenderOptions::image("quay.io/foo/bundle:1.2.0")).unwrap();
        assert_eq!(
            with_image.properties.last().map(Property::type_name),
            Some("olm.csv.metadata")
        );
        assert!(
            !with_image
                .properties
                .iter()
                .any(|p| matches!(p, Property::BundleObject(_)))
        );
        assert_eq!(with_image.related_images.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn relation_endpoints_are_carried_unchanged() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/endpoints-demo");
        let render = render_package_dir(&fixture).unwrap();
        assert_eq!(render.warnings, Vec::<String>::new());
        let carried: Vec<String> = render.catalog.bundles[0]
            .properties_of(olm_api::endpoints::PROPERTY)
            .map(Property::value_json)
            .collect();
        assert_eq!(
            carried,
            [
                r#"{"peers":{"ring":{"interface":"endpoints-demo-ring"}},"provides":{"db":{"interface":"postgresql"},"metrics":{"interface":"prometheus-scrape","limit":3}},"requires":{"logs":{"interface":"loki-push","limit":1,"scope":"container"}}}"#
            ]
        );
        assert_eq!(crate::validate::validate(&render.catalog), Vec::new());

        // A declaration that is not YAML is carried as its text, with a warning
        // on load; validation names it.
        let bad = CSV.replace(
            "  annotations:\n",
            "  annotations:\n    olm-rs.dev/endpoints: \"provides: [\"\n",
        );
        let dir = write("render-endpoints", &bundle_files(&bad));
        let loaded = crate::bundle::load_bundle_dir(&dir).unwrap();
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains("annotation olm-rs.dev/endpoints: not YAML or JSON")),
            "{:?}",
            loaded.warnings
        );
        let b = render_bundle(&loaded, &RenderOptions::default()).unwrap();
        let carried: Vec<String> = b
            .properties_of(olm_api::endpoints::PROPERTY)
            .map(Property::value_json)
            .collect();
        assert_eq!(carried, [r#""provides: [""#]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn owned_crd_missing_from_the_bundle_is_an_error() {
        let mut files = bundle_files(CSV);
        files.remove(1);
        let dir = write("render-missing-crd", &files);
        let msg = display_chain(&render_bundle_dir(&dir, &RenderOptions::default()).unwrap_err());
        assert!(
            msg.contains("cannot render bundle foo.v1.2.0") && msg.contains("owns foo.io/v1/Foo"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn package_dir_in_semver_mode() {
        let v = |ver: &str, channels: &str, default: &str| {
            let csv = CSV
                .replace("foo.v1.2.0", &format!("foo.v{ver}"))
                .replace("version: 1.2.0", &format!("version: {ver}"));
            let ann = format!(
                "annotations:\n  operators.operatorframework.io.bundle.package.v1: foo\n  operators.operatorframework.io.bundle.channels.v1: {channels}\n{default}"
            );
            (csv, ann)
        };
        let (a, aa) = v("1.0.0", "stable", "");
        let (b, ba) = v(
            "1.1.0",
            "stable,fast",
            "  operators.operatorframework.io.bundle.channel.default.v1: fast\n",
        );
        let (c, ca) = v("1.2.0-rc1", "fast", "");
        let dir = write_bundle(
            "pkgdir",
            &[
                ("ci.yaml", "updateGraph: semver-mode\n"),
                ("1.0.0/manifests/csv.yaml", &a),
                ("1.0.0/manifests/crd.yaml", CRD),
                ("1.0.0/metadata/annotations.yaml", &aa),
                ("1.1.0/manifests/csv.yaml", &b),
                ("1.1.0/manifests/crd.yaml", CRD),
                ("1.1.0/metadata/annotations.yaml", &ba),
                ("1.2.0-rc1/bundle/manifests/csv.yaml", &c),
                ("1.2.0-rc1/bundle/manifests/crd.yaml", CRD),
                ("1.2.0-rc1/bundle/metadata/annotations.yaml", &ca),
            ],
        );
        let r = render_package_dir(&dir).unwrap();
        assert_eq!(r.mode, GraphMode::Semver);
        let c = &r.catalog;
        assert_eq!(c.packages[0].default_channel.as_deref(), Some("fast"));
        assert_eq!(c.packages[0].description.as_deref(), Some("The foo operator"));
        let fast = c.channels.iter().find(|ch| ch.name == "fast").unwrap();
        let edges: Vec<(&str, Option<&str>)> = fast
            .entries
            .iter()
            .map(|e| (e.name.as_str(), e.replaces.as_deref()))
            .collect();
        assert_eq!(
            edges,
            [("foo.v1.1.0", None), ("foo.v1.2.0-rc1", Some("foo.v1.1.0"))]
        );
        let stable = c.channels.iter().find(|ch| ch.name == "stable").unwrap();
        assert_eq!(stable.entries[1].replaces.as_deref(), Some("foo.v1.0.0"));
        assert_eq!(stable.entries[1].skip_range.as_deref(), Some(">=1.0.0 <1.2.0"));
        assert_eq!(c.bundles.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn summary(name: &str, version: &str, channels: &[&str]) -> Summary {
        Summary {
            dir: PathBuf::from(name),
            name: name.to_owned(),
            version: Version::new(version),
            channels: channels.iter().map(|c| (*c).to_owned()).collect(),
            default_channel: None,
            replaces: None,
            skips: Vec::new(),
            skip_range: None,
            icon: None,
            description: None,
        }
    }

    fn channel(name: &str) -> Channel {
        Channel {
            name: name.to_owned(),
            package: "foo".to_owned(),
            entries: Vec::new(),
            properties: Vec::new(),
        }
    }

    #[test]
    fn the_default_channel_falls_back_to_the_highest_versions_channel_with_a_warning() {
        let summaries = [
            summary("foo.v1", "1.0.0", &["stable"]),
            summary("foo.v2", "2.0.0", &["fast", "stable"]),
        ];
        let order = version_order(&summaries);
        let channels = [channel("fast"), channel("stable")];
        let mut warnings = Vec::new();
        let declared = Some(("stable".to_owned(), "annotations of foo.v2".to_owned()));
        assert_eq!(
            default_channel(declared, &channels, &summaries, &order, &mut warnings),
            "stable"
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        let declared = Some(("beta".to_owned(), "annotations of foo.v2".to_owned()));
        assert_eq!(
            default_channel(declared, &channels, &summaries, &order, &mut warnings),
            "fast"
        );
        assert_eq!(
            warnings,
            [
                "default channel \"beta\" (from the annotations of foo.v2) has no bundle in this directory",
                "default channel set to \"fast\"",
            ]
        );
        // The only channel, none declared: no warning.
        let mut warnings = Vec::new();
        assert_eq!(
            default_channel(None, &channels[1..], &summaries, &order, &mut warnings),
            "stable"
        );
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
