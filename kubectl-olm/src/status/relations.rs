//! The relations of `status`, as `juju status --relations` shows them: each
//! Relation's provider and requirer (`application:endpoint`), interface and
//! state, and the units on each side (from their Databags), the leader of
//! each application marked `*` (from the units the Machines report).

use kube::ResourceExt;
use olm_api::{
    endpoints::Role,
    model::{Databag, RELATION_LABEL, Relation, unit_name},
    substrate::Machine,
};
use serde::Serialize;

use crate::table::{Cell, Table, Tone};

/// One relation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RelationRow {
    /// Namespace.
    pub namespace: String,
    /// The Relation.
    pub name: String,
    /// The providing side, `application:endpoint` (while the relation is not
    /// resolved: the spec's first side, as it names it).
    pub provider: String,
    /// The requiring side (while unresolved: the spec's second side).
    pub requirer: String,
    /// The interface.
    pub interface: String,
    /// `Related`, or why the relation cannot be made.
    pub state: String,
    /// The units of both sides (`application/machine`), the leaders marked `*`.
    pub units: Vec<String>,
}

/// The rows of `relations`, with their units from `bags` and the leaders from `machines`.
pub fn rows(relations: &[Relation], bags: &[Databag], machines: &[Machine]) -> Vec<RelationRow> {
    let mut rows: Vec<RelationRow> = relations.iter().map(|r| row(r, bags, machines)).collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    rows
}

fn row(relation: &Relation, bags: &[Databag], machines: &[Machine]) -> RelationRow {
    let namespace = relation.namespace().unwrap_or_default();
    let name = relation.name_any();
    let status = relation.status.clone().unwrap_or_default();
    let side = |role: Role, index: usize| {
        status
            .endpoints
            .iter()
            .find(|e| e.role == role)
            .map(|e| format!("{}:{}", e.application, e.endpoint))
            .or_else(|| {
                relation.spec.endpoints.get(index).map(|e| match &e.endpoint {
                    Some(endpoint) => format!("{}:{endpoint}", e.application),
                    None => e.application.clone(),
                })
            })
            .unwrap_or_default()
    };
    let state = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .map_or_else(|| "Pending".to_owned(), |c| c.reason.clone());
    let mut units: Vec<String> = bags
        .iter()
        .filter(|b| b.namespace() == relation.namespace() && b.labels().get(RELATION_LABEL) == Some(&name))
        .filter_map(|b| {
            let machine = b.spec.unit.as_deref()?;
            let leads = leads(machines, machine, &b.spec.application);
            let unit = unit_name(&b.spec.application, machine);
            Some(if leads { format!("{unit}*") } else { unit })
        })
        .collect();
    units.sort();
    RelationRow {
        namespace,
        name,
        provider: side(Role::Provides, 0),
        requirer: side(Role::Requires, 1),
        interface: status
            .endpoints
            .first()
            .map(|e| e.interface.clone())
            .unwrap_or_default(),
        state,
        units,
    }
}

/// Whether Machine `machine` reports that its unit of `application` leads it.
fn leads(machines: &[Machine], machine: &str, application: &str) -> bool {
    machines
        .iter()
        .filter(|m| m.name_any() == machine)
        .flat_map(|m| m.status.iter().flat_map(|s| s.units.iter().flatten()))
        .any(|u| u.leader && u.application.as_deref() == Some(application))
}

/// The relations table.
pub fn table(rows: &[RelationRow], namespaces: bool) -> Table {
    let mut headers = if namespaces { vec!["NAMESPACE"] } else { Vec::new() };
    headers.extend(["RELATION", "PROVIDER", "REQUIRER", "INTERFACE", "STATE", "UNITS"]);
    let mut table = Table::new(&headers);
    for row in rows {
        let tone = if row.state == "Related" {
            Tone::Good
        } else {
            Tone::Bad
        };
        let mut cells: Vec<Cell> = if namespaces {
            vec![row.namespace.as_str().into()]
        } else {
            Vec::new()
        };
        cells.extend([
            row.name.as_str().into(),
            row.provider.as_str().into(),
            row.requirer.as_str().into(),
            row.interface.as_str().into(),
            Cell::toned(row.state.clone(), tone),
            row.units.join(" ").into(),
        ]);
        table.row(cells);
    }
    table
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
        serde_json::from_value(value).expect("a valid object")
    }

    fn bag(application: &str, unit: Option<&str>) -> Databag {
        object(
            json!({"apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Databag",
            "metadata": {"name": format!("r.{application}.{}", unit.unwrap_or("")), "namespace": "team",
                         "labels": {RELATION_LABEL: "r"}},
            "spec": {"relation": "r", "application": application, "endpoint": "x", "unit": unit}}),
        )
    }

    #[test]
    fn a_relation_shows_its_sides_interface_and_units_with_their_leaders() {
        let relation: Relation = object(
            json!({"apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Relation",
            "metadata": {"name": "r", "namespace": "team"},
            "spec": {"endpoints": [{"application": "web"}, {"application": "db"}]},
            "status": {"endpoints": [
                {"application": "web", "namespace": "team", "csv": "web.v1", "endpoint": "database", "role": "requires", "interface": "pg"},
                {"application": "db", "namespace": "team", "csv": "db.v1", "endpoint": "db", "role": "provides", "interface": "pg"}],
              "conditions": [{"type": "Ready", "status": "True", "reason": "Related", "message": "",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
        );
        let unrelated: Relation = object(
            json!({"apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "Relation",
            "metadata": {"name": "q", "namespace": "team"},
            "spec": {"endpoints": [{"application": "web", "endpoint": "cache"}, {"application": "redis"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "NotInstalled",
                       "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
        );
        let bags = [
            bag("db", None),
            bag("db", Some("dbs-a")),
            bag("web", Some("webs-a")),
            bag("web", Some("webs-b")),
        ];
        let machine: Machine = object(
            json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": "webs-b", "namespace": "team"}, "spec": {"pool": "webs"},
            "status": {"units": [{"csv": "web.v1", "version": "1", "state": "active", "application": "web", "leader": true}]}}),
        );
        let rows = rows(&[relation, unrelated], &bags, &[machine]);
        assert_eq!(
            table(&rows, false).render(false),
            "\
RELATION  PROVIDER   REQUIRER      INTERFACE  STATE         UNITS
q         web:cache  redis                    NotInstalled
r         db:db      web:database  pg         Related       db/dbs-a web/webs-a web/webs-b*
"
        );
    }
}
