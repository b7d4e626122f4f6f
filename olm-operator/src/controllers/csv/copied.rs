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
//! [`plan`]). With `spec.features.disableCopiedCSVs` on the OLMConfig
//! `cluster`, operators that serve all namespaces get no copies (existing ones
//! are deleted, with a `DisabledCopiedCSVs` event on the original); operators
//! that serve chosen namespaces keep theirs, as in OLM.
//!
//! Writes are as few as the API allows. Every copy of an original is the same
//! but for its namespace, so its metadata and spec (rare changes) and its
//! status (a change with every phase of the original) are kept apart:
//! - each copy carries the hash of its metadata and spec as last written
//!   ([`SPEC_HASH`], as in OLM), and is written again only when it differs;
//! - the status is not hashed on each copy: a status write cannot change
//!   metadata, so a hash there would cost a second write per copy and status
//!   change. The original records instead the hash of the status all its
//!   copies were written with ([`STATUS_HASH`]), once every copy is in line;
//!   a fan-out cut short records nothing and is simply done again. A status
//!   change so costs one status write per copy and one annotation write on
//!   the original, and a restart writes nothing when the record is current.
//!   A copy whose status was never written (its creation was cut short) is
//!   known by its managed fields, which name no writer of its status;
//! - a copy shows the original's phase but not its message, so the status hash
//!   leaves out `lastUpdateTime`, which moves with every message: copies are
//!   written when the phase changes, not when only the original's message did.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Mutex,
};

use k8s_openapi::{
    api::core::v1::Namespace,
    apimachinery::pkg::apis::meta::v1::{Condition, ManagedFieldsEntry, ObjectMeta, Time},
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

use super::{
    build::operator_group_annotations,
    update_status,
    validate::{Membership, Targets},
};
use crate::{context::Context, stores::Cache};

/// Annotation on a copy: the hash of its metadata and spec as last written.
pub const SPEC_HASH: &str = "olm.operatorframework.io/nonStatusCopyHash";
/// Annotation on an original: the hash of the status (see [`status_hash`])
/// every copy of it was last written with. Never copied, neither to the
/// copies nor to pod templates.
pub const STATUS_HASH: &str = "olm-rs.dev/copied-status-hash";
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
    /// Recording on the original the status its copies have failed.
    #[error("failed to record the status of the copies on ClusterServiceVersion {csv}")]
    Record {
        /// The original CSV.
        csv: String,
        /// The cause.
        #[source]
        source: WriteError,
    },
    /// Writing or deleting a copy failed.
    #[error("failed to {action} the copy of ClusterServiceVersion {csv} in namespace {namespace}")]
    Write {
        /// `create`, `write`, `write the status of` or `delete`.
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
/// status, with the hash of its metadata and spec stamped on it, and the status
/// it gets.
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
    // The original's record of its copies: it changes with every fan-out.
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
    copy.annotations_mut().insert(SPEC_HASH.to_owned(), spec_hash);
    (copy, copy_status)
}

/// The copy of `csv` (with status `status`, in the OperatorGroup of
/// `membership`) and its status, as [`copy_of`] makes them for the original's
/// namespace. The copy carries the group's annotations as this reconcile wrote
/// them on the original (`update_status::annotate`), which the cached `csv` may
/// not show yet: copies first written before would be written a second time.
pub fn prototype(
    csv: &ClusterServiceVersion,
    membership: &Membership,
    status: &ClusterServiceVersionStatus,
) -> (ClusterServiceVersion, ClusterServiceVersionStatus) {
    let mut original = csv.clone();
    original
        .annotations_mut()
        .extend(operator_group_annotations(membership));
    copy_of(&original, status, &original.namespace().unwrap_or_default())
}

/// The hash of a copy's status `status` that [`STATUS_HASH`] records: all of
/// it but `lastUpdateTime`, which moves with every message of the original
/// while a copy shows none of them (it is written with the copy, not compared).
pub fn status_hash(status: &ClusterServiceVersionStatus) -> String {
    hash(&ClusterServiceVersionStatus {
        last_update_time: None,
        ..status.clone()
    })
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
    /// Its [`SPEC_HASH`], when it is a copy.
    pub spec_hash: Option<String>,
    /// Whether its status was ever written: its managed fields name a writer
    /// of the status subresource.
    pub has_status: bool,
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
            spec_hash: annotation(SPEC_HASH),
            has_status: wrote_status(meta),
        })
    }
}

/// Whether the managed fields of `meta` name a writer of the status subresource.
fn wrote_status(meta: &ObjectMeta) -> bool {
    meta.managed_fields
        .iter()
        .flatten()
        .any(|entry| entry.subresource.as_deref() == Some(STATUS_SUBRESOURCE))
}

const STATUS_SUBRESOURCE: &str = "status";

/// One write that brings the copies of an original in line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// No CSV of that name in the namespace: create the copy, with its status.
    Create(String),
    /// The copy's metadata or spec there is stale: apply them again.
    Update(String),
    /// The copy's status there is stale, or was never written: write it.
    UpdateStatus(String),
    /// The copy there serves no purpose any more (a namespace no longer
    /// served, or copies switched off): delete it (namespace, UID).
    Delete(String, String),
    /// A copy of another original of the same name stands there, and that
    /// original is gone or no longer serves the namespace: delete it
    /// (namespace, UID) and create ours.
    Replace(String, String),
    /// Every copy has the original's status now: record its hash on the
    /// original ([`STATUS_HASH`]). Always the last action.
    Record,
}

/// The copies as they should be: the hash of their metadata and spec, and
/// whether every copy was already written with the original's present status
/// (the original's [`STATUS_HASH`] says so).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted<'a> {
    /// The namespaces the original is copied to.
    pub namespaces: &'a BTreeSet<String>,
    /// The hash of a copy's metadata and spec ([`SPEC_HASH`]).
    pub spec_hash: &'a str,
    /// Whether the copies' status is that of the original already.
    pub status_recorded: bool,
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

/// The writes that bring the copies of the original in `own` in line with
/// `wanted`, given every CSV of its name in the cluster (`same_name`).
///
/// A CSV of that name that is no copy is never touched, and no copy goes
/// there. A copy of another original of the same name (an operator of the
/// same CSV name installed in another namespace that serves the same
/// namespace) is left to that original while it serves the namespace: the
/// first copy written keeps its place, so that two originals never take
/// turns overwriting one copy; once that original is gone or no longer serves
/// the namespace, ours replaces it.
///
/// A copy gets its metadata and spec written when its [`SPEC_HASH`] differs,
/// and its status when the original's status is not recorded as fanned out
/// yet, or when the copy has none; once the present status went out to every
/// copy, [`Action::Record`] records it. An original without copies records
/// nothing.
pub fn plan(own: &str, wanted: &Wanted<'_>, same_name: &[Occupant]) -> Vec<Action> {
    let mut actions = Vec::new();
    let mut status_written = false;
    for namespace in wanted.namespaces {
        let occupant = same_name.iter().find(|o| &o.namespace == namespace);
        match occupant {
            None => {
                actions.push(Action::Create(namespace.clone()));
                status_written = true;
            }
            Some(copy) => match copy.copied_from.as_deref() {
                None => {}
                Some(from) if from == own => {
                    if copy.spec_hash.as_deref() != Some(wanted.spec_hash) {
                        actions.push(Action::Update(namespace.clone()));
                    }
                    if !wanted.status_recorded || !copy.has_status {
                        actions.push(Action::UpdateStatus(namespace.clone()));
                        status_written = true;
                    }
                }
                Some(from) if dangling(copy, from, same_name) => {
                    actions.push(Action::Replace(namespace.clone(), copy.uid.clone()));
                    status_written = true;
                }
                // A copy of another original that still serves the namespace: left to it.
                Some(_) => {}
            },
        }
    }
    for copy in same_name {
        if copy.copied_from.as_deref() == Some(own) && !wanted.namespaces.contains(&copy.namespace) {
            actions.push(Action::Delete(copy.namespace.clone(), copy.uid.clone()));
        }
    }
    if status_written && !wanted.status_recorded {
        actions.push(Action::Record);
    }
    actions
}

/// The caches copies are kept from: the originals, the copies (trimmed
/// metadata, see [`trim`]) and the namespaces. Without them the same is read
/// from the API server; while they fill, [`sync`] waits for them (a list of
/// every copy of an original, with all its annotations and managed fields,
/// costs more than the wait).
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
/// UID, `olm.copiedFrom` label, [`SPEC_HASH`], and whether its status was ever
/// written (of its managed fields, one bare entry of the status subresource).
/// A copy carries its original's annotations (`alm-examples` among them) and
/// managed fields that list every field of its spec, thousands of times over.
pub fn trim(copy: &mut PartialObjectMeta<ClusterServiceVersion>) {
    let meta = &mut copy.metadata;
    meta.managed_fields = wrote_status(meta).then(|| {
        vec![ManagedFieldsEntry {
            subresource: Some(STATUS_SUBRESOURCE.to_owned()),
            ..ManagedFieldsEntry::default()
        }]
    });
    meta.owner_references = None;
    meta.finalizers = None;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|key, _| key == labels::COPIED_FROM);
    }
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, _| key == SPEC_HASH);
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

/// Whether [`sync`] brought the copies in line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// The copies are in line.
    InLine,
    /// The caches are still filling: look again shortly.
    Later,
}

/// Brings the copies of `csv` (whose status is now `status`) in line with
/// the namespaces `membership` serves: writes the missing or stale ones,
/// deletes those in namespaces no longer served, and records on `csv` the
/// status they all have (see [`plan`]).
pub async fn sync(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    membership: &Membership,
    status: &ClusterServiceVersionStatus,
) -> Result<Kept, Error> {
    if ctx.copies.get().is_some_and(|caches| !caches.synced()) {
        return Ok(Kept::Later);
    }
    let name = csv.name_any();
    let own = csv.namespace().unwrap_or_default();
    let uid = csv.uid().unwrap_or_default();
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
    let namespaces = copy_namespaces(&own, &membership.targets, &all, disabled);
    let same_name = same_name(ctx, &name)
        .await
        .map_err(read("the CSVs of the same name"))?;
    // Every copy is the same but for its namespace, and so are its hashes.
    let (prototype, copy_status) = prototype(csv, membership, status);
    let spec_hash = prototype
        .annotations()
        .get(SPEC_HASH)
        .cloned()
        .unwrap_or_default();
    let status_hash = status_hash(&copy_status);
    let status_recorded = csv.annotations().get(STATUS_HASH) == Some(&status_hash)
        || ctx.copies_recorded.get(&uid).as_ref() == Some(&status_hash);
    let wanted = Wanted {
        namespaces: &namespaces,
        spec_hash: &spec_hash,
        status_recorded,
    };
    let mut deleted = 0;
    for action in plan(&own, &wanted, &same_name) {
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
            }
            Action::UpdateStatus(namespace) => {
                let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
                ctx.apply_status(&api, &name, &copy_status)
                    .await
                    .map_err(write("write the status of", &namespace))?;
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
            Action::Record => {
                let annotations = update_status::owned_annotations(membership, Some(&status_hash));
                ctx.apply_annotations::<ClusterServiceVersion>(&own, &name, annotations)
                    .await
                    .map_err(|source| Error::Record {
                        csv: name.clone(),
                        source,
                    })?;
                ctx.copies_recorded.set(&uid, &status_hash);
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
    Ok(Kept::InLine)
}

/// The status hashes this process recorded on originals ([`STATUS_HASH`]),
/// by the original's UID. The reconcile after a fan-out is triggered by the
/// fan-out's own writes and may start before the cache shows the record;
/// without this it would write every copy once more. (A hash covers the
/// phase's `lastTransitionTime`, so an old one never matches a new status.)
#[derive(Debug, Default)]
pub struct Recorded(Mutex<HashMap<String, String>>);

impl Recorded {
    fn get(&self, uid: &str) -> Option<String> {
        self.lock().get(uid).cloned()
    }

    fn set(&self, uid: &str, hash: &str) {
        if !uid.is_empty() {
            self.lock().insert(uid.to_owned(), hash.to_owned());
        }
    }

    fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
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
    ctx.copies_recorded.forget(&csv.uid().unwrap_or_default());
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
        let (a, a_status) = copy_of(&csv, &installing, "a");
        let (b, b_status) = copy_of(&csv, &succeeded, "a");
        assert_eq!(a.annotations().get(SPEC_HASH), b.annotations().get(SPEC_HASH));
        assert_ne!(status_hash(&a_status), status_hash(&b_status));
    }

    #[test]
    fn the_status_hash_leaves_out_only_the_last_update_time() {
        let time = |second| Time(k8s_openapi::jiff::Timestamp::from_second(second).expect("a time"));
        let installing = ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Installing),
            reason: Some(CsvReason::Waiting),
            message: Some("waiting for the deployment".to_owned()),
            last_update_time: Some(time(1_800_000_000)),
            last_transition_time: Some(time(1_800_000_000)),
            ..Default::default()
        };
        // Another message of the original, in the same phase: only lastUpdateTime reaches the copy.
        let later = ClusterServiceVersionStatus {
            message: Some("waiting for 1 of 2 replicas".to_owned()),
            last_update_time: Some(time(1_800_000_030)),
            ..installing.clone()
        };
        let csv = original();
        let (_, before) = copy_of(&csv, &installing, "a");
        let (_, after) = copy_of(&csv, &later, "a");
        assert_eq!(before.message, after.message, "a copy shows none of the messages");
        assert_ne!(before.last_update_time, after.last_update_time);
        assert_eq!(
            status_hash(&before),
            status_hash(&after),
            "no copy is written for it"
        );
        // The same phase entered again (after another) is a new status.
        let again = ClusterServiceVersionStatus {
            last_transition_time: Some(time(1_800_000_090)),
            ..installing.clone()
        };
        let (_, again) = copy_of(&csv, &again, "a");
        assert_ne!(status_hash(&before), status_hash(&again));
    }

    #[test]
    fn copies_carry_the_group_annotations_before_the_cached_original_shows_them() {
        let membership = super::super::fixtures::membership(Targets::All);
        let fresh = original();
        let mut annotated = original();
        annotated
            .annotations_mut()
            .extend(operator_group_annotations(&membership));
        let status = ClusterServiceVersionStatus::default();
        let (before, _) = prototype(&fresh, &membership, &status);
        let (after, _) = prototype(&annotated, &membership, &status);
        assert_eq!(
            before.annotations().get(labels::OPERATOR_GROUP),
            Some(&membership.operator_group)
        );
        assert_eq!(
            before.annotations().get(SPEC_HASH),
            after.annotations().get(SPEC_HASH),
            "the copies are not written again once the cache shows the annotations"
        );
    }

    #[test]
    fn the_record_of_the_copies_is_never_copied() {
        let mut csv = original();
        let (before, _) = copy_of(&csv, &ClusterServiceVersionStatus::default(), "a");
        csv.annotations_mut()
            .insert(STATUS_HASH.to_owned(), "0123456789abcdef".to_owned());
        let (after, _) = copy_of(&csv, &ClusterServiceVersionStatus::default(), "a");
        assert!(!after.annotations().contains_key(STATUS_HASH));
        assert_eq!(
            before.annotations().get(SPEC_HASH),
            after.annotations().get(SPEC_HASH),
            "recording a fan-out does not make the copies' metadata stale"
        );
    }

    fn occupant(namespace: &str, copied_from: Option<&str>, targets: Option<&str>) -> Occupant {
        Occupant {
            namespace: namespace.to_owned(),
            uid: format!("uid-{namespace}"),
            copied_from: copied_from.map(str::to_owned),
            targets: targets.map(str::to_owned),
            spec_hash: Some("s".to_owned()),
            has_status: true,
        }
    }

    fn set(list: &[&str]) -> BTreeSet<String> {
        names(list).into_iter().collect()
    }

    fn wanted<'a>(namespaces: &'a BTreeSet<String>, spec_hash: &'a str, status_recorded: bool) -> Wanted<'a> {
        Wanted {
            namespaces,
            spec_hash,
            status_recorded,
        }
    }

    #[test]
    fn the_plan_creates_updates_and_deletes_only_its_own_copies() {
        let same_name = vec![
            occupant("ops", None, Some("")),
            occupant("a", Some("ops"), None),
            occupant("gone", Some("ops"), None),
            occupant("mine", None, None),
        ];
        let namespaces = set(&["a", "b", "mine"]);
        // A new status: one status write per copy, then the record.
        let got = plan("ops", &wanted(&namespaces, "s", false), &same_name);
        assert_eq!(
            got,
            vec![
                Action::UpdateStatus("a".to_owned()),
                Action::Create("b".to_owned()),
                // `mine` holds a CSV that is no copy: untouched.
                Action::Delete("gone".to_owned(), "uid-gone".to_owned()),
                Action::Record,
            ]
        );
        // New metadata or spec, the status recorded: the copy's metadata and spec only.
        let got = plan("ops", &wanted(&namespaces, "s2", true), &same_name);
        assert_eq!(
            got,
            vec![
                Action::Update("a".to_owned()),
                Action::Create("b".to_owned()),
                Action::Delete("gone".to_owned(), "uid-gone".to_owned()),
            ]
        );
        // Both: the metadata and spec first.
        let a = set(&["a"]);
        assert_eq!(
            plan("ops", &wanted(&a, "s2", false), &same_name[..2]),
            vec![
                Action::Update("a".to_owned()),
                Action::UpdateStatus("a".to_owned()),
                Action::Record,
            ]
        );
        // Up to date: nothing to write.
        assert_eq!(plan("ops", &wanted(&a, "s", true), &same_name[..2]), Vec::new());
    }

    #[test]
    fn a_status_change_costs_one_status_write_per_copy_and_a_restart_none() {
        let namespaces: BTreeSet<String> = (0..1000).map(|i| format!("ns-{i}")).collect();
        let mut same_name = vec![occupant("ops", None, Some(""))];
        same_name.extend(namespaces.iter().map(|ns| occupant(ns, Some("ops"), None)));
        let changed = plan("ops", &wanted(&namespaces, "s", false), &same_name);
        assert_eq!(changed.len(), 1001);
        assert!(
            changed[..1000]
                .iter()
                .all(|action| matches!(action, Action::UpdateStatus(_))),
            "one status write per copy, nothing else: {:?}",
            &changed[..3]
        );
        assert_eq!(changed.last(), Some(&Action::Record));
        // Recorded (as after the fan-out, or after a restart): nothing to write.
        assert_eq!(
            plan("ops", &wanted(&namespaces, "s", true), &same_name),
            Vec::new()
        );
    }

    #[test]
    fn a_fan_out_cut_short_is_done_again_and_a_copy_without_status_gets_one() {
        let mut same_name = vec![
            occupant("ops", None, Some("")),
            occupant("a", Some("ops"), None),
            occupant("b", Some("ops"), None),
        ];
        // A created copy whose status write never happened (the creation was cut short).
        same_name[2].has_status = false;
        let namespaces = set(&["a", "b"]);
        // Recorded: only the copy without a status is written, and nothing recorded again.
        assert_eq!(
            plan("ops", &wanted(&namespaces, "s", true), &same_name),
            vec![Action::UpdateStatus("b".to_owned())]
        );
        // Not recorded (a fan-out cut short before its record): every copy again.
        assert_eq!(
            plan("ops", &wanted(&namespaces, "s", false), &same_name),
            vec![
                Action::UpdateStatus("a".to_owned()),
                Action::UpdateStatus("b".to_owned()),
                Action::Record,
            ]
        );
    }

    #[test]
    fn an_original_without_copies_records_nothing() {
        let same_name = vec![occupant("ops", None, Some("ops"))];
        assert_eq!(
            plan("ops", &wanted(&BTreeSet::new(), "s", false), &same_name),
            Vec::new()
        );
        // Its only namespace holds another CSV of the name: no copy, no record.
        let taken = vec![occupant("ops", None, Some("")), occupant("a", None, None)];
        assert_eq!(plan("ops", &wanted(&set(&["a"]), "s", false), &taken), Vec::new());
        // Copies switched off: the deletions, no record.
        let switched_off = vec![occupant("ops", None, Some("")), occupant("a", Some("ops"), None)];
        assert_eq!(
            plan("ops", &wanted(&BTreeSet::new(), "s", false), &switched_off),
            vec![Action::Delete("a".to_owned(), "uid-a".to_owned())]
        );
    }

    #[test]
    fn a_copy_of_another_original_stays_while_that_original_serves_the_namespace() {
        let a = set(&["a"]);
        let current = wanted(&a, "s", true);
        // `other` serves all namespaces: its copy in `a` stays, none of ours goes there.
        let serving = vec![
            occupant("other", None, Some("")),
            occupant("a", Some("other"), None),
        ];
        assert_eq!(plan("ops", &current, &serving), Vec::new());
        // `other` now serves only `b`: its copy in `a` dangles and ours replaces it.
        let moved = vec![
            occupant("other", None, Some("b,other")),
            occupant("a", Some("other"), None),
        ];
        assert_eq!(
            plan("ops", &current, &moved),
            vec![Action::Replace("a".to_owned(), "uid-a".to_owned())]
        );
        // `other` is gone.
        let orphan = vec![occupant("a", Some("other"), None)];
        assert_eq!(
            plan("ops", &current, &orphan),
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

    fn managed(manager: &str, subresource: Option<&str>) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.to_owned()),
            operation: Some("Apply".to_owned()),
            subresource: subresource.map(str::to_owned),
            fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                serde_json::json!({"f:spec": {"f:install": {}}}),
            )),
            ..ManagedFieldsEntry::default()
        }
    }

    #[test]
    fn the_copy_cache_keeps_only_what_keeping_copies_needs() {
        let csv = original();
        let (mut copy, _) = copy_of(&csv, &ClusterServiceVersionStatus::default(), "a");
        copy.annotations_mut()
            .insert("alm-examples".to_owned(), "[{}]".repeat(1000));
        copy.metadata.uid = Some("u".to_owned());
        copy.metadata.managed_fields = Some(vec![
            managed("olm-operator", None),
            managed("olm-operator", Some("status")),
        ]);
        let mut meta = PartialObjectMeta::<ClusterServiceVersion> {
            types: None,
            metadata: copy.metadata.clone(),
            _phantom: std::marker::PhantomData,
        };
        trim(&mut meta);
        let occupant = Occupant::from_meta(&meta.metadata).expect("an occupant");
        assert_eq!(occupant.copied_from.as_deref(), Some("ops"));
        assert_eq!(occupant.uid, "u");
        assert_eq!(occupant.spec_hash, copy.annotations().get(SPEC_HASH).cloned());
        assert!(occupant.has_status);
        assert_eq!(meta.metadata.annotations.as_ref().map(BTreeMap::len), Some(1));
        assert_eq!(meta.metadata.labels.as_ref().map(BTreeMap::len), Some(1));
        assert_eq!(
            meta.metadata.managed_fields,
            Some(vec![ManagedFieldsEntry {
                subresource: Some("status".to_owned()),
                ..ManagedFieldsEntry::default()
            }]),
            "of the managed fields, only that the status was written"
        );
        // A copy whose status was never written keeps no managed fields, and says so.
        meta.metadata.managed_fields = Some(vec![managed("olm-operator", None)]);
        trim(&mut meta);
        assert_eq!(meta.metadata.managed_fields, None);
        assert!(
            !Occupant::from_meta(&meta.metadata)
                .expect("an occupant")
                .has_status
        );
    }

    #[test]
    fn records_of_this_process_are_kept_by_uid_until_forgotten() {
        let recorded = Recorded::default();
        recorded.set("uid-1", "h1");
        recorded.set("", "ignored");
        assert_eq!(recorded.get("uid-1").as_deref(), Some("h1"));
        assert_eq!(recorded.get(""), None);
        recorded.set("uid-1", "h2");
        assert_eq!(recorded.get("uid-1").as_deref(), Some("h2"));
        recorded.forget("uid-1");
        assert_eq!(recorded.get("uid-1"), None);
    }
}
