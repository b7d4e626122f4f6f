//! The phase machine of a ClusterServiceVersion, pure: from the current status
//! and what validate concluded, which transition to make and whether to
//! install; then, from the applied Deployments, how the install is doing.
//!
//! Phases and reasons are OLM's: `""` → Pending (RequirementsUnknown,
//! RequirementsNotMet, or OperatorConditionNotUpgradeable while the CSV it
//! replaces says it cannot be upgraded) → InstallReady (AllRequirementsMet) → Installing
//! (InstallSucceeded, InstallWaiting) → Succeeded (InstallSucceeded); Failed
//! with InstallCheckFailed when an install makes no progress for the install
//! timeout, ComponentUnhealthy when a Succeeded install breaks; on upgrade
//! Succeeded → Replacing (BeingReplaced) → Deleting (Replaced). One transition
//! per reconcile, as OLM does, so every phase is observable.

use std::time::Duration;

use k8s_openapi::{
    api::apps::v1::Deployment,
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::{SignedDuration, Timestamp},
};
use kube::ResourceExt;
use olm_api::v1alpha1::{ClusterServiceVersionStatus, CsvCondition, CsvPhase, CsvReason, RequirementStatus};

use super::{dereference::Peer, validate::Validation};

/// How many phase changes `status.conditions` keeps (OLM keeps 20).
pub const HISTORY_LIMIT: usize = 20;

/// How soon a refused install is tried again.
pub const REJECTED_RECHECK: Duration = Duration::from_secs(30);

/// A phase, reason and message to move to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The phase.
    pub phase: CsvPhase,
    /// OLM's reason.
    pub reason: CsvReason,
    /// Why, in words.
    pub message: String,
}

fn to(phase: CsvPhase, reason: CsvReason, message: impl Into<String>) -> Transition {
    Transition {
        phase,
        reason,
        message: message.into(),
    }
}

/// What the reconcile has to know besides the CSV's status.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// What validate concluded.
    pub validation: &'a Validation,
    /// A CSV that replaces this one.
    pub replacement: Option<&'a Peer>,
    /// The CSV this one replaces, while it exists.
    pub replaced: Option<&'a Peer>,
    /// Why the CSV this one replaces may not be upgraded now (its
    /// OperatorCondition says so): this one waits in Pending.
    pub upgrade_hold: Option<&'a str>,
}

/// What to do in this reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to install: move to this status, or stay.
    Settle(Option<Transition>),
    /// Apply the install, then ask [`after_install`].
    Install,
    /// The CSV has been replaced: delete it.
    DeleteSelf,
}

/// Decides the next step for a CSV in `status`.
pub fn decide(status: &ClusterServiceVersionStatus, facts: &Facts<'_>) -> Decision {
    use CsvPhase::*;
    use CsvReason::*;

    let phase = status.phase;
    match phase {
        Some(Deleting) => return Decision::DeleteSelf,
        Some(Replacing) => return Decision::Settle(replacing(facts)),
        _ => {}
    }

    let membership = match &facts.validation.membership {
        Ok(membership) => membership,
        Err(problem) => {
            return Decision::Settle(match problem.reason() {
                Some(reason) => Some(to(Failed, reason, problem.to_string())),
                // Only waiting for the OperatorGroup's status: say so once.
                None => phase
                    .is_none()
                    .then(|| to(Pending, RequirementsUnknown, "requirements not yet checked")),
            });
        }
    };
    if phase == Some(Failed) && status.reason.is_some_and(is_group_reason) {
        return Decision::Settle(Some(to(
            Pending,
            RequirementsUnknown,
            "InstallModes now support target namespaces",
        )));
    }
    if let Err(invalid) = &facts.validation.strategy {
        return Decision::Settle(Some(to(Failed, InvalidStrategy, invalid.to_string())));
    }

    match phase {
        None | Some(Unknown) => Decision::Settle(Some(to(
            Pending,
            RequirementsUnknown,
            "requirements not yet checked",
        ))),
        Some(Pending) => from_pending(facts),
        Some(InstallReady) | Some(Installing) => Decision::Install,
        Some(Succeeded) => from_succeeded(facts),
        Some(Failed) => from_failed(status, facts, membership.fail_forward),
        Some(Replacing) | Some(Deleting) => Decision::Settle(None),
    }
}

/// How many transitions one pass takes before it installs: a new CSV's
/// Pending, then InstallReady.
const FOLDED: usize = 2;

/// The decision for a CSV in `status`, after taking at once the transitions
/// that need no work in between (to Pending, to InstallReady): each used to
/// cost a status write and a reconcile before the next decision. Returns the
/// status those transitions lead to (each recorded in its conditions, as
/// before) and the decision that follows them. Pure.
pub fn decide_ahead(
    status: &ClusterServiceVersionStatus,
    facts: &Facts<'_>,
    requirements: Option<&[RequirementStatus]>,
    now: Timestamp,
) -> (ClusterServiceVersionStatus, Decision) {
    let mut status = status.clone();
    let mut decision = decide(&status, facts);
    for _ in 0..FOLDED {
        let Decision::Settle(Some(transition)) = &decision else {
            break;
        };
        if !matches!(transition.phase, CsvPhase::Pending | CsvPhase::InstallReady) {
            break;
        }
        let taken = next_status(&status, Some(transition), requirements, now);
        let next = decide(&taken, facts);
        let moves_on = match &next {
            Decision::Settle(Some(further)) => further != transition,
            Decision::Settle(None) => false,
            Decision::Install | Decision::DeleteSelf => true,
        };
        if !moves_on {
            break;
        }
        (status, decision) = (taken, next);
    }
    (status, decision)
}

/// Pending: waits for an upgrade hold, the requirements and the CSV being
/// replaced; fails on a CRD owner conflict; else is ready to install.
fn from_pending(facts: &Facts<'_>) -> Decision {
    use CsvPhase::*;
    use CsvReason::*;

    let requirements = &facts.validation.requirements;
    if let Some(hold) = facts.upgrade_hold.filter(|_| facts.replaced.is_some()) {
        let message = super::operator_condition::pending_message(hold);
        Decision::Settle(Some(to(Pending, OperatorConditionNotUpgradeable, message)))
    } else if !requirements.met {
        let message = format!(
            "one or more requirements couldn't be found: {}",
            requirements.unmet().join(", ")
        );
        Decision::Settle(Some(to(Pending, RequirementsNotMet, message)))
    } else if let Some(conflict) = &facts.validation.owner_conflict {
        Decision::Settle(Some(to(Failed, OwnerConflict, conflict.to_string())))
    } else if facts
        .replaced
        .is_some_and(|previous| previous.phase != Some(Replacing))
    {
        // The CSV being replaced must step aside first (it goes Replacing
        // as soon as it sees this one), so that both never fight over
        // shared objects.
        Decision::Settle(None)
    } else {
        Decision::Settle(Some(to(
            InstallReady,
            RequirementsMet,
            "all requirements found, attempting install",
        )))
    }
}

/// Succeeded: steps aside for a replacement, fails when requirements go,
/// else keeps the install applied.
fn from_succeeded(facts: &Facts<'_>) -> Decision {
    use CsvPhase::*;
    use CsvReason::*;

    let requirements = &facts.validation.requirements;
    if let Some(next) = facts.replacement {
        Decision::Settle(Some(being_replaced(next)))
    } else if !requirements.met {
        Decision::Settle(Some(to(Failed, RequirementsNotMet, "requirements no longer met")))
    } else {
        Decision::Install
    }
}

/// Failed: steps aside for a replacement when failing forward, waits for
/// requirements, recovers when its cause is gone, else installs again (but
/// for failures that say not to retry).
fn from_failed(status: &ClusterServiceVersionStatus, facts: &Facts<'_>, fail_forward: bool) -> Decision {
    use CsvPhase::*;
    use CsvReason::*;

    let requirements = &facts.validation.requirements;
    if let Some(next) = facts.replacement.filter(|_| fail_forward) {
        return Decision::Settle(Some(being_replaced(next)));
    }
    if !requirements.met {
        return Decision::Settle(Some(to(Pending, RequirementsNotMet, "requirements not met")));
    }
    match status.reason {
        Some(OwnerConflict) if facts.validation.owner_conflict.is_none() => Decision::Settle(Some(to(
            Pending,
            RequirementsUnknown,
            "the conflicting CRD owner is gone",
        ))),
        Some(OwnerConflict) => Decision::Settle(None),
        Some(InvalidStrategy) => Decision::Settle(Some(to(
            Pending,
            RequirementsUnknown,
            "the install strategy is valid again",
        ))),
        Some(ComponentFailedNoRetry) => Decision::Settle(None),
        _ => Decision::Install,
    }
}

fn being_replaced(next: &Peer) -> Transition {
    to(
        CsvPhase::Replacing,
        CsvReason::BeingReplaced,
        format!("being replaced by csv: {}", next.name),
    )
}

fn replacing(facts: &Facts<'_>) -> Option<Transition> {
    // Only the oldest CSV of a chain goes first; the next one waits for it.
    if facts.replaced.is_some() {
        return None;
    }
    match facts.replacement {
        Some(next)
            if matches!(
                next.phase,
                Some(CsvPhase::Succeeded | CsvPhase::Replacing | CsvPhase::Deleting)
            ) =>
        {
            Some(to(
                CsvPhase::Deleting,
                CsvReason::Replaced,
                "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
            ))
        }
        Some(_) => None,
        None => Some(to(
            CsvPhase::Pending,
            CsvReason::RequirementsUnknown,
            "the ClusterServiceVersion that was replacing this one is gone",
        )),
    }
}

fn is_group_reason(reason: CsvReason) -> bool {
    matches!(
        reason,
        CsvReason::NoOperatorGroup
            | CsvReason::TooManyOperatorGroups
            | CsvReason::NoTargetNamespaces
            | CsvReason::UnsupportedOperatorGroup
            | CsvReason::InvalidInstallModes
    )
}

// === After the install ===

/// How the applied install is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// Every Deployment is rolled out and available.
    Ready,
    /// A Deployment is on its way; the message says which and how far.
    Waiting(String),
    /// A Deployment cannot get there (its progress deadline passed).
    Failed(String),
}

/// The outcome of applying the install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallOutcome {
    /// Everything was applied; the Deployments are in this state.
    Applied(Health),
    /// Everything was applied, and an existing Deployment got a new spec (the
    /// CSV changed): a new rollout, not a broken install.
    Updated(Health),
    /// The API server refused the install (forbidden, invalid, owned by
    /// another CSV); retrying at once does not help.
    Rejected(String),
}

/// What follows an install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfterInstall {
    /// The transition to make, if any.
    pub transition: Option<Transition>,
    /// When to look again even without an event (the install timeout).
    pub recheck_in: Option<Duration>,
}

/// The transition after applying the install of a CSV in `status`.
pub fn after_install(
    status: &ClusterServiceVersionStatus,
    outcome: &InstallOutcome,
    now: Timestamp,
    timeout: Duration,
) -> AfterInstall {
    use CsvPhase::*;
    use CsvReason::*;

    let settle = |transition: Option<Transition>| AfterInstall {
        transition,
        recheck_in: None,
    };
    let health = match outcome {
        InstallOutcome::Rejected(message) => {
            // Refusals are often fixed outside the CSV (a permission granted,
            // a conflicting object removed): try again soon.
            return AfterInstall {
                transition: Some(to(
                    Failed,
                    ComponentFailed,
                    format!("install strategy failed: {message}"),
                )),
                recheck_in: Some(REJECTED_RECHECK),
            };
        }
        InstallOutcome::Applied(health) => health,
        InstallOutcome::Updated(health) => {
            if let Health::Waiting(message) = health
                && matches!(status.phase, Some(Succeeded | Failed))
            {
                return AfterInstall {
                    transition: Some(to(Installing, Waiting, format!("installing: {message}"))),
                    recheck_in: Some(timeout + Duration::from_secs(1)),
                };
            }
            health
        }
    };
    let succeeded = || {
        to(
            Succeeded,
            InstallSuccessful,
            "install strategy completed with no errors",
        )
    };
    match (status.phase, health) {
        (Some(InstallReady), _) => settle(Some(to(
            Installing,
            InstallSuccessful,
            "waiting for install components to report healthy",
        ))),
        (Some(Installing), Health::Ready) => settle(Some(succeeded())),
        (Some(Installing), Health::Failed(message)) => settle(Some(to(
            Failed,
            InstallCheckFailed,
            format!("install failed: {message}"),
        ))),
        (Some(Installing), Health::Waiting(message)) => installing(status, message, now, timeout),
        (Some(Succeeded), Health::Ready) => settle(None),
        (Some(Succeeded), Health::Waiting(message) | Health::Failed(message)) => settle(Some(to(
            Failed,
            ComponentUnhealthy,
            format!("installing: {message}"),
        ))),
        (Some(Failed), Health::Ready) => settle(Some(succeeded())),
        (Some(Failed), Health::Waiting(message)) if status.reason == Some(ComponentFailed) => {
            settle(Some(to(Installing, Waiting, format!("installing: {message}"))))
        }
        _ => settle(None),
    }
}

/// Installing and still waiting for the Deployments: fails once no progress
/// was made for `timeout`, else waits and looks again when the timeout would
/// pass (the full timeout again when the message shows progress).
fn installing(
    status: &ClusterServiceVersionStatus,
    message: &str,
    now: Timestamp,
    timeout: Duration,
) -> AfterInstall {
    use CsvPhase::*;
    use CsvReason::*;

    let last_progress = status
        .last_update_time
        .as_ref()
        .or(status.last_transition_time.as_ref())
        .map_or(now, |time| time.0);
    let stalled_for = now.duration_since(last_progress);
    let timeout_signed = SignedDuration::try_from(timeout).unwrap_or(SignedDuration::MAX);
    if stalled_for >= timeout_signed {
        return AfterInstall {
            transition: Some(to(Failed, InstallCheckFailed, "install timeout")),
            recheck_in: None,
        };
    }
    let waiting = to(Installing, Waiting, format!("installing: {message}"));
    let progressed = status.message.as_deref() != Some(waiting.message.as_str());
    let remaining = if progressed {
        timeout
    } else {
        Duration::try_from(timeout_signed - stalled_for).unwrap_or(timeout)
    };
    AfterInstall {
        transition: Some(waiting),
        // A second more, so that the deadline has surely passed.
        recheck_in: Some(remaining + Duration::from_secs(1)),
    }
}

/// The health of the applied Deployments: the first that is not ready decides.
pub fn health(deployments: &[Deployment]) -> Health {
    let mut waiting = None;
    for deployment in deployments {
        match deployment_health(deployment) {
            Health::Ready => {}
            failed @ Health::Failed(_) => return failed,
            Health::Waiting(message) => {
                waiting.get_or_insert(message);
            }
        }
    }
    waiting.map_or(Health::Ready, Health::Waiting)
}

/// Whether one Deployment is rolled out and available, as `kubectl rollout
/// status` judges it.
pub fn deployment_health(deployment: &Deployment) -> Health {
    let name = deployment.name_any();
    let waiting =
        |why: String| Health::Waiting(format!("waiting for deployment {name} to become ready: {why}"));
    let Some(status) = deployment.status.as_ref() else {
        return waiting("the deployment has no status yet".to_owned());
    };
    let generation = deployment.metadata.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        return waiting("the deployment spec update has not been observed yet".to_owned());
    }
    let condition = |kind: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|condition| condition.type_ == kind)
    };
    if let Some(progressing) = condition("Progressing")
        && progressing.reason.as_deref() == Some("ProgressDeadlineExceeded")
    {
        return Health::Failed(format!(
            "deployment {name} exceeded its progress deadline: {}",
            progressing.message.as_deref().unwrap_or_default()
        ));
    }
    let desired = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.replicas)
        .unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or(0);
    let replicas = status.replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    if updated < desired {
        return waiting(format!("{updated} of {desired} replicas have been updated"));
    }
    if replicas > updated {
        return waiting(format!(
            "{} old replicas are pending termination",
            replicas - updated
        ));
    }
    if available < updated {
        return waiting(format!("{available} of {updated} updated replicas are available"));
    }
    if let Some(available) = condition("Available")
        && available.status != "True"
    {
        return waiting(format!(
            "the deployment is not available: {}",
            available.message.as_deref().unwrap_or_default()
        ));
    }
    Health::Ready
}

// === The next status ===

/// The status after `transition` (if any) and with `requirements` (if
/// given). `last_update_time` changes only when phase, reason or message do,
/// `last_transition_time` only when the phase does, and `conditions` gains an
/// entry when phase or reason change; so an unchanged CSV gets an equal status
/// and nothing is written.
pub fn next_status(
    old: &ClusterServiceVersionStatus,
    transition: Option<&Transition>,
    requirements: Option<&[RequirementStatus]>,
    now: Timestamp,
) -> ClusterServiceVersionStatus {
    let mut status = old.clone();
    if let Some(requirements) = requirements {
        status.requirement_status = Some(requirements.to_vec());
    }
    let Some(transition) = transition else {
        return status;
    };
    let same = old.phase == Some(transition.phase)
        && old.reason == Some(transition.reason)
        && old.message.as_deref() == Some(transition.message.as_str());
    if same {
        return status;
    }
    let now = Time(now);
    if old.phase != Some(transition.phase) {
        status.last_transition_time = Some(now.clone());
    }
    status.phase = Some(transition.phase);
    status.reason = Some(transition.reason);
    status.message = Some(transition.message.clone());
    status.last_update_time = Some(now.clone());
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let last = conditions.last();
    if last.is_none_or(|last| last.phase != Some(transition.phase) || last.reason != Some(transition.reason))
    {
        conditions.push(CsvCondition {
            phase: Some(transition.phase),
            message: Some(transition.message.clone()),
            reason: Some(transition.reason),
            last_update_time: Some(now.clone()),
            last_transition_time: status.last_transition_time.clone(),
        });
        if conditions.len() > HISTORY_LIMIT {
            let excess = conditions.len() - HISTORY_LIMIT;
            conditions.drain(..excess);
        }
    }
    status
}

#[cfg(test)]
mod tests {
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
}
