//! `Databag`: one side's data in a relation, as Juju's databags. Each side of
//! a Ready Relation has one application bag, written only by the leader of
//! that application, and one bag per unit, written only by that unit; the
//! other side reads them. Values are strings.
//!
//! olm-operator creates and removes the bags (its Relation controller): their
//! spec says whose they are. The data is in `status.data`, written through the
//! status subresource by the writer alone: the API server lets a machine's
//! agent write only the bags of its own units, and the application bag only
//! while its machine holds the application's leader Lease (RBAC and the
//! admission policies of `manifests/machine-agent-policy.yaml`). Removing the
//! Relation removes its bags (they are owned by it).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The spec of a Databag: whose data it holds (written by olm-operator).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "model.olm-rs.dev",
    version = "v1alpha1",
    kind = "Databag",
    plural = "databags",
    namespaced,
    status = "DatabagStatus",
    shortname = "bag",
    category = "olm",
    derive = "PartialEq",
    doc = "Databag holds one side's data in a Relation: its application's (written by the leader) or one unit's (written by that unit).",
    printcolumn(name = "Relation", type_ = "string", json_path = ".spec.relation"),
    printcolumn(name = "Application", type_ = "string", json_path = ".spec.application"),
    printcolumn(name = "Endpoint", type_ = "string", json_path = ".spec.endpoint"),
    printcolumn(name = "Unit", type_ = "string", json_path = ".spec.unit"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct DatabagSpec {
    /// The Relation (in the same namespace) the bag belongs to.
    pub relation: String,
    /// The application whose side it is (as the Relation's status names it).
    pub application: String,
    /// That application's endpoint in the relation.
    pub endpoint: String,
    /// The MachinePool that runs the application's units, for an application
    /// on machines: only agents of that pool may write the bag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The unit whose bag it is: the Machine it runs on. Without it, the bag
    /// is the application's, written by its leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

/// The data of a Databag, written by its writer alone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatabagStatus {
    /// Key → value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, String>,
}

/// Label on a Databag: the Relation it belongs to.
pub const RELATION_LABEL: &str = "model.olm-rs.dev/relation";
/// Label on a Databag: the application whose side it is.
pub const APPLICATION_LABEL: &str = "model.olm-rs.dev/application";

/// The name of the application bag of `application` in `relation`:
/// `<relation>.<application>`.
pub fn application_bag(relation: &str, application: &str) -> String {
    format!("{relation}.{application}")
}

/// The name of the bag of `application`'s unit on Machine `machine` in
/// `relation`: `<relation>.<application>.<machine>`.
pub fn unit_bag(relation: &str, application: &str, machine: &str) -> String {
    format!("{relation}.{application}.{machine}")
}

/// The name of the unit of `application` on Machine `machine`, as hooks see
/// it (Juju's `app/N`): `<application>/<machine>`.
pub fn unit_name(application: &str, machine: &str) -> String {
    format!("{application}/{machine}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_contract() {
        assert_eq!(application_bag("db", "demo-db"), "db.demo-db");
        assert_eq!(unit_bag("db", "demo-app", "edge-a"), "db.demo-app.edge-a");
        assert_eq!(unit_name("demo-app", "edge-a"), "demo-app/edge-a");
    }
}
