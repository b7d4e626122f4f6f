//! What the copies of an original should be, and the writes that bring the
//! copies there ([`plan`]): pure functions of the original, its status and the
//! CSVs of its name.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use olm_api::{
    labels,
    v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvReason},
};

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
/// status, with the hash of its metadata and spec stamped on it, and the status
/// it gets.
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
    // The original's record of its copies: it changes with every fan-out.
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

/// The copy of `csv` (with status `status`, in the OperatorGroup of
/// `membership`) and its status, as [`copy_of`] makes them for the original's
/// namespace. The copy carries the group's annotations as this reconcile wrote
/// them on the original (`update_status::annotate`), which the cached `csv` may
/// not show yet: copies first written before would be written a second time.
pub fn prototype(
    csv: &ClusterServiceVersion,
    membership: &Membership,
    status: &ClusterServiceVersionStatus,
) -> (ClusterServiceVersion, ClusterServiceVersionStatus) {
    let mut original = csv.clone();
    original
        .annotations_mut()
        .extend(operator_group_annotations(membership));
    copy_of(&original, status, &original.namespace().unwrap_or_default())
}

/// The hash of a copy's status `status` that [`STATUS_HASH`] records: all of
/// it but `lastUpdateTime`, which moves with every message of the original
/// while a copy shows none of them (it is written with the copy, not compared).
pub fn status_hash(status: &ClusterServiceVersionStatus) -> String {
    hash(&ClusterServiceVersionStatus {
        last_update_time: None,
        ..status.clone()
    })
}

/// A stable hash (FNV-1a, 64 bits, hex) of `value`'s JSON.
fn hash<T: serde::Serialize>(value: &T) -> String {
    olm_runtime::effects::fnv1a(&serde_json::to_vec(value).unwrap_or_default())
}

/// What stands under a copy's name in some namespace: one entry of the
/// metadata-only list of every CSV with that name.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// Its [`SPEC_HASH`], when it is a copy.
    pub spec_hash: Option<String>,
    /// Whether its status was ever written: its managed fields name a writer
    /// of the status subresource.
    pub has_status: bool,
}

impl Occupant {
    pub(super) fn from_meta(meta: &ObjectMeta) -> Option<Self> {
        let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
        Some(Occupant {
            namespace: meta.namespace.clone()?,
            uid: meta.uid.clone().unwrap_or_default(),
            copied_from: meta
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::COPIED_FROM))
                .cloned(),
            targets: annotation(labels::TARGET_NAMESPACES),
            spec_hash: annotation(SPEC_HASH),
            has_status: wrote_status(meta),
        })
    }
}

/// Whether the managed fields of `meta` name a writer of the status subresource.
pub(super) fn wrote_status(meta: &ObjectMeta) -> bool {
    meta.managed_fields
        .iter()
        .flatten()
        .any(|entry| entry.subresource.as_deref() == Some(STATUS_SUBRESOURCE))
}

pub(super) const STATUS_SUBRESOURCE: &str = "status";

/// One write that brings the copies of an original in line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// No CSV of that name in the namespace: create the copy, with its status.
    Create(String),
    /// The copy's metadata or spec there is stale: apply them again.
    Update(String),
    /// The copy's status there is stale, or was never written: write it.
    UpdateStatus(String),
    /// The copy there serves no purpose any more (a namespace no longer
    /// served, or copies switched off): delete it (namespace, UID).
    Delete(String, String),
    /// A copy of another original of the same name stands there, and that
    /// original is gone or no longer serves the namespace: delete it
    /// (namespace, UID) and create ours.
    Replace(String, String),
    /// Every copy has the original's status now: record its hash on the
    /// original ([`STATUS_HASH`]). Always the last action.
    Record,
}

/// The copies as they should be: the hash of their metadata and spec, and
/// whether every copy was already written with the original's present status
/// (the original's [`STATUS_HASH`] says so).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted<'a> {
    /// The namespaces the original is copied to.
    pub namespaces: &'a BTreeSet<String>,
    /// The hash of a copy's metadata and spec ([`SPEC_HASH`]).
    pub spec_hash: &'a str,
    /// Whether the copies' status is that of the original already.
    pub status_recorded: bool,
}

/// Whether the copy `copy` (of an original in another namespace) is dangling:
/// its original (found among `same_name`) is gone, or no longer serves the
/// copy's namespace. An original that lists no target namespaces serves all.
fn dangling(copy: &Occupant, from: &str, same_name: &[Occupant]) -> bool {
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

/// The writes that bring the copies of the original in `own` in line with
/// `wanted`, given every CSV of its name in the cluster (`same_name`).
///
/// A CSV of that name that is no copy is never touched, and no copy goes
/// there. A copy of another original of the same name (an operator of the
/// same CSV name installed in another namespace that serves the same
/// namespace) is left to that original while it serves the namespace: the
/// first copy written keeps its place, so that two originals never take
/// turns overwriting one copy; once that original is gone or no longer serves
/// the namespace, ours replaces it.
///
/// A copy gets its metadata and spec written when its [`SPEC_HASH`] differs,
/// and its status when the original's status is not recorded as fanned out
/// yet, or when the copy has none; once the present status went out to every
/// copy, [`Action::Record`] records it. An original without copies records
/// nothing.
pub fn plan(own: &str, wanted: &Wanted<'_>, same_name: &[Occupant]) -> Vec<Action> {
    let mut actions = Vec::new();
    let mut status_written = false;
    for namespace in wanted.namespaces {
        let occupant = same_name.iter().find(|o| &o.namespace == namespace);
        match occupant {
            None => {
                actions.push(Action::Create(namespace.clone()));
                status_written = true;
            }
            Some(copy) => match copy.copied_from.as_deref() {
                None => {}
                Some(from) if from == own => {
                    if copy.spec_hash.as_deref() != Some(wanted.spec_hash) {
                        actions.push(Action::Update(namespace.clone()));
                    }
                    if !wanted.status_recorded || !copy.has_status {
                        actions.push(Action::UpdateStatus(namespace.clone()));
                        status_written = true;
                    }
                }
                Some(from) if dangling(copy, from, same_name) => {
                    actions.push(Action::Replace(namespace.clone(), copy.uid.clone()));
                    status_written = true;
                }
                // A copy of another original that still serves the namespace: left to it.
                Some(_) => {}
            },
        }
    }
    for copy in same_name {
        if copy.copied_from.as_deref() == Some(own) && !wanted.namespaces.contains(&copy.namespace) {
            actions.push(Action::Delete(copy.namespace.clone(), copy.uid.clone()));
        }
    }
    if status_written && !wanted.status_recorded {
        actions.push(Action::Record);
    }
    actions
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use olm_api::v1alpha1::CsvPhase;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn chosen_namespaces_but_the_operators_own_get_copies() {
        let targets = Targets::Namespaces(names(&["a", "b", "ops"]));
        let got = copy_namespaces("ops", &targets, &[], false);
        assert_eq!(got, names(&["a", "b"]).into_iter().collect());
        // Disabling copies affects only all-namespace operators.
        assert_eq!(copy_namespaces("ops", &targets, &[], true).len(), 2);
    }

    #[test]
    fn all_namespaces_copy_everywhere_unless_disabled() {
        let all = names(&["a", "b", "c", "ops"]);
        let got = copy_namespaces("ops", &Targets::All, &all, false);
        assert_eq!(got, names(&["a", "b", "c"]).into_iter().collect());
        assert!(copy_namespaces("ops", &Targets::All, &all, true).is_empty());
    }

    #[test]
    fn own_namespace_only_gets_no_copy() {
        let targets = Targets::Namespaces(names(&["ops"]));
        assert!(copy_namespaces("ops", &targets, &[], false).is_empty());
    }

    pub(in crate::controllers::csv::copied) fn original() -> ClusterServiceVersion {
        let mut csv = crate::controllers::csv::fixtures::csv(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: etcd.v1\n  namespace: ops\nspec:\n  displayName: etcd\n  install:\n    strategy: deployment\n    spec:\n      deployments: []\n",
        );
        csv.labels_mut()
            .insert("operators.coreos.com/etcd.ops".to_owned(), String::new());
        csv.labels_mut().insert("team".to_owned(), "db".to_owned());
        csv.metadata.namespace = Some("ops".to_owned());
        csv.metadata.finalizers = Some(vec!["f".to_owned()]);
        csv
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
        assert_eq!(copy.namespace().as_deref(), Some("a"));
        assert_eq!(copy.name_any(), "etcd.v1");
        assert_eq!(
            copy.labels().get(labels::COPIED_FROM).map(String::as_str),
            Some("ops")
        );
        assert_eq!(copy.labels().get("team").map(String::as_str), Some("db"));
        assert!(!copy.labels().contains_key("operators.coreos.com/etcd.ops"));
        assert!(copy.metadata.uid.is_none() && copy.metadata.finalizers.is_none());
        assert_eq!(copy.spec, csv.spec);
        assert!(copy.annotations().contains_key(SPEC_HASH));
        assert_eq!(copy_status.phase, Some(CsvPhase::Succeeded));
        assert_eq!(copy_status.reason, Some(CsvReason::Copied));
        assert_eq!(
            copy_status.message.as_deref(),
            Some("The operator is running in ops but is managing this namespace")
        );
    }

    #[test]
    fn hashes_change_with_the_phase_only_in_the_status() {
        let csv = original();
        let installing = ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Installing),
            ..Default::default()
        };
        let succeeded = ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Succeeded),
            ..Default::default()
        };
        let (a, a_status) = copy_of(&csv, &installing, "a");
        let (b, b_status) = copy_of(&csv, &succeeded, "a");
        assert_eq!(a.annotations().get(SPEC_HASH), b.annotations().get(SPEC_HASH));
        assert_ne!(status_hash(&a_status), status_hash(&b_status));
    }

    #[test]
    fn the_status_hash_leaves_out_only_the_last_update_time() {
        let time = |second| Time(k8s_openapi::jiff::Timestamp::from_second(second).expect("a time"));
        let installing = ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Installing),
            reason: Some(CsvReason::Waiting),
            message: Some("waiting for the deployment".to_owned()),
            last_update_time: Some(time(1_800_000_000)),
            last_transition_time: Some(time(1_800_000_000)),
            ..Default::default()
        };
        // Another message of the original, in the same phase: only lastUpdateTime reaches the copy.
        let later = ClusterServiceVersionStatus {
            message: Some("waiting for 1 of 2 replicas".to_owned()),
            last_update_time: Some(time(1_800_000_030)),
            ..installing.clone()
        };
        let csv = original();
        let (_, before) = copy_of(&csv, &installing, "a");
        let (_, after) = copy_of(&csv, &later, "a");
        assert_eq!(before.message, after.message, "a copy shows none of the messages");
        assert_ne!(before.last_update_time, after.last_update_time);
        assert_eq!(
            status_hash(&before),
            status_hash(&after),
            "no copy is written for it"
        );
        // The same phase entered again (after another) is a new status.
        let again = ClusterServiceVersionStatus {
            last_transition_time: Some(time(1_800_000_090)),
            ..installing.clone()
        };
        let (_, again) = copy_of(&csv, &again, "a");
        assert_ne!(status_hash(&before), status_hash(&again));
    }

    #[test]
    fn copies_carry_the_group_annotations_before_the_cached_original_shows_them() {
        let membership = crate::controllers::csv::fixtures::membership(Targets::All);
        let fresh = original();
        let mut annotated = original();
        annotated
            .annotations_mut()
            .extend(operator_group_annotations(&membership));
        let status = ClusterServiceVersionStatus::default();
        let (before, _) = prototype(&fresh, &membership, &status);
        let (after, _) = prototype(&annotated, &membership, &status);
        assert_eq!(
            before.annotations().get(labels::OPERATOR_GROUP),
            Some(&membership.operator_group)
        );
        assert_eq!(
            before.annotations().get(SPEC_HASH),
            after.annotations().get(SPEC_HASH),
            "the copies are not written again once the cache shows the annotations"
        );
    }

    #[test]
    fn the_record_of_the_copies_is_never_copied() {
        let mut csv = original();
        let (before, _) = copy_of(&csv, &ClusterServiceVersionStatus::default(), "a");
        csv.annotations_mut()
            .insert(STATUS_HASH.to_owned(), "0123456789abcdef".to_owned());
        let (after, _) = copy_of(&csv, &ClusterServiceVersionStatus::default(), "a");
        assert!(!after.annotations().contains_key(STATUS_HASH));
        assert_eq!(
            before.annotations().get(SPEC_HASH),
            after.annotations().get(SPEC_HASH),
            "recording a fan-out does not make the copies' metadata stale"
        );
    }

    fn occupant(namespace: &str, copied_from: Option<&str>, targets: Option<&str>) -> Occupant {
        Occupant {
            namespace: namespace.to_owned(),
            uid: format!("uid-{namespace}"),
            copied_from: copied_from.map(str::to_owned),
            targets: targets.map(str::to_owned),
            spec_hash: Some("s".to_owned()),
            has_status: true,
        }
    }

    fn set(list: &[&str]) -> BTreeSet<String> {
        names(list).into_iter().collect()
    }

    fn wanted<'a>(namespaces: &'a BTreeSet<String>, spec_hash: &'a str, status_recorded: bool) -> Wanted<'a> {
        Wanted {
            namespaces,
            spec_hash,
            status_recorded,
        }
    }

    #[test]
    fn the_plan_creates_updates_and_deletes_only_its_own_copies() {
        let same_name = vec![
            occupant("ops", None, Some("")),
            occupant("a", Some("ops"), None),
            occupant("gone", Some("ops"), None),
            occupant("mine", None, None),
        ];
        let namespaces = set(&["a", "b", "mine"]);
        // A new status: one status write per copy, then the record.
        let got = plan("ops", &wanted(&namespaces, "s", false), &same_name);
        assert_eq!(
            got,
            vec![
                Action::UpdateStatus("a".to_owned()),
                Action::Create("b".to_owned()),
                // `mine` holds a CSV that is no copy: untouched.
                Action::Delete("gone".to_owned(), "uid-gone".to_owned()),
                Action::Record,
            ]
        );
        // New metadata or spec, the status recorded: the copy's metadata and spec only.
        let got = plan("ops", &wanted(&namespaces, "s2", true), &same_name);
        assert_eq!(
            got,
            vec![
                Action::Update("a".to_owned()),
                Action::Create("b".to_owned()),
                Action::Delete("gone".to_owned(), "uid-gone".to_owned()),
            ]
        );
        // Both: the metadata and spec first.
        let a = set(&["a"]);
        assert_eq!(
            plan("ops", &wanted(&a, "s2", false), &same_name[..2]),
            vec![
                Action::Update("a".to_owned()),
                Action::UpdateStatus("a".to_owned()),
                Action::Record,
            ]
        );
        // Up to date: nothing to write.
        assert_eq!(plan("ops", &wanted(&a, "s", true), &same_name[..2]), Vec::new());
    }

    #[test]
    fn a_status_change_costs_one_status_write_per_copy_and_a_restart_none() {
        let namespaces: BTreeSet<String> = (0..1000).map(|i| format!("ns-{i}")).collect();
        let mut same_name = vec![occupant("ops", None, Some(""))];
        same_name.extend(namespaces.iter().map(|ns| occupant(ns, Some("ops"), None)));
        let changed = plan("ops", &wanted(&namespaces, "s", false), &same_name);
        assert_eq!(changed.len(), 1001);
        assert!(
            changed[..1000]
                .iter()
                .all(|action| matches!(action, Action::UpdateStatus(_))),
            "one status write per copy, nothing else: {:?}",
            &changed[..3]
        );
        assert_eq!(changed.last(), Some(&Action::Record));
        // Recorded (as after the fan-out, or after a restart): nothing to write.
        assert_eq!(
            plan("ops", &wanted(&namespaces, "s", true), &same_name),
            Vec::new()
        );
    }

    #[test]
    fn a_fan_out_cut_short_is_done_again_and_a_copy_without_status_gets_one() {
        let mut same_name = vec![
            occupant("ops", None, Some("")),
            occupant("a", Some("ops"), None),
            occupant("b", Some("ops"), None),
        ];
        // A created copy whose status write never happened (the creation was cut short).
        same_name[2].has_status = false;
        let namespaces = set(&["a", "b"]);
        // Recorded: only the copy without a status is written, and nothing recorded again.
        assert_eq!(
            plan("ops", &wanted(&namespaces, "s", true), &same_name),
            vec![Action::UpdateStatus("b".to_owned())]
        );
        // Not recorded (a fan-out cut short before its record): every copy again.
        assert_eq!(
            plan("ops", &wanted(&namespaces, "s", false), &same_name),
            vec![
                Action::UpdateStatus("a".to_owned()),
                Action::UpdateStatus("b".to_owned()),
                Action::Record,
            ]
        );
    }

    #[test]
    fn an_original_without_copies_records_nothing() {
        let same_name = vec![occupant("ops", None, Some("ops"))];
        assert_eq!(
            plan("ops", &wanted(&BTreeSet::new(), "s", false), &same_name),
            Vec::new()
        );
        // Its only namespace holds another CSV of the name: no copy, no record.
        let taken = vec![occupant("ops", None, Some("")), occupant("a", None, None)];
        assert_eq!(plan("ops", &wanted(&set(&["a"]), "s", false), &taken), Vec::new());
        // Copies switched off: the deletions, no record.
        let switched_off = vec![occupant("ops", None, Some("")), occupant("a", Some("ops"), None)];
        assert_eq!(
            plan("ops", &wanted(&BTreeSet::new(), "s", false), &switched_off),
            vec![Action::Delete("a".to_owned(), "uid-a".to_owned())]
        );
    }

    #[test]
    fn a_copy_of_another_original_stays_while_that_original_serves_the_namespace() {
        let a = set(&["a"]);
        let current = wanted(&a, "s", true);
        // `other` serves all namespaces: its copy in `a` stays, none of ours goes there.
        let serving = vec![
            occupant("other", None, Some("")),
            occupant("a", Some("other"), None),
        ];
        assert_eq!(plan("ops", &current, &serving), Vec::new());
        // `other` now serves only `b`: its copy in `a` dangles and ours replaces it.
        let moved = vec![
            occupant("other", None, Some("b,other")),
            occupant("a", Some("other"), None),
        ];
        assert_eq!(
            plan("ops", &current, &moved),
            vec![Action::Replace("a".to_owned(), "uid-a".to_owned())]
        );
        // `other` is gone.
        let orphan = vec![occupant("a", Some("other"), None)];
        assert_eq!(
            plan("ops", &current, &orphan),
            vec![Action::Replace("a".to_owned(), "uid-a".to_owned())]
        );
    }

    #[test]
    fn a_copy_names_no_target_namespaces() {
        let mut csv = original();
        csv.annotations_mut()
            .insert(labels::TARGET_NAMESPACES.to_owned(), String::new());
        let (copy, _) = copy_of(&csv, &ClusterServiceVersionStatus::default(), "a");
        assert!(!copy.annotations().contains_key(labels::TARGET_NAMESPACES));
    }
}
