//! One bundle rendered into an `olm.bundle` blob: the options of a render, the bundle's
//! properties and objects, and its related images.

use std::{collections::BTreeSet, path::Path};

use super::{
    error::RenderError,
    metadata::csv_metadata,
    properties::{BundleProperties, sort_properties},
};
use crate::{
    bundle::{self, BundleDir, Csv},
    gojson,
    model::{Bundle, RelatedImage},
    property::{BundleObject, PackageProperty, Property},
    version::Version,
};

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
    // then olm-rs's endpoints and actions.
    let mut own: Vec<Property> = dir.properties.clone();
    own.push(Property::Package(PackageProperty {
        package_name: dir.package.clone(),
        version: Version::new(version),
        release: None,
    }));
    own.extend(csv.annotation_properties().unwrap_or_default());
    own.extend(csv.endpoints_property());
    own.extend(csv.actions_property());
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

/// Loads and renders the bundle at `path` (bundle root or version directory with `bundle/`).
pub fn render_bundle_dir(path: impl AsRef<Path>, options: &RenderOptions) -> Result<Bundle, RenderError> {
    render_bundle(&bundle::load_bundle_dir(path)?, options)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

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
    fn relation_endpoints_are_carried_unchanged() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/endpoints-demo");
        let render = crate::render::render_package_dir(&fixture).unwrap();
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
    fn actions_are_carried_unchanged() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/actions-demo");
        let render = crate::render::render_package_dir(&fixture).unwrap();
        assert_eq!(render.warnings, Vec::<String>::new());
        let carried: Vec<String> = render.catalog.bundles[0]
            .properties_of(olm_api::actions::PROPERTY)
            .map(Property::value_json)
            .collect();
        assert_eq!(
            carried,
            [
                r#"{"backup":{"description":"Write a backup of the database and return its path and size.","params":{"compression":{"enum":["none","gzip","xz"],"type":"string"},"keep":{"maximum":30,"minimum":1,"type":"integer"},"path":{"description":"The directory to write the backup to.","minLength":1,"type":"string"}},"required":["path"]},"pause":{"description":"Stop serving writes until resumed."}}"#
            ]
        );
        assert_eq!(crate::validate::validate(&render.catalog), Vec::new());

        // A declaration that is not YAML is carried as its text, with a warning
        // on load; validation names it.
        let bad = CSV.replace(
            "  annotations:\n",
            "  annotations:\n    olm-rs.dev/actions: \"backup: [\"\n",
        );
        let dir = write("render-actions", &bundle_files(&bad));
        let loaded = crate::bundle::load_bundle_dir(&dir).unwrap();
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains("annotation olm-rs.dev/actions: not YAML or JSON")),
            "{:?}",
            loaded.warnings
        );
        let b = render_bundle(&loaded, &RenderOptions::default()).unwrap();
        let carried: Vec<String> = b
            .properties_of(olm_api::actions::PROPERTY)
            .map(Property::value_json)
            .collect();
        assert_eq!(carried, [r#""backup: [""#]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
