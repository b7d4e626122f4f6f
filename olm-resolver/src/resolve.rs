//! Resolution of a namespace: its Subscriptions and installed CSVs against a [`CatalogIndex`].
//!
//! The search is a depth-first walk over the candidates of each need in OLM's preference order
//! (Subscriptions by name, then the needs of each chosen bundle, breadth first), with
//! conflict-directed backjumping: when every candidate of a need fails, the walk returns straight
//! to the latest choice that took part in the failure instead of trying every alternative in
//! between. The first complete assignment it finds is the most preferred one in that order, and a
//! need that an already chosen bundle meets adds nothing (OLM's "fewest extra bundles").
//!
//! When a group fails, the explanation is a minimal unsatisfiable subset of the constraints the
//! search consulted, found by deletion: drop one constraint, solve again, keep it dropped if the
//! rest still fails.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    rc::Rc,
};

use petgraph::{
    Direction,
    graph::{DiGraph, NodeIndex},
};

use crate::{
    explain::{
        Candidate, Conflict, DependencyNeed, Exclusion, Explanation, SubscriptionNeed, SubscriptionProblem,
        Unsupported,
    },
    index::{CatalogIndex, UNRANKED},
    model::{
        BundleVersion, ConstraintKind, Gvk, GvkRequirementSource, InstalledCsv, Requirement, Subscription,
    },
    plan::{
        Change, DeprecatedSubject, DeprecationNotice, Group, Outcome, Plan, Resolution, Step, StepReason,
        SubscriptionResult,
    },
};

/// How many candidates one solve may try before it gives up. Far above anything realistic: the
/// benchmarks' 20-Subscription namespaces need a few hundred.
const STEP_LIMIT: u64 = 200_000;

impl CatalogIndex {
    /// Resolves the Subscriptions of `namespace` together with the CSVs installed there.
    /// Subscriptions of other namespaces are ignored; two with the same name count once.
    ///
    /// Installed CSVs that no Subscription owns (by `installed_csv`, or by package when the
    /// Subscription has none yet) are fixed: they stay, count for the one-bundle-per-package and
    /// one-provider-per-API rules, and can meet needs, but their own needs are not checked.
    pub fn resolve(
        &self,
        namespace: &str,
        installed: &[InstalledCsv],
        subscriptions: &[Subscription],
    ) -> Resolution {
        let view = View::new(self, namespace, installed, subscriptions);
        let mut subs: Vec<&Subscription> = subscriptions
            .iter()
            .filter(|s| s.namespace == namespace)
            .collect();
        subs.sort_by(|a, b| a.name.cmp(&b.name));
        subs.dedup_by(|a, b| a.name == b.name);
        // CSVs that a Subscription names as installed are owned before any is adopted by package.
        let mut owned: HashSet<u32> = subs
            .iter()
            .filter_map(|s| s.installed_csv.as_deref())
            .filter_map(|name| installed.iter().position(|c| c.name == name))
            .map(|i| i as u32)
            .collect();
        let setups: Vec<SubSetup<'_>> = subs.iter().map(|sub| view.setup(sub, &mut owned)).collect();
        let fixed: Vec<BundleId> = (0..installed.len() as u32)
            .filter(|i| !owned.contains(i))
            .map(|i| view.installed_id(i))
            .collect();
        let mut ctx = Context {
            view,
            subs: setups,
            fixed_set: fixed.iter().copied().collect(),
            fixed,
            deps: HashMap::new(),
        };
        let groups = ctx.groups();
        let groups = groups
            .into_iter()
            .map(|members| Group {
                subscriptions: members.iter().map(|&s| ctx.subs[s].sub.name.clone()).collect(),
                outcome: ctx.solve_group(&members),
            })
            .collect();
        Resolution { groups }
    }
}

/// A bundle of the index (below the number of indexed bundles) or an installed CSV (above).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct BundleId(u32);

/// A candidate: a bundle and the channel it comes from (`None` for an installed CSV).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cand<'a> {
    id: BundleId,
    channel: Option<&'a str>,
}

/// Read access to catalog bundles and installed CSVs through one id space.
struct View<'a> {
    index: &'a CatalogIndex,
    namespace: &'a str,
    installed: &'a [InstalledCsv],
    installed_package: Vec<Option<&'a str>>,
    installed_catalog: Vec<Option<u32>>,
    installed_by_name: Vec<u32>,
}

impl<'a> View<'a> {
    fn new(
        index: &'a CatalogIndex,
        namespace: &'a str,
        installed: &'a [InstalledCsv],
        subscriptions: &'a [Subscription],
    ) -> View<'a> {
        let owner = |csv: &InstalledCsv| {
            subscriptions
                .iter()
                .find(|s| s.installed_csv.as_deref() == Some(&csv.name))
        };
        let installed_package = installed
            .iter()
            .map(|csv| {
                csv.package
                    .as_deref()
                    .or_else(|| owner(csv).map(|s| s.package.as_str()))
            })
            .collect();
        let installed_catalog = installed
            .iter()
            .map(|csv| owner(csv).and_then(|s| index.catalog_number(&s.catalog)))
            .collect();
        let mut installed_by_name: Vec<u32> = (0..installed.len() as u32).collect();
        installed_by_name.sort_by(|&a, &b| installed[a as usize].name.cmp(&installed[b as usize].name));
        View {
            index,
            namespace,
            installed,
            installed_package,
            installed_catalog,
            installed_by_name,
        }
    }

    fn installed_id(&self, i: u32) -> BundleId {
        BundleId(self.index.bundles.len() as u32 + i)
    }

    fn installed_index(&self, id: BundleId) -> Option<usize> {
        (id.0 as usize).checked_sub(self.index.bundles.len())
    }

    fn is_installed(&self, id: BundleId) -> bool {
        self.installed_index(id).is_some()
    }

    fn name(&self, id: BundleId) -> &'a str {
        match self.installed_index(id) {
            Some(i) => &self.installed[i].name,
            None => &self.index.bundles[id.0 as usize].input.name,
        }
    }

    fn package(&self, id: BundleId) -> Option<&'a str> {
        match self.installed_index(id) {
            Some(i) => self.installed_package[i],
            None => Some(&self.index.bundles[id.0 as usize].input.package),
        }
    }

    fn version(&self, id: BundleId) -> &'a BundleVersion {
        match self.installed_index(id) {
            Some(i) => &self.installed[i].version,
            None => &self.index.bundles[id.0 as usize].input.version,
        }
    }

    fn provides(&self, id: BundleId) -> &'a [Gvk] {
        match self.installed_index(id) {
            Some(i) => &self.installed[i].provides,
            None => &self.index.bundles[id.0 as usize].input.provides,
        }
    }

    fn requirements(&self, id: BundleId) -> &'a [Requirement] {
        match self.installed_index(id) {
            Some(i) => &self.installed[i].requirements,
            None => &self.index.bundles[id.0 as usize].input.requirements,
        }
    }

    fn catalog(&self, id: BundleId) -> Option<u32> {
        match self.installed_index(id) {
            Some(i) => self.installed_catalog[i],
            None => Some(self.index.bundles[id.0 as usize].catalog),
        }
    }

    fn matches(&self, id: BundleId, requirement: &Requirement) -> bool {
        match requirement {
            Requirement::Gvk { gvk, .. } => self.provides(id).contains(gvk),
            Requirement::Package { package, range } => {
                self.package(id) == Some(package.as_str()) && range.matches(self.version(id).version())
            }
            Requirement::Constraint(constraint) => {
                !contains_cel(&constraint.kind) && self.matches_kind(id, &constraint.kind)
            }
        }
    }

    fn matches_kind(&self, id: BundleId, kind: &ConstraintKind) -> bool {
        match kind {
            ConstraintKind::Gvk(gvk) => self.provides(id).contains(gvk),
            ConstraintKind::Package { package, range } => {
                self.package(id) == Some(package.as_str())
                    && range
                        .as_ref()
                        .is_none_or(|r| r.matches(self.version(id).version()))
            }
            ConstraintKind::All(children) => children.iter().all(|c| self.matches_kind(id, &c.kind)),
            ConstraintKind::Any(children) => children.iter().any(|c| self.matches_kind(id, &c.kind)),
            ConstraintKind::Not(children) => !children.iter().any(|c| self.matches_kind(id, &c.kind)),
            ConstraintKind::Cel { .. } => false,
        }
    }

    /// Catalog numbers in OLM's preference order for a dependency of a bundle from `own`: the
    /// same catalog, then higher priority, then catalogs in the namespace, then by name.
    fn catalog_positions(&self, own: Option<u32>) -> Vec<u32> {
        let catalogs = &self.index.catalogs;
        let mut order: Vec<u32> = (0..catalogs.len() as u32).collect();
        order.sort_by_key(|&c| {
            let catalog = &catalogs[c as usize];
            (
                Some(c) != own,
                std::cmp::Reverse(catalog.priority),
                catalog.id.namespace != self.namespace,
                &catalog.id.name,
                &catalog.id.namespace,
            )
        });
        let mut positions = vec![0; catalogs.len()];
        for (position, &c) in order.iter().enumerate() {
            positions[c as usize] = position as u32;
        }
        positions
    }

    /// Bundles worth testing against a constraint; `None` means every bundle.
    fn pool(&self, kind: &ConstraintKind) -> Option<Vec<u32>> {
        let index = self.index;
        match kind {
            ConstraintKind::Gvk(gvk) => Some(index.by_gvk.get(gvk).cloned().unwrap_or_default()),
            ConstraintKind::Package { package, .. } => {
                Some(index.by_package.get(package).cloned().unwrap_or_default())
            }
            ConstraintKind::All(children) => children.iter().find_map(|c| self.pool(&c.kind)),
            ConstraintKind::Any(children) => {
                let mut union = Vec::new();
                for child in children {
                    union.extend(self.pool(&child.kind)?);
                }
                union.sort_unstable();
                union.dedup();
                Some(union)
            }
            ConstraintKind::Not(_) => None,
            ConstraintKind::Cel { .. } => Some(Vec::new()),
        }
    }

    /// Every bundle that meets `requirement`, in OLM's preference order for `dependent`:
    /// installed CSVs, then catalogs (see [`View::catalog_positions`]), then within a catalog
    /// default channels first, by package, by channel, down each channel.
    ///
    /// `extra` are bundles outside every channel order that a Subscription may still choose
    /// (a skipped entry named by `startingCSV`); they come last, so that a need they meet knows
    /// it: the search must never treat a need as unmet while a choice that meets it is possible.
    fn dependency_candidates(
        &self,
        dependent: BundleId,
        requirement: &Requirement,
        extra: &[Cand<'a>],
    ) -> Vec<Cand<'a>> {
        let mut out: Vec<Cand<'a>> = self
            .installed_by_name
            .iter()
            .map(|&i| self.installed_id(i))
            .filter(|&id| self.matches(id, requirement))
            .map(|id| Cand { id, channel: None })
            .collect();
        let pool = match requirement {
            Requirement::Gvk { gvk, .. } => self.index.by_gvk.get(gvk).cloned().unwrap_or_default(),
            Requirement::Package { package, .. } => {
                self.index.by_package.get(package).cloned().unwrap_or_default()
            }
            Requirement::Constraint(c) => self
                .pool(&c.kind)
                .unwrap_or_else(|| (0..self.index.bundles.len() as u32).collect()),
        };
        let mut found: Vec<u32> = pool
            .into_iter()
            .filter(|&b| {
                self.index.bundles[b as usize].rank != UNRANKED && self.matches(BundleId(b), requirement)
            })
            .collect();
        let positions = self.catalog_positions(self.catalog(dependent));
        let bundles = &self.index.bundles;
        found.sort_by_key(|&b| {
            (
                positions[bundles[b as usize].catalog as usize],
                bundles[b as usize].rank,
            )
        });
        out.extend(found.into_iter().map(|b| Cand {
            id: BundleId(b),
            channel: bundles[b as usize].channel.as_deref(),
        }));
        out.extend(extra.iter().filter(|c| self.matches(c.id, requirement)));
        out
    }

    /// Bundles of `package` that a version range rejected, with the candidates, for explanations.
    fn package_near_misses(&self, dependent: BundleId, package: &str) -> Vec<BundleId> {
        let mut out: Vec<BundleId> = self
            .installed_by_name
            .iter()
            .map(|&i| self.installed_id(i))
            .filter(|&id| self.package(id) == Some(package))
            .collect();
        let bundles = &self.index.bundles;
        let mut found: Vec<u32> = self
            .index
            .by_package
            .get(package)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&b| bundles[b as usize].rank != UNRANKED)
            .collect();
        let positions = self.catalog_positions(self.catalog(dependent));
        found.sort_by_key(|&b| {
            (
                positions[bundles[b as usize].catalog as usize],
                bundles[b as usize].rank,
            )
        });
        out.extend(found.into_iter().map(BundleId));
        out
    }

    fn setup(&self, sub: &'a Subscription, owned: &mut HashSet<u32>) -> SubSetup<'a> {
        let by_name = |name: &str| {
            self.installed
                .iter()
                .position(|c| c.name == name)
                .map(|i| i as u32)
        };
        let current = match &sub.installed_csv {
            Some(name) => by_name(name),
            None => self.installed_by_name.iter().copied().find(|&i| {
                !owned.contains(&i) && self.installed_package[i as usize] == Some(sub.package.as_str())
            }),
        };
        if let Some(i) = current {
            owned.insert(i);
        }
        let current = current.map(|i| self.installed_id(i));
        let mut setup = SubSetup {
            sub,
            channel: sub.channel.as_deref(),
            current,
            candidates: Vec::new(),
            problem: None,
        };
        let Some(catalog_number) = self.index.catalog_number(&sub.catalog) else {
            setup.problem = Some(SubscriptionProblem::CatalogUnavailable);
            return setup;
        };
        let catalog = &self.index.catalogs[catalog_number as usize];
        let Some(package) = catalog.packages.get(&sub.package) else {
            setup.problem = Some(SubscriptionProblem::PackageNotFound);
            return setup;
        };
        let Some(channel_name) = sub.channel.as_deref().or(package.default_channel()) else {
            setup.problem = Some(SubscriptionProblem::NoDefaultChannel);
            return setup;
        };
        setup.channel = Some(channel_name);
        let channel = match package.channel(channel_name) {
            None => {
                setup.problem = Some(SubscriptionProblem::ChannelNotFound);
                return setup;
            }
            Some(Err(error)) => {
                setup.problem = Some(SubscriptionProblem::InvalidChannel(error.clone()));
                return setup;
            }
            Some(Ok(channel)) => channel,
        };
        let entries: Vec<&str> = match (current, &sub.starting_csv) {
            (Some(current), _) => channel
                .successors(self.name(current), self.version(current).version())
                .map(|e| e.bundle.as_str())
                .collect(),
            (None, Some(start)) => match channel.entry(start) {
                Some(entry) => vec![entry.bundle.as_str()],
                None => {
                    setup.problem = Some(SubscriptionProblem::StartingCsvNotFound(start.clone()));
                    return setup;
                }
            },
            (None, None) => channel.preference_order().map(|e| e.bundle.as_str()).collect(),
        };
        for name in entries {
            let Some(&b) = catalog.bundle_ids.get(name) else {
                continue;
            };
            if self.index.bundles[b as usize].input.package == sub.package {
                setup.candidates.push(Cand {
                    id: BundleId(b),
                    channel: Some(channel.name()),
                });
            }
        }
        if let Some(current) = current {
            setup.candidates.push(Cand {
                id: current,
                channel: None,
            });
        }
        setup
    }
}

fn contains_cel(kind: &ConstraintKind) -> bool {
    first_cel(kind).is_some()
}

fn first_cel(kind: &ConstraintKind) -> Option<&str> {
    match kind {
        ConstraintKind::Cel { rule } => Some(rule),
        ConstraintKind::All(children) | ConstraintKind::Any(children) | ConstraintKind::Not(children) => {
            children.iter().find_map(|c| first_cel(&c.kind))
        }
        ConstraintKind::Gvk(_) | ConstraintKind::Package { .. } => None,
    }
}

/// A requirement in words, as explanations and plans print it.
pub fn describe_requirement(requirement: &Requirement) -> String {
    match requirement {
        Requirement::Gvk {
            gvk,
            source: GvkRequirementSource::Property,
        } => format!("API {gvk}"),
        Requirement::Gvk {
            gvk,
            source: GvkRequirementSource::CsvRequiredCrd,
        } => {
            format!("API {gvk} (a required CRD of its CSV)")
        }
        Requirement::Package { package, range } => format!("package {package} in range {range}"),
        Requirement::Constraint(constraint) => format!("olm.constraint {}", describe_kind(&constraint.kind)),
    }
}

fn describe_kind(kind: &ConstraintKind) -> String {
    let list = |children: &[crate::model::Constraint]| {
        children
            .iter()
            .map(|c| describe_kind(&c.kind))
            .collect::<Vec<_>>()
            .join("; ")
    };
    match kind {
        ConstraintKind::Gvk(gvk) => format!("API {gvk}"),
        ConstraintKind::Package {
            package,
            range: Some(range),
        } => format!("package {package} in range {range}"),
        ConstraintKind::Package { package, range: None } => format!("package {package}"),
        ConstraintKind::All(children) => format!("all of [{}]", list(children)),
        ConstraintKind::Any(children) => format!("any of [{}]", list(children)),
        ConstraintKind::Not(children) => format!("none of [{}]", list(children)),
        ConstraintKind::Cel { rule } => format!("cel {rule:?}"),
    }
}

struct SubSetup<'a> {
    sub: &'a Subscription,
    channel: Option<&'a str>,
    current: Option<BundleId>,
    candidates: Vec<Cand<'a>>,
    problem: Option<SubscriptionProblem>,
}

struct Context<'a> {
    view: View<'a>,
    subs: Vec<SubSetup<'a>>,
    fixed: Vec<BundleId>,
    fixed_set: HashSet<BundleId>,
    /// Candidates of each need of each bundle the groups can reach; bundles of one catalog with
    /// equal needs share one list.
    deps: HashMap<(BundleId, u16), Rc<Vec<Cand<'a>>>>,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key<'a> {
    Package(&'a str),
    Api(&'a Gvk),
}

impl<'a> Context<'a> {
    /// Splits the Subscriptions into groups: connected components of "may touch the same package
    /// or API", over every bundle each one could bring in. Also fills the dependency candidates.
    fn groups(&mut self) -> Vec<Vec<usize>> {
        let n = self.subs.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(parent: &mut [usize], mut x: usize) -> usize {
            while parent[x] != x {
                parent[x] = parent[parent[x]];
                x = parent[x];
            }
            x
        }
        let mut first_toucher: HashMap<Key<'a>, usize> = HashMap::new();
        let mut unranked: Vec<Cand<'a>> = self
            .subs
            .iter()
            .flat_map(|s| s.candidates.iter().copied())
            .filter(|c| {
                !self.view.is_installed(c.id) && self.view.index.bundles[c.id.0 as usize].rank == UNRANKED
            })
            .collect();
        unranked.sort_by_key(|c| c.id);
        unranked.dedup_by_key(|c| c.id);
        let mut shared: HashMap<(Option<u32>, &'a Requirement), Rc<Vec<Cand<'a>>>> = HashMap::new();
        for s in 0..n {
            let mut keys = vec![Key::Package(self.subs[s].sub.package.as_str())];
            let mut stack: Vec<BundleId> = self.subs[s].candidates.iter().map(|c| c.id).collect();
            let mut visited: HashSet<BundleId> = HashSet::new();
            let mut expanded: HashSet<*const Vec<Cand<'a>>> = HashSet::new();
            while let Some(id) = stack.pop() {
                if self.fixed_set.contains(&id) || !visited.insert(id) {
                    continue;
                }
                keys.extend(self.view.package(id).map(Key::Package));
                keys.extend(self.view.provides(id).iter().map(Key::Api));
                for (r, requirement) in self.view.requirements(id).iter().enumerate() {
                    let view = &self.view;
                    let list = self
                        .deps
                        .entry((id, r as u16))
                        .or_insert_with(|| {
                            shared
                                .entry((view.catalog(id), requirement))
                                .or_insert_with(|| {
                                    Rc::new(view.dependency_candidates(id, requirement, &unranked))
                                })
                                .clone()
                        })
                        .clone();
                    if expanded.insert(Rc::as_ptr(&list)) {
                        stack.extend(list.iter().map(|c| c.id));
                    }
                }
            }
            for key in keys {
                let other = *first_toucher.entry(key).or_insert(s);
                let (a, b) = (find(&mut parent, s), find(&mut parent, other));
                parent[a.max(b)] = a.min(b);
            }
        }
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut group_of_root: HashMap<usize, usize> = HashMap::new();
        for s in 0..n {
            let root = find(&mut parent, s);
            let g = *group_of_root.entry(root).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(s);
        }
        groups
    }

    fn solve_group(&self, members: &[usize]) -> Outcome {
        let mut search = Search::new(self, members, None);
        match search.run() {
            Ok(()) => Outcome::Plan(self.plan(members, &search)),
            Err(Fail::Limit) => Outcome::Unsatisfiable(Explanation {
                conflicts: vec![Conflict::SearchLimit { steps: search.steps }],
            }),
            Err(Fail::Conflict(nogood)) => {
                let order = search.consulted_order;
                let mut core: Vec<ConstraintId<'a>> = order
                    .iter()
                    .copied()
                    .filter(|c| nogood.constraints.contains(c))
                    .collect();
                // The search's core is unsatisfiable by construction; checking costs one solve
                // and guards the explanation against a mistake there.
                let enabled: HashSet<ConstraintId<'a>> = core.iter().copied().collect();
                if Search::new(self, members, Some(&enabled)).run().is_ok() {
                    core = order;
                }
                let core = self.minimal_core(members, core);
                Outcome::Unsatisfiable(self.explain(&core))
            }
        }
    }

    /// Deletion-based minimal unsatisfiable subset of `core`, an unsatisfiable set of constraints
    /// that the search collected while it failed.
    fn minimal_core(&self, members: &[usize], core: Vec<ConstraintId<'a>>) -> Vec<ConstraintId<'a>> {
        // Subscriptions first: dropping one that takes no part shrinks every later trial, and
        // the set found names as few Subscriptions as it can.
        let rank = |c: &ConstraintId<'a>| match c {
            ConstraintId::Sub(_) => 0,
            ConstraintId::Dep(..) => 1,
            ConstraintId::Api(_) => 2,
            ConstraintId::Package(_) => 3,
        };
        let mut tries: Vec<ConstraintId<'a>> = core.clone();
        let mut core = core;
        tries.sort_by_key(rank);
        for candidate in tries {
            if !core.contains(&candidate) {
                continue;
            }
            let trial: HashSet<ConstraintId<'a>> = core.iter().copied().filter(|c| *c != candidate).collect();
            let mut search = Search::new(self, members, Some(&trial));
            if let Err(Fail::Conflict(nogood)) = search.run() {
                core.retain(|c| *c != candidate && nogood.constraints.contains(c));
            }
        }
        core
    }

    fn explain(&self, core: &[ConstraintId<'a>]) -> Explanation {
        let view = &self.view;
        let in_core: HashSet<ConstraintId<'a>> = core.iter().copied().collect();
        let annotate = |id: BundleId| -> Vec<Exclusion> {
            let mut excluded = Vec::new();
            for (r, requirement) in view.requirements(id).iter().enumerate() {
                if in_core.contains(&ConstraintId::Dep(id, r as u16)) {
                    excluded.push(Exclusion::Requires {
                        requirement: describe_requirement(requirement),
                    });
                }
            }
            if let Some(package) = view.package(id)
                && in_core.contains(&ConstraintId::Package(package))
            {
                excluded.push(Exclusion::PackageConflict {
                    package: package.to_owned(),
                });
            }
            for gvk in view.provides(id) {
                if in_core.contains(&ConstraintId::Api(gvk)) {
                    excluded.push(Exclusion::ApiConflict { gvk: gvk.clone() });
                }
            }
            excluded
        };
        let candidate = |id: BundleId, excluded: Vec<Exclusion>| Candidate {
            bundle: view.name(id).to_owned(),
            version: view.version(id).clone(),
            catalog: view
                .catalog(id)
                .filter(|_| !view.is_installed(id))
                .map(|c| view.index.catalogs[c as usize].id.clone()),
            excluded,
        };
        // Bundles that the core's needs call for, to name them in invariant conflicts.
        let mut called_for: Vec<BundleId> = self.fixed.clone();
        let mut conflicts = Vec::new();
        for c in core {
            let ConstraintId::Sub(s) = *c else { continue };
            let setup = &self.subs[s];
            called_for.extend(setup.candidates.iter().map(|c| c.id));
            conflicts.push(Conflict::Subscription(SubscriptionNeed {
                subscription: setup.sub.name.clone(),
                package: setup.sub.package.clone(),
                channel: setup.channel.map(str::to_owned),
                catalog: setup.sub.catalog.clone(),
                installed: setup.current.map(|c| view.name(c).to_owned()),
                candidates: setup
                    .candidates
                    .iter()
                    .map(|c| candidate(c.id, annotate(c.id)))
                    .collect(),
                problem: setup.problem.clone(),
            }));
        }
        let mut needs: Vec<DependencyNeed> = Vec::new();
        for c in core {
            let ConstraintId::Dep(id, r) = *c else { continue };
            let requirement = &view.requirements(id)[r as usize];
            let matching = &self.deps[&(id, r)];
            called_for.extend(matching.iter().map(|c| c.id));
            let (failure_message, unsupported) = match requirement {
                Requirement::Constraint(constraint) => (
                    constraint.failure_message.clone(),
                    first_cel(&constraint.kind).map(|rule| Unsupported::Cel {
                        rule: rule.to_owned(),
                    }),
                ),
                _ => (None, None),
            };
            let range_package = match requirement {
                Requirement::Package { package, range } => Some((package, Some(range))),
                Requirement::Constraint(c) => match &c.kind {
                    ConstraintKind::Package { package, range } => Some((package, range.as_ref())),
                    _ => None,
                },
                Requirement::Gvk { .. } => None,
            };
            let candidates = match (range_package, &unsupported) {
                (Some((package, Some(range))), None) => view
                    .package_near_misses(id, package)
                    .into_iter()
                    .map(|b| {
                        if matching.iter().any(|m| m.id == b) {
                            candidate(b, annotate(b))
                        } else {
                            candidate(b, vec![Exclusion::OutsideRange { range: range.clone() }])
                        }
                    })
                    .collect(),
                _ => matching.iter().map(|m| candidate(m.id, annotate(m.id))).collect(),
            };
            let need = DependencyNeed {
                dependents: vec![view.name(id).to_owned()],
                requirement: describe_requirement(requirement),
                failure_message,
                candidates,
                unsupported,
            };
            match needs.iter_mut().find(|n| {
                n.requirement == need.requirement
                    && n.candidates == need.candidates
                    && n.failure_message == need.failure_message
            }) {
                Some(existing) => existing.dependents.push(view.name(id).to_owned()),
                None => needs.push(need),
            }
        }
        conflicts.extend(needs.into_iter().map(Conflict::Dependency));
        let named = |keep: &dyn Fn(BundleId) -> bool| {
            let mut names: Vec<String> = Vec::new();
            for &id in &called_for {
                let name = view.name(id).to_owned();
                if keep(id) && !names.contains(&name) {
                    names.push(name);
                }
            }
            names
        };
        for c in core {
            match *c {
                ConstraintId::Package(package) => conflicts.push(Conflict::OneBundlePerPackage {
                    package: package.to_owned(),
                    bundles: named(&|id| view.package(id) == Some(package)),
                }),
                ConstraintId::Api(gvk) => conflicts.push(Conflict::OneProviderPerApi {
                    gvk: gvk.clone(),
                    bundles: named(&|id| view.provides(id).contains(gvk)),
                }),
                ConstraintId::Sub(_) | ConstraintId::Dep(..) => {}
            }
        }
        Explanation { conflicts }
    }

    fn plan(&self, members: &[usize], search: &Search<'_, 'a>) -> Plan {
        let view = &self.view;
        let chosen: Vec<&Choice<'a>> = search
            .chosen
            .iter()
            .filter(|c| !matches!(c.origin, Origin::Fixed))
            .collect();
        let chosen_ids: HashSet<BundleId> = chosen.iter().map(|c| c.id).collect();
        let mut subscriptions = Vec::new();
        let mut replaces: HashMap<BundleId, &str> = HashMap::new();
        let mut deprecations: Vec<DeprecationNotice> = Vec::new();
        for &s in members {
            let setup = &self.subs[s];
            let Some(pick) = setup.candidates.iter().find(|c| chosen_ids.contains(&c.id)) else {
                continue;
            };
            let change = match setup.current {
                Some(current) if current == pick.id => Change::Stay,
                Some(current) => {
                    replaces.insert(pick.id, view.name(current));
                    Change::Upgrade {
                        from: view.name(current).to_owned(),
                    }
                }
                None => Change::Install,
            };
            if change == Change::Stay
                && let (Some(catalog), Some(channel)) =
                    (view.index.catalog_number(&setup.sub.catalog), setup.channel)
            {
                self.deprecations(catalog, &setup.sub.package, channel, None, &mut deprecations);
            }
            subscriptions.push(SubscriptionResult {
                subscription: setup.sub.name.clone(),
                bundle: view.name(pick.id).to_owned(),
                change,
            });
        }
        let new: Vec<&Choice<'a>> = {
            let mut new: Vec<&Choice<'a>> = chosen.into_iter().filter(|c| !view.is_installed(c.id)).collect();
            new.sort_by_key(|c| view.name(c.id));
            new
        };
        let mut graph = DiGraph::<usize, ()>::new();
        let nodes: Vec<_> = (0..new.len()).map(|i| graph.add_node(i)).collect();
        for (i, dependent) in new.iter().enumerate() {
            for requirement in view.requirements(dependent.id) {
                if let Some(j) = new
                    .iter()
                    .position(|c| c.id != dependent.id && view.matches(c.id, requirement))
                {
                    graph.update_edge(nodes[j], nodes[i], ());
                }
            }
        }
        let order = install_order(&graph);
        let steps: Vec<Step> = order
            .into_iter()
            .map(|i| {
                let choice = new[i];
                let bundle = &view.index.bundles[choice.id.0 as usize];
                let reason = match choice.origin {
                    Origin::Sub(s) => StepReason::Subscription {
                        name: self.subs[s].sub.name.clone(),
                    },
                    Origin::Dep(dependent, r) => StepReason::Dependency {
                        dependent: view.name(dependent).to_owned(),
                        requirement: describe_requirement(&view.requirements(dependent)[r as usize]),
                    },
                    // Fixed CSVs are installed, so never steps; this arm only completes the match.
                    Origin::Fixed => StepReason::Subscription { name: String::new() },
                };
                let channel = choice
                    .channel
                    .or(bundle.channel.as_deref())
                    .unwrap_or_default()
                    .to_owned();
                self.deprecations(
                    bundle.catalog,
                    &bundle.input.package,
                    &channel,
                    Some(choice.id),
                    &mut deprecations,
                );
                Step {
                    bundle: bundle.input.name.clone(),
                    package: bundle.input.package.clone(),
                    version: bundle.input.version.clone(),
                    catalog: view.index.catalogs[bundle.catalog as usize].id.clone(),
                    channel,
                    reason,
                    replaces: replaces.get(&choice.id).map(|s| (*s).to_owned()),
                }
            })
            .collect();
        Plan {
            steps,
            subscriptions,
            deprecations,
        }
    }

    fn deprecations(
        &self,
        catalog: u32,
        package: &str,
        channel: &str,
        bundle: Option<BundleId>,
        out: &mut Vec<DeprecationNotice>,
    ) {
        let catalog_data = &self.view.index.catalogs[catalog as usize];
        let mut push = |subject: DeprecatedSubject, message: &str| {
            let notice = DeprecationNotice {
                subject,
                catalog: catalog_data.id.clone(),
                message: message.to_owned(),
            };
            if !out.contains(&notice) {
                out.push(notice);
            }
        };
        if let Some(graph) = catalog_data.packages.get(package) {
            if let Some(d) = graph.deprecation() {
                push(DeprecatedSubject::Package(package.to_owned()), &d.message);
            }
            if let Some(Ok(c)) = graph.channel(channel)
                && let Some(d) = c.deprecation()
            {
                push(
                    DeprecatedSubject::Channel {
                        package: package.to_owned(),
                        channel: channel.to_owned(),
                    },
                    &d.message,
                );
            }
        }
        if let Some(id) = bundle
            && let Some(d) = &self.view.index.bundles[id.0 as usize].input.deprecation
        {
            push(
                DeprecatedSubject::Bundle(self.view.name(id).to_owned()),
                &d.message,
            );
        }
    }
}

/// A constraint of the search, as the explanation's minimisation sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum ConstraintId<'a> {
    /// The Subscription (by index) needs one of its candidates.
    Sub(usize),
    /// If the bundle is chosen, its requirement (by index) must be met.
    Dep(BundleId, u16),
    /// At most one bundle of the package.
    Package(&'a str),
    /// At most one provider of the API.
    Api(&'a Gvk),
}

type Level = u32;

#[derive(Debug, Clone, Copy)]
enum Obligation {
    Sub(usize),
    Dep(BundleId, u16, Level),
}

impl Obligation {
    fn constraint<'a>(self) -> ConstraintId<'a> {
        match self {
            Obligation::Sub(s) => ConstraintId::Sub(s),
            Obligation::Dep(id, r, _) => ConstraintId::Dep(id, r),
        }
    }

    fn level(self) -> Level {
        match self {
            Obligation::Sub(_) => 0,
            Obligation::Dep(_, _, level) => level,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Origin {
    Fixed,
    Sub(usize),
    Dep(BundleId, u16),
}

#[derive(Debug, Clone)]
struct Choice<'a> {
    id: BundleId,
    channel: Option<&'a str>,
    origin: Origin,
}

enum Fail<'a> {
    Conflict(Nogood<'a>),
    Limit,
}

/// Why a subtree of the search failed.
struct Nogood<'a> {
    /// The levels of the choices that together caused the failure (0 = no choice at all).
    levels: BTreeSet<Level>,
    /// The constraints that together caused it: an unsatisfiable core, given those choices.
    constraints: BTreeSet<ConstraintId<'a>>,
}

enum Undo<'a> {
    Package(&'a str),
    Api(&'a Gvk),
}

struct Search<'c, 'a> {
    ctx: &'c Context<'a>,
    enabled: Option<&'c HashSet<ConstraintId<'a>>>,
    chosen: Vec<Choice<'a>>,
    chosen_set: HashSet<BundleId>,
    package_owner: HashMap<&'a str, (BundleId, Level)>,
    api_owner: HashMap<&'a Gvk, (BundleId, Level)>,
    trail: Vec<Undo<'a>>,
    agenda: Vec<Obligation>,
    level: Level,
    steps: u64,
    consulted: HashSet<ConstraintId<'a>>,
    consulted_order: Vec<ConstraintId<'a>>,
}

impl<'c, 'a> Search<'c, 'a> {
    fn new(ctx: &'c Context<'a>, members: &[usize], enabled: Option<&'c HashSet<ConstraintId<'a>>>) -> Self {
        let mut search = Search {
            ctx,
            enabled,
            chosen: Vec::new(),
            chosen_set: HashSet::new(),
            package_owner: HashMap::new(),
            api_owner: HashMap::new(),
            trail: Vec::new(),
            agenda: members.iter().map(|&s| Obligation::Sub(s)).collect(),
            level: 0,
            steps: 0,
            consulted: HashSet::new(),
            consulted_order: Vec::new(),
        };
        for &id in &ctx.fixed {
            search.claim(id, 0);
            search.chosen_set.insert(id);
            search.chosen.push(Choice {
                id,
                channel: None,
                origin: Origin::Fixed,
            });
        }
        search.trail.clear();
        search
    }

    fn is_enabled(&self, constraint: &ConstraintId<'a>) -> bool {
        self.enabled.is_none_or(|set| set.contains(constraint))
    }

    fn consult(&mut self, constraint: ConstraintId<'a>) {
        if self.consulted.insert(constraint) {
            self.consulted_order.push(constraint);
        }
    }

    fn run(&mut self) -> Result<(), Fail<'a>> {
        self.search(0)
    }

    fn satisfied(&self, obligation: Obligation) -> bool {
        match obligation {
            Obligation::Sub(s) => self.ctx.subs[s]
                .candidates
                .iter()
                .any(|c| self.chosen_set.contains(&c.id)),
            Obligation::Dep(id, r, _) => {
                let requirement = &self.ctx.view.requirements(id)[r as usize];
                self.chosen
                    .iter()
                    .any(|c| self.ctx.view.matches(c.id, requirement))
            }
        }
    }

    fn candidates(&self, obligation: Obligation) -> &'c [Cand<'a>] {
        match obligation {
            Obligation::Sub(s) => &self.ctx.subs[s].candidates,
            Obligation::Dep(id, r, _) => self.ctx.deps.get(&(id, r)).map_or(&[], |list| list.as_slice()),
        }
    }

    /// The levels of the choices that keep `id` out, and the rules they break, if any.
    fn blockers(&mut self, id: BundleId) -> Vec<(Level, ConstraintId<'a>)> {
        let view = &self.ctx.view;
        let mut blockers = Vec::new();
        if let Some(package) = view.package(id) {
            let constraint = ConstraintId::Package(package);
            if self.is_enabled(&constraint)
                && let Some(&(owner, level)) = self.package_owner.get(package)
                && owner != id
            {
                blockers.push((level, constraint));
                self.consult(constraint);
            }
        }
        for gvk in view.provides(id) {
            let constraint = ConstraintId::Api(gvk);
            if self.is_enabled(&constraint)
                && let Some(&(owner, level)) = self.api_owner.get(gvk)
                && owner != id
            {
                blockers.push((level, constraint));
                self.consult(constraint);
            }
        }
        blockers
    }

    fn claim(&mut self, id: BundleId, level: Level) {
        let view = &self.ctx.view;
        if let Some(package) = view.package(id)
            && self.is_enabled(&ConstraintId::Package(package))
            && !self.package_owner.contains_key(package)
        {
            self.package_owner.insert(package, (id, level));
            self.trail.push(Undo::Package(package));
        }
        for gvk in view.provides(id) {
            if self.is_enabled(&ConstraintId::Api(gvk)) && !self.api_owner.contains_key(gvk) {
                self.api_owner.insert(gvk, (id, level));
                self.trail.push(Undo::Api(gvk));
            }
        }
    }

    fn search(&mut self, mut position: usize) -> Result<(), Fail<'a>> {
        let obligation = loop {
            let Some(&obligation) = self.agenda.get(position) else {
                return Ok(());
            };
            let constraint = obligation.constraint();
            if self.is_enabled(&constraint) {
                self.consult(constraint);
                if !self.satisfied(obligation) {
                    break obligation;
                }
            }
            position += 1;
        };
        let origin = match obligation {
            Obligation::Sub(s) => Origin::Sub(s),
            Obligation::Dep(id, r, _) => Origin::Dep(id, r),
        };
        let mut conflict = Nogood {
            levels: BTreeSet::from([obligation.level()]),
            constraints: BTreeSet::from([obligation.constraint()]),
        };
        self.level += 1;
        let level = self.level;
        let result = self.try_candidates(obligation, origin, position, level, &mut conflict);
        self.level -= 1;
        match result {
            Some(outcome) => outcome,
            None => Err(Fail::Conflict(conflict)),
        }
    }

    /// Tries each candidate of `obligation`; `None` when all failed (reasons in `conflict`).
    fn try_candidates(
        &mut self,
        obligation: Obligation,
        origin: Origin,
        position: usize,
        level: Level,
        conflict: &mut Nogood<'a>,
    ) -> Option<Result<(), Fail<'a>>> {
        for &cand in self.candidates(obligation) {
            self.steps += 1;
            if self.steps > STEP_LIMIT {
                return Some(Err(Fail::Limit));
            }
            let blockers = self.blockers(cand.id);
            if !blockers.is_empty() {
                for (level, constraint) in blockers {
                    conflict.levels.insert(level);
                    conflict.constraints.insert(constraint);
                }
                continue;
            }
            let marks = (self.chosen.len(), self.trail.len(), self.agenda.len());
            self.chosen.push(Choice {
                id: cand.id,
                channel: cand.channel,
                origin,
            });
            self.chosen_set.insert(cand.id);
            self.claim(cand.id, level);
            let requirements = self.ctx.view.requirements(cand.id).len();
            self.agenda
                .extend((0..requirements as u16).map(|r| Obligation::Dep(cand.id, r, level)));
            match self.search(position + 1) {
                Ok(()) => return Some(Ok(())),
                Err(Fail::Limit) => return Some(Err(Fail::Limit)),
                Err(Fail::Conflict(child)) => {
                    self.undo(marks);
                    if !child.levels.contains(&level) {
                        // This choice played no part: trying its alternatives cannot help.
                        return Some(Err(Fail::Conflict(child)));
                    }
                    conflict
                        .levels
                        .extend(child.levels.into_iter().filter(|&l| l != level));
                    conflict.constraints.extend(child.constraints);
                }
            }
        }
        None
    }

    fn undo(&mut self, (chosen, trail, agenda): (usize, usize, usize)) {
        for choice in self.chosen.drain(chosen..) {
            self.chosen_set.remove(&choice.id);
        }
        for undo in self.trail.drain(trail..) {
            match undo {
                Undo::Package(p) => {
                    self.package_owner.remove(p);
                }
                Undo::Api(g) => {
                    self.api_owner.remove(g);
                }
            }
        }
        self.agenda.truncate(agenda);
    }
}

/// Kahn's topological order over `dependency -> dependent` edges, taking the lowest ready node
/// first (nodes are numbered by bundle name), so independent bundles come in name order. A
/// dependency cycle is broken at its lowest node: those bundles install together anyway.
fn install_order(graph: &DiGraph<usize, ()>) -> Vec<usize> {
    let mut waiting: Vec<usize> = graph
        .node_indices()
        .map(|n| graph.neighbors_directed(n, Direction::Incoming).count())
        .collect();
    let mut done = vec![false; waiting.len()];
    let mut ready: BTreeSet<usize> = (0..waiting.len()).filter(|&n| waiting[n] == 0).collect();
    let mut order = Vec::with_capacity(waiting.len());
    while order.len() < waiting.len() {
        let next = match ready.pop_first() {
            Some(next) => next,
            None => (0..waiting.len()).find(|&n| !done[n]).unwrap_or_default(),
        };
        if done[next] {
            continue;
        }
        done[next] = true;
        order.push(graph[NodeIndex::new(next)]);
        for dependent in graph.neighbors_directed(NodeIndex::new(next), Direction::Outgoing) {
            let d = dependent.index();
            waiting[d] = waiting[d].saturating_sub(1);
            if waiting[d] == 0 && !done[d] {
                ready.insert(d);
            }
        }
    }
    order
}
