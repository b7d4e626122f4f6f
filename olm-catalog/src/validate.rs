//! Checks on a whole catalog, as `opm validate` makes them when it builds its model: every
//! reference resolves, every package has a usable default channel, names are unique, every bundle
//! has exactly one valid `olm.package`, and every channel's replaces chain has one head and reaches
//! all its entries. olm-rs adds checks of its own: a bundle's relation endpoints
//! (`olm-rs.endpoints`, or the `olm-rs.dev/endpoints` annotation of its CSV metadata) and its
//! actions (`olm-rs.actions`, or the `olm-rs.dev/actions` annotation) are declared at most once
//! and read.

use std::collections::{BTreeMap, BTreeSet};

use olm_api::{
    actions::{self, Actions, ActionsError},
    endpoints::{self, Declared, Endpoints, EndpointsError},
};
use serde_json::Value;

use crate::{
    model::{Bundle, Catalog, Channel, schema},
    property::Property,
};

/// How serious a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// OLM's tools refuse such a catalog.
    Error,
    /// The catalog loads, but some upgrades or channels will not behave as intended.
    Warning,
}

/// One problem found in a catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// Two `olm.package` blobs with the same name.
    #[error("package {package:?} is defined more than once")]
    DuplicatePackage {
        /// Package.
        package: String,
    },
    /// Two channels of a package with the same name.
    #[error("package {package:?}: channel {channel:?} is defined more than once")]
    DuplicateChannel {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
    },
    /// Two bundles of a package with the same name.
    #[error("package {package:?}: bundle {bundle:?} is defined more than once")]
    DuplicateBundle {
        /// Package.
        package: String,
        /// Bundle.
        bundle: String,
    },
    /// A channel or bundle of a package that has no `olm.package` blob.
    #[error("{schema} {name:?} belongs to package {package:?}, which is not defined")]
    UnknownPackage {
        /// `olm.channel`, `olm.bundle` or `olm.deprecations`.
        schema: &'static str,
        /// The missing package.
        package: String,
        /// Name of the blob that refers to it.
        name: String,
    },
    /// A package without channels.
    #[error("package {package:?} has no channels")]
    NoChannels {
        /// Package.
        package: String,
    },
    /// A package without a default channel.
    #[error("package {package:?} has no default channel")]
    NoDefaultChannel {
        /// Package.
        package: String,
    },
    /// The default channel is not a channel of the package.
    #[error("package {package:?}: default channel {channel:?} is not one of its channels")]
    DefaultChannelMissing {
        /// Package.
        package: String,
        /// The named default channel.
        channel: String,
    },
    /// A channel without entries.
    #[error("package {package:?}: channel {channel:?} has no entries")]
    EmptyChannel {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
    },
    /// A bundle listed twice in one channel.
    #[error("package {package:?}: channel {channel:?} lists bundle {bundle:?} more than once")]
    DuplicateEntry {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
        /// Bundle.
        bundle: String,
    },
    /// A channel entry names a bundle the package does not have.
    #[error("package {package:?}: channel {channel:?} lists bundle {bundle:?}, which is not in the catalog")]
    MissingBundle {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
        /// The missing bundle.
        bundle: String,
    },
    /// An empty name in an entry's `skips`.
    #[error("package {package:?}: channel {channel:?}: entry {bundle:?} has an empty skip")]
    EmptySkip {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
        /// The entry.
        bundle: String,
    },
    /// A bundle that no channel lists.
    #[error("package {package:?}: bundle {bundle:?} is in no channel")]
    BundleInNoChannel {
        /// Package.
        package: String,
        /// Bundle.
        bundle: String,
    },
    /// A bundle with no, or more than one, `olm.package` property.
    #[error(
        "package {package:?}: bundle {bundle:?} must have exactly one olm.package property, it has {count}"
    )]
    PackagePropertyCount {
        /// Package.
        package: String,
        /// Bundle.
        bundle: String,
        /// How many it has.
        count: usize,
    },
    /// A bundle whose `olm.package` names another package.
    #[error(
        "package {package:?}: bundle {bundle:?} has an olm.package property for package {property_package:?}"
    )]
    PackagePropertyMismatch {
        /// Package of the bundle blob.
        package: String,
        /// Bundle.
        bundle: String,
        /// The package the property names.
        property_package: String,
    },
    /// A bundle version that is not semver.
    #[error("package {package:?}: bundle {bundle:?} has version {version:?}, which is not semver: {reason}")]
    InvalidVersion {
        /// Package.
        package: String,
        /// Bundle.
        bundle: String,
        /// The version as written.
        version: String,
        /// The parser's reason.
        reason: String,
    },
    /// Two bundles of a package with the same version.
    #[error("package {package:?}: bundles {} have the same version {version:?}", bundles.join(", "))]
    DuplicateVersion {
        /// Package.
        package: String,
        /// Version.
        version: String,
        /// The bundles.
        bundles: Vec<String>,
    },
    /// A bundle with neither an image nor bundle objects: nothing to install.
    #[error("package {package:?}: bundle {bundle:?} has neither an image nor bundle objects")]
    NoImage {
        /// Package.
        package: String,
        /// Bundle.
        bundle: String,
    },
    /// A bundle whose relation endpoints cannot be read.
    #[error("package {package:?}: bundle {bundle:?}: {error}")]
    Endpoints {
        /// Package.
        package: String,
        /// Bundle.
        bundle: String,
        /// What is wrong with the declaration.
        error: EndpointsError,
    },
    /// A bundle that carries more than one declaration of relation endpoints.
    #[error(
        "package {package:?}: bundle {bundle:?} declares its relation endpoints {count} times ({} properties); keep one",
        endpoints::PROPERTY
    )]
    EndpointsCount {
        /// Package.
        package: String,
        /// Bundle.
        bundle: String,
        /// How many declarations it carries.
        count: usize,
    },
    /// A bundle whose actions cannot be read.
    #[error("package {package:?}: bundle {bundle:?}: {error}")]
    Actions {
        /// Package.
        package: String,
        /// Bundle.
        bundle: String,
        /// What is wrong with the declaration.
        error: ActionsError,
    },
    /// A bundle that carries more than one declaration of actions.
    #[error(
        "package {package:?}: bundle {bundle:?} declares its actions {count} times ({} properties); keep one",
        actions::PROPERTY
    )]
    ActionsCount {
        /// Package.
        package: String,
        /// Bundle.
        bundle: String,
        /// How many declarations it carries.
        count: usize,
    },
    /// A deprecation entry pointing at a channel or bundle the package does not have, or of an
    /// unknown schema.
    #[error("package {package:?}: deprecation of {schema} {name:?} refers to nothing in the package")]
    BadDeprecationReference {
        /// Package.
        package: String,
        /// Referenced schema.
        schema: String,
        /// Referenced name.
        name: String,
    },
    /// No entry of the channel is left without an incoming `replaces`/`skips` edge.
    #[error("package {package:?}: channel {channel:?} has no head (every entry is replaced or skipped)")]
    NoChannelHead {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
    },
    /// More than one entry has no incoming edge: the channel forks.
    #[error("package {package:?}: channel {channel:?} has several heads: {}", heads.join(", "))]
    MultipleChannelHeads {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
        /// The heads, sorted.
        heads: Vec<String>,
    },
    /// The replaces chain from the head loops.
    #[error("package {package:?}: channel {channel:?} has a replaces cycle: {}", chain.join(" -> "))]
    ReplacesCycle {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
        /// The chain, from the head to the repeated bundle.
        chain: Vec<String>,
    },
    /// Entries the replaces chain from the head never reaches, and no entry skips.
    #[error("package {package:?}: channel {channel:?}: no upgrade path from the head reaches {}", bundles.join(", "))]
    StrandedBundles {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
        /// The bundles, sorted.
        bundles: Vec<String>,
    },
}

impl ValidationError {
    /// How serious it is. A forked channel (several heads) or stranded entries are warnings: OLM v0
    /// installs from such a catalog and only a subscription to that channel fails to resolve, while
    /// `opm validate` rejects it.
    pub fn severity(&self) -> Severity {
        match self {
            Self::MultipleChannelHeads { .. } | Self::StrandedBundles { .. } => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// The package the problem is in.
    pub fn package(&self) -> &str {
        match self {
            Self::DuplicatePackage { package }
            | Self::DuplicateChannel { package, .. }
            | Self::DuplicateBundle { package, .. }
            | Self::UnknownPackage { package, .. }
            | Self::NoChannels { package }
            | Self::NoDefaultChannel { package }
            | Self::DefaultChannelMissing { package, .. }
            | Self::EmptyChannel { package, .. }
            | Self::DuplicateEntry { package, .. }
            | Self::MissingBundle { package, .. }
            | Self::EmptySkip { package, .. }
            | Self::BundleInNoChannel { package, .. }
            | Self::PackagePropertyCount { package, .. }
            | Self::PackagePropertyMismatch { package, .. }
            | Self::InvalidVersion { package, .. }
            | Self::DuplicateVersion { package, .. }
            | Self::NoImage { package, .. }
            | Self::Endpoints { package, .. }
            | Self::EndpointsCount { package, .. }
            | Self::Actions { package, .. }
            | Self::ActionsCount { package, .. }
            | Self::BadDeprecationReference { package, .. }
            | Self::NoChannelHead { package, .. }
            | Self::MultipleChannelHeads { package, .. }
            | Self::ReplacesCycle { package, .. }
            | Self::StrandedBundles { package, .. } => package,
        }
    }
}

/// Every problem of `catalog`, errors and warnings (see [`ValidationError::severity`]), in a
/// deterministic order.
pub fn validate(catalog: &Catalog) -> Vec<ValidationError> {
    let mut out = Vec::new();
    let names = Names::of(catalog, &mut out);
    check_packages(catalog, &names, &mut out);
    let in_channel = check_channels(catalog, &names, &mut out);
    check_bundles(catalog, &in_channel, &mut out);
    check_deprecations(catalog, &names, &mut out);
    out
}

/// How many times each package, channel and bundle is defined.
struct Names<'a> {
    packages: BTreeMap<&'a str, usize>,
    channels: BTreeMap<(&'a str, &'a str), Vec<&'a Channel>>,
    bundles: BTreeMap<(&'a str, &'a str), usize>,
}

impl<'a> Names<'a> {
    /// Counts the names of `catalog`; reports those defined twice, and channels and
    /// bundles of packages not defined.
    fn of(catalog: &'a Catalog, out: &mut Vec<ValidationError>) -> Names<'a> {
        let mut packages: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &catalog.packages {
            *packages.entry(&p.name).or_default() += 1;
        }
        for (name, n) in &packages {
            if *n > 1 {
                out.push(ValidationError::DuplicatePackage {
                    package: name.to_string(),
                });
            }
        }
        let unknown = |schema: &'static str, package: &str, name: &str| ValidationError::UnknownPackage {
            schema,
            package: package.to_owned(),
            name: name.to_owned(),
        };
        let mut channels: BTreeMap<(&str, &str), Vec<&Channel>> = BTreeMap::new();
        for c in &catalog.channels {
            channels.entry((&c.package, &c.name)).or_default().push(c);
            if !packages.contains_key(c.package.as_str()) {
                out.push(unknown(schema::CHANNEL, &c.package, &c.name));
            }
        }
        let mut bundles: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for b in &catalog.bundles {
            *bundles.entry((&b.package, &b.name)).or_default() += 1;
            if !packages.contains_key(b.package.as_str()) {
                out.push(unknown(schema::BUNDLE, &b.package, &b.name));
            }
        }
        for ((package, channel), cs) in &channels {
            if cs.len() > 1 {
                out.push(ValidationError::DuplicateChannel {
                    package: package.to_string(),
                    channel: channel.to_string(),
                });
            }
        }
        for ((package, bundle), n) in &bundles {
            if *n > 1 {
                out.push(ValidationError::DuplicateBundle {
                    package: package.to_string(),
                    bundle: bundle.to_string(),
                });
            }
        }
        Names {
            packages,
            channels,
            bundles,
        }
    }
}

/// Packages: channels and default channel.
fn check_packages(catalog: &Catalog, names: &Names<'_>, out: &mut Vec<ValidationError>) {
    for p in &catalog.packages {
        let has = |c: &str| names.channels.contains_key(&(p.name.as_str(), c));
        if !names.channels.keys().any(|(pkg, _)| *pkg == p.name) {
            out.push(ValidationError::NoChannels {
                package: p.name.clone(),
            });
        }
        match &p.default_channel {
            None => out.push(ValidationError::NoDefaultChannel {
                package: p.name.clone(),
            }),
            Some(d) if !has(d) => out.push(ValidationError::DefaultChannelMissing {
                package: p.name.clone(),
                channel: d.clone(),
            }),
            Some(_) => {}
        }
    }
}

/// Channels: entries resolve, and the replaces chain. Returns the (package,
/// bundle) of every entry.
fn check_channels<'a>(
    catalog: &'a Catalog,
    names: &Names<'_>,
    out: &mut Vec<ValidationError>,
) -> BTreeSet<(&'a str, &'a str)> {
    let mut in_channel: BTreeSet<(&str, &str)> = BTreeSet::new();
    for c in &catalog.channels {
        let (package, channel) = (c.package.clone(), c.name.clone());
        if c.entries.is_empty() {
            out.push(ValidationError::EmptyChannel { package, channel });
            continue;
        }
        let mut entry_names = BTreeSet::new();
        for e in &c.entries {
            in_channel.insert((&c.package, &e.name));
            let (package, channel, bundle) = (package.clone(), channel.clone(), e.name.clone());
            if !entry_names.insert(e.name.as_str()) {
                out.push(ValidationError::DuplicateEntry {
                    package: package.clone(),
                    channel: channel.clone(),
                    bundle: bundle.clone(),
                });
            }
            if !names.bundles.contains_key(&(c.package.as_str(), e.name.as_str())) {
                out.push(ValidationError::MissingBundle {
                    package: package.clone(),
                    channel: channel.clone(),
                    bundle: bundle.clone(),
                });
            }
            if e.skips.iter().any(String::is_empty) {
                out.push(ValidationError::EmptySkip {
                    package,
                    channel,
                    bundle,
                });
            }
        }
        check_replaces_chain(c, out);
    }
    in_channel
}

/// Bundles: channel membership (`in_channel`), olm.package, version, image; and
/// versions shared by bundles of a package.
fn check_bundles(catalog: &Catalog, in_channel: &BTreeSet<(&str, &str)>, out: &mut Vec<ValidationError>) {
    let mut versions: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for b in &catalog.bundles {
        let (package, bundle) = (b.package.clone(), b.name.clone());
        if !in_channel.contains(&(b.package.as_str(), b.name.as_str())) {
            out.push(ValidationError::BundleInNoChannel {
                package: package.clone(),
                bundle: bundle.clone(),
            });
        }
        if let Some(version) = check_package_property(b, out) {
            versions.entry((&b.package, version)).or_default().insert(&b.name);
        }
        if b.image.is_empty()
            && !b
                .properties
                .iter()
                .any(|p| matches!(p, Property::BundleObject(_)))
        {
            out.push(ValidationError::NoImage { package, bundle });
        }
        check_endpoints(b, out);
        check_actions(b, out);
    }
    for ((package, version), names) in versions {
        if names.len() > 1 {
            out.push(ValidationError::DuplicateVersion {
                package: package.to_owned(),
                version: version.to_owned(),
                bundles: names.into_iter().map(str::to_owned).collect(),
            });
        }
    }
}

/// A bundle has exactly one `olm.package` property, of its own package, with a
/// semver version; returns that version when valid.
fn check_package_property<'a>(b: &'a Bundle, out: &mut Vec<ValidationError>) -> Option<&'a str> {
    let (package, bundle) = (b.package.clone(), b.name.clone());
    let pkg_props: Vec<_> = b
        .properties
        .iter()
        .filter_map(|p| match p {
            Property::Package(p) => Some(p),
            _ => None,
        })
        .collect();
    if pkg_props.len() != 1 {
        out.push(ValidationError::PackagePropertyCount {
            package: package.clone(),
            bundle: bundle.clone(),
            count: pkg_props.len(),
        });
    }
    let p = pkg_props.first()?;
    if p.package_name != b.package {
        out.push(ValidationError::PackagePropertyMismatch {
            package: package.clone(),
            bundle: bundle.clone(),
            property_package: p.package_name.clone(),
        });
    }
    match p.version.parse_error() {
        Some(e) => {
            out.push(ValidationError::InvalidVersion {
                package,
                bundle,
                version: p.version.to_string(),
                reason: e.to_string(),
            });
            None
        }
        None => Some(p.version.as_str()),
    }
}

/// olm-rs's relation endpoints: the bundle's `olm-rs.endpoints` properties, or
/// else the annotation of its `olm.csv.metadata` (a catalog rendered by `opm`
/// carries only that), declared at most once and read without error.
fn check_endpoints(b: &Bundle, out: &mut Vec<ValidationError>) {
    let declared = declarations(b, endpoints::PROPERTY, endpoints::ANNOTATION);
    if declared.len() > 1 {
        out.push(ValidationError::EndpointsCount {
            package: b.package.clone(),
            bundle: b.name.clone(),
            count: declared.len(),
        });
    }
    for (from, value) in declared {
        if let Err(error) = Endpoints::from_value(&b.name, from, value) {
            out.push(ValidationError::Endpoints {
                package: b.package.clone(),
                bundle: b.name.clone(),
                error,
            });
        }
    }
}

/// olm-rs's actions, read as the endpoints are (see [`check_endpoints`]).
fn check_actions(b: &Bundle, out: &mut Vec<ValidationError>) {
    let declared = declarations(b, actions::PROPERTY, actions::ANNOTATION);
    if declared.len() > 1 {
        out.push(ValidationError::ActionsCount {
            package: b.package.clone(),
            bundle: b.name.clone(),
            count: declared.len(),
        });
    }
    for (from, value) in declared {
        let from = match from {
            Declared::Property => actions::Declared::Property,
            Declared::Annotation => actions::Declared::Annotation,
        };
        if let Err(error) = Actions::from_value(&b.name, from, value) {
            out.push(ValidationError::Actions {
                package: b.package.clone(),
                bundle: b.name.clone(),
                error,
            });
        }
    }
}

/// The declarations of olm-rs's `property`, or else of the `annotation` of the
/// bundle's `olm.csv.metadata` (a catalog rendered by `opm` carries only that).
fn declarations(b: &Bundle, property: &str, annotation: &str) -> Vec<(Declared, Value)> {
    let declared: Vec<(Declared, Value)> = b
        .properties_of(property)
        .filter_map(|p| match p {
            Property::Other { value, .. } => Some((Declared::Property, value.to_value())),
            _ => None,
        })
        .collect();
    if !declared.is_empty() {
        return declared;
    }
    csv_metadata_annotation(b, annotation)
        .map(|text| vec![(Declared::Annotation, Value::String(text))])
        .unwrap_or_default()
}

/// A CSV annotation of the bundle's `olm.csv.metadata`, if it has both.
fn csv_metadata_annotation(b: &Bundle, key: &str) -> Option<String> {
    b.properties.iter().find_map(|p| match p {
        Property::CsvMetadata(metadata) => metadata
            .to_value()
            .get("annotations")?
            .get(key)?
            .as_str()
            .map(str::to_owned),
        _ => None,
    })
}

/// Deprecations: of a defined package, each referring to its package, one of its
/// channels or one of its bundles.
fn check_deprecations(catalog: &Catalog, names: &Names<'_>, out: &mut Vec<ValidationError>) {
    for d in &catalog.deprecations {
        if !names.packages.contains_key(d.package.as_str()) {
            out.push(ValidationError::UnknownPackage {
                schema: schema::DEPRECATIONS,
                package: d.package.clone(),
                name: d.package.clone(),
            });
            continue;
        }
        for e in &d.entries {
            let name = e.reference.name.clone().unwrap_or_default();
            let ok = match e.reference.schema.as_str() {
                schema::PACKAGE => true,
                schema::CHANNEL => names.channels.contains_key(&(d.package.as_str(), name.as_str())),
                schema::BUNDLE => names.bundles.contains_key(&(d.package.as_str(), name.as_str())),
                _ => false,
            };
            if !ok {
                out.push(ValidationError::BadDeprecationReference {
                    package: d.package.clone(),
                    schema: e.reference.schema.clone(),
                    name,
                });
            }
        }
    }
}

/// One head, no cycle, and every entry either on the replaces chain from the head or skipped; the
/// tail may replace a bundle that is not in the channel.
fn check_replaces_chain(c: &Channel, out: &mut Vec<ValidationError>) {
    let (package, channel) = (c.package.clone(), c.name.clone());
    let mut incoming: BTreeSet<&str> = BTreeSet::new();
    let mut skipped: BTreeSet<&str> = BTreeSet::new();
    for e in &c.entries {
        if let Some(r) = &e.replaces {
            incoming.insert(r);
        }
        for s in &e.skips {
            incoming.insert(s);
            skipped.insert(s);
        }
    }
    let heads: BTreeSet<&str> = c
        .entries
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| !incoming.contains(n))
        .collect();
    let head = match heads.len() {
        0 => {
            out.push(ValidationError::NoChannelHead { package, channel });
            return;
        }
        1 => heads.first().copied().unwrap_or_default(),
        _ => {
            out.push(ValidationError::MultipleChannelHeads {
                package,
                channel,
                heads: heads.iter().map(|h| h.to_string()).collect(),
            });
            return;
        }
    };
    let by_name: BTreeMap<&str, &crate::model::ChannelEntry> =
        c.entries.iter().map(|e| (e.name.as_str(), e)).collect();
    let mut chain = vec![head];
    let mut on_chain: BTreeSet<&str> = BTreeSet::from([head]);
    let mut cur = by_name.get(head).copied();
    while let Some(e) = cur {
        let Some(next) = e.replaces.as_deref() else { break };
        if skipped.contains(next) {
            break;
        }
        chain.push(next);
        if !on_chain.insert(next) {
            out.push(ValidationError::ReplacesCycle {
                package,
                channel,
                chain: chain.iter().map(|s| s.to_string()).collect(),
            });
            return;
        }
        cur = by_name.get(next).copied();
    }
    let stranded: Vec<String> = by_name
        .keys()
        .filter(|n| !on_chain.contains(*n) && !skipped.contains(*n))
        .map(|n| n.to_string())
        .collect();
    if !stranded.is_empty() {
        out.push(ValidationError::StrandedBundles {
            package,
            channel,
            bundles: stranded,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fbc::parse_str;

    fn errors(yaml: &str) -> Vec<String> {
        validate(&parse_str("t.yaml", yaml).unwrap())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const GOOD: &str = r#"
schema: olm.package
name: p
defaultChannel: stable
---
schema: olm.channel
name: stable
package: p
entries:
  - {name: p.v2, replaces: p.v1, skips: [p.v1.5]}
  - {name: p.v1, replaces: p.v0}
---
schema: olm.bundle
name: p.v1
package: p
image: img:1
properties: [{type: olm.package, value: {packageName: p, version: 1.0.0}}]
---
schema: olm.bundle
name: p.v2
package: p
image: img:2
properties: [{type: olm.package, value: {packageName: p, version: 2.0.0}}]
"#;

    #[test]
    fn a_sound_catalog_has_no_problem() {
        assert_eq!(errors(GOOD), Vec::<String>::new());
    }

    #[test]
    fn each_problem_is_reported() {
        let bad = GOOD.replace("defaultChannel: stable", "defaultChannel: fast")
            + r#"
---
schema: olm.channel
name: alpha
package: p
entries: [{name: p.v3}, {name: p.v2}]
---
schema: olm.bundle
name: p.v2
package: p
image: img:2
properties: [{type: olm.package, value: {packageName: q, version: 2.0.0}}]
---
schema: olm.bundle
name: p.v4
package: p
properties: []
---
schema: olm.bundle
name: p.v5
package: p
image: img:5
properties: [{type: olm.package, value: {packageName: p, version: v5}}]
---
schema: olm.channel
name: loop
package: p
entries: [{name: p.v1, replaces: p.v2}, {name: p.v2, replaces: p.v1}, {name: p.v5, replaces: p.v1}]
---
schema: olm.bundle
name: x.v1
package: x
image: img
properties: [{type: olm.package, value: {packageName: x, version: 1.0.0}}]
---
schema: olm.deprecations
package: p
entries: [{reference: {schema: olm.channel, name: beta}, message: gone}]
"#;
        let got = errors(&bad);
        let want = [
            "olm.bundle \"x.v1\" belongs to package \"x\", which is not defined",
            "package \"p\": bundle \"p.v2\" is defined more than once",
            "package \"p\": default channel \"fast\" is not one of its channels",
            "package \"p\": channel \"alpha\" lists bundle \"p.v3\", which is not in the catalog",
            "package \"p\": channel \"alpha\" has several heads: p.v2, p.v3",
            "package \"p\": channel \"loop\" has a replaces cycle: p.v5 -> p.v1 -> p.v2 -> p.v1",
            "package \"p\": bundle \"p.v2\" has an olm.package property for package \"q\"",
            "package \"p\": bundle \"p.v4\" is in no channel",
            "package \"p\": bundle \"p.v4\" must have exactly one olm.package property, it has 0",
            "package \"p\": bundle \"p.v4\" has neither an image nor bundle objects",
            "package \"p\": bundle \"p.v5\" has version \"v5\", which is not semver: unexpected character 'v' while parsing major version number",
            "package \"p\": deprecation of olm.channel \"beta\" refers to nothing in the package",
            "package \"x\": bundle \"x.v1\" is in no channel",
        ];
        for w in want {
            assert!(got.iter().any(|g| g == w), "missing {w:?} in {got:#?}");
        }
        assert_eq!(got.len(), want.len(), "{got:#?}");
    }

    #[test]
    fn missing_default_channel_and_stranded_entries() {
        let c = GOOD
            .replace("defaultChannel: stable\n", "")
            .replace("replaces: p.v1, skips: [p.v1.5]", "replaces: p.v0");
        let v = validate(&parse_str("t.yaml", &c).unwrap());
        let msgs: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert!(
            msgs.contains(&"package \"p\" has no default channel".to_owned()),
            "{msgs:?}"
        );
        // p.v2 and p.v1 both replace p.v0: two heads, a warning.
        assert!(
            v.iter()
                .any(|e| matches!(e, ValidationError::MultipleChannelHeads { .. })
                    && e.severity() == Severity::Warning)
        );
    }

    #[test]
    fn relation_endpoints_are_checked_per_bundle() {
        let with = |properties: &str| {
            GOOD.replace(
                "properties: [{type: olm.package, value: {packageName: p, version: 2.0.0}}]",
                &format!("properties: [{{type: olm.package, value: {{packageName: p, version: 2.0.0}}}}, {properties}]"),
            )
        };
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "a sound declaration",
                "{type: olm-rs.endpoints, value: {provides: {db: {interface: postgresql, limit: 2}}}}",
                &[],
            ),
            (
                "an empty interface",
                "{type: olm-rs.endpoints, value: {provides: {db: {interface: ''}}}}",
                &[
                    r#"package "p": bundle "p.v2": CSV p.v2: property olm-rs.endpoints: provides endpoint "db" has an empty interface; name the interface it speaks"#,
                ],
            ),
            (
                "a name in two roles",
                "{type: olm-rs.endpoints, value: {provides: {db: {interface: a}}, requires: {db: {interface: a}}}}",
                &[
                    r#"package "p": bundle "p.v2": CSV p.v2: property olm-rs.endpoints: endpoint "db" is declared in both provides and requires; endpoint names are unique across provides, requires and peers"#,
                ],
            ),
            (
                "text that is not YAML, as a render carries it",
                "{type: olm-rs.endpoints, value: 'provides: ['}",
                &[r#"package "p": bundle "p.v2": CSV p.v2: property olm-rs.endpoints: not YAML or JSON"#],
            ),
            (
                "two declarations",
                "{type: olm-rs.endpoints, value: {peers: {a: {interface: a}}}}, {type: olm-rs.endpoints, value: {peers: {b: {interface: b}}}}",
                &[
                    r#"package "p": bundle "p.v2" declares its relation endpoints 2 times (olm-rs.endpoints properties); keep one"#,
                ],
            ),
            (
                "the annotation of the CSV metadata, as opm renders it",
                r#"{type: olm.csv.metadata, value: {annotations: {olm-rs.dev/endpoints: "peers: {ring: {interface: r, scope: machine}}"}}}"#,
                &[
                    r#"package "p": bundle "p.v2": CSV p.v2: annotation olm-rs.dev/endpoints: peers endpoint "ring" has scope "machine"; scope is global (the default) or container"#,
                ],
            ),
        ];
        for (what, properties, want) in cases {
            let got = errors(&with(properties));
            assert_eq!(got.len(), want.len(), "{what}: {got:?}");
            for (got, want) in got.iter().zip(want.iter()) {
                assert!(got.starts_with(want), "{what}: {got}");
            }
        }
    }

    #[test]
    fn actions_are_checked_per_bundle() {
        let with = |properties: &str| {
            GOOD.replace(
                "properties: [{type: olm.package, value: {packageName: p, version: 2.0.0}}]",
                &format!("properties: [{{type: olm.package, value: {{packageName: p, version: 2.0.0}}}}, {properties}]"),
            )
        };
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "a sound declaration",
                "{type: olm-rs.actions, value: {backup: {description: Back up., params: {path: {type: string}}, required: [path]}}}",
                &[],
            ),
            (
                "a required parameter not declared",
                "{type: olm-rs.actions, value: {backup: {params: {path: {type: string}}, required: [pth]}}}",
                &[
                    r#"package "p": bundle "p.v2": CSV p.v2: property olm-rs.actions: action "backup": parameter schema at `required`: "pth" is required but not declared"#,
                ],
            ),
            (
                "a bad action name",
                "{type: olm-rs.actions, value: {Backup: {}}}",
                &[
                    r#"package "p": bundle "p.v2": CSV p.v2: property olm-rs.actions: action name "Backup" is not valid"#,
                ],
            ),
            (
                "text that is not YAML, as a render carries it",
                "{type: olm-rs.actions, value: 'backup: ['}",
                &[r#"package "p": bundle "p.v2": CSV p.v2: property olm-rs.actions: not YAML or JSON"#],
            ),
            (
                "two declarations",
                "{type: olm-rs.actions, value: {a: {}}}, {type: olm-rs.actions, value: {b: {}}}",
                &[
                    r#"package "p": bundle "p.v2" declares its actions 2 times (olm-rs.actions properties); keep one"#,
                ],
            ),
            (
                "the annotation of the CSV metadata, as opm renders it",
                r#"{type: olm.csv.metadata, value: {annotations: {olm-rs.dev/actions: "backup: {params: {path: {type: text}}}"}}}"#,
                &[
                    r#"package "p": bundle "p.v2": CSV p.v2: annotation olm-rs.dev/actions: action "backup": parameter schema at `params.path.type`: unknown type "text""#,
                ],
            ),
        ];
        for (what, properties, want) in cases {
            let got = errors(&with(properties));
            assert_eq!(got.len(), want.len(), "{what}: {got:?}");
            for (got, want) in got.iter().zip(want.iter()) {
                assert!(got.starts_with(want), "{what}: {got}");
            }
        }
    }
}
