//! The status of Subscriptions as a whole: one namespace's statuses, and one
//! Subscription's through every decision, plan phase and catalog health.

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
};

use k8s_openapi::{api::core::v1::ObjectReference, apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::api::ObjectMeta;
use olm_api::v1alpha1::{
    Approval, ConditionStatus, InstallPlan, InstallPlanPhase, InstallPlanSpec, InstallPlanStatus,
    Subscription, SubscriptionConditionReason as Reason, SubscriptionConditionType as Type, SubscriptionSpec,
    SubscriptionState, SubscriptionStatus,
};
use olm_resolver::{model::CatalogId, plan::Change};

use super::*;
use crate::{
    catalogs::{CatalogState, Health},
    controllers::{
        plan::ResolvedStep,
        subscription::{
            inputs::NamespaceInputs,
            plans::GroupPlans,
            resolve::{Decision, GroupDecision, Target},
        },
    },
};

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn sub() -> Subscription {
    Subscription {
        metadata: ObjectMeta {
            name: Some("db".into()),
            namespace: Some("team".into()),
            generation: Some(2),
            ..ObjectMeta::default()
        },
        spec: SubscriptionSpec {
            catalog_source: "demo".into(),
            catalog_source_namespace: "team".into(),
            package: "demo-db".into(),
            channel: Some("stable".into()),
            starting_csv: None,
            install_plan_approval: Some(Approval::Manual),
            config: None,
        },
        status: None,
    }
}

fn group(decision: Decision, change: Change) -> GroupDecision {
    GroupDecision {
        subscriptions: vec!["db".into()],
        decision,
        targets: [(
            "db".to_owned(),
            Target {
                bundle: "demo-db.v1.1.0".into(),
                change,
                held_back: None,
            },
        )]
        .into(),
        approval: Approval::Manual,
        catalogs: BTreeSet::from([CatalogId::new("demo", "team")]),
        deprecations: Vec::new(),
    }
}

fn step() -> ResolvedStep {
    ResolvedStep {
        bundle: "demo-db.v1.1.0".into(),
        package: "demo-db".into(),
        version: "1.1.0".into(),
        catalog: CatalogId::new("demo", "team"),
        channel: "stable".into(),
        replaces: None,
        reason: "subscribed".into(),
        dependency: false,
    }
}

fn plan(phase: InstallPlanPhase) -> InstallPlan {
    let mut plan = InstallPlan::new(
        "install-abcde",
        InstallPlanSpec {
            catalog_source: None,
            catalog_source_namespace: None,
            cluster_service_version_names: vec!["demo-db.v1.1.0".into()],
            approval: Approval::Manual,
            approved: false,
            generation: Some(1),
        },
    );
    plan.metadata.namespace = Some("team".into());
    plan.metadata.uid = Some("uid-1".into());
    plan.status = Some(InstallPlanStatus {
        observed_generation: None,
        phase,
        conditions: None,
        catalog_sources: Vec::new(),
        plan: Some(Vec::new()),
        bundle_lookups: None,
        attenuated_service_account_ref: None,
        start_time: None,
        message: Some("step X failed".into()),
    });
    plan
}

fn catalogs(healthy: bool) -> Vec<(CatalogId, CatalogState)> {
    vec![(
        CatalogId::new("demo", "team"),
        CatalogState {
            priority: 0,
            health: if healthy {
                Health::Healthy
            } else {
                Health::Unhealthy("connection refused".into())
            },
            content: None,
            since: at(0),
        },
    )]
}

fn compute_with(
    sub: &Subscription,
    group: &GroupDecision,
    plan: Option<&InstallPlan>,
    csv: bool,
    healthy: bool,
    now: i64,
) -> SubscriptionStatus {
    let exists = move |name: &str| csv && name == "demo-db.v1.1.0";
    let catalogs = catalogs(healthy);
    compute(&StatusInput {
        subscription: sub,
        group,
        install_plan: plan,
        csv_exists: &exists,
        catalogs: &catalogs,
        catalog_uids: &HashMap::new(),
        olm_config: None,
        now: &at(now),
    })
}

fn find(status: &SubscriptionStatus, type_: Type) -> Option<(ConditionStatus, String)> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status,
                c.reason.as_ref().map(ToString::to_string).unwrap_or_default(),
            )
        })
}

#[test]
fn a_namespace_gets_one_status_per_subscription_referring_to_its_plan() {
    let ip = Arc::new(plan(InstallPlanPhase::RequiresApproval));
    let mut inputs = NamespaceInputs {
        namespace: "team".into(),
        subscriptions: vec![Arc::new(sub())],
        csvs: Vec::new(),
        plans: vec![ip.clone()],
        catalogs: catalogs(true),
        catalog_uids: HashMap::new(),
        unpack_policy: crate::images::unpack::policy_of(None),
        olm_config: None,
        fingerprint: 0,
    };
    let decisions = [group(Decision::Install(vec![step()]), Change::Install)];
    let written = GroupPlans {
        writes: Vec::new(),
        by_group: vec![Some(ip.clone())],
        all: vec![ip],
        unpack: vec![None],
        unpack_error: None,
        marked_unpacking: Default::default(),
        requests: Vec::new(),
    };
    let first = statuses(&inputs, &decisions, &written, &at(1));
    assert_eq!(first.updates.len(), 1);
    let update = &first.updates[0];
    assert!(update.changed, "a Subscription without status gets one");
    assert_eq!(
        update
            .status
            .install_plan_ref
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some("install-abcde")
    );
    assert!(first.referenced.contains("install-abcde"));

    let mut again = sub();
    again.status = Some(update.status.clone());
    inputs.subscriptions = vec![Arc::new(again)];
    let second = statuses(&inputs, &decisions, &written, &at(2));
    assert!(!second.updates[0].changed, "nothing changed: nothing to write");
}

#[test]
fn a_manual_plan_shows_as_pending_approval() {
    let ip = plan(InstallPlanPhase::RequiresApproval);
    let status = compute_with(
        &sub(),
        &group(Decision::Install(vec![step()]), Change::Install),
        Some(&ip),
        false,
        true,
        1,
    );
    assert_eq!(status.state, Some(SubscriptionState::UpgradePending));
    assert_eq!(status.installed_csv, None, "omitted until something is installed");
    assert_eq!(status.current_csv.as_deref(), Some("demo-db.v1.1.0"));
    assert_eq!(
        status.install_plan_ref.as_ref().and_then(|r| r.name.as_deref()),
        Some("install-abcde")
    );
    assert_eq!(status.install_plan_generation, Some(1));
    assert_eq!(status.observed_generation, Some(2));
    assert_eq!(
        find(&status, Type::InstallPlanPending),
        Some((ConditionStatus::True, "RequiresApproval".into()))
    );
    assert_eq!(
        find(&status, Type::CatalogSourcesUnhealthy),
        Some((ConditionStatus::False, "AllCatalogSourcesHealthy".into()))
    );
    assert_eq!(
        find(&status, Type::Ready).map(|c| c.0),
        Some(ConditionStatus::False)
    );
    assert_eq!(
        find(&status, Type::Reconciling),
        None,
        "waiting for a person, not working"
    );
    assert_eq!(find(&status, Type::Stalled), None);
}

#[test]
fn a_failed_plan_degrades_and_a_done_install_is_healthy() {
    let ip = plan(InstallPlanPhase::Failed);
    let status = compute_with(
        &sub(),
        &group(Decision::Install(vec![step()]), Change::Install),
        Some(&ip),
        false,
        true,
        1,
    );
    assert_eq!(status.state, Some(SubscriptionState::UpgradeFailed));
    assert_eq!(
        find(&status, Type::InstallPlanFailed),
        Some((ConditionStatus::True, "InstallComponentFailed".into()))
    );
    assert_eq!(find(&status, Type::InstallPlanPending), None);
    assert_eq!(
        find(&status, Type::Stalled).map(|c| c.0),
        Some(ConditionStatus::True)
    );

    let mut after = sub();
    after.status = Some(status);
    let done = compute_with(
        &after,
        &group(Decision::UpToDate, Change::Stay),
        None,
        true,
        true,
        2,
    );
    assert_eq!(done.state, Some(SubscriptionState::AtLatestKnown));
    assert_eq!(done.installed_csv.as_deref(), Some("demo-db.v1.1.0"));
    assert_eq!(
        find(&done, Type::InstallPlanFailed),
        None,
        "removed, never set False"
    );
    assert_eq!(
        find(&done, Type::Ready),
        Some((ConditionStatus::True, "AtLatestKnown".into()))
    );
    assert_eq!(find(&done, Type::Stalled), None);
}

#[test]
fn a_deleted_plan_is_reported_missing_without_degrading() {
    let ip = plan(InstallPlanPhase::Complete);
    let installed = compute_with(
        &sub(),
        &group(Decision::Install(vec![step()]), Change::Install),
        Some(&ip),
        true,
        true,
        1,
    );
    assert_eq!(find(&installed, Type::InstallPlanMissing), None);

    // The plan is deleted; nothing is left to install.
    let mut after = sub();
    after.status = Some(installed);
    let missing = compute_with(
        &after,
        &group(Decision::UpToDate, Change::Stay),
        None,
        true,
        true,
        2,
    );
    assert_eq!(
        find(&missing, Type::InstallPlanMissing),
        Some((ConditionStatus::True, "ReferencedInstallPlanNotFound".into()))
    );
    assert_eq!(missing.state, Some(SubscriptionState::AtLatestKnown));
    assert_eq!(
        find(&missing, Type::Ready),
        Some((ConditionStatus::True, "AtLatestKnown".into())),
        "a plan cleaned up after the install is no fault"
    );

    // A new plan stands in: the condition goes away.
    let mut again = after.clone();
    again.status = Some(missing);
    let replanned = compute_with(
        &again,
        &group(Decision::Install(vec![step()]), Change::Install),
        Some(&ip),
        true,
        true,
        3,
    );
    assert_eq!(find(&replanned, Type::InstallPlanMissing), None);
}

#[test]
fn the_csv_alone_is_not_a_finished_install() {
    let ip = plan(InstallPlanPhase::Installing);
    let mut current = sub();
    current.status = Some(SubscriptionStatus {
        install_plan_ref: Some(ObjectReference {
            name: Some("install-abcde".into()),
            ..ObjectReference::default()
        }),
        ..SubscriptionStatus::default()
    });
    let status = compute_with(
        &current,
        &group(Decision::UpToDate, Change::Stay),
        Some(&ip),
        true,
        true,
        1,
    );
    assert_eq!(status.state, Some(SubscriptionState::UpgradePending));
    assert_eq!(
        find(&status, Type::InstallPlanPending),
        Some((ConditionStatus::True, "Installing".into()))
    );
    assert_eq!(
        find(&status, Type::Reconciling).map(|c| c.0),
        Some(ConditionStatus::True)
    );
}

#[test]
fn unsatisfiable_and_unhealthy_are_reported_in_words() {
    let status = compute_with(
        &sub(),
        &group(
            Decision::Unsatisfiable("demo-missing is in no catalog".into()),
            Change::Install,
        ),
        None,
        false,
        false,
        1,
    );
    let resolution = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Type::ResolutionFailed)
        .unwrap();
    assert_eq!(
        resolution.message.as_deref(),
        Some("demo-missing is in no catalog")
    );
    let unhealthy = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Type::CatalogSourcesUnhealthy)
        .unwrap();
    assert_eq!(unhealthy.status, ConditionStatus::True);
    assert!(unhealthy.message.as_deref().unwrap().contains("team/demo"));
    assert_eq!(status.catalog_health.as_ref().unwrap().len(), 1);
    assert!(!status.catalog_health.as_ref().unwrap()[0].healthy);
}

#[test]
fn a_held_back_upgrade_is_explained_without_degrading() {
    let mut held = group(Decision::UpToDate, Change::Stay);
    let why = "demo-db.v2.0.0 held back by installed operator demo-app.v0.2.0: ...";
    held.targets.get_mut("db").unwrap().held_back = Some(why.into());
    let status = compute_with(&sub(), &held, None, true, true, 1);
    let condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Type::ResolutionFailed)
        .expect("ResolutionFailed says why");
    assert_eq!(condition.status, ConditionStatus::False);
    assert_eq!(condition.reason, Some(Reason::UpgradeHeldBack));
    assert_eq!(condition.message.as_deref(), Some(why));
    assert_eq!(status.state, Some(SubscriptionState::AtLatestKnown));
    assert_eq!(
        find(&status, Type::Ready),
        Some((ConditionStatus::True, "AtLatestKnown".into())),
        "nothing failed: still healthy"
    );

    // Once nothing holds it back, the condition goes.
    let mut again = sub();
    again.status = Some(status);
    let status = compute_with(
        &again,
        &group(Decision::UpToDate, Change::Stay),
        None,
        true,
        true,
        2,
    );
    assert_eq!(find(&status, Type::ResolutionFailed), None);
}

#[test]
fn the_same_inputs_give_the_same_status() {
    let mut current = sub();
    let first = compute_with(
        &current,
        &group(Decision::UpToDate, Change::Stay),
        None,
        true,
        true,
        1,
    );
    assert_eq!(first.last_updated, Some(at(1)));
    current.status = Some(first.clone());
    let second = compute_with(
        &current,
        &group(Decision::UpToDate, Change::Stay),
        None,
        true,
        true,
        9,
    );
    assert_eq!(second, first, "nothing changed, nothing to write");
}

/// An unreadable automatic rollback deadline is a named condition, and goes
/// once it is fixed; a lifted hold leaves no RolledBack behind (table).
#[test]
fn an_unreadable_deadline_is_named_and_a_lifted_hold_leaves_no_rolled_back() {
    let group = group(Decision::UpToDate, Change::Stay);
    let cases = [
        ("unreadable, on", Some(("true", "soon")), true),
        ("a deadline of 0, on", Some(("true", "0s")), true),
        ("unreadable, off", Some(("false", "soon")), false),
        ("readable, on", Some(("true", "5m")), false),
        ("nothing set", None, false),
    ];
    for (case, annotations, named) in cases {
        let mut sub = sub();
        if let Some((on, deadline)) = annotations {
            sub.metadata.annotations = Some(
                [
                    ("olm-rs.dev/auto-rollback".to_owned(), on.to_owned()),
                    (
                        "olm-rs.dev/auto-rollback-deadline".to_owned(),
                        deadline.to_owned(),
                    ),
                ]
                .into(),
            );
        }
        // It was rolled back and held; the hold is lifted (no annotation rollback-to).
        sub.status.get_or_insert_default().conditions = Some(vec![
            serde_json::from_value(serde_json::json!({"type": "RolledBack", "status": "True",
                "reason": "RolledBack", "message": "held"}))
            .unwrap(),
        ]);
        let status = compute_with(&sub, &group, None, true, true, 10);
        let condition = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == Type::AutoRollbackInvalid);
        assert_eq!(condition.is_some(), named, "{case}: {condition:?}");
        if let Some(condition) = condition {
            assert_eq!(condition.status, ConditionStatus::True, "{case}");
            assert_eq!(
                condition.reason,
                Some(olm_api::v1alpha1::SubscriptionConditionReason::DeadlineUnreadable),
                "{case}"
            );
            let message = condition.message.clone().unwrap_or_default();
            assert!(
                message.contains("olm-rs.dev/auto-rollback-deadline"),
                "{case}: {message}"
            );
            assert!(message.contains("600s"), "{case}: {message}");
        }
        assert_eq!(find(&status, Type::RolledBack), None, "{case}");
    }
}
