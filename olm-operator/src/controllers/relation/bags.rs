//! The Databags of a Ready relation (pure): for each side, the application's
//! bag and one bag per unit of that application, the units as the Machines of
//! the namespace report them. A bag is owned by its Relation (removing the
//! Relation removes its bags); bags no longer wanted (a unit gone, the
//! relation no longer Ready) are removed. Only what differs from the live
//! bags is written: their spec, never their data.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};
use olm_api::{
    model::{
        APPLICATION_LABEL, Databag, DatabagSpec, RELATION_LABEL, Relation, ResolvedEndpoint, application_bag,
        application_of, unit_bag,
    },
    substrate::Machine,
    v1alpha1::ClusterServiceVersion,
};
use olm_runtime::effects::{DESIRED_HASH, Desired, Removal};

/// One side of a relation, as its bags are made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BagSide {
    /// The application (the package of its CSV, as agents name it).
    pub application: String,
    /// The endpoint.
    pub endpoint: String,
    /// The pool of an application on machines.
    pub pool: Option<String>,
    /// The Machines that run a unit of it.
    pub machines: BTreeSet<String>,
}

/// The sides of `joined` with the units the Machines report, given the CSVs
/// and Machines of the relation's namespace.
pub fn sides(
    joined: &[ResolvedEndpoint],
    csvs: &[&ClusterServiceVersion],
    machines: &[&Machine],
) -> Vec<BagSide> {
    joined
        .iter()
        .map(|side| {
            let csv = csvs.iter().find(|c| c.name_any() == side.csv);
            let application = csv.map_or_else(
                || side.application.clone(),
                |c| application_of(&side.csv, &side.namespace, c.labels()),
            );
            let pool = csv.and_then(|c| c.spec.install.machine()).map(|m| m.pool.clone());
            let machines = machines
                .iter()
                .filter(|m| runs_unit_of(m, &application, &side.csv))
                .map(|m| m.name_any())
                .collect();
            BagSide {
                application,
                endpoint: side.endpoint.clone(),
                pool,
                machines,
            }
        })
        .collect()
}

/// Whether Machine `machine` reports a unit of `application` (or, from an
/// agent that names no application, of CSV `csv`).
fn runs_unit_of(machine: &Machine, application: &str, csv: &str) -> bool {
    machine
        .status
        .iter()
        .flat_map(|s| s.units.iter().flatten())
        .any(|u| match &u.application {
            Some(of) => of == application,
            None => u.csv == csv,
        })
}

/// The bags `relation` should have for `sides` (none when it is not Ready).
pub fn desired(relation: &Relation, sides: &[BagSide]) -> Vec<Databag> {
    let name = relation.name_any();
    let mut bags = Vec::new();
    for side in sides {
        let spec = |unit: Option<&String>| DatabagSpec {
            relation: name.clone(),
            application: side.application.clone(),
            endpoint: side.endpoint.clone(),
            pool: side.pool.clone(),
            unit: unit.cloned(),
        };
        bags.push(bag(
            relation,
            application_bag(&name, &side.application),
            spec(None),
        ));
        for machine in &side.machines {
            let bag_name = unit_bag(&name, &side.application, machine);
            bags.push(bag(relation, bag_name, spec(Some(machine))));
        }
    }
    bags
}

fn bag(relation: &Relation, name: String, spec: DatabagSpec) -> Databag {
    let labels = BTreeMap::from([
        (RELATION_LABEL.to_owned(), spec.relation.clone()),
        (APPLICATION_LABEL.to_owned(), spec.application.clone()),
    ]);
    Databag {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: relation.namespace(),
            labels: Some(labels),
            owner_references: relation.controller_owner_ref(&()).map(|owner| vec![owner]),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

/// The writes that bring the live bags of the relation (`live`: those
/// labelled with its name) to `wanted`: bags to apply (missing, or not as
/// wanted) and bags to remove.
pub fn changes(wanted: &[Databag], live: &[&Databag]) -> (Vec<Desired>, Vec<Removal>) {
    let mut apply = Vec::new();
    for bag in wanted {
        let Ok(desired) = Desired::owned(bag) else {
            continue;
        };
        let held = live
            .iter()
            .find(|l| l.name_any() == bag.name_any())
            .and_then(|l| l.annotations().get(DESIRED_HASH));
        if held.map(String::as_str) != desired.hash() {
            apply.push(desired);
        }
    }
    let names: BTreeSet<String> = wanted.iter().map(ResourceExt::name_any).collect();
    let removals = live
        .iter()
        .filter(|l| !names.contains(&l.name_any()))
        .map(|l| {
            let removal = Removal::of::<Databag>(l.namespace().as_deref(), &l.name_any());
            match l.uid() {
                Some(uid) => removal.with_uid(&uid),
                None => removal,
            }
        })
        .collect();
    (olm_runtime::effects::at_once(apply), removals)
}

#[cfg(test)]
mod tests {
    use olm_api::{endpoints::Role, model::RelationSpec};

    use super::*;

    fn machine(name: &str, units: serde_json::Value) -> Machine {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"pool": "edge"},
            "status": {"units": units},
        }))
        .expect("a Machine")
    }

    fn csv(package: &str, pool: &str) -> ClusterServiceVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": format!("{package}.v1"), "namespace": "ns",
                         "labels": {format!("operators.coreos.com/{package}.ns"): ""}},
            "spec": {"displayName": package, "install": {"strategy": "machine", "spec": {
                "pool": pool, "hooks": {"configMap": "hooks"}}}},
        }))
        .expect("a CSV")
    }

    fn resolved(application: &str, csv: &str, endpoint: &str) -> ResolvedEndpoint {
        ResolvedEndpoint {
            application: application.to_owned(),
            namespace: "ns".to_owned(),
            csv: csv.to_owned(),
            endpoint: endpoint.to_owned(),
            role: Role::Provides,
            interface: "pg".to_owned(),
        }
    }

    fn relation() -> Relation {
        let mut relation = Relation::new(
            "r",
            RelationSpec {
                endpoints: Vec::new(),
            },
        );
        relation.metadata.namespace = Some("ns".into());
        relation.metadata.uid = Some("uid-r".into());
        relation
    }

    #[test]
    fn each_side_gets_an_application_bag_and_one_per_unit() {
        let (db, app) = (csv("db", "edge"), csv("app", "apps"));
        let machines = [
            machine(
                "edge-a",
                serde_json::json!([
                {"csv": "db.v1", "version": "1", "state": "active", "application": "db"}]),
            ),
            machine(
                "edge-b",
                serde_json::json!([
                {"csv": "db.v1", "version": "1", "state": "active"}]),
            ),
            machine(
                "apps-a",
                serde_json::json!([
                {"csv": "app.v0", "version": "0", "state": "active", "application": "app"}]),
            ),
            machine("idle", serde_json::json!([])),
        ];
        let sides = sides(
            &[
                resolved("db", "db.v1", "db"),
                resolved("app.v1", "app.v1", "database"),
            ],
            &[&db, &app],
            &machines.iter().collect::<Vec<_>>(),
        );
        assert_eq!(sides[0].application, "db");
        assert_eq!(sides[0].pool.as_deref(), Some("edge"));
        assert_eq!(
            sides[0].machines,
            BTreeSet::from(["edge-a".into(), "edge-b".into()])
        );
        // Named by its CSV in the relation: the application is still the package.
        assert_eq!(sides[1].application, "app");
        assert_eq!(sides[1].machines, BTreeSet::from(["apps-a".into()]));

        let bags = desired(&relation(), &sides);
        let names: Vec<String> = bags.iter().map(ResourceExt::name_any).collect();
        assert_eq!(
            names,
            ["r.db", "r.db.edge-a", "r.db.edge-b", "r.app", "r.app.apps-a"]
        );
        assert_eq!(bags[0].spec.unit, None);
        assert_eq!(bags[1].spec.unit.as_deref(), Some("edge-a"));
        assert_eq!(bags[4].spec.endpoint, "database");
        assert_eq!(bags[4].spec.pool.as_deref(), Some("apps"));
        assert_eq!(bags[0].labels()[RELATION_LABEL], "r");
        assert_eq!(bags[0].owner_references()[0].uid, "uid-r");
    }

    #[test]
    fn only_missing_or_changed_bags_are_written_and_unwanted_ones_removed() {
        let side = BagSide {
            application: "db".into(),
            endpoint: "db".into(),
            pool: Some("edge".into()),
            machines: BTreeSet::from(["edge-a".into()]),
        };
        let wanted = desired(&relation(), &[side]);
        let (apply, remove) = changes(&wanted, &[]);
        assert_eq!(apply.len(), 2);
        assert!(remove.is_empty());
        // Live as applied (with their hash): nothing to write.
        let live: Vec<Databag> = apply
            .iter()
            .map(|d| serde_json::from_value(serde_json::to_value(&d.object).unwrap()).unwrap())
            .collect();
        let mut gone = live[1].clone();
        gone.metadata.name = Some("r.db.edge-z".into());
        gone.metadata.uid = Some("uid-z".into());
        let (apply, remove) = changes(&wanted, &[&live[0], &live[1], &gone]);
        assert!(apply.is_empty(), "{apply:?}");
        assert_eq!(remove.len(), 1);
        assert_eq!(remove[0].name, "r.db.edge-z");
        assert_eq!(remove[0].uid.as_deref(), Some("uid-z"));
        // Not Ready: every bag goes.
        let (_, remove) = changes(&[], &[&live[0], &live[1]]);
        assert_eq!(remove.len(), 2);
    }
}
