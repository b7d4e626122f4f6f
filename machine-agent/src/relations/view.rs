//! What one unit of this machine sees of its application's relations (pure):
//! from the namespace's Relations and Databags, each Ready relation in which
//! the unit has its own bag, with the other side's application, its units and
//! their data.
//!
//! A relation is in view for a unit once olm-operator made the unit's own bag
//! (so that `relation-set` in `-relation-created` has a bag to write), and the
//! remote side is known from its bags: the units there are the units with a
//! bag, which olm-operator keeps to the units the Machines report. A Relation
//! being deleted, or no longer Ready (its bags then go), is out of view.
//!
//! In a peer relation (an application related to itself on a `peers`
//! endpoint) the remote units are the application's other units, and the
//! remote application data is the application's own bag.

use std::collections::BTreeMap;

use kube::ResourceExt;
use olm_api::model::{Databag, RELATION_LABEL, Relation, unit_name};

/// A bag's data: key → value.
pub type Data = BTreeMap<String, String>;

/// One relation as a unit sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelationView {
    /// The Relation's uid: a Relation deleted and made again under the same
    /// name is another relation.
    pub uid: String,
    /// The unit's endpoint in it.
    pub endpoint: String,
    /// The other side's application.
    pub remote_app: String,
    /// The other side's units (`app/machine`), with their data.
    pub remote_units: BTreeMap<String, Data>,
    /// The other side's application data.
    pub remote_app_data: Data,
}

/// The relations in view for the unit of `application` on Machine `machine`,
/// by Relation name, given the namespace's Relations and Databags.
pub fn views(
    application: &str,
    machine: &str,
    relations: &[&Relation],
    bags: &[&Databag],
) -> BTreeMap<String, RelationView> {
    relations
        .iter()
        .filter(|r| r.metadata.deletion_timestamp.is_none() && is_ready(r))
        .filter_map(|r| {
            let name = r.name_any();
            let of_relation: Vec<&&Databag> = bags
                .iter()
                .filter(|b| b.labels().get(RELATION_LABEL) == Some(&name) && b.spec.relation == name)
                .collect();
            let own = of_relation
                .iter()
                .find(|b| b.spec.application == application && b.spec.unit.as_deref() == Some(machine))?;
            let peer = is_peer(r);
            // A peer relation's other side is the application's other units,
            // and its application bag is the application's own.
            let remote: Vec<&&&Databag> = of_relation
                .iter()
                .filter(|b| {
                    if peer {
                        b.spec.application == application && b.spec.unit.as_deref() != Some(machine)
                    } else {
                        b.spec.application != application
                    }
                })
                .collect();
            let remote_app = if peer {
                application.to_owned()
            } else {
                remote.first()?.spec.application.clone()
            };
            let data = |bag: &Databag| bag.status.as_ref().map(|s| s.data.clone()).unwrap_or_default();
            let remote_units = remote
                .iter()
                .filter_map(|b| {
                    let machine = b.spec.unit.as_deref()?;
                    Some((unit_name(&remote_app, machine), data(b)))
                })
                .collect();
            let remote_app_data = remote
                .iter()
                .find(|b| b.spec.unit.is_none())
                .map(|b| data(b))
                .unwrap_or_default();
            let view = RelationView {
                uid: r.uid().unwrap_or_default(),
                endpoint: own.spec.endpoint.clone(),
                remote_app,
                remote_units,
                remote_app_data,
            };
            Some((name, view))
        })
        .collect()
}

/// The Ready relations of `application` in which the unit on Machine
/// `machine` has no bag yet: olm-operator makes it once the Machine reports
/// the unit. A unit in setup waits for them, so that each relation gets its
/// `-relation-created` before `start`, as in Juju's setup phase.
pub fn awaited(application: &str, machine: &str, relations: &[&Relation], bags: &[&Databag]) -> Vec<String> {
    relations
        .iter()
        .filter(|r| r.metadata.deletion_timestamp.is_none() && is_ready(r))
        .filter(|r| {
            r.status
                .iter()
                .flat_map(|s| s.endpoints.iter())
                .any(|side| side.application == application)
        })
        .map(|r| r.name_any())
        .filter(|name| {
            !bags.iter().any(|b| {
                b.spec.relation == *name
                    && b.spec.application == application
                    && b.spec.unit.as_deref() == Some(machine)
            })
        })
        .collect()
}

/// Whether the Relation relates an application to itself (its resolved
/// endpoints are one application's one `peers` endpoint).
fn is_peer(relation: &Relation) -> bool {
    match relation.status.as_ref().map(|s| s.endpoints.as_slice()) {
        Some([a, b]) => a.application == b.application && a.endpoint == b.endpoint,
        _ => false,
    }
}

/// Whether the Relation's `Ready` condition is true.
fn is_ready(relation: &Relation) -> bool {
    relation
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn relation(name: &str, ready: bool) -> Relation {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Relation",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"endpoints": [{"application": "web"}, {"application": "db"}]},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                "reason": "Related", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .expect("a Relation")
    }

    pub(crate) fn bag(
        relation: &str,
        application: &str,
        unit: Option<&str>,
        data: &[(&str, &str)],
    ) -> Databag {
        let name = match unit {
            Some(unit) => format!("{relation}.{application}.{unit}"),
            None => format!("{relation}.{application}"),
        };
        let endpoint = if application == "db" { "db" } else { "database" };
        let data: Data = data
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Databag",
            "metadata": {"name": name, "namespace": "ns", "labels": {RELATION_LABEL: relation}},
            "spec": {"relation": relation, "application": application, "endpoint": endpoint,
                     "pool": "edge", "unit": unit},
            "status": {"data": data},
        }))
        .expect("a Databag")
    }

    #[test]
    fn a_unit_awaits_its_bag_in_each_ready_relation_of_its_application() {
        let with_sides = |name: &str, ready: bool| {
            let mut r = relation(name, ready);
            let side = |application: &str| {
                serde_json::from_value(serde_json::json!({
                    "application": application, "namespace": "ns", "csv": format!("{application}.v1"),
                    "endpoint": "e", "role": "provides", "interface": "i",
                }))
                .expect("an endpoint")
            };
            r.status.as_mut().expect("a status").endpoints = vec![side("web"), side("db")];
            r
        };
        let (r, q, not_ready) = (
            with_sides("r", true),
            with_sides("q", true),
            with_sides("p", false),
        );
        let bags = [
            bag("r", "web", Some("edge-a"), &[]),
            bag("q", "web", Some("edge-b"), &[]),
        ];
        let bags: Vec<&Databag> = bags.iter().collect();
        let relations = [&r, &q, &not_ready];
        assert_eq!(awaited("web", "edge-a", &relations, &bags), ["q"]);
        assert_eq!(awaited("web", "edge-b", &relations, &bags), ["r"]);
        assert!(awaited("cache", "edge-a", &relations, &bags).is_empty());
        // The fixture's Relation without resolved endpoints awaits nothing.
        assert!(awaited("web", "edge-c", &[&relation("s", true)], &bags).is_empty());
    }

    #[test]
    fn a_unit_sees_a_ready_relation_once_it_has_its_own_bag() {
        let (r, not_ready) = (relation("r", true), relation("q", false));
        let bags = [
            bag("r", "web", None, &[]),
            bag("r", "web", Some("edge-a"), &[]),
            bag("r", "db", None, &[("version", "16")]),
            bag("r", "db", Some("dbs-a"), &[("host", "10.0.0.1")]),
            bag("r", "db", Some("dbs-b"), &[]),
            bag("q", "web", Some("edge-a"), &[]),
            bag("q", "db", None, &[]),
        ];
        let bags: Vec<&Databag> = bags.iter().collect();
        let seen = views("web", "edge-a", &[&r, &not_ready], &bags);
        assert_eq!(seen.keys().collect::<Vec<_>>(), ["r"]);
        let view = &seen["r"];
        assert_eq!(view.uid, "uid-r");
        assert_eq!(view.endpoint, "database");
        assert_eq!(view.remote_app, "db");
        assert_eq!(
            view.remote_units.keys().collect::<Vec<_>>(),
            ["db/dbs-a", "db/dbs-b"]
        );
        assert_eq!(view.remote_units["db/dbs-a"]["host"], "10.0.0.1");
        assert_eq!(view.remote_app_data["version"], "16");
        // Another machine of web has no bag yet: nothing in view there.
        assert!(views("web", "edge-b", &[&r], &bags).is_empty());
        // The other side sees its own side of it.
        let db = views("db", "dbs-a", &[&r], &bags);
        assert_eq!(db["r"].remote_app, "web");
        assert_eq!(db["r"].endpoint, "db");
        assert_eq!(db["r"].remote_units.keys().collect::<Vec<_>>(), ["web/edge-a"]);
    }

    fn peer_relation(name: &str) -> Relation {
        let mut r = relation(name, true);
        let side = serde_json::json!({"application": "db", "namespace": "ns", "csv": "db.v1",
            "endpoint": "ring", "role": "peers", "interface": "db-ring"});
        r.status.as_mut().unwrap().endpoints =
            serde_json::from_value(serde_json::json!([side, side])).expect("endpoints");
        r
    }

    #[test]
    fn a_unit_sees_its_peers_in_a_peer_relation() {
        let r = peer_relation("p");
        let bags = [
            bag("p", "db", None, &[("leader", "dbs-a")]),
            bag("p", "db", Some("dbs-a"), &[("id", "a")]),
            bag("p", "db", Some("dbs-b"), &[("id", "b")]),
            bag("p", "db", Some("dbs-c"), &[]),
        ];
        let bags: Vec<&Databag> = bags.iter().collect();
        let seen = views("db", "dbs-a", &[&r], &bags);
        let view = &seen["p"];
        assert_eq!(view.remote_app, "db");
        assert_eq!(view.endpoint, "db");
        assert_eq!(
            view.remote_units.keys().collect::<Vec<_>>(),
            ["db/dbs-b", "db/dbs-c"]
        );
        assert_eq!(view.remote_units["db/dbs-b"]["id"], "b");
        assert_eq!(view.remote_app_data["leader"], "dbs-a");
        // A lone unit sees the relation, with no peer yet.
        let alone = [bag("p", "db", None, &[]), bag("p", "db", Some("dbs-a"), &[])];
        let alone: Vec<&Databag> = alone.iter().collect();
        assert!(views("db", "dbs-a", &[&r], &alone)["p"].remote_units.is_empty());
    }

    #[test]
    fn a_relation_being_deleted_is_out_of_view() {
        let mut r = relation("r", true);
        r.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        let bags = [bag("r", "web", Some("edge-a"), &[]), bag("r", "db", None, &[])];
        let bags: Vec<&Databag> = bags.iter().collect();
        assert!(views("web", "edge-a", &[&r], &bags).is_empty());
    }
}
