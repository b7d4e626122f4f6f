//! Rollback: `rollback` asks for a recorded revision of an operator (the
//! one before the installed one by default) by annotating its Subscription
//! (`olm-rs.dev/rollback-to`), which catalog-operator installs again and
//! holds the Subscription at; `rollback --lift` removes the annotation, so
//! the Subscription upgrades again. `revisions` lists the recorded
//! revisions (`model.olm-rs.dev` OperatorRevisions) and where the rollback
//! stands. The annotated Subscription is built without I/O, so
//! `--dry-run -o yaml` prints it for a GitOps repository.

use std::fmt::Write as _;

use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use olm_api::{
    labels,
    model::OperatorRevision,
    v1alpha1::{ConditionStatus, Subscription, SubscriptionConditionType},
};
use serde_json::{Value, json};

use crate::{
    DryRunArgs, Env, FIELD_MANAGER, Output,
    commands::{Named, find_subscription},
    error::Error,
    objects,
    table::Table,
};

/// The revision `to` names among `revisions` (its number, its name, which
/// is its CSV's, or its version); without `to`, the newest one older than
/// the revision of the installed CSV `installed`.
pub fn choose<'a>(
    revisions: &'a [OperatorRevision],
    installed: Option<&str>,
    to: Option<&str>,
) -> Result<&'a OperatorRevision, Error> {
    let known = || {
        let mut sorted: Vec<&OperatorRevision> = revisions.iter().collect();
        sorted.sort_by_key(|r| r.spec.revision);
        let names: Vec<String> = sorted.iter().map(|r| describe(r)).collect();
        if names.is_empty() {
            "none is recorded yet (a revision is kept once a CSV succeeds)".to_owned()
        } else {
            format!("recorded: {}", names.join(", "))
        }
    };
    if let Some(to) = to {
        let number = to.parse::<i64>().ok();
        let version = to.strip_prefix('v').unwrap_or(to);
        return revisions
            .iter()
            .find(|r| Some(r.spec.revision) == number)
            .or_else(|| revisions.iter().find(|r| r.name_any() == to))
            .or_else(|| {
                revisions
                    .iter()
                    .find(|r| r.spec.version.as_deref() == Some(version))
            })
            .ok_or_else(|| Error::Usage(format!("no revision {to}; {}", known())));
    }
    let current = revisions
        .iter()
        .find(|r| Some(r.spec.cluster_service_version.as_str()) == installed);
    revisions
        .iter()
        .filter(|r| Some(r.spec.cluster_service_version.as_str()) != installed)
        .filter(|r| current.is_none_or(|c| r.spec.revision < c.spec.revision))
        .max_by_key(|r| r.spec.revision)
        .ok_or_else(|| {
            Error::Usage(format!(
                "no revision before the installed one ({}) to roll back to; {}",
                installed.unwrap_or("none"),
                known()
            ))
        })
}

/// `number (csv, version)` of a revision.
fn describe(revision: &OperatorRevision) -> String {
    match &revision.spec.version {
        Some(version) => format!(
            "{} ({}, version {version})",
            revision.spec.revision,
            revision.name_any()
        ),
        None => format!("{} ({})", revision.spec.revision, revision.name_any()),
    }
}

/// The annotations catalog-operator writes beside `olm-rs.dev/rollback-to`
/// when it rolls a failed upgrade back by itself.
const AUTOMATIC: [&str; 3] = [
    labels::revision::FAILED_UPGRADE,
    labels::revision::FAILED_UPGRADE_CAUSE,
    labels::revision::FAILED_UPGRADE_HEAD,
];

/// `subscription` as it is written to ask for `revision` (or, with `None`,
/// to lift the hold): name, namespace and annotations only, for
/// `--dry-run -o yaml`.
pub fn annotated(subscription: &Subscription, revision: Option<&OperatorRevision>) -> Subscription {
    let mut out = Subscription::new(&subscription.name_any(), subscription.spec.clone());
    out.metadata.namespace = subscription.namespace();
    out.metadata.labels = subscription.metadata.labels.clone();
    let mut annotations = subscription.annotations().clone();
    // A rollback asked for by hand, or a lifted hold, replaces the one a
    // failed upgrade started.
    for key in AUTOMATIC {
        annotations.remove(key);
    }
    match revision {
        Some(revision) => {
            annotations.insert(labels::revision::ROLLBACK_TO.to_owned(), revision.name_any());
        }
        None => {
            annotations.remove(labels::revision::ROLLBACK_TO);
        }
    }
    out.metadata.annotations = Some(annotations).filter(|a| !a.is_empty());
    out
}

/// The Subscription named `name`, or else the one of package `name`.
async fn subscription_named(env: &Env<'_>, name: &str) -> Result<Subscription, Error> {
    find_subscription(env, name, Named::NameFirst).await
}

/// The revisions recorded for `subscription`.
async fn revisions_of(env: &Env<'_>, subscription: &Subscription) -> Result<Vec<OperatorRevision>, Error> {
    let api: Api<OperatorRevision> = Api::namespaced(env.client.clone(), &env.namespace);
    let selector = format!("{}={}", labels::revision::SUBSCRIPTION, subscription.name_any());
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::kube(format!(
            "list OperatorRevisions in namespace {}",
            env.namespace
        )))?
        .items)
}

fn installed(subscription: &Subscription) -> Option<&str> {
    subscription.status.as_ref()?.installed_csv.as_deref()
}

/// `rollback SUBSCRIPTION [--to REVISION]`, or `--lift`.
pub async fn rollback(
    env: &mut Env<'_>,
    name: &str,
    to: Option<&str>,
    lift: bool,
    dry_run: &DryRunArgs,
) -> Result<(), Error> {
    let subscription = subscription_named(env, name).await?;
    let sub_name = subscription.name_any();
    let revision = if lift {
        None
    } else {
        let revisions = revisions_of(env, &subscription).await?;
        Some(choose(&revisions, installed(&subscription), to)?.clone())
    };
    if dry_run.is_dry_run() {
        let object = objects::to_value(&annotated(&subscription, revision.as_ref()))?;
        let text = match dry_run.output {
            Some(Output::Json) => objects::json_output(&[object])?,
            _ => objects::yaml_stream(&[object])?,
        };
        return Ok(env.out.write_all(text.as_bytes())?);
    }
    let value: Value = revision.as_ref().map_or(Value::Null, |r| r.name_any().into());
    let mut annotations = serde_json::Map::new();
    annotations.insert(labels::revision::ROLLBACK_TO.to_owned(), value);
    for key in AUTOMATIC {
        if subscription.annotations().contains_key(key) {
            annotations.insert(key.to_owned(), Value::Null);
        }
    }
    let patch = json!({"metadata": {"annotations": annotations}});
    let api: Api<Subscription> = Api::namespaced(env.client.clone(), &env.namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(&sub_name, &params, &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("annotate Subscription {sub_name}")))?;
    match revision {
        Some(revision) => writeln!(
            env.out,
            "Subscription {sub_name} asks for revision {}, and is held there until `kubectl olm rollback {sub_name} --lift`; `kubectl olm revisions {sub_name}` shows how the rollback goes",
            describe(&revision)
        )?,
        None => writeln!(
            env.out,
            "Subscription {sub_name} is no longer held: it follows its channel again"
        )?,
    }
    Ok(())
}

/// `revisions SUBSCRIPTION`.
pub async fn revisions(env: &mut Env<'_>, name: &str, output: Output) -> Result<(), Error> {
    let subscription = subscription_named(env, name).await?;
    let mut revisions = revisions_of(env, &subscription).await?;
    revisions.sort_by_key(|r| r.spec.revision);
    match output {
        Output::Table => {
            let text = revisions_table(&subscription, &revisions);
            Ok(env.out.write_all(text.as_bytes())?)
        }
        output => {
            let values = revisions
                .iter()
                .map(|r| {
                    let mut value = objects::to_value(r)?;
                    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                        metadata.remove("managedFields");
                    }
                    Ok(value)
                })
                .collect::<Result<Vec<_>, Error>>()?;
            let text = match output {
                Output::Json => objects::json_output(&values)?,
                _ => objects::yaml_stream(&values)?,
            };
            Ok(env.out.write_all(text.as_bytes())?)
        }
    }
}

/// The table of `revisions`, with which is installed and which asked for,
/// and where a rollback stands.
pub fn revisions_table(subscription: &Subscription, revisions: &[OperatorRevision]) -> String {
    let name = subscription.name_any();
    if revisions.is_empty() {
        return format!(
            "Subscription {name} has no recorded revision yet (one is kept once a CSV succeeds)\n"
        );
    }
    let asked = subscription.annotations().get(labels::revision::ROLLBACK_TO);
    let mut table = Table::new(&["REVISION", "VERSION", "CSV", "INSTALLED", "ASKED"]);
    for revision in revisions {
        let is_asked =
            asked.is_some_and(|a| *a == revision.name_any() || *a == revision.spec.revision.to_string());
        table.row(vec![
            revision.spec.revision.to_string().into(),
            revision
                .spec
                .version
                .clone()
                .unwrap_or_else(|| "-".to_owned())
                .into(),
            revision.name_any().into(),
            if installed(subscription) == Some(revision.spec.cluster_service_version.as_str()) {
                "*"
            } else {
                ""
            }
            .into(),
            if is_asked { "*" } else { "" }.into(),
        ]);
    }
    let mut text = table.render(false);
    let rolled_back = subscription
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == SubscriptionConditionType::RolledBack)
        });
    match (asked, rolled_back) {
        (Some(asked), Some(c)) => {
            let state = if c.status == ConditionStatus::True {
                "held"
            } else {
                "rollback"
            };
            let reason = c.reason.as_ref().map(ToString::to_string).unwrap_or_default();
            let _ = writeln!(
                text,
                "\n{state} at {asked}: {reason}: {}",
                c.message.as_deref().unwrap_or_default()
            );
        }
        (Some(asked), None) => {
            let _ = writeln!(text, "\nrollback to {asked} asked; not picked up yet");
        }
        (None, _) => {}
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(name: &str, number: i64, version: &str) -> OperatorRevision {
        serde_json::from_value(json!({
            "apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "OperatorRevision",
            "metadata": {"name": name, "namespace": "team", "labels": {"olm-rs.dev/subscription": "db"}},
            "spec": {"package": "db", "subscription": "db", "revision": number, "version": version,
                     "clusterServiceVersion": name, "installPlan": "install-1", "objects": []},
        }))
        .expect("a revision")
    }

    /// Which revision `--to` (or its default) chooses (table).
    #[test]
    fn the_revision_is_the_one_named_or_the_one_before() {
        let revisions = vec![
            revision("db.v1", 1, "1.0.0"),
            revision("db.v2", 2, "2.0.0"),
            revision("db.v3", 3, "3.0.0"),
        ];
        // (case, installed CSV, --to, the revision chosen or the error's text)
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            Option<&'a str>,
            Result<&'a str, &'a str>,
        );
        let cases: [Case; 8] = [
            ("default: the one before", Some("db.v3"), None, Ok("db.v2")),
            ("after a rollback to 2: 1", Some("db.v2"), None, Ok("db.v1")),
            (
                "nothing before 1",
                Some("db.v1"),
                None,
                Err("no revision before the installed one (db.v1)"),
            ),
            (
                "installed not recorded: the newest",
                Some("db.v9"),
                None,
                Ok("db.v3"),
            ),
            ("by number", Some("db.v3"), Some("1"), Ok("db.v1")),
            ("by name", Some("db.v3"), Some("db.v2"), Ok("db.v2")),
            ("by version", Some("db.v3"), Some("v1.0.0"), Ok("db.v1")),
            (
                "unknown",
                Some("db.v3"),
                Some("9"),
                Err("no revision 9; recorded: 1 (db.v1, version 1.0.0)"),
            ),
        ];
        for (case, installed, to, expected) in cases {
            let got = choose(&revisions, installed, to)
                .map(|r| r.name_any())
                .map_err(|e| e.to_string());
            match expected {
                Ok(name) => assert_eq!(got.as_deref(), Ok(name), "{case}"),
                Err(text) => {
                    let error = got.expect_err(case);
                    assert!(error.contains(text), "{case}: {error}");
                }
            }
        }
    }

    #[test]
    fn the_dry_run_prints_the_subscription_with_the_annotation() {
        let sub: Subscription = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "db", "namespace": "team", "uid": "u", "resourceVersion": "7",
                         "annotations": {"keep": "me"}},
            "spec": {"name": "db", "source": "demo", "sourceNamespace": "olm", "channel": "stable"},
            "status": {"installedCSV": "db.v2", "lastUpdated": "2026-01-01T00:00:00Z"},
        }))
        .unwrap();
        let asked = annotated(&sub, Some(&revision("db.v1", 1, "1.0.0")));
        let value = serde_json::to_value(&asked).unwrap();
        assert_eq!(
            value["metadata"]["annotations"]["olm-rs.dev/rollback-to"],
            "db.v1"
        );
        assert_eq!(value["metadata"]["annotations"]["keep"], "me");
        assert!(value["metadata"].get("uid").is_none(), "{value}");
        assert!(value.get("status").is_none(), "{value}");
        let lifted = serde_json::to_value(annotated(&asked, None)).unwrap();
        assert!(
            lifted["metadata"]["annotations"]
                .get("olm-rs.dev/rollback-to")
                .is_none()
        );
        // The hold of an automatic rollback is lifted whole.
        let mut automatic = asked.clone();
        for key in ["olm-rs.dev/failed-upgrade", "olm-rs.dev/failed-upgrade-cause"] {
            automatic.annotations_mut().insert(key.into(), "db.v2".into());
        }
        let lifted = serde_json::to_value(annotated(&automatic, None)).unwrap();
        assert_eq!(lifted["metadata"]["annotations"], json!({"keep": "me"}));
    }
}
