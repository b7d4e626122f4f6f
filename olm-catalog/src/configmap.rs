//! OLM's ConfigMap catalog format: a ConfigMap whose `data` holds three YAML lists as strings,
//! `customResourceDefinitions`, `clusterServiceVersions` and `packages` (package manifests). Each
//! CSV's bundle is the CSV plus the CRD documents of the APIs it owns; channel entries follow
//! `replaces` from each channel's `currentCSV`, with the bundles each entry skips.

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
};

use serde_json::Value;

use crate::{
    bundle::{CSV_KIND, Manifest},
    current_csv::{self, CsvBundle, LegacyPackage},
    docs,
    error::{LoadError, Position},
    model::Catalog,
    property::Gvk,
    render::{GraphMode, PackageRender, RenderError, RenderOptions},
};

/// Data keys of a ConfigMap catalog.
pub mod keys {
    /// CRDs, a YAML list.
    pub const CRDS: &str = "customResourceDefinitions";
    /// CSVs, a YAML list.
    pub const CSVS: &str = "clusterServiceVersions";
    /// Package manifests, a YAML list.
    pub const PACKAGES: &str = "packages";
}

/// A ConfigMap catalog as read: the catalog of the bundles that load, and the bundles left out.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigMapRender {
    /// The packages, channels and bundles that serve, with warnings.
    pub render: PackageRender,
    /// Bundles left out because they are invalid, as OLM's loader leaves them out: the rest of
    /// the catalog serves without them.
    pub left_out: Vec<LeftOut>,
}

/// A bundle of a ConfigMap catalog that was left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The CSV's name, or where it is (`data.clusterServiceVersions[i]`) when it has none.
    pub bundle: String,
    /// Why, in words.
    pub reason: String,
}

impl fmt::Display for LeftOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bundle {} left out: {}", self.bundle, self.reason)
    }
}

/// Parses a ConfigMap catalog given as YAML or JSON text; `path` names it in errors.
pub fn parse_str(path: impl AsRef<Path>, text: &str) -> Result<ConfigMapRender, RenderError> {
    parse_str_with(path, text, &RenderOptions::default())
}

/// Loads a ConfigMap catalog file.
pub fn load(path: impl AsRef<Path>) -> Result<ConfigMapRender, RenderError> {
    let path = path.as_ref();
    parse_str(path, &docs::read_text(path)?)
}

/// Data value `key` of a ConfigMap catalog: a YAML list in a string (none when
/// the key is absent); errors name the key.
fn data_list(path: &Path, data: &serde_json::Map<String, Value>, key: &str) -> Result<Vec<Value>, LoadError> {
    let invalid = |m: String| LoadError::invalid(path, Position::document(1), m);
    let Some(v) = data.get(key) else {
        return Ok(Vec::new());
    };
    let text = v
        .as_str()
        .ok_or_else(|| invalid(format!("data.{key} must be a string")))?;
    let name = PathBuf::from(format!("{}#data.{key}", path.display()));
    match docs::parse_first_document(&name, text)? {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(invalid(format!("data.{key} must hold a YAML list"))),
    }
}

/// The bundle of CSV number `i` of the ConfigMap, with the CRD documents (of
/// `crds`, found by API in `by_api`) of the versions it owns; or why it is left out.
fn csv_bundle(
    path: &Path,
    i: usize,
    csv: Value,
    crds: &[Manifest],
    by_api: &BTreeMap<Gvk, usize>,
    options: &RenderOptions,
) -> Result<CsvBundle, LeftOut> {
    let file = PathBuf::from(format!("{}#data.clusterServiceVersions[{i}]", path.display()));
    let csv = Manifest { file, object: csv };
    let name = csv.name().to_owned();
    if csv.kind() != CSV_KIND || name.is_empty() {
        return Err(LeftOut {
            bundle: format!("data.clusterServiceVersions[{i}]"),
            reason: "it is not a ClusterServiceVersion with a metadata.name".to_owned(),
        });
    }
    let mut documents: Vec<usize> = Vec::new();
    for owned in crate::bundle::Csv(&csv.object).owned_crds() {
        if let Some(&j) = owned.gvk().and_then(|gvk| by_api.get(&gvk))
            && !documents.contains(&j)
        {
            documents.push(j);
        }
    }
    let mut objects = vec![csv];
    objects.extend(documents.into_iter().map(|j| crds[j].clone()));
    let bundle = CsvBundle {
        path: path.to_path_buf(),
        objects,
        csv_index: 0,
    };
    match bundle.check(options) {
        Ok(()) => Ok(bundle),
        Err(e) => Err(LeftOut {
            bundle: name,
            reason: match e {
                RenderError::Bundle { message, .. } => message,
                other => other.to_string(),
            },
        }),
    }
}

/// As [`parse_str`], with render options.
///
/// As operator-registry's ConfigMap loader: CRD documents are keyed by group, version and kind
/// (one document per version a CRD serves; the same API in two documents keeps the first), and
/// each CSV's bundle gets the documents of the versions it owns; a channel holds the bundles
/// reached by `replaces` from its `currentCSV` and the bundles they skip; a bundle that cannot be
/// rendered is left out (see [`ConfigMapRender::left_out`]) and the rest serves. What makes the
/// whole ConfigMap unusable is only what OLM refuses too: data that does not parse, no package.
pub fn parse_str_with(
    path: impl AsRef<Path>,
    text: &str,
    options: &RenderOptions,
) -> Result<ConfigMapRender, RenderError> {
    let path = path.as_ref();
    let invalid = |m: String| LoadError::invalid(path, Position::document(1), m);
    let doc = docs::parse_first_document(path, text)?.ok_or_else(|| invalid("empty document".into()))?;
    if let Some(kind) = doc.get("kind").and_then(Value::as_str)
        && kind != "ConfigMap"
    {
        return Err(invalid(format!("kind is {kind:?}, not ConfigMap")).into());
    }
    let data = doc
        .get("data")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("no `data` map".into()))?;

    let list = |key: &str| data_list(path, data, key);
    let crds = list(keys::CRDS)?;
    let csvs = list(keys::CSVS)?;
    let packages = list(keys::PACKAGES)?
        .iter()
        .enumerate()
        .map(|(i, p)| LegacyPackage::from_value(p).map_err(|m| invalid(format!("data.packages[{i}]: {m}"))))
        .collect::<Result<Vec<_>, _>>()?;
    if packages.is_empty() {
        return Err(invalid("data.packages lists no package".into()).into());
    }

    let mut warnings = Vec::new();
    let crds: Vec<Manifest> = crds
        .into_iter()
        .enumerate()
        .map(|(j, object)| Manifest {
            file: PathBuf::from(format!("{}#data.customResourceDefinitions[{j}]", path.display())),
            object,
        })
        .collect();
    let by_api = crds_by_api(&crds, &mut warnings);

    let mut left_out = Vec::new();
    let mut bundles = Vec::new();
    for (i, csv) in csvs.into_iter().enumerate() {
        match csv_bundle(path, i, csv, &crds, &by_api, options) {
            Ok(bundle) => bundles.push(bundle),
            Err(out) => left_out.push(out),
        }
    }

    let mut catalog = Catalog::default();
    for p in &packages {
        catalog.extend(current_csv::assemble(p, &bundles, options, &mut warnings)?);
    }
    catalog.sort();
    warnings.extend(current_csv::unreached(&catalog, &bundles));
    Ok(ConfigMapRender {
        render: PackageRender {
            catalog,
            mode: GraphMode::Replaces,
            warnings,
        },
        left_out,
    })
}

/// The CRD document serving each API; an API served by two documents keeps the first, with a
/// warning (operator-registry refuses adding the same CRD version twice).
fn crds_by_api(crds: &[Manifest], warnings: &mut Vec<String>) -> BTreeMap<Gvk, usize> {
    let mut by_api: BTreeMap<Gvk, usize> = BTreeMap::new();
    for (j, crd) in crds.iter().enumerate() {
        for gvk in crd.crd_apis() {
            match by_api.get(&gvk) {
                Some(&first) => warnings.push(format!(
                    "data.customResourceDefinitions[{j}] ({}) serves {gvk} as [{first}] does: ignored for it",
                    crd.name(),
                )),
                None => {
                    by_api.insert(gvk, j);
                }
            }
        }
    }
    by_api
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        bundle::tests::{CRD, CSV},
        error::display_chain,
        property::Property,
    };

    fn indent(text: &str) -> String {
        text.lines().map(|l| format!("      {l}\n")).collect()
    }

    fn configmap() -> String {
        let v11 = CSV
            .replace("foo.v1.2.0", "foo.v1.1.0")
            .replace("version: 1.2.0", "version: 1.1.0");
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cat}}\ndata:\n  customResourceDefinitions: |-\n    - {}\n  clusterServiceVersions: |-\n    - {}\n    - {}\n  packages: |-\n    - packageName: foo\n      channels:\n      - name: stable\n        currentCSV: foo.v1.2.0\n      defaultChannel: stable\n",
            indent(CRD).trim_start(),
            indent(CSV).trim_start(),
            indent(&v11).trim_start()
        )
    }

    #[test]
    fn loads_a_configmap_catalog() {
        let r = parse_str("cm.yaml", &configmap()).unwrap();
        assert!(r.left_out.is_empty());
        let c = &r.render.catalog;
        assert_eq!(c.packages[0].name, "foo");
        assert_eq!(c.bundles.len(), 2);
        assert_eq!(c.channels[0].entries.len(), 2);
        let b = c.bundle("foo", "foo.v1.2.0").unwrap();
        let objects = b
            .properties
            .iter()
            .filter(|p| matches!(p, Property::BundleObject(_)))
            .count();
        assert_eq!(objects, 2, "CSV and its owned CRD");
        assert!(
            b.properties
                .iter()
                .any(|p| matches!(p, Property::Gvk(g) if g.kind == "Foo"))
        );
    }

    /// A ConfigMap with these CRD and CSV documents and package `foo` whose `stable` channel's
    /// head is foo.v1.2.0.
    fn configmap_of(crds: &[String], csvs: &[String]) -> String {
        let list = |items: &[String]| -> String {
            items
                .iter()
                .map(|i| format!("    - {}", indent(i).trim_start()))
                .collect()
        };
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cat}}\ndata:\n  customResourceDefinitions: |-\n{}  clusterServiceVersions: |-\n{}  packages: |-\n    - packageName: foo\n      channels:\n      - name: stable\n        currentCSV: foo.v1.2.0\n      defaultChannel: stable\n",
            list(crds),
            list(csvs)
        )
    }

    fn csv(version: &str) -> String {
        CSV.replace("foo.v1.2.0", &format!("foo.v{version}"))
            .replace("version: 1.2.0", &format!("version: {version}"))
    }

    /// The versions of the CRD objects of a bundle.
    fn crd_versions(render: &ConfigMapRender, bundle: &str) -> Vec<Vec<String>> {
        let b = render.render.catalog.bundle("foo", bundle).unwrap();
        b.properties
            .iter()
            .filter_map(|p| match p {
                Property::BundleObject(o) => o.decode().ok(),
                _ => None,
            })
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .map(|o| {
                o["spec"]["versions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_skipped_bundle_is_a_member_of_the_channel() {
        // foo.v1.2.0 replaces foo.v1.1.0 and skips foo.v1.1.1, which nothing replaces.
        let v111 = csv("1.1.1").replace("replaces: foo.v1.1.0", "replaces: foo.v1.0.0");
        let text = configmap_of(&[CRD.to_owned()], &[CSV.to_owned(), csv("1.1.0"), v111]);
        let r = parse_str("cm.yaml", &text).unwrap();
        assert!(r.left_out.is_empty(), "{:?}", r.left_out);
        let entries: Vec<&str> = r.render.catalog.channels[0]
            .entries
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(entries, ["foo.v1.2.0", "foo.v1.1.1", "foo.v1.1.0"]);
        assert!(r.render.catalog.bundle("foo", "foo.v1.1.1").is_some());
        assert!(
            !r.render.warnings.iter().any(|w| w.contains("foo.v1.1.1")),
            "{:?}",
            r.render.warnings
        );
    }

    #[test]
    fn crds_are_keyed_by_group_version_and_kind() {
        // The CRD changes between bundles: v1.1.0 owns foos.foo.io at v1alpha1, v1.2.0 at v1.
        let old_crd = CRD.replace(
            "    - {name: v1, served: true, storage: true}\n    - {name: v1beta1, served: false, storage: false}\n",
            "    - {name: v1alpha1, served: true, storage: true}\n",
        );
        let v110 = csv("1.1.0").replace(
            "{name: foos.foo.io, version: v1, kind: Foo}",
            "{name: foos.foo.io, version: v1alpha1, kind: Foo}",
        );
        let text = configmap_of(&[old_crd, CRD.to_owned()], &[CSV.to_owned(), v110]);
        let r = parse_str("cm.yaml", &text).unwrap();
        assert!(r.left_out.is_empty(), "{:?}", r.left_out);
        assert_eq!(crd_versions(&r, "foo.v1.1.0"), [["v1alpha1"]]);
        assert_eq!(crd_versions(&r, "foo.v1.2.0"), [["v1", "v1beta1"]]);

        // The same API in two documents: the first serves it, with a warning.
        let text = configmap_of(&[CRD.to_owned(), CRD.to_owned()], &[CSV.to_owned(), csv("1.1.0")]);
        let r = parse_str("cm.yaml", &text).unwrap();
        assert!(r.left_out.is_empty(), "{:?}", r.left_out);
        assert_eq!(crd_versions(&r, "foo.v1.2.0").len(), 1);
        assert!(
            r.render
                .warnings
                .iter()
                .any(|w| w.contains("data.customResourceDefinitions[1] (foos.foo.io) serves foo.io/v1")),
            "{:?}",
            r.render.warnings
        );
    }

    #[test]
    fn a_bad_bundle_is_left_out_and_the_rest_serves() {
        // foo.v1.1.0 owns an API no CRD document serves; the second entry is no CSV at all.
        let bad = csv("1.1.0").replace(
            "{name: foos.foo.io, version: v1, kind: Foo}",
            "{name: foos.foo.io, version: v9, kind: Foo}",
        );
        let text = configmap_of(
            &[CRD.to_owned()],
            &[CSV.to_owned(), "{kind: Secret}".to_owned(), bad],
        );
        let r = parse_str("cm.yaml", &text).unwrap();
        let left_out: Vec<String> = r.left_out.iter().map(ToString::to_string).collect();
        assert_eq!(
            left_out,
            [
                "bundle data.clusterServiceVersions[1] left out: it is not a ClusterServiceVersion with a metadata.name",
                "bundle foo.v1.1.0 left out: the CSV owns foo.io/v9/Foo (foos.foo.io) but no CRD in the bundle provides it",
            ]
        );
        let c = &r.render.catalog;
        assert_eq!(c.bundles.len(), 1);
        assert!(c.bundle("foo", "foo.v1.2.0").is_some(), "the rest serves");
        let entries: Vec<&str> = c.channels[0].entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(entries, ["foo.v1.2.0"]);
    }

    #[test]
    fn errors_name_the_key_and_cause() {
        let bad = configmap().replace("currentCSV: foo.v1.2.0", "current: x");
        let msg = display_chain(&parse_str("cm.yaml", &bad).unwrap_err());
        assert_eq!(
            msg,
            "invalid content in cm.yaml (document 1): data.packages[0]: channels[0]: missing `currentCSV`"
        );
        let msg = display_chain(&parse_str("cm.yaml", "kind: Secret\ndata: {}\n").unwrap_err());
        assert!(msg.contains("not ConfigMap"), "{msg}");
        let bad = configmap().replace(
            "  clusterServiceVersions: |-\n    - ",
            "  clusterServiceVersions: |-\n    - [\n    - ",
        );
        let msg = display_chain(&parse_str("cm.yaml", &bad).unwrap_err());
        assert!(
            msg.starts_with("failed to parse cm.yaml#data.clusterServiceVersions"),
            "{msg}"
        );
    }
}
