//! Table tests of the rollback decision: each stage from what the stores
//! show, each refusal named, and a decision taken again on its own status
//! writes nothing (no flapping).

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::ResourceExt;
use olm_api::{
    model::{ObjectKey, OperatorRevision, RecordedObject},
    v1alpha1::{
        ClusterServiceVersion, ConditionStatus, InstallPlan, InstallPlanPhase, Subscription,
        SubscriptionConditionReason as Reason, SubscriptionConditionType as Type, SubscriptionState,
        SubscriptionStatus,
    },
};
use serde_json::{Value, json};

use super::*;
use crate::controllers::revision::decide::tests::fixtures::{csv, plan, revision, subscription};

fn now() -> Time {
    Time(Timestamp::from_second(1_800_000_000).unwrap())
}

fn key(kind: &str, group: &str, name: &str) -> ObjectKey {
    ObjectKey {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        name: name.into(),
    }
}

fn inline(key: ObjectKey, manifest: Value) -> RecordedObject {
    RecordedObject {
        key,
        manifest: Some(manifest),
        gzip: None,
    }
}

/// Revision db.v1 (number 1) whole: its CRD (declaring `versions`), its CSV
/// and a ConfigMap.
pub(crate) fn whole(versions: &[&str]) -> OperatorRevision {
    let mut revision = revision("db.v1", 1, "u1");
    revision.spec.version = Some("1.0.0".into());
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "dbs.demo.io"},
        "spec": {"group": "demo.io", "names": {"kind": "Db", "plural": "dbs"}, "scope": "Namespaced",
                 "versions": versions.iter().map(|v| json!({"name": v, "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                        "properties": {"size": {"type": "integer"}}}}}}})).collect::<Vec<_>>()}});
    let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "db.v1", "namespace": "elsewhere"},
        "spec": {"displayName": "db", "version": "1.0.0", "support": "dropped: not in the schema",
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}}});
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "db-config"}, "data": {"a": "b"}});
    revision.spec.objects = vec![
        inline(
            key("CustomResourceDefinition", "apiextensions.k8s.io", "dbs.demo.io"),
            crd,
        ),
        inline(key("ClusterServiceVersion", "operators.coreos.com", "db.v1"), csv),
        inline(key("ConfigMap", "", "db-config"), config),
    ];
    revision
}

/// Objects of dbs.demo.io v1 listed for the check, one with `size`.
fn db_objects(size: Value) -> Listed {
    Listed {
        crd: "dbs.demo.io".into(),
        version: "v1".into(),
        objects: vec![json!({"apiVersion": "demo.io/v1", "kind": "Db",
            "metadata": {"name": "main", "namespace": "team"}, "spec": {"size": size}})],
    }
}

/// The live CRD dbs.demo.io with objects stored in `stored`.
pub(crate) fn live_crd(stored: &[&str]) -> (String, Value) {
    (
        "dbs.demo.io".into(),
        json!({"metadata": {"name": "dbs.demo.io"}, "status": {"storedVersions": stored}}),
    )
}

/// Subscription db at db.v2, asking for `to`, referring to plan `plan`.
fn asking(to: &str, plan: Option<&str>) -> Subscription {
    let mut sub = subscription(None);
    sub.annotations_mut()
        .insert(labels::revision::ROLLBACK_TO.into(), to.into());
    let status = sub.status.get_or_insert_default();
    status.current_csv = Some("db.v2".into());
    if let Some(plan) = plan {
        status.install_plan_ref =
            serde_json::from_value(json!({"name": plan, "namespace": "team"})).expect("a reference");
    }
    sub
}

/// CSV app.v1, installed, needing package db in `range`.
fn dependent(range: &str) -> ClusterServiceVersion {
    let properties = json!({"properties": [
        {"type": "olm.package", "value": {"packageName": "app", "version": "1.0.0"}},
        {"type": "olm.package.required", "value": {"packageName": "db", "versionRange": range}}]});
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "app.v1", "namespace": "team", "uid": "uid-app",
                     "annotations": {"operatorframework.io/properties": properties.to_string()}},
        "spec": {"displayName": "app", "version": "1.0.0",
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}},
        "status": {"phase": "Succeeded"},
    }))
    .expect("a CSV")
}

struct World {
    subscription: Subscription,
    revisions: Vec<OperatorRevision>,
    csvs: Vec<ClusterServiceVersion>,
    plans: Vec<InstallPlan>,
    content: Option<OperatorRevision>,
    undecodable: Option<String>,
    crds: Vec<(String, Value)>,
    objects: Vec<Listed>,
}

/// What `decision` writes, as `Kind/name`.
fn written(decision: &Decision) -> Vec<String> {
    decision
        .effects
        .objects
        .iter()
        .map(|d| format!("{}/{}", d.resource.kind, d.name()))
        .collect()
}

/// The names of what `decision` removes.
fn removals(decision: &Decision) -> Vec<&str> {
    decision
        .effects
        .removals
        .iter()
        .map(|r| r.name.as_str())
        .collect()
}

impl World {
    fn new(to: &str) -> World {
        World {
            subscription: asking(to, None),
            revisions: vec![revision("db.v1", 1, "u1"), revision("db.v2", 2, "u2")],
            csvs: vec![csv("db.v2", "Succeeded")],
            plans: Vec::new(),
            content: Some(whole(&["v1"])),
            undecodable: None,
            crds: vec![live_crd(&["v1"])],
            objects: Vec::new(),
        }
    }

    fn decide(&self) -> Decision {
        let request = requested(&self.subscription).expect("a request");
        let revisions: Vec<&OperatorRevision> = self.revisions.iter().collect();
        let csvs: Vec<&ClusterServiceVersion> = self.csvs.iter().collect();
        let plans: Vec<&InstallPlan> = self.plans.iter().collect();
        let now = now();
        let read = Read {
            subscription: &self.subscription,
            request: &request,
            revisions: &revisions,
            csvs: &csvs,
            plans: &plans,
            content: self.content.as_ref(),
            undecodable: self.undecodable.as_deref(),
            crds: &self.crds,
            objects: &self.objects,
            now: &now,
        };
        decide(&read)
    }
}

/// A change to the world a case starts from.
type Edit = Box<dyn Fn(&mut World)>;

/// A case: its name, the annotation, the change, the stage, the objects
/// written, the CSVs removed, and RolledBack's status and reason.
type Case<'a> = (
    &'a str,
    &'a str,
    Edit,
    &'a str,
    &'a [&'a str],
    &'a [&'a str],
    (ConditionStatus, Reason),
);

fn condition(status: &SubscriptionStatus, type_: Type) -> Option<(ConditionStatus, Reason, String)> {
    let c = status.conditions.as_ref()?.iter().find(|c| c.type_ == type_)?;
    Some((c.status, c.reason.clone()?, c.message.clone().unwrap_or_default()))
}

/// What one world gives: the stage's name, the objects written (kind/name),
/// the removals, and RolledBack's status and reason (table).
#[test]
fn each_stage_and_refusal_follows_from_what_the_stores_show() {
    let installing = |w: &mut World| w.csvs.clear();
    let mut in_flight_plan = plan("install-3", 3, "db.v3");
    in_flight_plan.status.as_mut().unwrap().phase = InstallPlanPhase::Installing;
    let cases: Vec<Case> = vec![
        (
            "by name, the current CSV goes first",
            "db.v1",
            Box::new(|_: &mut World| {}),
            "Removing",
            &[],
            &["db.v2"],
            (ConditionStatus::False, Reason::RollingBack),
        ),
        (
            "by number",
            "1",
            Box::new(|_: &mut World| {}),
            "Removing",
            &[],
            &["db.v2"],
            (ConditionStatus::False, Reason::RollingBack),
        ),
        (
            "then CRDs and CSV from the revision",
            "db.v1",
            Box::new(installing),
            "Installing",
            &[
                "CustomResourceDefinition/dbs.demo.io",
                "ClusterServiceVersion/db.v1",
            ],
            &[],
            (ConditionStatus::False, Reason::RollingBack),
        ),
        (
            "then the rest, owned by the CSV",
            "db.v1",
            Box::new(|w: &mut World| w.csvs = vec![csv("db.v1", "Installing")]),
            "Waiting",
            &["ConfigMap/db-config"],
            &[],
            (ConditionStatus::False, Reason::RollingBack),
        ),
        (
            "done",
            "db.v1",
            Box::new(|w: &mut World| {
                w.csvs = vec![csv("db.v1", "Succeeded")];
                w.content = None;
            }),
            "Done",
            &[],
            &[],
            (ConditionStatus::True, Reason::RolledBack),
        ),
        (
            "no such revision",
            "db.v9",
            Box::new(|_: &mut World| {}),
            "Refused",
            &[],
            &[],
            (ConditionStatus::False, Reason::RevisionNotFound),
        ),
        (
            "listed but gone",
            "db.v1",
            Box::new(|w: &mut World| w.content = None),
            "Refused",
            &[],
            &[],
            (ConditionStatus::False, Reason::RevisionNotFound),
        ),
        (
            "incomplete",
            "db.v1",
            Box::new(|w: &mut World| {
                w.content.as_mut().unwrap().spec.omitted = vec![key("ConfigMap", "", "big")]
            }),
            "Refused",
            &[],
            &[],
            (ConditionStatus::False, Reason::RevisionIncomplete),
        ),
        (
            "corrupt",
            "db.v1",
            Box::new(|w: &mut World| w.content.as_mut().unwrap().spec.objects[1].manifest = None),
            "Refused",
            &[],
            &[],
            (ConditionStatus::False, Reason::RevisionCorrupt),
        ),
        (
            "an object that cannot be decoded",
            "db.v1",
            Box::new(|w: &mut World| {
                w.content = None;
                w.undecodable = Some("spec.revision: invalid type: string \"one\", expected i64".into());
            }),
            "Refused",
            &[],
            &[],
            (ConditionStatus::False, Reason::RevisionCorrupt),
        ),
        (
            "a stored version dropped",
            "db.v1",
            Box::new(|w: &mut World| w.crds = vec![live_crd(&["v1", "v2"])]),
            "Refused",
            &[],
            &[],
            (ConditionStatus::False, Reason::StoredVersionsDropped),
        ),
        (
            "existing objects the revision's schema rejects",
            "db.v1",
            Box::new(|w: &mut World| w.objects = vec![db_objects(json!("large"))]),
            "Refused",
            &[],
            &[],
            (ConditionStatus::False, Reason::CustomResourcesInvalid),
        ),
        (
            "existing objects the revision's schema accepts",
            "db.v1",
            Box::new(|w: &mut World| w.objects = vec![db_objects(json!(3))]),
            "Removing",
            &[],
            &["db.v2"],
            (ConditionStatus::False, Reason::RollingBack),
        ),
        (
            "the revision's CSV still there, the current one too: checked first",
            "db.v1",
            Box::new(|w: &mut World| {
                w.csvs.push(csv("db.v1", "Succeeded"));
                w.crds = vec![live_crd(&["v1", "v2"])];
            }),
            "Refused",
            &[],
            &[],
            (ConditionStatus::False, Reason::StoredVersionsDropped),
        ),
        (
            "the revision's CSV still there: only the current one goes",
            "db.v1",
            Box::new(|w: &mut World| w.csvs.push(csv("db.v1", "Succeeded"))),
            "Removing",
            &[],
            &["db.v2"],
            (ConditionStatus::False, Reason::RollingBack),
        ),
        (
            "an installed operator needs the current version",
            "db.v1",
            Box::new(|w: &mut World| w.csvs.push(dependent(">=2.0.0"))),
            "Refused",
            &[],
            &[],
            (ConditionStatus::False, Reason::RollbackBreaksDependents),
        ),
        (
            "an installed operator the revision suits",
            "db.v1",
            Box::new(|w: &mut World| w.csvs.push(dependent(">=1.0.0"))),
            "Removing",
            &[],
            &["db.v2"],
            (ConditionStatus::False, Reason::RollingBack),
        ),
        (
            "an InstallPlan applying",
            "db.v1",
            {
                let p = in_flight_plan.clone();
                Box::new(move |w: &mut World| {
                    w.plans = vec![p.clone()];
                    w.subscription = asking("db.v1", Some("install-3"));
                })
            },
            "Refused",
            &[],
            &[],
            (ConditionStatus::False, Reason::UpgradeInFlight),
        ),
    ];
    for (case, to, edit, stage, objects, removed, rolled_back) in cases {
        let mut world = World::new(to);
        edit(&mut world);
        let decision = world.decide();
        let name = format!("{:?}", decision.stage);
        assert!(name.starts_with(stage), "{case}: {name}");
        assert_eq!(written(&decision), objects, "{case}");
        assert_eq!(removals(&decision), removed, "{case}");
        let status = &decision.effects.status.as_ref().expect("a status").status;
        let (got, reason, _) = condition(status, Type::RolledBack).expect("RolledBack");
        assert_eq!((got, reason), rolled_back, "{case}");
        if stage == "Refused" && rolled_back.1 != Reason::UpgradeInFlight {
            assert_eq!(
                condition(status, Type::Stalled).map(|c| c.0),
                Some(ConditionStatus::True),
                "{case}"
            );
            assert_eq!(
                condition(status, Type::ResolutionFailed).map(|c| c.0),
                Some(ConditionStatus::True),
                "{case}"
            );
        }
        if stage == "Refused" {
            assert_eq!(
                status.installed_csv.as_deref(),
                Some("db.v2"),
                "{case}: the current version stays"
            );
        }
    }
}

#[test]
fn a_refusal_names_the_crd_the_versions_and_what_to_do() {
    let mut world = World::new("db.v1");
    world.crds = vec![live_crd(&["v1", "v2", "v3"])];
    let decision = world.decide();
    let status = decision.effects.status.expect("a status").status;
    let (_, _, message) = condition(&status, Type::RolledBack).unwrap();
    assert!(message.contains("CRD dbs.demo.io"), "{message}");
    assert!(message.contains("v2, v3"), "{message}");
    assert!(message.contains("status.storedVersions"), "{message}");
    assert!(message.contains("olm-rs.dev/rollback-to"), "{message}");

    let mut world = World::new("db.v9");
    world.subscription.status.as_mut().unwrap().install_plan_ref = None;
    let status = world.decide().effects.status.expect("a status").status;
    let (_, _, message) = condition(&status, Type::RolledBack).unwrap();
    assert!(message.contains("1 (db.v1), 2 (db.v2)"), "{message}");
}

#[test]
fn a_refusal_for_a_dependent_names_it_and_what_it_needs() {
    let mut world = World::new("db.v1");
    world.csvs.push(dependent(">=2.0.0 <3.0.0"));
    let decision = world.decide();
    assert!(decision.effects.removals.is_empty(), "nothing is touched");
    let status = decision.effects.status.expect("a status").status;
    let (_, reason, message) = condition(&status, Type::RolledBack).unwrap();
    assert_eq!(reason, Reason::RollbackBreaksDependents);
    assert!(message.contains("installed operator app.v1 needs"), "{message}");
    assert!(
        message.contains("app.v1 requires package db in range >=2.0.0 <3.0.0"),
        "{message}"
    );
    assert!(message.contains("version 1.0.0 is outside"), "{message}");
    assert!(message.contains("olm-rs.dev/rollback-to"), "{message}");
}

#[test]
fn the_revisions_objects_are_applied_as_an_install_plan_would() {
    let mut world = World::new("db.v1");
    world.csvs.clear();
    let decision = world.decide();
    let objects = &decision.effects.objects;
    assert_eq!(objects[0].namespace(), None, "a CRD is cluster-scoped");
    let csv = &objects[1].object;
    assert_eq!(csv.metadata.namespace.as_deref(), Some("team"));
    assert_eq!(
        csv.annotations()
            .get(labels::revision::ROLLED_BACK_FROM)
            .map(String::as_str),
        Some("db.v2")
    );
    assert!(csv.data["spec"].get("support").is_none(), "pruned: {}", csv.data);
    let status = &decision.effects.status.as_ref().unwrap().status;
    assert_eq!(status.installed_csv.as_deref(), Some("db.v1"));
    assert_eq!(status.state, Some(SubscriptionState::UpgradePending));
    assert_eq!(
        condition(status, Type::Reconciling).map(|c| c.0),
        Some(ConditionStatus::True)
    );

    world.csvs = vec![csv_with_uid("db.v1", "Pending", "uid-db.v1")];
    let decision = world.decide();
    let config = &decision.effects.objects[0].object;
    assert_eq!(config.owner_references()[0].uid, "uid-db.v1");
    assert_eq!(config.metadata.namespace.as_deref(), Some("team"));
}

fn csv_with_uid(name: &str, phase: &str, uid: &str) -> ClusterServiceVersion {
    let mut csv = csv(name, phase);
    csv.metadata.uid = Some(uid.into());
    csv
}

/// Held or refused, a decision taken again on the status it wrote writes
/// nothing: no flapping, no retry storm.
#[test]
fn a_settled_rollback_writes_nothing_more() {
    let edits: Vec<(&str, Edit)> = vec![
        (
            "done",
            Box::new(|w: &mut World| w.csvs = vec![csv("db.v1", "Succeeded")]),
        ),
        (
            "refused",
            Box::new(|w: &mut World| w.crds = vec![live_crd(&["v1", "v2"])]),
        ),
        (
            "not found",
            Box::new(|w: &mut World| w.subscription = asking("db.v9", None)),
        ),
    ];
    for (case, edit) in edits {
        let mut world = World::new("db.v1");
        edit(&mut world);
        let first = world.decide();
        world.subscription.status = Some(first.effects.status.expect("a first status").status);
        let again = world.decide();
        assert!(again.effects.is_empty(), "{case}: {:?}", again.effects);
    }
}

#[test]
fn a_revision_read_untyped_is_decoded_or_says_why_not() {
    let good = serde_json::to_value(whole(&["v1"])).expect("JSON");
    let object: DynamicObject = serde_json::from_value(good).expect("an object");
    assert_eq!(decode(&object).map(|r| r.name_any()), Ok("db.v1".to_owned()));
    let mut bad = serde_json::to_value(whole(&["v1"])).expect("JSON");
    bad["spec"]["revision"] = json!("one");
    let object: DynamicObject = serde_json::from_value(bad).expect("an object");
    let cause = decode(&object).expect_err("undecodable");
    assert!(cause.contains("invalid type"), "{cause}");
}

#[test]
fn the_annotation_is_a_number_or_a_name() {
    assert_eq!(Request::parse(" 3 "), Some(Request::Number(3)));
    assert_eq!(Request::parse("db.v1"), Some(Request::Name("db.v1".into())));
    assert_eq!(Request::parse("  "), None);
    let mut sub = subscription(None);
    assert!(!held(&sub));
    sub.annotations_mut()
        .insert(labels::revision::ROLLBACK_TO.into(), "db.v1".into());
    assert!(held(&sub));
}

/// A rollback started by a failed upgrade says so at each stage: both
/// versions and the cause, and, once done, when the failed version is tried
/// again; the kstatus and Argo CD readings stay those of a manual one.
#[test]
fn an_automatic_rollback_names_both_versions_the_cause_and_the_hold() {
    let cause = "the upgrade from db.v1 (version 1.0.0) to db.v2 (version 2.0.0) failed: its CSV \
                 went Failed (InstallCheckFailed): too slow";
    let mut world = World::new("db.v1");
    world
        .subscription
        .annotations_mut()
        .insert(labels::revision::FAILED_UPGRADE.into(), "db.v2".into());
    world
        .subscription
        .annotations_mut()
        .insert(labels::revision::FAILED_UPGRADE_CAUSE.into(), cause.into());
    world.csvs = vec![csv("db.v2", "Failed"), csv("db.v1", "Replacing")];
    let rolling = world.decide();
    assert_eq!(rolling.stage, Stage::Removing { csv: "db.v2".into() });
    let status = rolling.effects.status.expect("a status").status;
    let (state, reason, message) = condition(&status, Type::RolledBack).unwrap();
    assert_eq!((state, reason), (ConditionStatus::False, Reason::RollingBack));
    assert!(message.starts_with(cause), "{message}");
    assert!(message.contains("rolling back to revision 1 (db.v1"), "{message}");
    // Argo CD: Progressing; kstatus: InProgress.
    assert_eq!(status.state, Some(SubscriptionState::UpgradePending));
    assert_eq!(
        condition(&status, Type::Reconciling).map(|c| c.0),
        Some(ConditionStatus::True)
    );

    world.csvs = vec![csv("db.v1", "Succeeded")];
    world.subscription.status.as_mut().unwrap().current_csv = Some("db.v1".into());
    world.subscription.status.as_mut().unwrap().installed_csv = Some("db.v1".into());
    let done = world.decide();
    assert_eq!(done.stage, Stage::Done);
    let status = done.effects.status.expect("a status").status;
    let (state, reason, message) = condition(&status, Type::RolledBack).unwrap();
    assert_eq!((state, reason), (ConditionStatus::True, Reason::RolledBack));
    assert!(message.starts_with(cause), "{message}");
    assert!(
        message.contains("db.v2 is not tried again until the catalog's channel head changes"),
        "{message}"
    );
    // Argo CD: Healthy; kstatus: Current.
    assert_eq!(status.state, Some(SubscriptionState::AtLatestKnown));
    assert_eq!(
        condition(&status, Type::Ready).map(|c| c.0),
        Some(ConditionStatus::True)
    );
    assert!(condition(&status, Type::Reconciling).is_none());
    assert!(condition(&status, Type::Stalled).is_none());
}

/// `csv`, made a machine CSV (strategy `machine` on pool `edge`).
fn machine(mut csv: Value) -> Value {
    csv["spec"]["install"] = json!({"strategy": "machine",
        "spec": {"pool": "edge", "hooks": {"configMap": "db-hooks"}}});
    csv
}

/// The world of a machine operator: the revision's CSV and the current one
/// have the `machine` strategy.
fn machine_world() -> World {
    let mut world = World::new("db.v1");
    let content = world.content.as_mut().expect("the revision");
    let recorded = content.spec.objects[1].manifest.take().expect("the CSV");
    content.spec.objects[1].manifest = Some(machine(recorded));
    world
}

/// CSV `name` with the machine strategy, in `phase` with `message`, and
/// the CSV a rollback brought it back from, if any.
fn machine_csv(name: &str, phase: &str, message: &str, from: Option<&str>) -> ClusterServiceVersion {
    let mut value = machine(serde_json::to_value(csv(name, phase)).expect("JSON"));
    value["status"]["message"] = json!(message);
    if let Some(from) = from {
        value["metadata"]["annotations"] = json!({labels::revision::ROLLED_BACK_FROM: from});
    }
    serde_json::from_value(value).expect("a CSV")
}

/// A machine operator rolls back as an upgrade of its units: its CSV goes in
/// beside the current one (whose units the agents move to it with
/// `upgrade`), the Subscription names the machines whose unit failed while
/// it waits, and the current CSV goes once the revision's succeeded.
#[test]
fn a_machine_rollback_installs_beside_the_current_csv_and_removes_it_last() {
    let failed = "installing: machines in error: edge-node-a (upgrade hook failed: exit 3)";
    let installed = |w: &mut World| {
        w.subscription.status.as_mut().unwrap().installed_csv = Some("db.v1".into());
        w.subscription.status.as_mut().unwrap().current_csv = Some("db.v1".into());
    };
    /// (what, the change, the stage, the objects written, the CSVs removed,
    /// RolledBack's status, reason and a part of its message)
    type MachineCase<'a> = (
        &'a str,
        Edit,
        &'a str,
        &'a [&'a str],
        &'a [&'a str],
        (ConditionStatus, Reason, &'a str),
    );
    let cases: Vec<MachineCase> = vec![
        (
            "the revision's CSV goes in beside the current one",
            Box::new(|_: &mut World| {}),
            "Installing",
            &[
                "CustomResourceDefinition/dbs.demo.io",
                "ClusterServiceVersion/db.v1",
            ],
            &[],
            (ConditionStatus::False, Reason::RollingBack, "installing its CRDs"),
        ),
        (
            "the checks still come first",
            Box::new(|w: &mut World| w.crds = vec![live_crd(&["v1", "v2"])]),
            "Refused",
            &[],
            &[],
            (
                ConditionStatus::False,
                Reason::StoredVersionsDropped,
                "dbs.demo.io",
            ),
        ),
        (
            "a unit whose upgrade failed is named",
            Box::new(move |w: &mut World| {
                installed(w);
                w.csvs
                    .push(machine_csv("db.v1", "Installing", failed, Some("db.v2")));
            }),
            "Waiting",
            &["ConfigMap/db-config"],
            &[],
            (
                ConditionStatus::False,
                Reason::RollingBack,
                "edge-node-a (upgrade hook failed: exit 3)",
            ),
        ),
        (
            "every unit active: the CSV it came back from goes",
            Box::new(move |w: &mut World| {
                installed(w);
                w.csvs.push(machine_csv("db.v1", "Succeeded", "", Some("db.v2")));
            }),
            "Removing",
            &[],
            &["db.v2"],
            (ConditionStatus::False, Reason::RollingBack, "removing CSV db.v2"),
        ),
        (
            "then done",
            Box::new(move |w: &mut World| {
                installed(w);
                w.csvs = vec![machine_csv("db.v1", "Succeeded", "", Some("db.v2"))];
            }),
            "Done",
            &[],
            &[],
            (
                ConditionStatus::True,
                Reason::RolledBack,
                "rolled back to revision 1",
            ),
        ),
    ];
    for (case, edit, stage, objects, removed, (want, reason, words)) in cases {
        let mut world = machine_world();
        world.csvs = vec![machine_csv("db.v2", "Succeeded", "", None)];
        edit(&mut world);
        let decision = world.decide();
        let name = format!("{:?}", decision.stage);
        assert!(name.starts_with(stage), "{case}: {name}");
        assert_eq!(written(&decision), objects, "{case}");
        assert_eq!(removals(&decision), removed, "{case}");
        let status = &decision.effects.status.as_ref().expect("a status").status;
        let (got, got_reason, message) = condition(status, Type::RolledBack).expect("RolledBack");
        assert_eq!((got, got_reason), (want, reason), "{case}");
        assert!(message.contains(words), "{case}: {message}");
    }
}
