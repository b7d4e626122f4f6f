//! Serving: the certificates, Services, webhook configurations, CRD conversion
//! webhooks and APIServices of a ClusterServiceVersion whose Deployments serve
//! webhooks or owned APIServices (the pure parts are in [`certs`],
//! [`webhooks`] and [`apiservices`]).
//!
//! Each install reads the certificate Secrets and keeps them while they are
//! fresh (see [`certs::check_fresh`]) and the renewal time they record has not
//! passed; otherwise it issues a new CA and serving certificates, which
//! changes the `caBundle` everywhere and, through the pod template's
//! `olmcahash`, rolls the Deployments. The Deployments of the install gain the
//! certificate volumes; the Role and RoleBinding that let the Deployment's
//! service account read its Secret, and OLM's `system:auth-delegator` and
//! `extension-apiserver-authentication-reader` bindings, join the install's
//! RBAC. Services and Secrets carry owner references (the garbage collector
//! removes them with the CSV); webhook configurations and APIServices are
//! cluster-scoped and carry the CSV's `olm.owner*` labels, by which an
//! install finds in the shared stores those the CSV no longer declares, and
//! [`cleanup`] finds them all. Each object is stamped with the hash of its
//! content and written only when its live copy does not carry it
//! ([`stamp`]); the conversion of a CRD only when the CRD lacks it.

use std::{collections::BTreeMap, fmt::Debug};

use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        core::v1::{Secret, Service},
        rbac::v1::{ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time},
    jiff::Timestamp,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{ApiResource, DynamicObject, ListParams},
    runtime::reflector::{ObjectRef, Store},
};
use olm_api::{
    labels,
    v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, RequirementStatus, StatusReason},
};
use olm_runtime::{ErrorClass, apply::WriteError, classify};
use serde::{Serialize, de::DeserializeOwned};

use super::stamp::{self, Applier};
use super::{
    apiservices,
    build::{Children, owner_labels, owner_selector},
    certs::{self, Authority, Issued},
    naming::{operator_label_of, spec_hash},
    validate::{Membership, Requirements},
    webhooks::{self, Registration},
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
        kind: &'static str,
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
        kind: &'static str,
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

/// The certificates of an install, ready for [`register`].
#[derive(Clone, Debug)]
pub struct Prepared {
    /// What was done about certificates.
    pub serving: Serving,
    /// The CA (PEM) of each served Deployment.
    ca_bundles: BTreeMap<String, String>,
}

/// Before the install is applied: keeps or issues the certificates of
/// `csv`, writes their Secrets and the Services, and mounts the certificates
/// into `children`' Deployments (and adds OLM's RBAC for them). `None` when
/// the CSV serves nothing.
pub async fn prepare(
    applier: Applier<'_>,
    csv: &ClusterServiceVersion,
    children: &mut Children,
    now: Timestamp,
) -> Result<Option<Prepared>, Error> {
    let ctx = applier.ctx;
    let served = certs::served(csv);
    if served.is_empty() {
        if csv.status.as_ref().is_some_and(|s| s.certs_rotate_at.is_some()) {
            // It served before (the CSV changed): remove what is left.
            cleanup(ctx, csv).await?;
        }
        return Ok(None);
    }
    let deployments: Vec<String> = children.deployments.iter().map(|d| d.name_any()).collect();
    webhooks::check(csv, &deployments)?;

    let owner = Owner::of(csv);
    let lifetimes = ctx.settings.cert_lifetimes;
    let found = stored_secrets(ctx, &owner, &served).await?;
    let (issued, serving) = match keep_stored(&served, &found, &owner.namespace, now, lifetimes) {
        Some((stored, due)) => (
            stored,
            Serving {
                rotated: false,
                rotate_at: due,
            },
        ),
        None => {
            let issued = issue(&served, &owner.namespace, now, lifetimes)?;
            tracing::info!(csv = %csv.name_any(), namespace = %owner.namespace, "issued new serving certificates");
            let rotate_at = lifetimes.rotate_at(now);
            (
                issued,
                Serving {
                    rotated: true,
                    rotate_at,
                },
            )
        }
    };

    let mut ca_bundles = BTreeMap::new();
    for one in &served {
        let Some(certificate) = issued.get(&one.deployment) else {
            continue;
        };
        if serve_deployment(applier, &owner, one, certificate, serving.rotate_at, children).await? {
            ca_bundles.insert(one.deployment.clone(), certificate.ca_pem.clone());
        }
    }
    Ok(Some(Prepared { serving, ca_bundles }))
}

/// The certificate Secrets stored for the served Deployments, by Deployment.
async fn stored_secrets(
    ctx: &Context,
    owner: &Owner,
    served: &[certs::Served],
) -> Result<BTreeMap<String, Secret>, Error> {
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), &owner.namespace);
    let mut found = BTreeMap::new();
    for one in served {
        let name = certs::secret_name(&certs::service_name(&one.deployment));
        let secret = secrets.get_opt(&name).await.map_err(|source| Error::Get {
            kind: "Secret",
            name: format!("{}/{name}", owner.namespace),
            source,
        })?;
        if let Some(secret) = secret {
            found.insert(one.deployment.clone(), secret);
        }
    }
    Ok(found)
}

/// The stored certificates (`found`, by Deployment) to keep, with when they
/// are due: only when every served Deployment has one that is fresh for its
/// Service's hosts in `namespace` and says a renewal time still ahead of
/// `now`. `None`: issue them all again.
fn keep_stored(
    served: &[certs::Served],
    found: &BTreeMap<String, Secret>,
    namespace: &str,
    now: Timestamp,
    lifetimes: certs::Lifetimes,
) -> Option<(BTreeMap<String, Issued>, Timestamp)> {
    let mut stored = BTreeMap::new();
    let mut due: Option<Timestamp> = None;
    for one in served {
        let secret = found.get(&one.deployment);
        let hosts = certs::hosts(&certs::service_name(&one.deployment), namespace);
        let rotate_at = secret
            .and_then(|s| s.metadata.annotations.as_ref())
            .and_then(|a| a.get(certs::ROTATE_AT_ANNOTATION))
            .and_then(|text| text.parse::<Timestamp>().ok());
        let Some(rotate_at) = rotate_at else {
            continue;
        };
        due = Some(due.map_or(rotate_at, |due| due.min(rotate_at)));
        let fresh = secret.and_then(|s| s.data.as_ref()).and_then(|data| {
            certs::check_fresh(data, &hosts, now, lifetimes.min_fresh).ok()?;
            Some(Issued {
                ca_pem: text(data, certs::CA_KEY),
                cert_pem: text(data, certs::CERT_KEY),
                key_pem: text(data, certs::PRIVATE_KEY_KEY),
            })
        });
        if let Some(issued) = fresh {
            stored.insert(one.deployment.clone(), issued);
        }
    }
    let due = due.filter(|due| now < *due)?;
    (stored.len() == served.len()).then_some((stored, due))
}

/// New certificates for every served Deployment, from one new CA.
fn issue(
    served: &[certs::Served],
    namespace: &str,
    now: Timestamp,
    lifetimes: certs::Lifetimes,
) -> Result<BTreeMap<String, Issued>, Error> {
    let authority = Authority::new(now, lifetimes.valid_for)?;
    let mut issued = BTreeMap::new();
    for one in served {
        let hosts = certs::hosts(&certs::service_name(&one.deployment), namespace);
        issued.insert(one.deployment.clone(), authority.serving(&hosts)?);
    }
    Ok(issued)
}

/// Serves `certificate` from the Deployment `one` names in `children`: writes
/// its Service and certificate Secret, mounts the certificate, stamps the new
/// spec hash and adds OLM's RBAC for it. Whether the Deployment is there to
/// serve from.
async fn serve_deployment(
    applier: Applier<'_>,
    owner: &Owner,
    one: &certs::Served,
    certificate: &Issued,
    rotate_at: Timestamp,
    children: &mut Children,
) -> Result<bool, Error> {
    let Some(deployment) = children
        .deployments
        .iter_mut()
        .find(|d| d.name_any() == one.deployment)
    else {
        return Ok(false);
    };
    let Some(spec) = deployment.spec.as_mut() else {
        return Ok(false);
    };
    let service_name = certs::service_name(&one.deployment);
    let secret_name = certs::secret_name(&service_name);
    let hash = certs::ca_hash(certificate.ca_pem.as_bytes());

    let mut service = certs::service(&service_name, &one.ports, spec);
    service.metadata = owner.namespaced(&service_name);
    let client = &applier.ctx.client;
    let services = Api::<Service>::namespaced(client.clone(), &owner.namespace);
    apply(applier, &services, &service, "Service").await?;
    let secret = certificate_secret(owner, &secret_name, certificate, &hash, rotate_at);
    let secrets = Api::<Secret>::namespaced(client.clone(), &owner.namespace);
    apply(applier, &secrets, &secret, "Secret").await?;

    certs::mount(spec, &secret_name, &hash);
    let new_hash = spec_hash(spec);
    let account = spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.service_account_name.clone())
        .unwrap_or_else(|| "default".to_owned());
    deployment
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::DEPLOYMENT_SPEC_HASH.to_owned(), new_hash);
    owner.push_rbac(children, &service_name, &secret_name, &account);
    Ok(true)
}

/// The TLS Secret `name` holding `certificate`, annotated with its CA's hash
/// and when it is due for renewal.
fn certificate_secret(
    owner: &Owner,
    name: &str,
    certificate: &Issued,
    ca_hash: &str,
    rotate_at: Timestamp,
) -> Secret {
    let mut secret = Secret {
        metadata: owner.namespaced(name),
        data: Some(certs::secret_data(certificate)),
        type_: Some("kubernetes.io/tls".to_owned()),
        ..Secret::default()
    };
    secret.metadata.annotations = Some(BTreeMap::from([
        (certs::CA_HASH_ANNOTATION.to_owned(), ca_hash.to_owned()),
        (certs::ROTATE_AT_ANNOTATION.to_owned(), rotate_at.to_string()),
    ]));
    secret
}

/// After the install's Deployments are applied (as OLM orders it): registers
/// the webhooks, conversion webhooks and APIServices of `csv` with the CAs of
/// `prepared`, and removes those the CSV no longer declares. Each is written
/// only when its live copy is not already as wanted: webhook configurations
/// and APIServices by their stamp ([`Applier::apply`]), the conversion of a
/// CRD by the live CRD in `crds` (as the read step found it).
pub async fn register(
    applier: Applier<'_>,
    csv: &ClusterServiceVersion,
    membership: &Membership,
    prepared: &Prepared,
    crds: &BTreeMap<String, CustomResourceDefinition>,
) -> Result<(), Error> {
    let ctx = applier.ctx;
    let owner = Owner::of(csv);
    let registration = Registration {
        csv_name: &owner.name,
        namespace: &owner.namespace,
        owner_labels: &owner.labels,
        targets: &membership.targets,
        ca_bundles: &prepared.ca_bundles,
    };
    let configurations = registration.configurations(csv);
    let validating_api = Api::<ValidatingWebhookConfiguration>::all(ctx.client.clone());
    for configuration in &configurations.validating {
        apply(applier, &validating_api, configuration, VALIDATING).await?;
    }
    let mutating_api = Api::<MutatingWebhookConfiguration>::all(ctx.client.clone());
    for configuration in &configurations.mutating {
        apply(applier, &mutating_api, configuration, MUTATING).await?;
    }
    let crd_api = Api::<DynamicObject>::all_with(ctx.client.clone(), &webhooks::crd_resource());
    for crd in &configurations.conversions {
        let name = crd.metadata.name.clone().unwrap_or_default();
        if !webhooks::conversion_current(crd, crds.get(&name)) {
            apply_dynamic(ctx, &crd_api, crd, "CustomResourceDefinition").await?;
        }
    }
    let api_services = register_api_services(applier, csv, &owner, &prepared.ca_bundles).await?;

    // What this CSV no longer declares.
    let names = |metas: Vec<&ObjectMeta>| metas.into_iter().filter_map(|m| m.name.clone()).collect();
    let keep: Vec<String> = names(configurations.validating.iter().map(|c| &c.metadata).collect());
    prune(applier, &validating_api, &owner.labels, &keep, VALIDATING).await?;
    let keep: Vec<String> = names(configurations.mutating.iter().map(|c| &c.metadata).collect());
    prune(applier, &mutating_api, &owner.labels, &keep, MUTATING).await?;
    let api = Api::<APIService>::all(ctx.client.clone());
    prune(applier, &api, &owner.labels, &api_services, API_SERVICE).await
}

/// Applies the APIServices `csv` owns, stamped, trusting the CAs of
/// `ca_bundles`; one whose live copy carries its stamp is left alone (its
/// labels, in the stamp, say this CSV holds it), any other is first checked
/// to be adoptable ([`check_adoptable`]). Returns their names.
async fn register_api_services(
    applier: Applier<'_>,
    csv: &ClusterServiceVersion,
    owner: &Owner,
    ca_bundles: &BTreeMap<String, String>,
) -> Result<Vec<String>, Error> {
    let ctx = applier.ctx;
    let api = Api::<APIService>::all(ctx.client.clone());
    let mut names = Vec::new();
    for desc in apiservices::owned(csv) {
        let deployment = desc.deployment_name.clone().unwrap_or_default();
        let ca = ca_bundles.get(&deployment).cloned().unwrap_or_default();
        let object = apiservices::api_service(desc, &owner.namespace, &ca, &owner.labels);
        let name = apiservices::name(desc);
        let (_, current) = stamp::stamp(&object, API_SERVICE, applier.live).map_err(Error::Encode)?;
        if !current {
            check_adoptable(ctx, csv, &api, &name).await?;
            apply(applier, &api, &object, API_SERVICE).await?;
        }
        names.push(name);
    }
    Ok(names)
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

/// Refuses to take over the APIService `name` unless nobody has it, this CSV
/// or the one it replaces holds it, or its holder is gone or stepping aside
/// (Replacing, Deleting), as OLM decides.
async fn check_adoptable(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    api: &Api<APIService>,
    name: &str,
) -> Result<(), Error> {
    let get = |kind: &'static str, name: String| move |source| Error::Get { kind, name, source };
    let Some(existing) = api
        .get_opt(name)
        .await
        .map_err(get("APIService", name.to_owned()))?
    else {
        return Ok(());
    };
    let holder = apiservices::holder(&existing.metadata);
    if apiservices::adoptable_at_once(csv, &holder) {
        return Ok(());
    }
    let apiservices::Holder::Csv(namespace, holder_name) = holder else {
        return Err(Error::ApiServiceConflict {
            name: name.to_owned(),
            holder: "it is not owned by a ClusterServiceVersion".to_owned(),
        });
    };
    let other = Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), &namespace)
        .get_opt(&holder_name)
        .await
        .map_err(get("ClusterServiceVersion", format!("{namespace}/{holder_name}")))?;
    let stepping_aside = |other: &ClusterServiceVersion| {
        matches!(
            other.status.as_ref().and_then(|s| s.phase),
            Some(olm_api::v1alpha1::CsvPhase::Replacing | olm_api::v1alpha1::CsvPhase::Deleting)
        )
    };
    match other {
        None => Ok(()),
        Some(other) if stepping_aside(&other) => Ok(()),
        Some(_) => Err(Error::ApiServiceConflict {
            name: name.to_owned(),
            holder: format!("ClusterServiceVersion {namespace}/{holder_name} owns it"),
        }),
    }
}

fn text(data: &BTreeMap<String, k8s_openapi::ByteString>, key: &str) -> String {
    data.get(key)
        .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
        .unwrap_or_default()
}

/// Applies `obj` stamped with the hash of its content, unless its live copy
/// in the shared stores carries that hash already ([`Applier::apply`]).
async fn apply<K>(applier: Applier<'_>, api: &Api<K>, obj: &K, kind: &'static str) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    match applier.apply(api, obj, kind).await {
        Ok(_) => Ok(()),
        Err(stamp::Error::Write { source, .. }) => Err(Error::Apply {
            kind,
            name: obj.meta().name.clone().unwrap_or_default(),
            source,
        }),
        Err(encode @ stamp::Error::Encode { .. }) => Err(Error::Encode(encode)),
    }
}

async fn apply_dynamic(
    ctx: &Context,
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    kind: &'static str,
) -> Result<DynamicObject, Error> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    ctx.writer
        .apply_dynamic(api, &name, obj)
        .await
        .map_err(|source| Error::Apply {
            kind,
            name,
            source: Box::new(source),
        })
}

/// Deletes the objects of kind `K` carrying the CSV's owner `labels` in the
/// shared stores whose names are not in `keep`.
async fn prune<K>(
    applier: Applier<'_>,
    api: &Api<K>,
    labels: &BTreeMap<String, String>,
    keep: &[String],
    kind: &'static str,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let resource = ApiResource::erase::<K>(&());
    for (_, name) in applier.live.labelled(&resource, labels) {
        if keep.contains(&name) {
            continue;
        }
        tracing::info!(kind, %name, "removing an object the ClusterServiceVersion no longer serves");
        applier
            .ctx
            .delete(api, &name)
            .await
            .map_err(|source| Error::Delete {
                kind,
                name,
                source: Box::new(source),
            })?;
    }
    Ok(())
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
            kind,
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

    fn served(deployment: &str) -> certs::Served {
        certs::Served {
            deployment: deployment.to_owned(),
            ports: Vec::new(),
        }
    }

    fn stored(issued: &Issued, rotate_at: Option<Timestamp>) -> Secret {
        Secret {
            metadata: ObjectMeta {
                annotations: rotate_at
                    .map(|due| BTreeMap::from([(certs::ROTATE_AT_ANNOTATION.to_owned(), due.to_string())])),
                ..ObjectMeta::default()
            },
            data: Some(certs::secret_data(issued)),
            ..Secret::default()
        }
    }

    /// What a case is called, the certificate and renewal time stored per
    /// Deployment, now, and until when the certificates are kept.
    type Case<'a> = (
        &'a str,
        [Option<(&'a Issued, Option<Timestamp>)>; 2],
        i64,
        Option<Timestamp>,
    );

    #[test]
    fn stored_certificates_are_kept_only_when_every_one_is_fresh_and_not_due() {
        let lifetimes = certs::Lifetimes::default();
        let served = [served("api"), served("hooks")];
        let authority = Authority::new(at(0), lifetimes.valid_for).expect("a CA");
        let issue = |deployment: &str, namespace: &str| {
            let hosts = certs::hosts(&certs::service_name(deployment), namespace);
            authority.serving(&hosts).expect("a certificate")
        };
        let (api, hooks) = (issue("api", "ops"), issue("hooks", "ops"));
        let elsewhere = issue("hooks", "other");
        let (soon, later) = (Some(at(100)), Some(at(200)));
        let cases: [Case<'_>; 6] = [
            ("all fresh", [Some((&api, later)), Some((&hooks, soon))], 10, soon),
            ("one missing", [Some((&api, later)), None], 10, None),
            (
                "one without renewal time",
                [Some((&api, later)), Some((&hooks, None))],
                10,
                None,
            ),
            ("one due", [Some((&api, later)), Some((&hooks, soon))], 100, None),
            (
                "one for other hosts",
                [Some((&api, later)), Some((&elsewhere, soon))],
                10,
                None,
            ),
            ("none", [None, None], 10, None),
        ];
        for (what, secrets, now, expected) in cases {
            let found: BTreeMap<String, Secret> = served
                .iter()
                .zip(secrets)
                .filter_map(|(one, secret)| {
                    secret.map(|(issued, due)| (one.deployment.clone(), stored(issued, due)))
                })
                .collect();
            let kept = keep_stored(&served, &found, "ops", at(now), lifetimes);
            assert_eq!(kept.as_ref().map(|(_, due)| *due), expected, "{what}");
            if let Some((certificates, _)) = kept {
                assert_eq!(certificates.get("api"), Some(&api), "{what}");
                assert_eq!(certificates.get("hooks"), Some(&hooks), "{what}");
            }
        }
    }
}
