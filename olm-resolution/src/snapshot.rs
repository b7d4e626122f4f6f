//! Turns loaded catalog content into the resolver's input.
//!
//! The catalog crate keeps content as OLM writes it (properties, raw ranges,
//! version strings); the resolver takes parsed, typed input. This module is
//! the one place that translates between them, and it says which bundles it
//! had to leave out and why, instead of failing the whole catalog.

use std::fmt;

use olm_catalog::{Catalog, Property};
use olm_resolver::{
    model::{
        BundleInput, BundleVersion, CatalogId, CatalogSnapshot, ChannelEntry, ChannelInput, Constraint,
        Deprecation, Gvk, PackageInput, Requirement,
    },
    range::VersionRange,
};

/// A bundle or channel entry that could not be given to the resolver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotProblem {
    /// The package it belongs to.
    pub package: String,
    /// The bundle (or channel entry) left out.
    pub bundle: String,
    /// Why.
    pub reason: String,
}

impl fmt::Display for SnapshotProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "package {}: bundle {} left out: {}",
            self.package, self.bundle, self.reason
        )
    }
}

/// The resolver's view of one catalog, and what had to be left out of it.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The resolver input.
    pub snapshot: CatalogSnapshot,
    /// Bundles and entries left out, with the reason.
    pub problems: Vec<SnapshotProblem>,
}

/// Builds the resolver's snapshot of `catalog`, known to the resolver as `id`
/// with the CatalogSource's `priority`.
pub fn snapshot(id: CatalogId, priority: i32, catalog: &Catalog) -> Snapshot {
    let mut problems = Vec::new();
    let bundles = catalog
        .bundles
        .iter()
        .filter_map(|bundle| match bundle_input(bundle) {
            Ok(mut input) => {
                input.deprecation = deprecation(catalog, &bundle.package, "olm.bundle", Some(&bundle.name));
                Some(input)
            }
            Err(reason) => {
                problems.push(SnapshotProblem {
                    package: bundle.package.clone(),
                    bundle: bundle.name.clone(),
                    reason,
                });
                None
            }
        })
        .collect();
    let packages = catalog
        .packages
        .iter()
        .map(|package| {
            let channels = catalog
                .channels_of(&package.name)
                .map(|channel| {
                    let entries = channel
                        .entries
                        .iter()
                        .map(|entry| channel_entry(entry, &package.name, &mut problems))
                        .collect();
                    let mut input = ChannelInput::new(channel.name.clone(), entries);
                    input.deprecation =
                        deprecation(catalog, &package.name, "olm.channel", Some(&channel.name));
                    input
                })
                .collect();
            let mut input =
                PackageInput::new(package.name.clone(), package.default_channel.as_deref(), channels);
            input.deprecation = deprecation(catalog, &package.name, "olm.package", None);
            input
        })
        .collect();
    Snapshot {
        snapshot: CatalogSnapshot {
            id,
            priority,
            packages,
            bundles,
        },
        problems,
    }
}

fn channel_entry(
    entry: &olm_catalog::ChannelEntry,
    package: &str,
    problems: &mut Vec<SnapshotProblem>,
) -> ChannelEntry {
    let mut out = ChannelEntry::new(entry.name.clone());
    out.replaces = entry.replaces.clone();
    out.skips = entry.skips.clone();
    if let Some(range) = &entry.skip_range {
        match VersionRange::parse(range) {
            Ok(range) => out.skip_range = Some(range),
            Err(e) => problems.push(SnapshotProblem {
                package: package.to_owned(),
                bundle: entry.name.clone(),
                reason: format!("its skipRange is ignored: {e}"),
            }),
        }
    }
    out
}

fn bundle_input(bundle: &olm_catalog::Bundle) -> Result<BundleInput, String> {
    let version = bundle
        .version()
        .ok_or_else(|| "it has no olm.package property with a version".to_owned())?;
    let version = BundleVersion::parse(version.as_str())
        .map_err(|e| format!("version {version:?} is not semver: {e}"))?;
    let mut input = BundleInput::new(bundle.name.clone(), bundle.package.clone(), version);
    for property in &bundle.properties {
        if let Property::Gvk(gvk) = property {
            input.provides.push(resolver_gvk(gvk));
        }
        if let Some(requirement) = requirement(property) {
            input.requirements.push(requirement?);
        }
    }
    Ok(input)
}

/// The requirement a property states (`olm.gvk.required`, `olm.package.required`,
/// `olm.constraint`), `None` for other properties, or why it is invalid. Catalog bundles and
/// installed CSVs (from their installed properties) are read alike.
pub fn requirement(property: &Property) -> Option<Result<Requirement, String>> {
    match property {
        Property::GvkRequired(gvk) => Some(Ok(Requirement::gvk(resolver_gvk(gvk)))),
        Property::PackageRequired(required) => Some(
            Requirement::package(required.package_name.clone(), &required.version_range).map_err(|e| {
                format!(
                    "its olm.package.required on {} is invalid: {e}",
                    required.package_name
                )
            }),
        ),
        Property::Constraint(constraint) => Some(
            Constraint::from_json(&constraint.value.to_value())
                .map(Requirement::Constraint)
                .map_err(|e| format!("its olm.constraint is invalid: {e}")),
        ),
        _ => None,
    }
}

fn resolver_gvk(gvk: &olm_catalog::Gvk) -> Gvk {
    Gvk::new(gvk.group.clone(), gvk.version.clone(), gvk.kind.clone())
}

/// The deprecation message the catalog gives for a package or a channel of it.
fn deprecation(catalog: &Catalog, package: &str, schema: &str, name: Option<&str>) -> Option<Deprecation> {
    catalog
        .deprecation_message(package, schema, name)
        .map(|message| Deprecation::new(message.to_owned()))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use olm_resolver::{CatalogIndex, model::Subscription, plan::Outcome};

    use super::*;

    const FBC: &str = r#"
{"schema":"olm.package","name":"db","defaultChannel":"stable"}
{"schema":"olm.channel","package":"db","name":"stable","entries":[{"name":"db.v1.0.0"},{"name":"db.v1.1.0","replaces":"db.v1.0.0","skipRange":">=0.9.0 <1.1.0"}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.0.0","image":"db:1.0.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.0.0"}},{"type":"olm.gvk","value":{"group":"demo.io","kind":"Database","version":"v1"}}]}
{"schema":"olm.bundle","package":"db","name":"db.v1.1.0","image":"db:1.1.0","properties":[{"type":"olm.package","value":{"packageName":"db","version":"1.1.0"}},{"type":"olm.gvk","value":{"group":"demo.io","kind":"Database","version":"v1"}}]}
{"schema":"olm.package","name":"app","defaultChannel":"stable"}
{"schema":"olm.channel","package":"app","name":"stable","entries":[{"name":"app.v0.1.0"}]}
{"schema":"olm.bundle","package":"app","name":"app.v0.1.0","image":"app:0.1.0","properties":[{"type":"olm.package","value":{"packageName":"app","version":"0.1.0"}},{"type":"olm.package.required","value":{"packageName":"db","versionRange":">=1.1.0"}},{"type":"olm.gvk.required","value":{"group":"demo.io","kind":"Database","version":"v1"}}]}
{"schema":"olm.bundle","package":"app","name":"app.v0.0.1","image":"app:0.0.1","properties":[{"type":"olm.package","value":{"packageName":"app","version":"not-a-version"}}]}
{"schema":"olm.deprecations","package":"db","entries":[{"reference":{"schema":"olm.channel","name":"stable"},"message":"use fast"}]}
"#;

    fn catalog() -> Catalog {
        olm_catalog::fbc::parse_str(Path::new("test.json"), FBC).expect("valid FBC")
    }

    #[test]
    fn properties_become_provided_and_required_apis() {
        let Snapshot { snapshot, problems } = snapshot(CatalogId::new("demo", "olm"), 5, &catalog());
        assert_eq!(snapshot.priority, 5);
        let app = snapshot
            .bundles
            .iter()
            .find(|b| b.name == "app.v0.1.0")
            .expect("app bundle");
        assert_eq!(app.requirements.len(), 2);
        let db = snapshot
            .bundles
            .iter()
            .find(|b| b.name == "db.v1.1.0")
            .expect("db bundle");
        assert_eq!(db.provides, vec![Gvk::new("demo.io", "v1", "Database")]);
        let channel = &snapshot
            .packages
            .iter()
            .find(|p| p.name == "db")
            .expect("db")
            .channels[0];
        assert!(channel.entries[1].skip_range.is_some());
        assert_eq!(
            channel.deprecation.as_ref().map(|d| d.message.as_str()),
            Some("use fast")
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].to_string().contains("app.v0.0.1"), "{}", problems[0]);
        assert!(
            problems[0].to_string().contains("not-a-version"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn a_dependency_resolves_through_the_snapshot() {
        let id = CatalogId::new("demo", "olm");
        let index = CatalogIndex::new(vec![snapshot(id.clone(), 0, &catalog()).snapshot]);
        let resolution = index.resolve("team", &[], &[Subscription::new("app", "team", "app", id)]);
        let Outcome::Plan(plan) = &resolution.groups[0].outcome else {
            panic!("expected a plan: {:?}", resolution.groups[0].outcome)
        };
        let order: Vec<_> = plan.steps.iter().map(|s| s.bundle.as_str()).collect();
        assert_eq!(order, vec!["db.v1.1.0", "app.v0.1.0"]);
    }
}
