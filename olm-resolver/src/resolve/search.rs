//! The search itself: a depth-first walk with conflict-directed backjumping, and the
//! install order of what it chose.

use super::*;

/// A constraint of the search, as the explanation's minimisation sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum ConstraintId<'a> {
    /// The Subscription (by index) needs one of its candidates.
    Sub(usize),
    /// If the bundle is chosen, its requirement (by index) must be met.
    Dep(BundleId, u16),
    /// At most one bundle of the package.
    Package(&'a str),
    /// At most one provider of the API.
    Api(&'a Gvk),
}

pub(super) type Level = u32;

#[derive(Debug, Clone, Copy)]
pub(super) enum Obligation {
    Sub(usize),
    Dep(BundleId, u16, Level),
}

impl Obligation {
    pub(super) fn constraint<'a>(self) -> ConstraintId<'a> {
        match self {
            Obligation::Sub(s) => ConstraintId::Sub(s),
            Obligation::Dep(id, r, _) => ConstraintId::Dep(id, r),
        }
    }

    pub(super) fn level(self) -> Level {
        match self {
            Obligation::Sub(_) => 0,
            Obligation::Dep(_, _, level) => level,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Origin {
    Fixed,
    Sub(usize),
    Dep(BundleId, u16),
}

#[derive(Debug, Clone)]
pub(super) struct Choice<'a> {
    pub(super) id: BundleId,
    pub(super) channel: Option<&'a str>,
    pub(super) origin: Origin,
}

pub(super) enum Fail<'a> {
    Conflict(Nogood<'a>),
    Limit,
}

/// Why a subtree of the search failed.
pub(super) struct Nogood<'a> {
    /// The levels of the choices that together caused the failure (0 = no choice at all).
    pub(super) levels: BTreeSet<Level>,
    /// The constraints that together caused it: an unsatisfiable core, given those choices.
    pub(super) constraints: BTreeSet<ConstraintId<'a>>,
}

pub(super) enum Undo<'a> {
    Package(&'a str),
    Api(&'a Gvk),
}

pub(super) struct Search<'c, 'a> {
    pub(super) ctx: &'c Context<'a>,
    pub(super) enabled: Option<&'c HashSet<ConstraintId<'a>>>,
    pub(super) chosen: Vec<Choice<'a>>,
    pub(super) chosen_set: HashSet<BundleId>,
    pub(super) package_owner: HashMap<&'a str, (BundleId, Level)>,
    pub(super) api_owner: HashMap<&'a Gvk, (BundleId, Level)>,
    pub(super) trail: Vec<Undo<'a>>,
    pub(super) agenda: Vec<Obligation>,
    pub(super) level: Level,
    pub(super) steps: u64,
    pub(super) consulted: HashSet<ConstraintId<'a>>,
    pub(super) consulted_order: Vec<ConstraintId<'a>>,
}

impl<'c, 'a> Search<'c, 'a> {
    pub(super) fn new(
        ctx: &'c Context<'a>,
        members: &[usize],
        enabled: Option<&'c HashSet<ConstraintId<'a>>>,
    ) -> Self {
        let mut search = Search {
            ctx,
            enabled,
            chosen: Vec::new(),
            chosen_set: HashSet::new(),
            package_owner: HashMap::new(),
            api_owner: HashMap::new(),
            trail: Vec::new(),
            agenda: members
                .iter()
                .map(|&s| Obligation::Sub(s))
                .chain(
                    ctx.protected
                        .iter()
                        .filter(|p| p.owners.iter().any(|o| members.contains(o)))
                        .map(|p| Obligation::Dep(p.dependent, p.requirement, 0)),
                )
                .collect(),
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

    pub(super) fn is_enabled(&self, constraint: &ConstraintId<'a>) -> bool {
        self.enabled.is_none_or(|set| set.contains(constraint))
    }

    pub(super) fn consult(&mut self, constraint: ConstraintId<'a>) {
        if self.consulted.insert(constraint) {
            self.consulted_order.push(constraint);
        }
    }

    pub(super) fn run(&mut self) -> Result<(), Fail<'a>> {
        self.search(0)
    }

    pub(super) fn satisfied(&self, obligation: Obligation) -> bool {
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

    pub(super) fn candidates(&self, obligation: Obligation) -> &'c [Cand<'a>] {
        match obligation {
            Obligation::Sub(s) => &self.ctx.subs[s].candidates,
            Obligation::Dep(id, r, _) => self.ctx.deps.get(&(id, r)).map_or(&[], |list| list.as_slice()),
        }
    }

    /// The levels of the choices that keep `id` out, and the rules they break, if any.
    pub(super) fn blockers(&mut self, id: BundleId) -> Vec<(Level, ConstraintId<'a>)> {
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

    pub(super) fn claim(&mut self, id: BundleId, level: Level) {
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

    pub(super) fn search(&mut self, mut position: usize) -> Result<(), Fail<'a>> {
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
    pub(super) fn try_candidates(
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

    pub(super) fn undo(&mut self, (chosen, trail, agenda): (usize, usize, usize)) {
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
pub(super) fn install_order(graph: &DiGraph<usize, ()>) -> Vec<usize> {
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
