//! Table tests of what a rollback announces: each moment once, and the cause
//! it is counted under.

use std::time::Duration;

use olm_api::v1alpha1::{CsvPhase, SubscriptionCondition};
use serde_json::json;

use super::*;
use crate::controllers::revision::{
    auto::{self, Failure},
    decide::tests::fixtures::subscription,
    rollback::Refusal,
};

/// Subscription db with RolledBack at `was` (status, reason), if any.
fn with_condition(was: Option<(ConditionStatus, Reason)>) -> Subscription {
    let mut sub = subscription(None);
    if let Some((status, reason)) = was {
        let condition: SubscriptionCondition = serde_json::from_value(json!({
            "type": "RolledBack", "status": status, "reason": reason.as_str(), "message": "before"}))
        .expect("a condition");
        sub.status.get_or_insert_default().conditions = Some(vec![condition]);
    }
    sub
}

/// The `RolledBack` condition before, as (status, reason).
type Before = Option<(ConditionStatus, Reason)>;

/// Each stage from each condition before: the moment announced, if any (table).
#[test]
fn each_moment_is_announced_once() {
    let refused = Stage::Refused(Refusal::InFlight { plan: "p".into() });
    let rolling = Some((ConditionStatus::False, Reason::RollingBack));
    let cases: Vec<(&str, Before, Stage, Option<Moment>)> = vec![
        (
            "a first removal starts it",
            None,
            Stage::Removing { csv: "db.v2".into() },
            Some(Moment::Started),
        ),
        (
            "installing straight away starts it",
            None,
            Stage::Installing,
            Some(Moment::Started),
        ),
        (
            "still under way: nothing",
            rolling.clone(),
            Stage::Installing,
            None,
        ),
        (
            "waiting, under way: nothing",
            rolling.clone(),
            Stage::Waiting {
                phase: Some(CsvPhase::Pending),
                message: None,
            },
            None,
        ),
        (
            "after a refusal, it starts",
            Some((ConditionStatus::False, Reason::UpgradeInFlight)),
            Stage::Installing,
            Some(Moment::Started),
        ),
        ("refused", None, refused.clone(), Some(Moment::Refused)),
        (
            "refused again for the same reason: nothing",
            Some((ConditionStatus::False, Reason::UpgradeInFlight)),
            refused.clone(),
            None,
        ),
        (
            "refused for another reason",
            Some((ConditionStatus::False, Reason::RevisionNotFound)),
            refused,
            Some(Moment::Refused),
        ),
        ("done", rolling, Stage::Done, Some(Moment::Done)),
        (
            "done before: nothing",
            Some((ConditionStatus::True, Reason::RolledBack)),
            Stage::Done,
            None,
        ),
    ];
    for (case, was, stage, want) in cases {
        let got = announce(&with_condition(was), &stage, "words").map(|a| a.moment);
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn the_event_says_the_moment_and_the_words() {
    let announced = announce(
        &with_condition(None),
        &Stage::Refused(Refusal::InFlight { plan: "p".into() }),
        "why",
    )
    .expect("announced");
    let event = announced.event();
    assert_eq!(event.reason, "RollbackRefused");
    assert_eq!(event.type_, EventType::Warning);
    assert_eq!(event.note.as_deref(), Some("why"));
    let long = "é".repeat(2000);
    let event = announce(&with_condition(None), &Stage::Installing, &long)
        .unwrap()
        .event();
    assert_eq!(event.reason, "RollbackStarted");
    assert!(
        event.note.unwrap().len() <= 1024,
        "an Event's note is at most 1 kB"
    );
}

/// The cause: manual, or the automatic rollback's failure read back from
/// the annotations it wrote.
#[test]
fn the_cause_is_manual_or_the_kind_of_failure() {
    assert_eq!(Cause::of(&subscription(None)), Cause::Manual);
    let causes = [
        (
            auto::Cause::Failed {
                reason: "InstallCheckFailed".into(),
                message: "m".into(),
            },
            Cause::Failed,
        ),
        (
            auto::Cause::Deadline {
                deadline: Duration::from_secs(60),
                phase: "Installing".into(),
                message: "m".into(),
            },
            Cause::Deadline,
        ),
    ];
    for (cause, want) in causes {
        let failure = Failure {
            failed: "db.v2".into(),
            failed_version: None,
            target: "db.v1".into(),
            target_version: None,
            cause,
        };
        let mut held = subscription(None);
        held.metadata.annotations = auto::request(&held, &failure, None).object.metadata.annotations;
        assert_eq!(Cause::of(&held), want);
        assert_eq!(Cause::of(&held).as_str(), format!("{want:?}").to_lowercase());
    }
}
