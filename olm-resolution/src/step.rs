//! What resolution hands to planning: a bundle to install and where it comes from.

use olm_resolver::model::CatalogId;

/// A bundle to install, with where it comes from: what resolution hands to
/// planning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedStep {
    /// The bundle (CSV) name.
    pub bundle: String,
    /// Its package.
    pub package: String,
    /// Its version.
    pub version: String,
    /// The catalog it comes from.
    pub catalog: CatalogId,
    /// The channel it was resolved from.
    pub channel: String,
    /// The installed CSV it replaces, for an upgrade.
    pub replaces: Option<String>,
    /// Why the resolver chose it, in words.
    pub reason: String,
    /// Pulled in as a dependency, with no Subscription for its package yet: the
    /// plan creates one (as OLM does).
    pub dependency: bool,
}
