//! The Relation controller: checks that a Relation (`model.olm-rs.dev`) can
//! be made and says so in its `Ready` condition, with the endpoints it joins
//! in `status.endpoints`. Both applications must be installed (a CSV of the
//! package, or of that name, Succeeded in the relation's namespace), their
//! endpoints must be one `provides` and one `requires` of one interface, an
//! endpoint left out must be the only one that fits, and an endpoint's
//! `limit` must leave room: the oldest Ready relations keep an endpoint.
//! A side in another namespace is refused (`NeedsOffer`): offers are not
//! made yet. A Ready relation gets its Databags ([`bags`]): each side's
//! application bag and one per unit its Machines report; the others go.
//! A side installed as Deployments also gets the other side's data in a
//! ConfigMap, and the RBAC to read it and write its own bag ([`pods`]).
//!
//! A reconcile reads the shared stores (CSVs, Relations, Machines, Databags),
//! decides with [`decide::decide`] (pure), and has the runtime's applier
//! write the bags and the status. It is triggered by the Relation, by any
//! CSV, Machine or other Relation of its namespace, deletions included, and
//! by its Databags ([`crate::watches`]).

pub mod bags;
pub mod decide;
pub mod pods;
pub mod resolve;
#[cfg(test)]
mod tests;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Resource, ResourceExt,
    core::PartialObjectMeta,
    runtime::{
        controller::Action,
        reflector::{ObjectRef, Store},
    },
};
use olm_api::{
    model::{Databag, RELATION_LABEL, Relation},
    substrate::Machine,
    v1alpha1::ClusterServiceVersion,
};
use olm_runtime::{ErrorClass, ReconcileError};

use crate::{context::Context, stores::Cache};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "relation";

/// How soon a relation is looked at again while the stores have not synced yet.
const UNTIL_SYNCED: Duration = Duration::from_secs(1);

/// The stores a Relation reconcile reads.
#[derive(Clone)]
pub struct Sources {
    /// Every CSV (not the copies).
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every Relation.
    pub relations: Cache<Relation>,
    /// Every Machine.
    pub machines: Cache<Machine>,
    /// Every Databag.
    pub databags: Cache<Databag>,
    /// The ConfigMaps of remote data of sides in pods (labelled with their
    /// Relation), as metadata.
    pub configmaps: Cache<PartialObjectMeta<ConfigMap>>,
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Relation has no namespace (it always should).
    #[error("Relation {0} has no namespace")]
    NoNamespace(String),
    /// Writing the status failed.
    #[error("failed to write the status of Relation {namespace}/{name}")]
    Write {
        /// The Relation's namespace.
        namespace: String,
        /// The Relation.
        name: String,
        /// The cause.
        #[source]
        source: olm_runtime::apply::WriteError,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace(_) => "invalid",
            Error::Write { .. } => "update_status",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace(_) => ErrorClass::Terminal,
            Error::Write { source, .. } => source.class(),
        }
    }
}

/// Reconciles one Relation from the shared `sources`.
pub async fn reconcile(
    relation: Arc<Relation>,
    ctx: Arc<Context>,
    sources: Sources,
) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if !ctx.is_leader() {
        return Ok(Action::await_change());
    }
    if !(sources.csvs.synced.get()
        && sources.relations.synced.get()
        && sources.machines.synced.get()
        && sources.databags.synced.get()
        && sources.configmaps.synced.get())
    {
        // An unsynced store would read as "nothing installed".
        return Ok(Action::requeue(UNTIL_SYNCED));
    }
    let name = relation.name_any();
    let namespace = relation
        .namespace()
        .ok_or_else(|| Error::NoNamespace(name.clone()))?;

    // Read: the CSVs, Relations and Machines of the namespace, and the relation's bags.
    let csvs = crate::stores::in_namespace(&sources.csvs.store, &namespace);
    let relations = crate::stores::in_namespace(&sources.relations.store, &namespace);
    let machines = crate::stores::in_namespace(&sources.machines.store, &namespace);
    let bags = crate::stores::in_namespace(&sources.databags.store, &namespace);
    let configmaps = crate::stores::in_namespace(&sources.configmaps.store, &namespace);
    let csvs: Vec<&ClusterServiceVersion> = csvs.iter().map(AsRef::as_ref).collect();
    let relations: Vec<&Relation> = relations
        .iter()
        .map(AsRef::as_ref)
        .filter(|other| other.metadata.uid != relation.metadata.uid)
        .collect();
    let machines: Vec<&Machine> = machines.iter().map(AsRef::as_ref).collect();
    let bags: Vec<&Databag> = bags
        .iter()
        .map(AsRef::as_ref)
        .filter(|bag| bag.labels().get(RELATION_LABEL) == Some(&name))
        .collect();
    let configmaps: Vec<&PartialObjectMeta<ConfigMap>> = configmaps
        .iter()
        .map(AsRef::as_ref)
        .filter(|configmap| configmap.labels().get(RELATION_LABEL) == Some(&name))
        .collect();

    // Decide, then apply.
    let seen = decide::Seen {
        csvs: &csvs,
        relations: &relations,
        machines: &machines,
        bags: &bags,
        configmaps: &configmaps,
    };
    let effects = decide::decide(&relation, &seen, &olm_runtime::conditions::now());
    let api: Api<Relation> = Api::namespaced(ctx.client.clone(), &namespace);
    ctx.writer
        .perform(&ctx.client, &api, &effects, &())
        .await
        .map_err(|source| Error::Write {
            namespace: namespace.clone(),
            name: name.clone(),
            source,
        })?;
    if let Some(write) = &effects.status {
        let ready = write.status.conditions.iter().flatten().next();
        tracing::info!(relation = %name, %namespace, reason = ?ready.map(|c| &c.reason), "Relation status updated");
    }
    Ok(Action::requeue(ctx.settings.resync))
}

/// What to do after a failed reconcile.
pub fn error_policy(relation: Arc<Relation>, error: &Error, ctx: Arc<Context>) -> Action {
    olm_runtime::error_policy(
        CONTROLLER,
        relation.as_ref(),
        error,
        &ctx.metrics.runtime().reconcile,
    )
}

/// The Relation a Databag belongs to.
pub fn of_bag(bag: &Databag) -> Option<ObjectRef<Relation>> {
    let relation = bag.labels().get(RELATION_LABEL)?;
    Some(ObjectRef::new(relation).within(&bag.namespace()?))
}

/// The Relation an object labelled with one belongs to (a ConfigMap of
/// remote data).
pub fn of_labelled<K: Resource>(object: &K) -> Option<ObjectRef<Relation>> {
    let relation = object.meta().labels.as_ref()?.get(RELATION_LABEL)?;
    Some(ObjectRef::new(relation).within(object.meta().namespace.as_deref()?))
}

/// The Relations of `namespace` (for a CSV or another Relation there).
pub fn in_namespace(store: &Store<Relation>, namespace: &str) -> Vec<ObjectRef<Relation>> {
    store
        .state()
        .iter()
        .filter(|relation| relation.meta().namespace.as_deref() == Some(namespace))
        .map(|relation| ObjectRef::from_obj(relation.as_ref()))
        .collect()
}
