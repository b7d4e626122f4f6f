//! What keeping the copies of one original changes (pure): the copies to
//! create or apply, the copies' statuses to write, the copies to delete, and
//! the OLMConfig's `DisabledCopiedCSVs` condition.
//!
//! A copy follows only the phases its original *rests* in ([`resting`]): a
//! phase the CSV reconcile leaves by itself, without waiting for anything
//! outside it, is one step of an install pass and reaches no copy. Resting
//! are `Succeeded`, `Failed`, `Unknown`, `Replacing` (it lasts while the
//! replacement installs), and `Pending` with a reason that waits for
//! something (`RequirementsNotMet`, `OperatorConditionNotUpgradeable`, ...).
//! Passing are a CSV without status yet, `Pending` with `RequirementsUnknown`
//! (nothing checked yet), `InstallReady`, `Installing` (one install pass: it
//! ends in `Succeeded`, or `Failed` at the install timeout) and `Deleting`
//! (the original is about to go, and its copies with it). While the original
//! passes, no copy is created or written: the copies keep the last phase it
//! rested in, and only deletions (a namespace no longer served, copies
//! switched off) go on. So a client sees on a copy, once the original rests,
//! exactly what it saw before: the original's phase, reason `Copied`.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use olm_api::{
    labels,
    v1::{OLM_CONFIG_NAME, OLMConfig},
    v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason},
};
use olm_runtime::effects::{Desired, Effects, Removal, StatusOf};

use super::copy::{Occupant, config_status, copy_in_group, copy_namespaces, dangling, same_status};
use crate::controllers::csv::validate::{Membership, Targets};

/// What the decision reads, all from the shared stores.
pub struct Observed<'a> {
    /// The original CSV.
    pub original: &'a ClusterServiceVersion,
    /// Its OperatorGroup membership, when it has a valid one (without one,
    /// its copies are left as they are, as the CSV's status says why).
    pub membership: Option<&'a Membership>,
    /// The namespaces of the cluster (without those being deleted).
    pub namespaces: &'a [String],
    /// The OLMConfig `cluster`, if there is one.
    pub config: Option<&'a OLMConfig>,
    /// Every CSV of the original's name: originals and copies.
    pub same_name: &'a [Occupant],
    /// The namespaces whose Subscriptions install a CSV of the original's
    /// name themselves (their `currentCSV` or `installedCSV`).
    pub claimed: &'a BTreeSet<String>,
    /// The time a condition that flips is stamped with.
    pub now: &'a Time,
}

/// What keeping the copies changes.
#[derive(Debug, Default, PartialEq)]
pub struct Decision {
    /// The copies to write, their statuses, the copies to delete, and the
    /// OLMConfig's status (as a status of another object).
    pub effects: Effects<()>,
    /// The deletions are there because copies are switched off: the original
    /// gets a `DisabledCopiedCSVs` event once they are done.
    pub disabled: bool,
    /// More copies need a write than one reconcile writes ([`BATCH`]): look
    /// again at once.
    pub more: bool,
}

/// Whether the original rests in `status`'s phase (see the module docs).
pub fn resting(status: Option<&ClusterServiceVersionStatus>) -> bool {
    let Some(status) = status else {
        return false;
    };
    match status.phase {
        Some(CsvPhase::Succeeded | CsvPhase::Failed | CsvPhase::Unknown | CsvPhase::Replacing) => true,
        Some(CsvPhase::Pending) => status.reason != Some(CsvReason::RequirementsUnknown),
        Some(CsvPhase::InstallReady | CsvPhase::Installing | CsvPhase::Deleting) | None => false,
    }
}

/// Decides the copies of `observed.original`.
pub fn decide(observed: &Observed<'_>) -> Decision {
    let mut decision = Decision::default();
    let original = observed.original;
    let Some(membership) = observed.membership else {
        return decision;
    };
    if original.metadata.deletion_timestamp.is_some() {
        // Its finalizer removes the copies.
        return decision;
    }
    let own = original.namespace().unwrap_or_default();
    let serves_all = membership.targets == Targets::All;
    let disabled = serves_all && observed.config.is_some_and(OLMConfig::copied_csvs_disabled);
    if serves_all
        && let Some(config) = observed.config
        && let Some(status) = config_status(config, disabled, observed.now)
    {
        let write =
            StatusOf::of::<OLMConfig, _>(None, OLM_CONFIG_NAME, &status).expect("a status serializes");
        decision.effects.statuses.push(write);
    }
    let namespaces = copy_namespaces(&own, &membership.targets, observed.namespaces, disabled);
    if resting(original.status.as_ref()) {
        decision.more = write_copies(&mut decision.effects, observed, membership, &namespaces);
    }
    for copy in observed.same_name {
        if copy.copied_from.as_deref() == Some(own.as_str()) && !namespaces.contains(&copy.namespace) {
            let removal = Removal::of::<ClusterServiceVersion>(Some(&copy.namespace), &original.name_any());
            decision.effects.removals.push(removal.with_uid(&copy.uid));
        }
    }
    decision.disabled = disabled && !decision.effects.removals.is_empty();
    decision
}

/// How many copies one reconcile writes at most (objects and statuses
/// counted apart); the rest follow at once in the next ([`Decision::more`]).
/// Each copy to write is held whole until it is written: a batch bounds that
/// memory, and lets the copies' store catch up between batches.
pub const BATCH: usize = 100;

/// Adds the copies of the original in `namespaces` that need a write, and
/// their statuses, to `effects`, at most [`BATCH`] of each; returns whether
/// more are left.
///
/// A CSV of the name that is no copy is never touched, and no copy goes
/// there, even while the copies' store still shows the copy it replaced; nor
/// where a Subscription installs a CSV of the name ([`Observed::claimed`]). A
/// copy of another original of the same name is left to that original while
/// it serves the namespace: the first copy written keeps its place, so that
/// two originals never take turns overwriting one copy; once that original is
/// gone or no longer serves the namespace, ours is applied over it. A
/// namespace with nothing of the name gets its copy by create, so that a CSV
/// that took the name since the stores saw it is left alone. A copy of ours
/// is applied when its live copy carries another hash than the desired one,
/// and its status is written when the store shows another, or none.
///
/// Every write to a copy the stores show is bound to that copy's UID, and
/// every status to an object labelled a copy of ours (a created copy's status,
/// to the UID its create returns): an InstallPlan replaces a copy by deleting
/// it and creating its own CSV of the name, which the stores may not show yet,
/// and such a write is refused rather than landing on that CSV.
fn write_copies(
    effects: &mut Effects<()>,
    observed: &Observed<'_>,
    membership: &Membership,
    namespaces: &BTreeSet<String>,
) -> bool {
    let original = observed.original;
    let own = original.namespace().unwrap_or_default();
    let status = original.status.clone().unwrap_or_default();
    for namespace in namespaces {
        if effects.objects.len() >= BATCH || effects.statuses.len() >= BATCH {
            return true;
        }
        let (copy, copy_status) = copy_in_group(original, membership, &status, namespace);
        let desired = Desired::owned(&copy).expect("a CSV serializes");
        let Some(write) = write_of(observed, &own, namespace, desired, &copy_status) else {
            continue;
        };
        effects.objects.extend(write.object);
        if write.status_due {
            let mut status =
                StatusOf::of::<ClusterServiceVersion, _>(Some(namespace), &copy.name_any(), &copy_status)
                    .expect("a status serializes")
                    .if_labelled(labels::COPIED_FROM, &own);
            if let Some(uid) = write.uid {
                status = status.with_uid(&uid);
            }
            effects.statuses.push(status);
        }
    }
    false
}

/// The writes of one copy: the copy itself, if any, whether its status is
/// due, and the UID of the copy the stores show, which both are bound to.
struct CopyWrite {
    object: Option<Desired>,
    status_due: bool,
    uid: Option<String>,
}

/// The writes the copy `desired` (with status `copy_status`) needs in
/// `namespace`, from what the stores show under its name there; `None`
/// when the copy has no place there (see [`write_copies`]).
fn write_of(
    observed: &Observed<'_>,
    own: &str,
    namespace: &str,
    desired: Desired,
    copy_status: &ClusterServiceVersionStatus,
) -> Option<CopyWrite> {
    // The stores of originals and of copies each hold at most one CSV of the name here.
    let here: Vec<&Occupant> = observed
        .same_name
        .iter()
        .filter(|o| o.namespace == namespace)
        .collect();
    // A CSV of the name that is no copy holds the namespace, even while the copies' store still
    // shows the copy it replaced.
    if here.iter().any(|o| o.copied_from.is_none()) {
        return None;
    }
    // A namespace that installs a CSV of the name itself gets no copy, and a copy there is left
    // as it is: its InstallPlan deletes it and creates its own CSV, and a copy made again in
    // between would take the name back (an InstallPlan and the copies taking turns).
    if observed.claimed.contains(namespace) {
        return None;
    }
    let Some(occupant) = here.first() else {
        let object = Some(desired.create_only());
        return Some(CopyWrite {
            object,
            status_due: true,
            uid: None,
        });
    };
    let from = occupant.copied_from.as_deref()?;
    if occupant.uid.is_empty() {
        // Nothing to bind a write to.
        return None;
    }
    let bound = Some(occupant.uid.clone());
    if from == own {
        let stale = occupant.desired_hash.as_deref() != desired.hash();
        let status_due = !occupant
            .status
            .as_ref()
            .is_some_and(|live| same_status(live, copy_status));
        let object = stale.then(|| desired.with_uid(&occupant.uid));
        return Some(CopyWrite {
            object,
            status_due,
            uid: bound,
        });
    }
    // A copy of another original: ours goes over it once that original no longer serves here.
    dangling(occupant, from, observed.same_name).then(|| CopyWrite {
        object: Some(desired.with_uid(&occupant.uid)),
        status_due: true,
        uid: bound,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use olm_api::{labels, v1::OlmConfigSpec};

    use super::*;

    const OWN: &str = "ops";

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).expect("a time"))
    }

    fn status(phase: CsvPhase, reason: CsvReason) -> ClusterServiceVersionStatus {
        ClusterServiceVersionStatus {
            phase: Some(phase),
            reason: Some(reason),
            message: Some(format!("{phase:?}")),
            last_transition_time: Some(at(1_800_000_000)),
            last_update_time: Some(at(1_800_000_000)),
            ..ClusterServiceVersionStatus::default()
        }
    }

    fn original(status: Option<ClusterServiceVersionStatus>) -> ClusterServiceVersion {
        let mut csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcd.v1", "namespace": OWN, "uid": "uid-ops",
                         "labels": {"operators.coreos.com/etcd.ops": "", "team": "db"}},
            "spec": {"displayName": "etcd", "install": {"strategy": "deployment", "spec": {"deployments": []}}},
        }))
        .expect("a CSV");
        csv.status = status;
        csv
    }

    fn succeeded() -> ClusterServiceVersion {
        original(Some(status(CsvPhase::Succeeded, CsvReason::InstallSuccessful)))
    }

    fn membership(targets: Targets) -> Membership {
        Membership {
            operator_group: "og".to_owned(),
            operator_namespace: OWN.to_owned(),
            targets,
            service_account: None,
            fail_forward: false,
        }
    }

    fn chosen(namespaces: &[&str]) -> Membership {
        membership(Targets::Namespaces(
            namespaces.iter().map(|s| (*s).to_owned()).collect(),
        ))
    }

    /// A copy from `from` in `namespace`, showing `status`.
    fn copy(namespace: &str, from: &str, status: Option<ClusterServiceVersionStatus>) -> Occupant {
        Occupant {
            namespace: namespace.to_owned(),
            uid: format!("uid-{namespace}"),
            copied_from: Some(from.to_owned()),
            targets: None,
            status,
            desired_hash: None,
        }
    }

    /// The copy of `csv` in `namespace` as this controller last wrote it.
    fn settled(csv: &ClusterServiceVersion, namespace: &str) -> Occupant {
        let (copy, status) = copy_in_group(
            csv,
            &chosen(&[]),
            &csv.status.clone().unwrap_or_default(),
            namespace,
        );
        let hash = Desired::owned(&copy).expect("a copy").hash().map(str::to_owned);
        Occupant {
            desired_hash: hash,
            ..copy_from(namespace, Some(status))
        }
    }

    fn copy_from(namespace: &str, status: Option<ClusterServiceVersionStatus>) -> Occupant {
        copy(namespace, OWN, status)
    }

    /// An original (no copy) in `namespace` serving `targets`.
    fn resident(namespace: &str, targets: &str) -> Occupant {
        Occupant {
            namespace: namespace.to_owned(),
            uid: format!("uid-{namespace}"),
            copied_from: None,
            targets: Some(targets.to_owned()),
            status: None,
            desired_hash: None,
        }
    }

    /// The copy's status as the copy controller writes it for `csv`.
    fn copied(csv: &ClusterServiceVersion, namespace: &str) -> ClusterServiceVersionStatus {
        copy_in_group(
            csv,
            &chosen(&[]),
            &csv.status.clone().unwrap_or_default(),
            namespace,
        )
        .1
    }

    fn config(disabled: bool) -> OLMConfig {
        let mut config: OLMConfig = OLMConfig::new(OLM_CONFIG_NAME, OlmConfigSpec::default());
        config.spec =
            serde_json::from_value(serde_json::json!({"features": {"disableCopiedCSVs": disabled}}))
                .expect("a spec");
        config.metadata.generation = Some(1);
        config
    }

    struct Case<'a> {
        original: ClusterServiceVersion,
        membership: Option<Membership>,
        namespaces: &'a [&'a str],
        config: Option<OLMConfig>,
        same_name: Vec<Occupant>,
        claimed: &'a [&'a str],
    }

    /// What `case` decides, as `(created, applied, statuses, removed, olmconfig, disabled)`:
    /// namespaces of the copies created, applied, whose status is written and removed.
    type Summary = (Vec<String>, Vec<String>, Vec<String>, Vec<String>, bool, bool);

    fn run(case: Case<'_>) -> Summary {
        let namespaces: Vec<String> = case.namespaces.iter().map(|s| (*s).to_owned()).collect();
        let claimed: BTreeSet<String> = case.claimed.iter().map(|s| (*s).to_owned()).collect();
        let now = at(1_800_000_100);
        let decision = decide(&Observed {
            original: &case.original,
            membership: case.membership.as_ref(),
            namespaces: &namespaces,
            config: case.config.as_ref(),
            same_name: &case.same_name,
            claimed: &claimed,
            now: &now,
        });
        let effects = &decision.effects;
        let in_ns = |d: &&Desired| d.namespace().unwrap_or_default().to_owned();
        let created: Vec<String> = effects
            .objects
            .iter()
            .filter(|d| d.creates())
            .map(|d| in_ns(&d))
            .collect();
        let applied = effects
            .objects
            .iter()
            .filter(|d| !created.contains(&d.namespace().unwrap_or_default().to_owned()))
            .map(|d| in_ns(&d))
            .collect();
        let copies = |kind: &str| {
            effects
                .statuses
                .iter()
                .filter(|s| s.resource.kind == kind)
                .map(|s| s.namespace.clone().unwrap_or_default())
                .collect::<Vec<_>>()
        };
        let removed = effects
            .removals
            .iter()
            .map(|r| {
                format!(
                    "{}@{}",
                    r.namespace.clone().unwrap_or_default(),
                    r.uid.clone().unwrap_or_default()
                )
            })
            .collect();
        let olmconfig = !copies("OLMConfig").is_empty();
        (
            created,
            applied,
            copies("ClusterServiceVersion"),
            removed,
            olmconfig,
            decision.disabled,
        )
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_namespace_that_installs_the_csv_itself_gets_no_copy_and_its_copy_is_left_alone() {
        // "a" subscribes to the operator: its InstallPlan deletes the copy there
        // and creates its own CSV; "b" has no copy yet; "c" had one, now deleted.
        let got = run(Case {
            original: succeeded(),
            membership: Some(chosen(&[OWN, "a", "b", "c"])),
            namespaces: &[],
            config: None,
            same_name: vec![copy("a", OWN, None)],
            claimed: &["a", "c"],
        });
        assert_eq!(got, (names(&["b"]), vec![], names(&["b"]), vec![], false, false));
    }

    #[test]
    fn only_the_phases_an_original_rests_in_reach_its_copies() {
        let table = [
            (None, false),
            (Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)), false),
            (Some((CsvPhase::Pending, CsvReason::RequirementsNotMet)), true),
            (
                Some((CsvPhase::Pending, CsvReason::OperatorConditionNotUpgradeable)),
                true,
            ),
            (Some((CsvPhase::InstallReady, CsvReason::RequirementsMet)), false),
            (Some((CsvPhase::Installing, CsvReason::InstallSuccessful)), false),
            (Some((CsvPhase::Installing, CsvReason::Waiting)), false),
            (Some((CsvPhase::Succeeded, CsvReason::InstallSuccessful)), true),
            (Some((CsvPhase::Failed, CsvReason::InstallCheckFailed)), true),
            (Some((CsvPhase::Replacing, CsvReason::BeingReplaced)), true),
            (Some((CsvPhase::Deleting, CsvReason::Replaced)), false),
        ];
        for (phase, rests) in table {
            let status = phase.map(|(phase, reason)| status(phase, reason));
            assert_eq!(resting(status.as_ref()), rests, "{phase:?}");
            // While it passes, no copy is created or written; a copy no longer served still goes.
            let got = run(Case {
                claimed: &[],
                original: original(status),
                membership: Some(chosen(&[OWN, "a", "b"])),
                namespaces: &[],
                config: None,
                same_name: vec![copy("gone", OWN, None)],
            });
            let expected: Summary = if rests {
                (
                    names(&["a", "b"]),
                    vec![],
                    names(&["a", "b"]),
                    names(&["gone@uid-gone"]),
                    false,
                    false,
                )
            } else {
                (vec![], vec![], vec![], names(&["gone@uid-gone"]), false, false)
            };
            assert_eq!(got, expected, "{phase:?}");
        }
    }

    #[test]
    fn writes_are_bound_to_the_copy_the_stores_show_and_none_go_where_a_csv_that_is_no_copy_is() {
        let csv = succeeded();
        let outdated = |namespace: &str| Occupant {
            desired_hash: Some("an earlier apply".to_owned()),
            status: None,
            ..settled(&csv, namespace)
        };
        // Per namespace: what the stores show under the name there; the write of the copy
        // ("create", or "apply@UID" onto that very copy) and the UID its status write is bound to
        // (`Some(None)`: the UID its create returns).
        type Row<'a> = (&'a str, Vec<Occupant>, Option<&'a str>, Option<Option<&'a str>>);
        let table: Vec<Row<'_>> = vec![
            ("empty", vec![], Some("create"), Some(None)),
            (
                "outdated",
                vec![outdated("outdated")],
                Some("apply@uid-outdated"),
                Some(Some("uid-outdated")),
            ),
            (
                "unwritten",
                vec![Occupant {
                    status: None,
                    ..settled(&csv, "unwritten")
                }],
                None,
                Some(Some("uid-unwritten")),
            ),
            ("settled", vec![settled(&csv, "settled")], None, None),
            // A CSV of the name that is no copy: never written, nor its status.
            ("resident", vec![resident("resident", "resident")], None, None),
            // An InstallPlan replaced the copy by a CSV of its own, which the store of originals
            // shows while the copies' store still shows the copy (in either order).
            (
                "replaced",
                vec![resident("replaced", "replaced"), outdated("replaced")],
                None,
                None,
            ),
            (
                "lagging",
                vec![outdated("lagging"), resident("lagging", "lagging")],
                None,
                None,
            ),
            // A copy of an original that is gone: ours goes over that very copy.
            (
                "orphan",
                vec![copy("orphan", "gone", None)],
                Some("apply@uid-orphan"),
                Some(Some("uid-orphan")),
            ),
            // A copy without a UID: nothing to bind a write to.
            (
                "unnamed",
                vec![Occupant {
                    uid: String::new(),
                    ..outdated("unnamed")
                }],
                None,
                None,
            ),
        ];
        let namespaces: Vec<&str> = table.iter().map(|row| row.0).collect();
        let now = at(1_800_000_100);
        let same_name: Vec<Occupant> = table.iter().flat_map(|row| row.1.clone()).collect();
        let group = chosen(&namespaces);
        let decision = decide(&Observed {
            original: &csv,
            membership: Some(&group),
            namespaces: &[],
            config: None,
            same_name: &same_name,
            claimed: &BTreeSet::new(),
            now: &now,
        });
        for (namespace, _, object, status) in &table {
            let written = decision
                .effects
                .objects
                .iter()
                .find(|d| d.namespace() == Some(namespace))
                .map(|d| match d.uid() {
                    _ if d.creates() => "create".to_owned(),
                    Some(uid) => format!("apply@{uid}"),
                    None => "apply, unbound".to_owned(),
                });
            assert_eq!(written.as_deref(), *object, "{namespace}");
            let write = decision
                .effects
                .statuses
                .iter()
                .find(|s| s.namespace.as_deref() == Some(namespace));
            assert_eq!(write.map(|s| s.guard.uid.as_deref()), *status, "{namespace}");
            if let Some(write) = write {
                let label = (labels::COPIED_FROM.to_owned(), OWN.to_owned());
                assert_eq!(
                    write.guard.label,
                    Some(label),
                    "{namespace}: only onto a copy of ours"
                );
            }
        }
        assert!(decision.effects.removals.is_empty());
    }

    #[test]
    fn a_copy_is_written_only_where_its_hash_or_its_status_differs() {
        let csv = succeeded();
        let stale = copied(
            &original(Some(status(CsvPhase::Pending, CsvReason::RequirementsNotMet))),
            "b",
        );
        // Another message time of the original alone is no new status for a copy.
        let mut later = settled(&csv, "d");
        if let Some(status) = later.status.as_mut() {
            status.last_update_time = Some(at(1_900_000_000));
        }
        let got = run(Case {
            claimed: &[],
            original: csv.clone(),
            membership: Some(chosen(&["a", "b", "c", "d", "e"])),
            namespaces: &[],
            config: None,
            same_name: vec![
                resident(OWN, "a,b,c,d,e"),
                settled(&csv, "a"),
                Occupant {
                    status: Some(stale),
                    ..settled(&csv, "b")
                },
                Occupant {
                    status: None,
                    ..settled(&csv, "c")
                },
                later,
                // Metadata or spec of an earlier apply.
                Occupant {
                    desired_hash: Some("old".to_owned()),
                    ..settled(&csv, "e")
                },
            ],
        });
        assert_eq!(
            got,
            (vec![], names(&["e"]), names(&["b", "c"]), vec![], false, false)
        );
    }

    #[test]
    fn no_copy_over_a_csv_of_the_name_nor_over_a_copy_of_an_original_that_serves_there() {
        let got = run(Case {
            claimed: &[],
            original: succeeded(),
            membership: Some(chosen(&["mine", "shared", "moved", "orphan"])),
            namespaces: &[],
            config: None,
            same_name: vec![
                resident("mine", "mine"),
                resident("other", ""),
                copy("shared", "other", None),
                resident("third", "third,b"),
                copy("moved", "third", None),
                copy("orphan", "gone", None),
            ],
        });
        // `other` serves all namespaces: its copy in `shared` stays. `third` no longer serves
        // `moved`, and the original of `orphan` is gone: ours is applied over those.
        assert_eq!(
            got,
            (
                vec![],
                names(&["moved", "orphan"]),
                names(&["moved", "orphan"]),
                vec![],
                false,
                false
            )
        );
    }

    #[test]
    fn all_namespaces_copy_everywhere_until_the_olmconfig_switches_copies_off() {
        let namespaces = &[OWN, "a", "b"];
        let with = |config: Option<OLMConfig>, same_name: Vec<Occupant>| {
            run(Case {
                claimed: &[],
                original: succeeded(),
                membership: Some(membership(Targets::All)),
                namespaces,
                config,
                same_name,
            })
        };
        assert_eq!(
            with(None, vec![]),
            (
                names(&["a", "b"]),
                vec![],
                names(&["a", "b"]),
                vec![],
                false,
                false
            )
        );
        // Copies on: the OLMConfig is told so, once.
        let on = config(false);
        assert!(with(Some(on.clone()), vec![]).4);
        let mut told = on;
        told.status = config_status(&told, false, &at(1)).map(Some).expect("a status");
        assert!(!with(Some(told), vec![]).4);
        // Off: every copy goes, with the event, and the OLMConfig says so.
        let copies = vec![copy("a", OWN, None), copy("b", OWN, None)];
        assert_eq!(
            with(Some(config(true)), copies),
            (vec![], vec![], vec![], names(&["a@uid-a", "b@uid-b"]), true, true)
        );
        // Off, with no copies left: no event.
        assert!(!with(Some(config(true)), vec![]).5);
    }

    #[test]
    fn switching_copies_off_spares_operators_of_chosen_namespaces() {
        let got = run(Case {
            claimed: &[],
            original: succeeded(),
            membership: Some(chosen(&["a"])),
            namespaces: &[],
            config: Some(config(true)),
            same_name: vec![copy("a", OWN, None)],
        });
        assert_eq!(got, (vec![], names(&["a"]), names(&["a"]), vec![], false, false));
    }

    #[test]
    fn without_a_membership_or_while_deleted_nothing_is_decided() {
        let none = Case {
            claimed: &[],
            original: succeeded(),
            membership: None,
            namespaces: &[],
            config: None,
            same_name: vec![copy("a", OWN, None)],
        };
        assert_eq!(run(none), Summary::default());
        let mut deleted = succeeded();
        deleted.metadata.deletion_timestamp = Some(at(1));
        let going = Case {
            claimed: &[],
            original: deleted,
            membership: Some(chosen(&["b"])),
            namespaces: &[],
            config: None,
            same_name: vec![copy("a", OWN, None)],
        };
        assert_eq!(run(going), Summary::default(), "the finalizer removes the copies");
    }

    #[test]
    fn a_thousand_copies_are_written_a_batch_at_a_time_and_settled_cost_nothing() {
        let csv = succeeded();
        let all: Vec<String> = (0..1000).map(|i| format!("ns-{i:04}")).collect();
        let names: Vec<&str> = all.iter().map(String::as_str).collect();
        let now = at(1_800_000_100);
        let all_namespaces = membership(Targets::All);
        let decide_with = |same_name: &[Occupant]| {
            decide(&Observed {
                original: &csv,
                membership: Some(&all_namespaces),
                namespaces: &all,
                config: None,
                same_name,
                claimed: &BTreeSet::new(),
                now: &now,
            })
        };
        // None yet: the first batch, and more to come.
        let first = decide_with(&[]);
        assert_eq!(
            (
                first.effects.objects.len(),
                first.effects.statuses.len(),
                first.more
            ),
            (BATCH, BATCH, true)
        );
        assert!(first.effects.objects.iter().all(Desired::creates));
        // The first 900 written: the last 100, and no more.
        let written: Vec<Occupant> = all[..900].iter().map(|ns| settled(&csv, ns)).collect();
        let last = decide_with(&written);
        assert_eq!((last.effects.objects.len(), last.more), (100, false));
        assert_eq!(last.effects.objects[0].namespace(), Some("ns-0900"));
        // All written (as after a restart): nothing to write.
        let same_name: Vec<Occupant> = all.iter().map(|ns| settled(&csv, ns)).collect();
        let (created, applied, statuses, removed, _, _) = run(Case {
            claimed: &[],
            original: csv.clone(),
            membership: Some(membership(Targets::All)),
            namespaces: &names,
            config: None,
            same_name,
        });
        assert!(created.is_empty() && applied.is_empty() && statuses.is_empty() && removed.is_empty());
        assert!(!labels::COPIED_FROM.is_empty());
    }
}
