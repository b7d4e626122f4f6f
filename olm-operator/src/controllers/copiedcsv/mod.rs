//! The copied-CSV controller. OLM shows an operator in every namespace it
//! serves by writing a copy of its CSV there, labelled `olm.copiedFrom=<the
//! original's namespace>`, whose status follows the original's with reason
//! `Copied`. This controller keeps those copies; the CSV reconcile neither
//! writes nor waits for them, so that an operator serving a thousand
//! namespaces installs as fast as one serving one.
//!
//! The copy keeps the original's spec as the CSV store holds it (without
//! icons and descriptions, see `ClusterServiceVersion::drop_presentation`),
//! its annotations but `olm.targetNamespaces`, with those of its
//! OperatorGroup, and its labels except the operator's component labels
//! (`operators.coreos.com/...`), so that nothing takes a copy for a part of
//! the installed operator. Copies cannot be owned across namespaces: they are
//! found by their label and name, and removed by [`delete_all`] from the CSV's
//! finalizer when the original goes.
//!
//! A CSV of the same name in a target namespace that is no copy is never
//! touched (no copy there; an InstallPlan that installs there removes a copy
//! in its way). The stores may still show that copy: every write to a copy
//! is bound to the copy's UID (and a status write to its `olm.copiedFrom`
//! label), so the API server refuses one that would land on the CSV that took
//! the name, and the applier counts it as taken ([`perform`]). Of two originals of the same name, the first copy in a
//! namespace stays until its original is gone or no longer serves it. With
//! `spec.features.disableCopiedCSVs` on the OLMConfig `cluster`, operators
//! that serve all namespaces get no copies (existing ones are deleted, with
//! a `DisabledCopiedCSVs` event on the original); operators that serve
//! chosen namespaces keep theirs, as in OLM. The OLMConfig's
//! `DisabledCopiedCSVs` condition says which holds.
//!
//! Which phases reach the copies: only those the original rests in, see
//! [`decide`]. An install pass (Pending, InstallReady, Installing,
//! Succeeded) so costs each copy one create and one status write, and a
//! later phase change one status write per copy.
//!
//! Shape: a reconcile of one original reads the shared stores only (the
//! originals, the copies, the OperatorGroups, the namespaces and the
//! OLMConfig, see [`crate::watches`]), decides in [`decide::decide`] (pure)
//! and has the runtime's applier perform it. The copies' store keeps each
//! copy's metadata trimmed to what keeping it needs and its status without
//! spec ([`trim`]) and the hash of what was applied, so the decision keeps
//! only the copies whose live copy differs (the applier would skip the others
//! on their hash as well): a new leader writes nothing for copies that are
//! already right. One reconcile writes at most [`decide::BATCH`] copies and
//! looks again at once for the rest, so that the copies it holds to write stay
//! few. What triggers a
//! reconcile (wired in [`crate::watches`]): the original; its copies, also
//! deleted ones ([`originals`]); the OperatorGroups of its namespace, also
//! deleted ones ([`in_namespace`]); for an operator of all namespaces
//! ([`serving_all`]), any namespace, and the OLMConfig.

pub mod copy;
pub mod decide;

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client, ResourceExt,
    api::ListParams,
    core::PartialObjectMeta,
    runtime::{
        controller::Action,
        events::{Event, EventType},
        reflector::{ObjectRef, Store},
    },
};
use olm_api::{
    labels,
    v1::{OLM_CONFIG_NAME, OLMConfig, OperatorGroup},
    v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, Subscription},
};
use olm_runtime::{
    ErrorClass, ReconcileError,
    apply::{WriteError, Writer},
    effects::{DESIRED_HASH, Effects, Live, Performed, Removal},
    live::LiveStores,
};

use self::{
    copy::Occupant,
    decide::{Decision, Observed},
};
use crate::{context::Context, controllers::csv::validate, stores::Cache};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "copiedcsv";

/// The event reason on the original when its copies are switched off.
pub const DISABLED_REASON: &str = "DisabledCopiedCSVs";

/// How soon an original is looked at again while the stores have not synced.
const UNTIL_SYNCED: Duration = Duration::from_millis(500);

/// Why keeping the copies of an original failed; the reconcile is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing or deleting copies (or the OLMConfig's status) failed.
    #[error("failed to keep the copies of ClusterServiceVersion {namespace}/{csv}")]
    Write {
        /// The original's namespace.
        namespace: String,
        /// The original.
        csv: String,
        /// The cause.
        #[source]
        source: WriteError,
    },
    /// Listing the copies of an original failed (finalizer only).
    #[error("failed to list the copies of ClusterServiceVersion {namespace}/{csv}")]
    List {
        /// The original's namespace.
        namespace: String,
        /// The original.
        csv: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Write { .. } => "copied",
            Error::List { .. } => "dereference",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::Write { source, .. } => source.class(),
            Error::List { source, .. } => olm_runtime::classify(source),
        }
    }
}

/// The shared stores the reconcile reads, and the applier's view of the
/// live copies.
#[derive(Clone)]
pub struct Sources {
    /// Every CSV that is no copy.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every copy, trimmed ([`trim`]).
    pub copies: Cache<ClusterServiceVersion>,
    /// Every OperatorGroup.
    pub groups: Cache<OperatorGroup>,
    /// Every namespace, as metadata.
    pub namespaces: Cache<PartialObjectMeta<Namespace>>,
    /// The OLMConfigs (OLM reads only `cluster`).
    pub configs: Cache<OLMConfig>,
    /// Every Subscription, trimmed ([`crate::stores::trim_subscription`]).
    pub subscriptions: Cache<Subscription>,
    /// The copies' store, for the applier.
    pub live: LiveStores,
}

impl Sources {
    /// Whether every store holds a complete list.
    pub fn synced(&self) -> bool {
        self.csvs.synced.get()
            && self.copies.synced.get()
            && self.groups.synced.get()
            && self.namespaces.synced.get()
            && self.configs.synced.get()
            && self.subscriptions.synced.get()
    }

    /// The namespaces whose Subscriptions install a CSV named `name`
    /// themselves: it is their `currentCSV` or `installedCSV`.
    fn claimed(&self, name: &str) -> BTreeSet<String> {
        self.subscriptions
            .store
            .state()
            .iter()
            .filter(|subscription| subscription_csvs(subscription).any(|csv| csv == name))
            .filter_map(|subscription| subscription.namespace())
            .collect()
    }

    /// Every CSV named `name`: originals and copies.
    fn same_name(&self, name: &str) -> Vec<Occupant> {
        let (originals, copies) = (self.csvs.store.state(), self.copies.store.state());
        originals
            .iter()
            .chain(copies.iter())
            .filter(|csv| csv.metadata.name.as_deref() == Some(name))
            .filter_map(|csv| Occupant::of(csv))
            .collect()
    }

    /// The namespaces of the cluster, by name, without those being deleted.
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

/// Keeps the copies of the original `csv`.
pub async fn reconcile(
    csv: Arc<ClusterServiceVersion>,
    ctx: Arc<Context>,
    sources: Sources,
) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if !ctx.is_leader() {
        return Ok(Action::await_change());
    }
    if !sources.synced() {
        // An unsynced store would read as "no namespaces, no copies".
        return Ok(Action::requeue(UNTIL_SYNCED));
    }
    let (name, namespace) = (csv.name_any(), csv.namespace().unwrap_or_default());

    // Read: the stores only.
    let groups: Vec<OperatorGroup> = crate::stores::in_namespace(&sources.groups.store, &namespace)
        .iter()
        .map(|group| group.as_ref().clone())
        .collect();
    let membership = validate::membership(&csv, &groups).ok();
    let config = sources.configs.store.get(&ObjectRef::new(OLM_CONFIG_NAME));
    let (namespaces, same_name) = (sources.live_namespaces(), sources.same_name(&name));
    let claimed = sources.claimed(&name);
    let now = olm_runtime::conditions::now();
    let observed = Observed {
        original: &csv,
        membership: membership.as_ref(),
        namespaces: &namespaces,
        config: config.as_deref(),
        same_name: &same_name,
        claimed: &claimed,
        now: &now,
    };

    // Decide, then apply.
    let decision = decide::decide(&observed);
    let done = perform(&ctx.writer, &ctx.client, &csv, &decision, &sources.live).await?;
    if done.applied + done.statuses + done.removed > 0 {
        tracing::info!(csv = %name, %namespace, applied = done.applied, statuses = done.statuses, removed = done.removed, "copies kept");
    }
    if decision.disabled && done.removed > 0 {
        announce_disabled(&ctx, &csv, done.removed);
    }
    if decision.more {
        return Ok(Action::requeue(Duration::ZERO));
    }
    Ok(Action::requeue(ctx.settings.resync))
}

/// Apply: performs `decision` for the original `csv` through `writer`,
/// skipping the copies whose live copy `live` shows already written.
pub async fn perform(
    writer: &Writer,
    client: &Client,
    csv: &ClusterServiceVersion,
    decision: &Decision,
    live: &dyn Live,
) -> Result<Performed, Error> {
    let (name, namespace) = (csv.name_any(), csv.namespace().unwrap_or_default());
    let api: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
    writer
        .perform(client, &api, &decision.effects, live)
        .await
        .map_err(|source| Error::Write {
            namespace,
            csv: name,
            source,
        })
}

/// What to do after a failed reconcile.
pub fn error_policy(csv: Arc<ClusterServiceVersion>, error: &Error, ctx: Arc<Context>) -> Action {
    olm_runtime::error_policy(CONTROLLER, csv.as_ref(), error, &ctx.metrics.runtime().reconcile)
}

/// Tells on the original that its `deleted` copies went because copies are
/// switched off.
fn announce_disabled(ctx: &Context, csv: &ClusterServiceVersion, deleted: usize) {
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
    );
}

/// Deletes every copy of `csv` (from the CSV's finalizer, when the original
/// goes), each only as the UID the copies' store shows. Before that store
/// has synced, the copies are found by one metadata-only LIST selected by
/// name: the finalizer cannot wait, and an unsynced store would read as "no
/// copies".
pub async fn delete_all(
    ctx: &Context,
    copies: &Cache<ClusterServiceVersion>,
    csv: &ClusterServiceVersion,
) -> Result<(), Error> {
    let (name, own) = (csv.name_any(), csv.namespace().unwrap_or_default());
    let found: Vec<(String, String)> = if copies.synced.get() {
        copies
            .store
            .state()
            .iter()
            .filter(|copy| copy.metadata.name.as_deref() == Some(name.as_str()))
            .filter_map(|copy| copy_of_own(&copy.metadata, &own))
            .collect()
    } else {
        let params = ListParams::default()
            .fields(&format!("metadata.name={name}"))
            .labels(&format!("{}={own}", labels::COPIED_FROM));
        Api::<ClusterServiceVersion>::all(ctx.client.clone())
            .list_metadata(&params)
            .await
            .map_err(|source| Error::List {
                namespace: own.clone(),
                csv: name.clone(),
                source,
            })?
            .items
            .iter()
            .filter_map(|copy| copy_of_own(&copy.metadata, &own))
            .collect()
    };
    let removals = found
        .iter()
        .map(|(namespace, uid)| Removal::of::<ClusterServiceVersion>(Some(namespace), &name).with_uid(uid))
        .collect();
    let effects: Effects<()> = Effects {
        removals,
        ..Effects::none()
    };
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &own);
    ctx.writer
        .perform(&ctx.client, &api, &effects, &())
        .await
        .map_err(|source| Error::Write {
            namespace: own,
            csv: name,
            source,
        })?;
    Ok(())
}

/// The namespace and UID of the copy `meta`, when it is a copy from `own`.
fn copy_of_own(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    own: &str,
) -> Option<(String, String)> {
    let from = meta.labels.as_ref()?.get(labels::COPIED_FROM)?;
    (from == own).then(|| {
        (
            meta.namespace.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        )
    })
}

/// The spec a trimmed copy keeps: none (the type has no `Default`).
static EMPTY_SPEC: std::sync::LazyLock<Option<olm_api::v1alpha1::ClusterServiceVersionSpec>> =
    std::sync::LazyLock::new(|| {
        serde_json::from_value(serde_json::json!({"install": {"strategy": "deployment"}, "displayName": ""}))
            .ok()
    });

/// Trims a copy to what keeping it needs: its name, namespace, UID,
/// `olm.copiedFrom` label and desired hash, and its status (phase, reason,
/// message and times). A copy carries its original's annotations
/// (`alm-examples` among them) and spec, thousands of times over.
pub fn trim(copy: &mut ClusterServiceVersion) {
    let meta = &mut copy.metadata;
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.finalizers = None;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|key, _| key == labels::COPIED_FROM);
    }
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, _| key == DESIRED_HASH);
    }
    if let Some(empty) = EMPTY_SPEC.as_ref() {
        copy.spec = empty.clone();
    }
    copy.status = copy.status.take().map(|status| ClusterServiceVersionStatus {
        phase: status.phase,
        reason: status.reason,
        message: status.message,
        last_update_time: status.last_update_time,
        last_transition_time: status.last_transition_time,
        ..ClusterServiceVersionStatus::default()
    });
}

/// The originals a change to a copy concerns: its own (named by the copy's
/// name and `olm.copiedFrom` label), and the other CSVs of `store` with the
/// same name, which may take the namespace once the copy is gone.
pub fn originals(
    store: &Store<ClusterServiceVersion>,
    copy: &ClusterServiceVersion,
) -> Vec<ObjectRef<ClusterServiceVersion>> {
    let Some(name) = copy.metadata.name.as_deref() else {
        return Vec::new();
    };
    let from = copy.labels().get(labels::COPIED_FROM);
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

/// The originals of `namespace` (for a change of its OperatorGroup).
pub fn in_namespace(
    store: &Store<ClusterServiceVersion>,
    namespace: &str,
) -> Vec<ObjectRef<ClusterServiceVersion>> {
    crate::stores::in_namespace(store, namespace)
        .iter()
        .map(|csv| ObjectRef::from_obj(csv.as_ref()))
        .collect()
}

/// The CSVs a Subscription's status names: the one it installs
/// (`currentCSV`) and the one installed (`installedCSV`).
fn subscription_csvs(subscription: &Subscription) -> impl Iterator<Item = &str> {
    let status = subscription.status.as_ref();
    let current = status.and_then(|s| s.current_csv.as_deref());
    let installed = status.and_then(|s| s.installed_csv.as_deref());
    current.into_iter().chain(installed)
}

/// The originals of CSVs a Subscription names ([`subscription_csvs`]), in
/// any namespace: whether they may copy into the Subscription's namespace
/// follows from it.
pub fn named_by(
    store: &Store<ClusterServiceVersion>,
    subscription: &Subscription,
) -> Vec<ObjectRef<ClusterServiceVersion>> {
    let names: BTreeSet<&str> = subscription_csvs(subscription).collect();
    store
        .state()
        .iter()
        .filter(|csv| {
            csv.metadata
                .name
                .as_deref()
                .is_some_and(|name| names.contains(name))
        })
        .map(|csv| ObjectRef::from_obj(csv.as_ref()))
        .collect()
}

/// The originals of operators that serve all namespaces (`olm.targetNamespaces`
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

    #[test]
    fn the_copies_store_keeps_only_what_keeping_copies_needs() {
        let mut copy: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcd.v1", "namespace": "a", "uid": "u",
                         "labels": {"olm.copiedFrom": "ops", "team": "db"},
                         "annotations": {"alm-examples": "[{}]", DESIRED_HASH: "h"}},
            "spec": {"displayName": "etcd", "description": "long", "install": {"strategy": "deployment", "spec": {"deployments": []}}},
            "status": {"phase": "Succeeded", "reason": "Copied", "message": "m",
                       "requirementStatus": [{"group": "", "version": "v1", "kind": "ServiceAccount", "name": "x", "status": "Present", "message": ""}]},
        }))
        .expect("a copy");
        trim(&mut copy);
        assert_eq!(copy.labels().len(), 1);
        assert_eq!(
            copy.annotations().get(DESIRED_HASH).map(String::as_str),
            Some("h")
        );
        assert_eq!(copy.annotations().len(), 1);
        assert_eq!(copy.spec.display_name, "", "no spec");
        assert_eq!(copy.spec.description, None);
        let status = copy.status.expect("the status");
        assert_eq!(status.message.as_deref(), Some("m"));
        assert_eq!(status.requirement_status, None);
        let occupant = Occupant::of(&{
            let mut c = ClusterServiceVersion::new("etcd.v1", EMPTY_SPEC.clone().expect("a spec"));
            c.metadata.namespace = Some("a".to_owned());
            c.labels_mut()
                .insert(labels::COPIED_FROM.to_owned(), "ops".to_owned());
            c
        })
        .expect("an occupant");
        assert_eq!(occupant.copied_from.as_deref(), Some("ops"));
    }
}
