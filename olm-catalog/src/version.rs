//! Bundle versions: the string as written, and its semantic version when it is one.

use std::{cmp::Ordering, fmt};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A bundle version as written in a CSV's `spec.version` or an `olm.package` property, with its
/// parsed [`semver::Version`] when the string is valid semver 2.0 (as OLM's parser requires).
/// Versions such as `2.5.3514-4052426`, `1.2.0-dev.20240516`, `0.3.0-beta.1.2`, `2026.2.26` and
/// `3.0.0-final` parse; `v1.2.3` or `1.02.3` do not, and [`Version::semver`] is then `None`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Version {
    raw: String,
    parsed: Option<semver::Version>,
}

impl Version {
    /// Keeps `raw` and parses it.
    pub fn new(raw: impl Into<String>) -> Self {
        let raw = raw.into();
        let parsed = semver::Version::parse(&raw).ok();
        Self { raw, parsed }
    }

    /// The version as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The semantic version, if the string is one.
    pub fn semver(&self) -> Option<&semver::Version> {
        self.parsed.as_ref()
    }

    /// Why the string is not a semantic version, if it is not.
    pub fn parse_error(&self) -> Option<semver::Error> {
        semver::Version::parse(&self.raw).err()
    }

    /// Orders by semantic version (semver precedence, then build metadata); versions that do not
    /// parse come after all that do, ordered by their text.
    pub fn cmp_precedence(&self, other: &Self) -> Ordering {
        match (&self.parsed, &other.parsed) {
            (Some(a), Some(b)) => a.cmp(b),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => self.raw.cmp(&other.raw),
        }
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.raw)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self::new(String::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_real_versions_parse() {
        for v in [
            "2.5.3514-4052426",
            "1.2.0-dev.20240516",
            "0.3.0-beta.1.2",
            "2026.2.26",
            "3.0.0-final",
        ] {
            assert!(Version::new(v).semver().is_some(), "{v}");
        }
        let bad = Version::new("v1.2.3");
        assert!(bad.semver().is_none());
        assert!(bad.parse_error().is_some());
        assert_eq!(bad.as_str(), "v1.2.3");
    }

    #[test]
    fn precedence() {
        let mut vs: Vec<Version> = ["1.14.2", "1.14.2-rc1", "x", "1.13.3", "1.14.1-rc1"]
            .into_iter()
            .map(Version::new)
            .collect();
        vs.sort_by(Version::cmp_precedence);
        let got: Vec<&str> = vs.iter().map(Version::as_str).collect();
        assert_eq!(got, ["1.13.3", "1.14.1-rc1", "1.14.2-rc1", "1.14.2", "x"]);
    }
}
