//! What a rollback tells the world (pure): an Event on the Subscription when
//! it starts, is refused and is done, and the cause it is counted under in
//! `olm_rs_rollbacks_total`.
//!
//! Each is said once: it follows from the Subscription's `RolledBack`
//! condition before the decision and the stage after it, so a reconcile that
//! finds the rollback where the last one left it says nothing.

use kube::runtime::events::{Event, EventType};
use olm_api::v1alpha1::{
    ConditionStatus, Subscription, SubscriptionConditionReason as Reason, SubscriptionConditionType as Type,
};

use super::{auto, rollback::Stage};

/// Why a rollback happens, as the metric labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// A user asked for it (annotation `olm-rs.dev/rollback-to`).
    Manual,
    /// An upgrade's CSV went Failed.
    Failed,
    /// An upgrade's CSV was not Succeeded within its deadline.
    Deadline,
}

impl Cause {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Manual => "manual",
            Cause::Failed => "failed",
            Cause::Deadline => "deadline",
        }
    }

    /// The cause of `subscription`'s rollback: the automatic rollback's
    /// failure when it asked for it, else a user's request.
    pub fn of(subscription: &Subscription) -> Cause {
        match auto::failed_kind(subscription) {
            Some(auto::FailedKind::Failed) => Cause::Failed,
            Some(auto::FailedKind::Deadline) => Cause::Deadline,
            None => Cause::Manual,
        }
    }
}

/// A moment of a rollback worth an Event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    /// It began: nothing was under way before (counted in the metric).
    Started,
    /// It was refused, or refused for another reason than before.
    Refused,
    /// The revision is installed again and Succeeded.
    Done,
}

impl Moment {
    /// The Event's reason.
    pub fn reason(self) -> &'static str {
        match self {
            Moment::Started => "RollbackStarted",
            Moment::Refused => "RollbackRefused",
            Moment::Done => "RolledBack",
        }
    }
}

/// What to announce: the moment, the cause, and the words of the condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Announcement {
    /// The moment.
    pub moment: Moment,
    /// Why the rollback happens.
    pub cause: Cause,
    /// The condition's message.
    pub message: String,
}

impl Announcement {
    /// The Event to publish on the Subscription.
    pub fn event(&self) -> Event {
        Event {
            type_: match self.moment {
                Moment::Refused => EventType::Warning,
                Moment::Started | Moment::Done => EventType::Normal,
            },
            reason: self.moment.reason().to_owned(),
            note: Some(truncate(&self.message)),
            action: "Rollback".to_owned(),
            secondary: None,
        }
    }
}

/// An Event's note holds at most 1 kB.
fn truncate(message: &str) -> String {
    const MAX: usize = 1024;
    if message.len() <= MAX {
        return message.to_owned();
    }
    let mut end = MAX - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

/// The RolledBack condition's status and reason on `subscription`.
fn rolled_back(subscription: &Subscription) -> Option<(ConditionStatus, Reason)> {
    let condition = subscription
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == Type::RolledBack)?;
    Some((condition.status, condition.reason.clone()?))
}

/// What the decision that took `before` (the Subscription as read) to
/// `stage`, with condition message `message`, announces, if anything.
pub fn announce(before: &Subscription, stage: &Stage, message: &str) -> Option<Announcement> {
    let was = rolled_back(before);
    let moment = match stage {
        Stage::Refused(refusal) => {
            let again = was
                .as_ref()
                .is_some_and(|(_, reason)| *reason == refusal.reason());
            (!again).then_some(Moment::Refused)?
        }
        Stage::Removing { .. } | Stage::Installing | Stage::Waiting { .. } => {
            let under_way = was
                .as_ref()
                .is_some_and(|(_, reason)| *reason == Reason::RollingBack);
            (!under_way).then_some(Moment::Started)?
        }
        Stage::Done => {
            let done = was
                .as_ref()
                .is_some_and(|(status, _)| *status == ConditionStatus::True);
            (!done).then_some(Moment::Done)?
        }
    };
    Some(Announcement {
        moment,
        cause: Cause::of(before),
        message: message.to_owned(),
    })
}

#[cfg(test)]
mod tests;
