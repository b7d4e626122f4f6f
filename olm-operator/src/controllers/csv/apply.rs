//! Apply: server-side applies what build made, in dependency order (service
//! accounts, RBAC, then Deployments), and removes objects of the CSV that the
//! install no longer has. It refuses to take over an object controlled by
//! another live CSV (other than the one this CSV replaces), so that two CSVs
//! never fight over one object.
//!
//! Each object is stamped with the hash of its content and is not written
//! when its live copy in the shared stores ([`LiveCopies`]) already carries
//! that hash and nobody else took over a field it sets ([`stamp`]): a new
//! leader sends nothing for an install that is already right.
//!
//! When the OperatorGroup names a service account, every write goes through
//! a client that impersonates it: the install can do only what that account
//! may do, and the API server's refusal names the missing permission.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Debug,
};

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{Api, Client, Resource, ResourceExt, api::ApiResource};
use olm_api::v1alpha1::ClusterServiceVersion;
use serde::de::DeserializeOwned;

use super::{
    build::{Children, OWNER_KIND, owner_labels},
    dereference::Dereferenced,
    stamp::{self, Applier},
    validate::Membership,
};
use crate::{
    context::{Context, ScopedClientError},
    fields::{Key, LiveCopies},
};
use olm_runtime::{ErrorClass, apply::WriteError};

/// What the API server holds after the apply.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    /// The Deployments, as stored (with their status).
    pub deployments: Vec<Deployment>,
}

/// Why the install could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another CSV controls an object this install needs.
    #[error("{kind} {name} is controlled by {owner_kind} {owner}, not by this ClusterServiceVersion")]
    Conflict {
        /// The kind of the object.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The kind of its controller.
        owner_kind: String,
        /// The name of its controller.
        owner: String,
    },
    /// The OperatorGroup's service account does not exist.
    #[error("service account {namespace}/{name}, named by OperatorGroup {operator_group}, does not exist")]
    MissingServiceAccount {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The OperatorGroup.
        operator_group: String,
    },
    /// No client could be made for the OperatorGroup's service account.
    #[error("cannot act as the OperatorGroup's service account")]
    ScopedClient(#[source] ScopedClientError),
    /// Reading the OperatorGroup's service account failed.
    #[error("failed to get service account {name}")]
    GetServiceAccount {
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The API server refused or failed a write, or this replica stopped leading.
    #[error("failed to apply {kind} {name}")]
    Apply {
        /// The kind.
        kind: &'static str,
        /// The name (namespace/name for namespaced objects).
        name: String,
        /// The cause.
        #[source]
        source: Box<WriteError>,
    },
    /// An object could not be encoded to hash its content.
    #[error("failed to hash an object of the install")]
    Encode(#[source] stamp::Error),
    /// Deleting a leftover object failed.
    #[error("failed to delete {kind} {name}, which the install no longer has")]
    Delete {
        /// The kind.
        kind: &'static str,
        /// The name.
        name: String,
        /// The cause.
        #[source]
        source: Box<WriteError>,
    },
}

/// Whether the API server refused a request for good: forbidden or invalid. The
/// install then fails with the refusal in the CSV's status (it is retried at the
/// next resync or change, as RBAC may be granted meanwhile).
fn refused(class: ErrorClass) -> bool {
    matches!(class, ErrorClass::Terminal | ErrorClass::Forbidden)
}

impl Error {
    /// True when retrying without a change cannot help: a conflict, a missing
    /// service account, or the API server refusing the request as forbidden
    /// or invalid.
    pub fn is_terminal(&self) -> bool {
        match self {
            Error::Conflict { .. }
            | Error::MissingServiceAccount { .. }
            | Error::ScopedClient(_)
            | Error::Encode(_) => true,
            Error::Apply { source, .. } | Error::Delete { source, .. } => refused(source.class()),
            Error::GetServiceAccount { .. } => false,
        }
    }

    /// What kind of failure this is, for the reconcile's error policy.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Apply { source, .. } | Error::Delete { source, .. } => source.class(),
            _ if self.is_terminal() => ErrorClass::Terminal,
            _ => ErrorClass::Transient,
        }
    }

    /// The error with its cause, for the CSV's status message.
    pub fn detail(&self) -> String {
        match self {
            Error::Apply { source, .. } | Error::Delete { source, .. } => match source.api_error() {
                Some(api) => format!("{self}: {}", api_message(api)),
                None => format!("{self}: {source}"),
            },
            Error::ScopedClient(source) => format!("{self}: {source}"),
            _ => self.to_string(),
        }
    }
}

/// The API server's own words for a failed call.
fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Applies `children` for `csv` and removes what the CSV no longer needs;
/// objects whose copy in `live` already carries their hash are not written.
pub async fn apply(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    membership: &Membership,
    children: &Children,
    found: &Dereferenced,
    live: &dyn LiveCopies,
) -> Result<Applied, Error> {
    let namespace = csv.namespace().unwrap_or_default();
    let writer = writer(ctx, &namespace, membership).await?;
    let applier = Applier { ctx, live };

    for account in &children.service_accounts {
        let existing = found.service_accounts.get(&account.name_any());
        check_adoptable(csv, found, "ServiceAccount", existing.map(|a| &a.metadata))?;
    }
    for deployment in &children.deployments {
        let existing = found.deployments.get(&deployment.name_any());
        check_adoptable(csv, found, "Deployment", existing.map(|d| &d.metadata))?;
    }

    // Service accounts and RBAC do not depend on one another: all at once,
    // then the Deployments that run as them.
    futures::try_join!(
        apply_all(applier, &children.service_accounts, "ServiceAccount", |_| {
            Api::namespaced(writer.clone(), &namespace)
        }),
        apply_all(applier, &children.roles, "Role", |role: &Role| {
            Api::namespaced(writer.clone(), &role.namespace().unwrap_or_default())
        }),
        apply_all(
            applier,
            &children.role_bindings,
            "RoleBinding",
            |binding: &RoleBinding| {
                Api::namespaced(writer.clone(), &binding.namespace().unwrap_or_default())
            }
        ),
        apply_all(applier, &children.cluster_roles, "ClusterRole", |_| Api::all(
            writer.clone()
        )),
        apply_all(
            applier,
            &children.cluster_role_bindings,
            "ClusterRoleBinding",
            |_| { Api::all(writer.clone()) }
        ),
    )?;
    let deployment_api = Api::<Deployment>::namespaced(writer.clone(), &namespace);
    let mut deployments = Vec::with_capacity(children.deployments.len());
    for deployment in &children.deployments {
        let stored = applier
            .apply(&deployment_api, deployment, "Deployment")
            .await
            .map_err(unstamped)?;
        // Not written: the Deployment read before is the live one, status included.
        let stored = stored.or_else(|| found.deployments.get(&deployment.name_any()).cloned());
        match stored {
            Some(stored) => deployments.push(stored),
            None => deployments.push(
                applier
                    .force(&deployment_api, deployment, "Deployment")
                    .await
                    .map_err(unstamped)?,
            ),
        }
    }

    prune(ctx, &writer, csv, children, live).await?;
    Ok(Applied { deployments })
}

/// Applies `objects` of `kind` at once, each through the API `api` gives for it.
async fn apply_all<K>(
    applier: Applier<'_>,
    objects: &[K],
    kind: &'static str,
    api: impl Fn(&K) -> Api<K>,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + serde::Serialize + DeserializeOwned + Clone + Debug,
{
    let api = &api;
    let writes = objects
        .iter()
        .map(|object| async move { applier.apply(&api(object), object, kind).await.map_err(unstamped) });
    futures::future::try_join_all(writes).await.map(drop)
}

/// Deletes the objects labelled for `csv` that `children` no longer has,
/// through `writer`. Which objects carry its labels is read from the shared
/// stores (`live`), which hold every object labelled for a CSV: an object
/// the store has not shown yet is pruned by the reconcile its watch event
/// brings.
async fn prune(
    ctx: &Context,
    writer: &Client,
    csv: &ClusterServiceVersion,
    children: &Children,
    live: &dyn LiveCopies,
) -> Result<(), Error> {
    let namespace = csv.namespace().unwrap_or_default();
    let prune = Prune {
        ctx,
        writer,
        live,
        labels: owner_labels(&csv.name_any(), &namespace),
    };
    prune
        .namespaced::<Deployment>("Deployment", keys(&children.deployments))
        .await?;
    prune.namespaced::<Role>("Role", keys(&children.roles)).await?;
    prune
        .namespaced::<RoleBinding>("RoleBinding", keys(&children.role_bindings))
        .await?;
    prune
        .cluster::<ClusterRole>("ClusterRole", keys(&children.cluster_roles))
        .await?;
    prune
        .cluster::<ClusterRoleBinding>("ClusterRoleBinding", keys(&children.cluster_role_bindings))
        .await
}

/// Whether applying `children` gives an existing Deployment a new spec: its
/// `olm.deployment-spec-hash` label differs from the one built. (A missing
/// Deployment is not a change of spec but a missing component.)
pub fn spec_changed(children: &Children, found: &Dereferenced) -> bool {
    let hash = |labels: Option<&std::collections::BTreeMap<String, String>>| {
        labels
            .and_then(|l| l.get(olm_api::labels::DEPLOYMENT_SPEC_HASH))
            .cloned()
    };
    children.deployments.iter().any(|wanted| {
        found.deployments.get(&wanted.name_any()).is_some_and(|existing| {
            hash(existing.metadata.labels.as_ref()) != hash(wanted.metadata.labels.as_ref())
        })
    })
}

/// The client the install writes with: the operator's own, or one that acts
/// as the OperatorGroup's service account.
async fn writer(ctx: &Context, namespace: &str, membership: &Membership) -> Result<Client, Error> {
    let Some(account) = membership.service_account.as_deref() else {
        return Ok(ctx.client.clone());
    };
    let exists = Api::<ServiceAccount>::namespaced(ctx.client.clone(), namespace)
        .get_opt(account)
        .await
        .map_err(|source| Error::GetServiceAccount {
            name: account.to_owned(),
            source,
        })?
        .is_some();
    if !exists {
        return Err(Error::MissingServiceAccount {
            namespace: namespace.to_owned(),
            name: account.to_owned(),
            operator_group: membership.operator_group.clone(),
        });
    }
    ctx.client_as_service_account(namespace, account)
        .await
        .map_err(Error::ScopedClient)
}

/// An object may be applied when nothing controls it, this CSV does, or the
/// controller is a CSV that is gone or that this one replaces.
fn check_adoptable(
    csv: &ClusterServiceVersion,
    found: &Dereferenced,
    kind: &'static str,
    existing: Option<&ObjectMeta>,
) -> Result<(), Error> {
    let Some(meta) = existing else {
        return Ok(());
    };
    let Some(controller) = meta
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.controller == Some(true))
    else {
        return Ok(());
    };
    if Some(&controller.uid) == csv.meta().uid.as_ref() {
        return Ok(());
    }
    let is_csv = controller.kind == OWNER_KIND && controller.api_version.starts_with("operators.coreos.com/");
    let replaced = csv.spec.replaces.as_deref() == Some(controller.name.as_str());
    if is_csv && (replaced || !found.namespace_csvs.contains(&controller.name)) {
        return Ok(());
    }
    Err(Error::Conflict {
        kind,
        name: meta.name.clone().unwrap_or_default(),
        owner_kind: controller.kind.clone(),
        owner: controller.name.clone(),
    })
}

/// A failed stamped write as an install error: the API server's answer
/// keeps its [`Error::Apply`] form (its class and detail).
fn unstamped(error: stamp::Error) -> Error {
    match error {
        stamp::Error::Write { kind, name, source } => Error::Apply { kind, name, source },
        encode @ stamp::Error::Encode { .. } => Error::Encode(encode),
    }
}

fn keys<K: Resource>(objects: &[K]) -> BTreeSet<Key> {
    objects
        .iter()
        .map(|o| {
            (
                o.meta().namespace.clone(),
                o.meta().name.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Deletes the labelled objects of a CSV that the install no longer has.
struct Prune<'a> {
    ctx: &'a Context,
    writer: &'a Client,
    live: &'a dyn LiveCopies,
    labels: BTreeMap<String, String>,
}

impl Prune<'_> {
    async fn namespaced<K>(&self, kind: &'static str, keep: BTreeSet<Key>) -> Result<(), Error>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Debug,
    {
        for (namespace, name) in self.leftovers::<K>(&keep) {
            let api = Api::<K>::namespaced(self.writer.clone(), namespace.as_deref().unwrap_or_default());
            self.delete(&api, kind, namespace.as_deref(), &name).await?;
        }
        Ok(())
    }

    async fn cluster<K>(&self, kind: &'static str, keep: BTreeSet<Key>) -> Result<(), Error>
    where
        K: Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Debug,
    {
        for (_, name) in self.leftovers::<K>(&keep) {
            self.delete(&Api::<K>::all(self.writer.clone()), kind, None, &name)
                .await?;
        }
        Ok(())
    }

    /// The objects of kind `K` in the stores that carry the CSV's labels and
    /// are not in `keep`.
    fn leftovers<K>(&self, keep: &BTreeSet<Key>) -> Vec<Key>
    where
        K: Resource<DynamicType = ()>,
    {
        let resource = ApiResource::erase::<K>(&());
        self.live
            .labelled(&resource, &self.labels)
            .into_iter()
            .filter(|key| !keep.contains(key))
            .collect()
    }

    async fn delete<K>(
        &self,
        api: &Api<K>,
        kind: &'static str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let shown = match namespace {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_owned(),
        };
        tracing::info!(kind, name = %shown, "removing an object the install no longer has");
        self.ctx.delete(api, name).await.map_err(|source| Error::Delete {
            kind,
            name: shown,
            source: Box::new(source),
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::controllers::csv::{
        build,
        fixtures::{self, NAMESPACE, modes},
        validate::{self, Targets},
    };

    fn controlled_by(kind: &str, name: &str, uid: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some("demo".to_owned()),
            owner_references: Some(vec![OwnerReference {
                api_version: if kind == OWNER_KIND {
                    "operators.coreos.com/v1alpha1".to_owned()
                } else {
                    "apps/v1".to_owned()
                },
                kind: kind.to_owned(),
                name: name.to_owned(),
                uid: uid.to_owned(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn objects_are_adopted_unless_another_live_csv_controls_them() {
        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        csv.spec.replaces = Some("demo.v0.9.0".to_owned());
        let mut found = fixtures::found(vec![], vec![], &[NAMESPACE]);
        found.namespace_csvs = ["demo.v0.9.0", "demo.v1.0.0", "other.v1.0.0"]
            .map(str::to_owned)
            .into();
        let uid = csv.metadata.uid.clone().expect("uid");
        let check = |meta: Option<&ObjectMeta>| check_adoptable(&csv, &found, "Deployment", meta);

        assert!(check(None).is_ok(), "nothing there yet");
        assert!(check(Some(&ObjectMeta::default())).is_ok(), "nobody controls it");
        assert!(
            check(Some(&controlled_by(OWNER_KIND, "demo.v1.0.0", &uid))).is_ok(),
            "this CSV's own"
        );
        assert!(
            check(Some(&controlled_by(OWNER_KIND, "demo.v0.9.0", "old"))).is_ok(),
            "the replaced CSV's"
        );
        assert!(
            check(Some(&controlled_by(OWNER_KIND, "gone.v1.0.0", "gone"))).is_ok(),
            "a deleted CSV's"
        );
        let error = check(Some(&controlled_by(OWNER_KIND, "other.v1.0.0", "other"))).unwrap_err();
        assert!(error.is_terminal());
        assert_eq!(
            error.to_string(),
            "Deployment demo is controlled by ClusterServiceVersion other.v1.0.0, not by this ClusterServiceVersion"
        );
        assert!(
            check(Some(&controlled_by("ReplicaSet", "rs", "rs"))).is_err(),
            "another controller's"
        );
    }

    #[test]
    fn a_different_spec_hash_on_an_existing_deployment_is_a_spec_change() {
        let csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        let strategy = validate::strategy(&csv).expect("valid");
        let membership = fixtures::membership(Targets::Namespaces(vec![NAMESPACE.to_owned()]));
        let children = build::build(&csv, &membership, &strategy).expect("builds");
        let mut found = fixtures::found(vec![], vec![], &[NAMESPACE]);
        assert!(
            !spec_changed(&children, &found),
            "a missing Deployment is not a spec change"
        );
        let mut existing = children.deployments[0].clone();
        found.deployments.insert("demo".to_owned(), existing.clone());
        assert!(!spec_changed(&children, &found));
        existing
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(
                olm_api::labels::DEPLOYMENT_SPEC_HASH.to_owned(),
                "older".to_owned(),
            );
        found.deployments.insert("demo".to_owned(), existing);
        assert!(spec_changed(&children, &found));
    }

    #[test]
    fn refusals_are_terminal_and_outages_are_not() {
        let api_error = |code: u16| Error::Apply {
            kind: "Deployment",
            name: "ops/demo".to_owned(),
            source: Box::new(WriteError::Apply {
                kind: "Deployment".to_owned(),
                name: "demo".to_owned(),
                source: kube::Error::Api(Box::new(
                    kube::core::Status::failure(&format!("refused with {code}"), "Forbidden").with_code(code),
                )),
            }),
        };
        assert!(api_error(403).is_terminal());
        assert!(api_error(422).is_terminal());
        assert!(!api_error(500).is_terminal());
        assert!(!api_error(409).is_terminal());
        assert_eq!(
            api_error(403).detail(),
            "failed to apply Deployment ops/demo: refused with 403"
        );
        let fenced = Error::Apply {
            kind: "Deployment",
            name: "ops/demo".to_owned(),
            source: Box::new(WriteError::NotLeader {
                kind: "Deployment".to_owned(),
                name: "demo".to_owned(),
            }),
        };
        assert!(!fenced.is_terminal(), "a lost lease is not a refusal");
        assert!(olm_runtime::reconcile::lost_leadership(&fenced));
    }
}
