//! Needs of installed operators that no Subscription chooses again: a CSV installed without a
//! Subscription, or one whose Subscription has no candidate right now. What such a CSV needs and
//! has today, it keeps: the groups that could take it away (by upgrading the installed CSVs that
//! meet the need) must keep the need met.

use super::*;

/// A need of an installed CSV that the installed CSVs meet today and that some groups could break.
pub(super) struct Protected {
    /// The installed CSV that has the need.
    pub(super) dependent: BundleId,
    /// Which of its requirements.
    pub(super) requirement: u16,
    /// The Subscriptions that own an installed CSV meeting the need: their groups must keep it met.
    pub(super) owners: Vec<usize>,
}

/// Candidates of each need, by dependent bundle and requirement index.
pub(super) type NeedCandidates<'a> = HashMap<(BundleId, u16), Rc<Vec<Cand<'a>>>>;

/// The protected needs of the namespace, with each need's candidates: the installed CSVs that meet
/// it today (so keeping one of them, or choosing another bundle that meets it, is the only way).
pub(super) fn protected_needs<'a>(
    view: &View<'a>,
    subs: &[SubSetup<'a>],
) -> (Vec<Protected>, NeedCandidates<'a>) {
    let chosen_again: HashSet<BundleId> = subs
        .iter()
        .flat_map(|s| s.candidates.iter().map(|c| c.id))
        .filter(|&id| view.is_installed(id))
        .collect();
    let owner: HashMap<BundleId, usize> = subs
        .iter()
        .enumerate()
        .filter_map(|(s, setup)| Some((setup.current?, s)))
        .filter(|(current, _)| chosen_again.contains(current))
        .collect();
    let installed: Vec<BundleId> = view
        .installed_by_name
        .iter()
        .map(|&i| view.installed_id(i))
        .collect();
    let mut protected = Vec::new();
    let mut deps = HashMap::new();
    for &dependent in &installed {
        if chosen_again.contains(&dependent) {
            continue;
        }
        for (r, requirement) in view.requirements(dependent).iter().enumerate() {
            let meeting: Vec<BundleId> = installed
                .iter()
                .copied()
                .filter(|&id| view.matches(id, requirement))
                .collect();
            let mut owners: Vec<usize> = meeting.iter().filter_map(|id| owner.get(id).copied()).collect();
            owners.sort_unstable();
            owners.dedup();
            if owners.is_empty() {
                // Unmet today, or met only by CSVs that stay anyway: no group can break it.
                continue;
            }
            let r = r as u16;
            deps.insert(
                (dependent, r),
                Rc::new(meeting.into_iter().map(|id| Cand { id, channel: None }).collect()),
            );
            protected.push(Protected {
                dependent,
                requirement: r,
                owners,
            });
        }
    }
    (protected, deps)
}
