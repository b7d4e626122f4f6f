//! Serving: the certificates, Services, webhook configurations, CRD conversion
//! webhooks and APIServices of a ClusterServiceVersion whose Deployments serve
//! webhooks or owned APIServices (the pure parts of each are in [`certs`],
//! [`webhooks`] and [`apiservices`]).
//!
//! In the CSV's three steps:
//! - *read* ([`read::read`], called by the CSV's read step): the certificate Secrets (GET: they hold keys, and no
//!   store keeps Secrets) and who holds the APIServices the CSV owns (stores);
//! - *decide* ([`plan`], pure): [`certificates`] keeps the stored certificates
//!   while they are fresh ([`certs::check_fresh`]) and the renewal time they
//!   record has not passed, or asks for new ones; [`certify`] issues them (a
//!   new key and CA: the one piece of outside work, with its randomness); then
//!   [`plan::plan`] mounts them into the install's Deployments (through the
//!   pod template's `olmcahash`, new certificates roll the Deployments), adds
//!   OLM's RBAC for them to the install's (read the Secret,
//!   `system:auth-delegator`, `extension-apiserver-authentication-reader`),
//!   and decides every object to write and to remove;
//! - *apply*: [`write_before`] (Services and Secrets, before the Deployments
//!   that mount them) and [`write_after`] (webhook configurations, CRD
//!   conversions and APIServices once the Deployments are written, as OLM
//!   orders it; then the removal of those the CSV no longer declares),
//!   through the one applier.
//!
//! Services and Secrets carry owner references (the garbage collector
//! removes them with the CSV); webhook configurations and APIServices are
//! cluster-scoped and carry the CSV's `olm.owner*` labels, by which an
//! install finds in the shared stores those the CSV no longer declares, and
//! [`cleanup`] finds them all when the CSV is deleted. Each object is stamped
//! with the hash of its content and written only when its live copy does not
//! carry it ([`stamp`]); the conversion of a CRD only when the CRD lacks it.

pub mod plan;
pub mod read;

use std::{collections::BTreeMap, fmt::Debug};

use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        rbac::v1::{ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time},
    jiff::Timestamp,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DynamicObject, ListParams},
    runtime::reflector::{ObjectRef, Store},
};
use olm_api::v1alpha1::{
    ClusterServiceVersion, ClusterServiceVersionStatus, RequirementStatus, StatusReason,
};
use olm_runtime::{ErrorClass, apply::WriteError, classify, effects::Desired};
use serde::de::DeserializeOwned;

pub use self::plan::{Certificates, Certified, Input, Writes, certificates};
pub use self::read::Found;
use super::{
    apiservices,
    build::{Children, owner_labels, owner_selector},
    certs::{self, Authority},
    naming::operator_label_of,
    stamp,
    validate::Requirements,
    webhooks,
};
use crate::context::Context;

/// The namespace of OLM's authentication-reader binding.
const KUBE_SYSTEM: &str = "kube-system";

const VALIDATING: &str = "ValidatingWebhookConfiguration";
const MUTATING: &str = "MutatingWebhookConfiguration";
const API_SERVICE: &str = "APIService";

/// Why the serving objects could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A webhook description is invalid (OLM's `InvalidWebhookDescription`).
    #[error(transparent)]
    Invalid(#[from] webhooks::Invalid),
    /// A certificate could not be issued.
    #[error(transparent)]
    Issue(#[from] certs::IssueError),
    /// Reading an object failed.
    #[error("failed to read {kind} {name}")]
    Get {
        /// The kind.
        kind: &'static str,
        /// The name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Writing an object failed.
    #[error("failed to apply {kind} {name}")]
    Apply {
        /// The kind.
        kind: String,
        /// The name.
        name: String,
        /// The cause.
        #[source]
        source: Box<WriteError>,
    },
    /// An APIService this CSV owns exists and belongs to someone else.
    #[error("pre-existing APIService {name} is not adoptable: {holder}")]
    ApiServiceConflict {
        /// The APIService.
        name: String,
        /// Who holds it, in words.
        holder: String,
    },
    /// An object could not be encoded to hash its content (a bug: every
    /// object built is plain JSON).
    #[error(transparent)]
    Encode(stamp::Error),
    /// Deleting an object failed.
    #[error("failed to delete {kind} {name}")]
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

impl Error {
    /// Whether only a change (of the CSV, of RBAC, of a conflicting object)
    /// can help: the install is refused with this message.
    pub fn is_terminal(&self) -> bool {
        match self {
            Error::Invalid(_) | Error::ApiServiceConflict { .. } | Error::Encode(_) => true,
            Error::Apply { source, .. } | Error::Delete { source, .. } => {
                matches!(source.class(), ErrorClass::Terminal | ErrorClass::Forbidden)
            }
            Error::Issue(_) | Error::Get { .. } => false,
        }
    }

    /// What kind of failure this is, for the reconcile's error policy.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Invalid(_) | Error::ApiServiceConflict { .. } | Error::Encode(_) => ErrorClass::Terminal,
            Error::Apply { source, .. } | Error::Delete { source, .. } => source.class(),
            Error::Get { source, .. } => classify(source),
            Error::Issue(_) => ErrorClass::Transient,
        }
    }

    /// The message, with the API server's words when it refused.
    pub fn detail(&self) -> String {
        match self {
            Error::Apply { source, .. } | Error::Delete { source, .. } => match source.api_error() {
                Some(kube::Error::Api(status)) => format!("{self}: {}", status.message),
                _ => format!("{self}: {source}"),
            },
            _ => self.to_string(),
        }
    }
}

/// What the install did about certificates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Serving {
    /// New certificates were issued.
    pub rotated: bool,
    /// When they are due for renewal.
    pub rotate_at: Timestamp,
}

impl Serving {
    /// Records the certificates in `status` (`certsLastUpdated` only when
    /// they were issued now).
    pub fn stamp(&self, status: &mut ClusterServiceVersionStatus, now: Timestamp) {
        if self.rotated || status.certs_last_updated.is_none() {
            status.certs_last_updated = Some(Time(now));
        }
        status.certs_rotate_at = Some(Time(self.rotate_at));
    }

    /// How long until renewal is due, from `now`.
    pub fn due_in(&self, now: Timestamp) -> std::time::Duration {
        std::time::Duration::try_from(self.rotate_at.duration_since(now)).unwrap_or_default()
    }
}

/// The certificates to serve with: those `certificates` keeps, or new ones
/// issued now from one new CA (a new key: the outside work of serving).
/// `None` when the CSV serves nothing.
pub fn certify(
    csv: &ClusterServiceVersion,
    certificates: Certificates,
    now: Timestamp,
    lifetimes: certs::Lifetimes,
) -> Result<Option<Certified>, Error> {
    match certificates {
        Certificates::None => Ok(None),
        Certificates::Keep { issued, rotate_at } => Ok(Some(Certified {
            issued,
            serving: Serving {
                rotated: false,
                rotate_at,
            },
        })),
        Certificates::Issue => {
            let namespace = csv.namespace().unwrap_or_default();
            let authority = Authority::new(now, lifetimes.valid_for)?;
            let mut issued = BTreeMap::new();
            for one in certs::served(csv) {
                let hosts = certs::hosts(&certs::service_name(&one.deployment), &namespace);
                issued.insert(one.deployment.clone(), authority.serving(&hosts)?);
            }
            tracing::info!(csv = %csv.name_any(), %namespace, "issued new serving certificates");
            let serving = Serving {
                rotated: true,
                rotate_at: lifetimes.rotate_at(now),
            };
            Ok(Some(Certified { issued, serving }))
        }
    }
}

/// Writes the Services and certificate Secrets of `writes`, before the
/// Deployments that mount them.
pub async fn write_before(ctx: &Context, writes: &Writes) -> Result<(), Error> {
    write(ctx, &writes.before).await
}

/// Writes the webhook configurations, CRD conversions and APIServices of
/// `writes`, once the Deployments are written, then removes those the CSV no
/// longer declares.
pub async fn write_after(ctx: &Context, writes: &Writes) -> Result<(), Error> {
    write(ctx, &writes.after).await?;
    for removal in &writes.removals {
        let (kind, name) = (&removal.resource.kind, &removal.name);
        tracing::info!(%kind, %name, "removing an object the ClusterServiceVersion no longer serves");
    }
    ctx.writer
        .remove(&ctx.client, &writes.removals)
        .await
        .map_err(|source| Error::Delete {
            kind: source.object().0.to_owned(),
            name: source.object().1.to_owned(),
            source: Box::new(source),
        })?;
    Ok(())
}

/// Writes `objects` through the one applier, as this operator (what is
/// current was left out by [`plan::plan`]).
async fn write(ctx: &Context, objects: &[Desired]) -> Result<(), Error> {
    ctx.writer
        .write_objects(&ctx.client, objects, &())
        .await
        .map_err(|source| Error::Apply {
            kind: source.object().0.to_owned(),
            name: super::apply::shown(objects, &source),
            source: Box::new(source),
        })?;
    Ok(())
}

/// Adds the status of every required API service of `csv` to `requirements`
/// (they are unmet while their APIService is missing or not Available), as
/// the shared store of APIServices holds them.
pub fn require_api_services(
    api_services: &Store<APIService>,
    csv: &ClusterServiceVersion,
    requirements: &mut Requirements,
) {
    for desc in apiservices::required(csv) {
        let name = apiservices::name(desc);
        let found = api_services.get(&ObjectRef::new(&name)).map(|service| {
            let mut object = DynamicObject::new(&name, &apiservices::resource());
            object.metadata = service.metadata.clone();
            object.data = serde_json::json!({ "status": service.status });
            object
        });
        let status: RequirementStatus = apiservices::requirement(desc, found.as_ref());
        if status.status != StatusReason::Present {
            requirements.met = false;
        }
        requirements.statuses.push(status);
    }
}

/// Removes the webhook configurations and APIServices of a deleted CSV, or
/// of one that serves nothing any more. They are listed from the API server:
/// this runs once, when the CSV goes or stops serving, and must find every
/// object whatever the stores have shown yet.
pub async fn cleanup(ctx: &Context, csv: &ClusterServiceVersion) -> Result<(), Error> {
    let selector = owner_selector(&csv.name_any(), &csv.namespace().unwrap_or_default());
    remove_labelled(
        ctx,
        &Api::<ValidatingWebhookConfiguration>::all(ctx.client.clone()),
        &selector,
        VALIDATING,
    )
    .await?;
    remove_labelled(
        ctx,
        &Api::<MutatingWebhookConfiguration>::all(ctx.client.clone()),
        &selector,
        MUTATING,
    )
    .await?;
    remove_labelled(
        ctx,
        &Api::<APIService>::all(ctx.client.clone()),
        &selector,
        API_SERVICE,
    )
    .await
}

/// Deletes every object of kind `K` that `selector` selects, listed live.
async fn remove_labelled<K>(
    ctx: &Context,
    api: &Api<K>,
    selector: &str,
    kind: &'static str,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let listed = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|source| Error::Get {
            kind,
            name: selector.to_owned(),
            source,
        })?;
    for name in listed.items.iter().map(ResourceExt::name_any) {
        tracing::info!(kind, %name, "removing a serving object of a ClusterServiceVersion");
        ctx.delete(api, &name).await.map_err(|source| Error::Delete {
            kind: kind.to_owned(),
            name,
            source: Box::new(source),
        })?;
    }
    Ok(())
}

/// The CSV as the owner of the serving objects.
struct Owner {
    name: String,
    namespace: String,
    labels: BTreeMap<String, String>,
    reference: Option<OwnerReference>,
}

impl Owner {
    fn of(csv: &ClusterServiceVersion) -> Self {
        let name = csv.name_any();
        let namespace = csv.namespace().unwrap_or_default();
        let mut labels = owner_labels(&name, &namespace);
        labels.insert(certs::MANAGED_LABEL.to_owned(), "true".to_owned());
        labels.extend(operator_label_of(csv));
        let reference = csv.controller_owner_ref(&()).map(|mut r| {
            r.block_owner_deletion = Some(false);
            r
        });
        Self {
            name,
            namespace,
            labels,
            reference,
        }
    }

    /// Metadata of an object in the CSV's namespace: labels and owner reference.
    fn namespaced(&self, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels.clone()),
            owner_references: self.reference.clone().map(|r| vec![r]),
            ..ObjectMeta::default()
        }
    }

    fn subject(&self, account: &str) -> Subject {
        Subject {
            kind: "ServiceAccount".to_owned(),
            name: account.to_owned(),
            namespace: Some(self.namespace.clone()),
            api_group: Some(String::new()),
        }
    }

    /// OLM's RBAC for a served Deployment: read its Secret, delegate
    /// authentication, read the authentication configuration.
    fn push_rbac(&self, children: &mut Children, service: &str, secret: &str, account: &str) {
        children.roles.push(Role {
            metadata: self.namespaced(secret),
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["secrets".to_owned()]),
                resource_names: Some(vec![secret.to_owned()]),
                verbs: vec!["get".to_owned()],
                non_resource_urls: None,
            }]),
        });
        children.role_bindings.push(RoleBinding {
            metadata: self.namespaced(secret),
            role_ref: role_ref("Role", secret),
            subjects: Some(vec![self.subject(account)]),
        });
        children.cluster_role_bindings.push(ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(format!("{service}-system:auth-delegator")),
                labels: Some(self.labels.clone()),
                ..ObjectMeta::default()
            },
            role_ref: role_ref("ClusterRole", "system:auth-delegator"),
            subjects: Some(vec![self.subject(account)]),
        });
        children.role_bindings.push(RoleBinding {
            metadata: ObjectMeta {
                name: Some(format!("{service}-auth-reader")),
                namespace: Some(KUBE_SYSTEM.to_owned()),
                labels: Some(self.labels.clone()),
                ..ObjectMeta::default()
            },
            role_ref: role_ref("Role", "extension-apiserver-authentication-reader"),
            subjects: Some(vec![self.subject(account)]),
        });
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: Some("rbac.authorization.k8s.io".to_owned()),
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).expect("a valid time")
    }

    #[test]
    fn the_status_records_when_certificates_were_issued_and_when_they_are_due() {
        let mut status = ClusterServiceVersionStatus::default();
        Serving {
            rotated: true,
            rotate_at: at(100),
        }
        .stamp(&mut status, at(0));
        assert_eq!(status.certs_last_updated, Some(Time(at(0))));
        assert_eq!(status.certs_rotate_at, Some(Time(at(100))));

        let kept = Serving {
            rotated: false,
            rotate_at: at(100),
        };
        kept.stamp(&mut status, at(50));
        assert_eq!(
            status.certs_last_updated,
            Some(Time(at(0))),
            "kept certificates keep their date"
        );
        assert_eq!(kept.due_in(at(40)), std::time::Duration::from_secs(60));
        assert_eq!(kept.due_in(at(140)), std::time::Duration::ZERO);
    }
}
