//! The OperatorGroup controller: keeps `status.namespaces` (from
//! `targetNamespaces`, a namespace `selector`, or `[""]` for all namespaces),
//! `status.serviceAccountRef` (when `serviceAccountName` names an existing
//! service account), and the `olm.providedAPIs` annotation (the APIs the CSVs
//! of its namespace own), unless `staticProvidedAPIs` is set.
//!
//! Watches: OperatorGroups; Namespaces (→ the OperatorGroups that select by
//! name or label); ClusterServiceVersions (→ the OperatorGroups of their
//! namespace).

pub mod status;
pub mod targets;

use std::{collections::BTreeMap, future::Future, sync::Arc, time::Duration};

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

use olm_runtime::{ReadyGate, backoff::TriggerBackoff};

use self::targets::Selection;
use crate::{
    context::{self, Context},
    run::leadership_terms,
};

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

impl Error {
    /// A low-cardinality label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Write { source, .. } if source.is_not_leader() => "not_leader",
            Error::NoNamespace | Error::InvalidSelector(_) => "invalid",
            Error::Read { .. } => "dereference",
            Error::Write { .. } => "update_status",
        }
    }

    /// True when only a change of the object can help.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Error::NoNamespace | Error::InvalidSelector(_))
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
            observed_generation: group.metadata.generation,
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
    if error.category() == "not_leader" {
        // Not a failure: the new leader reconciles this OperatorGroup.
        return Action::await_change();
    }
    ctx.metrics.reconcile_failed(CONTROLLER, error.category());
    tracing::warn!(
        operatorgroup = %group.name_any(),
        namespace = %group.namespace().unwrap_or_default(),
        error = error as &dyn std::error::Error,
        "reconcile failed"
    );
    if error.is_terminal() {
        Action::await_change()
    } else {
        Action::requeue(Duration::from_secs(5))
    }
}

/// Runs the controller until `shutdown` completes; opens `ready` once the
/// OperatorGroup cache has synced.
pub async fn run(
    ctx: Arc<Context>,
    ready: ReadyGate,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let controller = Controller::new(
        Api::<OperatorGroup>::all(client.clone()),
        watcher::Config::default(),
    )
    .trigger_backoff(TriggerBackoff::default());
    let store = controller.store();
    let (by_namespace, by_csv, synced) = (store.clone(), store.clone(), store);
    let terms = leadership_terms(ctx.writer.leadership().clone());
    let controller = controller
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
        .for_each(|_| futures::future::ready(()));
    let readiness = async move {
        if synced.wait_until_ready().await.is_ok() {
            ready.ready();
        }
    };
    futures::future::join(controller, readiness).await;
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
