//! Why a Subscription of a resolved group did not get the bundle it prefers most: solve the group
//! again with that Subscription limited to the bundles it prefers over the one it got, and explain
//! why that fails. Most often an installed operator needs the package as it is.

use super::*;

impl<'a> Context<'a> {
    /// Fills `held_back` of every Subscription of `plan` that got a bundle it prefers less than
    /// another of its candidates, when the group cannot take any of the preferred ones.
    pub(super) fn explain_held_back(&mut self, members: &[usize], plan: &mut Plan) {
        for result in &mut plan.subscriptions {
            let Some(&s) = members
                .iter()
                .find(|&&s| self.subs[s].sub.name == result.subscription)
            else {
                continue;
            };
            let Some(position) = self.subs[s]
                .candidates
                .iter()
                .position(|c| self.view.name(c.id) == result.bundle)
            else {
                continue;
            };
            if position == 0 {
                continue;
            }
            let all = std::mem::take(&mut self.subs[s].candidates);
            self.subs[s].candidates = all[..position].to_vec();
            let held = match self.solve(members) {
                Solved::Core(core) => Some((self.explain(&core), self.holders(&core))),
                // The group could take a preferred bundle, but not while every other
                // Subscription keeps its own first choice: nothing holds it back but preference.
                // Or the search gave up: nothing to say for sure.
                Solved::Plan(_) | Solved::Limit(_) => None,
            };
            self.subs[s].candidates = all;
            let Some((explanation, holders)) = held else {
                continue;
            };
            let preferred = self.subs[s].candidates[..position]
                .iter()
                .map(|c| self.view.name(c.id).to_owned())
                .collect();
            result.held_back = Some(HeldBack {
                preferred,
                holders,
                explanation,
            });
        }
    }

    /// The installed CSVs whose needs are part of `core`, by name.
    fn holders(&self, core: &[ConstraintId<'a>]) -> Vec<String> {
        let mut holders: Vec<String> = Vec::new();
        for constraint in core {
            if let ConstraintId::Dep(id, _) = *constraint
                && self.view.is_installed(id)
            {
                let name = self.view.name(id).to_owned();
                if !holders.contains(&name) {
                    holders.push(name);
                }
            }
        }
        holders
    }
}
