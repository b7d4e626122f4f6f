//! Decide what a reconcile ends with, after the install step: the status to
//! write (none when the CSV carries it already, so a settled CSV, a resync
//! or a new leader writes nothing) and when to look again. Pure.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use olm_api::v1alpha1::{ClusterServiceVersionStatus, CsvPhase, RequirementStatus};

use super::{machine, phase, serving, validate::Requirements};

/// What performing a decision led to.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The phase transition to make, if any.
    pub transition: Option<phase::Transition>,
    /// When to look again even without an event.
    pub recheck_in: Option<Duration>,
    /// The serving certificates written, to stamp on the status.
    pub served: Option<serving::Serving>,
}

/// The end of a reconcile.
#[derive(Debug, PartialEq)]
pub struct Record {
    /// The status to write; `None` when the CSV carries it already.
    pub status: Option<ClusterServiceVersionStatus>,
    /// When to look at the CSV again without an event.
    pub requeue: Duration,
}

/// What the CSV's facts come to for the reconcile's end.
pub struct Facts<'a> {
    /// The CSV's status as stored.
    pub live: &'a ClusterServiceVersionStatus,
    /// The status decided before the install step ([`phase::decide_ahead`]).
    pub decided: &'a ClusterServiceVersionStatus,
    /// The CSV's requirements.
    pub requirements: &'a Requirements,
    /// Whether it installs with the `machine` strategy.
    pub machine: bool,
    /// How often a settled CSV is looked at again.
    pub resync: Duration,
}

/// The status `outcome` leads to from `facts`, written only when it differs
/// from the live one, and when to look again.
pub fn record(facts: &Facts<'_>, outcome: &Outcome, now: Timestamp) -> Record {
    let requirements = shown_requirements(facts.decided.phase, &facts.requirements.statuses);
    let mut next = phase::next_status(facts.decided, outcome.transition.as_ref(), requirements, now);
    if let Some(served) = &outcome.served {
        served.stamp(&mut next, now);
    }
    let waits_for_hooks = facts.machine && !facts.requirements.met;
    let renewal_in = outcome.served.as_ref().map(|served| served.due_in(now));
    Record {
        status: (next != *facts.live).then_some(next),
        requeue: requeue_after(outcome.recheck_in, waits_for_hooks, renewal_in, facts.resync),
    }
}

/// The requirement statuses the status shows: none while the CSV steps aside
/// for its replacement, where requirements are not checked again.
pub fn shown_requirements(
    phase: Option<CsvPhase>,
    statuses: &[RequirementStatus],
) -> Option<&[RequirementStatus]> {
    (!matches!(phase, Some(CsvPhase::Replacing | CsvPhase::Deleting))).then_some(statuses)
}

/// When to look at a CSV again without an event: when the install step asked
/// (`recheck_in`), else after `resync`; soon for a machine CSV waiting for its
/// hooks (nothing watches every ConfigMap); and no later than a second after
/// its serving certificates are due for renewal (`renewal_in`), so that
/// renewal is surely due.
pub fn requeue_after(
    recheck_in: Option<Duration>,
    waits_for_hooks: bool,
    renewal_in: Option<Duration>,
    resync: Duration,
) -> Duration {
    let recheck_in = if waits_for_hooks {
        Some(machine::REQUIREMENTS_RECHECK)
    } else {
        recheck_in
    };
    let requeue = recheck_in.unwrap_or(resync);
    renewal_in.map_or(requeue, |due| requeue.min(due + Duration::from_secs(1)))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use olm_api::v1alpha1::{CsvReason, StatusReason};

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).expect("a time")
    }

    fn crd(status: StatusReason) -> RequirementStatus {
        RequirementStatus {
            group: "apiextensions.k8s.io".to_owned(),
            version: "v1".to_owned(),
            kind: "CustomResourceDefinition".to_owned(),
            name: "demos.example.com".to_owned(),
            status,
            message: "CRD is present and Established condition is true".to_owned(),
            uuid: None,
            dependents: None,
        }
    }

    fn transition(phase: CsvPhase, reason: CsvReason) -> phase::Transition {
        phase::Transition {
            phase,
            reason,
            message: "install strategy completed with no errors".to_owned(),
        }
    }

    /// A CSV that succeeded at `at(0)` with one met requirement.
    fn succeeded() -> ClusterServiceVersionStatus {
        let settled = phase::next_status(
            &ClusterServiceVersionStatus::default(),
            Some(&transition(CsvPhase::Succeeded, CsvReason::InstallSuccessful)),
            Some(&[crd(StatusReason::Present)]),
            at(0),
        );
        assert_eq!(settled.phase, Some(CsvPhase::Succeeded));
        settled
    }

    #[test]
    fn a_status_is_written_only_when_it_changes() {
        let met = Requirements {
            met: true,
            statuses: vec![crd(StatusReason::Present)],
        };
        let unmet = Requirements {
            met: false,
            statuses: vec![crd(StatusReason::NotPresent)],
        };
        let installed = Outcome {
            transition: Some(transition(CsvPhase::Succeeded, CsvReason::InstallSuccessful)),
            ..Outcome::default()
        };
        let failed = Outcome {
            transition: Some(transition(CsvPhase::Failed, CsvReason::ComponentUnhealthy)),
            ..Outcome::default()
        };
        let live = succeeded();
        let mut replacing = live.clone();
        replacing.phase = Some(CsvPhase::Replacing);
        // (what, live = decided, requirements, outcome, written phase or None)
        let cases = [
            ("settled, nothing happened", &live, &met, Outcome::default(), None),
            ("settled, installed again the same", &live, &met, installed, None),
            (
                "a requirement went",
                &live,
                &unmet,
                Outcome::default(),
                Some(CsvPhase::Succeeded),
            ),
            ("a component failed", &live, &met, failed, Some(CsvPhase::Failed)),
            (
                "stepping aside: requirements not checked",
                &replacing,
                &unmet,
                Outcome::default(),
                None,
            ),
        ];
        for (what, live, requirements, outcome, written) in cases {
            let facts = Facts {
                live,
                decided: live,
                requirements,
                machine: false,
                resync: Duration::from_secs(600),
            };
            let ended = record(&facts, &outcome, at(3600));
            assert_eq!(
                ended.status.as_ref().map(|s| s.phase),
                written.map(Some),
                "{what}"
            );
            assert_eq!(ended.requeue, Duration::from_secs(600), "{what}");
        }
    }

    #[test]
    fn a_decided_transition_is_written_even_when_the_install_adds_nothing() {
        let live = ClusterServiceVersionStatus::default();
        let decided = phase::next_status(
            &live,
            Some(&transition(CsvPhase::Pending, CsvReason::RequirementsUnknown)),
            None,
            at(0),
        );
        let requirements = Requirements {
            met: true,
            statuses: Vec::new(),
        };
        let facts = Facts {
            live: &live,
            decided: &decided,
            requirements: &requirements,
            machine: false,
            resync: Duration::from_secs(600),
        };
        let ended = record(&facts, &Outcome::default(), at(1));
        let status = ended.status.expect("a new status");
        assert_eq!(status.phase, Some(CsvPhase::Pending));
        assert_eq!(status.last_transition_time, Some(Time(at(0))));
    }

    #[test]
    fn the_end_says_when_to_look_again() {
        let live = succeeded();
        let unmet = Requirements {
            met: false,
            statuses: vec![crd(StatusReason::NotPresent)],
        };
        let facts = Facts {
            live: &live,
            decided: &live,
            requirements: &unmet,
            machine: true,
            resync: Duration::from_secs(600),
        };
        let waiting = record(&facts, &Outcome::default(), at(3600));
        assert_eq!(waiting.requeue, machine::REQUIREMENTS_RECHECK, "hooks awaited");
        let served = Outcome {
            served: Some(serving::Serving {
                rotated: false,
                rotate_at: at(3610),
            }),
            recheck_in: Some(Duration::from_secs(30)),
            ..Outcome::default()
        };
        let facts = Facts {
            machine: false,
            ..facts
        };
        let renewed = record(&facts, &served, at(3600));
        assert_eq!(renewed.requeue, Duration::from_secs(11), "renewal first");
        let status = renewed.status.expect("the certificates are recorded");
        assert_eq!(status.certs_rotate_at, Some(Time(at(3610))));
    }

    #[test]
    fn a_csv_is_looked_at_again_when_the_first_reason_comes() {
        let s = Duration::from_secs;
        let hooks = machine::REQUIREMENTS_RECHECK;
        // (what, recheck_in, waits_for_hooks, renewal_in, resync, expected)
        let cases = [
            ("nothing asked: the resync", None, false, None, s(600), s(600)),
            ("the install asked", Some(s(30)), false, None, s(600), s(30)),
            (
                "the install asked later than the resync",
                Some(s(900)),
                false,
                None,
                s(600),
                s(900),
            ),
            ("hooks awaited", Some(s(30)), true, None, s(600), hooks),
            ("renewal first", Some(s(30)), false, Some(s(4)), s(600), s(5)),
            ("renewal later", None, false, Some(s(3600)), s(600), s(600)),
        ];
        for (what, recheck_in, waits, renewal_in, resync, expected) in cases {
            assert_eq!(
                requeue_after(recheck_in, waits, renewal_in, resync),
                expected,
                "{what}"
            );
        }
    }

    #[test]
    fn requirements_are_shown_except_while_stepping_aside() {
        let statuses = vec![RequirementStatus {
            group: "apiextensions.k8s.io".to_owned(),
            version: "v1".to_owned(),
            kind: "CustomResourceDefinition".to_owned(),
            name: "demos.example.com".to_owned(),
            status: olm_api::v1alpha1::StatusReason::Present,
            message: "CRD is present and Established condition is true".to_owned(),
            uuid: None,
            dependents: None,
        }];
        for phase in [
            None,
            Some(CsvPhase::Pending),
            Some(CsvPhase::Succeeded),
            Some(CsvPhase::Failed),
        ] {
            assert_eq!(
                shown_requirements(phase, &statuses).map(<[_]>::len),
                Some(1),
                "{phase:?}"
            );
        }
        for phase in [CsvPhase::Replacing, CsvPhase::Deleting] {
            assert_eq!(shown_requirements(Some(phase), &statuses), None, "{phase:?}");
        }
    }
}
