//! The server's TLS: a serving certificate shared by every replica through a
//! Secret (made by the first replica that finds none), and the front proxy's
//! client certificates verified against the request-header CA the API server
//! publishes in `kube-system/extension-apiserver-authentication`.

use std::sync::Arc;

use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, Secret},
};
use kube::{Api, Client, api::PostParams};
use rustls::{
    RootCertStore, ServerConfig,
    crypto::ring::default_provider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};

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
    Issue(#[from] rcgen::Error),
    /// The Secret or ConfigMap holds something unusable.
    #[error("{0}")]
    Invalid(String),
    /// rustls refused the configuration.
    #[error("invalid TLS configuration")]
    Rustls(#[from] rustls::Error),
}

/// A CA and the serving certificate it signed, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingCert {
    /// The CA: the APIService's `caBundle`.
    pub ca_pem: String,
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

/// A new CA and a serving certificate for `hosts`, valid for a year.
pub fn issue(hosts: &[String]) -> Result<ServingCert, TlsError> {
    let now = time::OffsetDateTime::now_utc();
    let (not_before, not_after) = (now - time::Duration::hours(1), now + time::Duration::days(365));
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "olm-rs-packageserver-ca");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(hosts.to_vec())?;
    if let Some(first) = hosts.first() {
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, first.as_str());
    }
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = not_before;
    params.not_after = not_after;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(ServingCert {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn api_error(action: String) -> impl FnOnce(kube::Error) -> TlsError {
    move |source| TlsError::Api { action, source }
}

fn secret_cert(secret: &Secret) -> Option<ServingCert> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
            .filter(|s| !s.is_empty())
    };
    Some(ServingCert {
        ca_pem: text("ca.crt")?,
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
    })
}

/// The serving certificate in Secret `namespace/name`, made and stored first if
/// there is none (when replicas race, the first one stored wins and all use it).
pub async fn serving_cert(
    client: &Client,
    namespace: &str,
    name: &str,
    hosts: &[String],
) -> Result<ServingCert, TlsError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let read = format!("read Secret {namespace}/{name}");
    if let Some(cert) = secrets
        .get_opt(name)
        .await
        .map_err(api_error(read.clone()))?
        .as_ref()
        .and_then(secret_cert)
    {
        return Ok(cert);
    }
    let cert = issue(hosts)?;
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(
            [
                ("ca.crt".to_owned(), bytes(&cert.ca_pem)),
                ("tls.crt".to_owned(), bytes(&cert.cert_pem)),
                ("tls.key".to_owned(), bytes(&cert.key_pem)),
            ]
            .into(),
        ),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(cert),
        Err(kube::Error::Api(status)) if status.code == 409 => secrets
            .get(name)
            .await
            .map_err(api_error(read))
            .and_then(|s| {
                secret_cert(&s).ok_or_else(|| {
                    TlsError::Invalid(format!(
                        "Secret {namespace}/{name} lacks ca.crt, tls.crt or tls.key: delete it to have a new one made"
                    ))
                })
            }),
        Err(e) => Err(api_error(format!("create Secret {namespace}/{name}"))(e)),
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
    let data = config.data.unwrap_or_default();
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

/// The subject common name of a DER certificate (rustls has verified its chain).
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert, _) = tlv(der)?;
    let (_, mut tbs, _) = tlv(cert)?;
    // TBSCertificate: [0] version?, serial, signature, issuer, validity, subject.
    if tbs.first() == Some(&0xa0) {
        tbs = tlv(tbs)?.2;
    }
    for _ in 0..4 {
        tbs = tlv(tbs)?.2;
    }
    let (_, mut subject, _) = tlv(tbs)?;
    while !subject.is_empty() {
        let (_, set, rest) = tlv(subject)?;
        subject = rest;
        let (_, attribute, _) = tlv(set)?;
        let (tag, oid, value) = tlv(attribute)?;
        if tag == 0x06 && oid == [0x55, 0x04, 0x03] {
            let (_, name, _) = tlv(value)?;
            return String::from_utf8(name.to_vec()).ok();
        }
    }
    None
}

/// One DER tag-length-value: the tag, the value, and what follows.
fn tlv(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        rest = &rest[n..];
        len
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_name_is_read_from_a_certificate() {
        let cert = issue(&service_hosts("packageserver", "olm")).unwrap();
        let der = CertificateDer::from_pem_slice(cert.cert_pem.as_bytes()).unwrap();
        assert_eq!(common_name(&der).as_deref(), Some("packageserver.olm.svc"));
        let ca = CertificateDer::from_pem_slice(cert.ca_pem.as_bytes()).unwrap();
        assert_eq!(common_name(&ca).as_deref(), Some("olm-rs-packageserver-ca"));
        let front_proxy = FrontProxy {
            ca_pem: cert.ca_pem.clone(),
            allowed_names: vec![],
        };
        server_config(&cert, &front_proxy).expect("a usable configuration");
    }
}
