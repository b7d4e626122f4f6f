//! What resolution returns: one [`Group`] per set of Subscriptions that share dependencies, each
//! with a [`Plan`] or an [`Explanation`](crate::explain::Explanation).

use std::fmt;

use crate::{
    explain::{Explanation, HeldBack},
    model::{BundleVersion, CatalogId},
};

/// The result of resolving a namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// Independent groups, ordered by their first Subscription's name.
    pub groups: Vec<Group>,
}

impl Resolution {
    /// The group that holds a Subscription.
    pub fn group_of(&self, subscription: &str) -> Option<&Group> {
        self.groups
            .iter()
            .find(|g| g.subscriptions.iter().any(|s| s == subscription))
    }
}

/// Subscriptions that share a package or an API, directly or through dependencies, and so are
/// resolved together. Groups never affect each other.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Subscription names, sorted.
    pub subscriptions: Vec<String>,
    /// The plan, or why there is none.
    pub outcome: Outcome,
}

/// A group's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every constraint of the group can be met.
    Plan(Plan),
    /// No choice of bundles meets them; the explanation names a smallest conflicting set.
    Unsatisfiable(Explanation),
}

impl Outcome {
    /// The plan, if there is one.
    pub fn plan(&self) -> Option<&Plan> {
        match self {
            Outcome::Plan(plan) => Some(plan),
            Outcome::Unsatisfiable(_) => None,
        }
    }

    /// The explanation, if there is no plan.
    pub fn explanation(&self) -> Option<&Explanation> {
        match self {
            Outcome::Plan(_) => None,
            Outcome::Unsatisfiable(explanation) => Some(explanation),
        }
    }
}

/// The bundles to install for a group.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Bundles to install, dependencies before their dependents; empty when nothing changes.
    pub steps: Vec<Step>,
    /// What each Subscription of the group gets.
    pub subscriptions: Vec<SubscriptionResult>,
    /// Deprecation notices for what the plan installs or keeps.
    pub deprecations: Vec<DeprecationNotice>,
}

/// One bundle to install.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Bundle (CSV) name.
    pub bundle: String,
    /// Its package.
    pub package: String,
    /// Its version.
    pub version: BundleVersion,
    /// The catalog it comes from.
    pub catalog: CatalogId,
    /// The channel it was resolved from (a dependency gets a Subscription to this channel).
    pub channel: String,
    /// Why it is installed.
    pub reason: StepReason,
    /// The installed CSV it replaces, for an upgrade.
    pub replaces: Option<String>,
}

/// Why a bundle is in a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepReason {
    /// A Subscription asked for its package.
    Subscription {
        /// The Subscription's name.
        name: String,
    },
    /// Another bundle of the plan needs it.
    Dependency {
        /// The bundle that needs it.
        dependent: String,
        /// The requirement it meets, in words.
        requirement: String,
    },
}

impl fmt::Display for StepReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepReason::Subscription { name } => write!(f, "subscription {name}"),
            StepReason::Dependency {
                dependent,
                requirement,
            } => write!(f, "{dependent} requires {requirement}"),
        }
    }
}

/// What a Subscription gets.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionResult {
    /// The Subscription's name.
    pub subscription: String,
    /// The bundle chosen for it.
    pub bundle: String,
    /// Whether that is a new install, an upgrade or the installed CSV.
    pub change: Change,
    /// Set when the Subscription prefers bundles it cannot have (e.g. a newer version that an
    /// installed operator does not allow), with the reason.
    pub held_back: Option<HeldBack>,
}

/// How a Subscription's bundle relates to what is installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Nothing was installed; the bundle is installed.
    Install,
    /// The installed CSV is replaced by the bundle.
    Upgrade {
        /// The installed CSV.
        from: String,
    },
    /// The installed CSV stays (no usable upgrade).
    Stay,
}

/// A deprecation that applies to something a plan installs or keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeprecationNotice {
    /// What is deprecated.
    pub subject: DeprecatedSubject,
    /// The catalog that says so.
    pub catalog: CatalogId,
    /// The catalog's message.
    pub message: String,
}

/// The deprecated thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeprecatedSubject {
    /// A whole package.
    Package(String),
    /// A channel of a package.
    Channel {
        /// The package.
        package: String,
        /// The channel.
        channel: String,
    },
    /// One bundle.
    Bundle(String),
}

impl fmt::Display for DeprecationNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subject {
            DeprecatedSubject::Package(p) => write!(f, "package {p}")?,
            DeprecatedSubject::Channel { package, channel } => {
                write!(f, "channel {channel} of package {package}")?
            }
            DeprecatedSubject::Bundle(b) => write!(f, "bundle {b}")?,
        }
        write!(f, " is deprecated in catalog {}: {}", self.catalog, self.message)
    }
}
