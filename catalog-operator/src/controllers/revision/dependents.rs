//! Whether a rollback would break the operators that need the current version
//! (pure), asked of the resolver rather than checked a second way.
//!
//! The namespace is resolved as it would stand once rolled back: its installed
//! CSVs, and one Subscription, the one rolled back, whose only way on is the
//! revision's CSV, offered by a catalog made of that revision alone (so the
//! answer never depends on what the real catalogs still offer). The other
//! installed CSVs have no Subscription here, so the resolver keeps what meets
//! their needs today (a package range, an API, an `olm.constraint`, a
//! required CRD of their CSV): when the revision does not meet one of them,
//! the resolver holds it back and says why, naming the operators that hold
//! it. That explanation is the refusal's.

use std::sync::Arc;

use kube::ResourceExt;
use olm_api::v1alpha1::{ClusterServiceVersion, Subscription};
use olm_resolver::{
    CatalogIndex,
    model::{self, BundleInput, CatalogId, CatalogSnapshot, ChannelEntry, ChannelInput, PackageInput},
    plan::Outcome,
};

/// The channel of the catalog made of the revision.
const CHANNEL: &str = "rollback";

/// Why the revision cannot be installed beside the operators of the namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broken {
    /// The installed CSVs whose needs the revision does not meet, by name.
    pub dependents: Vec<String>,
    /// The resolver's explanation, in plain words.
    pub explanation: String,
}

/// What the check reads.
pub struct Read<'a> {
    /// The Subscription rolled back.
    pub subscription: &'a Subscription,
    /// The CSV it has installed now, to be replaced.
    pub current: &'a str,
    /// The revision's CSV, as recorded.
    pub revision: &'a ClusterServiceVersion,
    /// The CSVs of the namespace (copies left out).
    pub csvs: &'a [&'a ClusterServiceVersion],
}

/// The CSVs of the namespace as the resolver reads them: those on their way out
/// (being deleted) and any of the revision's name left out.
fn installed(read: &Read<'_>) -> Vec<model::InstalledCsv> {
    let revision = read.revision.name_any();
    let csvs: Vec<Arc<ClusterServiceVersion>> = read
        .csvs
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none() && c.name_any() != revision)
        .map(|c| Arc::new((*c).clone()))
        .collect();
    olm_resolution::installed_csvs::<olm_catalog::Catalog>(&csvs, &[])
}

/// The revision as the one bundle of its catalog, `None` when its version is
/// not semver (it could never take part in resolution).
fn bundle(read: &Read<'_>) -> Option<BundleInput> {
    let revision = Arc::new(read.revision.clone());
    let csv = olm_resolution::installed_csvs::<olm_catalog::Catalog>(&[revision], &[])
        .into_iter()
        .next()?;
    let package = csv
        .package
        .unwrap_or_else(|| read.subscription.spec.package.clone());
    let mut bundle = BundleInput::new(csv.name, package, csv.version);
    bundle.provides = csv.provides;
    bundle.requirements = csv.requirements;
    Some(bundle)
}

/// How many times the resolver is asked again, each time without the
/// dependents it named, so that every dependent is named (its explanation
/// names the fewest operators that rule the revision out).
const ROUNDS: usize = 8;

/// `Some` when rolling back to the revision would leave an installed
/// operator without something it needs, or the revision without something
/// it needs; `None` when the resolver takes the revision. Every dependent is
/// named, each with the resolver's explanation.
pub fn broken(read: &Read<'_>) -> Option<Broken> {
    let mut installed = installed(read);
    let mut all: Option<Broken> = None;
    for _ in 0..ROUNDS {
        let Some(found) = once(read, &installed) else {
            break;
        };
        let new = !found.dependents.is_empty();
        installed.retain(|c| !found.dependents.contains(&c.name));
        all = Some(match all {
            None => found,
            Some(mut all) => {
                all.dependents.extend(found.dependents);
                all.explanation = format!("{}\n{}", all.explanation, found.explanation);
                all
            }
        });
        if !new {
            break;
        }
    }
    if let Some(all) = &mut all {
        all.dependents.sort();
        all.dependents.dedup();
    }
    all
}

/// One question to the resolver, with the installed CSVs `installed`.
fn once(read: &Read<'_>, installed: &[model::InstalledCsv]) -> Option<Broken> {
    if !installed.iter().any(|c| c.name == read.current) {
        // Nothing is installed to compare with: nothing installed can depend on it.
        return None;
    }
    let bundle = bundle(read)?;
    let namespace = read.subscription.namespace().unwrap_or_default();
    let catalog = CatalogId::new(CHANNEL, namespace.clone());
    let entry = ChannelEntry::new(bundle.name.clone()).skips(read.current);
    let index = CatalogIndex::new(vec![CatalogSnapshot {
        id: catalog.clone(),
        priority: 0,
        packages: vec![PackageInput::new(
            bundle.package.clone(),
            Some(CHANNEL),
            vec![ChannelInput::new(CHANNEL, vec![entry])],
        )],
        bundles: vec![bundle.clone()],
    }]);
    let name = read.subscription.name_any();
    let subscription = model::Subscription::new(&name, &namespace, bundle.package.clone(), catalog)
        .channel(CHANNEL)
        .installed_csv(read.current);
    let resolution = index.resolve(&namespace, installed, &[subscription]);
    let group = resolution.group_of(&name)?;
    match &group.outcome {
        Outcome::Unsatisfiable(explanation) => Some(Broken {
            dependents: Vec::new(),
            explanation: explanation.to_string(),
        }),
        Outcome::Plan(plan) => {
            let result = plan.subscriptions.iter().find(|r| r.subscription == name)?;
            if result.bundle == bundle.name {
                return None;
            }
            let held = result.held_back.as_ref();
            Some(Broken {
                dependents: held.map(|h| h.holders.clone()).unwrap_or_default(),
                explanation: held.map_or_else(
                    || format!("the resolver keeps {} installed", result.bundle),
                    |h| h.explanation.to_string(),
                ),
            })
        }
    }
}

#[cfg(test)]
mod tests;
