//! Update status: writes a CSV's status (only when it changed), its
//! OperatorGroup annotations (only when they differ), an Event on every phase
//! or reason change, and OLM's `csv_*` metrics.

use std::collections::BTreeMap;

use kube::{
    Api, ResourceExt,
    runtime::events::{Event, EventType},
};
use olm_api::v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase};

use olm_runtime::apply::WriteError;

use super::{build::operator_group_annotations, validate::Membership};
use crate::{context::Context, metrics::enum_string};

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The status write failed.
    #[error("failed to write the status of ClusterServiceVersion {name}")]
    Status {
        /// The CSV.
        name: String,
        /// The cause.
        #[source]
        source: WriteError,
    },
    /// The annotation write failed.
    #[error("failed to write the OperatorGroup annotations of ClusterServiceVersion {name}")]
    Annotations {
        /// The CSV.
        name: String,
        /// The cause.
        #[source]
        source: WriteError,
    },
}

/// The annotations olm-operator applies to a CSV: `olm.operatorGroup`,
/// `olm.operatorNamespace` and `olm.targetNamespaces` as OLM does. Every apply
/// of the CSV's annotations names them all: with one field manager,
/// server-side apply removes those an apply leaves out (so the next apply
/// drops the record of its copies that earlier releases kept there,
/// `copy_hashes::STATUS_HASH`).
pub fn owned_annotations(membership: &Membership) -> BTreeMap<String, String> {
    operator_group_annotations(membership)
}

/// Puts `olm.operatorGroup`, `olm.operatorNamespace` and `olm.targetNamespaces`
/// on the CSV, as OLM does, when they are missing or stale.
pub async fn annotate(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    membership: &Membership,
) -> Result<(), Error> {
    let wanted = owned_annotations(membership);
    let current = csv.annotations();
    if wanted.iter().all(|(k, v)| current.get(k) == Some(v)) {
        return Ok(());
    }
    let name = csv.name_any();
    let namespace = csv.namespace().unwrap_or_default();
    ctx.apply_annotations::<ClusterServiceVersion>(&namespace, &name, wanted)
        .await
        .map_err(|source| Error::Annotations { name, source })?;
    Ok(())
}

/// Writes `status` when it differs from the CSV's, then publishes an Event
/// and moves the metrics if the phase or reason changed.
pub async fn write(
    ctx: &Context,
    api: &Api<ClusterServiceVersion>,
    csv: &ClusterServiceVersion,
    status: ClusterServiceVersionStatus,
) -> Result<(), Error> {
    let old = csv.status.clone().unwrap_or_default();
    let mut updated = csv.clone();
    updated.status = Some(status.clone());
    // Also when nothing changed, so that the series exist after a restart.
    ctx.metrics.csv_status_changed(csv, &updated);
    if old == status {
        return Ok(());
    }
    let name = csv.name_any();
    // Bound to the CSV as read: a pass that began before this CSV's last
    // status write landed in the store (woken by its Deployment, say) must
    // not write over it with a status decided from the older one.
    let at = (name.as_str(), csv.metadata.resource_version.as_deref());
    ctx.writer
        .apply_status_at(api, at, &status)
        .await
        .map_err(|source| Error::Status {
            name: name.clone(),
            source,
        })?;

    if old.phase == status.phase && old.reason == status.reason {
        return Ok(());
    }
    if status.phase == Some(CsvPhase::Replacing) {
        ctx.metrics.csv_upgrade_count.inc();
    }
    let phase = status.phase.map(enum_string).unwrap_or_default();
    let reason = status.reason.map(enum_string).unwrap_or_default();
    let message = status.message.clone().unwrap_or_default();
    tracing::info!(csv = %name, %phase, %reason, %message, "ClusterServiceVersion changed phase");
    let type_ = if status.phase == Some(CsvPhase::Failed) {
        EventType::Warning
    } else {
        EventType::Normal
    };
    ctx.publish(
        csv,
        Event {
            type_,
            reason,
            note: Some(truncate(&message, 1000)),
            action: phase,
            secondary: None,
        },
    );
    Ok(())
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use olm_api::labels;

    use super::*;
    use crate::controllers::csv::{fixtures, validate::Targets};

    #[test]
    fn each_apply_of_the_annotations_names_the_group_only() {
        let membership = fixtures::membership(Targets::All);
        let annotations = owned_annotations(&membership);
        assert_eq!(
            annotations.keys().map(String::as_str).collect::<Vec<_>>(),
            [
                labels::OPERATOR_GROUP,
                labels::OPERATOR_NAMESPACE,
                labels::TARGET_NAMESPACES
            ]
        );
    }
}
