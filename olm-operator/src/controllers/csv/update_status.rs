//! Update status: writes a CSV's status (only when it changed), its
//! OperatorGroup annotations (only when they differ), an Event on every phase
//! or reason change, and OLM's `csv_*` metrics.

use std::collections::BTreeMap;

use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject},
    runtime::events::{Event, EventType},
};
use olm_api::v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase};

use olm_runtime::{
    apply::WriteError,
    effects::{Desired, ObjectOutcome},
};

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

/// The annotations `olm.operatorGroup`, `olm.operatorNamespace` and
/// `olm.targetNamespaces` to apply to `csv`, as OLM puts them, as fields of
/// an object others own; `None` when the CSV carries them already. Pure.
pub fn annotations(csv: &ClusterServiceVersion, membership: &Membership) -> Option<Desired> {
    let wanted = owned_annotations(membership);
    let current = csv.annotations();
    if wanted.iter().all(|(k, v)| current.get(k) == Some(v)) {
        return None;
    }
    let resource = ApiResource::erase::<ClusterServiceVersion>(&());
    let mut object = DynamicObject::new(&csv.name_any(), &resource).data(serde_json::json!({}));
    object.metadata.namespace = csv.namespace();
    object.metadata.annotations = Some(wanted);
    Some(Desired::dynamic_fields(&resource, &object))
}

/// Writes the annotations [`annotations`] decided, through the one applier;
/// the CSV's resourceVersion after the write, so that the status written
/// later in the same pass is bound to the CSV this pass changed, not refused
/// as stale.
pub async fn annotate(ctx: &Context, annotations: &Desired) -> Result<Option<String>, Error> {
    let objects = std::slice::from_ref(annotations);
    let outcomes = ctx
        .writer
        .write_objects(&ctx.client, objects, &())
        .await
        .map_err(|source| Error::Annotations {
            name: annotations.name().to_owned(),
            source,
        })?;
    Ok(outcomes.into_iter().find_map(|outcome| match outcome {
        ObjectOutcome::Written(object) => object.metadata.resource_version,
        ObjectOutcome::Unchanged | ObjectOutcome::Refused => None,
    }))
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
    fn the_annotations_are_applied_only_when_the_csv_lacks_them() {
        let membership = fixtures::membership(Targets::All);
        let mut csv = fixtures::small_csv(&fixtures::modes(&["AllNamespaces"]), "");
        let desired = annotations(&csv, &membership).expect("missing: applied");
        assert_eq!(desired.resource.kind, "ClusterServiceVersion");
        assert_eq!(
            (desired.namespace(), desired.name()),
            (Some(fixtures::NAMESPACE), "demo.v1.0.0")
        );
        assert_eq!(desired.hash(), None, "fields of an object others own");
        let body = serde_json::to_value(&desired.object).expect("encodes");
        assert_eq!(body.get("spec"), None, "only the annotations are applied");
        let applied = desired.object.metadata.annotations.clone().expect("annotations");
        assert_eq!(applied, owned_annotations(&membership));

        csv.metadata.annotations.get_or_insert_default().extend(applied);
        assert_eq!(annotations(&csv, &membership), None, "carried: nothing to apply");
    }

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
