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
        Candidate, Conflict, DependencyNeed, Exclusion, Explanation, HeldBack, SubscriptionNeed,
        SubscriptionProblem, Unsupported,
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

mod context;
mod describe;
mod held;
mod protect;
mod search;
mod view;

pub use self::describe::describe_requirement;
use self::{context::*, protect::*, search::*, view::*};

impl CatalogIndex {
    /// Resolves the Subscriptions of `namespace` together with the CSVs installed there.
    /// Subscriptions of other namespaces are ignored; two with the same name count once.
    ///
    /// Installed CSVs that no Subscription owns (by `installed_csv`, or by package when the
    /// Subscription has none yet) are fixed: they stay, count for the one-bundle-per-package and
    /// one-provider-per-API rules, and can meet needs. An installed CSV's needs constrain every
    /// group: one a Subscription keeps needs them met like any chosen bundle; one that stays
    /// anyway (fixed, or its Subscription has no candidate now) keeps what meets its needs today,
    /// so a group cannot upgrade or replace those CSVs into something that no longer meets them.
    ///
    /// A Subscription that gets a bundle it prefers less than another of its candidates (an
    /// upgrade held back) says why in [`SubscriptionResult::held_back`].
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
        let (protected, deps) = protected_needs(&view, &setups);
        let mut ctx = Context {
            view,
            subs: setups,
            fixed_set: fixed.iter().copied().collect(),
            fixed,
            deps,
            protected,
        };
        let mut groups = Vec::new();
        for members in ctx.groups() {
            let mut outcome = ctx.solve_group(&members);
            if let Outcome::Plan(plan) = &mut outcome {
                ctx.explain_held_back(&members, plan);
            }
            groups.push(Group {
                subscriptions: members.iter().map(|&s| ctx.subs[s].sub.name.clone()).collect(),
                outcome,
            });
        }
        Resolution { groups }
    }
}
