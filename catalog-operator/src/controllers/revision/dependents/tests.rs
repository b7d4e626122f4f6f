//! Table tests of the dependents check: which needs of installed operators a
//! revision meets, as the resolver answers.

use olm_api::v1alpha1::{ClusterServiceVersion, Subscription};
use serde_json::{Value, json};

use super::*;
use crate::controllers::revision::decide::tests::fixtures::subscription;

/// CSV `name` of package `package` at `version`, with `properties` (as OLM
/// writes them at install), owning the CRDs `owned` and requiring `required`.
fn csv(
    name: &str,
    package: &str,
    version: &str,
    properties: &[Value],
    owned: &[&str],
    required: &[&str],
) -> ClusterServiceVersion {
    let mut all = vec![json!({"type": "olm.package", "value": {"packageName": package, "version": version}})];
    all.extend(properties.iter().cloned());
    let crd = |kind: &str| json!({"name": format!("{}s.demo.io", kind.to_lowercase()), "version": "v1", "kind": kind});
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": "team",
                     "annotations": {"operatorframework.io/properties": json!({"properties": all}).to_string()}},
        "spec": {"displayName": name, "version": version,
                 "install": {"strategy": "deployment", "spec": {"deployments": []}},
                 "customresourcedefinitions": {
                     "owned": owned.iter().map(|k| crd(k)).collect::<Vec<_>>(),
                     "required": required.iter().map(|k| crd(k)).collect::<Vec<_>>()}},
        "status": {"phase": "Succeeded"},
    }))
    .expect("a CSV")
}

fn needs_db(range: &str) -> Value {
    json!({"type": "olm.package.required", "value": {"packageName": "db", "versionRange": range}})
}

/// The current db (2.0.0, owning Db and Backup) and the revision (1.0.0, owning Db).
fn db() -> (ClusterServiceVersion, ClusterServiceVersion) {
    (
        csv("db.v2", "db", "2.0.0", &[], &["Db", "Backup"], &[]),
        csv("db.v1", "db", "1.0.0", &[], &["Db"], &[]),
    )
}

fn check(
    subscription: &Subscription,
    revision: &ClusterServiceVersion,
    others: &[ClusterServiceVersion],
) -> Option<Broken> {
    let (current, _) = db();
    let mut csvs: Vec<&ClusterServiceVersion> = vec![&current];
    csvs.extend(others);
    broken(&Read {
        subscription,
        current: "db.v2",
        revision,
        csvs: &csvs,
    })
}

/// Whether each installed operator's need lets db go back to 1.0.0, and who
/// is named when not (table).
#[test]
fn a_need_only_the_current_version_meets_refuses_and_names_the_dependent() {
    let sub = subscription(None);
    let (_, revision) = db();
    let constraint = json!({"type": "olm.constraint", "value": {"failureMessage": "app needs db 2",
        "package": {"packageName": "db", "versionRange": ">=2.0.0"}}});
    let gvk =
        json!({"type": "olm.gvk.required", "value": {"group": "demo.io", "version": "v1", "kind": "Backup"}});
    let mut leaving = csv("app.v1", "app", "1.0.0", &[needs_db(">=2.0.0")], &[], &[]);
    leaving.metadata.deletion_timestamp = serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap();
    let needs_cache = csv(
        "db.v1",
        "db",
        "1.0.0",
        &[json!({"type": "olm.package.required",
        "value": {"packageName": "cache", "versionRange": ">=1.0.0"}})],
        &["Db"],
        &[],
    );
    type Case<'a> = (
        &'a str,
        Vec<ClusterServiceVersion>,
        &'a ClusterServiceVersion,
        Option<(&'a [&'a str], &'a str)>,
    );
    let cases: Vec<Case> = vec![
        ("nothing else installed", vec![], &revision, None),
        (
            "a range both versions meet",
            vec![csv("app.v1", "app", "1.0.0", &[needs_db(">=1.0.0")], &[], &[])],
            &revision,
            None,
        ),
        (
            "a range only the current version meets",
            vec![csv("app.v1", "app", "1.0.0", &[needs_db(">=2.0.0")], &[], &[])],
            &revision,
            Some((&["app.v1"], "app.v1 requires package db in range >=2.0.0")),
        ),
        (
            "an API only the current version provides",
            vec![csv("app.v1", "app", "1.0.0", &[gvk], &[], &[])],
            &revision,
            Some((&["app.v1"], "app.v1 requires API demo.io/v1 Backup")),
        ),
        (
            "a required CRD of the CSV only the current version owns",
            vec![csv("app.v1", "app", "1.0.0", &[], &[], &["Backup"])],
            &revision,
            Some((&["app.v1"], "(a required CRD of its CSV)")),
        ),
        (
            "an API both versions provide",
            vec![csv("app.v1", "app", "1.0.0", &[], &[], &["Db"])],
            &revision,
            None,
        ),
        (
            "an olm.constraint, its failure message said",
            vec![csv("app.v1", "app", "1.0.0", &[constraint], &[], &[])],
            &revision,
            Some((&["app.v1"], "app needs db 2")),
        ),
        (
            "two dependents",
            vec![
                csv("app.v1", "app", "1.0.0", &[needs_db(">=2.0.0")], &[], &[]),
                csv("web.v3", "web", "3.0.0", &[needs_db(">=2.0.0 <3.0.0")], &[], &[]),
            ],
            &revision,
            Some((&["app.v1", "web.v3"], "web.v3")),
        ),
        ("a dependent on its way out", vec![leaving], &revision, None),
        (
            "the revision needs what is not installed",
            vec![],
            &needs_cache,
            Some((&[], "requires package cache in range >=1.0.0")),
        ),
    ];
    for (case, others, revision, want) in cases {
        let got = check(&sub, revision, &others);
        match (got, want) {
            (None, None) => {}
            (Some(got), Some((dependents, words))) => {
                assert_eq!(got.dependents, dependents, "{case}");
                assert!(got.explanation.contains(words), "{case}: {}", got.explanation);
            }
            (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
        }
    }
}

/// The current CSV gone (removed by the rollback itself): nothing to keep.
#[test]
fn once_the_current_csv_is_gone_nothing_holds_the_rollback() {
    let sub = subscription(None);
    let (_, revision) = db();
    let app = csv("app.v1", "app", "1.0.0", &[needs_db(">=2.0.0")], &[], &[]);
    let csvs = vec![&app];
    let got = broken(&Read {
        subscription: &sub,
        current: "db.v2",
        revision: &revision,
        csvs: &csvs,
    });
    assert_eq!(got, None);
}
