//! Copied CSVs: OLM shows an operator in every namespace it serves by
//! writing a copy of its CSV there, labelled `olm.copiedFrom=<namespace of
//! the original>`, whose status follows the original's with reason `Copied`.
//!
//! The copy keeps the original's spec as the CSV store holds it (without
//! icons and descriptions, see `ClusterServiceVersion::drop_presentation`),
//! its annotations, and its labels except the operator's component labels
//! (`operators.coreos.com/...`), so that nothing takes a copy for a part of
//! the installed operator, and its annotations but `olm.targetNamespaces`.
//! Copies cannot be owned across namespaces: they are found by their label and
//! name, and removed by [`delete_all`] from the finalizer when the original
//! goes.
//!
//! A CSV of the same name in a target namespace that is no copy is never
//! touched (no copy there; an InstallPlan that installs there removes a copy
//! in its way). Of two originals of the same name, the first copy in a
//! namespace stays until its original is gone or no longer serves it (see
//! [`plan`]). Writes are cheap: each copy carries hashes of what was written
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
    api::{DeleteParams, ListParams, Preconditions},
    core::PartialObjectMeta,
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
use crate::{context::Context, stores::Cache};

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
    // As in OLM: a copy names no target namespaces of its own.
    annotations.remove(labels::TARGET_NAMESPACES);
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

/// What stands under a copy's name in some namespace: one entry of the
/// metadata-only list of every CSV with that name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occupant {
    /// Its namespace.
    pub namespace: String,
    /// Its UID, to delete exactly this object.
    pub uid: String,
    /// Its `olm.copiedFrom` label: the namespace of its original, or `None`
    /// for a CSV that is no copy.
    pub copied_from: Option<String>,
    /// Its `olm.targetNamespaces` annotation (originals only).
    pub targets: Option<String>,
    /// Its copy hashes ([`SPEC_HASH`], [`STATUS_HASH`]), when it is a copy.
    pub hashes: (Option<String>, Option<String>),
}

impl Occupant {
    fn from_meta(meta: &ObjectMeta) -> Option<Self> {
        let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
        Some(Occupant {
            namespace: meta.namespace.clone()?,
            uid: meta.uid.clone().unwrap_or_default(),
            copied_from: meta
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::COPIED_FROM))
                .cloned(),
            targets: annotation(labels::TARGET_NAMESPACES),
            hashes: (annotation(SPEC_HASH), annotation(STATUS_HASH)),
        })
    }
}

/// One write that brings the copies of an original in line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// No CSV of that name in the namespace: create the copy.
    Create(String),
    /// The copy there is stale: write it again.
    Update(String),
    /// The copy there serves no purpose any more (a namespace no longer
    /// served, or copies switched off): delete it (namespace, UID).
    Delete(String, String),
    /// A copy of another original of the same name stands there, and that
    /// original is gone or no longer serves the namespace: delete it
    /// (namespace, UID) and create ours.
    Replace(String, String),
}

/// Whether the copy `copy` (of an original in another namespace) is dangling:
/// its original (found among `same_name`) is gone, or no longer serves the
/// copy's namespace. An original that lists no target namespaces serves all.
fn dangling(copy: &Occupant, from: &str, same_name: &[Occupant]) -> bool {
    let original = same_name
        .iter()
        .find(|o| o.namespace == from && o.copied_from.is_none());
    match original {
        None => true,
        Some(original) => original.targets.as_deref().is_some_and(|targets| {
            !targets.is_empty() && !targets.split(',').any(|t| t.trim() == copy.namespace)
        }),
    }
}

/// The writes that bring the copies of the original in `own` in line, given
/// the namespaces it should be copied to (`wanted`), every CSV of its name in
/// the cluster (`same_name`), and the hashes of the copy as it should be.
///
/// A CSV of that name that is no copy is never touched, and no copy goes
/// there. A copy of another original of the same name (an operator of the
/// same CSV name installed in another namespace that serves the same
/// namespace) is left to that original while it serves the namespace: the
/// first copy written keeps its place, so that two originals never take
/// turns overwriting one copy; once that original is gone or no longer serves
/// the namespace, ours replaces it.
pub fn plan(
    own: &str,
    wanted: &BTreeSet<String>,
    same_name: &[Occupant],
    hashes: &(String, String),
) -> Vec<Action> {
    let mut actions = Vec::new();
    for namespace in wanted {
        let occupant = same_name.iter().find(|o| &o.namespace == namespace);
        match occupant {
            None => actions.push(Action::Create(namespace.clone())),
            Some(copy) => match copy.copied_from.as_deref() {
                None => {}
                Some(from) if from == own => {
                    let (spec, status) = &copy.hashes;
                    if spec.as_deref() != Some(hashes.0.as_str())
                        || status.as_deref() != Some(hashes.1.as_str())
                    {
                        actions.push(Action::Update(namespace.clone()));
                    }
                }
                Some(from) if dangling(copy, from, same_name) => {
                    actions.push(Action::Replace(namespace.clone(), copy.uid.clone()));
                }
                // A copy of another original that still serves the namespace: left to it.
                Some(_) => {}
            },
        }
    }
    for copy in same_name {
        if copy.copied_from.as_deref() == Some(own) && !wanted.contains(&copy.namespace) {
            actions.push(Action::Delete(copy.namespace.clone(), copy.uid.clone()));
        }
    }
    actions
}

/// The caches copies are kept from: the originals, the copies (trimmed
/// metadata, see [`trim`]) and the namespaces. Without them (or before they
/// have synced) the same is read from the API server.
#[derive(Clone)]
pub struct Caches {
    /// Every CSV that is no copy.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every copy, as trimmed metadata.
    pub copies: Cache<PartialObjectMeta<ClusterServiceVersion>>,
    /// Every namespace, as metadata.
    pub namespaces: Cache<PartialObjectMeta<Namespace>>,
}

impl Caches {
    fn synced(&self) -> bool {
        self.csvs.synced.get() && self.copies.synced.get() && self.namespaces.synced.get()
    }

    fn same_name(&self, name: &str) -> Vec<Occupant> {
        let originals = self.csvs.store.state();
        let copies = self.copies.store.state();
        originals
            .iter()
            .map(|csv| &csv.metadata)
            .chain(copies.iter().map(|copy| &copy.metadata))
            .filter(|meta| meta.name.as_deref() == Some(name))
            .filter_map(Occupant::from_meta)
            .collect()
    }

    fn live_namespaces(&self) -> Vec<String> {
        self.namespaces
            .store
            .state()
            .iter()
            .filter(|ns| ns.metadata.deletion_timestamp.is_none())
            .map(|ns| ns.name_any())
            .collect()
    }
}

/// Trims a copy's metadata to what keeping it needs: its name, namespace,
/// UID, `olm.copiedFrom` label and copy hashes. A copy carries its original's
/// annotations (`alm-examples` among them), thousands of times over.
pub fn trim(copy: &mut PartialObjectMeta<ClusterServiceVersion>) {
    let meta = &mut copy.metadata;
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.finalizers = None;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|key, _| key == labels::COPIED_FROM);
    }
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, _| key == SPEC_HASH || key == STATUS_HASH);
    }
}

/// The caches of `ctx`, when they are there and complete.
fn caches(ctx: &Context) -> Option<&Caches> {
    ctx.copies.get().filter(|caches| caches.synced())
}

/// The namespaces of the cluster, by name, without those being deleted.
async fn live_namespaces(ctx: &Context) -> Result<Vec<String>, kube::Error> {
    if let Some(caches) = caches(ctx) {
        return Ok(caches.live_namespaces());
    }
    Ok(Api::<Namespace>::all(ctx.client.clone())
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|ns| ns.metadata.deletion_timestamp.is_none())
        .map(|ns| ns.name_any())
        .collect())
}

/// Brings the copies of `csv` (whose status is now `status`) in line with
/// the namespaces `membership` serves: writes the missing or stale ones and
/// deletes those in namespaces no longer served (see [`plan`]).
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
                live_namespaces(ctx).await.map_err(read("the namespaces"))?
            };
            (all, disabled)
        }
        Targets::Namespaces(_) => (Vec::new(), false),
    };
    let wanted = copy_namespaces(&own, &membership.targets, &all, disabled);
    let same_name = same_name(ctx, &name)
        .await
        .map_err(read("the CSVs of the same name"))?;
    // Every copy is the same but for its namespace, and so are its hashes.
    let (prototype, copy_status) = copy_of(csv, status, &own);
    let hashes = (
        prototype
            .annotations()
            .get(SPEC_HASH)
            .cloned()
            .unwrap_or_default(),
        prototype
            .annotations()
            .get(STATUS_HASH)
            .cloned()
            .unwrap_or_default(),
    );
    let mut deleted = 0;
    for action in plan(&own, &wanted, &same_name, &hashes) {
        let write = |action: &'static str, namespace: &str| {
            let (csv, namespace) = (name.clone(), namespace.to_owned());
            move |source| Error::Write {
                action,
                csv,
                namespace,
                source,
            }
        };
        match action {
            Action::Create(namespace) => {
                create_copy(ctx, &prototype, &copy_status, &namespace)
                    .await
                    .map_err(write("create", &namespace))?;
            }
            Action::Update(namespace) => {
                let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
                let mut copy = prototype.clone();
                copy.metadata.namespace = Some(namespace.clone());
                ctx.apply(&api, &copy).await.map_err(write("write", &namespace))?;
                ctx.apply_status(&api, &name, &copy_status)
                    .await
                    .map_err(write("write", &namespace))?;
            }
            Action::Delete(namespace, uid) => {
                delete_copy(ctx, &name, &namespace, Some(uid)).await?;
                deleted += 1;
            }
            Action::Replace(namespace, uid) => {
                tracing::info!(csv = %name, %namespace, "replacing the dangling copy of another original");
                delete_copy(ctx, &name, &namespace, Some(uid)).await?;
                create_copy(ctx, &prototype, &copy_status, &namespace)
                    .await
                    .map_err(write("create", &namespace))?;
            }
        }
    }
    if disabled && deleted > 0 {
        let note = format!(
            "Copied CSVs are disabled (OLMConfig {OLM_CONFIG_NAME}): removed {deleted} copies of {name}"
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

/// Creates the copy `prototype` in `namespace` with status `status`. Create,
/// not apply: should a CSV of that name have appeared since it was listed,
/// the create fails (409) rather than merge the copy into it; the next
/// reconcile sees it.
async fn create_copy(
    ctx: &Context,
    prototype: &ClusterServiceVersion,
    status: &ClusterServiceVersionStatus,
    namespace: &str,
) -> Result<(), WriteError> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    let mut copy = prototype.clone();
    copy.metadata.namespace = Some(namespace.to_owned());
    match ctx.writer.create(&api, &copy).await {
        Ok(_) => {}
        Err(error) if is_conflict(&error) => {
            tracing::debug!(csv = %copy.name_any(), %namespace, "a CSV of the copy's name appeared; no copy there");
            return Ok(());
        }
        Err(error) => return Err(error),
    }
    ctx.apply_status(&api, &copy.name_any(), status).await.map(|_| ())
}

fn is_conflict(error: &WriteError) -> bool {
    matches!(error.api_error(), Some(kube::Error::Api(status)) if status.code == 409)
}

/// Deletes every copy of `csv` (from the finalizer, when the original goes).
pub async fn delete_all(ctx: &Context, csv: &ClusterServiceVersion) -> Result<(), Error> {
    let name = csv.name_any();
    let own = csv.namespace().unwrap_or_default();
    let same_name = same_name(ctx, &name).await.map_err(|source| Error::Read {
        what: "the copies",
        csv: name.clone(),
        source,
    })?;
    for copy in same_name
        .iter()
        .filter(|o| o.copied_from.as_deref() == Some(own.as_str()))
    {
        delete_copy(ctx, &name, &copy.namespace, Some(copy.uid.clone())).await?;
    }
    Ok(())
}

/// Deletes the copy `name` of `namespace`; with `uid`, only that very object
/// (a CSV that took its place since is left alone).
async fn delete_copy(ctx: &Context, name: &str, namespace: &str, uid: Option<String>) -> Result<(), Error> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    let params = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match ctx.writer.delete(&api, name, &params).await {
        Ok(_) => Ok(()),
        // The precondition failed: another object took the name; not ours to delete.
        Err(error) if is_conflict(&error) => Ok(()),
        Err(source) => Err(Error::Write {
            action: "delete",
            csv: name.to_owned(),
            namespace: namespace.to_owned(),
            source,
        }),
    }
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
            "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode",
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

/// Every CSV named `name` in the cluster (originals and copies): one
/// metadata-only list selected by name.
async fn same_name(ctx: &Context, name: &str) -> Result<Vec<Occupant>, kube::Error> {
    if let Some(caches) = caches(ctx) {
        return Ok(caches.same_name(name));
    }
    let params = ListParams::default().fields(&format!("metadata.name={name}"));
    let found = Api::<ClusterServiceVersion>::all(ctx.client.clone())
        .list_metadata(&params)
        .await?;
    Ok(found
        .items
        .iter()
        .filter_map(|csv| Occupant::from_meta(&csv.metadata))
        .collect())
}

/// The originals a change to a copy concerns: its own (named by the copy's
/// name and `olm.copiedFrom` label), and the other CSVs of `store` with the
/// same name, which may take the namespace once the copy is gone.
pub fn originals(
    store: &Store<ClusterServiceVersion>,
    meta: &ObjectMeta,
) -> Vec<ObjectRef<ClusterServiceVersion>> {
    let Some(name) = meta.name.as_deref() else {
        return Vec::new();
    };
    let from = meta.labels.as_ref().and_then(|l| l.get(labels::COPIED_FROM));
    let mut found: Vec<ObjectRef<ClusterServiceVersion>> = from
        .map(|from| ObjectRef::new(name).within(from))
        .into_iter()
        .collect();
    found.extend(
        store
            .state()
            .iter()
            .filter(|csv| csv.metadata.name.as_deref() == Some(name) && csv.namespace().as_ref() != from)
            .map(|csv| ObjectRef::from_obj(csv.as_ref())),
    );
    found
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

    fn occupant(namespace: &str, copied_from: Option<&str>, targets: Option<&str>) -> Occupant {
        Occupant {
            namespace: namespace.to_owned(),
            uid: format!("uid-{namespace}"),
            copied_from: copied_from.map(str::to_owned),
            targets: targets.map(str::to_owned),
            hashes: (Some("s".to_owned()), Some("t".to_owned())),
        }
    }

    fn set(list: &[&str]) -> BTreeSet<String> {
        names(list).into_iter().collect()
    }

    #[test]
    fn the_plan_creates_updates_and_deletes_only_its_own_copies() {
        let hashes = ("s".to_owned(), "t2".to_owned());
        let same_name = vec![
            occupant("ops", None, Some("")),
            occupant("a", Some("ops"), None),
            occupant("gone", Some("ops"), None),
            occupant("mine", None, None),
        ];
        let got = plan("ops", &set(&["a", "b", "mine"]), &same_name, &hashes);
        assert_eq!(
            got,
            vec![
                Action::Update("a".to_owned()),
                Action::Create("b".to_owned()),
                // `mine` holds a CSV that is no copy: untouched.
                Action::Delete("gone".to_owned(), "uid-gone".to_owned()),
            ]
        );
        // Up to date: nothing to write.
        let current = ("s".to_owned(), "t".to_owned());
        assert_eq!(plan("ops", &set(&["a"]), &same_name[..2], &current), Vec::new());
    }

    #[test]
    fn a_copy_of_another_original_stays_while_that_original_serves_the_namespace() {
        let hashes = ("s".to_owned(), "t".to_owned());
        // `other` serves all namespaces: its copy in `a` stays, none of ours goes there.
        let serving = vec![
            occupant("other", None, Some("")),
            occupant("a", Some("other"), None),
        ];
        assert_eq!(plan("ops", &set(&["a"]), &serving, &hashes), Vec::new());
        // `other` now serves only `b`: its copy in `a` dangles and ours replaces it.
        let moved = vec![
            occupant("other", None, Some("b,other")),
            occupant("a", Some("other"), None),
        ];
        assert_eq!(
            plan("ops", &set(&["a"]), &moved, &hashes),
            vec![Action::Replace("a".to_owned(), "uid-a".to_owned())]
        );
        // `other` is gone.
        let orphan = vec![occupant("a", Some("other"), None)];
        assert_eq!(
            plan("ops", &set(&["a"]), &orphan, &hashes),
            vec![Action::Replace("a".to_owned(), "uid-a".to_owned())]
        );
    }

    #[test]
    fn a_copy_names_no_target_namespaces() {
        let mut csv = original();
        csv.annotations_mut()
            .insert(labels::TARGET_NAMESPACES.to_owned(), String::new());
        let (copy, _) = copy_of(&csv, &ClusterServiceVersionStatus::default(), "a");
        assert!(!copy.annotations().contains_key(labels::TARGET_NAMESPACES));
    }

    #[test]
    fn the_copy_cache_keeps_only_what_keeping_copies_needs() {
        let csv = original();
        let (mut copy, _) = copy_of(&csv, &ClusterServiceVersionStatus::default(), "a");
        copy.annotations_mut()
            .insert("alm-examples".to_owned(), "[{}]".repeat(1000));
        copy.metadata.uid = Some("u".to_owned());
        let mut meta = PartialObjectMeta::<ClusterServiceVersion> {
            types: None,
            metadata: copy.metadata.clone(),
            _phantom: std::marker::PhantomData,
        };
        trim(&mut meta);
        let occupant = Occupant::from_meta(&meta.metadata).expect("an occupant");
        assert_eq!(occupant.copied_from.as_deref(), Some("ops"));
        assert_eq!(occupant.uid, "u");
        assert_eq!(
            occupant.hashes,
            (
                copy.annotations().get(SPEC_HASH).cloned(),
                copy.annotations().get(STATUS_HASH).cloned()
            )
        );
        assert_eq!(meta.metadata.annotations.as_ref().map(BTreeMap::len), Some(2));
        assert_eq!(meta.metadata.labels.as_ref().map(BTreeMap::len), Some(1));
    }
}
