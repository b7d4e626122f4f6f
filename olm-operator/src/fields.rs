//! Which fields of a live object other writers own, so that an object whose
//! live copy carries the desired hash is still written again when someone
//! else changed a field this operator sets (a user's edit of a Role, a
//! `kubectl scale` of a Deployment).
//!
//! Server-side apply records who owns each field (`managedFields`). When
//! another writer changes a field this operator applied, that field moves to
//! the other writer's entry; fields other controllers add beside ours (the
//! Deployment controller's revision annotation, a status) stay apart from
//! ours. So an object drifted exactly when a field owned by another entry of
//! the main resource is one the desired object sets. The stores keep, for
//! each object, the paths of those foreign fields ([`FOREIGN_FIELDS`], in
//! memory only), and [`LiveCopies::foreign_fields`] hands them to the
//! applier, which compares them with the desired object ([`overlaps`]).
//! Paths stop at lists: a list is one field, as this operator sets it whole.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use kube::api::ApiResource;
use olm_runtime::effects::Live;
use serde_json::Value;

use crate::context::FIELD_MANAGER;

/// The annotation under which a store keeps (in memory, never written) the
/// paths of the fields other writers own, as a JSON list of paths.
pub const FOREIGN_FIELDS: &str = "olm-rs.dev/foreign-fields";

/// A field's path: the names from the object's root, ending at a leaf or a list.
pub type Path = Vec<String>;

/// Live copies as the CSV controller's applier reads them: the desired hash
/// they carry ([`Live`]) and the fields other writers own.
pub trait LiveCopies: Live {
    /// The paths of the fields writers other than this operator own on the
    /// live object; none when it is not in a store.
    fn foreign_fields(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Vec<Path>;

    /// The objects of `resource`'s kind in the stores that carry every one of
    /// `labels`, as (namespace, name); none without a store of the kind.
    fn labelled(&self, resource: &ApiResource, labels: &BTreeMap<String, String>) -> Vec<Key>;
}

/// An object's namespace (none for a cluster-scoped one) and name.
pub type Key = (Option<String>, String);

/// No store: nothing is known, every object is written.
impl LiveCopies for () {
    fn foreign_fields(&self, _: &ApiResource, _: Option<&str>, _: &str) -> Vec<Path> {
        Vec::new()
    }

    fn labelled(&self, _: &ApiResource, _: &BTreeMap<String, String>) -> Vec<Key> {
        Vec::new()
    }
}

impl LiveCopies for olm_runtime::live::LiveStores {
    fn foreign_fields(&self, _: &ApiResource, _: Option<&str>, _: &str) -> Vec<Path> {
        Vec::new()
    }

    fn labelled(&self, _: &ApiResource, _: &BTreeMap<String, String>) -> Vec<Key> {
        Vec::new()
    }
}

/// Records in `meta` the paths of the fields that writers other than this
/// operator own on the main resource (not on a subresource such as
/// `status`), then drops the managed fields: what a store keeps.
pub fn keep_foreign_fields(meta: &mut ObjectMeta) {
    let entries = meta.managed_fields.take().unwrap_or_default();
    let paths = foreign_paths(&entries, FIELD_MANAGER);
    if paths.is_empty() {
        return;
    }
    let text = serde_json::to_string(&paths).unwrap_or_default();
    meta.annotations
        .get_or_insert_default()
        .insert(FOREIGN_FIELDS.to_owned(), text);
}

/// The paths [`keep_foreign_fields`] recorded in `meta`.
pub fn recorded(meta: &ObjectMeta) -> Vec<Path> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(FOREIGN_FIELDS))
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// The paths of the fields the entries of managers other than `manager` own
/// on the main resource.
pub fn foreign_paths(entries: &[ManagedFieldsEntry], manager: &str) -> Vec<Path> {
    let mut paths = Vec::new();
    for entry in entries {
        let ours = entry.manager.as_deref() == Some(manager);
        let subresource = entry.subresource.as_deref().is_some_and(|s| !s.is_empty());
        if ours || subresource {
            continue;
        }
        if let Some(fields) = &entry.fields_v1 {
            owned_paths(&fields.0, &mut Vec::new(), &mut paths);
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// The leaf paths of a `fieldsV1` tree (`f:name` keys; `k:`, `v:` and `i:`
/// keys are items of a list, which ends the path).
fn owned_paths(fields: &Value, path: &mut Path, out: &mut Vec<Path>) {
    let Some(map) = fields.as_object() else {
        return;
    };
    let mut children = false;
    for (key, value) in map {
        if key == "." {
            continue;
        }
        children = true;
        match key.strip_prefix("f:") {
            Some(name) => {
                path.push(name.to_owned());
                owned_paths(value, path, out);
                path.pop();
            }
            // A list item: the list is the field.
            None => {
                out.push(path.clone());
                return;
            }
        }
    }
    if !children && !path.is_empty() {
        out.push(path.clone());
    }
}

/// The leaf paths of the fields `object` sets (`apiVersion`, `kind`, the
/// name and the namespace aside, which nobody can change).
pub fn set_paths(object: &Value) -> Vec<Path> {
    let mut out = Vec::new();
    if let Some(map) = object.as_object() {
        for (key, value) in map {
            if matches!(key.as_str(), "apiVersion" | "kind") {
                continue;
            }
            let mut path = vec![key.clone()];
            value_paths(value, &mut path, &mut out);
        }
    }
    out.retain(|p| p != &["metadata", "name"] && p != &["metadata", "namespace"]);
    out
}

fn value_paths(value: &Value, path: &mut Path, out: &mut Vec<Path>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                path.push(key.clone());
                value_paths(child, path, out);
                path.pop();
            }
        }
        Value::Null => {}
        _ => out.push(path.clone()),
    }
}

/// Whether a field another writer owns (`foreign`) is, contains or lies in
/// one the desired object sets (`desired`).
pub fn overlaps(desired: &[Path], foreign: &[Path]) -> bool {
    foreign
        .iter()
        .any(|f| desired.iter().any(|d| d.starts_with(f) || f.starts_with(d)))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    use super::*;

    fn entry(manager: &str, subresource: Option<&str>, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.to_owned()),
            subresource: subresource.map(str::to_owned),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    fn paths(list: &[&[&str]]) -> Vec<Path> {
        list.iter()
            .map(|p| p.iter().map(|s| (*s).to_owned()).collect())
            .collect()
    }

    #[test]
    fn fields_of_other_writers_are_kept_as_paths() {
        let entries = [
            entry(
                FIELD_MANAGER,
                None,
                json!({"f:rules": {}, "f:metadata": {"f:labels": {"f:a": {}}}}),
            ),
            entry(
                "kube-controller-manager",
                None,
                json!({"f:metadata": {"f:annotations": {".": {}, "f:deployment.kubernetes.io/revision": {}}}}),
            ),
            entry(
                "kube-controller-manager",
                Some("status"),
                json!({"f:status": {"f:replicas": {}}}),
            ),
            entry(
                "kubectl-edit",
                None,
                json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {"f:image": {}}}}}}}),
            ),
        ];
        assert_eq!(
            foreign_paths(&entries, FIELD_MANAGER),
            paths(&[
                &["metadata", "annotations", "deployment.kubernetes.io/revision"],
                &["spec", "template", "spec", "containers"],
            ])
        );
    }

    #[test]
    fn an_object_drifted_when_another_writer_owns_a_field_it_sets() {
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r", "namespace": "ops", "labels": {"olm.owner": "demo"},
                         "annotations": {"olm-rs.dev/desired-hash": "h"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        });
        let desired = set_paths(&role);
        assert!(desired.contains(&vec!["rules".to_owned()]));
        assert!(!desired.contains(&vec!["metadata".to_owned(), "name".to_owned()]));
        // (what, foreign fields, drifted)
        let cases: [(&str, &[&[&str]], bool); 5] = [
            ("nobody else", &[], false),
            ("an edit of the rules", &[&["rules"]], true),
            (
                "another annotation",
                &[&["metadata", "annotations", "note"]],
                false,
            ),
            ("one of its labels", &[&["metadata", "labels", "olm.owner"]], true),
            ("all labels at once", &[&["metadata", "labels"]], true),
        ];
        for (what, foreign, drifted) in cases {
            assert_eq!(overlaps(&desired, &paths(foreign)), drifted, "{what}");
        }
    }

    #[test]
    fn a_store_keeps_the_foreign_paths_and_drops_the_managed_fields() {
        let mut meta = ObjectMeta {
            managed_fields: Some(vec![
                entry(FIELD_MANAGER, None, json!({"f:rules": {}})),
                entry("kubectl-patch", None, json!({"f:rules": {}})),
            ]),
            ..ObjectMeta::default()
        };
        keep_foreign_fields(&mut meta);
        assert_eq!(meta.managed_fields, None);
        assert_eq!(recorded(&meta), paths(&[&["rules"]]));
        let mut untouched = ObjectMeta {
            managed_fields: Some(vec![entry(FIELD_MANAGER, None, json!({"f:rules": {}}))]),
            ..ObjectMeta::default()
        };
        keep_foreign_fields(&mut untouched);
        assert_eq!(untouched.annotations, None);
        assert!(recorded(&untouched).is_empty());
    }
}
