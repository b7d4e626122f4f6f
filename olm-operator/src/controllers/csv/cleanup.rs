//! Cleanup, run by the finalizer when a ClusterServiceVersion is deleted: it
//! removes what Kubernetes' garbage collector cannot, namely the CSV's
//! ClusterRoles and ClusterRoleBindings and its Roles and RoleBindings in
//! other namespaces, and its webhook configurations and APIServices
//! ([`super::serving::cleanup`]), found by their `olm.owner*` labels. Objects in the CSV's
//! own namespace are left to the garbage collector (they carry owner
//! references), and CRDs always stay.
//!
//! Idempotent: deleting what is already gone is fine, and it works whether or
//! not the install ever ran.

use std::fmt::Debug;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::{Api, Resource, ResourceExt, api::ListParams, runtime::controller::Action};
use olm_api::v1alpha1::ClusterServiceVersion;
use olm_runtime::apply::WriteError;
use serde::de::DeserializeOwned;

use super::build::owner_selector;
use crate::context::Context;

/// Why cleanup failed; it is retried, and the CSV stays until it succeeds.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Removing the webhook configurations or APIServices failed.
    #[error("failed to remove the webhook configurations or APIServices")]
    Serving(#[source] super::serving::Error),
    /// Listing failed.
    #[error("failed to list the {kind} objects of ClusterServiceVersion {csv}")]
    List {
        /// The kind.
        kind: &'static str,
        /// The CSV.
        csv: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Deleting failed.
    #[error("failed to delete {kind} {name}")]
    Delete {
        /// The kind.
        kind: &'static str,
        /// The object.
        name: String,
        /// The cause.
        #[source]
        source: WriteError,
    },
}

/// Removes the cluster-scoped and cross-namespace objects of `csv`.
pub async fn cleanup(ctx: &Context, csv: &ClusterServiceVersion) -> Result<Action, Error> {
    let name = csv.name_any();
    let namespace = csv.namespace().unwrap_or_default();
    let selector = owner_selector(&name, &namespace);
    let client = &ctx.client;

    for binding in list(
        &Api::<ClusterRoleBinding>::all(client.clone()),
        &selector,
        "ClusterRoleBinding",
        &name,
    )
    .await?
    {
        remove(ctx, &Api::all(client.clone()), &binding, "ClusterRoleBinding").await?;
    }
    for role in list(
        &Api::<ClusterRole>::all(client.clone()),
        &selector,
        "ClusterRole",
        &name,
    )
    .await?
    {
        remove(ctx, &Api::all(client.clone()), &role, "ClusterRole").await?;
    }
    for binding in list(
        &Api::<RoleBinding>::all(client.clone()),
        &selector,
        "RoleBinding",
        &name,
    )
    .await?
    {
        let ns = binding.namespace().unwrap_or_default();
        if ns != namespace {
            remove(
                ctx,
                &Api::namespaced(client.clone(), &ns),
                &binding,
                "RoleBinding",
            )
            .await?;
        }
    }
    for role in list(&Api::<Role>::all(client.clone()), &selector, "Role", &name).await? {
        let ns = role.namespace().unwrap_or_default();
        if ns != namespace {
            remove(ctx, &Api::namespaced(client.clone(), &ns), &role, "Role").await?;
        }
    }
    super::serving::cleanup(ctx, csv).await.map_err(Error::Serving)?;
    ctx.metrics.csv_deleted(csv);
    tracing::info!(csv = %name, namespace = %namespace, "removed the cluster-scoped objects of a deleted ClusterServiceVersion");
    Ok(Action::await_change())
}

async fn list<K>(api: &Api<K>, selector: &str, kind: &'static str, csv: &str) -> Result<Vec<K>, Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.list(&ListParams::default().labels(selector))
        .await
        .map(|list| list.items)
        .map_err(|source| Error::List {
            kind,
            csv: csv.to_owned(),
            source,
        })
}

async fn remove<K>(ctx: &Context, api: &Api<K>, obj: &K, kind: &'static str) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    ctx.delete(api, &name)
        .await
        .map_err(|source| Error::Delete { kind, name, source })
}
