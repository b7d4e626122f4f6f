//! The decision of serving (pure): whether the stored certificates are kept
//! ([`certificates`]), and, with the certificates to serve with, every object
//! to write and to remove ([`plan`]). Objects whose live copy in the shared
//! stores already carries their hash are left out ([`stamp::desired`]), and
//! the conversion of a CRD when the CRD already has it
//! ([`webhooks::conversion_current`]).

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        core::v1::{Secret, Service},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    jiff::Timestamp,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{Resource, ResourceExt, api::ApiResource};
use olm_api::{labels, v1alpha1::ClusterServiceVersion};
use olm_runtime::effects::{Desired, Removal, at_once};
use serde::Serialize;

use super::{
    API_SERVICE, Error, MUTATING, Owner, Serving, VALIDATING, apiservices,
    certs::{self, Issued},
    read::{Found, HolderState, Holding},
    webhooks::{self, Registration},
};
use crate::{
    controllers::csv::{build::Children, naming::spec_hash, stamp, validate::Membership},
    fields::LiveCopies,
};

/// What is to be done about the certificates of a CSV.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Certificates {
    /// The CSV serves nothing.
    None,
    /// Every stored certificate is fresh: kept, due for renewal at `rotate_at`.
    Keep {
        /// The stored certificates, by Deployment.
        issued: BTreeMap<String, Issued>,
        /// When they are due for renewal.
        rotate_at: Timestamp,
    },
    /// New certificates, from a new CA, for every served Deployment.
    Issue,
}

/// The certificates an install serves with, kept or issued.
#[derive(Clone, Debug)]
pub struct Certified {
    /// The certificate of each served Deployment.
    pub issued: BTreeMap<String, Issued>,
    /// Whether they were issued now, and when they are due.
    pub serving: Serving,
}

/// What serving writes and removes.
#[derive(Clone, Debug, Default)]
pub struct Writes {
    /// Services and certificate Secrets, written before the Deployments
    /// (which mount the Secrets).
    pub before: Vec<Desired>,
    /// Webhook configurations, conversions of CRDs and APIServices, written
    /// once the Deployments are (as OLM orders it).
    pub after: Vec<Desired>,
    /// Webhook configurations and APIServices of the CSV that it no longer
    /// declares (all of them when it serves nothing).
    pub removals: Vec<Removal>,
}

/// What [`plan`] decides from.
#[derive(Clone, Copy)]
pub struct Input<'a> {
    /// The CSV.
    pub csv: &'a ClusterServiceVersion,
    /// Its OperatorGroup membership.
    pub membership: &'a Membership,
    /// The certificates to serve with; `None` when it serves nothing.
    pub certified: Option<&'a Certified>,
    /// What the read step found.
    pub found: &'a Found,
    /// The CRDs the read step found, by name.
    pub crds: &'a BTreeMap<String, CustomResourceDefinition>,
    /// The live copies of the objects written.
    pub live: &'a dyn LiveCopies,
}

/// Whether the certificates stored for `csv` (in `found`) are kept at `now`.
pub fn certificates(
    csv: &ClusterServiceVersion,
    found: &Found,
    now: Timestamp,
    lifetimes: certs::Lifetimes,
) -> Certificates {
    let served = certs::served(csv);
    if served.is_empty() {
        return Certificates::None;
    }
    let namespace = csv.namespace().unwrap_or_default();
    match keep_stored(&served, &found.secrets, &namespace, now, lifetimes) {
        Some((issued, rotate_at)) => Certificates::Keep { issued, rotate_at },
        None => Certificates::Issue,
    }
}

/// Every serving object of the install: mounts the certificates into
/// `children`' Deployments (with OLM's RBAC for them) and decides the
/// Services, Secrets, webhook configurations, conversions and APIServices,
/// and what to remove.
pub fn plan(input: &Input<'_>, children: &mut Children) -> Result<Writes, Error> {
    let owner = Owner::of(input.csv);
    let Some(certified) = input.certified else {
        return Ok(Writes {
            removals: leftovers(input.live, &owner, &Kept::default()),
            ..Writes::default()
        });
    };
    let deployments: Vec<String> = children.deployments.iter().map(|d| d.name_any()).collect();
    webhooks::check(input.csv, &deployments)?;
    let mut before = Vec::new();
    let mut ca_bundles = BTreeMap::new();
    for one in certs::served(input.csv) {
        let Some(certificate) = certified.issued.get(&one.deployment) else {
            continue;
        };
        let rotate_at = certified.serving.rotate_at;
        if let Some((service, secret)) = serve_deployment(&owner, &one, certificate, rotate_at, children) {
            before.extend(owned(&service, "Service", input.live)?);
            before.extend(owned(&secret, "Secret", input.live)?);
            ca_bundles.insert(one.deployment.clone(), certificate.ca_pem.clone());
        }
    }
    let (after, kept) = register(input, &owner, &ca_bundles)?;
    Ok(Writes {
        before: at_once(before),
        after: at_once(after),
        removals: leftovers(input.live, &owner, &kept),
    })
}

/// The names of the webhook configurations and APIServices the CSV declares.
#[derive(Debug, Default)]
struct Kept {
    validating: Vec<String>,
    mutating: Vec<String>,
    api_services: Vec<String>,
}

/// The webhook configurations, conversions and APIServices of the CSV,
/// trusting the CAs of `ca_bundles`, and the names it keeps.
fn register(
    input: &Input<'_>,
    owner: &Owner,
    ca_bundles: &BTreeMap<String, String>,
) -> Result<(Vec<Desired>, Kept), Error> {
    let registration = Registration {
        csv_name: &owner.name,
        namespace: &owner.namespace,
        owner_labels: &owner.labels,
        targets: &input.membership.targets,
        ca_bundles,
    };
    let configurations = registration.configurations(input.csv);
    let mut after = Vec::new();
    let mut kept = Kept::default();
    for configuration in &configurations.validating {
        after.extend(owned(configuration, VALIDATING, input.live)?);
        kept.validating.push(configuration.name_any());
    }
    for configuration in &configurations.mutating {
        after.extend(owned(configuration, MUTATING, input.live)?);
        kept.mutating.push(configuration.name_any());
    }
    let crd = webhooks::crd_resource();
    for conversion in &configurations.conversions {
        let name = conversion.metadata.name.clone().unwrap_or_default();
        if !webhooks::conversion_current(conversion, input.crds.get(&name)) {
            after.push(Desired::dynamic_fields(&crd, conversion));
        }
    }
    for desc in apiservices::owned(input.csv) {
        let deployment = desc.deployment_name.clone().unwrap_or_default();
        let ca = ca_bundles.get(&deployment).cloned().unwrap_or_default();
        let object = apiservices::api_service(desc, &owner.namespace, &ca, &owner.labels);
        let name = apiservices::name(desc);
        if let Some(desired) = owned(&object, API_SERVICE, input.live)? {
            adoptable(input.csv, &name, input.found.holders.get(&name))?;
            after.push(desired);
        }
        kept.api_services.push(name);
    }
    Ok((after, kept))
}

/// `object`, owned whole and stamped; `None` when its live copy is current.
fn owned<K>(object: &K, kind: &'static str, live: &dyn LiveCopies) -> Result<Option<Desired>, Error>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let (desired, current) = stamp::desired(object, kind, live).map_err(Error::Encode)?;
    Ok((!current).then_some(desired))
}

/// Refuses to take over the APIService `name` unless nobody has it, this CSV
/// or the one it replaces holds it, or its holder is gone or stepping aside
/// (Replacing, Deleting), as OLM decides.
fn adoptable(csv: &ClusterServiceVersion, name: &str, holding: Option<&Holding>) -> Result<(), Error> {
    let conflict = |holder: String| Error::ApiServiceConflict {
        name: name.to_owned(),
        holder,
    };
    match holding {
        None => Ok(()),
        Some(Holding::Unowned) => Err(conflict("it is not owned by a ClusterServiceVersion".to_owned())),
        Some(Holding::Csv {
            namespace,
            name: holder,
            state,
        }) => {
            let held = apiservices::Holder::Csv(namespace.clone(), holder.clone());
            if apiservices::adoptable_at_once(csv, &held) || *state != HolderState::Active {
                return Ok(());
            }
            Err(conflict(format!(
                "ClusterServiceVersion {namespace}/{holder} owns it"
            )))
        }
    }
}

/// The webhook configurations and APIServices carrying the CSV's owner
/// labels in the shared stores whose names are not in `kept`.
fn leftovers(live: &dyn LiveCopies, owner: &Owner, kept: &Kept) -> Vec<Removal> {
    let mut removals = Vec::new();
    let mut add = |resource: ApiResource, keep: &[String], removal: fn(&str) -> Removal| {
        for (_, name) in live.labelled(&resource, &owner.labels) {
            if !keep.contains(&name) {
                removals.push(removal(&name));
            }
        }
    };
    add(
        ApiResource::erase::<ValidatingWebhookConfiguration>(&()),
        &kept.validating,
        |name| Removal::of::<ValidatingWebhookConfiguration>(None, name),
    );
    add(
        ApiResource::erase::<MutatingWebhookConfiguration>(&()),
        &kept.mutating,
        |name| Removal::of::<MutatingWebhookConfiguration>(None, name),
    );
    add(
        ApiResource::erase::<APIService>(&()),
        &kept.api_services,
        |name| Removal::of::<APIService>(None, name),
    );
    removals
}

/// Serves `certificate` from the Deployment `one` names in `children`:
/// mounts the certificate, stamps the new spec hash and adds OLM's RBAC for
/// it. Returns its Service and certificate Secret, or `None` when the
/// Deployment is not there to serve from.
fn serve_deployment(
    owner: &Owner,
    one: &certs::Served,
    certificate: &Issued,
    rotate_at: Timestamp,
    children: &mut Children,
) -> Option<(Service, Secret)> {
    let deployment = children
        .deployments
        .iter_mut()
        .find(|d| d.name_any() == one.deployment)?;
    let spec = deployment.spec.as_mut()?;
    let service_name = certs::service_name(&one.deployment);
    let secret_name = certs::secret_name(&service_name);
    let hash = certs::ca_hash(certificate.ca_pem.as_bytes());

    let mut service = certs::service(&service_name, &one.ports, spec);
    service.metadata = owner.namespaced(&service_name);
    let secret = certificate_secret(owner, &secret_name, certificate, &hash, rotate_at);

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
    Some((service, secret))
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

fn text(data: &BTreeMap<String, k8s_openapi::ByteString>, key: &str) -> String {
    data.get(key)
        .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
