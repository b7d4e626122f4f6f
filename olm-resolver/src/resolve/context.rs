//! One namespace's resolution: its Subscriptions split into independent groups, each solved
//! and, when it fails, explained.

use super::*;

pub(super) struct SubSetup<'a> {
    pub(super) sub: &'a Subscription,
    pub(super) channel: Option<&'a str>,
    pub(super) current: Option<BundleId>,
    pub(super) candidates: Vec<Cand<'a>>,
    pub(super) problem: Option<SubscriptionProblem>,
}

pub(super) struct Context<'a> {
    pub(super) view: View<'a>,
    pub(super) subs: Vec<SubSetup<'a>>,
    pub(super) fixed: Vec<BundleId>,
    pub(super) fixed_set: HashSet<BundleId>,
    /// Candidates of each need of each bundle the groups can reach; bundles of one catalog with
    /// equal needs share one list.
    pub(super) deps: NeedCandidates<'a>,
    /// Needs of installed CSVs that no Subscription chooses again, kept met by the groups that
    /// own what meets them.
    pub(super) protected: Vec<Protected>,
}

/// What solving a group found.
pub(super) enum Solved<'a> {
    /// A plan.
    Plan(Plan),
    /// The search gave up after this many steps.
    Limit(u64),
    /// A minimal set of constraints that cannot all hold.
    Core(Vec<ConstraintId<'a>>),
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Key<'a> {
    Package(&'a str),
    Api(&'a Gvk),
}

impl<'a> Context<'a> {
    /// Splits the Subscriptions into groups: connected components of "may touch the same package
    /// or API", over every bundle each one could bring in. Also fills the dependency candidates.
    pub(super) fn groups(&mut self) -> Vec<Vec<usize>> {
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
        // The owners of what meets a protected need keep it met together.
        for protected in &self.protected {
            for pair in protected.owners.windows(2) {
                let (a, b) = (find(&mut parent, pair[0]), find(&mut parent, pair[1]));
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

    pub(super) fn solve_group(&self, members: &[usize]) -> Outcome {
        match self.solve(members) {
            Solved::Plan(plan) => Outcome::Plan(plan),
            Solved::Limit(steps) => Outcome::Unsatisfiable(Explanation {
                conflicts: vec![Conflict::SearchLimit { steps }],
            }),
            Solved::Core(core) => Outcome::Unsatisfiable(self.explain(&core)),
        }
    }

    /// Solves a group: its plan, or a minimal set of constraints that cannot all hold.
    pub(super) fn solve(&self, members: &[usize]) -> Solved<'a> {
        let mut search = Search::new(self, members, None);
        match search.run() {
            Ok(()) => Solved::Plan(self.plan(members, &search)),
            Err(Fail::Limit) => Solved::Limit(search.steps),
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
                Solved::Core(self.minimal_core(members, core))
            }
        }
    }

    /// Deletion-based minimal unsatisfiable subset of `core`, an unsatisfiable set of constraints
    /// that the search collected while it failed.
    pub(super) fn minimal_core(
        &self,
        members: &[usize],
        core: Vec<ConstraintId<'a>>,
    ) -> Vec<ConstraintId<'a>> {
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

    /// Explains why the constraints of `core` cannot all hold: each Subscription's
    /// need and each dependency's need (with why every candidate is excluded), then
    /// the invariants (one bundle per package, one provider per API) in conflict.
    pub(super) fn explain(&self, core: &[ConstraintId<'a>]) -> Explanation {
        let in_core: HashSet<ConstraintId<'a>> = core.iter().copied().collect();
        // Bundles that the core's needs call for, to name them in invariant conflicts.
        let mut called_for: Vec<BundleId> = self.fixed.clone();
        let mut conflicts = Vec::new();
        for c in core {
            let ConstraintId::Sub(s) = *c else { continue };
            let setup = &self.subs[s];
            called_for.extend(setup.candidates.iter().map(|c| c.id));
            conflicts.push(Conflict::Subscription(self.subscription_need(setup, &in_core)));
        }
        let mut needs: Vec<DependencyNeed> = Vec::new();
        for c in core {
            let ConstraintId::Dep(id, r) = *c else { continue };
            called_for.extend(self.deps[&(id, r)].iter().map(|c| c.id));
            let need = self.dependency_need(id, r, &in_core);
            match needs.iter_mut().find(|n| {
                n.requirement == need.requirement
                    && n.candidates == need.candidates
                    && n.failure_message == need.failure_message
            }) {
                Some(existing) => existing.dependents.push(self.view.name(id).to_owned()),
                None => needs.push(need),
            }
        }
        conflicts.extend(needs.into_iter().map(Conflict::Dependency));
        conflicts.extend(self.invariant_conflicts(core, &called_for));
        Explanation { conflicts }
    }

    /// Why bundle `id` is excluded by the constraints `in_core`: its requirements,
    /// its package and the APIs it provides that take part.
    fn exclusions(&self, id: BundleId, in_core: &HashSet<ConstraintId<'a>>) -> Vec<Exclusion> {
        let view = &self.view;
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
    }

    /// Bundle `id` as a candidate, `excluded` for these reasons.
    fn candidate(&self, id: BundleId, excluded: Vec<Exclusion>) -> Candidate {
        let view = &self.view;
        Candidate {
            bundle: view.name(id).to_owned(),
            version: view.version(id).clone(),
            catalog: view
                .catalog(id)
                .filter(|_| !view.is_installed(id))
                .map(|c| view.index.catalogs[c as usize].id.clone()),
            excluded,
        }
    }

    /// What a Subscription in the core needs, and why each of its candidates is excluded.
    fn subscription_need(
        &self,
        setup: &SubSetup<'a>,
        in_core: &HashSet<ConstraintId<'a>>,
    ) -> SubscriptionNeed {
        SubscriptionNeed {
            subscription: setup.sub.name.clone(),
            package: setup.sub.package.clone(),
            channel: setup.channel.map(str::to_owned),
            catalog: setup.sub.catalog.clone(),
            installed: setup.current.map(|c| self.view.name(c).to_owned()),
            candidates: setup
                .candidates
                .iter()
                .map(|c| self.candidate(c.id, self.exclusions(c.id, in_core)))
                .collect(),
            problem: setup.problem.clone(),
        }
    }

    /// What requirement `r` of bundle `id` needs, and why each candidate is excluded:
    /// for a version range, the package's bundles near it, those outside it said so.
    fn dependency_need(&self, id: BundleId, r: u16, in_core: &HashSet<ConstraintId<'a>>) -> DependencyNeed {
        let view = &self.view;
        let requirement = &view.requirements(id)[r as usize];
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
                    if view.matches(b, requirement) {
                        self.candidate(b, self.exclusions(b, in_core))
                    } else {
                        self.candidate(b, vec![Exclusion::OutsideRange { range: range.clone() }])
                    }
                })
                .collect(),
            _ => self.deps[&(id, r)]
                .iter()
                .map(|m| self.candidate(m.id, self.exclusions(m.id, in_core)))
                .collect(),
        };
        DependencyNeed {
            dependents: vec![view.name(id).to_owned()],
            requirement: describe_requirement(requirement),
            failure_message,
            candidates,
            unsupported,
        }
    }

    /// The invariants of the core in conflict, each naming the bundles (among
    /// `called_for`, in order, once each) it holds apart.
    fn invariant_conflicts(&self, core: &[ConstraintId<'a>], called_for: &[BundleId]) -> Vec<Conflict> {
        let view = &self.view;
        let named = |keep: &dyn Fn(BundleId) -> bool| {
            let mut names: Vec<String> = Vec::new();
            for &id in called_for {
                let name = view.name(id).to_owned();
                if keep(id) && !names.contains(&name) {
                    names.push(name);
                }
            }
            names
        };
        core.iter()
            .filter_map(|c| match *c {
                ConstraintId::Package(package) => Some(Conflict::OneBundlePerPackage {
                    package: package.to_owned(),
                    bundles: named(&|id| view.package(id) == Some(package)),
                }),
                ConstraintId::Api(gvk) => Some(Conflict::OneProviderPerApi {
                    gvk: gvk.clone(),
                    bundles: named(&|id| view.provides(id).contains(gvk)),
                }),
                ConstraintId::Sub(_) | ConstraintId::Dep(..) => None,
            })
            .collect()
    }

    /// The plan of a solved group: what each Subscription gets, and the steps that
    /// install the chosen bundles not installed yet, dependencies first.
    pub(super) fn plan(&self, members: &[usize], search: &Search<'_, 'a>) -> Plan {
        let view = &self.view;
        let chosen: Vec<&Choice<'a>> = search
            .chosen
            .iter()
            .filter(|c| !matches!(c.origin, Origin::Fixed))
            .collect();
        let chosen_ids: HashSet<BundleId> = chosen.iter().map(|c| c.id).collect();
        let mut deprecations: Vec<DeprecationNotice> = Vec::new();
        let (subscriptions, replaces) = self.subscription_results(members, &chosen_ids, &mut deprecations);
        let mut new: Vec<&Choice<'a>> = chosen.into_iter().filter(|c| !view.is_installed(c.id)).collect();
        new.sort_by_key(|c| view.name(c.id));
        let steps: Vec<Step> = self
            .install_order(&new)
            .into_iter()
            .map(|i| self.step(new[i], &replaces, &mut deprecations))
            .collect();
        Plan {
            steps,
            subscriptions,
            deprecations,
        }
    }

    /// What each Subscription of `members` gets among `chosen`: stay, upgrade or
    /// install; with the bundles each upgrade replaces. A Subscription that stays
    /// reports the deprecations of its package and channel.
    fn subscription_results(
        &self,
        members: &[usize],
        chosen: &HashSet<BundleId>,
        deprecations: &mut Vec<DeprecationNotice>,
    ) -> (Vec<SubscriptionResult>, HashMap<BundleId, &'a str>) {
        let view = &self.view;
        let mut subscriptions = Vec::new();
        let mut replaces: HashMap<BundleId, &'a str> = HashMap::new();
        for &s in members {
            let setup = &self.subs[s];
            let Some(pick) = setup.candidates.iter().find(|c| chosen.contains(&c.id)) else {
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
                self.deprecations(catalog, &setup.sub.package, channel, None, deprecations);
            }
            subscriptions.push(SubscriptionResult {
                subscription: setup.sub.name.clone(),
                bundle: view.name(pick.id).to_owned(),
                change,
                held_back: None,
            });
        }
        (subscriptions, replaces)
    }

    /// The order (indexes into `new`) in which to install `new`: a bundle after
    /// those that meet its requirements.
    fn install_order(&self, new: &[&Choice<'a>]) -> Vec<usize> {
        let view = &self.view;
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
        install_order(&graph)
    }

    /// The step that installs `choice`, and why; adds its deprecations.
    fn step(
        &self,
        choice: &Choice<'a>,
        replaces: &HashMap<BundleId, &'a str>,
        deprecations: &mut Vec<DeprecationNotice>,
    ) -> Step {
        let view = &self.view;
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
            deprecations,
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
    }

    pub(super) fn deprecations(
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
