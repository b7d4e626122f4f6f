//! The OperatorGroup controller: keeps `status.namespaces` (from
//! `targetNamespaces`, a namespace `selector`, or `[""]` for all namespaces),
//! `status.serviceAccountRef` (when `serviceAccountName` names an existing
//! service account), the status conditions (see [`status`]), and the
//! `olm.providedAPIs` annotation (the APIs the CSVs of its namespace own),
//! unless `staticProvidedAPIs` is set.
//!
//! A reconcile reads the shared stores (namespaces, CSVs, OperatorGroups) and
//! asks the API server only for the named service account, decides what
//! changes with [`decide::decide`] (pure), and has the runtime's applier
//! perform it. What triggers a
//! reconcile, and the mappers from other objects to groups (below), are wired
//! in [`crate::watches`]: OperatorGroups (→ themselves and the other groups of
//! their namespace); Namespaces (→ the groups that select by name or label);
//! ClusterServiceVersions (→ the groups of their namespace).

pub mod decide;
pub mod status;
pub mod targets;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ObjectReference, ServiceAccount};
use kube::{
    Api, Resource, ResourceExt,
    runtime::{
        controller::Action,
        reflector::{ObjectRef, Store},
    },
};
use olm_api::v1::OperatorGroup;

use olm_runtime::{ErrorClass, ReconcileError, classify};

use self::{
    status::{Account, Observed},
    targets::Selection,
};
use crate::{context::Context, stores::Stores};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "operatorgroup";

/// How soon a group is looked at again while the stores have not synced yet.
const UNTIL_SYNCED: Duration = Duration::from_secs(1);

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The OperatorGroup has no namespace (it always should).
    #[error("the OperatorGroup has no namespace")]
    NoNamespace,
    /// Reading the service account failed.
    #[error("failed to read {what}")]
    Read {
        /// What was read.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Writing status or annotation failed.
    #[error("failed to update OperatorGroup {name}")]
    Write {
        /// The OperatorGroup.
        name: String,
        /// The cause.
        #[source]
        source: olm_runtime::apply::WriteError,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace => "invalid",
            Error::Read { .. } => "dereference",
            Error::Write { .. } => "update_status",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            // Only a change of the object can help.
            Error::NoNamespace => ErrorClass::Terminal,
            Error::Read { source, .. } => classify(source),
            Error::Write { source, .. } => source.class(),
        }
    }
}

/// Reconciles one OperatorGroup from the shared `stores`.
pub async fn reconcile(
    group: Arc<OperatorGroup>,
    ctx: Arc<Context>,
    stores: Stores,
) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if !ctx.is_leader() {
        return Ok(Action::await_change());
    }
    if !stores.synced() {
        // An unsynced store would read as "no namespaces, no CSVs".
        return Ok(Action::requeue(UNTIL_SYNCED));
    }
    let namespace = group.namespace().ok_or(Error::NoNamespace)?;
    let name = group.name_any();

    // Read: the stores, and the service account from the API server (no store
    // holds service accounts: olm-operator does not watch them).
    let selected = targets::selected_namespaces(
        &targets::selection(&group.spec),
        stores.namespaces.store.state().iter().map(|ns| &ns.metadata),
    )
    .map_err(|error| error.to_string());
    let provided = targets::provided_apis(stores.csvs_in(&namespace).iter().map(AsRef::as_ref));
    let account = service_account(&ctx, &namespace, group.spec.service_account_name.as_deref()).await?;
    let observed = Observed {
        namespaces: selected,
        groups_in_namespace: stores.operator_groups_in(&namespace).len(),
        account,
    };

    // Decide, then apply.
    let effects = decide::decide(&group, &observed, &provided, &olm_runtime::conditions::now());
    let api: Api<OperatorGroup> = Api::namespaced(ctx.client.clone(), &namespace);
    ctx.writer
        .perform(&ctx.client, &api, &effects, &())
        .await
        .map_err(|source| Error::Write {
            name: name.clone(),
            source,
        })?;
    if let Some(write) = &effects.status {
        tracing::info!(operatorgroup = %name, %namespace, namespaces = ?write.status.namespaces, "OperatorGroup status updated");
    }
    Ok(Action::requeue(ctx.settings.resync))
}

/// The service account `name` of `namespace`, as the status refers to it.
async fn service_account(ctx: &Context, namespace: &str, name: Option<&str>) -> Result<Account, Error> {
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return Ok(Account::NotNamed);
    };
    let found = Api::<ServiceAccount>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|source| Error::Read {
            what: format!("service account {namespace}/{name}"),
            source,
        })?;
    Ok(match found {
        Some(account) => Account::Found(ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("ServiceAccount".to_owned()),
            name: account.metadata.name.clone(),
            namespace: account.metadata.namespace.clone(),
            uid: account.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
        None => Account::Missing(name.to_owned()),
    })
}

/// What to do after a failed reconcile.
pub fn error_policy(group: Arc<OperatorGroup>, error: &Error, ctx: Arc<Context>) -> Action {
    olm_runtime::error_policy(
        CONTROLLER,
        group.as_ref(),
        error,
        &ctx.metrics.runtime().reconcile,
    )
}

/// The OperatorGroups whose namespaces can change with a namespace: those
/// that select by name or by label.
pub fn selecting(store: &Store<OperatorGroup>) -> Vec<ObjectRef<OperatorGroup>> {
    store
        .state()
        .iter()
        .filter(|group| targets::selection(&group.spec) != Selection::All)
        .map(|group| ObjectRef::from_obj(group.as_ref()))
        .collect()
}

/// The OperatorGroups of `namespace` (for a CSV of that namespace, or another
/// group there: a second group changes the `MultipleOperatorGroup` condition).
pub fn in_namespace(store: &Store<OperatorGroup>, namespace: &str) -> Vec<ObjectRef<OperatorGroup>> {
    store
        .state()
        .iter()
        .filter(|group| group.meta().namespace.as_deref() == Some(namespace))
        .map(|group| ObjectRef::from_obj(group.as_ref()))
        .collect()
}
