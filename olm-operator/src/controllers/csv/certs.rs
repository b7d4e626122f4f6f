//! Certificates for the Deployments that serve a webhook or an owned
//! APIService, as OLM makes them: per such Deployment a Service
//! `<deployment>-service`, a serving certificate for the Service's DNS names
//! signed by a CA made for the install, the Secret `<service>-cert` that holds
//! both (`tls.crt`, `tls.key`, and the CA in `olmCAKey`), and the Secret
//! mounted at the paths operators expect (`/apiserver.local.config/certificates`
//! for API servers, `/tmp/k8s-webhook-server/serving-certs` for
//! controller-runtime webhooks). The pod template carries the CA's hash in the
//! `olmcahash` annotation, so that a new CA rolls the Deployment.
//!
//! A certificate is kept while it verifies for every DNS name of its Service,
//! chains to the stored CA, and stays valid for `min_fresh` more; otherwise a
//! new CA and certificates are issued (OLM: valid for two years, renewed a day
//! before they expire). Everything here is pure: issuing and checking take the
//! time as an argument.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    ByteString,
    api::{
        apps::v1::DeploymentSpec,
        core::v1::{KeyToPath, SecretVolumeSource, Service, ServicePort, ServiceSpec, Volume, VolumeMount},
    },
    apimachinery::pkg::util::intstr::IntOrString,
    jiff::Timestamp,
};
use olm_api::v1alpha1::ClusterServiceVersion;
use olm_certs::Validity;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject};

/// The Secret key that holds the CA certificate (OLM's `olmCAKey`).
pub const CA_KEY: &str = "olmCAKey";
/// The Secret key of the serving certificate.
pub const CERT_KEY: &str = "tls.crt";
/// The Secret key of the serving certificate's private key.
pub const PRIVATE_KEY_KEY: &str = "tls.key";
/// The pod template annotation (and Secret annotation) with the CA's hash.
pub const CA_HASH_ANNOTATION: &str = "olmcahash";
/// The Secret annotation with the time its certificate is due for renewal
/// (RFC 3339), so that renewal does not depend on the CSV's status.
pub const ROTATE_AT_ANNOTATION: &str = "olm-rs.dev/certs-rotate-at";
/// The label OLM puts on the objects it manages for certificates.
pub const MANAGED_LABEL: &str = "olm.managed";
/// The volume of the certificate for API servers.
pub const APISERVICE_VOLUME: &str = "apiservice-cert";
/// Where API servers find their certificate.
pub const APISERVICE_MOUNT_PATH: &str = "/apiserver.local.config/certificates";
/// The volume of the certificate for webhook servers.
pub const WEBHOOK_VOLUME: &str = "webhook-cert";
/// Where controller-runtime webhook servers find their certificate.
pub const WEBHOOK_MOUNT_PATH: &str = "/tmp/k8s-webhook-server/serving-certs";
/// The port a webhook or APIService is served on when the CSV names none.
pub const DEFAULT_PORT: i32 = 443;

/// How long certificates live, and how long before expiry they are renewed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// How long a new CA and certificate are valid (OLM: 730 days).
    pub valid_for: Duration,
    /// How long before expiry they are renewed (OLM: one day).
    pub min_fresh: Duration,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Self {
            valid_for: Duration::from_secs(730 * 24 * 3600),
            min_fresh: Duration::from_secs(24 * 3600),
        }
    }
}

impl Lifetimes {
    /// Lifetimes from seconds; a `min_fresh` not shorter than `valid_for`
    /// (which would renew on every reconcile) becomes half of `valid_for`.
    pub fn from_seconds(valid_for: u64, min_fresh: u64) -> Self {
        let valid_for = valid_for.max(2);
        let min_fresh = if min_fresh >= valid_for {
            valid_for / 2
        } else {
            min_fresh
        };
        Self {
            valid_for: Duration::from_secs(valid_for),
            min_fresh: Duration::from_secs(min_fresh),
        }
    }

    /// When certificates issued at `issued` are due for renewal.
    pub fn rotate_at(&self, issued: Timestamp) -> Timestamp {
        let due = self.valid_for.saturating_sub(self.min_fresh);
        issued.checked_add(due).unwrap_or(Timestamp::MAX)
    }
}

/// Why certificates could not be made.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct IssueError(#[from] olm_certs::CertError);

pub use olm_certs::Issued;

/// The common name of the CA made for an install's certificates, as OLM names it.
pub const CA_NAME: &str = "olm-selfsigned-ca";

/// The CA of one install's certificates, made anew each time they are issued;
/// its certificates are valid as long as it. Issued by [`olm_certs`], the
/// issuer every binary shares.
pub struct Authority {
    ca: olm_certs::Authority,
    validity: Validity,
}

impl Authority {
    /// Makes a CA valid from `now` for `valid_for`.
    pub fn new(now: Timestamp, valid_for: Duration) -> Result<Self, IssueError> {
        let start = time::OffsetDateTime::from_unix_timestamp(now.as_second())
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        let validity = Validity::starting(start, valid_for);
        Ok(Self {
            ca: olm_certs::Authority::new(CA_NAME, validity)?,
            validity,
        })
    }

    /// A serving certificate for `hosts`, signed by this CA and valid as long as it.
    pub fn serving(&self, hosts: &[String]) -> Result<Issued, IssueError> {
        Ok(self.ca.serving(hosts, self.validity)?)
    }
}

/// Why a stored certificate does not verify.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Unusable {
    /// A key of the Secret is missing.
    #[error("the secret has no {0}")]
    Missing(&'static str),
    /// A certificate is not PEM.
    #[error("{0} is not a PEM certificate")]
    Malformed(&'static str),
    /// The CA certificate cannot be a trust anchor.
    #[error("the CA certificate is not usable: {0}")]
    BadCa(String),
    /// The certificate does not verify for a host at a time.
    #[error("the certificate does not verify for {host} at {at}: {reason}")]
    DoesNotVerify {
        /// The host.
        host: String,
        /// The time.
        at: Timestamp,
        /// What webpki said.
        reason: String,
    },
}

/// Checks that the serving certificate in `data` chains to the CA in `data`,
/// is valid for every host, and is valid now and still `min_fresh` later.
pub fn check_fresh(
    data: &BTreeMap<String, ByteString>,
    hosts: &[String],
    now: Timestamp,
    min_fresh: Duration,
) -> Result<(), Unusable> {
    let ca = data.get(CA_KEY).ok_or(Unusable::Missing(CA_KEY))?;
    let cert = data.get(CERT_KEY).ok_or(Unusable::Missing(CERT_KEY))?;
    if !data.contains_key(PRIVATE_KEY_KEY) {
        return Err(Unusable::Missing(PRIVATE_KEY_KEY));
    }
    let later = now.checked_add(min_fresh).unwrap_or(Timestamp::MAX);
    for at in [now, later] {
        verify(&ca.0, &cert.0, hosts, at)?;
    }
    Ok(())
}

/// Verifies the PEM certificate `cert_pem` against the PEM CA `ca_pem` for
/// every host in `hosts` at time `at`, as a TLS client would.
pub fn verify(ca_pem: &[u8], cert_pem: &[u8], hosts: &[String], at: Timestamp) -> Result<(), Unusable> {
    let ca = CertificateDer::from_pem_slice(ca_pem).map_err(|_| Unusable::Malformed(CA_KEY))?;
    let cert = CertificateDer::from_pem_slice(cert_pem).map_err(|_| Unusable::Malformed(CERT_KEY))?;
    let anchor = webpki::anchor_from_trusted_cert(&ca).map_err(|e| Unusable::BadCa(e.to_string()))?;
    let end_entity = webpki::EndEntityCert::try_from(&cert).map_err(|e| Unusable::DoesNotVerify {
        host: String::new(),
        at,
        reason: e.to_string(),
    })?;
    let time = UnixTime::since_unix_epoch(Duration::from_secs(at.as_second().max(0).unsigned_abs()));
    let fail = |host: &str, e: webpki::Error| Unusable::DoesNotVerify {
        host: host.to_owned(),
        at,
        reason: e.to_string(),
    };
    end_entity
        .verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &[anchor],
            &[],
            time,
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .map_err(|e| fail("", e))?;
    for host in hosts {
        let name = ServerName::try_from(host.as_str()).map_err(|e| Unusable::DoesNotVerify {
            host: host.clone(),
            at,
            reason: e.to_string(),
        })?;
        end_entity
            .verify_is_valid_for_subject_name(&name)
            .map_err(|e| fail(host, e))?;
    }
    Ok(())
}

/// The hash of a CA certificate, as the `olmcahash` annotation carries it:
/// the hex SHA-256 of its PEM.
pub fn ca_hash(ca_pem: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, ca_pem);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

// === Names ===

/// The Service of a Deployment that serves webhooks or APIServices (dots,
/// which a Service name cannot have, become dashes).
pub fn service_name(deployment: &str) -> String {
    format!("{}-service", deployment.replace('.', "-"))
}

/// The Secret with the certificate of `service`.
pub fn secret_name(service: &str) -> String {
    format!("{service}-cert")
}

/// The DNS names the certificate of `service` in `namespace` is valid for.
pub fn hosts(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

// === What needs certificates ===

/// A Deployment that serves webhooks or owned APIServices, and its ports.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    /// The Deployment's name.
    pub deployment: String,
    /// The Service ports, one per distinct port of its webhooks and APIServices.
    pub ports: Vec<ServicePort>,
}

/// The Deployments of `csv` that serve webhooks or owned APIServices, in the
/// order of the install strategy's names (sorted).
pub fn served(csv: &ClusterServiceVersion) -> Vec<Served> {
    let mut by_deployment: BTreeMap<String, Vec<ServicePort>> = BTreeMap::new();
    let mut add = |deployment: Option<&String>, port: Option<i32>, target: Option<&IntOrString>| {
        let Some(deployment) = deployment.filter(|d| !d.is_empty()) else {
            return;
        };
        let port = port.filter(|p| *p > 0).unwrap_or(DEFAULT_PORT);
        let wanted = ServicePort {
            name: Some(port.to_string()),
            port,
            target_port: Some(target.cloned().unwrap_or(IntOrString::Int(port))),
            ..ServicePort::default()
        };
        let ports = by_deployment.entry(deployment.clone()).or_default();
        if !ports.contains(&wanted) {
            ports.push(wanted);
        }
    };
    for desc in csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.as_ref())
        .into_iter()
        .flatten()
    {
        add(desc.deployment_name.as_ref(), desc.container_port, None);
    }
    for desc in csv.spec.webhook_definitions.iter().flatten() {
        add(
            desc.deployment_name.as_ref(),
            desc.container_port,
            desc.target_port.as_ref(),
        );
    }
    for desc in csv.spec.conversion_webhook_definitions.iter().flatten() {
        if desc.url.is_none() {
            add(
                Some(&desc.deployment_name),
                desc.container_port,
                desc.target_port.as_ref(),
            );
        }
    }
    by_deployment
        .into_iter()
        .map(|(deployment, ports)| Served { deployment, ports })
        .collect()
}

/// The Service of a served Deployment: its ports, selecting its pods.
pub fn service(name: &str, ports: &[ServicePort], spec: &DeploymentSpec) -> Service {
    Service {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(ports.to_vec()),
            selector: spec.selector.match_labels.clone(),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The data of the certificate Secret.
pub fn secret_data(issued: &Issued) -> BTreeMap<String, ByteString> {
    BTreeMap::from([
        (
            CERT_KEY.to_owned(),
            ByteString(issued.cert_pem.clone().into_bytes()),
        ),
        (
            PRIVATE_KEY_KEY.to_owned(),
            ByteString(issued.key_pem.clone().into_bytes()),
        ),
        (CA_KEY.to_owned(), ByteString(issued.ca_pem.clone().into_bytes())),
    ])
}

/// Mounts the certificate Secret into every container of `spec` at OLM's two
/// paths, names the `default` service account when none is named, and marks
/// the pod template with the CA's hash. A volume of the same name is
/// replaced; a container's mount at the same path is replaced.
pub fn mount(spec: &mut DeploymentSpec, secret: &str, ca_hash: &str) {
    let template = &mut spec.template;
    template
        .metadata
        .get_or_insert_with(Default::default)
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(CA_HASH_ANNOTATION.to_owned(), ca_hash.to_owned());
    let Some(pod) = template.spec.as_mut() else {
        return;
    };
    if pod.service_account_name.as_deref().is_none_or(str::is_empty) {
        pod.service_account_name = Some("default".to_owned());
    }
    let mounts = [
        (
            APISERVICE_VOLUME,
            APISERVICE_MOUNT_PATH,
            "apiserver.crt",
            "apiserver.key",
        ),
        (WEBHOOK_VOLUME, WEBHOOK_MOUNT_PATH, CERT_KEY, PRIVATE_KEY_KEY),
    ];
    for (volume_name, path, cert_file, key_file) in mounts {
        let volume = Volume {
            name: volume_name.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_owned()),
                items: Some(vec![
                    KeyToPath {
                        key: CERT_KEY.to_owned(),
                        path: cert_file.to_owned(),
                        mode: None,
                    },
                    KeyToPath {
                        key: PRIVATE_KEY_KEY.to_owned(),
                        path: key_file.to_owned(),
                        mode: None,
                    },
                ]),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        };
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        match volumes.iter_mut().find(|v| v.name == volume_name) {
            Some(existing) => *existing = volume,
            None => volumes.push(volume),
        }
        let wanted = VolumeMount {
            name: volume_name.to_owned(),
            mount_path: path.to_owned(),
            ..VolumeMount::default()
        };
        for container in &mut pod.containers {
            let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
            if mounts.iter().any(|m| m.name == volume_name) {
                continue;
            }
            match mounts.iter_mut().find(|m| m.mount_path == path) {
                Some(existing) => *existing = wanted.clone(),
                None => mounts.push(wanted.clone()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::{
        apps::v1::DeploymentSpec,
        core::v1::{Container, PodSpec, PodTemplateSpec},
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).expect("a valid time")
    }

    fn issue(now: Timestamp, lifetimes: Lifetimes, hosts: &[String]) -> Issued {
        Authority::new(now, lifetimes.valid_for)
            .expect("a CA")
            .serving(hosts)
            .expect("a certificate")
    }

    #[test]
    fn an_issued_certificate_verifies_for_every_service_name_until_it_is_due() {
        let lifetimes = Lifetimes::from_seconds(3600, 600);
        let hosts = hosts("demo-service", "ops");
        let issued = issue(at(0), lifetimes, &hosts);
        let data = secret_data(&issued);

        assert_eq!(check_fresh(&data, &hosts, at(0), lifetimes.min_fresh), Ok(()));
        assert_eq!(check_fresh(&data, &hosts, at(2999), lifetimes.min_fresh), Ok(()));
        assert!(
            check_fresh(&data, &hosts, at(3001), lifetimes.min_fresh).is_err(),
            "within min_fresh of expiry it is due"
        );
        assert_eq!(lifetimes.rotate_at(at(0)), at(3000));
        assert!(
            check_fresh(&data, &hosts, at(-10), lifetimes.min_fresh).is_err(),
            "not valid before it was issued"
        );
    }

    #[test]
    fn a_certificate_for_other_names_or_from_another_ca_does_not_verify() {
        let lifetimes = Lifetimes::default();
        let hosts = hosts("demo-service", "ops");
        let issued = issue(at(0), lifetimes, &hosts);

        let elsewhere = super::hosts("demo-service", "other");
        let error = check_fresh(&secret_data(&issued), &elsewhere, at(1), lifetimes.min_fresh).unwrap_err();
        assert!(
            matches!(&error, Unusable::DoesNotVerify { host, .. } if host == "demo-service.other"),
            "{error}"
        );

        let stranger = issue(at(0), lifetimes, &hosts);
        let mut mixed = secret_data(&issued);
        mixed.insert(CA_KEY.to_owned(), ByteString(stranger.ca_pem.into_bytes()));
        assert!(check_fresh(&mixed, &hosts, at(1), lifetimes.min_fresh).is_err());

        let mut missing = secret_data(&issued);
        missing.remove(CA_KEY);
        assert_eq!(
            check_fresh(&missing, &hosts, at(1), lifetimes.min_fresh),
            Err(Unusable::Missing(CA_KEY))
        );
        let mut garbage = secret_data(&issued);
        garbage.insert(CERT_KEY.to_owned(), ByteString(b"not a certificate".to_vec()));
        assert!(check_fresh(&garbage, &hosts, at(1), lifetimes.min_fresh).is_err());
    }

    #[test]
    fn lifetimes_never_renew_on_every_reconcile() {
        let lifetimes = Lifetimes::from_seconds(60, 600);
        assert_eq!(lifetimes.valid_for, Duration::from_secs(60));
        assert_eq!(lifetimes.min_fresh, Duration::from_secs(30));
        let default = Lifetimes::default();
        assert_eq!(default.valid_for, Duration::from_secs(730 * 86400));
        assert_eq!(default.min_fresh, Duration::from_secs(86400));
    }

    #[test]
    fn names_follow_olm() {
        assert_eq!(
            service_name("cert-manager-webhook"),
            "cert-manager-webhook-service"
        );
        assert_eq!(service_name("a.b"), "a-b-service");
        assert_eq!(secret_name("demo-service"), "demo-service-cert");
        assert_eq!(
            hosts("demo-service", "ops"),
            [
                "demo-service.ops",
                "demo-service.ops.svc",
                "demo-service.ops.svc.cluster.local"
            ]
        );
        assert_eq!(ca_hash(b"abc").len(), 64);
        assert_eq!(
            ca_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    fn deployment_spec() -> DeploymentSpec {
        DeploymentSpec {
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_owned(), "demo".to_owned())])),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers: vec![
                        Container {
                            name: "manager".to_owned(),
                            volume_mounts: Some(vec![VolumeMount {
                                name: "old-certs".to_owned(),
                                mount_path: WEBHOOK_MOUNT_PATH.to_owned(),
                                ..VolumeMount::default()
                            }]),
                            ..Container::default()
                        },
                        Container {
                            name: "proxy".to_owned(),
                            ..Container::default()
                        },
                    ],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }
    }

    #[test]
    fn the_secret_is_mounted_at_olms_paths_in_every_container() {
        let mut spec = deployment_spec();
        mount(&mut spec, "demo-service-cert", "abc");
        mount(&mut spec, "demo-service-cert", "def");
        let pod = spec.template.spec.as_ref().expect("a pod");
        assert_eq!(pod.service_account_name.as_deref(), Some("default"));
        let volumes: Vec<_> = pod.volumes.iter().flatten().map(|v| v.name.as_str()).collect();
        assert_eq!(volumes, [APISERVICE_VOLUME, WEBHOOK_VOLUME], "once each");
        for volume in pod.volumes.iter().flatten() {
            let secret = volume.secret.as_ref().expect("a secret volume");
            assert_eq!(secret.secret_name.as_deref(), Some("demo-service-cert"));
        }
        for container in &pod.containers {
            let mounts: Vec<_> = container
                .volume_mounts
                .iter()
                .flatten()
                .map(|m| (m.name.as_str(), m.mount_path.as_str()))
                .collect();
            assert!(
                mounts.contains(&(APISERVICE_VOLUME, APISERVICE_MOUNT_PATH)),
                "{mounts:?}"
            );
            assert!(
                mounts.contains(&(WEBHOOK_VOLUME, WEBHOOK_MOUNT_PATH)),
                "{mounts:?}"
            );
            assert!(
                !mounts.iter().any(|(name, _)| *name == "old-certs"),
                "a mount at the same path is replaced: {mounts:?}"
            );
        }
        let annotations = spec
            .template
            .metadata
            .and_then(|m| m.annotations)
            .unwrap_or_default();
        assert_eq!(
            annotations.get(CA_HASH_ANNOTATION).map(String::as_str),
            Some("def")
        );
    }

    #[test]
    fn the_service_selects_the_deployments_pods_on_the_declared_ports() {
        let csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "demo.v1.0.0", "namespace": "ops"},
            "spec": {
                "displayName": "demo",
                "install": {"strategy": "deployment"},
                "webhookdefinitions": [
                    {"generateName": "vdemo.example.com", "type": "ValidatingAdmissionWebhook",
                     "deploymentName": "demo", "containerPort": 443, "targetPort": 9443,
                     "sideEffects": "None", "admissionReviewVersions": ["v1"]},
                    {"generateName": "mdemo.example.com", "type": "MutatingAdmissionWebhook",
                     "deploymentName": "demo", "containerPort": 443, "targetPort": 9443,
                     "sideEffects": "None", "admissionReviewVersions": ["v1"]}
                ],
                "apiservicedefinitions": {"owned": [
                    {"name": "widgets", "group": "example.com", "version": "v1", "kind": "Widget",
                     "deploymentName": "api"}
                ]}
            }
        }))
        .expect("a CSV");
        let served = served(&csv);
        assert_eq!(served.len(), 2);
        assert_eq!(served[0].deployment, "api");
        assert_eq!(served[0].ports[0].port, 443);
        assert_eq!(served[0].ports[0].target_port, Some(IntOrString::Int(443)));
        assert_eq!(served[1].deployment, "demo");
        assert_eq!(served[1].ports.len(), 1, "one port for both webhooks");
        assert_eq!(served[1].ports[0].target_port, Some(IntOrString::Int(9443)));

        let service = service("demo-service", &served[1].ports, &deployment_spec());
        let spec = service.spec.expect("a spec");
        assert_eq!(
            spec.selector,
            Some(BTreeMap::from([("app".to_owned(), "demo".to_owned())]))
        );
    }
}
