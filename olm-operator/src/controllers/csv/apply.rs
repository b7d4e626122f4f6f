//! The install's own objects: [`plan`] decides (pure) what to write, and
//! [`apply`] hands that to olm-runtime's one applier
//! ([`Writer::write_objects`](olm_runtime::apply::Writer) and
//! [`Writer::remove`](olm_runtime::apply::Writer)).
//!
//! [`plan`] orders what build made by dependency (service accounts and RBAC
//! at once, then each Deployment), removes the objects of the CSV that the
//! install no longer has, and refuses to take over an object controlled by
//! another live CSV (other than the one this CSV replaces), so that two CSVs
//! never fight over one object. Each object is stamped with the hash of its
//! content and left out when its live copy in the shared stores
//! ([`LiveCopies`]) already carries that hash and nobody else took over a
//! field it sets ([`stamp::desired`]): a new leader sends nothing for an
//! install that is already right.
//!
//! When the OperatorGroup names a service account, every write goes through
//! a client that impersonates it: the install can do only what that account
//! may do, and the API server's refusal names the missing permission.

use std::{collections::BTreeSet, fmt::Debug};

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ApiResource, DynamicObject, Patch, PatchParams},
};
use olm_api::v1alpha1::ClusterServiceVersion;

use super::{
    build::{Children, OWNER_KIND, owner_labels},
    dereference::Dereferenced,
    stamp,
    validate::Membership,
};
use crate::{
    context::{Context, FIELD_MANAGER, ScopedClientError},
    fields::{Key, LiveCopies},
};
use olm_runtime::{
    ErrorClass,
    apply::WriteError,
    effects::{Desired, ObjectOutcome, Removal, at_once},
};

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
        kind: String,
        /// The name (namespace/name for namespaced objects).
        name: String,
        /// The cause.
        #[source]
        source: Box<WriteError>,
    },
    /// An object could not be encoded to hash its content.
    #[error("failed to hash an object of the install")]
    Encode(#[source] stamp::Error),
    /// A Deployment the API server returned could not be read (a bug: it
    /// is the object written).
    #[error("failed to read Deployment {name} as the API server returned it")]
    Decode {
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: kube::core::dynamic::ParseDynamicObjectError,
    },
    /// Deleting a leftover object failed.
    #[error("failed to delete {kind} {name}, which the install no longer has")]
    Delete {
        /// The kind.
        kind: String,
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
            Error::GetServiceAccount { .. } | Error::Decode { .. } => false,
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

/// What an install writes, decided from what was read ([`plan`], pure) and
/// performed by the one applier ([`apply`]).
#[derive(Clone, Debug, PartialEq)]
pub struct InstallWrites {
    /// The objects whose live copy is not as built, stamped with their hash:
    /// the service accounts and RBAC at once (the bindings in a wave of their
    /// own after the roles, for [`Bindings::AfterRoles`]), then each
    /// Deployment.
    pub objects: Vec<Desired>,
    /// The objects labelled for the CSV that the install no longer has.
    pub removals: Vec<Removal>,
}

/// When an install's bindings are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bindings {
    /// With the accounts and roles, at once: olm-operator writes them, and
    /// it holds `bind`.
    WithRoles,
    /// In a wave after the roles: the OperatorGroup's service account writes
    /// them, and one that may not `bind` can bind only a role that exists
    /// (the API server checks that it holds the role's rules, and answers
    /// 404 for a missing role).
    AfterRoles,
}

impl Bindings {
    /// The order for an install in `membership`.
    pub fn of(membership: &Membership) -> Self {
        if membership.service_account.is_some() {
            Bindings::AfterRoles
        } else {
            Bindings::WithRoles
        }
    }
}

/// Decides what installing `children` for `csv` writes: refuses objects
/// another live CSV controls ([`check_adoptable`]), keeps only the objects
/// whose copy in `live` is not current ([`stamp::desired`]; a Deployment
/// also when the read found none to report the health of), and removes the
/// objects labelled for the CSV in the stores that `children` no longer has.
/// Pure.
pub fn plan(
    csv: &ClusterServiceVersion,
    children: &Children,
    found: &Dereferenced,
    live: &dyn LiveCopies,
    bindings_order: Bindings,
) -> Result<InstallWrites, Error> {
    for account in &children.service_accounts {
        let existing = found.service_accounts.get(&account.name_any());
        check_adoptable(csv, found, "ServiceAccount", existing.map(|a| &a.metadata))?;
    }
    for deployment in &children.deployments {
        let existing = found.deployments.get(&deployment.name_any());
        check_adoptable(csv, found, "Deployment", existing.map(|d| &d.metadata))?;
    }
    let mut accounts_and_roles = Vec::new();
    stale(
        &mut accounts_and_roles,
        &children.service_accounts,
        "ServiceAccount",
        live,
    )?;
    stale(&mut accounts_and_roles, &children.roles, "Role", live)?;
    stale(
        &mut accounts_and_roles,
        &children.cluster_roles,
        "ClusterRole",
        live,
    )?;
    let mut bindings = Vec::new();
    stale(&mut bindings, &children.role_bindings, "RoleBinding", live)?;
    stale(
        &mut bindings,
        &children.cluster_role_bindings,
        "ClusterRoleBinding",
        live,
    )?;
    // Accounts, roles and bindings at once, or the bindings in a wave after.
    let mut objects = match bindings_order {
        Bindings::WithRoles => at_once(accounts_and_roles.into_iter().chain(bindings)),
        Bindings::AfterRoles => {
            let mut objects = at_once(accounts_and_roles);
            objects.extend(at_once(bindings));
            objects
        }
    };
    // Then the Deployments that run as them, one after another.
    for deployment in &children.deployments {
        let (desired, current) = stamp::desired(deployment, "Deployment", live).map_err(Error::Encode)?;
        if !current || !found.deployments.contains_key(&deployment.name_any()) {
            objects.push(desired);
        }
    }
    Ok(InstallWrites {
        objects,
        removals: leftovers(csv, children, live),
    })
}

/// Adds to `objects` those of `built` whose copy in `live` is not current.
fn stale<K>(
    objects: &mut Vec<Desired>,
    built: &[K],
    kind: &'static str,
    live: &dyn LiveCopies,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + serde::Serialize,
{
    for object in built {
        let (desired, current) = stamp::desired(object, kind, live).map_err(Error::Encode)?;
        if !current {
            objects.push(desired);
        }
    }
    Ok(())
}

/// The objects labelled for `csv` in the stores (`live`, which hold every
/// object labelled for a CSV) that `children` no longer has. One the store
/// has not shown yet is removed by the reconcile its watch event brings.
fn leftovers(csv: &ClusterServiceVersion, children: &Children, live: &dyn LiveCopies) -> Vec<Removal> {
    let labels = owner_labels(&csv.name_any(), &csv.namespace().unwrap_or_default());
    let kept = [
        (ApiResource::erase::<Deployment>(&()), keys(&children.deployments)),
        (ApiResource::erase::<Role>(&()), keys(&children.roles)),
        (
            ApiResource::erase::<RoleBinding>(&()),
            keys(&children.role_bindings),
        ),
        (
            ApiResource::erase::<ClusterRole>(&()),
            keys(&children.cluster_roles),
        ),
        (
            ApiResource::erase::<ClusterRoleBinding>(&()),
            keys(&children.cluster_role_bindings),
        ),
    ];
    kept.into_iter()
        .flat_map(|(resource, keep)| {
            live.labelled(&resource, &labels)
                .into_iter()
                .filter(|key| !keep.contains(key))
                .map(|(namespace, name)| Removal {
                    resource: resource.clone(),
                    namespace,
                    name,
                    uid: None,
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Performs `writes` for `csv` through the one applier, as the
/// OperatorGroup's service account when it names one, and returns the
/// Deployments of `children` as the API server holds them: as written, or as
/// read when they were current.
pub async fn apply(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    membership: &Membership,
    children: &Children,
    found: &Dereferenced,
    writes: &InstallWrites,
) -> Result<Applied, Error> {
    let writer = writer(ctx, &csv.namespace().unwrap_or_default(), membership).await?;
    if membership.service_account.is_some() {
        preflight(&writer, &writes.objects).await?;
    }
    let outcomes = ctx
        .writer
        .write_objects(&writer, &writes.objects, &())
        .await
        .map_err(|source| Error::Apply {
            name: shown(&writes.objects, &source),
            kind: source.object().0.to_owned(),
            source: Box::new(source),
        })?;
    for removal in &writes.removals {
        let (kind, name) = (&removal.resource.kind, &removal.name);
        tracing::info!(%kind, %name, namespace = ?removal.namespace, "removing an object the install no longer has");
    }
    ctx.writer
        .remove(&writer, &writes.removals)
        .await
        .map_err(|source| Error::Delete {
            kind: source.object().0.to_owned(),
            name: source.object().1.to_owned(),
            source: Box::new(source),
        })?;
    let deployments = children
        .deployments
        .iter()
        .filter_map(|deployment| stored(deployment, found, writes, &outcomes))
        .collect::<Result<_, _>>()?;
    Ok(Applied { deployments })
}

/// `deployment` as the API server holds it: as written, or as read.
fn stored(
    deployment: &Deployment,
    found: &Dereferenced,
    writes: &InstallWrites,
    outcomes: &[ObjectOutcome],
) -> Option<Result<Deployment, Error>> {
    let name = deployment.name_any();
    let written = writes
        .objects
        .iter()
        .zip(outcomes)
        .find(|(d, _)| d.resource.kind == "Deployment" && d.name() == name);
    match written {
        Some((_, ObjectOutcome::Written(object))) => Some(
            DynamicObject::clone(object)
                .try_parse()
                .map_err(|source| Error::Decode { name, source }),
        ),
        _ => found.deployments.get(&name).cloned().map(Ok),
    }
}

/// `namespace/name` of the object of `objects` that `error` was for.
/// The namespace/name (or name) of the object in `objects` that `error` names.
pub fn shown(objects: &[Desired], error: &WriteError) -> String {
    let (kind, name) = error.object();
    let namespace = objects
        .iter()
        .find(|d| d.resource.kind == kind && d.name() == name)
        .and_then(Desired::namespace);
    match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

/// Asks the API server, in a dry run as the OperatorGroup's service account,
/// whether that account may write every object of a scoped install, before
/// any is written: a rule the account does not hold itself is refused by the
/// API server's RBAC escalation check, a kind it may not write by RBAC, and a
/// refused install leaves nothing behind (no service account, no RBAC it could
/// grant, no Deployment). Only refusals (forbidden, invalid) stop the install
/// here; any other failure is met again, and reported, by the write itself.
async fn preflight(client: &Client, objects: &[Desired]) -> Result<(), Error> {
    let checks = objects.iter().map(|desired| async move {
        let api: Api<DynamicObject> = match desired.namespace() {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &desired.resource),
            None => Api::all_with(client.clone(), &desired.resource),
        };
        let mut params = PatchParams::apply(FIELD_MANAGER).force();
        params.dry_run = true;
        match api
            .patch(desired.name(), &params, &Patch::Apply(&desired.object))
            .await
        {
            Err(source) if refused(olm_runtime::classify(&source)) => {
                let source = WriteError::Apply {
                    kind: desired.resource.kind.clone(),
                    name: desired.name().to_owned(),
                    source,
                };
                Err(Error::Apply {
                    name: shown(objects, &source),
                    kind: desired.resource.kind.clone(),
                    source: Box::new(source),
                })
            }
            _ => Ok(()),
        }
    });
    futures::future::try_join_all(checks).await.map(|_| ())
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

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::controllers::csv::{
        build,
        fixtures::{self, Copies, NAMESPACE, modes},
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

    /// The store of an install that is right: every object built carries its hash.
    fn all_current(children: &Children) -> Copies {
        let mut stored = Copies::default();
        let mut carry = |desired: Desired| {
            let key = (desired.resource.kind.clone(), desired.name().to_owned());
            stored.hashes.insert(key, desired.hash().unwrap().to_owned());
        };
        children
            .service_accounts
            .iter()
            .for_each(|o| carry(Desired::owned(o).unwrap()));
        children
            .roles
            .iter()
            .for_each(|o| carry(Desired::owned(o).unwrap()));
        children
            .role_bindings
            .iter()
            .for_each(|o| carry(Desired::owned(o).unwrap()));
        children
            .deployments
            .iter()
            .for_each(|o| carry(Desired::owned(o).unwrap()));
        stored
    }

    /// Each object written: kind, name, whether alongside the one before.
    fn written(writes: &InstallWrites) -> Vec<(String, String, bool)> {
        writes
            .objects
            .iter()
            .map(|d| {
                (
                    d.resource.kind.clone(),
                    d.name().to_owned(),
                    d.is_alongside_previous(),
                )
            })
            .collect()
    }

    fn object(kind: &str, name: &str, alongside: bool) -> (String, String, bool) {
        (kind.to_owned(), name.to_owned(), alongside)
    }

    #[test]
    fn the_install_writes_what_is_not_current_and_removes_what_it_no_longer_has() {
        let csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        let strategy = validate::strategy(&csv).expect("valid");
        let membership = fixtures::membership(Targets::Namespaces(vec![NAMESPACE.to_owned()]));
        let children = build::build(&csv, &membership, &strategy).expect("builds");
        let role = children.roles[0].name_any();
        let binding = children.role_bindings[0].name_any();
        let read = fixtures::found(vec![], vec![], &[NAMESPACE]);
        let mut deployed = read.clone();
        deployed
            .deployments
            .insert("demo".to_owned(), children.deployments[0].clone());
        let drifted = {
            let mut stored = all_current(&children);
            let key = ("Role".to_owned(), role.clone());
            stored.foreign.insert(key, vec![vec!["rules".to_owned()]]);
            stored
        };
        let leftover = {
            let mut stored = all_current(&children);
            let old = (Some(NAMESPACE.to_owned()), "old-role".to_owned());
            let kept = (Some(NAMESPACE.to_owned()), role.clone());
            stored.labelled = vec![("Role".to_owned(), old), ("Role".to_owned(), kept)];
            stored
        };
        let everything = vec![
            object("ServiceAccount", "demo", false),
            object("Role", &role, true),
            object("RoleBinding", &binding, true),
            object("Deployment", "demo", false),
        ];
        // case, the stores, what the read found, objects written, removals
        let cases: [(&str, Copies, &Dereferenced, Vec<_>, Vec<&str>); 5] = [
            ("nothing live", Copies::default(), &read, everything, vec![]),
            ("all current", all_current(&children), &deployed, vec![], vec![]),
            (
                "a Deployment current but not read",
                all_current(&children),
                &read,
                vec![object("Deployment", "demo", false)],
                vec![],
            ),
            (
                "a field someone else took",
                drifted,
                &deployed,
                vec![object("Role", &role, false)],
                vec![],
            ),
            (
                "a Role no longer built",
                leftover,
                &deployed,
                vec![],
                vec!["old-role"],
            ),
        ];
        for (case, stored, found, objects, removals) in cases {
            let writes = plan(&csv, &children, found, &stored, Bindings::WithRoles).expect(case);
            assert_eq!(written(&writes), objects, "{case}");
            let removed: Vec<&str> = writes.removals.iter().map(|r| r.name.as_str()).collect();
            assert_eq!(removed, removals, "{case}");
        }
    }

    #[test]
    fn a_scoped_install_writes_its_bindings_after_its_roles() {
        let csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        let strategy = validate::strategy(&csv).expect("valid");
        let mut membership = fixtures::membership(Targets::Namespaces(vec![NAMESPACE.to_owned()]));
        assert_eq!(Bindings::of(&membership), Bindings::WithRoles);
        membership.service_account = Some("installer".to_owned());
        assert_eq!(Bindings::of(&membership), Bindings::AfterRoles);
        let children = build::build(&csv, &membership, &strategy).expect("builds");
        let (role, binding) = (children.roles[0].name_any(), children.role_bindings[0].name_any());
        let read = fixtures::found(vec![], vec![], &[NAMESPACE]);
        let writes = plan(&csv, &children, &read, &Copies::default(), Bindings::AfterRoles).expect("plans");
        assert_eq!(
            written(&writes),
            [
                object("ServiceAccount", "demo", false),
                object("Role", &role, true),
                object("RoleBinding", &binding, false),
                object("Deployment", "demo", false),
            ]
        );
    }

    #[test]
    fn the_install_refuses_a_deployment_another_csv_controls() {
        let csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        let strategy = validate::strategy(&csv).expect("valid");
        let membership = fixtures::membership(Targets::Namespaces(vec![NAMESPACE.to_owned()]));
        let children = build::build(&csv, &membership, &strategy).expect("builds");
        let mut found = fixtures::found(vec![], vec![], &[NAMESPACE]);
        found.namespace_csvs = ["other.v1.0.0".to_owned()].into();
        let mut theirs = children.deployments[0].clone();
        theirs.metadata = controlled_by(OWNER_KIND, "other.v1.0.0", "other");
        found.deployments.insert("demo".to_owned(), theirs);
        let error = plan(&csv, &children, &found, &Copies::default(), Bindings::WithRoles).unwrap_err();
        assert!(
            matches!(error, Error::Conflict { ref owner, .. } if owner == "other.v1.0.0"),
            "{error}"
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
            kind: "Deployment".to_owned(),
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
            kind: "Deployment".to_owned(),
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
