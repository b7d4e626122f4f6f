//! Automatic rollback of a failed upgrade, decided (pure).
//!
//! A Subscription opts in with annotation `olm-rs.dev/auto-rollback: "true"`
//! ([`labels::revision::AUTO_ROLLBACK`]), or all do when OLMConfig `cluster`
//! sets `spec.features.autoRollback` (a Subscription's `"false"` still opts
//! out). One that has not opted in behaves as OLM's: a failed new CSV stays
//! Failed, and nothing is rolled back.
//!
//! An upgrade is under way while the Subscription's installed (or current)
//! CSV has no revision recorded yet and another CSV of the Subscription has
//! one: revisions are recorded only for CSVs that reached Succeeded. It
//! counts as failed when that new CSV goes Failed, or is not Succeeded within
//! the deadline ([`labels::revision::AUTO_ROLLBACK_DEADLINE`], else
//! OLMConfig's `spec.features.autoRollbackDeadline`, else
//! [`DEFAULT_DEADLINE`]) counted from the CSV's creation.
//!
//! The rollback itself is the one a user asks for ([`super::rollback`]): this
//! decision only writes the request on the Subscription, annotation
//! `olm-rs.dev/rollback-to` naming the newest revision before, with
//! `olm-rs.dev/failed-upgrade` (the failed CSV) and
//! `olm-rs.dev/failed-upgrade-cause` and `olm-rs.dev/failed-upgrade-head`
//! (the channel head then) beside it. The same checks then apply
//! (stored CRD versions, a corrupt or incomplete revision, a plan in flight),
//! the failed CSV is removed, the revision's objects are applied again, and
//! the Subscription is held there, so the failed version is not tried again.
//! The hold ends when the catalog's channel head is another CSV than it was
//! at the failure ([`lifts`]: the annotations this controller wrote are
//! removed, [`lift`]), or when the user removes the annotations
//! (`kubectl olm rollback SUBSCRIPTION --lift`).

use std::{fmt, time::Duration};

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Resource, ResourceExt,
    api::{ApiResource, DynamicObject},
};
use olm_api::{
    labels::revision as keys,
    model::OperatorRevision,
    v1::OLMConfig,
    v1alpha1::{ClusterServiceVersion, CsvPhase, Subscription},
};
use olm_runtime::effects::Desired;

use crate::go_duration::parse_go_duration;

/// How long a new CSV may take to reach Succeeded when nothing says otherwise.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10 * 60);

/// Whether a Subscription rolls a failed upgrade back, and how long an
/// upgrade may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Opted in (by the Subscription, or by OLMConfig's default).
    pub enabled: bool,
    /// How long a new CSV may take to reach Succeeded.
    pub deadline: Duration,
    /// A deadline that could not be read (the default applies), in words
    /// naming where it was written.
    pub unreadable: Option<String>,
}

/// The policy of `subscription`, with OLMConfig `cluster` (if any) as the
/// cluster-wide default. An annotation other than `true` or `false` counts
/// as unset.
pub fn policy(subscription: &Subscription, config: Option<&OLMConfig>) -> Policy {
    let annotations = subscription.annotations();
    let enabled = match annotations.get(keys::AUTO_ROLLBACK).map(|v| v.trim()) {
        Some("true") => true,
        Some("false") => false,
        _ => config.is_some_and(OLMConfig::auto_rollback),
    };
    let written = annotations
        .get(keys::AUTO_ROLLBACK_DEADLINE)
        .map(|text| {
            (
                format!("annotation {}", keys::AUTO_ROLLBACK_DEADLINE),
                text.as_str(),
            )
        })
        .or_else(|| {
            config
                .and_then(OLMConfig::auto_rollback_deadline)
                .map(|text| ("OLMConfig spec.features.autoRollbackDeadline".to_owned(), text))
        });
    let (deadline, unreadable) = match written {
        None => (DEFAULT_DEADLINE, None),
        Some((place, text)) => match parse_go_duration(text) {
            Ok(deadline) if !deadline.is_zero() => (deadline, None),
            Ok(_) => (DEFAULT_DEADLINE, Some(format!("{place}: a deadline of 0"))),
            Err(error) => (DEFAULT_DEADLINE, Some(format!("{place}: {error}"))),
        },
    };
    Policy {
        enabled,
        deadline,
        unreadable,
    }
}

/// Why an upgrade counts as failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The new CSV went Failed.
    Failed {
        /// Its reason, as written.
        reason: String,
        /// Its message.
        message: String,
    },
    /// The new CSV was not Succeeded within the deadline.
    Deadline {
        /// The deadline.
        deadline: Duration,
        /// The phase it was in, as written.
        phase: String,
        /// Its message.
        message: String,
    },
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Failed { reason, message } => write!(f, "its CSV went Failed ({reason}): {message}"),
            Cause::Deadline {
                deadline,
                phase,
                message,
            } => write!(
                f,
                "{DEADLINE_WORDS} {}s (phase {phase}): {message}",
                deadline.as_secs()
            ),
        }
    }
}

/// A failed upgrade, and where it goes back to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The new CSV, whose upgrade failed.
    pub failed: String,
    /// Its version, when it says one.
    pub failed_version: Option<String>,
    /// The revision to go back to (its name, which is its CSV's).
    pub target: String,
    /// That revision's version, when recorded.
    pub target_version: Option<String>,
    /// Why it failed.
    pub cause: Cause,
}

impl Failure {
    /// The failure in words, as annotation `olm-rs.dev/failed-upgrade-cause`
    /// keeps it: both versions and the cause.
    pub fn describe(&self) -> String {
        let version = |name: &str, version: &Option<String>| match version {
            Some(v) => format!("{name} (version {v})"),
            None => name.to_owned(),
        };
        format!(
            "the upgrade from {} to {} failed: {}",
            version(&self.target, &self.target_version),
            version(&self.failed, &self.failed_version),
            self.cause
        )
    }
}

/// What the automatic rollback decides for one Subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to do: not opted in, no upgrade under way, or it succeeded.
    Nothing,
    /// An upgrade is under way and within its deadline: look again then.
    Wait(Duration),
    /// The upgrade failed: roll back.
    RollBack(Failure),
}

/// What the decision reads.
pub struct Read<'a> {
    /// The Subscription (not held by a rollback).
    pub subscription: &'a Subscription,
    /// Its policy.
    pub policy: &'a Policy,
    /// The CSVs of its namespace.
    pub csvs: &'a [&'a ClusterServiceVersion],
    /// Its revisions, as the store keeps them.
    pub revisions: &'a [&'a OperatorRevision],
    /// Now.
    pub now: Timestamp,
}

/// Whether the upgrade of `read` failed, is under way, or neither.
pub fn verdict(read: &Read<'_>) -> Verdict {
    if !read.policy.enabled {
        return Verdict::Nothing;
    }
    let Some(new) = upgrading(read) else {
        return Verdict::Nothing;
    };
    let name = new.name_any();
    let Some(target) = read
        .revisions
        .iter()
        .filter(|r| r.spec.cluster_service_version != name)
        .max_by_key(|r| r.spec.revision)
    else {
        // A first install that fails is not an upgrade: as OLM.
        return Verdict::Nothing;
    };
    let status = new.status.as_ref();
    let phase = status.and_then(|s| s.phase);
    let message = status.and_then(|s| s.message.clone()).unwrap_or_default();
    // A Failed CSV may be installed again at once (and fail again): its
    // phase history keeps that it failed, however briefly.
    let failed = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|history| history.iter().rev().find(|c| c.phase == Some(CsvPhase::Failed)))
        .map(|c| (c.reason, c.message.clone().unwrap_or_default()))
        .or_else(|| {
            (phase == Some(CsvPhase::Failed)).then(|| (status.and_then(|s| s.reason), message.clone()))
        });
    let cause = match (phase, failed) {
        (Some(CsvPhase::Succeeded), _) => return Verdict::Nothing,
        (_, Some((reason, message))) => Cause::Failed {
            reason: reason
                .map(|r| format!("{r:?}"))
                .unwrap_or_else(|| "no reason".to_owned()),
            message,
        },
        (phase, None) => {
            let created = new.meta().creation_timestamp.as_ref().map_or(read.now, |t| t.0);
            let elapsed = Duration::try_from(read.now.duration_since(created)).unwrap_or_default();
            if elapsed < read.policy.deadline {
                return Verdict::Wait(read.policy.deadline - elapsed);
            }
            Cause::Deadline {
                deadline: read.policy.deadline,
                phase: phase.map_or("none yet".to_owned(), |p| format!("{p:?}")),
                message,
            }
        }
    };
    Verdict::RollBack(Failure {
        failed: name,
        failed_version: new.spec.version.clone().filter(|v| !v.is_empty()),
        target: target.name_any(),
        target_version: target.spec.version.clone(),
        cause,
    })
}

/// The Subscription's new CSV while an upgrade is under way: its installed
/// or current CSV, when it exists, is not being deleted, and has no
/// revision recorded.
fn upgrading<'a>(read: &Read<'a>) -> Option<&'a ClusterServiceVersion> {
    let status = read.subscription.status.as_ref()?;
    [status.installed_csv.as_deref(), status.current_csv.as_deref()]
        .into_iter()
        .flatten()
        .filter(|name| {
            !read
                .revisions
                .iter()
                .any(|r| r.spec.cluster_service_version == *name)
        })
        .find_map(|name| read.csvs.iter().copied().find(|c| c.name_any() == name))
        .filter(|csv| csv.metadata.deletion_timestamp.is_none())
}

/// The CSV whose failed upgrade holds `subscription`, when an automatic
/// rollback put the hold there.
pub fn failed_upgrade(subscription: &Subscription) -> Option<&str> {
    subscription
        .annotations()
        .get(keys::FAILED_UPGRADE)
        .map(String::as_str)
        .filter(|name| !name.trim().is_empty())
}

/// The failure in words, as the automatic rollback kept it.
pub fn failure_cause(subscription: &Subscription) -> Option<&str> {
    subscription
        .annotations()
        .get(keys::FAILED_UPGRADE_CAUSE)
        .map(String::as_str)
}

/// How a [`Cause::Deadline`] begins in words, as annotation
/// `olm-rs.dev/failed-upgrade-cause` keeps it ([`failed_kind`] reads it back).
const DEADLINE_WORDS: &str = "its CSV was not Succeeded within";

/// Which kind of failure an automatic rollback answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailedKind {
    /// The new CSV went Failed.
    Failed,
    /// The new CSV was not Succeeded within the deadline.
    Deadline,
}

/// The kind of failure whose rollback holds `subscription`, when an
/// automatic rollback put the hold there (read from the cause in words
/// that [`request`] wrote).
pub fn failed_kind(subscription: &Subscription) -> Option<FailedKind> {
    failed_upgrade(subscription)?;
    let deadline = failure_cause(subscription).is_some_and(|cause| cause.contains(DEADLINE_WORDS));
    Some(if deadline {
        FailedKind::Deadline
    } else {
        FailedKind::Failed
    })
}

/// Whether the hold an automatic rollback put on `subscription` ends: the
/// head of its channel in its catalog (`head`, when the catalog is read) is
/// no longer the one it was when the upgrade failed (the failed CSV, when
/// that head was not known).
pub fn lifts(subscription: &Subscription, head: Option<&str>) -> bool {
    let Some(failed) = failed_upgrade(subscription) else {
        return false;
    };
    let then = subscription
        .annotations()
        .get(keys::FAILED_UPGRADE_HEAD)
        .map_or(failed, String::as_str);
    head.is_some_and(|head| head != then)
}

/// The write that asks for the rollback of `failure` on `subscription`: the
/// annotations, applied onto that very Subscription. `head` is its
/// channel's head now, when the catalog is read.
pub fn request(subscription: &Subscription, failure: &Failure, head: Option<&str>) -> Desired {
    annotations(
        subscription,
        &[
            (keys::ROLLBACK_TO, failure.target.as_str()),
            (keys::FAILED_UPGRADE, failure.failed.as_str()),
            (keys::FAILED_UPGRADE_CAUSE, &failure.describe()),
            (keys::FAILED_UPGRADE_HEAD, head.unwrap_or(&failure.failed)),
        ],
    )
}

/// The write that lifts the hold: the same apply without the annotations,
/// so that those this controller wrote go (one the user set since stays).
pub fn lift(subscription: &Subscription) -> Desired {
    annotations(subscription, &[])
}

/// The apply of `pairs` as the Subscription's annotations. catalog-operator
/// also applies the Subscription's operator label (adoption), with the same
/// field manager: the label rides along, or each apply would remove what the
/// other wrote.
fn annotations(subscription: &Subscription, pairs: &[(&str, &str)]) -> Desired {
    let mut object = DynamicObject::new(&subscription.name_any(), &ApiResource::erase::<Subscription>(&()));
    object.metadata.namespace = subscription.namespace();
    if let Some(namespace) = subscription.namespace() {
        let key = olm_api::labels::operator_label(&subscription.spec.package, &namespace);
        let value = subscription.labels().get(&key).cloned().unwrap_or_default();
        object.metadata.labels = Some([(key, value)].into());
    }
    object.metadata.annotations = Some(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    let desired = Desired::dynamic_fields(&ApiResource::erase::<Subscription>(&()), &object);
    match subscription.uid() {
        Some(uid) => desired.with_uid(&uid),
        None => desired,
    }
}

/// When the hold ends, for the messages.
pub fn hold_words(subscription: &Subscription) -> String {
    format!(
        "{} is not tried again until the catalog's channel head changes or the hold is lifted \
         (kubectl olm rollback {} --lift)",
        failed_upgrade(subscription).unwrap_or("the failed version"),
        subscription.name_any()
    )
}

/// `now` as the clock the decisions take.
pub fn timestamp(now: &Time) -> Timestamp {
    now.0
}

#[cfg(test)]
mod tests;
