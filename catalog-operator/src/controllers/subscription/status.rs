//! The status of a Subscription, computed from its group's decision, its
//! InstallPlan and the health of the catalogs it depends on (pure).
//!
//! The rules GitOps tools read (shared/research/gitops.md): conditions are always
//! present (at least CatalogSourcesUnhealthy); InstallPlanPending,
//! InstallPlanFailed and InstallPlanMissing are removed, never set False, when
//! they no longer apply (Argo CD counts any InstallPlanMissing whose reason is
//! not ReferencedInstallPlanNotFound as Degraded);
//! `state` is AtLatestKnown exactly once the chosen CSV exists, and never parked
//! at UpgradeAvailable; `installedCSV` is omitted until something is installed;
//! Ready/Reconciling/Stalled mirror Argo CD's Healthy/Progressing/Degraded.
//!
//! [`statuses`] is step 4 of a namespace sync: every Subscription's status at once.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use k8s_openapi::{api::core::v1::ObjectReference, apimachinery::pkg::apis::meta::v1::Time};
use kube::ResourceExt;
use olm_api::{
    OPERATORS_GROUP,
    v1alpha1::{
        InstallPlan, InstallPlanPhase, InstallPlanReference, Subscription, SubscriptionCatalogHealth,
        SubscriptionConditionReason as Reason, SubscriptionConditionType as Type, SubscriptionState,
        SubscriptionStatus,
    },
};
use olm_resolver::{
    model::CatalogId,
    plan::{Change, DeprecatedSubject},
};

use super::{
    inputs::NamespaceInputs,
    plans::{GroupPlans, UnpackState},
    resolve::{Decision, GroupDecision, Target},
};
use crate::{
    catalogs::{CatalogState, Health},
    controllers::conditions::{
        remove_subscription_condition, set_subscription_condition, subscription_condition_true,
    },
};

/// Everything the status of one Subscription follows from.
pub struct StatusInput<'a> {
    /// The Subscription as last read.
    pub subscription: &'a Subscription,
    /// The decision for its group.
    pub group: &'a GroupDecision,
    /// The InstallPlan of the group when it has something to install, else the
    /// one the Subscription refers to (if it still exists).
    pub install_plan: Option<&'a InstallPlan>,
    /// Whether a CSV of that name exists in the namespace.
    pub csv_exists: &'a dyn Fn(&str) -> bool,
    /// The catalogs the namespace may use.
    pub catalogs: &'a [(CatalogId, CatalogState)],
    /// UIDs of the CatalogSources, for references.
    pub catalog_uids: &'a HashMap<CatalogId, String>,
    /// Now.
    pub now: &'a Time,
}

fn install_plan_refs(ip: &InstallPlan) -> (ObjectReference, InstallPlanReference) {
    let api_version = format!("{OPERATORS_GROUP}/v1alpha1");
    (
        ObjectReference {
            api_version: Some(api_version.clone()),
            kind: Some("InstallPlan".to_owned()),
            name: Some(ip.name_any()),
            namespace: ip.namespace(),
            uid: ip.uid(),
            ..ObjectReference::default()
        },
        InstallPlanReference {
            api_version,
            kind: "InstallPlan".to_owned(),
            name: ip.name_any(),
            uuid: ip.uid().unwrap_or_default(),
        },
    )
}

/// Why the install plan failed, in words.
fn failure_message(ip: &InstallPlan) -> String {
    let status = ip.status.as_ref();
    status
        .and_then(|s| s.message.clone())
        .or_else(|| {
            status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find_map(|c| c.message.clone()))
        })
        .unwrap_or_else(|| format!("install plan {} failed", ip.name_any()))
}

/// The conditions of a Subscription's status.
type Conditions = Vec<olm_api::v1alpha1::SubscriptionCondition>;

/// The status `input.subscription` should have.
pub fn compute(input: &StatusInput<'_>) -> SubscriptionStatus {
    let sub = input.subscription;
    let name = sub.name_any();
    let old = sub.status.clone().unwrap_or_default();
    let mut status = old.clone();
    status.observed_generation = sub.metadata.generation;
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let now = input.now;

    let target = input.group.targets.get(&name);
    status.installed_csv = installed_csv(target, old.installed_csv.as_ref(), input.csv_exists);
    if let Some(target) = target {
        status.current_csv = Some(target.bundle.clone());
    }
    match &input.group.decision {
        Decision::Unsatisfiable(explanation) => set_unsatisfiable(&mut conditions, explanation, now),
        Decision::UpToDate => set_up_to_date(&mut status, &mut conditions, input, target),
        Decision::Install(_) => set_installing(&mut status, &mut conditions, input),
    }
    set_held_back(&mut conditions, input, target);
    set_install_plan_missing(&mut conditions, &status, input);
    let (health, unhealthy) = catalog_health(input, &old);
    status.catalog_health = Some(health);
    set_catalogs_unhealthy(&mut conditions, &unhealthy, now);
    set_deprecations(&mut conditions, input, &name, now);
    set_kstatus(&mut conditions, status.state, now);
    status.conditions = Some(conditions);

    let mut without_time = status.clone();
    without_time.last_updated = old.last_updated.clone();
    if without_time != old {
        status.last_updated = Some(now.clone());
    }
    status
}

/// The CSV to report as installed: the chosen one once it exists, else the one
/// it upgrades from, else what was reported before; never a CSV that does not exist.
fn installed_csv(
    target: Option<&Target>,
    before: Option<&String>,
    csv_exists: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let exists = |csv: &String| csv_exists(csv);
    match target {
        // Once the chosen CSV exists it is the installed one, whatever it replaced.
        Some(target) if exists(&target.bundle) => Some(target.bundle.clone()),
        Some(target) => match &target.change {
            Change::Stay => Some(target.bundle.clone()),
            Change::Upgrade { from } => Some(from.clone()),
            Change::Install => None,
        },
        None => before.cloned(),
    }
    .filter(exists)
}

/// The group cannot be resolved: ResolutionFailed says why; no plan is pending or failed.
fn set_unsatisfiable(conditions: &mut Conditions, explanation: &str, now: &Time) {
    set_subscription_condition(
        conditions,
        Type::ResolutionFailed,
        true,
        Reason::ConstraintsNotSatisfiable,
        explanation,
        now,
    );
    remove_subscription_condition(conditions, Type::InstallPlanPending);
    remove_subscription_condition(conditions, Type::InstallPlanFailed);
}

/// The chosen CSV exists: AtLatestKnown, unless the plan that installs it is
/// still applying the rest of its bundle.
fn set_up_to_date(
    status: &mut SubscriptionStatus,
    conditions: &mut Conditions,
    input: &StatusInput<'_>,
    target: Option<&Target>,
) {
    remove_subscription_condition(conditions, Type::ResolutionFailed);
    remove_subscription_condition(conditions, Type::InstallPlanFailed);
    // The CSV exists, but the plan that installs it may still be applying
    // the rest of its bundle: the install is done only when the plan is.
    let installing = input.install_plan.filter(|ip| {
        let phase = ip.status.as_ref().map(|s| s.phase);
        matches!(
            phase,
            Some(InstallPlanPhase::Installing | InstallPlanPhase::Planning)
        ) && target.is_some_and(|t| ip.spec.cluster_service_version_names.contains(&t.bundle))
    });
    match installing {
        Some(ip) => {
            set_subscription_condition(
                conditions,
                Type::InstallPlanPending,
                true,
                Reason::Installing,
                &format!("install plan {} is installing", ip.name_any()),
                input.now,
            );
            status.state = Some(SubscriptionState::UpgradePending);
        }
        None => {
            remove_subscription_condition(conditions, Type::InstallPlanPending);
            status.state = Some(SubscriptionState::AtLatestKnown);
        }
    }
}

/// Something is to be installed: UpgradePending, with the group's plan referred
/// to and its phase in InstallPlanPending or InstallPlanFailed.
fn set_installing(status: &mut SubscriptionStatus, conditions: &mut Conditions, input: &StatusInput<'_>) {
    remove_subscription_condition(conditions, Type::ResolutionFailed);
    status.state = Some(SubscriptionState::UpgradePending);
    let Some(ip) = input.install_plan else {
        return;
    };
    let (reference, legacy) = install_plan_refs(ip);
    status.install_plan_ref = Some(reference);
    status.install = Some(legacy);
    status.install_plan_generation = ip.spec.generation;
    let now = input.now;
    match ip.status.as_ref().map(|s| s.phase) {
        Some(InstallPlanPhase::Failed) => {
            remove_subscription_condition(conditions, Type::InstallPlanPending);
            set_subscription_condition(
                conditions,
                Type::InstallPlanFailed,
                true,
                Reason::InstallComponentFailed,
                &failure_message(ip),
                now,
            );
            status.state = Some(SubscriptionState::UpgradeFailed);
        }
        Some(InstallPlanPhase::Complete) => {
            remove_subscription_condition(conditions, Type::InstallPlanPending);
            remove_subscription_condition(conditions, Type::InstallPlanFailed);
        }
        Some(InstallPlanPhase::RequiresApproval) => {
            remove_subscription_condition(conditions, Type::InstallPlanFailed);
            set_subscription_condition(
                conditions,
                Type::InstallPlanPending,
                true,
                Reason::RequiresApproval,
                &format!(
                    "install plan {} waits for approval (set spec.approved: true)",
                    ip.name_any()
                ),
                now,
            );
        }
        Some(InstallPlanPhase::Installing | InstallPlanPhase::Planning) | None => {
            remove_subscription_condition(conditions, Type::InstallPlanFailed);
            set_subscription_condition(
                conditions,
                Type::InstallPlanPending,
                true,
                Reason::Installing,
                &format!("install plan {} is installing", ip.name_any()),
                now,
            );
        }
    }
}

/// Resolved, but not to the bundle the Subscription prefers: say what holds it back, as a
/// ResolutionFailed that is False (nothing failed; GitOps tools keep it healthy).
fn set_held_back(conditions: &mut Conditions, input: &StatusInput<'_>, target: Option<&Target>) {
    if !matches!(input.group.decision, Decision::Unsatisfiable(_))
        && let Some(why) = target.and_then(|t| t.held_back.as_deref())
    {
        set_subscription_condition(
            conditions,
            Type::ResolutionFailed,
            false,
            Reason::UpgradeHeldBack,
            why,
            input.now,
        );
    }
}

/// The plan the Subscription refers to is gone (deleted by hand, or beyond the
/// plans a namespace keeps) and no other plan stands in for it.
fn set_install_plan_missing(
    conditions: &mut Conditions,
    status: &SubscriptionStatus,
    input: &StatusInput<'_>,
) {
    match (&status.install_plan_ref, input.install_plan) {
        (Some(reference), None) => {
            set_subscription_condition(
                conditions,
                Type::InstallPlanMissing,
                true,
                Reason::ReferencedInstallPlanNotFound,
                &format!(
                    "install plan {} was not found",
                    reference.name.as_deref().unwrap_or_default()
                ),
                input.now,
            );
        }
        _ => {
            remove_subscription_condition(conditions, Type::InstallPlanMissing);
        }
    }
}

/// The health of every catalog the namespace may use (each entry's time kept
/// while its health is unchanged), and what is wrong with those the
/// Subscription's group depends on, in words.
fn catalog_health(
    input: &StatusInput<'_>,
    old: &SubscriptionStatus,
) -> (Vec<SubscriptionCatalogHealth>, Vec<String>) {
    let mut health = Vec::new();
    let mut unhealthy = Vec::new();
    for (id, state) in input.catalogs {
        let healthy = state.is_healthy();
        let previous = old.catalog_health.iter().flatten().find(|h| {
            h.catalog_source_ref.name.as_deref() == Some(&id.name)
                && h.catalog_source_ref.namespace.as_deref() == Some(&id.namespace)
        });
        health.push(SubscriptionCatalogHealth {
            catalog_source_ref: ObjectReference {
                api_version: Some(format!("{OPERATORS_GROUP}/v1alpha1")),
                kind: Some("CatalogSource".to_owned()),
                name: Some(id.name.clone()),
                namespace: Some(id.namespace.clone()),
                uid: input.catalog_uids.get(id).cloned(),
                ..ObjectReference::default()
            },
            last_updated: match previous {
                Some(p) if p.healthy == healthy => p.last_updated.clone(),
                _ => Some(input.now.clone()),
            },
            healthy,
        });
        if !healthy && input.group.catalogs.contains(id) {
            let why = match &state.health {
                Health::Unhealthy(message) => message.clone(),
                Health::Pending => "not read yet".to_owned(),
                Health::Healthy => String::new(),
            };
            unhealthy.push(format!(
                "targeted catalogsource {}/{} unhealthy: {why}",
                id.namespace, id.name
            ));
        }
    }
    for id in &input.group.catalogs {
        if !input.catalogs.iter().any(|(known, _)| known == id) && sub_names(input.subscription, id) {
            unhealthy.push(format!(
                "targeted catalogsource {}/{} missing: create it or fix spec.source and spec.sourceNamespace",
                id.namespace, id.name
            ));
        }
    }
    (health, unhealthy)
}

/// CatalogSourcesUnhealthy: True with what is wrong, or False when nothing is.
fn set_catalogs_unhealthy(conditions: &mut Conditions, unhealthy: &[String], now: &Time) {
    if unhealthy.is_empty() {
        set_subscription_condition(
            conditions,
            Type::CatalogSourcesUnhealthy,
            false,
            Reason::AllCatalogSourcesHealthy,
            "all available catalogsources are healthy",
            now,
        );
    } else {
        set_subscription_condition(
            conditions,
            Type::CatalogSourcesUnhealthy,
            true,
            Reason::UnhealthyCatalogSourceFound,
            &unhealthy.join("; "),
            now,
        );
    }
}

/// Whether the Subscription itself names catalog `id` (a missing catalog that
/// only a dependency would come from is not this Subscription's to report).
fn sub_names(sub: &Subscription, id: &CatalogId) -> bool {
    sub.spec.catalog_source == id.name && sub.spec.catalog_source_namespace == id.namespace
}

/// PackageDeprecated, ChannelDeprecated, BundleDeprecated and Deprecated, from the
/// deprecations of the package, channel and bundle this Subscription gets.
fn set_deprecations(
    conditions: &mut Vec<olm_api::v1alpha1::SubscriptionCondition>,
    input: &StatusInput<'_>,
    name: &str,
    now: &Time,
) {
    let sub = input.subscription;
    let target = input.group.targets.get(name);
    let mut any = Vec::new();
    let mut one = |type_: Type, message: Option<String>, any: &mut Vec<String>| match message {
        Some(message) => {
            set_subscription_condition(conditions, type_, true, Reason::Deprecated, &message, now);
            any.push(message);
        }
        None => {
            remove_subscription_condition(conditions, type_);
        }
    };
    let find = |wanted: &dyn Fn(&DeprecatedSubject) -> bool| {
        input
            .group
            .deprecations
            .iter()
            .find(|d| wanted(&d.subject))
            .map(ToString::to_string)
    };
    let package = &sub.spec.package;
    one(
        Type::PackageDeprecated,
        find(&|s| matches!(s, DeprecatedSubject::Package(p) if p == package)),
        &mut any,
    );
    let channel = sub.spec.channel.clone().unwrap_or_default();
    one(
        Type::ChannelDeprecated,
        find(
            &|s| matches!(s, DeprecatedSubject::Channel { package: p, channel: c } if p == package && (channel.is_empty() || *c == channel)),
        ),
        &mut any,
    );
    one(
        Type::BundleDeprecated,
        target.and_then(|t| find(&|s| matches!(s, DeprecatedSubject::Bundle(b) if *b == t.bundle))),
        &mut any,
    );
    if any.is_empty() {
        remove_subscription_condition(conditions, Type::Deprecated);
    } else {
        set_subscription_condition(
            conditions,
            Type::Deprecated,
            true,
            Reason::Deprecated,
            &any.join("; "),
            now,
        );
    }
}

/// The status one Subscription should have.
pub struct StatusUpdate {
    /// The Subscription as read.
    pub subscription: Arc<Subscription>,
    /// Its status.
    pub status: SubscriptionStatus,
    /// Whether that differs from the status it has.
    pub changed: bool,
}

/// The statuses of a namespace's Subscriptions.
pub struct Statuses {
    /// One per Subscription of a group, in the groups' order.
    pub updates: Vec<StatusUpdate>,
    /// The InstallPlans that a status refers to (never collected as garbage).
    pub referenced: HashSet<String>,
}

/// Step 4 of a sync (pure): the status of every Subscription of every group,
/// from its group's decision and plan (`written.by_group`, in the decisions'
/// order), or else from the plan the Subscription already refers to.
pub fn statuses(
    inputs: &NamespaceInputs,
    decisions: &[GroupDecision],
    written: &GroupPlans,
    now: &Time,
) -> Statuses {
    let csv_exists = |name: &str| inputs.csvs.iter().any(|c| c.name_any() == name);
    let mut referenced: HashSet<String> = HashSet::new();
    let mut updates = Vec::new();
    for (i, group) in decisions.iter().enumerate() {
        let plan = written.by_group.get(i).cloned().flatten();
        if let Some(plan) = &plan {
            referenced.insert(plan.name_any());
        }
        for name in &group.subscriptions {
            let Some(subscription) = inputs.subscriptions.iter().find(|s| &s.name_any() == name) else {
                continue;
            };
            let referenced_plan = subscription
                .status
                .as_ref()
                .and_then(|s| s.install_plan_ref.as_ref()?.name.clone())
                .and_then(|name| written.all.iter().find(|p| p.name_any() == name));
            let mut status = compute(&StatusInput {
                subscription,
                group,
                install_plan: plan.as_deref().or(referenced_plan.map(|p| p.as_ref())),
                csv_exists: &csv_exists,
                catalogs: &inputs.catalogs,
                catalog_uids: &inputs.catalog_uids,
                now,
            });
            set_unpack_conditions(&mut status, written.unpack.get(i).cloned().flatten(), now);
            if let Some(reference) = status.install_plan_ref.as_ref().and_then(|r| r.name.clone()) {
                referenced.insert(reference);
            }
            updates.push(StatusUpdate {
                subscription: subscription.clone(),
                changed: subscription.status.as_ref() != Some(&status)
                    || written.marked_unpacking.contains(name),
                status,
            });
        }
    }
    Statuses { updates, referenced }
}

/// BundleUnpackFailed while a bundle image of the group's plan cannot be
/// unpacked (with the image and the cause), absent otherwise. BundleUnpacking is
/// True only while an image is unpacked (written during a pull by the unpack
/// itself, and here while an unpack Job runs): once the plan is made, it is gone.
fn set_unpack_conditions(status: &mut SubscriptionStatus, state: Option<UnpackState>, now: &Time) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    remove_subscription_condition(conditions, Type::BundleUnpacking);
    match state {
        Some(UnpackState::Unpacking(message)) => {
            set_subscription_condition(
                conditions,
                Type::BundleUnpacking,
                true,
                Reason::UnpackingInProgress,
                &message,
                now,
            );
            remove_subscription_condition(conditions, Type::BundleUnpackFailed);
        }
        Some(UnpackState::Failed(message)) => {
            set_subscription_condition(
                conditions,
                Type::BundleUnpackFailed,
                true,
                Reason::BundleUnpackFailed,
                &message,
                now,
            );
        }
        None => {
            remove_subscription_condition(conditions, Type::BundleUnpackFailed);
        }
    }
    if conditions.is_empty() {
        status.conditions = None;
    }
}

/// Ready, Reconciling and Stalled, as Argo CD would judge the Subscription.
fn set_kstatus(
    conditions: &mut Vec<olm_api::v1alpha1::SubscriptionCondition>,
    state: Option<SubscriptionState>,
    now: &Time,
) {
    let degraded = [
        Type::ResolutionFailed,
        Type::CatalogSourcesUnhealthy,
        Type::InstallPlanFailed,
    ]
    .into_iter()
    .find(|t| subscription_condition_true(conditions, *t))
    .map(|t| {
        let message = conditions
            .iter()
            .find(|c| c.type_ == t)
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        let reason = match t {
            Type::ResolutionFailed => Reason::ConstraintsNotSatisfiable,
            Type::CatalogSourcesUnhealthy => Reason::UnhealthyCatalogSourceFound,
            _ => Reason::InstallComponentFailed,
        };
        (reason, message)
    })
    .or_else(|| {
        (state == Some(SubscriptionState::UpgradeFailed))
            .then(|| (Reason::UpgradeFailed, "the install plan failed".to_owned()))
    });
    let pending = conditions
        .iter()
        .find(|c| c.type_ == Type::InstallPlanPending)
        .and_then(|c| c.reason.clone());
    match (degraded, state) {
        (Some((reason, message)), _) => {
            set_subscription_condition(conditions, Type::Ready, false, reason.clone(), &message, now);
            remove_subscription_condition(conditions, Type::Reconciling);
            set_subscription_condition(conditions, Type::Stalled, true, reason, &message, now);
        }
        (None, Some(SubscriptionState::AtLatestKnown)) => {
            set_subscription_condition(
                conditions,
                Type::Ready,
                true,
                Reason::AtLatestKnown,
                "the latest known CSV is installed",
                now,
            );
            remove_subscription_condition(conditions, Type::Reconciling);
            remove_subscription_condition(conditions, Type::Stalled);
        }
        (None, _) if pending == Some(Reason::RequiresApproval) => {
            set_subscription_condition(
                conditions,
                Type::Ready,
                false,
                Reason::RequiresApproval,
                "the install plan waits for approval",
                now,
            );
            remove_subscription_condition(conditions, Type::Reconciling);
            remove_subscription_condition(conditions, Type::Stalled);
        }
        (None, _) => {
            let message = "installing";
            set_subscription_condition(
                conditions,
                Type::Ready,
                false,
                Reason::UpgradePending,
                message,
                now,
            );
            set_subscription_condition(
                conditions,
                Type::Reconciling,
                true,
                Reason::UpgradePending,
                message,
                now,
            );
            remove_subscription_condition(conditions, Type::Stalled);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use k8s_openapi::jiff::Timestamp;
    use kube::api::ObjectMeta;
    use olm_api::v1alpha1::{
        Approval, ConditionStatus, InstallPlanSpec, InstallPlanStatus, SubscriptionSpec,
    };
    use olm_resolver::plan::Change;

    use super::*;
    use crate::controllers::plan::ResolvedStep;

    /// The installed CSV: the chosen one once it exists, else the one it upgrades from, else
    /// what was reported; never one that does not exist.
    #[test]
    fn installed_csv_is_one_that_exists() {
        let target = |change: Change| Target {
            bundle: "db.v2".into(),
            change,
            held_back: None,
        };
        let upgrade = || Change::Upgrade { from: "db.v1".into() };
        // The target, the CSV reported before, the CSVs that exist, and the answer.
        type Case = (
            Option<Target>,
            Option<&'static str>,
            &'static [&'static str],
            Option<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (Some(target(upgrade())), None, &["db.v1", "db.v2"], Some("db.v2")),
            (Some(target(upgrade())), None, &["db.v1"], Some("db.v1")),
            (Some(target(upgrade())), None, &[], None),
            (Some(target(Change::Install)), Some("db.v0"), &["db.v0"], None),
            (Some(target(Change::Stay)), None, &[], None),
            (None, Some("db.v0"), &["db.v0"], Some("db.v0")),
            (None, Some("db.v0"), &[], None),
        ];
        for (target, before, existing, want) in cases {
            let before = before.map(str::to_owned);
            let exists = |csv: &str| existing.contains(&csv);
            let got = installed_csv(target.as_ref(), before.as_ref(), &exists);
            assert_eq!(
                got.as_deref(),
                want,
                "{target:?}, before {before:?}, existing {existing:?}"
            );
        }
    }

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
}
