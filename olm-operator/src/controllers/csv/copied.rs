//! Copied CSVs: OLM shows an operator in every namespace it serves by
//! writing a copy of its CSV there, labelled `olm.copiedFrom=<namespace of
//! the original>`, whose status follows the original's with reason `Copied`.
//!
//! The copy keeps the original's spec as the CSV store holds it (without
//! icons and descriptions, see `ClusterServiceVersion::drop_presentation`),
//! its annotations, and its labels except the operator's component labels
//! (`operators.coreos.com/...`), so that nothing takes a copy for a part of
//! the installed operator. Copies cannot be owned across namespaces: they are
//! found by their label and name, and removed by [`delete_all`] from the
//! finalizer when the original goes.
//!
//! A CSV of the same name in a target namespace that is no copy is left
//! alone (no copy there). Writes are cheap: each copy carries hashes of what was written
//! ([`SPEC_HASH`], [`STATUS_HASH`]), and a copy is written only when a hash
//! differs. With `spec.features.disableCopiedCSVs` on the OLMConfig
//! `cluster`, operators that serve all namespaces get no copies (existing ones
//! are deleted, with a `DisabledCopiedCSVs` event on the original); operators
//! that serve chosen namespaces keep theirs, as in OLM.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    api::core::v1::Namespace,
    apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time},
};
use kube::{
    Api, ResourceExt,
    api::ListParams,
    runtime::{
        events::{Event, EventType},
        reflector::{ObjectRef, Store},
    },
};
use olm_api::{
    labels,
    v1::{DISABLED_COPIED_CSVS, OLM_CONFIG_NAME, OLMConfig, OlmConfigStatus},
    v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvReason},
};
use olm_runtime::apply::WriteError;

use super::validate::{Membership, Targets};
use crate::context::Context;

/// Annotation on a copy: the hash of its metadata and spec as last written.
pub const SPEC_HASH: &str = "olm.operatorframework.io/nonStatusCopyHash";
/// Annotation on a copy: the hash of its status as last written.
pub const STATUS_HASH: &str = "olm.operatorframework.io/statusCopyHash";
/// The event reason on the original when its copies are switched off.
pub const DISABLED_REASON: &str = "DisabledCopiedCSVs";

/// Why keeping the copies failed; the reconcile is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the OLMConfig, the namespaces or the existing copies failed.
    #[error("failed to read {what} for the copies of ClusterServiceVersion {csv}")]
    Read {
        /// What was read.
        what: &'static str,
        /// The original CSV.
        csv: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Writing or deleting a copy failed.
    #[error("failed to {action} the copy of ClusterServiceVersion {csv} in namespace {namespace}")]
    Write {
        /// `write` or `delete`.
        action: &'static str,
        /// The original CSV.
        csv: String,
        /// The namespace of the copy.
        namespace: String,
        /// The cause.
        #[source]
        source: WriteError,
    },
}

/// The namespaces that get a copy of an operator installed in `own`, serving
/// `targets`: every target but its own; for all namespaces, every namespace
/// in `all` but its own, or none when copies are `disabled`.
pub fn copy_namespaces(own: &str, targets: &Targets, all: &[String], disabled: bool) -> BTreeSet<String> {
    let candidates: Vec<&String> = match targets {
        Targets::All if disabled => Vec::new(),
        Targets::All => all.iter().collect(),
        Targets::Namespaces(namespaces) => namespaces.iter().collect(),
    };
    candidates
        .into_iter()
        .filter(|namespace| namespace.as_str() != own && !namespace.is_empty())
        .cloned()
        .collect()
}

/// The copy of `csv` (with status `status`) for `namespace`, without its
/// status, and the status it gets, each hash stamped on the copy.
pub fn copy_of(
    csv: &ClusterServiceVersion,
    status: &ClusterServiceVersionStatus,
    namespace: &str,
) -> (ClusterServiceVersion, ClusterServiceVersionStatus) {
    let from = csv.namespace().unwrap_or_default();
    let mut copy_labels: BTreeMap<String, String> = csv
        .labels()
        .iter()
        .filter(|(key, _)| !key.starts_with("operators.coreos.com/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    copy_labels.insert(labels::COPIED_FROM.to_owned(), from.clone());
    let mut annotations = csv.annotations().clone();
    annotations.remove(SPEC_HASH);
    annotations.remove(STATUS_HASH);
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    let mut copy = ClusterServiceVersion {
        metadata: ObjectMeta {
            name: Some(csv.name_any()),
            namespace: Some(namespace.to_owned()),
            labels: Some(copy_labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: csv.spec.clone(),
        status: None,
    };
    let copy_status = ClusterServiceVersionStatus {
        phase: status.phase,
        reason: Some(CsvReason::Copied),
        message: Some(format!(
            "The operator is running in {from} but is managing this namespace"
        )),
        last_update_time: status.last_update_time.clone(),
        last_transition_time: status.last_transition_time.clone(),
        ..ClusterServiceVersionStatus::default()
    };
    let spec_hash = hash(&(&copy.metadata.labels, &copy.metadata.annotations, &copy.spec));
    let status_hash = hash(&copy_status);
    let stamped = copy.annotations_mut();
    stamped.insert(SPEC_HASH.to_owned(), spec_hash);
    stamped.insert(STATUS_HASH.to_owned(), status_hash);
    (copy, copy_status)
}

/// A stable hash (FNV-1a, 64 bits, hex) of `value`'s JSON.
fn hash<T: serde::Serialize>(value: &T) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Brings the copies of `csv` (whose status is now `status`) in line with
/// the namespaces `membership` serves: writes the missing or stale ones and
/// deletes those in namespaces no longer served.
pub async fn sync(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    membership: &Membership,
    status: &ClusterServiceVersionStatus,
) -> Result<(), Error> {
    let name = csv.name_any();
    let own = csv.namespace().unwrap_or_default();
    let read = |what| {
        let csv = name.clone();
        move |source| Error::Read { what, csv, source }
    };
    let (all, disabled) = match membership.targets {
        Targets::All => {
            let disabled = copies_disabled(ctx).await.map_err(read("the OLMConfig"))?;
            let all = if disabled {
                Vec::new()
            } else {
                Api::<Namespace>::all(ctx.client.clone())
                    .list_metadata(&ListParams::default())
                    .await
                    .map_err(read("the namespaces"))?
                    .items
                    .into_iter()
                    .filter(|ns| ns.metadata.deletion_timestamp.is_none())
                    .map(|ns| ns.name_any())
                    .collect()
            };
            (all, disabled)
        }
        Targets::Namespaces(_) => (Vec::new(), false),
    };
    let wanted = copy_namespaces(&own, &membership.targets, &all, disabled);
    let existing = existing_copies(ctx, csv).await.map_err(read("the copies"))?;

    for namespace in &wanted {
        let (copy, copy_status) = copy_of(csv, status, namespace);
        let current = existing.get(namespace);
        let differs = |key: &str| current.and_then(|a| a.get(key)) != copy.annotations().get(key);
        let write = |source| Error::Write {
            action: "write",
            csv: name.clone(),
            namespace: namespace.clone(),
            source,
        };
        let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
        if current.is_none()
            && api
                .get_metadata_opt(&name)
                .await
                .map_err(read("the CSVs of a target namespace"))?
                .is_some()
        {
            // A CSV of that name that is no copy: never overwritten.
            tracing::debug!(csv = %name, %namespace, "not copying over a CSV of the same name");
            continue;
        }
        if differs(SPEC_HASH) || differs(STATUS_HASH) {
            ctx.apply(&api, &copy).await.map_err(write)?;
            ctx.apply_status(&api, &name, &copy_status).await.map_err(write)?;
        }
    }
    let stale: Vec<&String> = existing.keys().filter(|ns| !wanted.contains(*ns)).collect();
    for namespace in &stale {
        delete_copy(ctx, &name, namespace).await?;
    }
    if disabled && !stale.is_empty() {
        let note = format!(
            "Copied CSVs are disabled (OLMConfig {OLM_CONFIG_NAME}): removed {} copies of {name}",
            stale.len()
        );
        ctx.publish(
            csv,
            Event {
                type_: EventType::Warning,
                reason: DISABLED_REASON.to_owned(),
                note: Some(note),
                action: "DeleteCopies".to_owned(),
                secondary: None,
            },
        )
        .await;
    }
    Ok(())
}

/// Deletes every copy of `csv` (from the finalizer, when the original goes).
pub async fn delete_all(ctx: &Context, csv: &ClusterServiceVersion) -> Result<(), Error> {
    let name = csv.name_any();
    let existing = existing_copies(ctx, csv).await.map_err(|source| Error::Read {
        what: "the copies",
        csv: name.clone(),
        source,
    })?;
    for namespace in existing.keys() {
        delete_copy(ctx, &name, namespace).await?;
    }
    Ok(())
}

async fn delete_copy(ctx: &Context, name: &str, namespace: &str) -> Result<(), Error> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    ctx.delete(&api, name).await.map_err(|source| Error::Write {
        action: "delete",
        csv: name.to_owned(),
        namespace: namespace.to_owned(),
        source,
    })
}

/// Whether the OLMConfig `cluster` switches copies off (no OLMConfig: no).
/// Its [`DISABLED_COPIED_CSVS`] condition is brought in line on the way.
async fn copies_disabled(ctx: &Context) -> Result<bool, kube::Error> {
    let api: Api<OLMConfig> = Api::all(ctx.client.clone());
    let Some(config) = api.get_opt(OLM_CONFIG_NAME).await? else {
        return Ok(false);
    };
    let disabled = config.copied_csvs_disabled();
    if let Some(status) = config_status(&config, disabled, crate::context::now())
        && let Err(error) = ctx.apply_status(&api, OLM_CONFIG_NAME, &status).await
    {
        // The condition only reports; the copies are what matters.
        tracing::warn!(
            error = &error as &dyn std::error::Error,
            "cannot update the OLMConfig status"
        );
    }
    Ok(disabled)
}

/// The status the OLMConfig should get so that its [`DISABLED_COPIED_CSVS`]
/// condition says whether copies are off, or `None` when it already does.
pub fn config_status(
    config: &OLMConfig,
    disabled: bool,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<OlmConfigStatus> {
    let (status, reason, message) = if disabled {
        (
            "True",
            "CopiedCSVsDisabled",
            "Copied CSVs are disabled for operators that serve all namespaces",
        )
    } else {
        (
            "False",
            "CopiedCSVsEnabled",
            "Copied CSVs are enabled and present across the cluster",
        )
    };
    let generation = config.metadata.generation;
    let mut conditions = config
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let current = conditions.iter().find(|c| c.type_ == DISABLED_COPIED_CSVS);
    if current
        .is_some_and(|c| c.status == status && c.reason == reason && c.observed_generation == generation)
    {
        return None;
    }
    let last_transition_time = match current {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(now),
    };
    conditions.retain(|c| c.type_ != DISABLED_COPIED_CSVS);
    conditions.push(Condition {
        type_: DISABLED_COPIED_CSVS.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: generation,
        last_transition_time,
    });
    Some(OlmConfigStatus {
        conditions: Some(conditions),
    })
}

/// The copies of `csv` that exist, by namespace, with their annotations:
/// one metadata-only list selected by label and name.
async fn existing_copies(
    ctx: &Context,
    csv: &ClusterServiceVersion,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, kube::Error> {
    let from = csv.namespace().unwrap_or_default();
    let params = ListParams::default()
        .labels(&format!("{}={from}", labels::COPIED_FROM))
        .fields(&format!("metadata.name={}", csv.name_any()));
    let copies = Api::<ClusterServiceVersion>::all(ctx.client.clone())
        .list_metadata(&params)
        .await?;
    Ok(copies
        .items
        .into_iter()
        .filter_map(|copy| {
            let namespace = copy.metadata.namespace.clone()?;
            Some((namespace, copy.metadata.annotations.unwrap_or_default()))
        })
        .collect())
}

/// The original of a copy, named by the copy's name and `olm.copiedFrom` label.
pub fn original(meta: &ObjectMeta) -> Option<ObjectRef<ClusterServiceVersion>> {
    let from = meta.labels.as_ref()?.get(labels::COPIED_FROM)?;
    Some(ObjectRef::new(meta.name.as_deref()?).within(from))
}

/// The CSVs of operators that serve all namespaces (`olm.targetNamespaces`
/// empty): their copies depend on the namespaces and on the OLMConfig.
pub fn serving_all(store: &Store<ClusterServiceVersion>) -> Vec<ObjectRef<ClusterServiceVersion>> {
    store
        .state()
        .iter()
        .filter(|csv| {
            csv.annotations()
                .get(labels::TARGET_NAMESPACES)
                .is_some_and(String::is_empty)
        })
        .map(|csv| ObjectRef::from_obj(csv.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1alpha1::CsvPhase;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn chosen_namespaces_but_the_operators_own_get_copies() {
        let targets = Targets::Namespaces(names(&["a", "b", "ops"]));
        let got = copy_namespaces("ops", &targets, &[], false);
        assert_eq!(got, names(&["a", "b"]).into_iter().collect());
        // Disabling copies affects only all-namespace operators.
        assert_eq!(copy_namespaces("ops", &targets, &[], true).len(), 2);
    }

    #[test]
    fn all_namespaces_copy_everywhere_unless_disabled() {
        let all = names(&["a", "b", "c", "ops"]);
        let got = copy_namespaces("ops", &Targets::All, &all, false);
        assert_eq!(got, names(&["a", "b", "c"]).into_iter().collect());
        assert!(copy_namespaces("ops", &Targets::All, &all, true).is_empty());
    }

    #[test]
    fn own_namespace_only_gets_no_copy() {
        let targets = Targets::Namespaces(names(&["ops"]));
        assert!(copy_namespaces("ops", &targets, &[], false).is_empty());
    }

    fn original() -> ClusterServiceVersion {
        let mut csv = super::super::fixtures::csv(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: etcd.v1\n  namespace: ops\nspec:\n  displayName: etcd\n  install:\n    strategy: deployment\n    spec:\n      deployments: []\n",
        );
        csv.labels_mut()
            .insert("operators.coreos.com/etcd.ops".to_owned(), String::new());
        csv.labels_mut().insert("team".to_owned(), "db".to_owned());
        csv.metadata.namespace = Some("ops".to_owned());
        csv.metadata.finalizers = Some(vec!["f".to_owned()]);
        csv
    }

    #[test]
    fn a_copy_is_labelled_keeps_the_spec_and_follows_the_phase() {
        let csv = original();
        let status = ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Succeeded),
            reason: Some(CsvReason::InstallSuccessful),
            message: Some("install strategy completed with no errors".to_owned()),
            ..Default::default()
        };
        let (copy, copy_status) = copy_of(&csv, &status, "a");
        assert_eq!(copy.namespace().as_deref(), Some("a"));
        assert_eq!(copy.name_any(), "etcd.v1");
        assert_eq!(
            copy.labels().get(labels::COPIED_FROM).map(String::as_str),
            Some("ops")
        );
        assert_eq!(copy.labels().get("team").map(String::as_str), Some("db"));
        assert!(!copy.labels().contains_key("operators.coreos.com/etcd.ops"));
        assert!(copy.metadata.uid.is_none() && copy.metadata.finalizers.is_none());
        assert_eq!(copy.spec, csv.spec);
        assert!(copy.annotations().contains_key(SPEC_HASH));
        assert_eq!(copy_status.phase, Some(CsvPhase::Succeeded));
        assert_eq!(copy_status.reason, Some(CsvReason::Copied));
        assert_eq!(
            copy_status.message.as_deref(),
            Some("The operator is running in ops but is managing this namespace")
        );
    }

    #[test]
    fn the_olmconfig_condition_says_whether_copies_are_off() {
        let now = k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).expect("a time");
        let mut config = OLMConfig::new(OLM_CONFIG_NAME, Default::default());
        config.metadata.generation = Some(2);
        let status = config_status(&config, true, now).expect("a condition to write");
        let condition = &status.conditions.as_ref().expect("conditions")[0];
        assert_eq!(
            (
                condition.type_.as_str(),
                condition.status.as_str(),
                condition.reason.as_str()
            ),
            (DISABLED_COPIED_CSVS, "True", "CopiedCSVsDisabled")
        );
        assert_eq!(condition.observed_generation, Some(2));
        config.status = Some(status);
        assert!(
            config_status(&config, true, now).is_none(),
            "nothing to write twice"
        );
        let enabled = config_status(&config, false, now).expect("the condition flips");
        assert_eq!(enabled.conditions.expect("conditions")[0].status, "False");
    }

    #[test]
    fn hashes_change_with_the_phase_only_in_the_status() {
        let csv = original();
        let installing = ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Installing),
            ..Default::default()
        };
        let succeeded = ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Succeeded),
            ..Default::default()
        };
        let (a, _) = copy_of(&csv, &installing, "a");
        let (b, _) = copy_of(&csv, &succeeded, "a");
        assert_eq!(a.annotations().get(SPEC_HASH), b.annotations().get(SPEC_HASH));
        assert_ne!(a.annotations().get(STATUS_HASH), b.annotations().get(STATUS_HASH));
    }
}
