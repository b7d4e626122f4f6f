//! Why a group of Subscriptions has no plan, in plain words.
//!
//! An [`Explanation`] lists a smallest set of constraints that cannot all hold: drop any one of
//! them and the rest can be met. Each need lists its candidates and why each one is out.

use std::fmt;

use crate::{
    graph::GraphError,
    model::{BundleVersion, CatalogId, Gvk},
    range::VersionRange,
};

/// How many bundles a list shows before it says "and N more".
const SHOWN: usize = 8;

/// A smallest set of constraints that cannot all be met.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The conflicting constraints.
    pub conflicts: Vec<Conflict>,
}

/// One constraint of an [`Explanation`].
#[derive(Debug, Clone, PartialEq)]
pub enum Conflict {
    /// A Subscription needs a bundle of its package.
    Subscription(SubscriptionNeed),
    /// A bundle needs something.
    Dependency(DependencyNeed),
    /// At most one bundle of a package may be installed in the namespace.
    OneBundlePerPackage {
        /// The package.
        package: String,
        /// Bundles of the package that the other constraints call for.
        bundles: Vec<String>,
    },
    /// At most one bundle may provide an API in the namespace.
    OneProviderPerApi {
        /// The API.
        gvk: Gvk,
        /// Providers that the other constraints call for.
        bundles: Vec<String>,
    },
    /// The search gave up before it could decide (a safety limit, not expected in practice).
    SearchLimit {
        /// Candidates tried.
        steps: u64,
    },
}

/// A Subscription and its candidates.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionNeed {
    /// The Subscription's name.
    pub subscription: String,
    /// The package it subscribes to.
    pub package: String,
    /// The channel used (the default channel when the Subscription names none), if known.
    pub channel: Option<String>,
    /// The catalog it names.
    pub catalog: CatalogId,
    /// The installed CSV it upgrades from.
    pub installed: Option<String>,
    /// Its candidates, in preference order.
    pub candidates: Vec<Candidate>,
    /// Why it has no candidates at all, if so.
    pub problem: Option<SubscriptionProblem>,
}

/// Why a Subscription has no candidate at all.
#[derive(Debug, Clone, PartialEq)]
pub enum SubscriptionProblem {
    /// The catalog is not among the snapshots (absent or unhealthy).
    CatalogUnavailable,
    /// The catalog has no such package.
    PackageNotFound,
    /// No channel was named and the package has no default channel.
    NoDefaultChannel,
    /// The package has no such channel.
    ChannelNotFound,
    /// The channel's upgrade graph is invalid.
    InvalidChannel(GraphError),
    /// `startingCSV` is not an entry of the channel.
    StartingCsvNotFound(String),
}

/// A bundle's need and its candidates.
#[derive(Debug, Clone, PartialEq)]
pub struct DependencyNeed {
    /// The bundles that have this need, in preference order.
    pub dependents: Vec<String>,
    /// The need, in words (e.g. `package rabbitmq-cluster-operator in range >2.0.0`).
    pub requirement: String,
    /// The `failureMessage` of an `olm.constraint`.
    pub failure_message: Option<String>,
    /// Candidates, matching or not, grouped by where they are; empty when nothing provides it.
    pub candidates: Vec<Candidate>,
    /// Set when the need uses a feature olm-rs cannot evaluate.
    pub unsupported: Option<Unsupported>,
}

/// A feature of `olm.constraint` that olm-rs cannot evaluate yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsupported {
    /// A `cel` constraint.
    Cel {
        /// Its rule.
        rule: String,
    },
}

/// A candidate bundle and why it was excluded.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Bundle (CSV) name.
    pub bundle: String,
    /// Its version.
    pub version: BundleVersion,
    /// Its catalog; `None` for an installed CSV.
    pub catalog: Option<CatalogId>,
    /// Why it cannot be used; empty means only the combination of constraints rules it out.
    pub excluded: Vec<Exclusion>,
}

/// Why a candidate cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub enum Exclusion {
    /// Its version is outside the required range.
    OutsideRange {
        /// The range.
        range: VersionRange,
    },
    /// It has a need listed in the same explanation.
    Requires {
        /// The need, in words.
        requirement: String,
    },
    /// Another bundle of its package is needed (see the package conflict).
    PackageConflict {
        /// The package.
        package: String,
    },
    /// It provides an API that another needed bundle provides (see the API conflict).
    ApiConflict {
        /// The API.
        gvk: Gvk,
    },
}

/// Why a Subscription did not get a bundle it prefers over the one it got (most often a newer
/// version): the group, with that Subscription limited to its preferred bundles, has no plan.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldBack {
    /// The bundles the Subscription prefers over the one it got, most preferred first.
    pub preferred: Vec<String>,
    /// Installed CSVs whose needs take part in the conflict: the operators that hold it back.
    pub holders: Vec<String>,
    /// The conflict that taking any preferred bundle runs into.
    pub explanation: Explanation,
}

impl fmt::Display for HeldBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} held back", join_or(&self.preferred))?;
        if !self.holders.is_empty() {
            let noun = if self.holders.len() == 1 {
                "installed operator"
            } else {
                "installed operators"
            };
            write!(f, " by {noun} {}", join_and(&self.holders))?;
        }
        write!(f, ": {}", self.explanation)
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no set of bundles meets these constraints together:")?;
        for conflict in &self.conflicts {
            write!(f, "\n- {conflict}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::Subscription(need) => need.fmt(f),
            Conflict::Dependency(need) => need.fmt(f),
            Conflict::OneBundlePerPackage { package, bundles } => {
                write!(
                    f,
                    "at most one bundle of package {package} can be installed in the namespace"
                )?;
                if !bundles.is_empty() {
                    write!(f, ", and the others need {}", join_or(bundles))?;
                }
                Ok(())
            }
            Conflict::OneProviderPerApi { gvk, bundles } => {
                write!(f, "at most one bundle can provide API {gvk} in the namespace")?;
                if !bundles.is_empty() {
                    write!(f, "; it is provided by {}", join_and(bundles))?;
                }
                Ok(())
            }
            Conflict::SearchLimit { steps } => {
                write!(f, "the resolver gave up after trying {steps} candidates")
            }
        }
    }
}

impl fmt::Display for SubscriptionNeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "subscription {} wants package {}",
            self.subscription, self.package
        )?;
        match &self.channel {
            Some(channel) => write!(f, " from channel {channel}")?,
            None => f.write_str(" from the default channel")?,
        }
        write!(f, " of catalog {}", self.catalog)?;
        if let Some(installed) = &self.installed {
            write!(f, ", upgrading from installed {installed}")?;
        }
        match &self.problem {
            Some(SubscriptionProblem::CatalogUnavailable) => {
                write!(f, ", but catalog {} is not available", self.catalog)
            }
            Some(SubscriptionProblem::PackageNotFound) => {
                write!(
                    f,
                    ", but catalog {} has no package {}",
                    self.catalog, self.package
                )
            }
            Some(SubscriptionProblem::NoDefaultChannel) => {
                write!(f, ", but the package has no default channel; name a channel")
            }
            Some(SubscriptionProblem::ChannelNotFound) => {
                f.write_str(", but the package has no such channel")
            }
            Some(SubscriptionProblem::InvalidChannel(error)) => write!(f, ", but {error}"),
            Some(SubscriptionProblem::StartingCsvNotFound(csv)) => {
                write!(f, ", but its startingCSV {csv} is not in that channel")
            }
            None => {
                f.write_str("; candidates: ")?;
                write_candidates(f, &self.candidates)
            }
        }
    }
}

impl fmt::Display for DependencyNeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.dependents.len() == 1 {
            "requires"
        } else {
            "require"
        };
        write!(f, "{} {verb} {}", join_and(&self.dependents), self.requirement)?;
        if let Some(message) = &self.failure_message {
            write!(f, " (\"{message}\")")?;
        }
        if let Some(Unsupported::Cel { rule }) = &self.unsupported {
            return write!(
                f,
                "; olm.constraint type cel (rule {rule:?}) is not supported yet by olm-rs"
            );
        }
        if self.candidates.is_empty() {
            return f.write_str("; no catalog provides it");
        }
        let mut first = true;
        let mut start = 0;
        while start < self.candidates.len() {
            let catalog = &self.candidates[start].catalog;
            let end = self.candidates[start..]
                .iter()
                .position(|c| c.catalog != *catalog)
                .map_or(self.candidates.len(), |n| start + n);
            f.write_str(if first { "; " } else { "; and " })?;
            match catalog {
                Some(catalog) => write!(f, "candidates in catalog {catalog}: ")?,
                None => f.write_str("installed: ")?,
            }
            write_candidates(f, &self.candidates[start..end])?;
            first = false;
            start = end;
        }
        Ok(())
    }
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exclusion::OutsideRange { range } => write!(f, "outside {range}"),
            Exclusion::Requires { requirement } => write!(f, "requires {requirement}"),
            Exclusion::PackageConflict { package } => {
                write!(f, "another bundle of package {package} is needed")
            }
            Exclusion::ApiConflict { gvk } => write!(f, "another provider of API {gvk} is needed"),
        }
    }
}

fn notes(candidate: &Candidate) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    if candidate.catalog.is_none() {
        notes.push("installed".to_owned());
    }
    for exclusion in &candidate.excluded {
        match exclusion {
            Exclusion::OutsideRange { range } => {
                notes.push(format!("version {} is outside {range}", candidate.version));
            }
            other => notes.push(other.to_string()),
        }
    }
    notes
}

/// Candidates with their notes; when several share the same notes, the notes are said once.
fn write_candidates(f: &mut fmt::Formatter<'_>, candidates: &[Candidate]) -> fmt::Result {
    if candidates.is_empty() {
        return f.write_str("none");
    }
    let all_notes: Vec<Vec<String>> = candidates.iter().map(notes).collect();
    let shared = candidates.len() > 1 && all_notes.iter().all(|n| *n == all_notes[0]);
    let names: Vec<String> = candidates
        .iter()
        .zip(&all_notes)
        .map(|(candidate, notes)| {
            if shared || notes.is_empty() {
                candidate.bundle.clone()
            } else {
                format!("{} ({})", candidate.bundle, notes.join("; "))
            }
        })
        .collect();
    f.write_str(&shorten(&names, ", "))?;
    if shared && !all_notes[0].is_empty() {
        write!(f, " (each: {})", all_notes[0].join("; "))?;
    }
    Ok(())
}

/// Joins at most [`SHOWN`] items (`last` before the final one), then says how many more there are.
fn shorten(items: &[String], last: &str) -> String {
    if items.len() > SHOWN {
        format!("{} and {} more", items[..SHOWN].join(", "), items.len() - SHOWN)
    } else {
        join_with(items, last)
    }
}

fn join_with(items: &[String], last: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., final_item] => format!("{}{last}{final_item}", rest.join(", ")),
    }
}

fn join_and(items: &[String]) -> String {
    shorten(items, " and ")
}

fn join_or(items: &[String]) -> String {
    shorten(items, " or ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(name: &str, excluded: Vec<Exclusion>) -> Candidate {
        Candidate {
            bundle: name.to_owned(),
            version: BundleVersion::parse("1.0.0").unwrap(),
            catalog: Some(CatalogId::new("community", "olm")),
            excluded,
        }
    }

    #[test]
    fn shared_notes_are_said_once_and_long_lists_are_cut() {
        let requires = || {
            vec![Exclusion::Requires {
                requirement: "API g/v1 K".to_owned(),
            }]
        };
        let need = DependencyNeed {
            dependents: (0..10).map(|i| format!("app.v{i}")).collect(),
            requirement: "package db in range >=2.0.0".to_owned(),
            failure_message: None,
            candidates: (0..10)
                .map(|i| candidate(&format!("db.v{i}"), requires()))
                .collect(),
            unsupported: None,
        };
        assert_eq!(
            need.to_string(),
            "app.v0, app.v1, app.v2, app.v3, app.v4, app.v5, app.v6, app.v7 and 2 more require package db in range >=2.0.0; \
             candidates in catalog olm/community: db.v0, db.v1, db.v2, db.v3, db.v4, db.v5, db.v6, db.v7 and 2 more (each: requires API g/v1 K)"
        );
        let conflict = Conflict::OneProviderPerApi {
            gvk: Gvk::new("g", "v1", "K"),
            bundles: vec!["a.v1".to_owned(), "b.v1".to_owned(), "c.v1".to_owned()],
        };
        assert_eq!(
            conflict.to_string(),
            "at most one bundle can provide API g/v1 K in the namespace; it is provided by a.v1, b.v1 and c.v1"
        );
    }
}
