//! The one certificate issuer of olm-rs. Pure: the time comes in as an
//! argument, certificates (PEM) come out.
//!
//! - [`Authority`]: a CA, new ([`Authority::new`]) or read back from the PEM
//!   certificate and key a Secret keeps ([`Authority::from_pem`]), that signs
//!   serving certificates ([`Authority::serving`]). olm-operator issues one per
//!   install for the webhooks and APIServices of a CSV; catalog-operator one
//!   for the PackageManifest API server.
//! - [`Validity`]: when a certificate is valid, and when it is due for renewal.
//! - [`der`]: what is read back from a certificate: its validity, its subject's
//!   common name, each certificate of a PEM bundle.

pub mod der;

use std::time::Duration;

use time::OffsetDateTime;

pub use der::{bundle_validities, common_name, first_der, to_pem, validity};

/// The organization every certificate olm-rs issues names.
pub const ORGANIZATION: &str = "olm-rs";

/// Why a certificate could not be made or read back.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen could not make or sign it.
    #[error("cannot issue a certificate: {0}")]
    Issue(#[from] rcgen::Error),
    /// A kept CA certificate cannot be read (no PEM certificate, or no validity).
    #[error("the kept CA certificate cannot be read: {0}; delete its Secret to have a new CA made")]
    Unreadable(&'static str),
}

/// When a certificate is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// `notBefore`.
    pub not_before: OffsetDateTime,
    /// `notAfter`.
    pub not_after: OffsetDateTime,
}

impl Validity {
    /// Valid from `now` for `lifetime`, exactly.
    pub fn starting(now: OffsetDateTime, lifetime: Duration) -> Self {
        let lifetime = time::Duration::try_from(lifetime).unwrap_or(time::Duration::MAX);
        Validity {
            not_before: now,
            not_after: now.checked_add(lifetime).unwrap_or(now),
        }
    }

    /// Valid for `lifetime` from `now`, and from [`backdate`] before it (for
    /// clocks a little behind the issuer's).
    pub fn issued(now: OffsetDateTime, lifetime: Duration) -> Self {
        Validity {
            not_before: now - backdate(lifetime),
            ..Validity::starting(now, lifetime)
        }
    }

    /// When it is renewed: at two thirds of its lifetime.
    pub fn renew_at(&self) -> OffsetDateTime {
        self.not_before + (self.not_after - self.not_before) * 2 / 3
    }

    /// Whether it is still valid at `now`.
    pub fn valid_at(&self, now: OffsetDateTime) -> bool {
        self.not_before <= now && now < self.not_after
    }
}

/// How far before the clock a new certificate starts being valid (clock skew
/// between the replicas and the API server): an hour, or a tenth of a short
/// lifetime.
pub fn backdate(lifetime: Duration) -> Duration {
    (lifetime / 10).min(Duration::from_secs(3600))
}

/// A serving certificate and the CA that signed it, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// The CA certificate: the `caBundle` of webhooks and APIServices.
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

/// A CA that signs serving certificates (ECDSA P-256 keys).
pub struct Authority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
    key_pem: String,
}

impl Authority {
    /// A new CA named `common_name`, valid for `validity`.
    pub fn new(common_name: &str, validity: Validity) -> Result<Self, CertError> {
        let key = rcgen::KeyPair::generate()?;
        let params = ca_params(common_name, validity)?;
        let pem = params.self_signed(&key)?.pem();
        Ok(Authority {
            key_pem: key.serialize_pem(),
            issuer: rcgen::Issuer::new(params, key),
            pem,
        })
    }

    /// The CA kept as `cert_pem` (its first certificate) and `key_pem`, to sign more.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, CertError> {
        let der = first_der(cert_pem).ok_or(CertError::Unreadable("no PEM certificate"))?;
        let name = common_name(&der).ok_or(CertError::Unreadable("no subject common name"))?;
        let validity = validity(&der).ok_or(CertError::Unreadable("no validity"))?;
        let key = rcgen::KeyPair::from_pem(key_pem)?;
        Ok(Authority {
            issuer: rcgen::Issuer::new(ca_params(&name, validity)?, key),
            pem: to_pem(&der),
            key_pem: key_pem.to_owned(),
        })
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// The CA's private key, PEM, for a Secret that keeps the CA.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// A serving certificate for `hosts` (the first is its common name), valid
    /// for `validity`, signed by this CA.
    pub fn serving(&self, hosts: &[String], validity: Validity) -> Result<Issued, CertError> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(hosts.to_vec())?;
        if let Some(first) = hosts.first() {
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, first.as_str());
        }
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, ORGANIZATION);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::DigitalSignature,
            rcgen::KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = validity.not_before;
        params.not_after = validity.not_after;
        let certificate = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            ca_pem: self.pem.clone(),
            cert_pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// What a CA certificate named `common_name` and valid for `validity` says.
fn ca_params(common_name: &str, validity: Validity) -> Result<rcgen::CertificateParams, CertError> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, ORGANIZATION);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = validity.not_before;
    params.not_after = validity.not_after;
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    fn at(seconds: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000 + seconds).unwrap()
    }

    fn hosts() -> Vec<String> {
        vec!["api.ops.svc".to_owned(), "api.ops".to_owned()]
    }

    #[test]
    fn a_serving_certificate_names_its_first_host_and_carries_its_validity() {
        let ca = Authority::new("test-ca", Validity::starting(at(0), 10 * DAY)).unwrap();
        let issued = ca.serving(&hosts(), Validity::issued(at(0), DAY)).unwrap();
        assert_eq!(issued.ca_pem, ca.pem());
        let leaf = first_der(&issued.cert_pem).unwrap();
        assert_eq!(common_name(&leaf).as_deref(), Some("api.ops.svc"));
        assert_eq!(validity(&leaf), Some(Validity::issued(at(0), DAY)));
        let root = first_der(ca.pem()).unwrap();
        assert_eq!(common_name(&root).as_deref(), Some("test-ca"));
        assert_eq!(validity(&root), Some(Validity::starting(at(0), 10 * DAY)));
    }

    #[test]
    fn a_kept_ca_signs_again_with_its_name_and_validity() {
        let ca = Authority::new("kept", Validity::starting(at(0), 10 * DAY)).unwrap();
        let again = Authority::from_pem(ca.pem(), ca.key_pem()).unwrap();
        assert_eq!(again.pem(), ca.pem());
        assert_eq!(again.key_pem(), ca.key_pem());
        let issued = again.serving(&hosts(), Validity::starting(at(5), DAY)).unwrap();
        assert_eq!(issued.ca_pem, ca.pem());
        assert!(matches!(
            Authority::from_pem("not pem", ca.key_pem()),
            Err(CertError::Unreadable(_))
        ));
    }

    #[test]
    fn a_validity_is_renewed_at_two_thirds_and_backdated_by_a_tenth_of_a_short_lifetime() {
        let short = Validity::issued(at(0), Duration::from_secs(30));
        assert_eq!(short.not_before, at(-3));
        assert_eq!(short.renew_at(), at(19));
        assert!(short.valid_at(at(29)) && !short.valid_at(at(30)));
        let year = Validity::issued(at(0), 365 * DAY);
        assert_eq!(year.not_before, at(-3600), "an hour at most");
    }
}
