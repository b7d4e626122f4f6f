//! Whether a revision can be installed again over the CRDs the cluster holds
//! (pure): the check an InstallPlan makes before it updates a CRD
//! ([`crate::controllers::installplan::execute::dropped_stored_versions`]),
//! run in reverse: each CRD of the revision must still declare every version
//! in the live CRD's `status.storedVersions`, or the objects stored in a
//! version it lacks could no longer be read.

use olm_api::model::OperatorRevision;
use serde_json::Value;

use super::content;
use crate::controllers::installplan::execute::dropped_stored_versions;

/// A CRD of a revision that would drop versions objects are stored in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedVersions {
    /// The CRD.
    pub crd: String,
    /// The stored versions the revision's CRD does not declare.
    pub versions: Vec<String>,
}

impl std::fmt::Display for DroppedVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CRD {} stores objects in version(s) {} that the revision does not declare",
            self.crd,
            self.versions.join(", ")
        )
    }
}

/// The CRDs of `revision` that would drop stored versions of the live CRDs
/// `live` (by name, as the API server holds them), in the revision's order.
/// A CRD the cluster does not hold, or whose manifest cannot be read, drops
/// nothing here (a corrupt revision is refused before).
pub fn dropped(revision: &OperatorRevision, live: &[(String, Value)]) -> Vec<DroppedVersions> {
    revision
        .spec
        .objects
        .iter()
        .filter(|o| o.key.kind == "CustomResourceDefinition")
        .filter_map(|o| {
            let (_, existing) = live.iter().find(|(name, _)| *name == o.key.name)?;
            let old = content::manifest(o).ok()?;
            let versions = dropped_stored_versions(existing, &old);
            (!versions.is_empty()).then(|| DroppedVersions {
                crd: o.key.name.clone(),
                versions,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use olm_api::model::{ObjectKey, RecordedObject};
    use serde_json::json;

    use super::*;
    use crate::controllers::revision::decide::tests::fixtures::revision;

    fn crd(name: &str, versions: &[&str]) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": name},
               "spec": {"versions": versions.iter().map(|v| json!({"name": v, "served": true})).collect::<Vec<_>>()}})
    }

    fn live(name: &str, stored: &[&str]) -> (String, Value) {
        (
            name.to_owned(),
            json!({"metadata": {"name": name}, "status": {"storedVersions": stored}}),
        )
    }

    /// A revision whose CRDs are `crds` (name, versions); the second one
    /// gzipped, as a large CRD is kept.
    fn with_crds(crds: &[(&str, &[&str])]) -> OperatorRevision {
        let mut revision = revision("db.v1", 1, "u1");
        revision.spec.objects = crds
            .iter()
            .enumerate()
            .map(|(index, (name, versions))| {
                let key = ObjectKey {
                    group: "apiextensions.k8s.io".into(),
                    version: "v1".into(),
                    kind: "CustomResourceDefinition".into(),
                    name: (*name).into(),
                };
                let manifest = crd(name, versions);
                if index == 1 {
                    content::gzipped(key, &manifest).expect("gzip")
                } else {
                    RecordedObject {
                        key,
                        manifest: Some(manifest),
                        gzip: None,
                    }
                }
            })
            .collect();
        revision
    }

    /// Which CRDs and versions a rollback would drop (table).
    #[test]
    fn a_revision_may_not_drop_a_stored_version() {
        let things = "things.demo.io";
        let widgets = "widgets.demo.io";
        type Case<'a> = (
            &'a str,
            Vec<(&'a str, &'a [&'a str])>,
            Vec<(String, Value)>,
            Vec<DroppedVersions>,
        );
        let cases: Vec<Case> = vec![
            (
                "the same versions",
                vec![(things, &["v1"])],
                vec![live(things, &["v1"])],
                vec![],
            ),
            (
                "v2 stored since",
                vec![(things, &["v1"])],
                vec![live(things, &["v1", "v2"])],
                vec![DroppedVersions {
                    crd: things.into(),
                    versions: vec!["v2".into()],
                }],
            ),
            ("not in the cluster", vec![(things, &["v1"])], vec![], vec![]),
            (
                "a gzipped CRD is read too",
                vec![(things, &["v1"]), (widgets, &["v1"])],
                vec![live(things, &["v1"]), live(widgets, &["v1", "v2"])],
                vec![DroppedVersions {
                    crd: widgets.into(),
                    versions: vec!["v2".into()],
                }],
            ),
        ];
        for (case, crds, live, expected) in cases {
            assert_eq!(dropped(&with_crds(&crds), &live), expected, "{case}");
        }
        let message = DroppedVersions {
            crd: things.into(),
            versions: vec!["v2".into(), "v3".into()],
        }
        .to_string();
        assert_eq!(
            message,
            "CRD things.demo.io stores objects in version(s) v2, v3 that the revision does not declare"
        );
    }
}
