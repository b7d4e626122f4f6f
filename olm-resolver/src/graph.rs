//! The upgrade graph of a channel: `replaces`, `skips` and `skipRange` edges, the channel head,
//! OLM's preference order, and the successors of an installed CSV.
//!
//! The rules are OLM's:
//! - the head is the entry that no other entry of the channel replaces or skips; a channel with
//!   more than one head, or with a cycle of `replaces`/`skips`, is invalid;
//! - the preference order starts at the head and follows `replaces`; entries that another entry
//!   of the channel skips are left out of it (they can still be named by `startingCSV`);
//! - `replaces` and `skips` may name bundles that are not in the catalog (each catalog is a
//!   window of a package's history);
//! - the successors of an installed CSV `X` at version `v` are the entries that replace `X`,
//!   skip `X`, or whose `skipRange` contains `v`, in preference order; a `skipRange` only leads
//!   up: an entry whose own version is not above `v` is no successor by its `skipRange` (an
//!   open range such as debezium-operator 2.7.0-final's `>2.6.1-final` also contains 3.0.0-final,
//!   and following it would move an installed 3.0.0-final down to 2.7.0-final, then up again by
//!   `replaces`, in a cycle).
//!
//! Unlike OLM, which orders the subset of a channel it is looking at (and fails when that subset
//! has two chains), the order is computed once over the whole channel and then filtered.

use std::collections::HashMap;

use petgraph::{algo::tarjan_scc, graph::DiGraph};
use semver::Version;

use crate::model::{CatalogId, ChannelEntry, ChannelInput, Deprecation, PackageInput};

/// Why a channel or package cannot be used. Resolution treats the affected channel as absent
/// and names the error when a Subscription or dependency needed it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// More than one entry is neither replaced nor skipped by another entry.
    #[error(
        "channel {channel} of package {package} in catalog {catalog} has {} heads ({}): every entry but one must be replaced or skipped by another entry",
        heads.len(), heads.join(", ")
    )]
    MultipleHeads {
        /// The catalog.
        catalog: CatalogId,
        /// The package.
        package: String,
        /// The channel.
        channel: String,
        /// The heads, sorted.
        heads: Vec<String>,
    },
    /// The `replaces`/`skips` edges form a cycle.
    #[error(
        "channel {channel} of package {package} in catalog {catalog} has a cycle of replaces/skips between {}",
        entries.join(", ")
    )]
    Cycle {
        /// The catalog.
        catalog: CatalogId,
        /// The package.
        package: String,
        /// The channel.
        channel: String,
        /// The entries on the cycle, sorted.
        entries: Vec<String>,
    },
    /// The channel has no entries.
    #[error("channel {channel} of package {package} in catalog {catalog} has no entries")]
    Empty {
        /// The catalog.
        catalog: CatalogId,
        /// The package.
        package: String,
        /// The channel.
        channel: String,
    },
    /// The same bundle appears twice in one channel.
    #[error("channel {channel} of package {package} in catalog {catalog} lists {bundle} twice")]
    DuplicateEntry {
        /// The catalog.
        catalog: CatalogId,
        /// The package.
        package: String,
        /// The channel.
        channel: String,
        /// The repeated bundle.
        bundle: String,
    },
    /// A channel entry names a bundle that the catalog does not have (or that belongs to
    /// another package).
    #[error(
        "channel {channel} of package {package} in catalog {catalog} lists {bundle}, which is not a bundle of that package in the catalog"
    )]
    UnknownBundle {
        /// The catalog.
        catalog: CatalogId,
        /// The package.
        package: String,
        /// The channel.
        channel: String,
        /// The missing bundle.
        bundle: String,
    },
    /// The package's default channel is not one of its channels.
    #[error("package {package} in catalog {catalog} has default channel {channel}, which it does not have")]
    MissingDefaultChannel {
        /// The catalog.
        catalog: CatalogId,
        /// The package.
        package: String,
        /// The default channel named.
        channel: String,
    },
}

/// A validated channel.
#[derive(Debug, Clone)]
pub struct ChannelGraph {
    name: String,
    entries: Vec<ChannelEntry>,
    by_name: HashMap<String, usize>,
    /// Head first, then down `replaces`, then stranded entries; skipped entries included (see
    /// `skipped`).
    chain: Vec<usize>,
    skipped: Vec<bool>,
    /// Each entry's version, where known, in the order of `entries`.
    versions: Vec<Option<Version>>,
    deprecation: Option<Deprecation>,
    warnings: Vec<GraphError>,
}

/// Each entry's index by its bundle's name; `Err` names a bundle listed twice.
fn index_by_name(entries: &[ChannelEntry]) -> Result<HashMap<String, usize>, String> {
    let mut by_name = HashMap::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        if by_name.insert(entry.bundle.clone(), i).is_some() {
            return Err(entry.bundle.clone());
        }
    }
    Ok(by_name)
}

/// A channel's `replaces` and `skips` edges, between the indexes of its entries.
struct Edges {
    graph: DiGraph<usize, ()>,
    /// Whether some entry replaces or skips each entry (one that none does is a head).
    replaced_or_skipped: Vec<bool>,
    /// Whether another entry skips each entry.
    skipped: Vec<bool>,
    /// An entry that replaces or skips itself.
    self_loop: Option<usize>,
}

impl Edges {
    /// The edges of `entries`; names not in the channel are left out.
    fn of(entries: &[ChannelEntry], by_name: &HashMap<String, usize>) -> Edges {
        let n = entries.len();
        let mut graph = DiGraph::<usize, ()>::with_capacity(n, n);
        let nodes: Vec<_> = (0..n).map(|i| graph.add_node(i)).collect();
        let mut replaced_or_skipped = vec![false; n];
        let mut skipped = vec![false; n];
        let mut self_loop = None;
        for (i, entry) in entries.iter().enumerate() {
            let targets = entry
                .replaces
                .iter()
                .map(|r| (r, false))
                .chain(entry.skips.iter().map(|s| (s, true)));
            for (target, is_skip) in targets {
                if let Some(&j) = by_name.get(target) {
                    if i == j {
                        self_loop = Some(i);
                    }
                    graph.add_edge(nodes[i], nodes[j], ());
                    replaced_or_skipped[j] = true;
                    skipped[j] |= is_skip && i != j;
                }
            }
        }
        Edges {
            graph,
            replaced_or_skipped,
            skipped,
            self_loop,
        }
    }

    /// The bundles of a cycle (sorted), if the edges have one.
    fn cycle(&self, entries: &[ChannelEntry]) -> Option<Vec<String>> {
        let members = tarjan_scc(&self.graph)
            .into_iter()
            .find(|scc| scc.len() > 1)
            .map(|scc| scc.into_iter().map(|node| self.graph[node]).collect::<Vec<_>>())
            .or(self.self_loop.map(|i| vec![i]))?;
        let mut names: Vec<String> = members.iter().map(|&i| entries[i].bundle.clone()).collect();
        names.sort();
        Some(names)
    }
}

/// The order of a channel's entries (indexes).
struct Order {
    /// The heads, highest version first.
    heads: Vec<usize>,
    /// Each head followed by its `replaces` chain, then the stranded entries.
    chain: Vec<usize>,
}

impl Order {
    fn of(
        entries: &[ChannelEntry],
        by_name: &HashMap<String, usize>,
        replaced_or_skipped: &[bool],
        version_of: &dyn Fn(&str) -> Option<Version>,
    ) -> Order {
        let n = entries.len();
        // Orders entries highest version first; entries without a known version after those,
        // by name.
        let highest_version_first = |a: usize, b: usize| {
            let (va, vb) = (version_of(&entries[a].bundle), version_of(&entries[b].bundle));
            vb.cmp(&va)
                .then_with(|| entries[a].bundle.cmp(&entries[b].bundle))
        };
        let mut heads: Vec<usize> = (0..n).filter(|&i| !replaced_or_skipped[i]).collect();
        heads.sort_by(|&a, &b| highest_version_first(a, b));
        let mut chain = Vec::with_capacity(n);
        let mut seen = vec![false; n];
        for &head in &heads {
            let mut next = Some(head);
            while let Some(i) = next.filter(|&i| !seen[i]) {
                seen[i] = true;
                chain.push(i);
                next = entries[i].replaces.as_ref().and_then(|r| by_name.get(r).copied());
            }
        }
        // Entries no head reaches through `replaces` (stranded: e.g. the head skips the top of
        // an older chain) come last, highest version first, so that a CSV installed from them
        // can still find its upgrade.
        let mut stranded: Vec<usize> = (0..n).filter(|&i| !seen[i]).collect();
        stranded.sort_by(|&a, &b| highest_version_first(a, b));
        chain.extend(stranded);
        Order { heads, chain }
    }
}

impl ChannelGraph {
    /// Validates a channel and computes its order. `catalog` and `package` only name the channel
    /// in errors.
    ///
    /// A channel with more than one head (an entry no other entry replaces or skips) is not
    /// refused: catalogs that hold only a window of a package's versions have them. The heads
    /// are ordered by version, highest first (`version_of` gives a bundle's version), each
    /// followed by its `replaces` chain, and the channel reports a [`GraphError::MultipleHeads`]
    /// warning in [`ChannelGraph::warnings`].
    pub fn build(
        catalog: &CatalogId,
        package: &str,
        channel: &ChannelInput,
        version_of: &dyn Fn(&str) -> Option<Version>,
    ) -> Result<ChannelGraph, GraphError> {
        let at = || (catalog.clone(), package.to_owned(), channel.name.clone());
        if channel.entries.is_empty() {
            let (catalog, package, channel) = at();
            return Err(GraphError::Empty {
                catalog,
                package,
                channel,
            });
        }
        let by_name = index_by_name(&channel.entries).map_err(|bundle| {
            let (catalog, package, channel) = at();
            GraphError::DuplicateEntry {
                catalog,
                package,
                channel,
                bundle,
            }
        })?;
        let edges = Edges::of(&channel.entries, &by_name);
        if let Some(entries) = edges.cycle(&channel.entries) {
            let (catalog, package, channel) = at();
            return Err(GraphError::Cycle {
                catalog,
                package,
                channel,
                entries,
            });
        }
        let order = Order::of(&channel.entries, &by_name, &edges.replaced_or_skipped, version_of);
        let mut warnings = Vec::new();
        if order.heads.len() > 1 {
            let mut names: Vec<String> = order
                .heads
                .iter()
                .map(|&i| channel.entries[i].bundle.clone())
                .collect();
            names.sort();
            let (catalog, package, channel) = at();
            warnings.push(GraphError::MultipleHeads {
                catalog,
                package,
                channel,
                heads: names,
            });
        }
        let (chain, skipped) = (order.chain, edges.skipped);
        let versions = channel.entries.iter().map(|e| version_of(&e.bundle)).collect();
        Ok(ChannelGraph {
            name: channel.name.clone(),
            entries: channel.entries.clone(),
            by_name,
            chain,
            skipped,
            versions,
            deprecation: channel.deprecation.clone(),
            warnings,
        })
    }

    /// Problems that do not make the channel unusable (several heads).
    pub fn warnings(&self) -> &[GraphError] {
        &self.warnings
    }

    /// The channel name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The channel head: the entry no other entry replaces or skips (the highest-versioned
    /// one when there are several).
    pub fn head(&self) -> &ChannelEntry {
        &self.entries[self.chain[0]]
    }

    /// The channel's deprecation, if any.
    pub fn deprecation(&self) -> Option<&Deprecation> {
        self.deprecation.as_ref()
    }

    /// The entry for a bundle name.
    pub fn entry(&self, bundle: &str) -> Option<&ChannelEntry> {
        self.by_name.get(bundle).map(|&i| &self.entries[i])
    }

    /// Whether another entry of the channel skips this bundle.
    pub fn is_skipped(&self, bundle: &str) -> bool {
        self.by_name.get(bundle).is_some_and(|&i| self.skipped[i])
    }

    /// All entries, in the order they were given.
    pub fn entries(&self) -> &[ChannelEntry] {
        &self.entries
    }

    /// OLM's preference order: the head, then down the `replaces` chain, without skipped entries;
    /// entries that no chain reaches come last, highest version first.
    pub fn preference_order(&self) -> impl Iterator<Item = &ChannelEntry> + '_ {
        self.chain
            .iter()
            .filter(|&&i| !self.skipped[i])
            .map(|&i| &self.entries[i])
    }

    /// The entries an installed CSV may upgrade to, in preference order: those that replace it,
    /// skip it, or whose `skipRange` contains its version and whose own version is above it
    /// (or unknown).
    pub fn successors<'a>(
        &'a self,
        installed: &'a str,
        version: &'a Version,
    ) -> impl Iterator<Item = &'a ChannelEntry> + 'a {
        self.chain
            .iter()
            .filter(|&&i| !self.skipped[i])
            .filter(move |&&i| is_successor(&self.entries[i], self.versions[i].as_ref(), installed, version))
            .map(|&i| &self.entries[i])
    }
}

/// Whether `entry`, at `entry_version` when known, is an upgrade from the CSV `installed` at
/// `version`: it replaces or skips `installed`, or its `skipRange` contains `version` and
/// `entry_version` is not at or below `version` (a range never leads down).
pub fn is_successor(
    entry: &ChannelEntry,
    entry_version: Option<&Version>,
    installed: &str,
    version: &Version,
) -> bool {
    let leads_up = entry_version.is_none_or(|own| own.cmp_precedence(version).is_gt());
    entry.bundle != installed
        && (entry.replaces.as_deref() == Some(installed)
            || entry.skips.iter().any(|s| s == installed)
            || (leads_up && entry.skip_range.as_ref().is_some_and(|r| r.matches(version))))
}

/// A package with its validated channels.
#[derive(Debug, Clone)]
pub struct PackageGraph {
    name: String,
    default_channel: Option<String>,
    channels: Vec<Result<ChannelGraph, GraphError>>,
    deprecation: Option<Deprecation>,
}

impl PackageGraph {
    /// Validates every channel of a package; an invalid channel does not invalidate the others.
    /// `version_of` gives a bundle's version (see [`ChannelGraph::build`]).
    pub fn build(
        catalog: &CatalogId,
        package: &PackageInput,
        version_of: &dyn Fn(&str) -> Option<Version>,
    ) -> PackageGraph {
        let mut channels: Vec<_> = package
            .channels
            .iter()
            .map(|c| ChannelGraph::build(catalog, &package.name, c, version_of))
            .collect();
        channels.sort_by(|a, b| channel_name(a).cmp(channel_name(b)));
        PackageGraph {
            name: package.name.clone(),
            default_channel: package.default_channel.clone(),
            channels,
            deprecation: package.deprecation.clone(),
        }
    }

    /// The package name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The default channel's name.
    pub fn default_channel(&self) -> Option<&str> {
        self.default_channel.as_deref()
    }

    /// The package's deprecation, if any.
    pub fn deprecation(&self) -> Option<&Deprecation> {
        self.deprecation.as_ref()
    }

    /// A channel by name: `None` when absent, `Some(Err)` when invalid.
    pub fn channel(&self, name: &str) -> Option<Result<&ChannelGraph, &GraphError>> {
        self.channels
            .iter()
            .find(|c| channel_name(c) == name)
            .map(Result::as_ref)
    }

    /// The valid channels, default channel first, then by name (OLM's order).
    pub fn channels_in_preference_order(&self) -> impl Iterator<Item = &ChannelGraph> + '_ {
        let default = self.default_channel.as_deref();
        let first = self
            .channels
            .iter()
            .filter_map(|c| c.as_ref().ok())
            .filter(move |c| Some(c.name()) == default);
        let rest = self
            .channels
            .iter()
            .filter_map(|c| c.as_ref().ok())
            .filter(move |c| Some(c.name()) != default);
        first.chain(rest)
    }

    /// The errors of the invalid channels, and a missing default channel.
    pub fn errors(&self, catalog: &CatalogId) -> Vec<GraphError> {
        let mut errors: Vec<GraphError> = self
            .channels
            .iter()
            .flat_map(|c| match c {
                Ok(channel) => channel.warnings().to_vec(),
                Err(e) => vec![e.clone()],
            })
            .collect();
        if let Some(default) = &self.default_channel
            && self.channel(default).is_none()
        {
            errors.push(GraphError::MissingDefaultChannel {
                catalog: catalog.clone(),
                package: self.name.clone(),
                channel: default.clone(),
            });
        }
        errors
    }
}

fn channel_name(channel: &Result<ChannelGraph, GraphError>) -> &str {
    match channel {
        Ok(c) => c.name(),
        Err(
            GraphError::MultipleHeads { channel, .. }
            | GraphError::Cycle { channel, .. }
            | GraphError::Empty { channel, .. }
            | GraphError::DuplicateEntry { channel, .. }
            | GraphError::UnknownBundle { channel, .. }
            | GraphError::MissingDefaultChannel { channel, .. },
        ) => channel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range::VersionRange;

    fn cat() -> CatalogId {
        CatalogId::new("community", "olm")
    }

    fn e(name: &str) -> ChannelEntry {
        ChannelEntry::new(name)
    }

    fn build(entries: Vec<ChannelEntry>) -> Result<ChannelGraph, GraphError> {
        ChannelGraph::build(&cat(), "etcd", &ChannelInput::new("stable", entries), &|_| None)
    }

    fn names<'a>(entries: impl Iterator<Item = &'a ChannelEntry>) -> Vec<&'a str> {
        entries.map(|e| e.bundle.as_str()).collect()
    }

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn head_and_order_follow_replaces() {
        let g = build(vec![
            e("a.v1").replaces("a.v0"),
            e("a.v3").replaces("a.v2"),
            e("a.v2").replaces("a.v1"),
        ])
        .unwrap();
        assert_eq!(g.head().bundle, "a.v3");
        assert_eq!(names(g.preference_order()), ["a.v3", "a.v2", "a.v1"]);
    }

    #[test]
    fn skipped_entries_leave_the_order_but_stay_addressable() {
        let g = build(vec![
            e("a.v1"),
            e("a.v2").replaces("a.v1"),
            e("a.v3").replaces("a.v2").skips("a.v2b"),
            e("a.v2b").replaces("a.v1"),
        ])
        .unwrap();
        assert_eq!(g.head().bundle, "a.v3");
        assert_eq!(names(g.preference_order()), ["a.v3", "a.v2", "a.v1"]);
        assert!(g.is_skipped("a.v2b"));
        assert!(g.entry("a.v2b").is_some());
    }

    #[test]
    fn stranded_entries_come_last_and_still_upgrade() {
        // The head skips the top of an older chain, so nothing reaches a.v1 and a.v2 by
        // `replaces` from the head; an a.v1 install must still find a.v2.
        let version = |bundle: &str| bundle.strip_prefix("a.v").map(|n| v(&format!("{n}.0.0")));
        let channel = ChannelInput::new(
            "stable",
            vec![
                e("a.v9").skips("a.v3"),
                e("a.v3").replaces("a.v2"),
                e("a.v2").replaces("a.v1"),
                e("a.v1"),
            ],
        );
        let g = ChannelGraph::build(&cat(), "etcd", &channel, &version).expect("valid");
        assert_eq!(names(g.preference_order()), ["a.v9", "a.v2", "a.v1"]);
        assert_eq!(names(g.successors("a.v1", &v("1.0.0"))), ["a.v2"]);
        assert!(g.warnings().is_empty());
    }

    #[test]
    fn multiple_heads_are_ordered_by_version_and_named() {
        let version = |bundle: &str| match bundle {
            "a.v1" => Some(v("1.0.0")),
            "a.v2" => Some(v("2.0.0")),
            "a.v9" => Some(v("0.9.0")),
            _ => None,
        };
        let channel = ChannelInput::new("stable", vec![e("a.v2").replaces("a.v1"), e("a.v1"), e("a.v9")]);
        let g = ChannelGraph::build(&cat(), "etcd", &channel, &version).expect("several heads are usable");
        assert_eq!(g.head().bundle, "a.v2", "the highest-versioned head leads");
        assert_eq!(names(g.preference_order()), ["a.v2", "a.v1", "a.v9"]);
        assert_eq!(
            g.warnings()[0].to_string(),
            "channel stable of package etcd in catalog olm/community has 2 heads (a.v2, a.v9): every entry but one must be replaced or skipped by another entry"
        );
    }

    #[test]
    fn cycles_are_named() {
        let err = build(vec![
            e("a.v3"),
            e("a.v1").replaces("a.v2").skips("x"),
            e("a.v2").replaces("a.v1"),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "channel stable of package etcd in catalog olm/community has a cycle of replaces/skips between a.v1, a.v2"
        );
        let err = build(vec![e("a.v1").replaces("a.v1")]).unwrap_err();
        assert!(matches!(err, GraphError::Cycle { entries, .. } if entries == ["a.v1"]));
    }

    #[test]
    fn dangling_replaces_is_allowed() {
        let g = build(vec![
            e("a.v5").replaces("a.v4"),
            e("a.v4").replaces("a.v3-not-in-catalog"),
        ])
        .unwrap();
        assert_eq!(names(g.preference_order()), ["a.v5", "a.v4"]);
    }

    #[test]
    fn successors_by_replaces_skips_and_skip_range() {
        let g = build(vec![
            e("a.v1.0.0"),
            e("a.v1.1.0").replaces("a.v1.0.0"),
            e("a.v1.2.0").replaces("a.v1.1.0").skips("a.v1.0.0"),
            e("a.v2.0.0")
                .replaces("a.v1.2.0")
                .skip_range(VersionRange::parse(">=1.0.0 <2.0.0").unwrap()),
        ])
        .unwrap();
        assert_eq!(
            names(g.successors("a.v1.0.0", &v("1.0.0"))),
            ["a.v2.0.0", "a.v1.2.0", "a.v1.1.0"]
        );
        assert_eq!(
            names(g.successors("a.v1.1.0", &v("1.1.0"))),
            ["a.v2.0.0", "a.v1.2.0"]
        );
        assert_eq!(names(g.successors("a.v2.0.0", &v("2.0.0"))), Vec::<&str>::new());
        // An installed CSV the channel never heard of, reached by skipRange only.
        assert_eq!(names(g.successors("a.v0.9.0-hotfix", &v("1.5.0"))), ["a.v2.0.0"]);
    }

    /// debezium-operator's `debezium-latest` channel (corpus bundles 2.6.1-final to
    /// 3.0.0-final): each release's open `skipRange` also contains every later release, which
    /// made an installed 3.0.0-final "upgrade" to 2.7.0-final, then by `replaces` to
    /// 2.7.3-final and 3.0.0-final again, in a cycle.
    #[test]
    fn skip_range_never_leads_down() {
        let version = |bundle: &str| {
            bundle
                .strip_prefix("debezium-operator.v")
                .map(|n| Version::parse(n).unwrap())
        };
        let channel = ChannelInput::new(
            "debezium-latest",
            vec![
                e("debezium-operator.v3.0.0-final")
                    .replaces("debezium-operator.v2.7.3-final")
                    .skip_range(VersionRange::parse(">2.7.3-final").unwrap()),
                e("debezium-operator.v2.7.3-final").replaces("debezium-operator.v2.7.0-final"),
                e("debezium-operator.v2.7.0-final")
                    .replaces("debezium-operator.v2.6.1-final")
                    .skip_range(VersionRange::parse(">2.6.1-final").unwrap()),
                e("debezium-operator.v2.6.1-final")
                    .replaces("debezium-operator.v2.6.0-final")
                    .skip_range(VersionRange::parse(">2.5.3-final").unwrap()),
            ],
        );
        let g = ChannelGraph::build(&cat(), "debezium-operator", &channel, &version).expect("valid");
        assert_eq!(g.head().bundle, "debezium-operator.v3.0.0-final");
        assert_eq!(
            names(g.successors("debezium-operator.v3.0.0-final", &v("3.0.0-final"))),
            Vec::<&str>::new(),
            "the head has nowhere to go"
        );
        assert_eq!(
            names(g.successors("debezium-operator.v2.7.3-final", &v("2.7.3-final"))),
            ["debezium-operator.v3.0.0-final"]
        );
        assert_eq!(
            names(g.successors("debezium-operator.v2.7.0-final", &v("2.7.0-final"))),
            ["debezium-operator.v2.7.3-final"],
            "2.6.1-final's skipRange contains 2.7.0-final but leads down"
        );
        // A CSV the channel does not list still upgrades by a range that leads up.
        assert_eq!(
            names(g.successors("debezium-operator.v2.6.5-hotfix", &v("2.6.5"))),
            ["debezium-operator.v2.7.0-final"]
        );
    }

    #[test]
    fn skip_range_covers_prereleases() {
        let g = build(vec![
            e("cert-manager.v1.14.2").skip_range(VersionRange::parse("<1.14.2").unwrap()),
        ])
        .unwrap();
        assert_eq!(
            names(g.successors("cert-manager.v1.14.2-rc1", &v("1.14.2-rc1"))),
            ["cert-manager.v1.14.2"]
        );
        assert_eq!(
            names(g.successors("cert-manager.v1.14.1", &v("1.14.1"))),
            ["cert-manager.v1.14.2"]
        );
    }

    #[test]
    fn package_channels_default_first_and_errors_collected() {
        let package = PackageInput::new(
            "etcd",
            Some("stable"),
            vec![
                ChannelInput::new("stable", vec![e("a.v2").replaces("a.v1"), e("a.v1")]),
                ChannelInput::new("alpha", vec![e("a.v1")]),
                ChannelInput::new("broken", vec![e("a.v1"), e("a.v2")]),
            ],
        );
        let graph = PackageGraph::build(&cat(), &package, &|_| None);
        let order: Vec<&str> = graph
            .channels_in_preference_order()
            .map(ChannelGraph::name)
            .collect();
        assert_eq!(order, ["stable", "alpha", "broken"]);
        assert!(
            graph.channel("broken").is_some_and(|c| c.is_ok()),
            "several heads still make a channel"
        );
        assert!(graph.channel("nope").is_none());
        assert!(matches!(
            graph.errors(&cat())[..],
            [GraphError::MultipleHeads { .. }]
        ));
        let missing = PackageGraph::build(&cat(), &PackageInput::new("etcd", Some("beta"), vec![]), &|_| {
            None
        });
        assert_eq!(
            missing.errors(&cat())[0].to_string(),
            "package etcd in catalog olm/community has default channel beta, which it does not have"
        );
    }
}
