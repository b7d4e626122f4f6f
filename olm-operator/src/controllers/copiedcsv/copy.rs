//! What a copy is (pure): which namespaces get one, the copy of an original
//! for a namespace and its status, what stands under a copy's name in the
//! stores ([`Occupant`]), and the OLMConfig condition that says whether copies
//! are off.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube::ResourceExt;
use olm_api::{
    labels,
    v1::{DISABLED_COPIED_CSVS, OLMConfig, OlmConfigStatus},
    v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvReason},
};

use olm_runtime::effects::DESIRED_HASH;

use crate::controllers::csv::{
    build::operator_group_annotations,
    copy_hashes::{SPEC_HASH, STATUS_HASH},
    validate::{Membership, Targets},
};

/// The namespaces that get a copy of an operator installed in `own`, serving
/// `targets`: every target but its own; for all namespaces, every namespace
/// in `all` but its own, or none when copies are `disabled`.
pub fn copy_namespaces(own: &str, targets: &Targets, all: &[String], disabled: bool) -> BTreeSet<String> {
    let candidates: Vec<&String> = match targets {
        Targets::All if disabled => Vec::new(),
        Targets::All => all.iter().collect(),
        Targets::Namespaces(namespaces) => namespaces.iter().collect(),
    };
    candidates
        .into_iter()
        .filter(|namespace| namespace.as_str() != own && !namespace.is_empty())
        .cloned()
        .collect()
}

/// The copy of `csv` (with status `status`) for `namespace`, without its
/// status, with the hash of its metadata and spec stamped on it ([`SPEC_HASH`],
/// as OLM does), and the status it gets.
pub fn copy_of(
    csv: &ClusterServiceVersion,
    status: &ClusterServiceVersionStatus,
    namespace: &str,
) -> (ClusterServiceVersion, ClusterServiceVersionStatus) {
    let from = csv.namespace().unwrap_or_default();
    let mut copy_labels: BTreeMap<String, String> = csv
        .labels()
        .iter()
        .filter(|(key, _)| !key.starts_with("operators.coreos.com/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    copy_labels.insert(labels::COPIED_FROM.to_owned(), from.clone());
    let mut annotations = csv.annotations().clone();
    annotations.remove(SPEC_HASH);
    annotations.remove(DESIRED_HASH);
    // The record of earlier releases on the original: never copied.
    annotations.remove(STATUS_HASH);
    // As in OLM: a copy names no target namespaces of its own.
    annotations.remove(labels::TARGET_NAMESPACES);
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    let mut copy = ClusterServiceVersion {
        metadata: ObjectMeta {
            name: Some(csv.name_any()),
            namespace: Some(namespace.to_owned()),
            labels: Some(copy_labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: csv.spec.clone(),
        status: None,
    };
    let copy_status = ClusterServiceVersionStatus {
        phase: status.phase,
        reason: Some(CsvReason::Copied),
        message: Some(format!(
            "The operator is running in {from} but is managing this namespace"
        )),
        last_update_time: status.last_update_time.clone(),
        last_transition_time: status.last_transition_time.clone(),
        ..ClusterServiceVersionStatus::default()
    };
    let spec_hash = hash(&(&copy.metadata.labels, &copy.metadata.annotations, &copy.spec));
    copy.annotations_mut().insert(SPEC_HASH.to_owned(), spec_hash);
    (copy, copy_status)
}

/// The copy of `csv` for `namespace` as [`copy_of`] makes it, carrying the
/// annotations of the OperatorGroup of `membership` (which the CSV reconcile
/// writes on the original; the copy need not wait for them).
pub fn copy_in_group(
    csv: &ClusterServiceVersion,
    membership: &Membership,
    status: &ClusterServiceVersionStatus,
    namespace: &str,
) -> (ClusterServiceVersion, ClusterServiceVersionStatus) {
    let mut original = csv.clone();
    original
        .annotations_mut()
        .extend(operator_group_annotations(membership));
    copy_of(&original, status, namespace)
}

/// Whether the copy's status `live` already shows `wanted`: all of it but
/// `lastUpdateTime`, which moves with every message of the original while a
/// copy shows none of them.
pub fn same_status(live: &ClusterServiceVersionStatus, wanted: &ClusterServiceVersionStatus) -> bool {
    let bare = |status: &ClusterServiceVersionStatus| ClusterServiceVersionStatus {
        last_update_time: None,
        ..status.clone()
    };
    bare(live) == bare(wanted)
}

/// A stable hash (FNV-1a, 64 bits, hex) of `value`'s JSON.
fn hash<T: serde::Serialize>(value: &T) -> String {
    olm_runtime::effects::fnv1a(&serde_json::to_vec(value).unwrap_or_default())
}

/// What stands under a copy's name in some namespace: a CSV of that name in
/// the store of originals or in the store of copies.
#[derive(Clone, Debug, PartialEq)]
pub struct Occupant {
    /// Its namespace.
    pub namespace: String,
    /// Its UID, to delete exactly this object.
    pub uid: String,
    /// Its `olm.copiedFrom` label: the namespace of its original, or `None`
    /// for a CSV that is no copy.
    pub copied_from: Option<String>,
    /// Its `olm.targetNamespaces` annotation (originals only).
    pub targets: Option<String>,
    /// Its status as the store keeps it (copies: see [`super::trim`]).
    pub status: Option<ClusterServiceVersionStatus>,
    /// The hash of what was last applied to it (copies: [`DESIRED_HASH`]).
    pub desired_hash: Option<String>,
}

impl Occupant {
    /// The occupant `csv` is, when it has a namespace.
    pub fn of(csv: &ClusterServiceVersion) -> Option<Self> {
        let meta = &csv.metadata;
        Some(Occupant {
            namespace: meta.namespace.clone()?,
            uid: meta.uid.clone().unwrap_or_default(),
            copied_from: csv.labels().get(labels::COPIED_FROM).cloned(),
            targets: csv.annotations().get(labels::TARGET_NAMESPACES).cloned(),
            status: csv.status.clone(),
            desired_hash: csv.annotations().get(DESIRED_HASH).cloned(),
        })
    }
}

/// Whether the copy `copy` (of an original in namespace `from`) is dangling:
/// its original (found among `same_name`) is gone, or no longer serves the
/// copy's namespace. An original that lists no target namespaces serves all.
pub fn dangling(copy: &Occupant, from: &str, same_name: &[Occupant]) -> bool {
    let original = same_name
        .iter()
        .find(|o| o.namespace == from && o.copied_from.is_none());
    match original {
        None => true,
        Some(original) => original.targets.as_deref().is_some_and(|targets| {
            !targets.is_empty() && !targets.split(',').any(|t| t.trim() == copy.namespace)
        }),
    }
}

/// The status the OLMConfig should get so that its [`DISABLED_COPIED_CSVS`]
/// condition says whether copies are off, or `None` when it already does.
pub fn config_status(config: &OLMConfig, disabled: bool, now: &Time) -> Option<OlmConfigStatus> {
    let (status, reason, message) = if disabled {
        (
            "True",
            "CopiedCSVsDisabled",
            "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode",
        )
    } else {
        (
            "False",
            "CopiedCSVsEnabled",
            "Copied CSVs are enabled and present across the cluster",
        )
    };
    let generation = config.metadata.generation;
    let mut conditions = config
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let current = conditions.iter().find(|c| c.type_ == DISABLED_COPIED_CSVS);
    if current
        .is_some_and(|c| c.status == status && c.reason == reason && c.observed_generation == generation)
    {
        return None;
    }
    let last_transition_time = match current {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => now.clone(),
    };
    conditions.retain(|c| c.type_ != DISABLED_COPIED_CSVS);
    conditions.push(Condition {
        type_: DISABLED_COPIED_CSVS.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: generation,
        last_transition_time,
    });
    Some(OlmConfigStatus {
        conditions: Some(conditions),
    })
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::CsvPhase;

    use super::*;

    fn original() -> ClusterServiceVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcd.v1", "namespace": "ops", "uid": "u", "finalizers": ["f"],
                         "labels": {"operators.coreos.com/etcd.ops": "", "team": "db"},
                         "annotations": {"olm.targetNamespaces": "", "olm-rs.dev/copied-status-hash": "h"}},
            "spec": {"displayName": "etcd", "install": {"strategy": "deployment", "spec": {"deployments": []}}},
        }))
        .expect("a CSV")
    }

    #[test]
    fn chosen_namespaces_but_the_operators_own_get_copies_and_all_unless_disabled() {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let targets = Targets::Namespaces(names(&["a", "b", "ops"]));
        assert_eq!(copy_namespaces("ops", &targets, &[], false).len(), 2);
        assert_eq!(
            copy_namespaces("ops", &targets, &[], true).len(),
            2,
            "only all-namespace operators"
        );
        let all = names(&["a", "b", "c", "ops"]);
        assert_eq!(copy_namespaces("ops", &Targets::All, &all, false).len(), 3);
        assert!(copy_namespaces("ops", &Targets::All, &all, true).is_empty());
    }

    #[test]
    fn a_copy_is_labelled_keeps_the_spec_and_follows_the_phase() {
        let csv = original();
        let status = ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Succeeded),
            reason: Some(CsvReason::InstallSuccessful),
            message: Some("install strategy completed with no errors".to_owned()),
            ..Default::default()
        };
        let (copy, copy_status) = copy_of(&csv, &status, "a");
        assert_eq!(
            (copy.namespace().as_deref(), copy.name_any().as_str()),
            (Some("a"), "etcd.v1")
        );
        assert_eq!(
            copy.labels().get(labels::COPIED_FROM).map(String::as_str),
            Some("ops")
        );
        assert_eq!(copy.labels().get("team").map(String::as_str), Some("db"));
        assert!(!copy.labels().contains_key("operators.coreos.com/etcd.ops"));
        assert!(copy.metadata.uid.is_none() && copy.metadata.finalizers.is_none());
        assert_eq!(copy.spec, csv.spec);
        assert!(copy.annotations().contains_key(SPEC_HASH));
        assert!(
            !copy.annotations().contains_key(STATUS_HASH),
            "no record is copied"
        );
        assert!(!copy.annotations().contains_key(labels::TARGET_NAMESPACES));
        assert_eq!(copy_status.phase, Some(CsvPhase::Succeeded));
        assert_eq!(copy_status.reason, Some(CsvReason::Copied));
        assert_eq!(
            copy_status.message.as_deref(),
            Some("The operator is running in ops but is managing this namespace")
        );
    }

    #[test]
    fn the_olmconfig_condition_says_whether_copies_are_off() {
        let now = Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).expect("a time"));
        let mut config = OLMConfig::new(olm_api::v1::OLM_CONFIG_NAME, Default::default());
        config.metadata.generation = Some(2);
        let status = config_status(&config, true, &now).expect("a condition to write");
        let condition = &status.conditions.as_ref().expect("conditions")[0];
        assert_eq!(
            (
                condition.type_.as_str(),
                condition.status.as_str(),
                condition.reason.as_str()
            ),
            (DISABLED_COPIED_CSVS, "True", "CopiedCSVsDisabled")
        );
        assert_eq!(condition.observed_generation, Some(2));
        config.status = Some(status);
        assert!(
            config_status(&config, true, &now).is_none(),
            "nothing to write twice"
        );
        let enabled = config_status(&config, false, &now).expect("the condition flips");
        assert_eq!(enabled.conditions.expect("conditions")[0].status, "False");
    }
}
