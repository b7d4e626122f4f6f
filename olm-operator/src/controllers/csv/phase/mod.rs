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
mod tests;
