//! Table tests of the automatic rollback: the policy from the Subscription
//! and OLMConfig, the verdict from the CSVs, the revisions and the clock,
//! and when the hold ends.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use olm_api::{
    model::OperatorRevision,
    v1::OLMConfig,
    v1alpha1::{ClusterServiceVersion, Subscription},
};
use serde_json::json;

use super::*;
use crate::controllers::revision::decide::tests::fixtures::{csv, revision, subscription};

/// 2026-01-01T00:00:00Z, when the fixtures' CSVs are created.
const CREATED: i64 = 1_767_225_600;

fn at(seconds_after_creation: i64) -> Timestamp {
    Timestamp::from_second(CREATED + seconds_after_creation).unwrap()
}

/// Subscription db upgrading from db.v1 to db.v2 (installed and current),
/// with `annotations`.
fn upgrading(annotations: serde_json::Value) -> Subscription {
    let mut sub = subscription(None);
    sub.metadata.annotations = serde_json::from_value(annotations).unwrap();
    let status = sub.status.as_mut().unwrap();
    status.current_csv = Some("db.v2".into());
    status.state = None;
    sub
}

fn opted_in() -> Subscription {
    upgrading(json!({"olm-rs.dev/auto-rollback": "true", "olm-rs.dev/auto-rollback-deadline": "5m"}))
}

fn config(features: serde_json::Value) -> OLMConfig {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
        "metadata": {"name": "cluster"}, "spec": {"features": features}}))
    .unwrap()
}

/// The new CSV db.v2 (version 2.0.0) in `phase`, created at [`CREATED`].
fn new_csv(phase: &str, reason: Option<&str>) -> ClusterServiceVersion {
    let mut csv = csv("db.v2", phase);
    csv.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(0)));
    let status = csv.status.as_mut().unwrap();
    status.reason = reason.map(|r| serde_json::from_value(json!(r)).unwrap());
    status.message = Some("deployment db is not available".into());
    csv
}

fn revision_v1() -> OperatorRevision {
    let mut r = revision("db.v1", 1, "u1");
    r.spec.version = Some("1.0.0".into());
    r
}

#[test]
fn the_policy_comes_from_the_subscription_then_olmconfig_then_the_default() {
    let on = config(json!({"autoRollback": true, "autoRollbackDeadline": "2m"}));
    /// Name, Subscription, OLMConfig; enabled, deadline (s), unreadable.
    type Case<'a> = (&'a str, Subscription, Option<&'a OLMConfig>, bool, u64, bool);
    let cases: [Case; 7] = [
        (
            "nothing set: off, 10 minutes",
            upgrading(json!({})),
            None,
            false,
            600,
            false,
        ),
        (
            "OLMConfig turns it on",
            upgrading(json!({})),
            Some(&on),
            true,
            120,
            false,
        ),
        (
            "the Subscription opts out of OLMConfig's default",
            upgrading(json!({"olm-rs.dev/auto-rollback": "false"})),
            Some(&on),
            false,
            120,
            false,
        ),
        ("the Subscription opts in", opted_in(), None, true, 300, false),
        (
            "its deadline beats OLMConfig's",
            opted_in(),
            Some(&on),
            true,
            300,
            false,
        ),
        (
            "an annotation that is neither true nor false counts as unset",
            upgrading(json!({"olm-rs.dev/auto-rollback": "yes"})),
            None,
            false,
            600,
            false,
        ),
        (
            "an unreadable deadline: the default, and said",
            upgrading(
                json!({"olm-rs.dev/auto-rollback": "true", "olm-rs.dev/auto-rollback-deadline": "soon"}),
            ),
            None,
            true,
            600,
            true,
        ),
    ];
    for (case, sub, config, enabled, deadline, unreadable) in cases {
        let policy = policy(&sub, config);
        assert_eq!(policy.enabled, enabled, "{case}");
        assert_eq!(policy.deadline, Duration::from_secs(deadline), "{case}");
        assert_eq!(policy.unreadable.is_some(), unreadable, "{case}: {policy:?}");
    }
}

/// What a verdict case expects.
#[derive(Debug, PartialEq)]
enum Expect {
    Nothing,
    Wait(u64),
    Failed(&'static str),
    Deadline,
}

#[test]
fn an_upgrade_counts_as_failed_when_its_csv_fails_or_misses_the_deadline() {
    let v1 = revision_v1();
    let v2 = revision("db.v2", 2, "u2");
    let off = upgrading(json!({}));
    type Case<'a> = (
        &'a str,
        &'a Subscription,
        Vec<ClusterServiceVersion>,
        Vec<&'a OperatorRevision>,
        i64,
        Expect,
    );
    let on = opted_in();
    let cases: Vec<Case> = vec![
        (
            "not opted in: a Failed CSV stays Failed, as in OLM",
            &off,
            vec![new_csv("Failed", Some("InstallCheckFailed"))],
            vec![&v1],
            1000,
            Expect::Nothing,
        ),
        (
            "the new CSV went Failed",
            &on,
            vec![new_csv("Failed", Some("InstallCheckFailed"))],
            vec![&v1],
            10,
            Expect::Failed("InstallCheckFailed"),
        ),
        (
            "installing again after it went Failed: its history says it failed",
            &on,
            vec![{
                let mut csv = new_csv("Installing", None);
                csv.status.as_mut().unwrap().conditions = serde_json::from_value(json!([
                    {"phase": "Installing", "reason": "InstallWaiting"},
                    {"phase": "Failed", "reason": "InstallCheckFailed", "message": "too slow"},
                    {"phase": "Pending", "reason": "RequirementsUnknown"},
                    {"phase": "Installing", "reason": "InstallWaiting"},
                ]))
                .unwrap();
                csv
            }],
            vec![&v1],
            20,
            Expect::Failed("InstallCheckFailed"),
        ),
        (
            "installing within the deadline: look again when it passes",
            &on,
            vec![new_csv("Installing", None)],
            vec![&v1],
            60,
            Expect::Wait(240),
        ),
        (
            "installing at the deadline",
            &on,
            vec![new_csv("Installing", None)],
            vec![&v1],
            300,
            Expect::Deadline,
        ),
        (
            "Succeeded: the upgrade is done",
            &on,
            vec![new_csv("Succeeded", None)],
            vec![&v1],
            1000,
            Expect::Nothing,
        ),
        (
            "the new CSV is recorded already: no upgrade under way",
            &on,
            vec![new_csv("Failed", Some("ComponentUnhealthy"))],
            vec![&v1, &v2],
            1000,
            Expect::Nothing,
        ),
        (
            "a first install that fails has nothing to go back to",
            &on,
            vec![new_csv("Failed", Some("InstallCheckFailed"))],
            vec![],
            1000,
            Expect::Nothing,
        ),
        (
            "the new CSV is not there (yet)",
            &on,
            vec![],
            vec![&v1],
            1000,
            Expect::Nothing,
        ),
    ];
    for (case, sub, csvs, revisions, now, expect) in cases {
        let policy = policy(sub, None);
        let csvs: Vec<&ClusterServiceVersion> = csvs.iter().collect();
        let verdict = verdict(&Read {
            subscription: sub,
            policy: &policy,
            csvs: &csvs,
            revisions: &revisions,
            now: at(now),
        });
        let got = match &verdict {
            Verdict::Nothing => Expect::Nothing,
            Verdict::Wait(left) => Expect::Wait(left.as_secs()),
            Verdict::RollBack(Failure {
                cause: Cause::Failed { .. },
                ..
            }) => Expect::Failed(match &verdict {
                Verdict::RollBack(f) if f.describe().contains("InstallCheckFailed") => "InstallCheckFailed",
                _ => "other",
            }),
            Verdict::RollBack(Failure {
                cause: Cause::Deadline { .. },
                ..
            }) => Expect::Deadline,
        };
        assert_eq!(got, expect, "{case}: {verdict:?}");
        if let Verdict::RollBack(failure) = verdict {
            assert_eq!(failure.failed, "db.v2", "{case}");
            assert_eq!(failure.target, "db.v1", "{case}");
        }
    }
}

#[test]
fn the_failure_names_both_versions_and_the_cause() {
    let on = opted_in();
    let policy = policy(&on, None);
    let csvs = [new_csv("Installing", None)];
    let csvs: Vec<&ClusterServiceVersion> = csvs.iter().collect();
    let v1 = revision_v1();
    let Verdict::RollBack(failure) = verdict(&Read {
        subscription: &on,
        policy: &policy,
        csvs: &csvs,
        revisions: &[&v1],
        now: at(301),
    }) else {
        panic!("a rollback past the deadline");
    };
    assert_eq!(
        failure.describe(),
        "the upgrade from db.v1 (version 1.0.0) to db.v2 (version 2.0.0) failed: its CSV was not \
         Succeeded within 300s (phase Installing): deployment db is not available"
    );
}

#[test]
fn the_rollback_is_asked_for_with_the_annotations_a_manual_one_reads() {
    let on = opted_in();
    let failure = Failure {
        failed: "db.v2".into(),
        failed_version: Some("2.0.0".into()),
        target: "db.v1".into(),
        target_version: Some("1.0.0".into()),
        cause: Cause::Failed {
            reason: "InstallCheckFailed".into(),
            message: "too slow".into(),
        },
    };
    let desired = request(&on, &failure, Some("db.v2"));
    assert_eq!(desired.uid(), Some("uid-sub"), "onto that very Subscription");
    assert_eq!(desired.namespace(), Some("team"));
    let annotations = desired.object.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["olm-rs.dev/rollback-to"], "db.v1");
    assert_eq!(annotations["olm-rs.dev/failed-upgrade"], "db.v2");
    assert_eq!(annotations["olm-rs.dev/failed-upgrade-head"], "db.v2");
    assert!(annotations["olm-rs.dev/failed-upgrade-cause"].contains("InstallCheckFailed"));
    // The held Subscription then reads as a manual request for db.v1.
    let mut held = on.clone();
    held.metadata.annotations = Some(annotations);
    assert_eq!(
        crate::controllers::revision::rollback::requested(&held),
        Some(crate::controllers::revision::rollback::Request::Name(
            "db.v1".into()
        ))
    );
    assert!(lift(&on).object.metadata.annotations.unwrap().is_empty());
    // The operator label, applied by the same field manager, rides along.
    for desired in [request(&on, &failure, None), lift(&on)] {
        assert_eq!(
            desired.object.metadata.labels.unwrap()["operators.coreos.com/db.team"],
            ""
        );
    }
}

#[test]
fn the_hold_ends_when_the_channel_head_changes() {
    let held = |head: Option<&str>| {
        let mut a = json!({"olm-rs.dev/rollback-to": "db.v1", "olm-rs.dev/failed-upgrade": "db.v2"});
        if let Some(head) = head {
            a["olm-rs.dev/failed-upgrade-head"] = head.into();
        }
        upgrading(a)
    };
    let cases: [(&str, Subscription, Option<&str>, bool); 6] = [
        (
            "the head is still the failed CSV",
            held(None),
            Some("db.v2"),
            false,
        ),
        ("a new head", held(None), Some("db.v3"), true),
        ("the catalog is not read: held", held(None), None, false),
        ("the head then is kept", held(Some("db.v3")), Some("db.v3"), false),
        (
            "a head after the one then",
            held(Some("db.v3")),
            Some("db.v4"),
            true,
        ),
        (
            "a manual hold never ends by itself",
            upgrading(json!({"olm-rs.dev/rollback-to": "db.v1"})),
            Some("db.v9"),
            false,
        ),
    ];
    for (case, sub, head, expect) in cases {
        assert_eq!(lifts(&sub, head), expect, "{case}");
    }
}
