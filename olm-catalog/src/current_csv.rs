//! What the legacy package-manifest directories ([`crate::manifests_dir`]) and ConfigMap catalogs
//! ([`crate::configmap`]) share: packages whose channels name their head
//! CSV (`currentCSV`), with entries found by following `replaces` from there.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::{
    bundle::{BundleDir, Csv, Manifest},
    model::{Catalog, Channel, ChannelEntry, Package},
    render::{RenderError, RenderOptions, render_bundle},
};

/// A package of a package manifest: `{packageName, channels: [{name, currentCSV}], defaultChannel}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LegacyPackage {
    pub name: String,
    pub default_channel: Option<String>,
    pub channels: Vec<(String, String)>,
}

impl LegacyPackage {
    pub(crate) fn from_value(v: &Value) -> Result<Self, String> {
        let name = v
            .get("packageName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or("missing `packageName`")?
            .to_owned();
        let items = v
            .get("channels")
            .and_then(Value::as_array)
            .ok_or("missing `channels` list")?;
        let channels = items
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let s = |k: &str| {
                    c.get(k)
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .ok_or_else(|| format!("channels[{i}]: missing `{k}`"))
                };
                Ok((s("name")?, s("currentCSV")?))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let default_channel = v
            .get("defaultChannel")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            // As operator-registry's PackageManifest.GetDefaultChannel: the only channel when unset.
            .or_else(|| (channels.len() == 1).then(|| channels[0].0.clone()));
        Ok(Self {
            name,
            default_channel,
            channels,
        })
    }
}

/// A CSV and the other objects of its bundle.
pub(crate) struct CsvBundle {
    pub path: std::path::PathBuf,
    pub objects: Vec<Manifest>,
    pub csv_index: usize,
}

impl CsvBundle {
    fn csv(&self) -> Csv<'_> {
        Csv(&self.objects[self.csv_index].object)
    }

    /// Whether the bundle renders (its package and channels play no part in that).
    pub(crate) fn check(&self, options: &RenderOptions) -> Result<(), RenderError> {
        render_bundle(&self.dir(String::new(), Vec::new(), None), options).map(drop)
    }

    fn dir(&self, package: String, channels: Vec<String>, default_channel: Option<String>) -> BundleDir {
        BundleDir {
            path: self.path.clone(),
            package,
            channels,
            default_channel,
            annotations: BTreeMap::new(),
            objects: self.objects.clone(),
            csv_index: self.csv_index,
            dependencies: Vec::new(),
            properties: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// Builds the package, its channels (following `replaces` from each `currentCSV`) and the bundles
/// they reach. As operator-registry does, a bundle that an entry skips is a member of the channel
/// too (so it can be a `startingCSV`), though the walk does not follow its own `replaces`.
/// Bundles no channel reaches are left out, with a warning.
pub(crate) fn assemble(
    pkg: &LegacyPackage,
    bundles: &[CsvBundle],
    options: &RenderOptions,
    warnings: &mut Vec<String>,
) -> Result<Catalog, RenderError> {
    let by_name: BTreeMap<&str, usize> = bundles
        .iter()
        .enumerate()
        .map(|(i, b)| (b.csv().name(), i))
        .collect();
    let mut channels = Vec::new();
    let mut membership: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (channel, current) in &pkg.channels {
        let mut entries = Vec::new();
        let mut visited = BTreeSet::new();
        let mut members = BTreeSet::new();
        let mut add = |i: usize, entries: &mut Vec<ChannelEntry>| {
            if !members.insert(i) {
                return;
            }
            let csv = bundles[i].csv();
            membership.entry(i).or_default().push(channel.clone());
            entries.push(ChannelEntry {
                name: csv.name().to_owned(),
                replaces: csv.replaces().map(str::to_owned),
                skips: csv.skips(),
                skip_range: csv.skip_range().map(str::to_owned),
            });
        };
        let mut cur = by_name.get(current.as_str()).copied();
        if cur.is_none() {
            warnings.push(format!(
                "package {}: channel {channel}: currentCSV {current} not found",
                pkg.name
            ));
        }
        while let Some(i) = cur {
            if !visited.insert(i) {
                break;
            }
            add(i, &mut entries);
            let csv = bundles[i].csv();
            for skipped in csv.skips() {
                if let Some(&s) = by_name.get(skipped.as_str()) {
                    add(s, &mut entries);
                }
            }
            cur = csv.replaces().and_then(|r| by_name.get(r).copied());
        }
        channels.push(Channel {
            name: channel.clone(),
            package: pkg.name.clone(),
            entries,
            properties: Vec::new(),
        });
    }

    let mut rendered = Vec::new();
    for (i, b) in bundles.iter().enumerate() {
        let Some(chs) = membership.get(&i) else { continue };
        let dir = b.dir(pkg.name.clone(), chs.clone(), pkg.default_channel.clone());
        rendered.push(render_bundle(&dir, options)?);
    }

    let head = pkg
        .default_channel
        .as_ref()
        .and_then(|d| pkg.channels.iter().find(|(c, _)| c == d))
        .and_then(|(_, current)| by_name.get(current.as_str()))
        .map(|&i| bundles[i].csv());
    let package = Package {
        name: pkg.name.clone(),
        default_channel: pkg.default_channel.clone(),
        icon: head.and_then(|c| c.icon()),
        description: head.and_then(|c| c.description().map(str::to_owned)),
        properties: Vec::new(),
    };
    let mut catalog = Catalog {
        packages: vec![package],
        channels,
        bundles: rendered,
        ..Catalog::default()
    };
    catalog.sort();
    Ok(catalog)
}

/// Bundles no package reached, for the warnings.
pub(crate) fn unreached(catalog: &Catalog, bundles: &[CsvBundle]) -> Vec<String> {
    let reached: BTreeSet<&str> = catalog.bundles.iter().map(|b| b.name.as_str()).collect();
    bundles
        .iter()
        .map(|b| b.csv().name())
        .filter(|n| !reached.contains(n))
        .map(|n| format!("CSV {n} is in no channel (no currentCSV leads to it), left out"))
        .collect()
}
