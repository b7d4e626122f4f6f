//! What recording revisions changes (pure): a new OperatorRevision when the
//! Subscription's installed CSV has Succeeded and has none yet, and the
//! removal of the revisions beyond the Subscription's history limit.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use olm_api::{
    labels,
    model::{ObjectKey, OperatorRevision, OperatorRevisionSpec},
    v1alpha1::{ClusterServiceVersion, CsvPhase, InstallPlan, InstallPlanPhase, Step, Subscription},
};
use olm_runtime::effects::{Desired, Effects, Removal};
use serde_json::Value;

use super::content;

/// How many revisions of an operator are kept when its Subscription does not
/// say: the current one and the one before it.
pub const DEFAULT_HISTORY_LIMIT: usize = 2;

/// What a reconcile of one Subscription read.
pub struct Read<'a> {
    /// The Subscription.
    pub subscription: &'a Subscription,
    /// Its installed CSV (`status.installedCSV`), when the store holds it.
    pub csv: Option<&'a ClusterServiceVersion>,
    /// The revisions recorded for the Subscription.
    pub revisions: Vec<&'a OperatorRevision>,
    /// The InstallPlan that applied the installed CSV, whole (with its
    /// manifests), when [`plan_to_read`] asked for it and it was found.
    pub plan: Option<&'a InstallPlan>,
}

/// What the decision did, for the log and the tests.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A revision is recorded, numbered, with the objects it left out.
    Recorded {
        /// Its name (the CSV's).
        name: String,
        /// Its number.
        revision: i64,
        /// The objects left out for size.
        omitted: Vec<String>,
    },
    /// The installed CSV has Succeeded but its InstallPlan is gone, or holds
    /// no manifest for it: no revision can be recorded.
    NoPlan {
        /// The CSV.
        csv: String,
    },
    /// Nothing to record (no installed CSV, not Succeeded, or recorded).
    Nothing,
}

/// The effects of a reconcile, and what it did.
pub struct Decision {
    /// The revision to create and the revisions to remove.
    pub effects: Effects<()>,
    /// What was decided.
    pub outcome: Outcome,
}

/// The installed CSV, when it has Succeeded and has no revision yet.
fn to_record<'a>(
    csv: Option<&'a ClusterServiceVersion>,
    revisions: &[&OperatorRevision],
) -> Option<&'a ClusterServiceVersion> {
    let csv = csv?;
    let succeeded = csv.status.as_ref().and_then(|s| s.phase) == Some(CsvPhase::Succeeded);
    let recorded = revisions.iter().any(|r| r.name_any() == csv.name_any());
    (succeeded && !recorded).then_some(csv)
}

/// The name of the InstallPlan to read whole, when a revision is to be
/// recorded: the newest Complete plan of `plans` (as the store keeps them,
/// without manifests) with a step that created the CSV.
pub fn plan_to_read(
    csv: Option<&ClusterServiceVersion>,
    revisions: &[&OperatorRevision],
    plans: &[&InstallPlan],
) -> Option<String> {
    let csv = to_record(csv, revisions)?;
    let name = csv.name_any();
    plans
        .iter()
        .filter(|plan| {
            plan.status
                .as_ref()
                .is_some_and(|s| s.phase == InstallPlanPhase::Complete)
        })
        .filter(|plan| csv_step(plan, &name).is_some())
        .max_by_key(|plan| (plan.spec.generation.unwrap_or_default(), plan.name_any()))
        .map(|plan| plan.name_any())
}

/// The plan's step that creates CSV `name`.
fn csv_step<'a>(plan: &'a InstallPlan, name: &str) -> Option<&'a Step> {
    steps(plan).find(|s| s.resource.kind == "ClusterServiceVersion" && s.resource.name == name)
}

fn steps(plan: &InstallPlan) -> impl Iterator<Item = &Step> {
    plan.status.iter().flat_map(|s| s.plan.iter().flatten())
}

/// The objects `plan` applied for CSV `name`, in its order: the steps that
/// resolve the same bundle as the CSV's step, but Subscriptions (a plan's
/// Subscription steps are for dependencies, never part of the bundle). A
/// step without a manifest, or one that is no JSON, yields `None` as its value.
fn applied_for(plan: &InstallPlan, name: &str) -> Vec<(ObjectKey, Option<Value>)> {
    let Some(bundle) = csv_step(plan, name).map(|s| s.resolving.clone()) else {
        return Vec::new();
    };
    steps(plan)
        .filter(|s| s.resolving == bundle && s.resource.kind != "Subscription")
        .map(|s| {
            let key = ObjectKey {
                group: s.resource.group.clone(),
                version: s.resource.version.clone(),
                kind: s.resource.kind.clone(),
                name: s.resource.name.clone(),
            };
            let manifest = s
                .resource
                .manifest
                .as_deref()
                .and_then(|m| serde_json::from_str::<Value>(m).ok());
            (key, manifest)
        })
        .collect()
}

/// How many revisions the Subscription keeps: its annotation, at least 1, or
/// [`DEFAULT_HISTORY_LIMIT`].
pub fn history_limit(subscription: &Subscription) -> usize {
    subscription
        .annotations()
        .get(labels::revision::HISTORY_LIMIT)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|limit| *limit >= 1)
        .unwrap_or(DEFAULT_HISTORY_LIMIT)
}

/// The effects of reconciling the Subscription of `read`.
pub fn decide(read: &Read<'_>) -> Result<Decision, serde_json::Error> {
    let mut effects = Effects::none();
    let (outcome, new) = match to_record(read.csv, &read.revisions) {
        None => (Outcome::Nothing, None),
        Some(csv) => match read.plan.map(|plan| record(read, csv, plan)) {
            Some(Some(revision)) => {
                let outcome = Outcome::Recorded {
                    name: revision.name_any(),
                    revision: revision.spec.revision,
                    omitted: revision.spec.omitted.iter().map(content::describe).collect(),
                };
                effects.objects.push(Desired::owned(&revision)?.create_only());
                (outcome, Some(revision))
            }
            _ => (Outcome::NoPlan { csv: csv.name_any() }, None),
        },
    };
    let mut all: Vec<&OperatorRevision> = read.revisions.clone();
    all.extend(new.as_ref());
    effects.removals = beyond_limit(read, &all);
    Ok(Decision { effects, outcome })
}

/// The revision of `csv` as `plan` applied it, or `None` when the plan holds
/// none of its manifests.
fn record(read: &Read<'_>, csv: &ClusterServiceVersion, plan: &InstallPlan) -> Option<OperatorRevision> {
    let subscription = read.subscription;
    let name = csv.name_any();
    let applied = applied_for(plan, &name);
    let csv_manifest = applied
        .iter()
        .find(|(key, _)| key.kind == "ClusterServiceVersion")
        .and_then(|(_, manifest)| manifest.clone())?;
    let (with, without): (Vec<_>, Vec<_>) = applied.into_iter().partition(|(_, m)| m.is_some());
    let (objects, mut omitted) = content::fit(
        with.into_iter()
            .filter_map(|(key, manifest)| Some((key, manifest?)))
            .collect(),
    );
    omitted.extend(without.into_iter().map(|(key, _)| key));
    let revision = read.revisions.iter().map(|r| r.spec.revision).max().unwrap_or(0) + 1;
    let package = subscription.spec.package.clone();
    let metadata = ObjectMeta {
        name: Some(name.clone()),
        namespace: subscription.namespace(),
        labels: Some(BTreeMap::from([
            (labels::revision::PACKAGE.to_owned(), package.clone()),
            (labels::revision::SUBSCRIPTION.to_owned(), subscription.name_any()),
        ])),
        owner_references: subscription.uid().map(|uid| {
            vec![OwnerReference {
                api_version: "operators.coreos.com/v1alpha1".to_owned(),
                kind: "Subscription".to_owned(),
                name: subscription.name_any(),
                uid,
                controller: Some(false),
                block_owner_deletion: Some(false),
            }]
        }),
        ..ObjectMeta::default()
    };
    let spec = OperatorRevisionSpec {
        package,
        subscription: subscription.name_any(),
        revision,
        cluster_service_version: name,
        version: csv_manifest
            .pointer("/spec/version")
            .and_then(Value::as_str)
            .map(str::to_owned),
        install_plan: plan.name_any(),
        objects,
        omitted,
    };
    Some(OperatorRevision {
        metadata,
        spec,
        status: None,
    })
}

/// The revisions to remove: all but the current one (the installed CSV's)
/// and the newest others, so that the limit is kept.
fn beyond_limit(read: &Read<'_>, all: &[&OperatorRevision]) -> Vec<Removal> {
    let current = read.csv.map(ResourceExt::name_any);
    let has_current = all.iter().any(|r| Some(r.name_any()) == current);
    let room = history_limit(read.subscription).saturating_sub(usize::from(has_current));
    let mut others: Vec<&&OperatorRevision> = all.iter().filter(|r| Some(r.name_any()) != current).collect();
    others.sort_by_key(|r| std::cmp::Reverse(r.spec.revision));
    others
        .into_iter()
        .skip(room)
        .filter(|r| r.uid().is_some())
        .map(|r| {
            let removal = Removal::of::<OperatorRevision>(r.namespace().as_deref(), &r.name_any());
            match r.uid() {
                Some(uid) => removal.with_uid(&uid),
                None => removal,
            }
        })
        .collect()
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// Objects of namespace `team` for the tests of this controller.
    pub mod fixtures {
        use olm_api::{
            model::OperatorRevision,
            v1alpha1::{ClusterServiceVersion, InstallPlan, Subscription},
        };
        use serde_json::json;

        /// Subscription `db` of package `db`, with CSV db.v2 installed, and
        /// the history limit annotation `limit` when given.
        pub fn subscription(limit: Option<&str>) -> Subscription {
            let annotations = limit
                .map(|l| json!({"olm-rs.dev/revision-history-limit": l}))
                .unwrap_or(json!({}));
            serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "db", "namespace": "team", "uid": "uid-sub", "annotations": annotations},
                "spec": {"name": "db", "source": "demo", "sourceNamespace": "olm", "channel": "stable"},
                "status": {"installedCSV": "db.v2", "state": "AtLatestKnown",
                           "lastUpdated": "2026-01-01T00:00:00Z"},
            }))
            .expect("a Subscription")
        }

        /// CSV `name` in `phase`, as the store holds it.
        pub fn csv(name: &str, phase: &str) -> ClusterServiceVersion {
            serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": name, "namespace": "team", "uid": format!("uid-{name}")},
                "spec": {"displayName": name, "version": "2.0.0",
                         "install": {"strategy": "deployment", "spec": {"deployments": []}}},
                "status": {"phase": phase},
            }))
            .expect("a CSV")
        }

        /// Complete plan `name` (generation `generation`) that applied bundle
        /// `csv`: a CRD, the CSV, a ConfigMap, and a Subscription step of a
        /// dependency; then another bundle's ConfigMap.
        pub fn plan(name: &str, generation: i64, csv: &str) -> InstallPlan {
            let step = |bundle: &str, group: &str, version: &str, kind: &str, object: &str| {
                let api_version = if group.is_empty() {
                    version.to_owned()
                } else {
                    format!("{group}/{version}")
                };
                let manifest = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": object},
                                      "spec": {"version": "2.0.0"}});
                json!({"resolving": bundle, "status": "Created",
                       "resource": {"sourceName": "demo", "sourceNamespace": "olm", "group": group,
                                    "version": version, "kind": kind, "name": object,
                                    "manifest": manifest.to_string()}})
            };
            serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": name, "namespace": "team", "uid": format!("uid-{name}")},
                "spec": {"clusterServiceVersionNames": [csv], "approval": "Automatic", "approved": true,
                         "generation": generation},
                "status": {"phase": "Complete", "catalogSources": ["demo"], "plan": [
                    step(csv, "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "dbs.demo.io"),
                    step(csv, "operators.coreos.com", "v1alpha1", "ClusterServiceVersion", csv),
                    step(csv, "", "v1", "ConfigMap", "db-config"),
                    step(csv, "operators.coreos.com", "v1alpha1", "Subscription", "dep"),
                    step("other.v1", "", "v1", "ConfigMap", "other-config"),
                ]},
            }))
            .expect("an InstallPlan")
        }

        /// Revision `name` (number `number`, UID `uid`) of Subscription db,
        /// as the store holds it (no objects).
        pub fn revision(name: &str, number: i64, uid: &str) -> OperatorRevision {
            serde_json::from_value(json!({
                "apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "OperatorRevision",
                "metadata": {"name": name, "namespace": "team", "uid": uid,
                             "labels": {"olm-rs.dev/subscription": "db", "olm-rs.dev/package": "db"}},
                "spec": {"package": "db", "subscription": "db", "revision": number,
                         "clusterServiceVersion": name, "installPlan": "install-1", "objects": []},
            }))
            .expect("a revision")
        }
    }

    use fixtures::*;

    fn names(effects: &Effects<()>) -> (Vec<String>, Vec<String>) {
        (
            effects.objects.iter().map(|d| d.name().to_owned()).collect(),
            effects.removals.iter().map(|r| r.name.clone()).collect(),
        )
    }

    /// What is recorded and removed, by the CSV's phase, the plan, the
    /// revisions held and the limit (table).
    #[test]
    fn a_succeeded_csv_is_recorded_and_the_history_kept_within_the_limit() {
        let v2_plan = plan("install-2", 2, "db.v2");
        let other_plan = plan("install-9", 9, "db.v9");
        let r = revision;
        type Case<'a> = (
            &'a str,
            &'a str,
            Option<&'a str>,
            Vec<OperatorRevision>,
            Option<&'a InstallPlan>,
            &'a [&'a str],
            &'a [&'a str],
        );
        let cases: Vec<Case> = vec![
            (
                "first",
                "Succeeded",
                None,
                vec![],
                Some(&v2_plan),
                &["db.v2"],
                &[],
            ),
            (
                "not Succeeded yet",
                "Installing",
                None,
                vec![r("db.v1", 1, "u1")],
                Some(&v2_plan),
                &[],
                &[],
            ),
            (
                "recorded already",
                "Succeeded",
                None,
                vec![r("db.v2", 1, "u2")],
                None,
                &[],
                &[],
            ),
            (
                "the oldest goes",
                "Succeeded",
                None,
                vec![r("db.v0", 1, "u0"), r("db.v1", 2, "u1")],
                Some(&v2_plan),
                &["db.v2"],
                &["db.v0"],
            ),
            (
                "limit 1",
                "Succeeded",
                Some("1"),
                vec![r("db.v1", 1, "u1")],
                Some(&v2_plan),
                &["db.v2"],
                &["db.v1"],
            ),
            (
                "limit 3 keeps both",
                "Succeeded",
                Some("3"),
                vec![r("db.v0", 1, "u0"), r("db.v1", 2, "u1")],
                Some(&v2_plan),
                &["db.v2"],
                &[],
            ),
            (
                "an unreadable limit is the default",
                "Succeeded",
                Some("zero"),
                vec![r("db.v0", 1, "u0"), r("db.v1", 2, "u1")],
                Some(&v2_plan),
                &["db.v2"],
                &["db.v0"],
            ),
            // After a rollback to db.v2 (revision 1), the newest other stays.
            (
                "the current one stays whatever its number",
                "Succeeded",
                None,
                vec![r("db.v2", 1, "u2"), r("db.v3", 2, "u3"), r("db.v4", 3, "u4")],
                None,
                &[],
                &["db.v3"],
            ),
            (
                "a plan without the CSV",
                "Succeeded",
                None,
                vec![],
                Some(&other_plan),
                &[],
                &[],
            ),
            ("no plan", "Succeeded", None, vec![], None, &[], &[]),
        ];
        for (case, phase, limit, revisions, plan, created, removed) in cases {
            let subscription = subscription(limit);
            let csv = csv("db.v2", phase);
            let decision = decide(&Read {
                subscription: &subscription,
                csv: Some(&csv),
                revisions: revisions.iter().collect(),
                plan,
            })
            .expect("a decision");
            assert_eq!(
                names(&decision.effects),
                (
                    created.iter().map(|s| s.to_string()).collect(),
                    removed.iter().map(|s| s.to_string()).collect()
                ),
                "{case}"
            );
        }
    }

    #[test]
    fn a_revision_holds_the_bundles_objects_numbered_after_the_highest() {
        let subscription = subscription(None);
        let csv = csv("db.v2", "Succeeded");
        let held = [revision("db.v1", 7, "u1")];
        let plan = plan("install-2", 2, "db.v2");
        let decision = decide(&Read {
            subscription: &subscription,
            csv: Some(&csv),
            revisions: held.iter().collect(),
            plan: Some(&plan),
        })
        .expect("a decision");
        assert_eq!(
            decision.outcome,
            Outcome::Recorded {
                name: "db.v2".into(),
                revision: 8,
                omitted: vec![]
            }
        );
        let desired = &decision.effects.objects[0];
        assert!(
            desired.creates(),
            "a revision is created, never merged into another"
        );
        let revision: OperatorRevision =
            serde_json::from_value(serde_json::to_value(&desired.object).unwrap()).unwrap();
        let kinds: Vec<&str> = revision
            .spec
            .objects
            .iter()
            .map(|o| o.key.kind.as_str())
            .collect();
        assert_eq!(
            kinds,
            ["CustomResourceDefinition", "ClusterServiceVersion", "ConfigMap"]
        );
        assert_eq!(revision.spec.version.as_deref(), Some("2.0.0"));
        assert_eq!(revision.spec.install_plan, "install-2");
        assert_eq!(revision.labels()[labels::revision::SUBSCRIPTION], "db");
        assert_eq!(revision.owner_references()[0].uid, "uid-sub");
    }

    /// The plan read is the newest Complete one that created the CSV, and
    /// none is read when nothing is to be recorded (table).
    #[test]
    fn the_plan_read_is_the_newest_that_created_the_csv() {
        let older = plan("install-1", 1, "db.v2");
        let newer = plan("install-2", 2, "db.v2");
        let other = plan("install-3", 3, "db.v3");
        let mut failed = plan("install-4", 4, "db.v2");
        failed.status.as_mut().unwrap().phase = InstallPlanPhase::Failed;
        let plans = [&older, &newer, &other, &failed];
        let succeeded = csv("db.v2", "Succeeded");
        let failing = csv("db.v2", "Failed");
        let held = revision("db.v2", 1, "u2");
        type Case<'a> = (
            &'a str,
            Option<&'a ClusterServiceVersion>,
            Vec<&'a OperatorRevision>,
            Option<&'a str>,
        );
        let cases: [Case; 4] = [
            ("to record", Some(&succeeded), vec![], Some("install-2")),
            ("not Succeeded", Some(&failing), vec![], None),
            ("recorded", Some(&succeeded), vec![&held], None),
            ("no CSV", None, vec![], None),
        ];
        for (case, csv, revisions, expected) in cases {
            assert_eq!(
                plan_to_read(csv, &revisions, &plans).as_deref(),
                expected,
                "{case}"
            );
        }
    }
}
