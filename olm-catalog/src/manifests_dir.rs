//! OLM's legacy package-manifest layout: `<package>.package.yaml` (`packageName`, `channels` with
//! `currentCSV`, `defaultChannel`) beside one directory per version holding a CSV and its CRDs.
//! Channel entries follow `replaces` from each channel's `currentCSV`.
//!
//! This is the on-disk format of old catalogs (community-operators' `packagemanifests/`), not the
//! PackageManifest API (`packages.operators.coreos.com/v1`) that catalog-operator serves.

use std::path::Path;

use crate::{
    bundle::{files_of, read_manifests, take_csv},
    current_csv::{self, CsvBundle, LegacyPackage},
    docs,
    error::{LoadError, Position},
    render::{GraphMode, PackageRender, RenderError, RenderOptions},
};

/// Loads a package-manifest directory into a catalog, bundles rendered with bundle objects.
pub fn load(path: impl AsRef<Path>) -> Result<PackageRender, RenderError> {
    load_with(path, &RenderOptions::default())
}

/// As [`load`], with render options.
pub fn load_with(path: impl AsRef<Path>, options: &RenderOptions) -> Result<PackageRender, RenderError> {
    let dir = path.as_ref();
    let mut pkg = None;
    for file in files_of(dir)? {
        if !matches!(
            file.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            continue;
        }
        let text = docs::read_text(&file)?;
        let Some(doc) = docs::parse_first_document(&file, &text)? else {
            continue;
        };
        if doc.get("packageName").is_some() {
            let p = LegacyPackage::from_value(&doc)
                .map_err(|m| LoadError::invalid(&file, Position::document(1), m))?;
            pkg = Some(p);
            break;
        }
    }
    let pkg = pkg.ok_or_else(|| {
        LoadError::invalid(
            dir,
            Position::default(),
            "no package manifest (a file with `packageName`) found",
        )
    })?;

    let mut warnings = Vec::new();
    let mut bundles = Vec::new();
    let mut subdirs: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| LoadError::io(dir, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    for sub in subdirs {
        let mut objects = read_manifests(&sub, &mut warnings)?;
        if !objects.iter().any(|m| m.kind() == crate::bundle::CSV_KIND) {
            warnings.push(format!("{}: no ClusterServiceVersion, skipped", sub.display()));
            continue;
        }
        let csv_index = take_csv(&mut objects, &sub, &mut warnings)?;
        bundles.push(CsvBundle {
            path: sub,
            objects,
            csv_index,
        });
    }
    let catalog = current_csv::assemble(&pkg, &bundles, options, &mut warnings)?;
    warnings.extend(current_csv::unreached(&catalog, &bundles));
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
        bundle::tests::{CRD, CSV, write_bundle},
        error::display_chain,
        validate::validate,
    };

    #[test]
    fn loads_channels_from_current_csv() {
        let v11 = CSV
            .replace("foo.v1.2.0", "foo.v1.1.0")
            .replace("version: 1.2.0", "version: 1.1.0")
            .replace("  replaces: foo.v1.1.0\n", "");
        let dir = write_bundle(
            "pm",
            &[
                (
                    "foo.package.yaml",
                    "packageName: foo\nchannels:\n- name: stable\n  currentCSV: foo.v1.2.0\ndefaultChannel: stable\n",
                ),
                ("1.2.0/foo.csv.yaml", CSV),
                ("1.2.0/foos.crd.yaml", CRD),
                ("1.1.0/foo.csv.yaml", &v11),
                ("1.1.0/foos.crd.yaml", CRD),
                (
                    "0.9.0/foo.csv.yaml",
                    &CSV.replace("foo.v1.2.0", "foo.v0.9.0")
                        .replace("version: 1.2.0", "version: 0.9.0"),
                ),
                ("0.9.0/foos.crd.yaml", CRD),
            ],
        );
        let r = load(&dir).unwrap();
        let c = &r.catalog;
        assert_eq!(c.packages[0].default_channel.as_deref(), Some("stable"));
        assert_eq!(
            c.channels[0]
                .entries
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>(),
            ["foo.v1.2.0", "foo.v1.1.0"]
        );
        assert_eq!(c.bundles.len(), 2);
        assert!(
            r.warnings.iter().any(|w| w.contains("foo.v0.9.0")),
            "{:?}",
            r.warnings
        );
        let problems: Vec<_> = validate(c)
            .into_iter()
            .filter(|e| e.severity() == crate::validate::Severity::Error)
            .collect();
        assert!(problems.is_empty(), "{problems:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_name_the_file() {
        let dir = write_bundle(
            "pm-bad",
            &[(
                "foo.package.yaml",
                "packageName: foo\nchannels:\n- name: stable\n",
            )],
        );
        let msg = display_chain(&load(&dir).unwrap_err());
        assert!(
            msg.contains("foo.package.yaml") && msg.contains("channels[0]: missing `currentCSV`"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let dir = write_bundle("pm-none", &[("1.0/x.yaml", "a: 1")]);
        let msg = display_chain(&load(&dir).unwrap_err());
        assert!(msg.contains("no package manifest"), "{msg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
