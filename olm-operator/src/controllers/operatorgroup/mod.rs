//! The OperatorGroup controller: keeps `status.namespaces` (from
//! `targetNamespaces`, a namespace `selector`, or `[""]` for all namespaces),
//! `status.serviceAccountRef` (when `serviceAccountName` names an existing
//! service account), and the `olm.providedAPIs` annotation (the APIs the CSVs
//! of its namespace own), unless `staticProvidedAPIs` is set.
//!
//! Watches: OperatorGroups; Namespaces (→ the OperatorGroups that select by
//! name or label); ClusterServiceVersions (→ the OperatorGroups of their
//! namespace).

pub mod targets;

use std::{collections::BTreeMap, future::Future, sync::Arc};

use futures::StreamExt;
use k8s_openapi::{
    api::core::v1::{Namespace, ObjectReference, ServiceAccount},
    apimachinery::pkg::apis::meta::v1::Time,
};
use kube::{
    Api, Resource, ResourceExt,
    api::ListParams,
    core::Selector,
    runtime::{
        Controller,
        controller::Action,
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use olm_api::{
    labels,
    v1::{OperatorGroup, OperatorGroupStatus},
    v1alpha1::ClusterServiceVersion,
};

use olm_runtime::{ErrorClass, ReconcileError, Reflector, backoff::TriggerBackoff, classify};

use self::targets::Selection;
use crate::context::{self, Context};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "operatorgroup";

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The OperatorGroup has no namespace (it always should).
    #[error("the OperatorGroup has no namespace")]
    NoNamespace,
    /// The selector cannot be turned into a label selector.
    #[error("the OperatorGroup's selector is invalid")]
    InvalidSelector(#[source] kube::core::ParseExpressionError),
    /// Reading namespaces, CSVs or the service account failed.
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
            Error::NoNamespace | Error::InvalidSelector(_) => "invalid",
            Error::Read { .. } => "dereference",
            Error::Write { .. } => "update_status",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            // Only a change of the object can help.
            Error::NoNamespace | Error::InvalidSelector(_) => ErrorClass::Terminal,
            Error::Read { source, .. } => classify(source),
            Error::Write { source, .. } => source.class(),
        }
    }
}

/// Reconciles one OperatorGroup.
pub async fn reconcile(group: Arc<OperatorGroup>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if !ctx.is_leader() {
        return Ok(Action::await_change());
    }
    let namespace = group.namespace().ok_or(Error::NoNamespace)?;
    let name = group.name_any();
    let api: Api<OperatorGroup> = Api::namespaced(ctx.client.clone(), &namespace);

    // Dereference.
    let namespaces = selected_namespaces(&ctx, &targets::selection(&group.spec)).await?;
    let csvs = Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Read {
            what: format!("the ClusterServiceVersions of namespace {namespace}"),
            source,
        })?
        .items;
    let service_account = match group
        .spec
        .service_account_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        Some(account) => Api::<ServiceAccount>::namespaced(ctx.client.clone(), &namespace)
            .get_opt(account)
            .await
            .map_err(|source| Error::Read {
                what: format!("service account {namespace}/{account}"),
                source,
            })?,
        None => None,
    };

    // The annotation.
    if !group.spec.static_provided_apis.unwrap_or(false) {
        let provided = targets::provided_apis(&csvs);
        if group.annotations().get(labels::PROVIDED_APIS) != Some(&provided) {
            ctx.apply_annotations::<OperatorGroup>(
                &namespace,
                &name,
                BTreeMap::from([(labels::PROVIDED_APIS.to_owned(), provided)]),
            )
            .await
            .map_err(|source| Error::Write {
                name: name.clone(),
                source,
            })?;
        }
    }

    // The status.
    let old = group.status.clone().unwrap_or_default();
    let service_account_ref = service_account.map(|account| ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("ServiceAccount".to_owned()),
        name: account.metadata.name.clone(),
        namespace: account.metadata.namespace.clone(),
        uid: account.metadata.uid.clone(),
        ..ObjectReference::default()
    });
    let changed =
        old.namespaces.as_ref() != Some(&namespaces) || old.service_account_ref != service_account_ref;
    if changed {
        let status = OperatorGroupStatus {
            namespaces: Some(namespaces.clone()),
            service_account_ref,
            last_updated: Some(Time(context::now())),
            conditions: None,
        };
        ctx.apply_status(&api, &name, &status)
            .await
            .map_err(|source| Error::Write {
                name: name.clone(),
                source,
            })?;
        tracing::info!(operatorgroup = %name, %namespace, namespaces = ?namespaces, "OperatorGroup selects namespaces");
    }
    Ok(Action::requeue(ctx.settings.resync))
}

/// The namespaces of `selection`, sorted; `[""]` for all.
async fn selected_namespaces(ctx: &Context, selection: &Selection) -> Result<Vec<String>, Error> {
    let api = Api::<Namespace>::all(ctx.client.clone());
    match selection {
        Selection::All => Ok(vec![String::new()]),
        Selection::Named(names) => {
            let mut existing = Vec::new();
            for name in names {
                let found = api.get_opt(name).await.map_err(|source| Error::Read {
                    what: format!("namespace {name}"),
                    source,
                })?;
                if found.is_some() {
                    existing.push(name.clone());
                }
            }
            Ok(existing)
        }
        Selection::Selector(selector) => {
            let selector = Selector::try_from(selector.clone()).map_err(Error::InvalidSelector)?;
            let listed = api
                .list_metadata(&ListParams::default().labels_from(&selector))
                .await
                .map_err(|source| Error::Read {
                    what: "namespaces".to_owned(),
                    source,
                })?;
            let mut names: Vec<String> = listed.items.iter().map(|ns| ns.name_any()).collect();
            names.sort();
            Ok(names)
        }
    }
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

/// The controller on the OperatorGroups of `groups`: runs until `shutdown`
/// completes.
pub fn run<S>(
    ctx: Arc<Context>,
    groups: &Reflector<OperatorGroup>,
    shutdown: S,
) -> impl Future<Output = ()> + Send + use<S>
where
    S: Future<Output = ()> + Send + Sync + 'static,
{
    let client = ctx.client.clone();
    let store = groups.store();
    let controller = Controller::for_shared_stream(groups.subscribe(), store.clone())
        .trigger_backoff(TriggerBackoff::default());
    let (by_namespace, by_csv) = (store.clone(), store);
    let terms = ctx.writer.leadership().terms();
    controller
        .watches(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
            move |_| selecting(&by_namespace),
        )
        .watches(
            Api::<ClusterServiceVersion>::all(client),
            watcher::Config::default(),
            move |csv| in_namespace(&by_csv, &csv.namespace().unwrap_or_default()),
        )
        .reconcile_all_on(terms)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
}

/// The OperatorGroups whose namespaces can change with a namespace: those
/// that select by name or by label.
fn selecting(store: &Store<OperatorGroup>) -> Vec<ObjectRef<OperatorGroup>> {
    store
        .state()
        .iter()
        .filter(|group| targets::selection(&group.spec) != Selection::All)
        .map(|group| ObjectRef::from_obj(group.as_ref()))
        .collect()
}

fn in_namespace(store: &Store<OperatorGroup>, namespace: &str) -> Vec<ObjectRef<OperatorGroup>> {
    store
        .state()
        .iter()
        .filter(|group| group.meta().namespace.as_deref() == Some(namespace))
        .map(|group| ObjectRef::from_obj(group.as_ref()))
        .collect()
}
