//! What is read back from a certificate: a small DER reader for the few fields
//! olm-rs needs (validity, subject common name), and PEM in and out.

use base64::Engine;
use rustls_pki_types::{CertificateDer, pem::PemObject};
use time::OffsetDateTime;

use crate::Validity;

/// The first certificate of a PEM text, DER.
pub fn first_der(pem: &str) -> Option<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes()).next()?.ok()
}

/// Each certificate of a PEM bundle, as PEM, with its validity.
pub fn bundle_validities(pem: &str) -> Vec<(String, Option<Validity>)> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .map(|der| (to_pem(&der), validity(&der)))
        .collect()
}

/// A DER certificate as PEM.
pub fn to_pem(der: &[u8]) -> String {
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// The subject common name of a DER certificate.
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

/// The validity of a DER certificate.
pub fn validity(der: &[u8]) -> Option<Validity> {
    let (_, cert, _) = tlv(der)?;
    let (_, mut tbs, _) = tlv(cert)?;
    // TBSCertificate: [0] version?, serial, signature, issuer, validity.
    if tbs.first() == Some(&0xa0) {
        tbs = tlv(tbs)?.2;
    }
    for _ in 0..3 {
        tbs = tlv(tbs)?.2;
    }
    let (_, times, _) = tlv(tbs)?;
    let (tag, not_before, rest) = tlv(times)?;
    let not_before = asn1_time(tag, not_before)?;
    let (tag, not_after, _) = tlv(rest)?;
    Some(Validity {
        not_before,
        not_after: asn1_time(tag, not_after)?,
    })
}

/// An ASN.1 UTCTime (`YYMMDDHHMMSSZ`, tag 0x17) or GeneralizedTime
/// (`YYYYMMDDHHMMSSZ`, tag 0x18).
fn asn1_time(tag: u8, value: &[u8]) -> Option<OffsetDateTime> {
    let text = std::str::from_utf8(value).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        0x17 => {
            let yy: i32 = text.get(..2)?.parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, text.get(2..)?)
        }
        0x18 => (text.get(..4)?.parse().ok()?, text.get(4..)?),
        _ => return None,
    };
    let field = |i: usize| rest.get(i * 2..i * 2 + 2)?.parse::<u8>().ok();
    if rest.len() != 10 {
        return None;
    }
    let month = time::Month::try_from(field(0)?).ok()?;
    let date = time::Date::from_calendar_date(year, month, field(1)?).ok()?;
    let clock = time::Time::from_hms(field(2)?, field(3)?, field(4)?).ok()?;
    Some(time::PrimitiveDateTime::new(date, clock).assume_utc())
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
    use std::time::Duration;

    use super::*;
    use crate::Authority;

    #[test]
    fn a_validity_after_2049_is_read_from_its_generalized_time() {
        let late = OffsetDateTime::from_unix_timestamp(2_600_000_000).unwrap();
        let validity_of_ca = Validity::issued(late, Duration::from_secs(3600));
        let ca = Authority::new("late", validity_of_ca).unwrap();
        assert_eq!(validity(&first_der(ca.pem()).unwrap()), Some(validity_of_ca));
    }

    #[test]
    fn a_bundle_is_split_into_its_certificates_and_garbage_reads_as_nothing() {
        let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let a = Authority::new("a", Validity::starting(now, Duration::from_secs(60))).unwrap();
        let b = Authority::new("b", Validity::starting(now, Duration::from_secs(90))).unwrap();
        let bundle = format!("{}{}", a.pem(), b.pem());
        let read = bundle_validities(&bundle);
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].0, a.pem());
        assert_eq!(
            read[1].1.map(|v| v.not_after),
            Some(now + Duration::from_secs(90))
        );
        assert_eq!(validity(b"\x30\x03abc"), None);
        assert_eq!(common_name(&[]), None);
        assert!(first_der("no certificate").is_none());
    }
}
