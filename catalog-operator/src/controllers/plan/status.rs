//! InstallPlan conditions that follow from its phase (pure): `Installed` once it
//! is done or failed, and the kstatus conditions Ready/Reconciling/Stalled.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{
    InstallPlanConditionReason as Reason, InstallPlanConditionType as Type, InstallPlanPhase,
    InstallPlanStatus,
};

use crate::controllers::conditions::{remove_install_plan_condition, set_install_plan_condition};

/// Sets Ready, Reconciling and Stalled from the phase; returns whether anything changed.
pub fn set_kstatus(status: &mut InstallPlanStatus, now: &Time) -> bool {
    let mut conditions = status.conditions.clone().unwrap_or_default();
    let message = status.message.clone().unwrap_or_default();
    let mut changed = false;
    let (ready, reason, reconciling, stalled) = match status.phase {
        InstallPlanPhase::Complete => (true, Reason::Complete, false, false),
        InstallPlanPhase::RequiresApproval => (false, Reason::RequiresApproval, false, false),
        InstallPlanPhase::Planning | InstallPlanPhase::Installing => (false, Reason::Installing, true, false),
        InstallPlanPhase::Failed => (false, Reason::ComponentFailed, false, true),
    };
    changed |= set_install_plan_condition(&mut conditions, Type::Ready, ready, reason, &message, now);
    for (type_, present) in [(Type::Reconciling, reconciling), (Type::Stalled, stalled)] {
        changed |= if present {
            set_install_plan_condition(&mut conditions, type_, true, reason, &message, now)
        } else {
            remove_install_plan_condition(&mut conditions, type_)
        };
    }
    status.conditions = Some(conditions);
    changed
}

/// Marks the plan Complete.
pub fn complete(status: &mut InstallPlanStatus, now: &Time) {
    status.phase = InstallPlanPhase::Complete;
    status.message = None;
    let mut conditions = status.conditions.clone().unwrap_or_default();
    set_install_plan_condition(&mut conditions, Type::Installed, true, Reason::Complete, "", now);
    status.conditions = Some(conditions);
    set_kstatus(status, now);
}

/// Marks the plan Failed with `message`.
pub fn fail(status: &mut InstallPlanStatus, reason: Reason, message: String, now: &Time) {
    status.phase = InstallPlanPhase::Failed;
    let mut conditions = status.conditions.clone().unwrap_or_default();
    set_install_plan_condition(&mut conditions, Type::Installed, false, reason, &message, now);
    status.conditions = Some(conditions);
    status.message = Some(message);
    set_kstatus(status, now);
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use olm_api::v1alpha1::ConditionStatus;

    use super::*;

    fn status(phase: InstallPlanPhase) -> InstallPlanStatus {
        InstallPlanStatus {
            observed_generation: Some(1),
            phase,
            conditions: None,
            catalog_sources: Vec::new(),
            plan: Some(Vec::new()),
            bundle_lookups: None,
            attenuated_service_account_ref: None,
            start_time: None,
            message: None,
        }
    }

    fn find(status: &InstallPlanStatus, type_: Type) -> Option<ConditionStatus> {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == Some(type_))
            .and_then(|c| c.status)
    }

    #[test]
    fn phases_map_to_kstatus() {
        let now = Time(Timestamp::from_second(1).unwrap());
        let mut s = status(InstallPlanPhase::Installing);
        assert!(set_kstatus(&mut s, &now));
        assert!(!set_kstatus(&mut s, &now), "nothing changed");
        assert_eq!(find(&s, Type::Reconciling), Some(ConditionStatus::True));
        complete(&mut s, &now);
        assert_eq!(find(&s, Type::Ready), Some(ConditionStatus::True));
        assert_eq!(find(&s, Type::Installed), Some(ConditionStatus::True));
        assert_eq!(find(&s, Type::Reconciling), None);
        let mut s = status(InstallPlanPhase::Installing);
        fail(&mut s, Reason::ComponentFailed, "boom".into(), &now);
        assert_eq!(s.phase, InstallPlanPhase::Failed);
        assert_eq!(find(&s, Type::Stalled), Some(ConditionStatus::True));
        assert_eq!(find(&s, Type::Installed), Some(ConditionStatus::False));
    }
}
