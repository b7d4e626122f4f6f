//! Version ranges with the syntax and meaning of `github.com/blang/semver/v4`'s `ParseRange`, which
//! OLM uses for `olm.skipRange` and for the `versionRange` of `olm.package.required` and of
//! `olm.constraint` package constraints.
//!
//! The syntax, as blang v4 reads it:
//! - comparators `>`, `>=`, `<`, `<=`, `=`, `==`, `!=`, `!`, or none (a bare version is an exact
//!   match); spaces between an operator and its version are allowed (`> 1.0.0`);
//! - comparators separated by spaces must all hold (AND); `||` between space-separated groups
//!   separates alternatives (OR); AND binds tighter, there are no brackets;
//! - versions are full `MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]` semver, except for the wildcard
//!   forms `1.x` and `1.2.x` (lower-case `x` only), which expand as blang expands them.
//!
//! What it is not (each pinned by a test): there is no `~`, `^`, hyphen range (`1.0.0 - 2.0.0`),
//! `*`, `X` or bare `x`, and no partial version such as `>=1.2`. Compared with the `semver` crate's
//! [`semver::VersionReq`]: a bare version is exact (not `^`), comparators are joined by spaces (not
//! commas), `||` exists, build metadata is ignored, and pre-releases are ordered like any other
//! version (`>1.0.0` contains `1.1.0-rc1`), with no rule that hides them.
//!
//! Two quirks of blang are kept on purpose, so that a catalog means the same here as in OLM:
//! `1.x.x` expands like `1.0.x`, and `!=1.2.x` expands to `<1.2.0 >=1.3.0`, which nothing matches.

use std::{cmp::Ordering, fmt, str::FromStr};

use semver::Version;

/// A parse error of a version range. Every variant names the offending text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// The range is empty or only spaces.
    #[error("version range is empty")]
    Empty,
    /// `||` is the first or last element of the range, or two `||` follow each other.
    #[error("version range {range:?} has an empty alternative around '||'")]
    EmptyAlternative {
        /// The whole range.
        range: String,
    },
    /// A comparator contains no digit, so it has no version (e.g. `*`, `x`, `-`).
    #[error("no version in {comparator:?} of version range {range:?}")]
    MissingVersion {
        /// The comparator as written, spaces removed.
        comparator: String,
        /// The whole range.
        range: String,
    },
    /// The operator is not one of `>`, `>=`, `<`, `<=`, `=`, `==`, `!=`, `!` (e.g. `~` or `^`).
    #[error("unsupported operator {operator:?} in {comparator:?} of version range {range:?}")]
    UnsupportedOperator {
        /// The operator text.
        operator: String,
        /// The comparator as written, spaces removed.
        comparator: String,
        /// The whole range.
        range: String,
    },
    /// The version is not a full semantic version (or a supported wildcard).
    #[error("invalid version {version:?} in {comparator:?} of version range {range:?}: {reason}")]
    InvalidVersion {
        /// The version text.
        version: String,
        /// The comparator as written, spaces removed.
        comparator: String,
        /// The whole range.
        range: String,
        /// Why the version does not parse.
        reason: String,
    },
}

/// A comparison operator of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    fn from_text(text: &str) -> Option<Op> {
        Some(match text {
            "" | "=" | "==" => Op::Eq,
            "!" | "!=" => Op::Ne,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            "<=" => Op::Le,
            _ => return None,
        })
    }

    fn holds(self, ordering: Ordering) -> bool {
        match self {
            Op::Eq => ordering == Ordering::Equal,
            Op::Ne => ordering != Ordering::Equal,
            Op::Gt => ordering == Ordering::Greater,
            Op::Ge => ordering != Ordering::Less,
            Op::Lt => ordering == Ordering::Less,
            Op::Le => ordering != Ordering::Greater,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Comparator {
    op: Op,
    version: Version,
}

impl Comparator {
    fn matches(&self, version: &Version) -> bool {
        self.op.holds(version.cmp_precedence(&self.version))
    }
}

/// A parsed version range; it keeps the text it was parsed from, which is what [`fmt::Display`]
/// prints.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionRange {
    text: String,
    /// Alternatives (OR) of conjunctions (AND). Never empty, and no conjunction is empty.
    alternatives: Vec<Vec<Comparator>>,
}

impl VersionRange {
    /// Parses a range in blang v4 syntax (see the module documentation).
    pub fn parse(text: &str) -> Result<VersionRange, RangeError> {
        let tokens = split_tokens(text);
        if tokens.is_empty() {
            return Err(RangeError::Empty);
        }
        let mut alternatives = Vec::new();
        for group in tokens.split(|token| token == "||") {
            if group.is_empty() {
                return Err(RangeError::EmptyAlternative {
                    range: text.to_owned(),
                });
            }
            let mut conjunction = Vec::new();
            for token in group {
                parse_comparator(token, text, &mut conjunction)?;
            }
            alternatives.push(conjunction);
        }
        Ok(VersionRange {
            text: text.to_owned(),
            alternatives,
        })
    }

    /// Whether `version` is in the range. Build metadata is ignored; pre-releases compare by
    /// semver precedence like any other version.
    pub fn matches(&self, version: &Version) -> bool {
        self.alternatives
            .iter()
            .any(|conjunction| conjunction.iter().all(|c| c.matches(version)))
    }

    /// The text the range was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for VersionRange {
    type Err = RangeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        VersionRange::parse(text)
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Splits on spaces, except that a space right after `>`, `<` or `=` joins the operator to the
/// version that follows; spaces inside a token are then dropped. This is blang's tokenizer.
fn split_tokens(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut last_char: Option<char> = None;
    for ch in text.chars() {
        if ch == ' ' {
            if matches!(last_char, Some('>' | '<' | '=')) {
                continue;
            }
            if !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
        } else {
            current.push(ch);
            last_char = Some(ch);
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

fn parse_comparator(token: &str, range: &str, out: &mut Vec<Comparator>) -> Result<(), RangeError> {
    let Some(split) = token.find(|c: char| c.is_ascii_digit()) else {
        return Err(RangeError::MissingVersion {
            comparator: token.to_owned(),
            range: range.to_owned(),
        });
    };
    let (op_text, version_text) = token.split_at(split);
    let Some(op) = Op::from_text(op_text) else {
        return Err(RangeError::UnsupportedOperator {
            operator: op_text.to_owned(),
            comparator: token.to_owned(),
            range: range.to_owned(),
        });
    };
    let invalid = |reason: String| RangeError::InvalidVersion {
        version: version_text.to_owned(),
        comparator: token.to_owned(),
        range: range.to_owned(),
        reason,
    };
    if !token.contains(".x") {
        let version = Version::parse(version_text).map_err(|e| invalid(e.to_string()))?;
        out.push(Comparator { op, version });
        return Ok(());
    }
    let (floor, ceiling) = wildcard_bounds(version_text, &invalid)?;
    out.extend(wildcard_comparators(op, floor, ceiling));
    Ok(())
}

/// The versions a wildcard spans, from `floor` (included) to `ceiling` (excluded):
/// `M.x`, `M.m.x` and (blang's reading) `M.x.x`, which behaves as `M.0.x`.
fn wildcard_bounds(
    version_text: &str,
    invalid: &dyn Fn(String) -> RangeError,
) -> Result<(Version, Version), RangeError> {
    let parts: Vec<&str> = version_text.split('.').collect();
    let number = |part: &str| -> Result<u64, RangeError> {
        if part.is_empty()
            || !part.bytes().all(|b| b.is_ascii_digit())
            || (part.len() > 1 && part.starts_with('0'))
        {
            return Err(invalid(format!("{part:?} is not a version number")));
        }
        part.parse::<u64>().map_err(|e| invalid(e.to_string()))
    };
    match parts.as_slice() {
        [major, "x"] => {
            let major = number(major)?;
            Ok((Version::new(major, 0, 0), Version::new(major + 1, 0, 0)))
        }
        [major, "x", "x"] => {
            let major = number(major)?;
            Ok((Version::new(major, 0, 0), Version::new(major, 1, 0)))
        }
        [major, minor, "x"] => {
            let (major, minor) = (number(major)?, number(minor)?);
            Ok((Version::new(major, minor, 0), Version::new(major, minor + 1, 0)))
        }
        _ => Err(invalid(
            "a wildcard 'x' may only stand for the minor or patch number".to_owned(),
        )),
    }
}

/// The comparators `op` gives with a wildcard spanning `floor` to `ceiling`.
fn wildcard_comparators(op: Op, floor: Version, ceiling: Version) -> Vec<Comparator> {
    let at = |op: Op, version: Version| Comparator { op, version };
    match op {
        Op::Gt => vec![at(Op::Ge, ceiling)],
        Op::Ge => vec![at(Op::Ge, floor)],
        Op::Lt => vec![at(Op::Lt, floor)],
        Op::Le => vec![at(Op::Lt, ceiling)],
        Op::Eq => vec![at(Op::Ge, floor), at(Op::Lt, ceiling)],
        Op::Ne => vec![at(Op::Lt, floor), at(Op::Ge, ceiling)],
    }
}

#[cfg(test)]
mod tests {
    use semver::VersionReq;

    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    fn r(text: &str) -> VersionRange {
        VersionRange::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn check(range: &str, inside: &[&str], outside: &[&str]) {
        let parsed = r(range);
        for version in inside {
            assert!(parsed.matches(&v(version)), "{version} should be in {range}");
        }
        for version in outside {
            assert!(
                !parsed.matches(&v(version)),
                "{version} should be outside {range}"
            );
        }
    }

    #[test]
    fn operators() {
        check(">1.0.0", &["1.0.1", "2.0.0"], &["1.0.0", "0.9.9"]);
        check(">=1.0.0", &["1.0.0", "1.0.1"], &["0.9.9"]);
        check("<1.0.0", &["0.9.9"], &["1.0.0"]);
        check("<=1.0.0", &["1.0.0", "0.1.0"], &["1.0.1"]);
        for exact in ["1.0.0", "=1.0.0", "==1.0.0"] {
            check(exact, &["1.0.0"], &["1.0.1", "0.9.9"]);
        }
        for not in ["!1.0.0", "!=1.0.0"] {
            check(not, &["1.0.1", "0.9.9"], &["1.0.0"]);
        }
    }

    #[test]
    fn and_or_and_spacing() {
        check(">1.0.0 <2.0.0", &["1.1.1", "1.8.7"], &["1.0.0", "2.0.0"]);
        check("> 1.0.0  < 2.0.0", &["1.5.0"], &["2.0.0"]);
        check(
            "<2.0.0 || >=3.0.0",
            &["1.9.9", "3.0.0", "4.0.0"],
            &["2.0.0", "2.9.9"],
        );
        check(
            ">1.0.0 <2.0.0 || >3.0.0 !4.2.1",
            &["1.2.3", "1.9.9", "3.1.1"],
            &["4.2.1", "2.1.1"],
        );
        check(">=4.8.0 <4.9.0", &["4.8.2"], &["4.9.0"]);
    }

    #[test]
    fn wildcards_expand_like_blang() {
        check("1.2.x", &["1.2.0", "1.2.9"], &["1.3.0", "1.1.9"]);
        check("1.x", &["1.0.0", "1.9.0"], &["2.0.0", "0.9.0"]);
        check(">=1.x", &["1.0.0", "7.0.0"], &["0.9.9"]);
        check(">1.2.x", &["1.3.0"], &["1.2.9"]);
        check("<1.2.x", &["1.1.9"], &["1.2.0"]);
        check("<=1.2.x", &["1.2.9"], &["1.3.0"]);
        check(">1.x", &["2.0.0"], &["1.9.9"]);
        check("<=1.x", &["1.9.9"], &["2.0.0"]);
        // blang quirk: `1.x.x` is read as `1.0.x`.
        check("1.x.x", &["1.0.5"], &["1.1.0"]);
        // blang quirk: `!=` with a wildcard ANDs both sides, so nothing matches.
        check("!=1.2.x", &[], &["1.1.0", "1.2.0", "1.3.0"]);
    }

    #[test]
    fn prereleases_compare_by_precedence() {
        check(">1.0.0", &["1.1.0-rc1", "1.0.1-alpha"], &["1.0.0-rc1"]);
        check(
            ">=1.14.0-0 <1.14.2",
            &["1.14.1-rc1", "1.14.0", "1.14.2-rc1"],
            &["1.14.2", "1.13.9"],
        );
        check("<1.14.2", &["1.14.2-rc1"], &["1.14.2"]);
        check("=1.0.0-beta.2", &["1.0.0-beta.2"], &["1.0.0-beta.10", "1.0.0"]);
        check("<1.0.0-beta.10", &["1.0.0-beta.2"], &["1.0.0-beta.11"]);
    }

    #[test]
    fn build_metadata_is_ignored() {
        check("=1.0.0", &["1.0.0+build.5"], &[]);
        check("1.0.0+abc", &["1.0.0", "1.0.0+other"], &[]);
        check(">1.0.0", &[], &["1.0.0+zzz"]);
    }

    #[test]
    fn display_keeps_the_original_text() {
        assert_eq!(r(">=1.0.0  <2.0.0").to_string(), ">=1.0.0  <2.0.0");
        assert_eq!(">2.0.0".parse::<VersionRange>().unwrap().as_str(), ">2.0.0");
    }

    #[test]
    fn errors_name_the_offending_text() {
        let err = |text: &str| VersionRange::parse(text).unwrap_err().to_string();
        assert_eq!(err(""), "version range is empty");
        assert_eq!(err("  "), "version range is empty");
        assert_eq!(
            err("|| 1.0.0"),
            "version range \"|| 1.0.0\" has an empty alternative around '||'"
        );
        assert_eq!(
            err("1.0.0 ||"),
            "version range \"1.0.0 ||\" has an empty alternative around '||'"
        );
        assert_eq!(
            err("1.0.0 || || 2.0.0"),
            "version range \"1.0.0 || || 2.0.0\" has an empty alternative around '||'"
        );
        assert_eq!(
            err("~1.2.3"),
            "unsupported operator \"~\" in \"~1.2.3\" of version range \"~1.2.3\""
        );
        assert_eq!(
            err("^1.2.3"),
            "unsupported operator \"^\" in \"^1.2.3\" of version range \"^1.2.3\""
        );
        assert_eq!(
            err("=>1.2.3"),
            "unsupported operator \"=>\" in \"=>1.2.3\" of version range \"=>1.2.3\""
        );
        assert_eq!(err("*"), "no version in \"*\" of version range \"*\"");
        assert_eq!(err("x"), "no version in \"x\" of version range \"x\"");
        assert_eq!(
            err("1.0.0 - 2.0.0"),
            "no version in \"-\" of version range \"1.0.0 - 2.0.0\""
        );
        assert!(
            err(">=1.2").starts_with("invalid version \"1.2\" in \">=1.2\" of version range \">=1.2\": ")
        );
        assert!(err("1.X").starts_with("invalid version \"1.X\" in \"1.X\""));
        assert!(err("v1.0.0").starts_with("unsupported operator \"v\""));
        assert!(err("1.x.3").starts_with("invalid version \"1.x.3\""));
        assert!(err("01.x").starts_with("invalid version \"01.x\""));
        assert!(err(">=1.0.0,<2.0.0").starts_with("invalid version \"1.0.0,<2.0.0\""));
        assert!(err("1.0.0||2.0.0").starts_with("invalid version \"1.0.0||2.0.0\""));
    }

    /// Each case where the `semver` crate's `VersionReq` reads the same text differently.
    #[test]
    fn differences_from_the_semver_crate() {
        let req = |text: &str| VersionReq::parse(text);
        // A bare version is exact here, `^` there.
        assert!(!r("1.2.3").matches(&v("1.9.0")));
        assert!(req("1.2.3").unwrap().matches(&v("1.9.0")));
        // Space-separated AND here; the semver crate wants commas.
        assert!(r(">=1.0.0 <2.0.0").matches(&v("1.5.0")));
        assert!(req(">=1.0.0 <2.0.0").is_err());
        assert!(VersionRange::parse(">=1.0.0, <2.0.0").is_err());
        // `||` exists only here.
        assert!(r("1.0.0 || 2.0.0").matches(&v("2.0.0")));
        assert!(req("1.0.0 || 2.0.0").is_err());
        // Pre-releases: ordered normally here, hidden there unless the comparator names one.
        assert!(r(">1.0.0").matches(&v("1.1.0-rc1")));
        assert!(!req(">1.0.0").unwrap().matches(&v("1.1.0-rc1")));
        // `~`, `^`, `*` and partial versions exist only there.
        for text in ["~1.2.3", "^1.2.3", "*", ">=1.2"] {
            assert!(VersionRange::parse(text).is_err(), "{text}");
            assert!(req(text).is_ok(), "{text}");
        }
        // Upper-case `X` is a wildcard there, an invalid version here.
        assert!(req("1.X").unwrap().matches(&v("1.4.0")));
        assert!(VersionRange::parse("1.X").is_err());
    }
}
