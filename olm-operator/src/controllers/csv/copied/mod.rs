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

use std::collections::BTreeSet;

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
    v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus},
};
use olm_runtime::apply::WriteError;

use super::{
    update_status,
    validate::{Membership, Targets},
};
use crate::{context::Context, copy_state::Caches};

mod desired;

pub use super::copy_hashes::{SPEC_HASH, STATUS_HASH};

pub use desired::{Action, Occupant, Wanted, copy_namespaces, copy_of, plan, prototype, status_hash};
use desired::{STATUS_SUBRESOURCE, wrote_status};

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
    let (namespaces, disabled) = served_namespaces(ctx, csv, membership).await?;
    let same_name = same_name(ctx, &name).await.map_err(|source| Error::Read {
        what: "the CSVs of the same name",
        csv: name.clone(),
        source,
    })?;
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
    let fanout = Fanout {
        ctx,
        name: &name,
        own: &own,
        uid: &uid,
        membership,
        prototype: &prototype,
        status: &copy_status,
        status_hash: &status_hash,
    };
    let mut deleted = 0;
    for action in plan(&own, &wanted, &same_name) {
        deleted += usize::from(matches!(action, Action::Delete(..)));
        fanout.perform(action).await?;
    }
    if disabled && deleted > 0 {
        announce_disabled(ctx, csv, deleted).await;
    }
    Ok(Kept::InLine)
}

/// The namespaces that get a copy of `csv` ([`copy_namespaces`]), and whether
/// copies are switched off for it. Only an operator of all namespaces reads
/// the OLMConfig and the namespaces.
async fn served_namespaces(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    membership: &Membership,
) -> Result<(BTreeSet<String>, bool), Error> {
    let read = |what| {
        let csv = csv.name_any();
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
    let own = csv.namespace().unwrap_or_default();
    Ok((
        copy_namespaces(&own, &membership.targets, &all, disabled),
        disabled,
    ))
}

/// What the writes of one fan-out share: the original and its copy as it
/// should be.
struct Fanout<'a> {
    ctx: &'a Context,
    /// The original's name, namespace and UID.
    name: &'a str,
    own: &'a str,
    uid: &'a str,
    membership: &'a Membership,
    /// The copy, without namespace and status.
    prototype: &'a ClusterServiceVersion,
    /// The copy's status, and its hash.
    status: &'a ClusterServiceVersionStatus,
    status_hash: &'a String,
}

impl Fanout<'_> {
    /// Performs one action of the [`plan`].
    async fn perform(&self, action: Action) -> Result<(), Error> {
        let (ctx, name) = (self.ctx, self.name);
        match action {
            Action::Create(namespace) => {
                create_copy(ctx, self.prototype, self.status, &namespace)
                    .await
                    .map_err(self.write_error("create", &namespace))?;
            }
            Action::Update(namespace) => {
                let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
                let mut copy = self.prototype.clone();
                copy.metadata.namespace = Some(namespace.clone());
                ctx.apply(&api, &copy)
                    .await
                    .map_err(self.write_error("write", &namespace))?;
            }
            Action::UpdateStatus(namespace) => {
                let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
                ctx.apply_status(&api, name, self.status)
                    .await
                    .map_err(self.write_error("write the status of", &namespace))?;
            }
            Action::Delete(namespace, uid) => {
                delete_copy(ctx, name, &namespace, Some(uid)).await?;
            }
            Action::Replace(namespace, uid) => {
                tracing::info!(csv = %name, %namespace, "replacing the dangling copy of another original");
                delete_copy(ctx, name, &namespace, Some(uid)).await?;
                create_copy(ctx, self.prototype, self.status, &namespace)
                    .await
                    .map_err(self.write_error("create", &namespace))?;
            }
            Action::Record => {
                let annotations = update_status::owned_annotations(self.membership, Some(self.status_hash));
                ctx.apply_annotations::<ClusterServiceVersion>(self.own, name, annotations)
                    .await
                    .map_err(|source| Error::Record {
                        csv: name.to_owned(),
                        source,
                    })?;
                ctx.copies_recorded.set(self.uid, self.status_hash);
            }
        }
        Ok(())
    }

    /// How a failed `action` on the copy in `namespace` is told.
    fn write_error(&self, action: &'static str, namespace: &str) -> impl FnOnce(WriteError) -> Error + use<> {
        let (csv, namespace) = (self.name.to_owned(), namespace.to_owned());
        move |source| Error::Write {
            action,
            csv,
            namespace,
            source,
        }
    }
}

/// Tells on the original that its `deleted` copies went because copies are
/// switched off.
async fn announce_disabled(ctx: &Context, csv: &ClusterServiceVersion, deleted: usize) {
    let note = format!(
        "Copied CSVs are disabled (OLMConfig {OLM_CONFIG_NAME}): removed {deleted} copies of {}",
        csv.name_any()
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

/// Every CSV named `name` in `caches` (originals and copies).
fn cached_same_name(caches: &Caches, name: &str) -> Vec<Occupant> {
    let originals = caches.csvs.store.state();
    let copies = caches.copies.store.state();
    originals
        .iter()
        .map(|csv| &csv.metadata)
        .chain(copies.iter().map(|copy| &copy.metadata))
        .filter(|meta| meta.name.as_deref() == Some(name))
        .filter_map(Occupant::from_meta)
        .collect()
}

/// Every CSV named `name` in the cluster (originals and copies): one
/// metadata-only list selected by name.
async fn same_name(ctx: &Context, name: &str) -> Result<Vec<Occupant>, kube::Error> {
    if let Some(caches) = caches(ctx) {
        return Ok(cached_same_name(caches, name));
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
    use std::collections::BTreeMap;

    use super::desired::tests::original;
    use super::*;

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
}
