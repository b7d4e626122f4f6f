//! [`CatalogIndex`]: the catalog snapshots with their validated upgrade graphs and the lookups
//! resolution needs (bundles by package and by provided API, OLM's dependency preference order).
//! Build it once per set of snapshots and resolve any number of namespaces against it.

use std::collections::HashMap;

use crate::{
    graph::{GraphError, PackageGraph},
    model::{BundleInput, CatalogId, CatalogSnapshot, Gvk},
};

/// Rank of a bundle that no valid channel orders (skipped, off the replaces chain, or only in
/// invalid channels): it is never a dependency candidate.
pub(crate) const UNRANKED: u32 = u32::MAX;

pub(crate) struct IndexedCatalog {
    pub(crate) id: CatalogId,
    pub(crate) priority: i32,
    pub(crate) packages: HashMap<String, PackageGraph>,
    pub(crate) bundle_ids: HashMap<String, u32>,
}

pub(crate) struct IndexedBundle {
    pub(crate) input: BundleInput,
    pub(crate) catalog: u32,
    /// Position in the catalog's dependency preference order, or [`UNRANKED`].
    pub(crate) rank: u32,
    /// The channel that gave the bundle its rank.
    pub(crate) channel: Option<String>,
}

/// Catalog snapshots, validated and indexed for resolution.
pub struct CatalogIndex {
    pub(crate) catalogs: Vec<IndexedCatalog>,
    pub(crate) bundles: Vec<IndexedBundle>,
    pub(crate) by_gvk: HashMap<Gvk, Vec<u32>>,
    pub(crate) by_package: HashMap<String, Vec<u32>>,
    problems: Vec<GraphError>,
}

/// A channel in a catalog's order of dependency candidates: whether it is not
/// its package's default channel, the package, and the channel.
type Slot<'a> = (bool, &'a str, &'a crate::graph::ChannelGraph);

/// OLM's order for dependency candidates within a catalog: default channels first, then by
/// package and channel name; within a channel, its preference order.
fn preference_slots(graphs: &HashMap<String, PackageGraph>) -> Vec<Slot<'_>> {
    let mut package_names: Vec<&String> = graphs.keys().collect();
    package_names.sort();
    let mut slots: Vec<Slot<'_>> = package_names
        .into_iter()
        .map(|name| &graphs[name])
        .flat_map(|graph| {
            graph.channels_in_preference_order().map(move |channel| {
                (
                    graph.default_channel() != Some(channel.name()),
                    graph.name(),
                    channel,
                )
            })
        })
        .collect();
    slots.sort_by(|a, b| (a.0, a.1, a.2.name()).cmp(&(b.0, b.1, b.2.name())));
    slots
}

impl CatalogIndex {
    /// Indexes the snapshots. Invalid channels are left out of resolution and reported by
    /// [`CatalogIndex::problems`]; they never make the whole catalog unusable.
    pub fn new(snapshots: Vec<CatalogSnapshot>) -> CatalogIndex {
        let mut index = CatalogIndex {
            catalogs: Vec::with_capacity(snapshots.len()),
            bundles: Vec::new(),
            by_gvk: HashMap::new(),
            by_package: HashMap::new(),
            problems: Vec::new(),
        };
        for snapshot in snapshots {
            index.add_catalog(snapshot);
        }
        for ids in index.by_package.values_mut().chain(index.by_gvk.values_mut()) {
            ids.sort_by_key(|&id| {
                (
                    index.bundles[id as usize].catalog,
                    index.bundles[id as usize].rank,
                    id,
                )
            });
        }
        index
    }

    fn add_catalog(&mut self, snapshot: CatalogSnapshot) {
        let catalog_number = self.catalogs.len() as u32;
        let CatalogSnapshot {
            id,
            priority,
            packages,
            bundles,
        } = snapshot;
        let bundle_ids = self.add_bundles(bundles, catalog_number);
        let version_of = |bundle: &str| {
            bundle_ids
                .get(bundle)
                .map(|&b| self.bundles[b as usize].input.version.version().clone())
        };
        let graphs: HashMap<String, PackageGraph> = packages
            .iter()
            .map(|p| (p.name.clone(), PackageGraph::build(&id, p, &version_of)))
            .collect();
        self.record_problems(&id, &graphs, &bundle_ids);
        self.rank(&preference_slots(&graphs), &bundle_ids);
        for &number in bundle_ids.values() {
            let bundle = &self.bundles[number as usize];
            self.by_package
                .entry(bundle.input.package.clone())
                .or_default()
                .push(number);
            for gvk in &bundle.input.provides {
                self.by_gvk.entry(gvk.clone()).or_default().push(number);
            }
        }
        self.catalogs.push(IndexedCatalog {
            id,
            priority,
            packages: graphs,
            bundle_ids,
        });
    }

    /// Adds the bundles of catalog `catalog_number` (the first of each name), unranked;
    /// returns their numbers by name.
    fn add_bundles(&mut self, bundles: Vec<BundleInput>, catalog_number: u32) -> HashMap<String, u32> {
        let mut bundle_ids = HashMap::with_capacity(bundles.len());
        for bundle in bundles {
            if bundle_ids.contains_key(&bundle.name) {
                continue;
            }
            let number = self.bundles.len() as u32;
            bundle_ids.insert(bundle.name.clone(), number);
            self.bundles.push(IndexedBundle {
                input: bundle,
                catalog: catalog_number,
                rank: UNRANKED,
                channel: None,
            });
        }
        bundle_ids
    }

    /// Records the problems of catalog `id`'s packages, by package name: their
    /// graphs' errors, and channel entries that name no bundle of the package.
    fn record_problems(
        &mut self,
        id: &CatalogId,
        graphs: &HashMap<String, PackageGraph>,
        bundle_ids: &HashMap<String, u32>,
    ) {
        let mut package_names: Vec<&String> = graphs.keys().collect();
        package_names.sort();
        for name in package_names {
            let graph = &graphs[name];
            self.problems.extend(graph.errors(id));
            for channel in graph.channels_in_preference_order() {
                for entry in channel.entries() {
                    let known = bundle_ids
                        .get(&entry.bundle)
                        .is_some_and(|&b| self.bundles[b as usize].input.package == *name);
                    if !known {
                        self.problems.push(GraphError::UnknownBundle {
                            catalog: id.clone(),
                            package: name.clone(),
                            channel: channel.name().to_owned(),
                            bundle: entry.bundle.clone(),
                        });
                    }
                }
            }
        }
    }

    /// Ranks the catalog's bundles by `slots` (each bundle in the first channel of
    /// its package that lists it), in each channel's preference order.
    fn rank(&mut self, slots: &[Slot<'_>], bundle_ids: &HashMap<String, u32>) {
        let mut rank = 0;
        for &(_, package, channel) in slots {
            for entry in channel.preference_order() {
                let Some(&number) = bundle_ids.get(&entry.bundle) else {
                    continue;
                };
                let bundle = &mut self.bundles[number as usize];
                if bundle.input.package != package || bundle.rank != UNRANKED {
                    continue;
                }
                bundle.rank = rank;
                bundle.channel = Some(channel.name().to_owned());
                rank += 1;
            }
        }
    }

    /// Invalid channels, missing default channels and channel entries without a bundle, in
    /// catalog order.
    pub fn problems(&self) -> &[GraphError] {
        &self.problems
    }

    /// The upgrade graph of a package in a catalog.
    pub fn package(&self, catalog: &CatalogId, package: &str) -> Option<&PackageGraph> {
        self.catalog_number(catalog)
            .and_then(|c| self.catalogs[c as usize].packages.get(package))
    }

    /// A bundle of a catalog by name.
    pub fn bundle(&self, catalog: &CatalogId, name: &str) -> Option<&BundleInput> {
        let catalog = &self.catalogs[self.catalog_number(catalog)? as usize];
        catalog
            .bundle_ids
            .get(name)
            .map(|&b| &self.bundles[b as usize].input)
    }

    /// How many bundles the index holds, over all catalogs.
    pub fn bundle_count(&self) -> usize {
        self.bundles.len()
    }

    pub(crate) fn catalog_number(&self, catalog: &CatalogId) -> Option<u32> {
        self.catalogs
            .iter()
            .position(|c| c.id == *catalog)
            .map(|c| c as u32)
    }
}
