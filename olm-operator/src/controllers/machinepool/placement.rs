//! Where the units of a scaled application go (pure): `spec.units` of the
//! pool asks for N units of an application, and [`place`] picks the machines.
//!
//! - Only ready machines (reporting Ready, not lost) get a unit.
//! - Stable: a ready machine that runs a unit of the application keeps it;
//!   scaling up adds machines, scaling down takes units away, never moves one.
//! - Spread: a machine is added in the zone (`topology.kubernetes.io/zone` of
//!   its node, or of the Machine itself for a machine joined from outside)
//!   with the fewest units, and a unit is taken away from the zone with the
//!   most; ties go by name (added: first; taken away: last), so the same
//!   inputs always give the same machines.
//!
//! [`applications`] gives each scaled application's placement for the pool's
//! status, and the `Scaled` condition: False (`NotEnoughMachines`) while an
//! application asks for more units than the pool has ready machines.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use olm_api::substrate::{ApplicationPlacement, Machine, MachinePoolReason};
use olm_runtime::conditions::Status;

/// The label that says which zone a node (or a Machine) is in.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// One machine of the pool, as a placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The Machine's name.
    pub name: String,
    /// It reports Ready and is not lost.
    pub ready: bool,
    /// Its zone, when its node (or the Machine) carries one.
    pub zone: Option<String>,
    /// It runs a unit of the application now.
    pub runs: bool,
}

/// The machines (by name, sorted) that run the `desired` units, chosen among
/// `candidates` as the module docs say.
pub fn place(desired: usize, candidates: &[Candidate]) -> Vec<String> {
    let ready: Vec<&Candidate> = candidates.iter().filter(|c| c.ready).collect();
    let mut kept: Vec<&Candidate> = ready.iter().copied().filter(|c| c.runs).collect();
    while kept.len() > desired {
        let counts = per_zone(&kept);
        let Some(at) = (0..kept.len()).max_by_key(|&i| (counts[&zone(kept[i])], &kept[i].name)) else {
            break;
        };
        kept.remove(at);
    }
    let mut free: Vec<&Candidate> = ready.iter().copied().filter(|c| !c.runs).collect();
    while kept.len() < desired {
        let counts = per_zone(&kept);
        let Some(at) = (0..free.len()).min_by_key(|&i| {
            let z = zone(free[i]);
            (counts.get(&z).copied().unwrap_or(0), z, &free[i].name)
        }) else {
            break;
        };
        kept.push(free.remove(at));
    }
    let names: BTreeSet<String> = kept.iter().map(|c| c.name.clone()).collect();
    names.into_iter().collect()
}

fn zone(candidate: &Candidate) -> String {
    candidate.zone.clone().unwrap_or_default()
}

fn per_zone(kept: &[&Candidate]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for candidate in kept {
        *counts.entry(zone(candidate)).or_default() += 1;
    }
    counts
}

/// Whether `machine` reports a unit of `application`.
pub fn runs_unit_of(machine: &Machine, application: &str) -> bool {
    machine
        .status
        .iter()
        .flat_map(|s| s.units.iter().flatten())
        .any(|u| u.application.as_deref() == Some(application))
}

/// The placement of each application `units` names, given the pool's
/// `machines` (with whether each is ready, and its zone), and the `Scaled`
/// verdict; `None` when no application is scaled.
pub fn applications(
    units: &BTreeMap<String, u32>,
    machines: &[(&Machine, bool, Option<String>)],
) -> (
    Vec<ApplicationPlacement>,
    Option<(Status, MachinePoolReason, String)>,
) {
    let mut placements = Vec::new();
    let mut short = Vec::new();
    for (application, &desired) in units {
        let candidates: Vec<Candidate> = machines
            .iter()
            .map(|(machine, ready, zone)| Candidate {
                name: machine.name_any(),
                ready: *ready,
                zone: zone.clone(),
                runs: runs_unit_of(machine, application),
            })
            .collect();
        let placed = place(usize::try_from(desired).unwrap_or(usize::MAX), &candidates);
        let current = candidates.iter().filter(|c| c.runs).count();
        if placed.len() < usize::try_from(desired).unwrap_or(usize::MAX) {
            short.push(format!(
                "{application} asks for {desired} units and the pool has {} ready machines",
                placed.len()
            ));
        }
        placements.push(ApplicationPlacement {
            application: application.clone(),
            desired_units: desired,
            units: u32::try_from(current).unwrap_or(u32::MAX),
            machines: placed,
        });
    }
    let verdict = if units.is_empty() {
        None
    } else if short.is_empty() {
        let message = format!("{} application(s) have a machine for each unit", units.len());
        Some((Status::True, MachinePoolReason::ScaleMet, message))
    } else {
        Some((
            Status::False,
            MachinePoolReason::NotEnoughMachines,
            short.join("; "),
        ))
    };
    (placements, verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name:zone` (zone optional), `+` at the end: runs a unit, `!`: not ready.
    fn candidate(text: &str) -> Candidate {
        let ready = !text.ends_with('!');
        let text = text.trim_end_matches('!');
        let runs = text.ends_with('+');
        let text = text.trim_end_matches('+');
        let (name, zone) = match text.split_once(':') {
            Some((n, z)) => (n, Some(z.to_owned())),
            None => (text, None),
        };
        Candidate {
            name: name.to_owned(),
            ready,
            zone,
            runs,
        }
    }

    #[test]
    fn placement_table() {
        let cases: &[(&str, usize, &[&str], &[&str])] = &[
            ("one on the first ready machine", 1, &["a", "b", "c"], &["a"]),
            (
                "up from one keeps it",
                3,
                &["a", "b+", "c", "d"],
                &["a", "b", "c"],
            ),
            ("down keeps the first by name", 1, &["a+", "b+", "c+"], &["a"]),
            ("not ready machines get none", 2, &["a!", "b", "c!"], &["b"]),
            (
                "a unit on a machine no longer ready goes",
                1,
                &["a+!", "b"],
                &["b"],
            ),
            (
                "spread over zones",
                3,
                &["a:z1", "b:z1", "c:z1", "d:z2", "e:z3"],
                &["a", "d", "e"],
            ),
            (
                "spread counts the units kept",
                2,
                &["a:z1+", "b:z1", "c:z2"],
                &["a", "c"],
            ),
            (
                "down takes from the fullest zone",
                2,
                &["a:z1+", "b:z1+", "c:z2+"],
                &["a", "c"],
            ),
            ("zero removes every unit", 0, &["a+", "b+"], &[]),
            (
                "more than the pool has: all ready",
                5,
                &["a", "b!", "c"],
                &["a", "c"],
            ),
            ("stable across runs", 2, &["a", "b+", "c+"], &["b", "c"]),
        ];
        for (what, desired, candidates, want) in cases {
            let candidates: Vec<Candidate> = candidates.iter().map(|c| candidate(c)).collect();
            assert_eq!(place(*desired, &candidates), *want, "{what}");
        }
    }

    fn machine(name: &str, units: &[&str]) -> Machine {
        let units: Vec<serde_json::Value> = units
            .iter()
            .map(|a| serde_json::json!({"csv": format!("{a}.v1"), "version": "1", "state": "active", "application": a}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"pool": "edge"},
            "status": {"units": units},
        }))
        .expect("a Machine")
    }

    #[test]
    fn applications_report_desired_and_current_and_a_scale_that_cannot_be_met() {
        let (a, b) = (machine("a", &["db"]), machine("b", &[]));
        let machines = [(&a, true, None), (&b, true, None)];
        let (placements, verdict) = applications(&BTreeMap::new(), &machines);
        assert!(placements.is_empty());
        assert_eq!(verdict, None);

        let units = BTreeMap::from([("db".to_owned(), 2), ("web".to_owned(), 3)]);
        let (placements, verdict) = applications(&units, &machines);
        assert_eq!(
            placements[0],
            ApplicationPlacement {
                application: "db".into(),
                desired_units: 2,
                units: 1,
                machines: vec!["a".into(), "b".into()],
            }
        );
        assert_eq!(placements[1].units, 0);
        assert_eq!(placements[1].machines, ["a", "b"]);
        let (status, reason, message) = verdict.expect("a verdict");
        assert_eq!(
            (status, reason),
            (Status::False, MachinePoolReason::NotEnoughMachines)
        );
        assert_eq!(message, "web asks for 3 units and the pool has 2 ready machines");

        let units = BTreeMap::from([("db".to_owned(), 1)]);
        let (placements, verdict) = applications(&units, &machines);
        assert_eq!(placements[0].machines, ["a"]);
        assert_eq!(verdict.map(|v| v.1), Some(MachinePoolReason::ScaleMet));
    }
}
