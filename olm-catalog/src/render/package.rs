//! A package directory (version directories, each a bundle, as in community-operators) rendered
//! into a whole catalog.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde_json::Value;

use super::{
    bundle::{RenderOptions, render_bundle},
    channels::{
        GraphMode, Summary, build_channels, declared_default_channel, default_channel, version_order,
    },
    ci::read_ci,
    error::RenderError,
    templates::{chosen_template, release_config, template_package},
};
use crate::{
    bundle,
    error::LoadError,
    model::{Bundle, Catalog, Package},
    version::Version,
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::tests::{CRD, CSV, write_bundle};

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
}
