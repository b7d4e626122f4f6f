//! `catalogs`, `packages` and `show`: what the visible catalogs offer.

use std::fmt::Write as _;

use catalog_operator::catalogs::Health;
use olm_catalog::{Catalog, Channel};
use serde::Serialize;

use crate::{
    Env, Output,
    catalogs::{self, Catalogs, Scope},
    error::Error,
    objects::{self, BundleFacts},
    plan,
    table::{Cell, Table, Tone},
};

fn scope(env: &Env<'_>) -> Scope {
    Scope::Namespaces(vec![env.namespace.clone(), env.global_namespace.clone()])
}

fn print(
    env: &mut Env<'_>,
    output: Output,
    value: &impl Serialize,
    table: impl FnOnce() -> String,
) -> Result<(), Error> {
    let text = match output {
        Output::Table => table(),
        Output::Yaml => serde_saphyr::to_string(value).map_err(|e| Error::Render(e.to_string()))?,
        Output::Json => serde_json::to_string_pretty(value).map_err(|e| Error::Render(e.to_string()))? + "\n",
    };
    env.out.write_all(text.as_bytes())?;
    Ok(())
}

/// One catalog as `catalogs` lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// grpc, configmap or image.
    pub source: String,
    /// Address, ConfigMap or image.
    pub target: String,
    /// Priority.
    pub priority: i32,
    /// The catalog-operator's last observed state.
    pub state: String,
    /// Whether this command could read it, and why not.
    pub readable: String,
    /// Its packages, when read.
    pub packages: usize,
}

/// `catalogs`.
pub async fn catalogs(env: &mut Env<'_>, output: Output) -> Result<(), Error> {
    let loaded = catalogs::load(&env.client, &scope(env)).await?;
    let infos: Vec<CatalogInfo> = loaded
        .views
        .iter()
        .map(|view| CatalogInfo {
            namespace: view.id.namespace.clone(),
            name: view.id.name.clone(),
            source: view.origin.kind().to_owned(),
            target: view.origin.target().to_owned(),
            priority: view.source.spec.priority.unwrap_or(0),
            state: view
                .operator_state()
                .map(|s| format!("{s:?}").to_uppercase())
                .unwrap_or_default(),
            readable: match &view.health {
                Health::Healthy => "yes".to_owned(),
                Health::Unhealthy(message) => message.clone(),
                Health::Pending => "not read".to_owned(),
            },
            packages: loaded.content(&view.id).map_or(0, |c| c.catalog.packages.len()),
        })
        .collect();
    let colour = env.colour;
    let (namespace, global) = (env.namespace.clone(), env.global_namespace.clone());
    print(env, output, &infos, || {
        if infos.is_empty() {
            return format!("No CatalogSources in namespaces {namespace} and {global}.\n");
        }
        let mut table = Table::new(&[
            "NAMESPACE",
            "NAME",
            "SOURCE",
            "ADDRESS/CONFIGMAP/IMAGE",
            "PRIORITY",
            "STATE",
            "PACKAGES",
        ]);
        for info in &infos {
            let tone = if info.state == "READY" {
                Tone::Good
            } else {
                Tone::Bad
            };
            let packages = if info.readable == "yes" {
                Cell::from(info.packages.to_string())
            } else {
                Cell::toned(format!("unreadable here: {}", info.readable), Tone::Bad)
            };
            table.row(vec![
                info.namespace.clone().into(),
                info.name.clone().into(),
                info.source.clone().into(),
                info.target.clone().into(),
                info.priority.to_string().into(),
                Cell::toned(info.state.clone(), tone),
                packages,
            ]);
        }
        table.render(colour)
    })
}

/// The head of a channel: the entry nothing else in it replaces or skips (the highest version if several).
pub fn channel_head<'a>(catalog: &'a Catalog, channel: &'a Channel) -> Option<&'a str> {
    let replaced: Vec<&str> = channel
        .entries
        .iter()
        .flat_map(|e| e.replaces.iter().chain(e.skips.iter()).map(String::as_str))
        .collect();
    let version = |name: &str| {
        catalog
            .bundle(&channel.package, name)
            .and_then(|b| b.version())
            .and_then(|v| semver::Version::parse(v.as_str()).ok())
    };
    channel
        .entries
        .iter()
        .map(|e| e.name.as_str())
        .filter(|name| !replaced.contains(name))
        .max_by(|a, b| version(a).cmp(&version(b)))
}

/// One package as `packages` lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageInfo {
    /// The package.
    pub name: String,
    /// Its catalog, `namespace/name`.
    pub catalog: String,
    /// Its default channel.
    pub default_channel: String,
    /// Its channels.
    pub channels: Vec<String>,
    /// The version at the head of the default channel.
    pub latest: String,
}

fn package_infos(catalogs: &Catalogs, only: Option<&olm_resolver::model::CatalogId>) -> Vec<PackageInfo> {
    let mut infos = Vec::new();
    for view in &catalogs.views {
        if only.is_some_and(|id| id != &view.id) {
            continue;
        }
        let Some(content) = catalogs.content(&view.id) else {
            continue;
        };
        let catalog = &content.catalog;
        for package in &catalog.packages {
            let default_channel = package.default_channel.clone().unwrap_or_default();
            let latest = catalog
                .channels_of(&package.name)
                .find(|c| c.name == default_channel)
                .and_then(|c| channel_head(catalog, c))
                .and_then(|head| catalog.bundle(&package.name, head))
                .and_then(|b| b.version().map(|v| v.as_str().to_owned()))
                .unwrap_or_default();
            infos.push(PackageInfo {
                name: package.name.clone(),
                catalog: view.id.to_string(),
                default_channel,
                channels: catalog
                    .channels_of(&package.name)
                    .map(|c| c.name.clone())
                    .collect(),
                latest,
            });
        }
    }
    infos.sort_by(|a, b| (&a.name, &a.catalog).cmp(&(&b.name, &b.catalog)));
    infos
}

/// `packages`.
pub async fn packages(env: &mut Env<'_>, catalog: Option<&str>, output: Output) -> Result<(), Error> {
    let loaded = catalogs::load(&env.client, &scope(env)).await?;
    let only = match catalog {
        Some(wanted) => Some(plan::named_catalog(
            &loaded,
            wanted,
            &env.namespace,
            &env.global_namespace,
        )?),
        None => None,
    };
    let infos = package_infos(&loaded, only.as_ref());
    let unreadable = loaded.unhealthy();
    let colour = env.colour;
    print(env, output, &infos, || {
        let mut table = Table::new(&["PACKAGE", "CATALOG", "DEFAULT CHANNEL", "CHANNELS", "LATEST"]);
        for info in &infos {
            table.row(vec![
                info.name.clone().into(),
                info.catalog.clone().into(),
                info.default_channel.clone().into(),
                info.channels.join(",").into(),
                info.latest.clone().into(),
            ]);
        }
        let mut text = table.render(colour);
        if !unreadable.is_empty() {
            let _ = writeln!(
                text,
                "Catalogs that could not be read (`kubectl olm catalogs` says why): {}",
                unreadable.join(", ")
            );
        }
        text
    })
}

/// One channel of a package.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelInfo {
    /// The channel.
    pub name: String,
    /// Its head bundle.
    pub head: String,
    /// The versions in it, oldest first.
    pub versions: Vec<String>,
}

/// What `show` prints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageDetails {
    /// The package.
    pub name: String,
    /// Its catalog.
    pub catalog: String,
    /// Its default channel.
    pub default_channel: String,
    /// Its description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its channels.
    pub channels: Vec<ChannelInfo>,
    /// Every bundle, newest first.
    pub bundles: Vec<BundleFacts>,
}

/// The details of `package` in `catalog` (pure).
pub fn details(catalog: &Catalog, catalog_name: &str, package: &str) -> Option<PackageDetails> {
    let found = catalog.package(package)?;
    let version_of = |name: &str| {
        catalog
            .bundle(package, name)
            .and_then(|b| b.version().map(|v| v.as_str().to_owned()))
            .unwrap_or_default()
    };
    let channels = catalog
        .channels_of(package)
        .map(|channel| {
            let mut versions: Vec<String> = channel.entries.iter().map(|e| version_of(&e.name)).collect();
            versions.sort_by(|a, b| {
                semver::Version::parse(a)
                    .ok()
                    .cmp(&semver::Version::parse(b).ok())
            });
            ChannelInfo {
                name: channel.name.clone(),
                head: channel_head(catalog, channel).unwrap_or_default().to_owned(),
                versions,
            }
        })
        .collect();
    let mut bundles: Vec<BundleFacts> = catalog.bundles_of(package).map(objects::bundle_facts).collect();
    bundles.sort_by(|a, b| {
        semver::Version::parse(&b.version)
            .ok()
            .cmp(&semver::Version::parse(&a.version).ok())
    });
    Some(PackageDetails {
        name: package.to_owned(),
        catalog: catalog_name.to_owned(),
        default_channel: found.default_channel.clone().unwrap_or_default(),
        description: found.description.clone().filter(|d| !d.is_empty()),
        channels,
        bundles,
    })
}

/// The details as text (pure).
pub fn render_details(details: &PackageDetails) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Package:          {}", details.name);
    let _ = writeln!(out, "Catalog:          {}", details.catalog);
    let _ = writeln!(out, "Default channel:  {}", details.default_channel);
    if let Some(description) = &details.description {
        let _ = writeln!(
            out,
            "Description:      {}",
            description.lines().next().unwrap_or_default()
        );
    }
    let _ = writeln!(out, "\nChannels:");
    let mut channels = Table::new(&["  CHANNEL", "HEAD", "VERSIONS"]);
    for channel in &details.channels {
        channels.row(vec![
            format!("  {}", channel.name).into(),
            channel.head.clone().into(),
            channel.versions.join(", ").into(),
        ]);
    }
    out.push_str(&channels.render(false));
    let _ = writeln!(out, "\nBundles:");
    let none = || "-".to_owned();
    let list = |items: &[String]| {
        if items.is_empty() {
            none()
        } else {
            items.join(", ")
        }
    };
    for bundle in &details.bundles {
        let _ = writeln!(out, "  {} ({})", bundle.name, bundle.version);
        let modes = bundle.install_modes.as_ref().map_or_else(
            || "not in the catalog".to_owned(),
            |modes| {
                modes
                    .iter()
                    .map(|m| format!("{m:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        );
        let _ = writeln!(out, "    Install modes:  {modes}");
        let _ = writeln!(out, "    Provides APIs:  {}", list(&bundle.provided_apis));
        let _ = writeln!(out, "    Requires APIs:  {}", list(&bundle.required_apis));
        let _ = writeln!(out, "    Dependencies:   {}", list(&bundle.dependencies));
    }
    out
}

/// `show`.
pub async fn show(
    env: &mut Env<'_>,
    package: &str,
    catalog: Option<&str>,
    output: Output,
) -> Result<(), Error> {
    let loaded = catalogs::load(&env.client, &scope(env)).await?;
    let id = plan::choose_catalog(&loaded, package, catalog, &env.namespace, &env.global_namespace)?;
    let content = loaded
        .content(&id)
        .ok_or_else(|| Error::Failed(format!("catalog {id} has no content")))?;
    let details =
        details(&content.catalog, &id.to_string(), package).ok_or_else(|| Error::UnknownPackage {
            package: package.to_owned(),
            namespace: env.namespace.clone(),
            suggestions: Vec::new(),
            unhealthy: Vec::new(),
        })?;
    print(env, output, &details, || render_details(&details))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn demo() -> Catalog {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalogs/demo-bundles");
        catalog_operator::source::load(&path).expect("the demo catalog").0
    }

    #[test]
    fn show_lists_channels_versions_apis_and_dependencies() {
        let catalog = demo();
        let details = details(&catalog, "olm/demo", "demo-app").expect("demo-app");
        let text = render_details(&details);
        assert!(text.contains("Default channel:  stable"), "{text}");
        assert!(text.contains("demo-app.v0.2.0 (0.2.0)"), "{text}");
        assert!(text.contains("Dependencies:   demo-db"), "{text}");
        assert!(text.contains("Install modes:  "), "{text}");
        let db = super::details(&catalog, "olm/demo", "demo-db").expect("demo-db");
        assert!(
            db.bundles[0]
                .provided_apis
                .iter()
                .any(|a| a.starts_with("Database.")),
            "{:?}",
            db.bundles[0]
        );
        let stable = db
            .channels
            .iter()
            .find(|c| c.name == "stable")
            .expect("a stable channel");
        assert!(stable.head.starts_with("demo-db.v"), "{stable:?}");
    }
}
