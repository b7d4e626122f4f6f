//! The status of an OperatorGroup, computed from what the reconcile read (pure).
//!
//! Conditions, as OLM writes them and as GitOps tools read them
//! (shared/research/gitops.md):
//! - `MultipleOperatorGroup` (OLM): True with `MultipleOperatorGroupsFound` while
//!   the namespace holds more than one OperatorGroup, absent otherwise;
//! - `OperatorGroupServiceAccount` (OLM): True with `ServiceAccountNotFound`
//!   while `serviceAccountName` names an account that does not exist, absent
//!   otherwise;
//! - kstatus' `Ready`, `Reconciling` and `Stalled`: Ready once the group is
//!   usable, Stalled while one of the problems above, or an invalid selector,
//!   holds it back.
//!
//! `lastTransitionTime` moves only when a condition's status flips,
//! `observedGeneration` is always the group's generation, and an unchanged
//! group computes the very status it already has, so that no write follows.

use k8s_openapi::{api::core::v1::ObjectReference, apimachinery::pkg::apis::meta::v1::Time};
use olm_api::v1::{OperatorGroup, OperatorGroupStatus};
use olm_runtime::conditions::{
    ConditionReason, ConditionType, Outcome, Status, remove_condition, set_condition, set_kstatus_conditions,
};

/// The condition types of an OperatorGroup that OLM defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupCondition {
    /// The namespace holds more than one OperatorGroup.
    MultipleOperatorGroup,
    /// The service account named by `serviceAccountName` does not exist.
    ServiceAccount,
}

impl ConditionType for GroupCondition {
    fn as_str(&self) -> &'static str {
        match self {
            GroupCondition::MultipleOperatorGroup => "MultipleOperatorGroup",
            GroupCondition::ServiceAccount => "OperatorGroupServiceAccount",
        }
    }
}

impl GroupCondition {
    /// Every condition type, for tests.
    pub const ALL: [GroupCondition; 2] = [
        GroupCondition::MultipleOperatorGroup,
        GroupCondition::ServiceAccount,
    ];
}

/// Why an OperatorGroup's conditions have their status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupReason {
    /// The group selects its namespaces and nothing holds it back.
    NamespacesSelected,
    /// The namespace holds more than one OperatorGroup (OLM's reason).
    MultipleOperatorGroupsFound,
    /// The named service account does not exist (OLM's reason).
    ServiceAccountNotFound,
    /// The label selector cannot be evaluated.
    InvalidSelector,
}

impl ConditionReason for GroupReason {
    fn as_str(&self) -> &'static str {
        match self {
            GroupReason::NamespacesSelected => "NamespacesSelected",
            GroupReason::MultipleOperatorGroupsFound => "MultipleOperatorGroupsFound",
            GroupReason::ServiceAccountNotFound => "ServiceAccountNotFound",
            GroupReason::InvalidSelector => "InvalidSelector",
        }
    }
}

impl GroupReason {
    /// Every reason, for tests.
    pub const ALL: [GroupReason; 4] = [
        GroupReason::NamespacesSelected,
        GroupReason::MultipleOperatorGroupsFound,
        GroupReason::ServiceAccountNotFound,
        GroupReason::InvalidSelector,
    ];
}

/// The service account an OperatorGroup names, as found.
#[derive(Clone, Debug, PartialEq)]
pub enum Account {
    /// `serviceAccountName` is not set.
    NotNamed,
    /// The account exists; the status refers to it.
    Found(ObjectReference),
    /// The account of this name does not exist.
    Missing(String),
}

/// What the reconcile found for one OperatorGroup.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The selected namespaces (`[""]` for all), or why the selector is invalid.
    pub namespaces: Result<Vec<String>, String>,
    /// How many OperatorGroups the group's namespace holds, itself included.
    pub groups_in_namespace: usize,
    /// The named service account.
    pub account: Account,
}

/// The status `group` should have after `observed`, at `now`.
pub fn compute(group: &OperatorGroup, observed: &Observed, now: &Time) -> OperatorGroupStatus {
    let old = group.status.clone().unwrap_or_default();
    let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
    let generation = group.metadata.generation;

    // An invalid selector keeps the namespaces last selected.
    let namespaces = observed
        .namespaces
        .as_ref()
        .ok()
        .cloned()
        .or(old.namespaces.clone());
    let service_account_ref = match &observed.account {
        Account::Found(reference) => Some(reference.clone()),
        Account::NotNamed | Account::Missing(_) => None,
    };
    let last_updated = if namespaces != old.namespaces || service_account_ref != old.service_account_ref {
        Some(now.clone())
    } else {
        old.last_updated.clone()
    };

    let mut conditions = old.conditions.clone().unwrap_or_default();
    let multiple = observed.groups_in_namespace > 1;
    if multiple {
        set_condition(
            &mut conditions,
            GroupCondition::MultipleOperatorGroup,
            Status::True,
            GroupReason::MultipleOperatorGroupsFound,
            &format!(
                "namespace {namespace} holds {} OperatorGroups; its operators install only once it holds one",
                observed.groups_in_namespace
            ),
            generation,
            now,
        );
    } else {
        remove_condition(&mut conditions, GroupCondition::MultipleOperatorGroup);
    }
    let missing_account = match &observed.account {
        Account::Missing(name) => Some(format!(
            "service account {name} does not exist in namespace {namespace}; create it, or clear serviceAccountName"
        )),
        Account::NotNamed | Account::Found(_) => None,
    };
    match &missing_account {
        Some(message) => {
            set_condition(
                &mut conditions,
                GroupCondition::ServiceAccount,
                Status::True,
                GroupReason::ServiceAccountNotFound,
                message,
                generation,
                now,
            );
        }
        None => {
            remove_condition(&mut conditions, GroupCondition::ServiceAccount);
        }
    }

    let outcome = match (&observed.namespaces, &missing_account) {
        (Err(error), _) => Outcome::stalled(
            GroupReason::InvalidSelector,
            format!("the selector cannot select namespaces: {error}"),
        ),
        _ if multiple => Outcome::stalled(
            GroupReason::MultipleOperatorGroupsFound,
            format!("namespace {namespace} holds more than one OperatorGroup"),
        ),
        (_, Some(message)) => Outcome::stalled(GroupReason::ServiceAccountNotFound, message.clone()),
        (Ok(selected), None) => Outcome::done(GroupReason::NamespacesSelected, describe(selected)),
    };
    set_kstatus_conditions(&mut conditions, &outcome, generation, now);

    OperatorGroupStatus {
        observed_generation: generation,
        namespaces,
        service_account_ref,
        last_updated,
        conditions: Some(conditions),
    }
}

/// The selected namespaces in words.
fn describe(namespaces: &[String]) -> String {
    match namespaces {
        [all] if all.is_empty() => "the group selects all namespaces".to_owned(),
        [one] => format!("the group selects namespace {one}"),
        many => format!("the group selects {} namespaces", many.len()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use olm_runtime::conditions::{
        KstatusResult, KstatusType, find_condition, is_condition_true, is_valid_condition_type,
        is_valid_reason, kstatus,
    };

    use super::*;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(1_700_000_000 + second).unwrap())
    }

    fn group(generation: i64, status: Option<OperatorGroupStatus>) -> OperatorGroup {
        let mut group: OperatorGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": "operators", "namespace": "ops", "generation": generation},
            "spec": {},
        }))
        .expect("a valid OperatorGroup");
        group.status = status;
        group
    }

    fn fine(namespaces: &[&str]) -> Observed {
        Observed {
            namespaces: Ok(namespaces.iter().map(|n| (*n).to_owned()).collect()),
            groups_in_namespace: 1,
            account: Account::NotNamed,
        }
    }

    fn result(group: &OperatorGroup, status: &OperatorGroupStatus) -> KstatusResult {
        kstatus(
            false,
            group.metadata.generation,
            status.observed_generation,
            status.conditions.as_deref().unwrap_or_default(),
        )
    }

    #[test]
    fn every_type_and_reason_is_accepted_by_the_api_server() {
        for type_ in GroupCondition::ALL {
            assert!(is_valid_condition_type(type_.as_str()), "{type_:?}");
        }
        for reason in GroupReason::ALL {
            assert!(is_valid_reason(reason.as_str()), "{reason:?}");
        }
    }

    #[test]
    fn a_usable_group_is_ready_with_its_namespaces_and_generation() {
        let group = group(3, None);
        let status = compute(&group, &fine(&["a", "b"]), &at(0));
        assert_eq!(status.namespaces, Some(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.last_updated, Some(at(0)));
        let conditions = status.conditions.as_deref().unwrap();
        let ready = find_condition(conditions, KstatusType::Ready).expect("Ready");
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_str(),
                ready.observed_generation
            ),
            ("True", "NamespacesSelected", Some(3))
        );
        assert_eq!(conditions.len(), 1, "no abnormal condition: {conditions:?}");
        assert_eq!(result(&group, &status), KstatusResult::Current);
    }

    #[test]
    fn the_same_facts_again_give_the_same_status_so_nothing_is_written() {
        let first = compute(&group(1, None), &fine(&[""]), &at(0));
        let again = compute(&group(1, Some(first.clone())), &fine(&[""]), &at(90));
        assert_eq!(again, first, "a later reconcile must not change the status");
    }

    #[test]
    fn a_second_group_in_the_namespace_stalls_both_until_one_goes() {
        let mut observed = fine(&["ops"]);
        observed.groups_in_namespace = 2;
        let group = group(1, None);
        let status = compute(&group, &observed, &at(0));
        let conditions = status.conditions.clone().unwrap();
        let multiple =
            find_condition(&conditions, GroupCondition::MultipleOperatorGroup).expect("the condition");
        assert_eq!(
            (multiple.status.as_str(), multiple.reason.as_str()),
            ("True", "MultipleOperatorGroupsFound")
        );
        assert!(multiple.message.contains("ops"), "{}", multiple.message);
        assert_eq!(result(&group, &status), KstatusResult::Failed);
        assert_eq!(
            status.namespaces,
            Some(vec!["ops".to_owned()]),
            "namespaces are still kept"
        );

        // The other group goes: the condition goes, Ready flips and its time moves.
        let later = compute(&self::group(1, Some(status)), &fine(&["ops"]), &at(30));
        let conditions = later.conditions.clone().unwrap();
        assert!(find_condition(&conditions, GroupCondition::MultipleOperatorGroup).is_none());
        let ready = find_condition(&conditions, KstatusType::Ready).unwrap();
        assert_eq!(
            (ready.status.as_str(), &ready.last_transition_time),
            ("True", &at(30))
        );
        assert_eq!(later.last_updated, Some(at(0)), "the namespaces did not change");
    }

    #[test]
    fn a_missing_service_account_is_reported_until_it_exists() {
        let mut observed = fine(&["ops"]);
        observed.account = Account::Missing("installer".to_owned());
        let group = group(2, None);
        let status = compute(&group, &observed, &at(0));
        let conditions = status.conditions.clone().unwrap();
        let account = find_condition(&conditions, GroupCondition::ServiceAccount).expect("the condition");
        assert_eq!(
            (
                account.status.as_str(),
                account.reason.as_str(),
                account.observed_generation
            ),
            ("True", "ServiceAccountNotFound", Some(2))
        );
        assert!(account.message.contains("installer"));
        assert_eq!(status.service_account_ref, None);
        assert_eq!(result(&group, &status), KstatusResult::Failed);

        // Still missing a minute later: nothing moves.
        let still = compute(&self::group(2, Some(status.clone())), &observed, &at(60));
        assert_eq!(still, status);

        let reference = ObjectReference {
            name: Some("installer".to_owned()),
            namespace: Some("ops".to_owned()),
            ..ObjectReference::default()
        };
        observed.account = Account::Found(reference.clone());
        let found = compute(&self::group(2, Some(status)), &observed, &at(90));
        assert_eq!(found.service_account_ref, Some(reference));
        assert!(!is_condition_true(
            found.conditions.as_deref().unwrap(),
            GroupCondition::ServiceAccount
        ));
        assert_eq!(found.last_updated, Some(at(90)), "the reference changed");
    }

    #[test]
    fn an_invalid_selector_keeps_the_last_namespaces_and_stalls() {
        let before = compute(&group(1, None), &fine(&["a"]), &at(0));
        let observed = Observed {
            namespaces: Err("Expected values for In operator, got none".to_owned()),
            ..fine(&[])
        };
        let group = group(2, Some(before));
        let status = compute(&group, &observed, &at(10));
        assert_eq!(status.namespaces, Some(vec!["a".to_owned()]));
        assert_eq!(status.last_updated, Some(at(0)));
        let stalled =
            find_condition(status.conditions.as_deref().unwrap(), KstatusType::Stalled).expect("Stalled");
        assert_eq!(stalled.reason, "InvalidSelector");
        assert!(stalled.message.contains("In operator"));
        assert_eq!(result(&group, &status), KstatusResult::Failed);
    }

    #[test]
    fn a_new_generation_is_observed_even_when_nothing_else_changes() {
        let first = compute(&group(1, None), &fine(&[""]), &at(0));
        let next = compute(&group(2, Some(first.clone())), &fine(&[""]), &at(5));
        assert_ne!(next, first);
        assert_eq!(next.observed_generation, Some(2));
        let ready = find_condition(next.conditions.as_deref().unwrap(), KstatusType::Ready).unwrap();
        assert_eq!(
            (ready.observed_generation, &ready.last_transition_time),
            (Some(2), &at(0))
        );
    }
}
