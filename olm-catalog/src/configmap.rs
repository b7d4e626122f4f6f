//! OLM's ConfigMap catalog format: a ConfigMap whose `data` holds three YAML lists as strings,
//! `customResourceDefinitions`, `clusterServiceVersions` and `packages` (package manifests). Each
//! CSV's bundle is the CSV plus the CRDs it owns; channel entries follow `replaces` from each
//! channel's `currentCSV`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{
    bundle::{CSV_KIND, Manifest},
    docs,
    error::{LoadError, Position},
    legacy::{self, CsvBundle, LegacyPackage},
    model::Catalog,
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

/// Parses a ConfigMap catalog given as YAML or JSON text; `path` names it in errors.
pub fn parse_str(path: impl AsRef<Path>, text: &str) -> Result<PackageRender, RenderError> {
    parse_str_with(path, text, &RenderOptions::default())
}

/// Loads a ConfigMap catalog file.
pub fn load(path: impl AsRef<Path>) -> Result<PackageRender, RenderError> {
    let path = path.as_ref();
    parse_str(path, &docs::read_text(path)?)
}

/// As [`parse_str`], with render options.
pub fn parse_str_with(
    path: impl AsRef<Path>,
    text: &str,
    options: &RenderOptions,
) -> Result<PackageRender, RenderError> {
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

    // Each data value is a YAML list in a string; errors name the key.
    let list = |key: &str| -> Result<Vec<Value>, LoadError> {
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
    };
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

    let crd_name = |c: &Value| {
        c.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let mut bundles = Vec::new();
    for (i, csv) in csvs.into_iter().enumerate() {
        if csv.get("kind").and_then(Value::as_str) != Some(CSV_KIND) {
            return Err(invalid(format!(
                "data.clusterServiceVersions[{i}] is not a ClusterServiceVersion"
            ))
            .into());
        }
        let csv = Manifest {
            file: PathBuf::from(format!("{}#data.clusterServiceVersions[{i}]", path.display())),
            object: csv,
        };
        let owned: Vec<String> = crate::bundle::Csv(&csv.object)
            .owned_crds()
            .into_iter()
            .map(|k| k.name)
            .collect();
        let mut objects = vec![csv];
        for (j, crd) in crds.iter().enumerate() {
            let name = crd_name(crd);
            if owned.contains(&name) && !objects.iter().any(|m| m.kind() != CSV_KIND && m.name() == name) {
                objects.push(Manifest {
                    file: PathBuf::from(format!("{}#data.customResourceDefinitions[{j}]", path.display())),
                    object: crd.clone(),
                });
            }
        }
        bundles.push(CsvBundle {
            path: path.to_path_buf(),
            objects,
            csv_index: 0,
        });
    }

    let mut warnings = Vec::new();
    let mut catalog = Catalog::default();
    for p in &packages {
        catalog.extend(legacy::assemble(p, &bundles, options, &mut warnings)?);
    }
    catalog.sort();
    warnings.extend(legacy::unreached(&catalog, &bundles));
    Ok(PackageRender {
        catalog,
        mode: GraphMode::Replaces,
        warnings,
    })
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
        let c = &r.catalog;
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
