//! Which unit runs which CSV: the pure planner over the pool's machine CSVs.
//!
//! A unit is one operator on this machine. It is named after the CSV it was
//! installed from and keeps that name across upgrades (its state and sandbox stay
//! where they are); `units[].csv` in the Machine's status says which CSV it runs.
//!
//! - A CSV that replaces (or skips) the unit's CSV is an upgrade of the unit,
//!   followed along the chain to the newest CSV present that olm-operator has
//!   admitted ([`PoolCsv::admitted`]: it wrote that CSV's effective config).
//!   Until then the unit stays on the CSV it runs and finishes what it does
//!   there, as a Juju unit upgrades its charm only once the controller has set
//!   the application's new charm, not when the new charm merely exists. The
//!   other order deadlocks: olm-operator installs the new CSV only after the old
//!   one succeeded and stepped aside, and the old one cannot succeed once its
//!   units have left it for a CSV whose config is not written yet.
//! - A CSV a rollback brought back (annotation `olm-rs.dev/rolled-back-from`
//!   naming the unit's CSV) is an upgrade of the unit too, toward the older
//!   version, as Juju's `refresh --revision` runs `upgrade-charm`; the CSV it
//!   came back from no longer upgrades it, though its `spec.replaces` says so.
//! - The unit's CSV gone with no successor: the unit is removed.
//! - A CSV that no unit runs or will run and that no other CSV of the pool
//!   upgrades is a new unit. (An old CSV still present while its successor
//!   installs is not a new unit, nor is a successor waiting to be admitted.)

use std::collections::{BTreeMap, BTreeSet};

use olm_api::substrate::MachinePool;

use crate::csv_view::PoolCsv;

/// Whether an application's units go on this machine, as its pool says
/// (`spec.units` and the placement olm-operator writes in `status.applications`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// A unit runs here: the application is not scaled (a unit on every
    /// machine), or its placement names this machine.
    Here,
    /// The application is scaled and its placement leaves this machine out:
    /// a unit here is removed.
    Elsewhere,
    /// The application is scaled and olm-operator has not placed it for the
    /// pool's current spec yet: a unit here stays, none starts.
    Undecided,
}

/// Where `pool` puts the units of `application`, for Machine `machine`.
pub fn placed(pool: Option<&MachinePool>, application: &str, machine: &str) -> Placed {
    let Some(pool) = pool else {
        return Placed::Here;
    };
    if !pool
        .spec
        .units
        .as_ref()
        .is_some_and(|u| u.contains_key(application))
    {
        return Placed::Here;
    }
    let Some(status) = pool
        .status
        .as_ref()
        .filter(|s| s.observed_generation.is_some() && s.observed_generation == pool.metadata.generation)
    else {
        return Placed::Undecided;
    };
    let placement = status
        .applications
        .iter()
        .flatten()
        .find(|a| a.application == application);
    match placement {
        Some(p) if p.machines.iter().any(|m| m == machine) => Placed::Here,
        Some(_) => Placed::Elsewhere,
        None => Placed::Undecided,
    }
}

/// [`plan`] with the pool's placement: a CSV whose application is placed
/// [`Placed::Elsewhere`] is as gone here (its unit is removed, with `stop`
/// and `remove`), and one [`Placed::Undecided`] starts no new unit.
pub fn plan_placed(
    units: &BTreeMap<String, String>,
    csvs: &[PoolCsv],
    placed: impl Fn(&str) -> Placed,
) -> Plan {
    let here: Vec<PoolCsv> = csvs
        .iter()
        .filter(|c| placed(&c.application) != Placed::Elsewhere)
        .cloned()
        .collect();
    let mut out = plan(units, &here);
    out.new_units.retain(|csv| {
        here.iter()
            .find(|c| c.name == *csv)
            .is_none_or(|c| placed(&c.application) == Placed::Here)
    });
    out
}

/// What becomes of a unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// It runs this CSV (its own, or a successor: an upgrade).
    Run(String),
    /// Its CSV is gone with no successor.
    Remove,
}

/// The plan: every existing unit's target, and the CSVs that start new units.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Unit name → target.
    pub units: BTreeMap<String, Target>,
    /// CSVs that start a new unit (named after the CSV).
    pub new_units: Vec<String>,
}

/// Plans the units for `csvs`, given each existing unit's current CSV.
pub fn plan(units: &BTreeMap<String, String>, csvs: &[PoolCsv]) -> Plan {
    let by_name: BTreeMap<&str, &PoolCsv> = csvs.iter().map(|c| (c.name.as_str(), c)).collect();
    let mut out = Plan::default();
    // The CSVs some unit runs or will run once admitted: none of them starts a unit.
    let mut claimed = BTreeSet::new();
    for (unit, current) in units {
        let chain = successors(current, csvs);
        let admitted = chain
            .iter()
            .rev()
            .find(|name| by_name.get(name.as_str()).is_some_and(|c| c.admitted));
        let target = match (admitted, chain.last()) {
            (Some(successor), _) => Target::Run(successor.clone()),
            (None, _) if by_name.contains_key(current.as_str()) => Target::Run(current.clone()),
            // Its CSV is gone but a successor is coming: wait for that one's config.
            (None, Some(newest)) => Target::Run(newest.clone()),
            (None, None) => Target::Remove,
        };
        claimed.extend(chain);
        if let Target::Run(csv) = &target {
            claimed.insert(csv.clone());
        }
        out.units.insert(unit.clone(), target);
    }
    let superseded: BTreeSet<&str> = csvs
        .iter()
        .flat_map(|c| {
            c.upgrades_from
                .iter()
                .chain(&c.rolled_back_from)
                .map(String::as_str)
                .filter(move |from| upgrades(c, from, csvs))
        })
        .filter(|name| by_name.contains_key(name))
        .collect();
    for csv in csvs {
        if !claimed.contains(&csv.name)
            && !superseded.contains(csv.name.as_str())
            && !units.contains_key(&csv.name)
        {
            out.new_units.push(csv.name.clone());
        }
    }
    out
}

/// The CSVs on the upgrade chain after `from`, oldest first: one that replaces
/// or skips it, then one that replaces that ...
fn successors(from: &str, csvs: &[PoolCsv]) -> Vec<String> {
    let mut seen = BTreeSet::from([from.to_owned()]);
    let mut at = from.to_owned();
    let mut chain = Vec::new();
    while let Some(next) = csvs.iter().find(|c| c.name != at && upgrades(c, &at, csvs)) {
        if !seen.insert(next.name.clone()) {
            break;
        }
        at = next.name.clone();
        chain.push(at.clone());
    }
    chain
}

/// Whether `next` upgrades the units of CSV `from`: it was rolled back to
/// from it, or it replaces or skips it and `from` was not rolled back to
/// from it.
fn upgrades(next: &PoolCsv, from: &str, csvs: &[PoolCsv]) -> bool {
    if next.rolled_back_from.as_deref() == Some(from) {
        return true;
    }
    next.upgrades_from.iter().any(|f| f == from)
        && !csvs
            .iter()
            .any(|c| c.name == from && c.rolled_back_from.as_deref() == Some(next.name.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1alpha1::{MachineHooks, StrategyDetailsMachine};

    fn csv(name: &str, replaces: &[&str]) -> PoolCsv {
        PoolCsv {
            name: name.to_owned(),
            application: "demo".to_owned(),
            version: name.trim_start_matches("demo.v").to_owned(),
            upgrades_from: replaces.iter().map(|s| (*s).to_owned()).collect(),
            rolled_back_from: None,
            strategy: StrategyDetailsMachine {
                pool: "edge".into(),
                hooks: MachineHooks {
                    config_map: "demo-hooks".into(),
                },
                config: None,
                hook_timeout_seconds: None,
                update_status_interval_seconds: None,
                privileged: false,
            },
            admitted: true,
        }
    }

    fn waiting(name: &str, replaces: &[&str]) -> PoolCsv {
        PoolCsv {
            admitted: false,
            ..csv(name, replaces)
        }
    }

    fn units(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(u, c)| ((*u).to_owned(), (*c).to_owned()))
            .collect()
    }

    #[test]
    fn a_csv_with_no_unit_starts_one() {
        let plan = plan(&units(&[]), &[csv("demo.v1", &[])]);
        assert_eq!(plan.new_units, ["demo.v1"]);
        assert!(plan.units.is_empty());
    }

    #[test]
    fn a_replacing_csv_upgrades_the_unit_and_the_old_csv_starts_nothing() {
        let csvs = [csv("demo.v1", &[]), csv("demo.v2", &["demo.v1"])];
        let plan = plan(&units(&[("demo.v1", "demo.v1")]), &csvs);
        assert_eq!(plan.units["demo.v1"], Target::Run("demo.v2".into()));
        assert!(plan.new_units.is_empty());
        // The old CSV gone: the unit has moved, nothing is removed.
        let plan = super::plan(&units(&[("demo.v1", "demo.v2")]), &csvs[1..]);
        assert_eq!(plan.units["demo.v1"], Target::Run("demo.v2".into()));
    }

    #[test]
    fn upgrades_follow_the_chain_and_skips() {
        let csvs = [
            csv("demo.v2", &["demo.v1"]),
            csv("demo.v3", &["demo.v0", "demo.v2"]),
        ];
        let plan = plan(&units(&[("demo.v1", "demo.v1")]), &csvs);
        assert_eq!(plan.units["demo.v1"], Target::Run("demo.v3".into()));
        assert!(plan.new_units.is_empty(), "{plan:?}");
    }

    fn rolled_back(name: &str, replaces: &[&str], from: &str) -> PoolCsv {
        PoolCsv {
            rolled_back_from: Some(from.to_owned()),
            ..csv(name, replaces)
        }
    }

    #[test]
    fn a_rollback_upgrades_the_units_back_to_the_older_csv() {
        /// (what, the units, the pool's CSVs, the plan)
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Vec<PoolCsv>, Plan);
        let run = |unit: &str, csv: &str| Plan {
            units: BTreeMap::from([(unit.to_owned(), Target::Run(csv.to_owned()))]),
            new_units: Vec::new(),
        };
        let cases: Vec<Case> = vec![
            (
                "the newer CSV still there: the unit moves back, no new unit",
                &[("demo.v1", "demo.v2")],
                vec![
                    csv("demo.v2", &["demo.v1"]),
                    rolled_back("demo.v1", &[], "demo.v2"),
                ],
                run("demo.v1", "demo.v1"),
            ),
            (
                "the newer CSV gone: the unit stays on the older one",
                &[("demo.v1", "demo.v1")],
                vec![rolled_back("demo.v1", &[], "demo.v2")],
                run("demo.v1", "demo.v1"),
            ),
            (
                "not admitted yet: the unit stays where it is",
                &[("demo.v1", "demo.v2")],
                vec![
                    csv("demo.v2", &["demo.v1"]),
                    PoolCsv {
                        admitted: false,
                        ..rolled_back("demo.v1", &[], "demo.v2")
                    },
                ],
                run("demo.v1", "demo.v2"),
            ),
            (
                "back over two versions",
                &[("demo.v1", "demo.v3")],
                vec![
                    csv("demo.v3", &["demo.v2"]),
                    rolled_back("demo.v2", &["demo.v1"], "demo.v3"),
                ],
                run("demo.v1", "demo.v2"),
            ),
            (
                "a unit not yet upgraded when the rollback came stays",
                &[("demo.v1", "demo.v1")],
                vec![
                    csv("demo.v2", &["demo.v1"]),
                    rolled_back("demo.v1", &[], "demo.v2"),
                ],
                run("demo.v1", "demo.v1"),
            ),
        ];
        for (what, current, csvs, want) in cases {
            assert_eq!(plan(&units(current), &csvs), want, "{what}");
        }
    }

    #[test]
    fn a_csv_gone_with_no_successor_removes_the_unit() {
        let plan = plan(&units(&[("demo.v1", "demo.v1")]), &[csv("other.v1", &[])]);
        assert_eq!(plan.units["demo.v1"], Target::Remove);
        assert_eq!(plan.new_units, ["other.v1"]);
    }

    #[test]
    fn a_cycle_in_replaces_does_not_hang() {
        let csvs = [csv("a", &["b"]), csv("b", &["a"])];
        let plan = plan(&units(&[("a", "a")]), &csvs);
        assert_eq!(plan.units["a"], Target::Run("b".into()));
    }

    #[test]
    fn a_successor_not_yet_admitted_leaves_the_unit_where_it_is() {
        // 1.1.0 appears while the unit still installs 1.0.0: olm-operator will
        // install 1.1.0 only after 1.0.0 succeeded, so the unit stays on 1.0.0
        // and 1.1.0 starts no unit of its own.
        let csvs = [csv("demo.v1", &[]), waiting("demo.v2", &["demo.v1"])];
        let planned = plan(&units(&[("demo.v1", "demo.v1")]), &csvs);
        assert_eq!(planned.units["demo.v1"], Target::Run("demo.v1".into()));
        assert!(planned.new_units.is_empty(), "{planned:?}");
        // Admitted (its config written): the unit upgrades.
        let csvs = [csv("demo.v1", &[]), csv("demo.v2", &["demo.v1"])];
        let planned = plan(&units(&[("demo.v1", "demo.v1")]), &csvs);
        assert_eq!(planned.units["demo.v1"], Target::Run("demo.v2".into()));
        // Along a chain, the newest admitted CSV wins.
        let csvs = [
            csv("demo.v1", &[]),
            csv("demo.v2", &["demo.v1"]),
            waiting("demo.v3", &["demo.v2"]),
        ];
        let planned = plan(&units(&[("demo.v1", "demo.v1")]), &csvs);
        assert_eq!(planned.units["demo.v1"], Target::Run("demo.v2".into()));
        assert!(planned.new_units.is_empty(), "{planned:?}");
    }

    fn pool(
        units: Option<u32>,
        generation: i64,
        observed: Option<i64>,
        machines: Option<&[&str]>,
    ) -> MachinePool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
            "metadata": {"name": "edge", "namespace": "ns", "generation": generation},
            "spec": {"agent": {"image": "agent", "version": "1"},
                     "units": units.map(|n| serde_json::json!({"demo": n}))},
            "status": {"observedGeneration": observed, "applications": machines.map(|m| vec![
                serde_json::json!({"application": "demo", "desiredUnits": units, "units": 0, "machines": m})])},
        }))
        .expect("a MachinePool")
    }

    #[test]
    fn where_the_pool_places_a_unit() {
        let cases: &[(&str, Option<MachinePool>, Placed)] = &[
            ("no pool read", None, Placed::Here),
            ("not scaled", Some(pool(None, 1, Some(1), None)), Placed::Here),
            (
                "placed here",
                Some(pool(Some(1), 2, Some(2), Some(&["m1"]))),
                Placed::Here,
            ),
            (
                "placed elsewhere",
                Some(pool(Some(1), 2, Some(2), Some(&["m2"]))),
                Placed::Elsewhere,
            ),
            (
                "placement of an older spec",
                Some(pool(Some(1), 3, Some(2), Some(&["m2"]))),
                Placed::Undecided,
            ),
            (
                "not placed yet",
                Some(pool(Some(1), 2, Some(2), None)),
                Placed::Undecided,
            ),
        ];
        for (what, pool, want) in cases {
            assert_eq!(placed(pool.as_ref(), "demo", "m1"), *want, "{what}");
            assert_eq!(
                placed(pool.as_ref(), "other", "m1"),
                Placed::Here,
                "{what}: other"
            );
        }
    }

    #[test]
    fn placement_table() {
        let csvs = [csv("demo.v1", &[])];
        /// (what, the units there, where the CSV's application is placed, the plan)
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Placed, Plan);
        let cases: &[Case] = &[
            (
                "placed here: a new unit",
                &[],
                Placed::Here,
                Plan {
                    units: BTreeMap::new(),
                    new_units: vec!["demo.v1".into()],
                },
            ),
            ("undecided: no new unit", &[], Placed::Undecided, Plan::default()),
            (
                "undecided: the unit stays",
                &[("demo.v1", "demo.v1")],
                Placed::Undecided,
                Plan {
                    units: BTreeMap::from([("demo.v1".into(), Target::Run("demo.v1".into()))]),
                    new_units: Vec::new(),
                },
            ),
            (
                "elsewhere: the unit is removed",
                &[("demo.v1", "demo.v1")],
                Placed::Elsewhere,
                Plan {
                    units: BTreeMap::from([("demo.v1".into(), Target::Remove)]),
                    new_units: Vec::new(),
                },
            ),
            ("elsewhere: no new unit", &[], Placed::Elsewhere, Plan::default()),
        ];
        for (what, current, placed, want) in cases {
            assert_eq!(plan_placed(&units(current), &csvs, |_| *placed), *want, "{what}");
        }
    }

    #[test]
    fn a_unit_whose_csv_went_waits_for_its_successor_rather_than_being_removed() {
        let planned = plan(
            &units(&[("demo.v1", "demo.v1")]),
            &[waiting("demo.v2", &["demo.v1"])],
        );
        assert_eq!(planned.units["demo.v1"], Target::Run("demo.v2".into()));
        assert!(planned.new_units.is_empty(), "{planned:?}");
    }
}
