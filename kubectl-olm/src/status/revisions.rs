//! The revisions of `status`: each operator's recorded revisions (the one
//! installed marked `*`), and each hold a rollback puts on a Subscription:
//! where it is held, whether by a user or after a failed upgrade, and where
//! the rollback stands (its `RolledBack` condition).

use kube::ResourceExt;
use olm_api::{
    labels,
    model::OperatorRevision,
    v1alpha1::{ConditionStatus, Subscription, SubscriptionConditionReason, SubscriptionConditionType},
};
use serde::Serialize;

use crate::table::{Cell, Table, Tone};

/// One recorded revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionRow {
    /// Namespace.
    pub namespace: String,
    /// The Subscription it was recorded for.
    pub subscription: String,
    /// Its number.
    pub revision: i64,
    /// The operator's version, when recorded.
    pub version: String,
    /// Its CSV.
    pub csv: String,
    /// Whether it is the one installed now.
    pub installed: bool,
}

/// One Subscription held by a rollback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldRow {
    /// Namespace.
    pub namespace: String,
    /// The Subscription.
    pub subscription: String,
    /// The revision asked for (annotation `olm-rs.dev/rollback-to`).
    pub at: String,
    /// `user`, or `failed upgrade to CSV` when an automatic rollback holds it.
    pub by: String,
    /// `held`, `rolling back`, `refused`, or `asked` before catalog-operator picks it up.
    pub state: String,
    /// The condition's reason.
    pub reason: String,
    /// The condition's message.
    pub message: String,
}

/// The rows of `revisions`, sorted by namespace, Subscription and number;
/// `subscriptions` say which is installed.
pub fn revision_rows(revisions: &[OperatorRevision], subscriptions: &[Subscription]) -> Vec<RevisionRow> {
    let mut rows: Vec<RevisionRow> = revisions
        .iter()
        .map(|revision| {
            let namespace = revision.namespace().unwrap_or_default();
            let subscription = revision
                .labels()
                .get(labels::revision::SUBSCRIPTION)
                .cloned()
                .unwrap_or_else(|| revision.spec.subscription.clone());
            let installed = subscriptions.iter().any(|s| {
                s.namespace().as_deref() == Some(namespace.as_str())
                    && s.name_any() == subscription
                    && s.status.as_ref().and_then(|st| st.installed_csv.as_deref())
                        == Some(revision.spec.cluster_service_version.as_str())
            });
            RevisionRow {
                namespace,
                subscription,
                revision: revision.spec.revision,
                version: revision.spec.version.clone().unwrap_or_default(),
                csv: revision.spec.cluster_service_version.clone(),
                installed,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        (&a.namespace, &a.subscription, a.revision).cmp(&(&b.namespace, &b.subscription, b.revision))
    });
    rows
}

/// The hold of `subscription`, when a rollback holds it.
pub fn hold_row(subscription: &Subscription) -> Option<HoldRow> {
    let annotations = subscription.annotations();
    let at = annotations
        .get(labels::revision::ROLLBACK_TO)
        .filter(|a| !a.trim().is_empty())?;
    let by = match annotations.get(labels::revision::FAILED_UPGRADE) {
        Some(failed) if !failed.trim().is_empty() => format!("failed upgrade to {failed}"),
        _ => "user".to_owned(),
    };
    let condition = subscription
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == SubscriptionConditionType::RolledBack)
        });
    let (state, reason, message) = match condition {
        None => ("asked", String::new(), String::new()),
        Some(c) => {
            let reason = c.reason.clone();
            let state = match (c.status, &reason) {
                (ConditionStatus::True, _) => "held",
                (_, Some(SubscriptionConditionReason::RollingBack)) => "rolling back",
                _ => "refused",
            };
            (
                state,
                reason.map(|r| r.to_string()).unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        }
    };
    Some(HoldRow {
        namespace: subscription.namespace().unwrap_or_default(),
        subscription: subscription.name_any(),
        at: at.clone(),
        by,
        state: state.to_owned(),
        reason,
        message,
    })
}

fn with_namespace(namespaces: bool, headers: &[&'static str]) -> Table {
    let mut all = if namespaces { vec!["NAMESPACE"] } else { Vec::new() };
    all.extend_from_slice(headers);
    Table::new(&all)
}

fn row(namespaces: bool, namespace: &str, cells: Vec<Cell>) -> Vec<Cell> {
    let mut all = if namespaces {
        vec![Cell::from(namespace)]
    } else {
        Vec::new()
    };
    all.extend(cells);
    all
}

/// The revisions as a table.
pub fn revisions_table(rows: &[RevisionRow], namespaces: bool) -> Table {
    let mut table = with_namespace(
        namespaces,
        &["SUBSCRIPTION", "REVISION", "VERSION", "CSV", "INSTALLED"],
    );
    for r in rows {
        table.row(row(
            namespaces,
            &r.namespace,
            vec![
                r.subscription.as_str().into(),
                r.revision.to_string().into(),
                r.version.as_str().into(),
                r.csv.as_str().into(),
                if r.installed { "*" } else { "" }.into(),
            ],
        ));
    }
    table
}

/// The holds as a table.
pub fn holds_table(rows: &[HoldRow], namespaces: bool) -> Table {
    let mut table = with_namespace(namespaces, &["HELD", "AT", "BY", "STATE", "REASON", "MESSAGE"]);
    for r in rows {
        let tone = match r.state.as_str() {
            "held" => Tone::Good,
            "refused" => Tone::Bad,
            _ => Tone::Busy,
        };
        table.row(row(
            namespaces,
            &r.namespace,
            vec![
                r.subscription.as_str().into(),
                r.at.as_str().into(),
                r.by.as_str().into(),
                Cell::toned(r.state.clone(), tone),
                r.reason.as_str().into(),
                r.message.as_str().into(),
            ],
        ));
    }
    table
}
