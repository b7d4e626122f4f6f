//! When the serving certificate is renewed, and which CAs the APIService
//! trusts meanwhile. Pure: the clock and the certificates' validity in, a
//! decision out.
//!
//! A certificate is renewed at two thirds of its lifetime. The CA outlives its
//! leaves ([`CA_LIFETIMES`] of them) and its key is kept in the Secret, so a
//! renewal usually re-signs only the leaf and the APIService's `caBundle` does
//! not change. A new CA is made only when the current one cannot sign a whole
//! new leaf lifetime, or its key is not kept (Secrets written before keys
//! were); the `caBundle` then lists the new CA first and every older CA until
//! it expires, so the replicas that still serve a leaf of an older CA stay
//! trusted until they load the new leaf.

use std::time::Duration;

use olm_certs::Validity;
use time::OffsetDateTime;

/// A CA lives this many leaf lifetimes.
pub const CA_LIFETIMES: u32 = 10;

/// What the current certificate needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// Nothing until `until`.
    Keep {
        /// When to look again.
        until: OffsetDateTime,
    },
    /// A new leaf signed by the current CA.
    Leaf,
    /// A new CA and a new leaf.
    CaAndLeaf,
}

/// What the certificate needs at `now`: the leaf's validity (`None` when it
/// cannot be read), the current CA's (`None` when its key is not kept or it
/// cannot be read), and the lifetime a new leaf gets.
pub fn decide(
    now: OffsetDateTime,
    leaf: Option<Validity>,
    ca: Option<Validity>,
    lifetime: Duration,
) -> Renewal {
    let Some(leaf) = leaf else {
        return Renewal::CaAndLeaf;
    };
    if now < leaf.renew_at() {
        return Renewal::Keep {
            until: leaf.renew_at(),
        };
    }
    match ca {
        Some(ca) if ca.valid_at(now) && Validity::issued(now, lifetime).not_after <= ca.not_after => {
            Renewal::Leaf
        }
        _ => Renewal::CaAndLeaf,
    }
}

/// The CAs an APIService trusts after a new CA: `new` first, then those of
/// `previous` (with their validity; unreadable ones are dropped) still valid
/// at `now`, each once.
pub fn ca_bundle(
    now: OffsetDateTime,
    new: &str,
    previous: impl IntoIterator<Item = (String, Option<Validity>)>,
) -> String {
    let mut bundle = vec![new.trim_end().to_owned()];
    for (pem, validity) in previous {
        let pem = pem.trim_end().to_owned();
        if validity.is_some_and(|v| now < v.not_after) && !bundle.contains(&pem) {
            bundle.push(pem);
        }
    }
    let mut out = bundle.join("\n");
    out.push('\n');
    out
}

/// How long from `now` until `at` (zero when `at` has passed).
pub fn until(now: OffsetDateTime, at: OffsetDateTime) -> Duration {
    Duration::try_from(at - now).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    fn at(seconds: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn a_certificate_is_renewed_at_two_thirds_of_its_lifetime() {
        let leaf = Validity {
            not_before: at(0),
            not_after: at(300),
        };
        assert_eq!(leaf.renew_at(), at(200));
        let ca = Validity::issued(at(0), 10 * DAY);
        let lifetime = Duration::from_secs(300);
        assert_eq!(
            decide(at(199), Some(leaf), Some(ca), lifetime),
            Renewal::Keep { until: at(200) }
        );
        assert_eq!(decide(at(200), Some(leaf), Some(ca), lifetime), Renewal::Leaf);
        // Long past expiry (a replica that was down): renewed all the same.
        assert_eq!(decide(at(10_000), Some(leaf), Some(ca), lifetime), Renewal::Leaf);
    }

    #[test]
    fn a_year_long_certificate_is_renewed_eight_months_in() {
        let leaf = Validity::issued(at(0), 365 * DAY);
        assert_eq!(leaf.not_before, at(-3600));
        let renew_in = until(at(0), leaf.renew_at());
        assert!(renew_in > 243 * DAY && renew_in < 244 * DAY, "{renew_in:?}");
    }

    #[test]
    fn a_short_lifetime_is_backdated_by_a_tenth() {
        let leaf = Validity::issued(at(0), Duration::from_secs(30));
        assert_eq!(leaf.not_before, at(-3));
        assert_eq!(leaf.renew_at(), at(19));
    }

    #[test]
    fn a_new_ca_is_made_when_the_current_one_cannot_sign_a_whole_leaf_lifetime() {
        let lifetime = Duration::from_secs(300);
        let leaf = Validity::issued(at(0), lifetime);
        let ca = Validity {
            not_before: at(-10),
            not_after: at(400),
        };
        // At 200 a new leaf would end at 500, after the CA.
        assert_eq!(
            decide(at(200), Some(leaf), Some(ca), lifetime),
            Renewal::CaAndLeaf
        );
        let long_ca = Validity {
            not_before: at(-10),
            not_after: at(500),
        };
        assert_eq!(
            decide(at(200), Some(leaf), Some(long_ca), lifetime),
            Renewal::Leaf
        );
    }

    #[test]
    fn without_a_kept_ca_key_or_a_readable_leaf_everything_is_new() {
        let lifetime = Duration::from_secs(300);
        let leaf = Validity::issued(at(0), lifetime);
        assert_eq!(decide(at(250), Some(leaf), None, lifetime), Renewal::CaAndLeaf);
        assert_eq!(decide(at(0), None, None, lifetime), Renewal::CaAndLeaf);
        // A CA not yet valid (a clock gone back) is not used either.
        let future = Validity::issued(at(100_000), DAY);
        assert_eq!(
            decide(at(250), Some(leaf), Some(future), lifetime),
            Renewal::CaAndLeaf
        );
    }

    #[test]
    fn the_bundle_keeps_older_cas_until_they_expire() {
        let valid = Validity {
            not_before: at(0),
            not_after: at(100),
        };
        let bundle = ca_bundle(
            at(50),
            "NEW\n",
            [
                ("OLD".to_owned(), Some(valid)),
                ("NEW".to_owned(), Some(valid)),
                ("UNREADABLE".to_owned(), None),
            ],
        );
        assert_eq!(bundle, "NEW\nOLD\n");
        assert_eq!(
            ca_bundle(at(100), "NEW", [("OLD".to_owned(), Some(valid))]),
            "NEW\n"
        );
    }
}
