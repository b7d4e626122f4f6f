//! Candidates: the bundles of the index and the installed CSVs in one id space, and each
//! need of a Subscription or bundle turned into its candidates in OLM's preference order.

use super::*;

/// A bundle of the index (below the number of indexed bundles) or an installed CSV (above).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct BundleId(pub(super) u32);

/// A candidate: a bundle and the channel it comes from (`None` for an installed CSV).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cand<'a> {
    pub(super) id: BundleId,
    pub(super) channel: Option<&'a str>,
}

/// Read access to catalog bundles and installed CSVs through one id space.
pub(super) struct View<'a> {
    pub(super) index: &'a CatalogIndex,
    pub(super) namespace: &'a str,
    pub(super) installed: &'a [InstalledCsv],
    pub(super) installed_package: Vec<Option<&'a str>>,
    pub(super) installed_catalog: Vec<Option<u32>>,
    pub(super) installed_by_name: Vec<u32>,
}

impl<'a> View<'a> {
    pub(super) fn new(
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

    pub(super) fn installed_id(&self, i: u32) -> BundleId {
        BundleId(self.index.bundles.len() as u32 + i)
    }

    pub(super) fn installed_index(&self, id: BundleId) -> Option<usize> {
        (id.0 as usize).checked_sub(self.index.bundles.len())
    }

    pub(super) fn is_installed(&self, id: BundleId) -> bool {
        self.installed_index(id).is_some()
    }

    pub(super) fn name(&self, id: BundleId) -> &'a str {
        match self.installed_index(id) {
            Some(i) => &self.installed[i].name,
            None => &self.index.bundles[id.0 as usize].input.name,
        }
    }

    pub(super) fn package(&self, id: BundleId) -> Option<&'a str> {
        match self.installed_index(id) {
            Some(i) => self.installed_package[i],
            None => Some(&self.index.bundles[id.0 as usize].input.package),
        }
    }

    pub(super) fn version(&self, id: BundleId) -> &'a BundleVersion {
        match self.installed_index(id) {
            Some(i) => &self.installed[i].version,
            None => &self.index.bundles[id.0 as usize].input.version,
        }
    }

    pub(super) fn provides(&self, id: BundleId) -> &'a [Gvk] {
        match self.installed_index(id) {
            Some(i) => &self.installed[i].provides,
            None => &self.index.bundles[id.0 as usize].input.provides,
        }
    }

    pub(super) fn requirements(&self, id: BundleId) -> &'a [Requirement] {
        match self.installed_index(id) {
            Some(i) => &self.installed[i].requirements,
            None => &self.index.bundles[id.0 as usize].input.requirements,
        }
    }

    pub(super) fn catalog(&self, id: BundleId) -> Option<u32> {
        match self.installed_index(id) {
            Some(i) => self.installed_catalog[i],
            None => Some(self.index.bundles[id.0 as usize].catalog),
        }
    }

    pub(super) fn matches(&self, id: BundleId, requirement: &Requirement) -> bool {
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

    pub(super) fn matches_kind(&self, id: BundleId, kind: &ConstraintKind) -> bool {
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
    pub(super) fn catalog_positions(&self, own: Option<u32>) -> Vec<u32> {
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
    pub(super) fn pool(&self, kind: &ConstraintKind) -> Option<Vec<u32>> {
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
    pub(super) fn dependency_candidates(
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
    pub(super) fn package_near_misses(&self, dependent: BundleId, package: &str) -> Vec<BundleId> {
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

    pub(super) fn setup(&self, sub: &'a Subscription, owned: &mut HashSet<u32>) -> SubSetup<'a> {
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

pub(super) fn contains_cel(kind: &ConstraintKind) -> bool {
    first_cel(kind).is_some()
}

pub(super) fn first_cel(kind: &ConstraintKind) -> Option<&str> {
    match kind {
        ConstraintKind::Cel { rule } => Some(rule),
        ConstraintKind::All(children) | ConstraintKind::Any(children) | ConstraintKind::Not(children) => {
            children.iter().find_map(|c| first_cel(&c.kind))
        }
        ConstraintKind::Gvk(_) | ConstraintKind::Package { .. } => None,
    }
}
