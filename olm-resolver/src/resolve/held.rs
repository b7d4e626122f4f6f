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
            let outcome = self.solve_group(members);
            self.subs[s].candidates = all;
            let Outcome::Unsatisfiable(explanation) = outcome else {
                // The group could take a preferred bundle, but not while every other Subscription
                // keeps its own first choice: nothing holds it back but preference.
                continue;
            };
            if explanation
                .conflicts
                .iter()
                .any(|c| matches!(c, Conflict::SearchLimit { .. }))
            {
                continue;
            }
            let mut holders: Vec<String> = Vec::new();
            for conflict in &explanation.conflicts {
                let Conflict::Dependency(need) = conflict else {
                    continue;
                };
                for dependent in &need.dependents {
                    let installed = self.view.installed.iter().any(|c| &c.name == dependent);
                    if installed && !holders.contains(dependent) {
                        holders.push(dependent.clone());
                    }
                }
            }
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
}
