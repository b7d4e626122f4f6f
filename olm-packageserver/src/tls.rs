//! The server's TLS: a serving certificate shared by every replica through a
//! Secret (made by the first replica that finds none, renewed by the first
//! that finds it due: [`super::renewal`]), and the front proxy's client
//! certificates verified against the request-header CA the API server
//! publishes in `kube-system/extension-apiserver-authentication`.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, Secret},
};
use kube::{Api, Client, api::PostParams};
use olm_certs::{Authority, Validity, bundle_validities, first_der, validity};
use rustls::{
    RootCertStore, ServerConfig,
    crypto::ring::default_provider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};
use time::OffsetDateTime;

use super::renewal::{self, Renewal};

/// The ConfigMap the API server publishes its client-authentication settings in.
pub const AUTHENTICATION_CONFIGMAP: &str = "extension-apiserver-authentication";
/// Its namespace.
pub const AUTHENTICATION_NAMESPACE: &str = "kube-system";

/// Why the server's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The API server could not be read or written.
    #[error("cannot {action}: check catalog-operator's RBAC (manifests/catalog-operator-rbac.yaml)")]
    Api {
        /// What was being done.
        action: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// A certificate could not be made.
    #[error("cannot make the package server's certificate")]
    Issue(#[from] olm_certs::CertError),
    /// The Secret or ConfigMap holds something unusable.
    #[error("{0}")]
    Invalid(String),
    /// rustls refused the configuration.
    #[error("invalid TLS configuration")]
    Rustls(#[from] rustls::Error),
}

/// The CA bundle and the serving certificate, PEM, as the Secret holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingCert {
    /// The CAs to trust, the current one first: the APIService's `caBundle`.
    pub ca_pem: String,
    /// The current CA's key (`ca.key`); Secrets made before keys were kept
    /// have none, and their next renewal makes a new CA.
    pub ca_key_pem: Option<String>,
    /// The serving certificate.
    pub cert_pem: String,
    /// Its key.
    pub key_pem: String,
}

/// The DNS names the aggregator dials a Service by (it verifies `<svc>.<ns>.svc`).
pub fn service_hosts(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}"),
        service.to_owned(),
        "localhost".to_owned(),
    ]
}

/// The CA's subject name prefix; each CA adds the time it was made, so that
/// two CAs in one bundle never share a subject.
pub const CA_NAME: &str = "olm-rs-packageserver-ca";

/// A new CA (valid [`CA_LIFETIMES`] leaf lifetimes) and a serving certificate
/// for `hosts` valid `lifetime` from `now`; the CA bundle is the new CA and
/// the CAs of `previous` still valid.
pub fn issue(
    hosts: &[String],
    now: OffsetDateTime,
    lifetime: Duration,
    previous: Option<&ServingCert>,
) -> Result<ServingCert, TlsError> {
    let ca_validity = Validity::issued(now, lifetime * renewal::CA_LIFETIMES);
    let ca = Authority::new(&format!("{CA_NAME}@{}", now.unix_timestamp()), ca_validity)?;
    let issued = ca.serving(hosts, Validity::issued(now, lifetime))?;
    let older = previous.map(|p| bundle_validities(&p.ca_pem)).unwrap_or_default();
    Ok(ServingCert {
        ca_pem: renewal::ca_bundle(now, &issued.ca_pem, older),
        ca_key_pem: Some(ca.key_pem().to_owned()),
        cert_pem: issued.cert_pem,
        key_pem: issued.key_pem,
    })
}

/// What `cert` needs at `now` (see [`renewal::decide`]).
pub fn renewal_of(cert: &ServingCert, now: OffsetDateTime, lifetime: Duration) -> Renewal {
    let leaf = first_der(&cert.cert_pem).and_then(|der| validity(&der));
    let ca = cert
        .ca_key_pem
        .as_ref()
        .and(first_der(&cert.ca_pem))
        .and_then(|der| validity(&der));
    renewal::decide(now, leaf, ca, lifetime)
}

/// `cert` renewed as `renewal` says, at `now`: `None` when it needs nothing.
pub fn renew(
    cert: &ServingCert,
    renewal: Renewal,
    hosts: &[String],
    now: OffsetDateTime,
    lifetime: Duration,
) -> Result<Option<ServingCert>, TlsError> {
    match renewal {
        Renewal::Keep { .. } => Ok(None),
        Renewal::CaAndLeaf => issue(hosts, now, lifetime, Some(cert)).map(Some),
        Renewal::Leaf => {
            let key = cert.ca_key_pem.as_deref().unwrap_or_default();
            let ca = Authority::from_pem(&cert.ca_pem, key)?;
            let issued = ca.serving(hosts, Validity::issued(now, lifetime))?;
            let mut cas = bundle_validities(&cert.ca_pem).into_iter();
            let current = cas.next().map(|(pem, _)| pem).unwrap_or_default();
            Ok(Some(ServingCert {
                ca_pem: renewal::ca_bundle(now, &current, cas),
                ca_key_pem: cert.ca_key_pem.clone(),
                cert_pem: issued.cert_pem,
                key_pem: issued.key_pem,
            }))
        }
    }
}

fn api_error(action: String) -> impl FnOnce(kube::Error) -> TlsError {
    move |source| TlsError::Api { action, source }
}

/// The certificate a Secret holds, if complete.
pub fn secret_cert(secret: &Secret) -> Option<ServingCert> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
            .filter(|s| !s.is_empty())
    };
    Some(ServingCert {
        ca_pem: text("ca.crt")?,
        ca_key_pem: text("ca.key"),
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
    })
}

/// Secret `namespace/name` holding `cert`.
fn cert_secret(namespace: &str, name: &str, cert: &ServingCert) -> Secret {
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    let mut data: BTreeMap<String, ByteString> = [
        ("ca.crt".to_owned(), bytes(&cert.ca_pem)),
        ("tls.crt".to_owned(), bytes(&cert.cert_pem)),
        ("tls.key".to_owned(), bytes(&cert.key_pem)),
    ]
    .into();
    if let Some(key) = &cert.ca_key_pem {
        data.insert("ca.key".to_owned(), bytes(key));
    }
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Secret::default()
    }
}

/// The serving certificate in Secret `namespace/name`, made and stored first if
/// there is none, renewed first if due at `now`. When replicas race, the first
/// write wins (creation, or replacement at the version read) and all use it.
pub async fn serving_cert(
    client: &Client,
    namespace: &str,
    name: &str,
    hosts: &[String],
    now: OffsetDateTime,
    lifetime: Duration,
) -> Result<ServingCert, TlsError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let read = format!("read Secret {namespace}/{name}");
    let existing = secrets.get_opt(name).await.map_err(api_error(read))?;
    let Some(cert) = existing.as_ref().and_then(secret_cert) else {
        let new = issue(hosts, now, lifetime, None)?;
        return store(&secrets, namespace, name, existing, new).await;
    };
    let Some(renewed) = renew(&cert, renewal_of(&cert, now, lifetime), hosts, now, lifetime)? else {
        return Ok(cert);
    };
    tracing::info!(secret = %format!("{namespace}/{name}"), "renewing the package server's certificate");
    store(&secrets, namespace, name, existing, renewed).await
}

/// Writes `cert` into the Secret (`existing`: as read, if any); when another
/// replica wrote first, returns what it wrote.
async fn store(
    secrets: &Api<Secret>,
    namespace: &str,
    name: &str,
    existing: Option<Secret>,
    cert: ServingCert,
) -> Result<ServingCert, TlsError> {
    let mut secret = cert_secret(namespace, name, &cert);
    let written = match existing {
        None => secrets.create(&PostParams::default(), &secret).await,
        Some(old) => {
            secret.metadata.resource_version = old.metadata.resource_version;
            secret.metadata.labels = old.metadata.labels;
            secret.metadata.annotations = old.metadata.annotations;
            secret.type_ = old.type_;
            secrets.replace(name, &PostParams::default(), &secret).await
        }
    };
    match written {
        Ok(_) => Ok(cert),
        Err(kube::Error::Api(status)) if status.code == 409 => secrets
            .get(name)
            .await
            .map_err(api_error(format!("read Secret {namespace}/{name}")))
            .and_then(|s| {
                secret_cert(&s).ok_or_else(|| {
                    TlsError::Invalid(format!(
                        "Secret {namespace}/{name} lacks ca.crt, tls.crt or tls.key: delete it to have a new one made"
                    ))
                })
            }),
        Err(e) => Err(api_error(format!("write Secret {namespace}/{name}"))(e)),
    }
}

/// Who may call: the request-header CA and the names its certificates may carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontProxy {
    /// `requestheader-client-ca-file`, PEM.
    pub ca_pem: String,
    /// `requestheader-allowed-names`; empty: any name the CA signed.
    pub allowed_names: Vec<String>,
}

/// Reads the front proxy's settings from `kube-system/extension-apiserver-authentication`.
pub async fn front_proxy(client: &Client) -> Result<FrontProxy, TlsError> {
    let what = format!("{AUTHENTICATION_NAMESPACE}/{AUTHENTICATION_CONFIGMAP}");
    let config: ConfigMap = Api::namespaced(client.clone(), AUTHENTICATION_NAMESPACE)
        .get(AUTHENTICATION_CONFIGMAP)
        .await
        .map_err(api_error(format!("read ConfigMap {what}")))?;
    front_proxy_of(&config)
}

/// The front proxy's settings in the authentication ConfigMap.
pub fn front_proxy_of(config: &ConfigMap) -> Result<FrontProxy, TlsError> {
    let what = format!("{AUTHENTICATION_NAMESPACE}/{AUTHENTICATION_CONFIGMAP}");
    let empty = BTreeMap::new();
    let data = config.data.as_ref().unwrap_or(&empty);
    let ca_pem = data
        .get("requestheader-client-ca-file")
        .filter(|s| !s.is_empty())
        .cloned()
        .ok_or_else(|| {
            TlsError::Invalid(format!(
                "ConfigMap {what} has no requestheader-client-ca-file: start kube-apiserver with --requestheader-client-ca-file so that aggregated APIs can verify it"
            ))
        })?;
    let allowed_names = data
        .get("requestheader-allowed-names")
        .and_then(|s| serde_json::from_str::<Vec<String>>(s).ok())
        .unwrap_or_default();
    Ok(FrontProxy {
        ca_pem,
        allowed_names,
    })
}

/// The rustls server configuration: `cert` served, client certificates
/// verified against the front proxy's CA when presented (requests without one
/// are answered 401 by the server, health checks aside).
pub fn server_config(cert: &ServingCert, front_proxy: &FrontProxy) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(default_provider());
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(front_proxy.ca_pem.as_bytes()) {
        let ca = ca.map_err(|e| TlsError::Invalid(format!("the request-header CA is not PEM: {e}")))?;
        roots.add(ca)?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Invalid(format!("cannot verify front-proxy certificates: {e}")))?;
    let chain = CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Invalid(format!("the serving certificate is not PEM: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes())
        .map_err(|e| TlsError::Invalid(format!("the serving key is not PEM: {e}")))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use rustls::{
        client::{WebPkiServerVerifier, danger::ServerCertVerifier},
        pki_types::{ServerName, UnixTime},
    };

    use olm_certs::common_name;

    use super::*;

    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

    fn at(seconds: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000 + seconds).unwrap()
    }

    fn hosts() -> Vec<String> {
        service_hosts("packageserver", "olm")
    }

    /// Whether `cert`'s serving certificate is trusted by `bundle` at `now`.
    fn trusted(bundle: &str, cert: &ServingCert, now: OffsetDateTime) -> bool {
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::new(default_provider()))
                .build()
                .unwrap();
        let leaf = first_der(&cert.cert_pem).unwrap();
        let seconds = u64::try_from(now.unix_timestamp()).unwrap();
        verifier
            .verify_server_cert(
                &leaf,
                &[],
                &ServerName::try_from("packageserver.olm.svc").unwrap(),
                &[],
                UnixTime::since_unix_epoch(Duration::from_secs(seconds)),
            )
            .is_ok()
    }

    #[test]
    fn the_common_name_is_read_from_a_certificate() {
        let cert = issue(&hosts(), at(0), YEAR, None).unwrap();
        let der = CertificateDer::from_pem_slice(cert.cert_pem.as_bytes()).unwrap();
        assert_eq!(common_name(&der).as_deref(), Some("packageserver.olm.svc"));
        let ca = CertificateDer::from_pem_slice(cert.ca_pem.as_bytes()).unwrap();
        assert_eq!(
            common_name(&ca),
            Some(format!("{CA_NAME}@{}", at(0).unix_timestamp()))
        );
        let front_proxy = FrontProxy {
            ca_pem: cert.ca_pem.clone(),
            allowed_names: vec![],
        };
        server_config(&cert, &front_proxy).expect("a usable configuration");
    }

    #[test]
    fn the_validity_is_read_from_a_certificate() {
        let cert = issue(&hosts(), at(0), YEAR, None).unwrap();
        let leaf = first_der(&cert.cert_pem).unwrap();
        assert_eq!(validity(&leaf), Some(Validity::issued(at(0), YEAR)));
        let ca = first_der(&cert.ca_pem).unwrap();
        assert_eq!(validity(&ca), Some(Validity::issued(at(0), YEAR * 10)));
        // A CA that ends after 2049 carries a GeneralizedTime.
        let late = at(600_000_000);
        let cert = issue(&hosts(), late, YEAR, None).unwrap();
        let ca = first_der(&cert.ca_pem).unwrap();
        assert_eq!(validity(&ca), Some(Validity::issued(late, YEAR * 10)));
        assert_eq!(
            renewal_of(&cert, late, YEAR),
            Renewal::Keep {
                until: Validity::issued(late, YEAR).renew_at()
            }
        );
    }

    #[test]
    fn a_renewal_signs_a_new_leaf_with_the_kept_ca() {
        let lifetime = Duration::from_secs(300);
        let cert = issue(&hosts(), at(0), lifetime, None).unwrap();
        assert_eq!(renewal_of(&cert, at(250), lifetime), Renewal::Leaf);
        let renewed = renew(&cert, Renewal::Leaf, &hosts(), at(250), lifetime)
            .unwrap()
            .expect("a new leaf");
        assert_eq!(renewed.ca_pem, cert.ca_pem);
        assert_eq!(renewed.ca_key_pem, cert.ca_key_pem);
        assert_ne!(renewed.cert_pem, cert.cert_pem);
        assert!(trusted(&cert.ca_pem, &renewed, at(400)));
        assert!(!trusted(&cert.ca_pem, &cert, at(400)), "the old leaf has expired");
        assert_eq!(
            renew(&cert, Renewal::Keep { until: at(1) }, &hosts(), at(0), lifetime).unwrap(),
            None
        );
    }

    #[test]
    fn a_secret_without_a_ca_key_gets_a_new_ca_and_both_are_trusted_meanwhile() {
        let lifetime = Duration::from_secs(300);
        let mut old = issue(&hosts(), at(0), lifetime, None).unwrap();
        old.ca_key_pem = None;
        let due = renewal_of(&old, at(250), lifetime);
        assert_eq!(due, Renewal::CaAndLeaf);
        let renewed = renew(&old, due, &hosts(), at(250), lifetime).unwrap().unwrap();
        assert_eq!(
            bundle_validities(&renewed.ca_pem).len(),
            2,
            "the new CA and the old one"
        );
        assert!(renewed.ca_pem.ends_with(&old.ca_pem), "{}", renewed.ca_pem);
        assert!(
            trusted(&renewed.ca_pem, &old, at(260)),
            "replicas not yet switched"
        );
        assert!(trusted(&renewed.ca_pem, &renewed, at(260)));
        // Once the old CA has expired (ten leaf lifetimes), it leaves the bundle; the new CA stays.
        let next = renew(&renewed, Renewal::Leaf, &hosts(), at(3100), lifetime)
            .unwrap()
            .unwrap();
        assert_eq!(bundle_validities(&next.ca_pem).len(), 1);
        assert!(renewed.ca_pem.starts_with(&next.ca_pem));
        assert!(trusted(&next.ca_pem, &next, at(3110)));
    }

    #[test]
    fn the_front_proxy_is_read_from_the_configmap() {
        let config: ConfigMap = serde_json::from_value(serde_json::json!({
            "data": {
                "requestheader-client-ca-file": "PEM",
                "requestheader-allowed-names": "[\"front-proxy-client\"]",
            }
        }))
        .unwrap();
        assert_eq!(
            front_proxy_of(&config).unwrap(),
            FrontProxy {
                ca_pem: "PEM".into(),
                allowed_names: vec!["front-proxy-client".into()],
            }
        );
        assert!(front_proxy_of(&ConfigMap::default()).is_err());
    }
}
