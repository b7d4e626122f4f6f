//! What reconciling a Relation changes (pure): its status, only when it
//! differs from what the Relation holds, and its Databags ([`super::bags`]):
//! those of a Ready relation's sides and units made, the others removed,
//! each only when it differs from the live one, so that an unchanged
//! relation decides no write at all. A side installed as Deployments also
//! gets the other side's data in a ConfigMap, with the RBAC to read it and
//! to write its own bag ([`super::pods`]).

use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::Time};
use kube::{ResourceExt, core::PartialObjectMeta};
use olm_api::{
    model::{Databag, Relation, RelationConditionType, RelationReason, RelationStatus},
    substrate::Machine,
    v1alpha1::ClusterServiceVersion,
};
use olm_runtime::{
    conditions::{ConditionReason, ConditionType, Status, set_condition},
    effects::{Effects, StatusWrite},
};

use super::{bags, pods, resolve::resolve};

/// What a decision about one Relation reads of its namespace.
pub struct Seen<'a> {
    /// The CSVs.
    pub csvs: &'a [&'a ClusterServiceVersion],
    /// The other Relations.
    pub relations: &'a [&'a Relation],
    /// The Machines, with the units they report.
    pub machines: &'a [&'a Machine],
    /// The relation's own Databags (labelled with its name).
    pub bags: &'a [&'a Databag],
    /// The relation's own ConfigMaps of remote data (labelled with its
    /// name), as metadata.
    pub configmaps: &'a [&'a PartialObjectMeta<ConfigMap>],
}

/// The `Ready` condition type, for olm-runtime's typed conditions.
struct Ready;

impl ConditionType for Ready {
    fn as_str(&self) -> &'static str {
        RelationConditionType::Ready.as_str()
    }
}

/// A Relation's reason, for olm-runtime's typed conditions.
pub struct Reason(pub RelationReason);

impl ConditionReason for Reason {
    fn as_str(&self) -> &'static str {
        self.0.as_str()
    }
}

/// The effects of reconciling `relation`, given what is `seen` of its
/// namespace and the time `now`.
pub fn decide(relation: &Relation, seen: &Seen<'_>, now: &Time) -> Effects<RelationStatus> {
    let next = status(relation, seen.csvs, seen.relations, now);
    let mut sides = bags::sides(&next.endpoints, seen.csvs, seen.machines);
    // A peer relation's two sides are one application: one set of bags.
    sides.dedup();
    let wanted = bags::desired(relation, &sides);
    let (mut objects, mut removals) = bags::changes(&wanted, seen.bags);
    let in_pods = pods::desired(relation, &next.endpoints, &sides, seen.csvs, seen.bags);
    let (pod_objects, pod_removals) = pods::changes(&in_pods, seen.configmaps);
    objects.extend(pod_objects);
    removals.extend(pod_removals);
    let mut effects = Effects {
        objects,
        removals,
        ..Effects::none()
    };
    if relation.status.as_ref() != Some(&next) {
        effects.status = Some(StatusWrite {
            name: relation.name_any(),
            status: next,
        });
    }
    effects
}

/// The status `relation` should hold.
fn status(
    relation: &Relation,
    csvs: &[&ClusterServiceVersion],
    relations: &[&Relation],
    now: &Time,
) -> RelationStatus {
    let generation = relation.metadata.generation;
    let held = relation.status.clone().unwrap_or_default();
    let mut conditions = held.conditions.unwrap_or_default();
    let (endpoints, ready, reason, message) = match resolve(relation, csvs, relations) {
        Ok(joined) => {
            let message = format!(
                "relates {}:{} ({} {}) with {}:{} ({} {})",
                joined[0].application,
                joined[0].endpoint,
                joined[0].role,
                joined[0].interface,
                joined[1].application,
                joined[1].endpoint,
                joined[1].role,
                joined[1].interface
            );
            (joined.to_vec(), Status::True, RelationReason::Related, message)
        }
        Err(refusal) => (Vec::new(), Status::False, refusal.reason, refusal.message),
    };
    set_condition(
        &mut conditions,
        Ready,
        ready,
        Reason(reason),
        &message,
        generation,
        now,
    );
    RelationStatus {
        observed_generation: generation,
        endpoints,
        conditions: Some(conditions),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use olm_api::model::{ApplicationEndpoint, RelationSpec};

    use super::*;

    /// [`super::decide`] with no Machine and no live Databag.
    fn decide(
        relation: &Relation,
        csvs: &[&ClusterServiceVersion],
        relations: &[&Relation],
        now: &Time,
    ) -> Effects<RelationStatus> {
        let seen = Seen {
            csvs,
            relations,
            machines: &[],
            bags: &[],
            configmaps: &[],
        };
        super::decide(relation, &seen, now)
    }

    fn now() -> Time {
        Time(Timestamp::from_second(1_800_000_000).unwrap())
    }

    /// A CSV of package `package` in `ns`, in `phase`, declaring `endpoints`.
    pub fn csv(package: &str, phase: &str, endpoints: &str) -> ClusterServiceVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {
                "name": format!("{package}.v1.0.0"), "namespace": "ns",
                "labels": {format!("operators.coreos.com/{package}.ns"): ""},
                "annotations": {"olm-rs.dev/endpoints": endpoints},
            },
            "spec": {"displayName": package, "install": {"strategy": "deployment"}},
            "status": {"phase": phase},
        }))
        .expect("a CSV")
    }

    fn side(text: &str) -> ApplicationEndpoint {
        let (application, endpoint) = match text.split_once(':') {
            Some((a, e)) => (a, Some(e.to_owned())),
            None => (text, None),
        };
        let (application, namespace) = match application.split_once('/') {
            Some((ns, a)) => (a, Some(ns.to_owned())),
            None => (application, None),
        };
        ApplicationEndpoint {
            application: application.to_owned(),
            endpoint,
            namespace,
        }
    }

    /// A Relation `name` created at second `created`, of `sides`.
    fn relation(name: &str, created: i64, sides: &[&str]) -> Relation {
        let mut relation = Relation::new(
            name,
            RelationSpec {
                endpoints: sides.iter().map(|s| side(s)).collect(),
            },
        );
        relation.metadata.namespace = Some("ns".into());
        relation.metadata.generation = Some(1);
        relation.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        relation
    }

    /// `relation` with the status it decides among `csvs`.
    fn settled(mut relation: Relation, csvs: &[&ClusterServiceVersion]) -> Relation {
        relation.status = decide(&relation, csvs, &[], &now()).status.map(|w| w.status);
        relation
    }

    fn ready(effects: &Effects<RelationStatus>) -> (String, String, String) {
        let status = &effects.status.as_ref().expect("a status write").status;
        let c = &status.conditions.as_ref().unwrap()[0];
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    const APP: &str = "requires: {db: {interface: postgresql}, cache: {interface: redis}}\npeers: {ring: {interface: app-ring}}";
    const DB: &str = "provides: {db: {interface: postgresql, limit: 1}, admin: {interface: pg-admin}}\nrequires: {backup: {interface: s3}}";
    const TWO_DBS: &str = "provides: {db: {interface: postgresql}, replica: {interface: postgresql}}";
    const KV: &str = "provides: {kv: {interface: redis}}";
    const AUDIT: &str = "requires: {sink: {interface: postgresql}}";

    #[test]
    fn every_reason_and_the_happy_path() {
        let (app, db, two) = (
            csv("app", "Succeeded", APP),
            csv("db", "Succeeded", DB),
            csv("two", "Succeeded", TWO_DBS),
        );
        let (kv, audit, pending) = (
            csv("kv", "Succeeded", KV),
            csv("audit", "Succeeded", AUDIT),
            csv("late", "Installing", KV),
        );
        let bad = csv("bad", "Succeeded", "provides: [");
        let csvs = [&app, &db, &two, &kv, &audit, &pending, &bad];
        let cases: &[(&[&str], &str, &str, &str)] = &[
            // (sides, Ready, reason, a part of the message)
            (
                &["app", "db"],
                "True",
                "Related",
                "relates app:db (requires postgresql) with db:db (provides postgresql)",
            ),
            (
                &["db:db", "app:db"],
                "True",
                "Related",
                "relates db:db (provides postgresql)",
            ),
            (&["app:cache", "kv"], "True", "Related", "kv:kv (provides redis)"),
            (&["app.v1.0.0", "db"], "True", "Related", "relates app.v1.0.0:db"),
            (&["app"], "False", "InvalidSpec", "has 1 entries"),
            (
                &["app", "nope"],
                "False",
                "NotInstalled",
                "application nope is not installed in namespace ns",
            ),
            (
                &["app", "late"],
                "False",
                "NotInstalled",
                "CSV late.v1.0.0 is in phase Installing",
            ),
            (
                &["app", "bad"],
                "False",
                "InvalidDeclaration",
                "CSV bad.v1.0.0: annotation olm-rs.dev/endpoints",
            ),
            (
                &["app:nope", "db"],
                "False",
                "UnknownEndpoint",
                "declares no endpoint nope; it declares: cache, db, ring",
            ),
            (
                &["kv", "two"],
                "False",
                "InterfaceMismatch",
                "kv:kv (provides redis) with two:db",
            ),
            (
                &["app:cache", "db:db"],
                "False",
                "InterfaceMismatch",
                "app:cache (requires redis) with db:db (provides postgresql)",
            ),
            (
                &["app", "two"],
                "False",
                "AmbiguousEndpoint",
                "kubectl olm relate app:db two:db",
            ),
            (
                &["db", "two"],
                "False",
                "RolesNotComplementary",
                "speak one interface",
            ),
            (
                &["app:ring", "db"],
                "False",
                "RolesNotComplementary",
                "peers endpoint",
            ),
            (
                &["app:ring", "app:ring"],
                "True",
                "Related",
                "relates app:ring (peers app-ring) with app:ring (peers app-ring)",
            ),
            (
                &["app:db", "app:db"],
                "False",
                "RolesNotComplementary",
                "is a requires endpoint: an application relates to itself only on a peers endpoint",
            ),
            (
                &["app:nope", "app:nope"],
                "False",
                "UnknownEndpoint",
                "declares no endpoint nope",
            ),
            (
                &["late:kv", "late:kv"],
                "False",
                "NotInstalled",
                "phase Installing",
            ),
            (&["app", "other/db"], "False", "NeedsOffer", "namespace other"),
            (&["app", "ns/db"], "True", "Related", ""),
        ];
        for (sides, status, reason, part) in cases {
            let effects = decide(&relation("r", 10, sides), &csvs, &[], &now());
            let (s, r, message) = ready(&effects);
            assert_eq!(
                (s.as_str(), r.as_str()),
                (*status, *reason),
                "{sides:?}: {message}"
            );
            assert!(message.contains(part), "{sides:?}: {message}");
        }
    }

    #[test]
    fn the_oldest_ready_relations_keep_a_limited_endpoint() {
        let (app, db, audit) = (
            csv("app", "Succeeded", APP),
            csv("db", "Succeeded", DB),
            csv("audit", "Succeeded", AUDIT),
        );
        let csvs = [&app, &db, &audit];
        let first = settled(relation("first", 10, &["app", "db"]), &csvs);
        let second = relation("second", 20, &["audit", "db:db"]);
        // An older Ready relation holds db:db (limit 1).
        let (s, r, message) = ready(&decide(&second, &csvs, &[&first], &now()));
        assert_eq!((s.as_str(), r.as_str()), ("False", "OverLimit"), "{message}");
        assert!(message.contains("is used by first"), "{message}");
        // A newer one does not count against the older, whatever its status.
        let second = settled(second, &csvs);
        let (s, r, _) = ready(&decide(
            &relation("first", 10, &["app", "db"]),
            &csvs,
            &[&second],
            &now(),
        ));
        assert_eq!((s.as_str(), r.as_str()), ("True", "Related"));
        // Created in one second: the name decides.
        let twin = settled(relation("a-twin", 10, &["audit", "db"]), &csvs);
        let (_, r, _) = ready(&decide(
            &relation("b-twin", 10, &["app", "db"]),
            &csvs,
            &[&twin],
            &now(),
        ));
        assert_eq!(r, "OverLimit");
        // An older relation that is not Ready holds nothing.
        let failed = settled(relation("failed", 5, &["audit", "nope"]), &csvs);
        let (_, r, _) = ready(&decide(
            &relation("r", 10, &["app", "db"]),
            &csvs,
            &[&failed],
            &now(),
        ));
        assert_eq!(r, "Related");
    }

    #[test]
    fn an_unchanged_relation_decides_no_write_and_a_removed_side_is_not_installed() {
        let (app, db) = (csv("app", "Succeeded", APP), csv("db", "Succeeded", DB));
        let related = settled(relation("r", 10, &["app", "db"]), &[&app, &db]);
        assert_eq!(related.status.as_ref().unwrap().endpoints.len(), 2);
        assert!(decide(&related, &[&app, &db], &[], &now()).status.is_none());
        let effects = decide(&related, &[&app], &[], &now());
        let (s, r, _) = ready(&effects);
        assert_eq!((s.as_str(), r.as_str()), ("False", "NotInstalled"));
        let status = effects.status.unwrap().status;
        assert!(status.endpoints.is_empty());
        assert_eq!(status.observed_generation, Some(1));
    }

    #[test]
    fn a_ready_relation_gets_its_bags_once_and_loses_them_when_not_ready() {
        let (app, db) = (csv("app", "Succeeded", APP), csv("db", "Succeeded", DB));
        let machine: Machine = serde_json::from_value(serde_json::json!({
            "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": "edge-a", "namespace": "ns"}, "spec": {"pool": "edge"},
            "status": {"units": [{"csv": "db.v1.0.0", "version": "1.0.0", "state": "active", "application": "db"}]},
        }))
        .expect("a Machine");
        let related = settled(relation("r", 10, &["app", "db"]), &[&app, &db]);
        let machines = [&machine];
        let both = [&app, &db];
        let mut seen = Seen {
            csvs: &both,
            relations: &[],
            machines: &machines,
            bags: &[],
            configmaps: &[],
        };
        let effects = super::decide(&related, &seen, &now());
        let names: Vec<&str> = effects.objects.iter().map(|d| d.name()).collect();
        // Both CSVs are in pods: each side also gets its remote data, with RBAC.
        assert_eq!(
            names,
            [
                "r.app",
                "r.db",
                "r.db.edge-a",
                "r.app.remote",
                "r.app.remote",
                "r.app.remote",
                "r.db.remote",
                "r.db.remote",
                "r.db.remote"
            ]
        );
        assert!(effects.status.is_none() && effects.removals.is_empty());
        // As applied: nothing to do.
        let (live, configmaps) = applied(&effects);
        let live: Vec<&Databag> = live.iter().collect();
        let configmaps: Vec<&PartialObjectMeta<ConfigMap>> = configmaps.iter().collect();
        seen.bags = &live;
        seen.configmaps = &configmaps;
        assert!(super::decide(&related, &seen, &now()).is_empty());
        // One side uninstalled: not Ready, every bag goes, and each side's
        // ConfigMap, Role and RoleBinding.
        let one = [&app];
        seen.csvs = &one;
        let effects = super::decide(&related, &seen, &now());
        assert!(effects.objects.is_empty());
        assert_eq!(effects.removals.len(), 3 + 2 * 3);
    }

    /// The Databags and ConfigMaps among the objects `effects` apply, as the
    /// stores would hold them once applied.
    fn applied(effects: &Effects<RelationStatus>) -> (Vec<Databag>, Vec<PartialObjectMeta<ConfigMap>>) {
        let of = |kind: &str| {
            effects
                .objects
                .iter()
                .filter(|d| d.resource.kind == kind)
                .map(|d| serde_json::to_value(&d.object).unwrap())
                .collect::<Vec<_>>()
        };
        let bags = of("Databag")
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap());
        let maps = of("ConfigMap")
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap());
        (bags.collect(), maps.collect())
    }

    #[test]
    fn a_side_in_pods_gets_the_remote_data_and_the_rbac_to_read_it() {
        let (app, mut db) = (csv("app", "Succeeded", APP), csv("db", "Succeeded", DB));
        // db runs on machines: it gets no ConfigMap; app, in pods, gets db's data.
        db.spec.install = serde_json::from_value(serde_json::json!({
            "strategy": "machine", "spec": {"pool": "edge", "hooks": {"configMap": "hooks"}}}))
        .unwrap();
        let related = settled(relation("r", 10, &["app", "db"]), &[&app, &db]);
        let bag = |name: &str, application: &str, unit: Option<&str>, data: serde_json::Value| -> Databag {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Databag",
                "metadata": {"name": name, "namespace": "ns", "labels": {"model.olm-rs.dev/relation": "r"}},
                "spec": {"relation": "r", "application": application, "endpoint": "db", "unit": unit},
                "status": {"data": data},
            }))
            .unwrap()
        };
        let bags = [
            bag("r.db", "db", None, serde_json::json!({"host": "db.local"})),
            bag(
                "r.db.edge-a",
                "db",
                Some("edge-a"),
                serde_json::json!({"port": "5432"}),
            ),
            bag("r.app", "app", None, serde_json::json!({"user": "shop"})),
        ];
        let bags: Vec<&Databag> = bags.iter().collect();
        let csvs = [&app, &db];
        let seen = Seen {
            csvs: &csvs,
            relations: &[],
            machines: &[],
            bags: &bags,
            configmaps: &[],
        };
        let effects = super::decide(&related, &seen, &now());
        let (_, configmaps) = applied(&effects);
        assert_eq!(configmaps.len(), 1);
        let configmap = effects
            .objects
            .iter()
            .find(|d| d.resource.kind == "ConfigMap")
            .unwrap();
        let data = &configmap.object.data["data"];
        assert_eq!(
            *data,
            serde_json::json!({"host": "db.local", "edge-a.port": "5432"})
        );
        let role = effects
            .objects
            .iter()
            .find(|d| d.resource.kind == "Role")
            .unwrap();
        let rules = &role.object.data["rules"];
        assert_eq!(rules[0]["resourceNames"], serde_json::json!(["r.app.remote"]));
        assert_eq!(rules[2]["resources"], serde_json::json!(["databags/status"]));
        assert_eq!(rules[2]["resourceNames"], serde_json::json!(["r.app"]));
        let binding = effects
            .objects
            .iter()
            .find(|d| d.resource.kind == "RoleBinding")
            .unwrap();
        assert_eq!(binding.object.data["roleRef"]["name"], "r.app.remote");
        // A change of the remote data rewrites the ConfigMap (with a new hash).
        let configmaps: Vec<&PartialObjectMeta<ConfigMap>> = configmaps.iter().collect();
        let changed = bag("r.db", "db", None, serde_json::json!({"host": "db2.local"}));
        let bags = [&changed, bags[1], bags[2]];
        let seen = Seen {
            configmaps: &configmaps,
            bags: &bags,
            ..seen
        };
        let effects = super::decide(&related, &seen, &now());
        let kinds: Vec<&str> = effects
            .objects
            .iter()
            .map(|d| d.resource.kind.as_str())
            .filter(|kind| *kind != "Databag")
            .collect();
        assert_eq!(kinds, ["Role", "RoleBinding", "ConfigMap"]);
        let configmap = effects
            .objects
            .iter()
            .find(|d| d.resource.kind == "ConfigMap")
            .unwrap();
        assert_eq!(configmap.object.data["data"]["host"], "db2.local");
    }

    #[test]
    fn a_made_relation_holds_while_its_csvs_leave_succeeded_and_breaks_when_one_is_gone() {
        let (app, db) = (csv("app", "Succeeded", APP), csv("db", "Succeeded", DB));
        let made = settled(relation("r", 10, &["app", "db"]), &[&app, &db]);
        let peers = settled(relation("p", 10, &["app:ring", "app:ring"]), &[&app]);
        // Scaling: the CSV goes back to Installing until its new units are active.
        let scaling = csv("app", "Installing", APP);
        // Upgrading: the old CSV is Replacing, the new one Installing.
        let old = csv("db", "Replacing", DB);
        let mut new = csv("db", "Installing", DB);
        new.metadata.name = Some("db.v1.1.0".into());
        let held: &[(&Relation, &[&ClusterServiceVersion])] = &[
            (&made, &[&scaling, &db]),
            (&made, &[&csv("app", "Failed", APP), &db]),
            (&peers, &[&scaling]),
        ];
        for (relation, csvs) in held {
            let effects = decide(relation, csvs, &[], &now());
            // No status write, and no bag removed: nothing changes.
            assert!(effects.status.is_none(), "{:?}", effects.status);
            assert!(effects.removals.is_empty());
        }
        // The incoming CSV takes its side over, and the relation stays made.
        let upgrading = decide(&made, &[&app, &old, &new], &[], &now());
        assert_eq!(ready(&upgrading).0, "True");
        assert!(upgrading.removals.is_empty());
        let endpoints = &upgrading.status.as_ref().unwrap().status.endpoints;
        assert_eq!(endpoints[1].csv, "db.v1.1.0");
        // Gone: the application's last CSV deleted.
        let gone = decide(&made, &[&app], &[], &now());
        assert_eq!(ready(&gone).1, "NotInstalled");
        // Not made yet: a CSV that has not succeeded is still refused.
        let fresh = decide(&relation("f", 10, &["app", "db"]), &[&scaling, &db], &[], &now());
        assert_eq!(ready(&fresh).1, "NotInstalled");
    }

    #[test]
    fn a_peer_relation_gets_one_set_of_bags_a_unit_bag_per_unit() {
        let app = csv("app", "Succeeded", APP);
        let machine = |name: &str| -> Machine {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
                "metadata": {"name": name, "namespace": "ns"}, "spec": {"pool": "edge"},
                "status": {"units": [{"csv": "app.v1.0.0", "version": "1.0.0", "state": "active", "application": "app"}]},
            }))
            .expect("a Machine")
        };
        let (a, b) = (machine("edge-a"), machine("edge-b"));
        let peers = settled(relation("p", 10, &["app:ring", "app:ring"]), &[&app]);
        let (csvs, machines) = ([&app], [&a, &b]);
        let seen = Seen {
            csvs: &csvs,
            relations: &[],
            machines: &machines,
            bags: &[],
            configmaps: &[],
        };
        let effects = super::decide(&peers, &seen, &now());
        let names: Vec<&str> = effects
            .objects
            .iter()
            .filter(|d| d.resource.kind == "Databag")
            .map(|d| d.name())
            .collect();
        assert_eq!(names, ["p.app", "p.app.edge-a", "p.app.edge-b"]);
        // A unit gone (scaled down): its bag goes, the others stay.
        let (live, configmaps) = applied(&effects);
        let live: Vec<&Databag> = live.iter().collect();
        let configmaps: Vec<&PartialObjectMeta<ConfigMap>> = configmaps.iter().collect();
        let one = [&a];
        let seen = Seen {
            machines: &one,
            bags: &live,
            configmaps: &configmaps,
            ..seen
        };
        let effects = super::decide(&peers, &seen, &now());
        assert!(effects.objects.is_empty());
        let removed: Vec<&str> = effects.removals.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(removed, ["p.app.edge-b"]);
    }

    #[test]
    fn every_reason_is_a_valid_condition_reason() {
        for reason in RelationReason::ALL {
            assert!(
                olm_runtime::conditions::is_valid_reason(reason.as_str()),
                "{reason:?}"
            );
        }
    }
}
