//! The state, installed CSV and resolution and plan conditions that each kind of
//! group decision gives a Subscription.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use olm_api::v1alpha1::{
    InstallPlanPhase, SubscriptionConditionReason as Reason, SubscriptionConditionType as Type,
    SubscriptionState, SubscriptionStatus,
};
use olm_resolver::plan::Change;

use super::{
    input::{Conditions, StatusInput},
    install_plan::{failure_message, install_plan_refs},
};
use crate::controllers::{
    conditions::{remove_subscription_condition, set_subscription_condition},
    subscription::resolve::{Decision, Target},
};

/// The CSV to report as installed: the chosen one once it exists, else the one
/// it upgrades from, else what was reported before; never a CSV that does not exist.
pub(super) fn installed_csv(
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
pub(super) fn set_unsatisfiable(conditions: &mut Conditions, explanation: &str, now: &Time) {
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
pub(super) fn set_up_to_date(
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
pub(super) fn set_installing(
    status: &mut SubscriptionStatus,
    conditions: &mut Conditions,
    input: &StatusInput<'_>,
) {
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
pub(super) fn set_held_back(conditions: &mut Conditions, input: &StatusInput<'_>, target: Option<&Target>) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
