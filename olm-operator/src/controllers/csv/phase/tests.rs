//! Table tests of the phase decisions.

use olm_api::v1alpha1::StatusReason;

use super::*;
use crate::controllers::csv::{
    fixtures::{self, NAMESPACE, modes},
    validate::{self, Requirements},
};

const TIMEOUT: Duration = Duration::from_secs(300);

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).expect("a valid time")
}

fn validation(supported: &[&str], namespaces: &[&str], met: bool) -> Validation {
    let csv = fixtures::small_csv(&modes(supported), "");
    let found = fixtures::found(vec![], vec![], namespaces);
    let mut validation = validate::validate(&csv, &found);
    validation.requirements = Requirements {
        met,
        statuses: if met {
            vec![]
        } else {
            vec![RequirementStatus {
                group: "apiextensions.k8s.io".to_owned(),
                version: "v1".to_owned(),
                kind: "CustomResourceDefinition".to_owned(),
                name: "widgets.example.com".to_owned(),
                status: StatusReason::NotPresent,
                message: "CRD is not present".to_owned(),
                uuid: None,
                dependents: None,
            }]
        },
    };
    validation
}

fn facts(validation: &Validation) -> Facts<'_> {
    Facts {
        validation,
        replacement: None,
        replaced: None,
        upgrade_hold: None,
    }
}

fn status(phase: CsvPhase, reason: CsvReason) -> ClusterServiceVersionStatus {
    next_status(
        &ClusterServiceVersionStatus::default(),
        Some(&to(phase, reason, "before")),
        None,
        at(0),
    )
}

#[test]
fn a_new_csv_whose_requirements_hold_goes_to_install_in_one_pass() {
    let validation = validation(&["OwnNamespace"], &[NAMESPACE], true);
    let new = ClusterServiceVersionStatus::default();
    let (status, decision) = decide_ahead(&new, &facts(&validation), Some(&[]), at(5));
    assert!(matches!(decision, Decision::Install), "{decision:?}");
    assert_eq!(status.phase, Some(CsvPhase::InstallReady));
    let history: Vec<_> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| (c.phase, c.reason))
        .collect();
    assert_eq!(
        history,
        [
            (Some(CsvPhase::Pending), Some(CsvReason::RequirementsUnknown)),
            (Some(CsvPhase::InstallReady), Some(CsvReason::RequirementsMet)),
        ],
        "every transition taken stays in the history"
    );
}

#[test]
fn a_new_csv_with_unmet_requirements_settles_in_pending_in_one_pass() {
    let validation = validation(&["OwnNamespace"], &[NAMESPACE], false);
    let new = ClusterServiceVersionStatus::default();
    let (status, decision) = decide_ahead(&new, &facts(&validation), None, at(5));
    assert_eq!(status.phase, Some(CsvPhase::Pending));
    assert_eq!(
        transition(decision),
        (CsvPhase::Pending, CsvReason::RequirementsNotMet),
        "the transition left for the status write"
    );
    // Already waiting: nothing more is taken ahead.
    let waiting = status_of(CsvPhase::Pending, CsvReason::RequirementsNotMet, &validation);
    let (same, decision) = decide_ahead(&waiting, &facts(&validation), None, at(6));
    assert_eq!(same, waiting);
    assert_eq!(
        transition(decision),
        (CsvPhase::Pending, CsvReason::RequirementsNotMet)
    );
}

#[test]
fn a_succeeded_csv_is_decided_as_before() {
    let validation = validation(&["OwnNamespace"], &[NAMESPACE], true);
    let succeeded = status(CsvPhase::Succeeded, CsvReason::InstallSuccessful);
    let (same, decision) = decide_ahead(&succeeded, &facts(&validation), None, at(5));
    assert_eq!(same, succeeded);
    assert_eq!(
        format!("{decision:?}"),
        format!("{:?}", decide(&succeeded, &facts(&validation)))
    );
}

fn status_of(phase: CsvPhase, reason: CsvReason, validation: &Validation) -> ClusterServiceVersionStatus {
    let message = format!(
        "one or more requirements couldn't be found: {}",
        validation.requirements.unmet().join(", ")
    );
    next_status(
        &ClusterServiceVersionStatus::default(),
        Some(&to(phase, reason, message)),
        None,
        at(0),
    )
}

fn transition(decision: Decision) -> (CsvPhase, CsvReason) {
    match decision {
        Decision::Settle(Some(t)) => (t.phase, t.reason),
        other => panic!("expected a transition, got {other:?}"),
    }
}

fn peer(name: &str, phase: CsvPhase) -> Peer {
    Peer {
        name: name.to_owned(),
        phase: Some(phase),
    }
}

#[test]
fn a_new_csv_walks_pending_install_ready_installing_succeeded() {
    let valid = validation(&["OwnNamespace"], &[NAMESPACE], true);
    let mut current = ClusterServiceVersionStatus::default();
    let mut seen = Vec::new();
    for (step, health) in [
        Health::Ready,
        Health::Ready,
        Health::Waiting("0 of 1".into()),
        Health::Ready,
    ]
    .into_iter()
    .enumerate()
    {
        let now = at(step as i64);
        let transition = match decide(&current, &facts(&valid)) {
            Decision::Settle(t) => t,
            Decision::Install => {
                after_install(&current, &InstallOutcome::Applied(health), now, TIMEOUT).transition
            }
            Decision::DeleteSelf => panic!("nothing to delete"),
        };
        current = next_status(&current, transition.as_ref(), Some(&[]), now);
        seen.push((current.phase, current.reason));
    }
    let next = decide(&current, &facts(&valid));
    assert_eq!(
        next,
        Decision::Install,
        "a Succeeded CSV keeps its install in place"
    );
    let after = after_install(&current, &InstallOutcome::Applied(Health::Ready), at(9), TIMEOUT);
    assert_eq!(after.transition, None);
    seen.push((current.phase, current.reason));
    use CsvPhase::*;
    use CsvReason::*;
    assert_eq!(
        seen,
        [
            (Some(Pending), Some(RequirementsUnknown)),
            (Some(InstallReady), Some(RequirementsMet)),
            (Some(Installing), Some(InstallSuccessful)),
            (Some(Succeeded), Some(InstallSuccessful)),
            (Some(Succeeded), Some(InstallSuccessful)),
        ]
    );
    let phases: Vec<Option<CsvPhase>> = current.conditions.iter().flatten().map(|c| c.phase).collect();
    assert_eq!(
        phases,
        [
            Some(Pending),
            Some(InstallReady),
            Some(Installing),
            Some(Succeeded)
        ]
    );
    assert_eq!(current.last_transition_time, Some(Time(at(3))));
}

#[test]
fn unmet_requirements_keep_a_csv_pending_and_name_what_is_missing() {
    let unmet = validation(&["OwnNamespace"], &[NAMESPACE], false);
    let pending = status(CsvPhase::Pending, CsvReason::RequirementsUnknown);
    let Decision::Settle(Some(t)) = decide(&pending, &facts(&unmet)) else {
        panic!("expected a transition")
    };
    assert_eq!(
        (t.phase, t.reason),
        (CsvPhase::Pending, CsvReason::RequirementsNotMet)
    );
    assert_eq!(
        t.message,
        "one or more requirements couldn't be found: CustomResourceDefinition widgets.example.com"
    );
    let succeeded = status(CsvPhase::Succeeded, CsvReason::InstallSuccessful);
    assert_eq!(
        transition(decide(&succeeded, &facts(&unmet))),
        (CsvPhase::Failed, CsvReason::RequirementsNotMet)
    );
    let failed = status(CsvPhase::Failed, CsvReason::RequirementsNotMet);
    assert_eq!(
        transition(decide(&failed, &facts(&unmet))),
        (CsvPhase::Pending, CsvReason::RequirementsNotMet)
    );
    let met = validation(&["OwnNamespace"], &[NAMESPACE], true);
    assert_eq!(decide(&failed, &facts(&met)), Decision::Install);
}

#[test]
fn operator_group_problems_fail_the_csv_until_they_are_fixed() {
    let unsupported = validation(&["OwnNamespace"], &[""], true);
    let pending = status(CsvPhase::Pending, CsvReason::RequirementsUnknown);
    assert_eq!(
        transition(decide(&pending, &facts(&unsupported))),
        (CsvPhase::Failed, CsvReason::UnsupportedOperatorGroup)
    );
    let failed = status(CsvPhase::Failed, CsvReason::UnsupportedOperatorGroup);
    let fixed = validation(&["OwnNamespace"], &[NAMESPACE], true);
    assert_eq!(
        transition(decide(&failed, &facts(&fixed))),
        (CsvPhase::Pending, CsvReason::RequirementsUnknown)
    );
    let mut no_group = fixed.clone();
    no_group.membership = Err(validate::MembershipError::NoOperatorGroup);
    assert_eq!(
        transition(decide(&ClusterServiceVersionStatus::default(), &facts(&no_group))),
        (CsvPhase::Failed, CsvReason::NoOperatorGroup)
    );
    // A group that has not listed its namespaces yet is only waited for.
    let mut not_ready = fixed.clone();
    not_ready.membership = Err(validate::MembershipError::NotReady("og".to_owned()));
    assert_eq!(
        transition(decide(
            &ClusterServiceVersionStatus::default(),
            &facts(&not_ready)
        )),
        (CsvPhase::Pending, CsvReason::RequirementsUnknown)
    );
    assert_eq!(decide(&pending, &facts(&not_ready)), Decision::Settle(None));
}

#[test]
fn a_crd_owned_by_another_csv_is_an_owner_conflict_until_that_csv_goes() {
    let mut conflicting = validation(&["OwnNamespace"], &[NAMESPACE], true);
    conflicting.owner_conflict = Some(validate::OwnerConflict {
        crd: "widgets.example.com".to_owned(),
        owner: "other.v1".to_owned(),
    });
    let pending = status(CsvPhase::Pending, CsvReason::RequirementsUnknown);
    let Decision::Settle(Some(t)) = decide(&pending, &facts(&conflicting)) else {
        panic!("expected a transition")
    };
    assert_eq!((t.phase, t.reason), (CsvPhase::Failed, CsvReason::OwnerConflict));
    assert!(t.message.contains("widgets.example.com") && t.message.contains("other.v1"));
    let failed = next_status(&pending, Some(&t), None, at(1));
    assert_eq!(decide(&failed, &facts(&conflicting)), Decision::Settle(None));
    let clear = validation(&["OwnNamespace"], &[NAMESPACE], true);
    assert_eq!(
        transition(decide(&failed, &facts(&clear))),
        (CsvPhase::Pending, CsvReason::RequirementsUnknown)
    );
}

#[test]
fn an_invalid_strategy_fails_and_recovers_when_fixed() {
    let mut invalid = validation(&["OwnNamespace"], &[NAMESPACE], true);
    invalid.strategy = Err(validate::InvalidStrategy("deployment demo: bad".to_owned()));
    let pending = status(CsvPhase::Pending, CsvReason::RequirementsUnknown);
    let Decision::Settle(Some(t)) = decide(&pending, &facts(&invalid)) else {
        panic!("expected a transition")
    };
    assert_eq!(
        (t.phase, t.reason),
        (CsvPhase::Failed, CsvReason::InvalidStrategy)
    );
    assert_eq!(t.message, "install strategy invalid: deployment demo: bad");
    let failed = status(CsvPhase::Failed, CsvReason::InvalidStrategy);
    let valid = validation(&["OwnNamespace"], &[NAMESPACE], true);
    assert_eq!(
        transition(decide(&failed, &facts(&valid))),
        (CsvPhase::Pending, CsvReason::RequirementsUnknown)
    );
}

#[test]
fn an_install_without_progress_fails_after_the_timeout() {
    let installing = next_status(
        &status(CsvPhase::InstallReady, CsvReason::RequirementsMet),
        Some(&to(
            CsvPhase::Installing,
            CsvReason::Waiting,
            "installing: waiting",
        )),
        None,
        at(10),
    );
    let waiting = InstallOutcome::Applied(Health::Waiting("waiting".to_owned()));
    let early = after_install(&installing, &waiting, at(70), TIMEOUT);
    assert_eq!(
        early.transition.as_ref().map(|t| t.reason),
        Some(CsvReason::Waiting)
    );
    assert_eq!(early.recheck_in, Some(Duration::from_secs(241)));
    let progressed = after_install(
        &installing,
        &InstallOutcome::Applied(Health::Waiting("other".to_owned())),
        at(70),
        TIMEOUT,
    );
    assert_eq!(
        progressed.recheck_in,
        Some(Duration::from_secs(301)),
        "progress restarts the clock"
    );
    let late = after_install(&installing, &waiting, at(310), TIMEOUT);
    let t = late.transition.expect("a transition");
    assert_eq!(
        (t.phase, t.reason, t.message.as_str()),
        (CsvPhase::Failed, CsvReason::InstallCheckFailed, "install timeout")
    );
    let deadline = after_install(
        &installing,
        &InstallOutcome::Applied(Health::Failed(
            "deployment demo exceeded its progress deadline".into(),
        )),
        at(20),
        TIMEOUT,
    );
    assert_eq!(
        deadline.transition.map(|t| (t.phase, t.reason)),
        Some((CsvPhase::Failed, CsvReason::InstallCheckFailed))
    );
}

#[test]
fn a_broken_install_is_unhealthy_and_heals_when_ready_again() {
    let succeeded = status(CsvPhase::Succeeded, CsvReason::InstallSuccessful);
    let broken = after_install(
        &succeeded,
        &InstallOutcome::Applied(Health::Waiting("waiting for deployment demo".into())),
        at(5),
        TIMEOUT,
    );
    let t = broken.transition.expect("a transition");
    assert_eq!(
        (t.phase, t.reason),
        (CsvPhase::Failed, CsvReason::ComponentUnhealthy)
    );
    let failed = next_status(&succeeded, Some(&t), None, at(5));
    let healed = after_install(&failed, &InstallOutcome::Applied(Health::Ready), at(6), TIMEOUT);
    assert_eq!(
        healed.transition.map(|t| (t.phase, t.reason)),
        Some((CsvPhase::Succeeded, CsvReason::InstallSuccessful))
    );
    let refused = after_install(
        &succeeded,
        &InstallOutcome::Rejected("Deployment demo is controlled by ClusterServiceVersion other".into()),
        at(5),
        TIMEOUT,
    );
    assert_eq!(refused.recheck_in, Some(REJECTED_RECHECK));
    let t = refused.transition.expect("a transition");
    assert_eq!(
        (t.phase, t.reason),
        (CsvPhase::Failed, CsvReason::ComponentFailed)
    );
    assert!(t.message.starts_with("install strategy failed: "));
}

#[test]
fn an_upgrade_replaces_then_deletes_the_old_csv_once_the_new_one_succeeded() {
    let valid = validation(&["OwnNamespace"], &[NAMESPACE], true);
    let old_succeeded = status(CsvPhase::Succeeded, CsvReason::InstallSuccessful);
    let new_pending = peer("demo.v1.1.0", CsvPhase::Pending);
    let with_replacement = Facts {
        replacement: Some(&new_pending),
        ..facts(&valid)
    };
    let Decision::Settle(Some(t)) = decide(&old_succeeded, &with_replacement) else {
        panic!("expected a transition")
    };
    assert_eq!(
        (t.phase, t.reason),
        (CsvPhase::Replacing, CsvReason::BeingReplaced)
    );
    assert_eq!(t.message, "being replaced by csv: demo.v1.1.0");

    // The new CSV waits in Pending until the old one stepped aside.
    let new_status = status(CsvPhase::Pending, CsvReason::RequirementsUnknown);
    let old_still_succeeded = peer("demo.v1.0.0", CsvPhase::Succeeded);
    let waiting = Facts {
        replaced: Some(&old_still_succeeded),
        ..facts(&valid)
    };
    assert_eq!(decide(&new_status, &waiting), Decision::Settle(None));
    let old_replacing = peer("demo.v1.0.0", CsvPhase::Replacing);
    let ready = Facts {
        replaced: Some(&old_replacing),
        ..facts(&valid)
    };
    assert_eq!(
        transition(decide(&new_status, &ready)),
        (CsvPhase::InstallReady, CsvReason::RequirementsMet)
    );

    // The old one goes Deleting once the new one succeeded, then deletes itself.
    let replacing = status(CsvPhase::Replacing, CsvReason::BeingReplaced);
    assert_eq!(decide(&replacing, &with_replacement), Decision::Settle(None));
    let new_succeeded = peer("demo.v1.1.0", CsvPhase::Succeeded);
    let done = Facts {
        replacement: Some(&new_succeeded),
        ..facts(&valid)
    };
    assert_eq!(
        transition(decide(&replacing, &done)),
        (CsvPhase::Deleting, CsvReason::Replaced)
    );
    let deleting = status(CsvPhase::Deleting, CsvReason::Replaced);
    assert_eq!(decide(&deleting, &done), Decision::DeleteSelf);
    // A replacement that vanished sends the old CSV back to Pending.
    assert_eq!(
        transition(decide(&replacing, &facts(&valid))),
        (CsvPhase::Pending, CsvReason::RequirementsUnknown)
    );
}

#[test]
fn a_replacing_csv_waits_while_the_replaced_operator_is_not_upgradeable() {
    let valid = validation(&["OwnNamespace"], &[NAMESPACE], true);
    let new_status = status(CsvPhase::Pending, CsvReason::RequirementsUnknown);
    let old = peer("demo.v1.0.0", CsvPhase::Replacing);
    let held = Facts {
        replaced: Some(&old),
        upgrade_hold: Some("the operator is not upgradeable: migrating"),
        ..facts(&valid)
    };
    let Decision::Settle(Some(t)) = decide(&new_status, &held) else {
        panic!("expected a transition")
    };
    assert_eq!(
        (t.phase, t.reason),
        (CsvPhase::Pending, CsvReason::OperatorConditionNotUpgradeable)
    );
    assert_eq!(
        t.message,
        "operator is not upgradeable: the operator is not upgradeable: migrating"
    );
    let released = Facts {
        replaced: Some(&old),
        ..facts(&valid)
    };
    assert_eq!(
        transition(decide(&new_status, &released)),
        (CsvPhase::InstallReady, CsvReason::RequirementsMet)
    );
    // Once the replaced CSV is gone, nothing is held.
    let alone = Facts {
        upgrade_hold: Some("stale"),
        ..facts(&valid)
    };
    assert_eq!(
        transition(decide(&new_status, &alone)),
        (CsvPhase::InstallReady, CsvReason::RequirementsMet)
    );
}

#[test]
fn a_failed_csv_is_replaced_only_when_the_operator_group_fails_forward() {
    let mut valid = validation(&["OwnNamespace"], &[NAMESPACE], true);
    let failed = status(CsvPhase::Failed, CsvReason::InstallCheckFailed);
    let next = peer("demo.v1.1.0", CsvPhase::Pending);
    let replaced = Facts {
        replacement: Some(&next),
        ..facts(&valid)
    };
    assert_eq!(decide(&failed, &replaced), Decision::Install);
    if let Ok(membership) = valid.membership.as_mut() {
        membership.fail_forward = true;
    }
    let replaced = Facts {
        replacement: Some(&next),
        ..facts(&valid)
    };
    assert_eq!(
        transition(decide(&failed, &replaced)),
        (CsvPhase::Replacing, CsvReason::BeingReplaced)
    );
}

#[test]
fn a_changed_csv_rolls_out_again_instead_of_failing() {
    let succeeded = status(CsvPhase::Succeeded, CsvReason::InstallSuccessful);
    let rolling = InstallOutcome::Updated(Health::Waiting("waiting for deployment demo".into()));
    let t = after_install(&succeeded, &rolling, at(5), TIMEOUT)
        .transition
        .expect("a transition");
    assert_eq!((t.phase, t.reason), (CsvPhase::Installing, CsvReason::Waiting));
    let done = InstallOutcome::Updated(Health::Ready);
    assert_eq!(after_install(&succeeded, &done, at(5), TIMEOUT).transition, None);
}

#[test]
fn an_unchanged_status_is_equal_so_nothing_is_written() {
    let current = status(CsvPhase::Installing, CsvReason::Waiting);
    let same = to(CsvPhase::Installing, CsvReason::Waiting, "before");
    assert_eq!(next_status(&current, Some(&same), None, at(50)), current);
    assert_eq!(next_status(&current, None, None, at(50)), current);
    // A new message moves lastUpdateTime, not lastTransitionTime, and adds no history.
    let message = to(CsvPhase::Installing, CsvReason::Waiting, "after");
    let updated = next_status(&current, Some(&message), None, at(50));
    assert_eq!(updated.last_transition_time, current.last_transition_time);
    assert_eq!(updated.last_update_time, Some(Time(at(50))));
    assert_eq!(updated.conditions.as_ref().map(Vec::len), Some(1));
}

#[test]
fn the_phase_history_keeps_the_last_twenty_changes() {
    let mut current = ClusterServiceVersionStatus::default();
    for i in 0..30 {
        let (phase, reason) = if i % 2 == 0 {
            (CsvPhase::Succeeded, CsvReason::InstallSuccessful)
        } else {
            (CsvPhase::Failed, CsvReason::ComponentUnhealthy)
        };
        current = next_status(
            &current,
            Some(&to(phase, reason, format!("step {i}"))),
            None,
            at(i),
        );
    }
    let conditions = current.conditions.expect("history");
    assert_eq!(conditions.len(), HISTORY_LIMIT);
    assert_eq!(
        conditions.last().and_then(|c| c.message.as_deref()),
        Some("step 29")
    );
    assert_eq!(conditions[0].message.as_deref(), Some("step 10"));
}

fn deployment(yaml: &str) -> Deployment {
    serde_saphyr::from_str(yaml).expect("a valid Deployment")
}

#[test]
fn deployment_health_follows_the_rollout() {
    let base = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: demo, generation: 2}\n\
                spec: {replicas: 2, selector: {}, template: {}}\n";
    let health = |status: &str| deployment_health(&deployment(&format!("{base}status: {status}\n")));
    assert!(matches!(deployment_health(&deployment(base)), Health::Waiting(_)));
    assert!(
        matches!(health("{observedGeneration: 1}"), Health::Waiting(m) if m.contains("not been observed"))
    );
    assert!(matches!(
        health("{observedGeneration: 2, replicas: 2, updatedReplicas: 1}"),
        Health::Waiting(m) if m.contains("1 of 2 replicas have been updated")
    ));
    assert!(matches!(
        health("{observedGeneration: 2, replicas: 3, updatedReplicas: 2}"),
        Health::Waiting(m) if m.contains("1 old replicas are pending termination")
    ));
    assert!(matches!(
        health("{observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 1}"),
        Health::Waiting(m) if m.contains("1 of 2 updated replicas are available")
    ));
    assert_eq!(
        health(
            "{observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2, conditions: [{type: Available, status: 'True'}]}"
        ),
        Health::Ready
    );
    assert!(matches!(
        health("{observedGeneration: 2, conditions: [{type: Progressing, status: 'False', reason: ProgressDeadlineExceeded, message: too slow}]}"),
        Health::Failed(m) if m.contains("progress deadline") && m.contains("too slow")
    ));
    let ready = deployment(&format!(
        "{base}status: {{observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2}}\n"
    ));
    let waiting = deployment(base);
    assert_eq!(health_of(std::slice::from_ref(&ready)), Health::Ready);
    assert!(matches!(health_of(&[ready, waiting]), Health::Waiting(_)));
    assert_eq!(health_of(&[]), Health::Ready);
}

fn health_of(deployments: &[Deployment]) -> Health {
    super::health(deployments)
}
