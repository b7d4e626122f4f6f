//! `catalogs`, `packages` and `show`: what the visible catalogs offer, as the
//! cluster's catalog-operator serves it (CatalogSources and PackageManifests).

use std::fmt::Write as _;

use olm_api::{
    actions::Actions,
    endpoints::{Endpoints, Role, Scope},
    packages::{PackageChannel, PackageManifest},
    v1alpha1::InstallModeType,
};
use serde::Serialize;
use serde_json::Value;

use crate::{
    Env, Output,
    catalogs::{self, CatalogId, Catalogs},
    error::Error,
    plan,
    table::{Cell, Table, Tone},
};

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
    /// What the catalog-operator says of it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The packages the catalog-operator serves from it.
    pub packages: usize,
}

/// The rows of `catalogs` (pure).
pub fn catalog_infos(catalogs: &Catalogs) -> Vec<CatalogInfo> {
    catalogs
        .views
        .iter()
        .map(|view| {
            let origin = catalogs::Origin::of(&view.source);
            CatalogInfo {
                namespace: view.id.namespace.clone(),
                name: view.id.name.clone(),
                source: origin.kind().to_owned(),
                target: origin.target().to_owned(),
                priority: view.priority(),
                state: view
                    .operator_state()
                    .map(|s| format!("{s:?}").to_uppercase())
                    .unwrap_or_default(),
                message: view.message(),
                packages: catalogs.packages_of(&view.id).len(),
            }
        })
        .collect()
}

/// `catalogs`.
pub async fn catalogs(env: &mut Env<'_>, output: Output) -> Result<(), Error> {
    let loaded = catalogs::load(&env.client, &env.namespace, &env.global_namespace).await?;
    let infos = catalog_infos(&loaded);
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
            let packages = if info.packages == 0 && !info.message.is_empty() {
                Cell::toned(format!("0: {}", info.message), Tone::Bad)
            } else {
                Cell::from(info.packages.to_string())
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

/// What `packages` lists of one PackageManifest (pure).
pub fn package_info(manifest: &PackageManifest) -> PackageInfo {
    let status = &manifest.status;
    PackageInfo {
        name: status.package_name.clone(),
        catalog: CatalogId::of_manifest(manifest).to_string(),
        default_channel: status.default_channel.clone(),
        channels: status.channels.iter().map(|c| c.name.clone()).collect(),
        latest: catalogs::channel(manifest, &status.default_channel)
            .map(catalogs::head_version)
            .unwrap_or_default(),
    }
}

/// The rows of `packages`, of catalog `only` if given (pure).
pub fn package_infos(catalogs: &Catalogs, only: Option<&CatalogId>) -> Vec<PackageInfo> {
    let mut infos: Vec<PackageInfo> = catalogs
        .manifests
        .iter()
        .filter(|m| only.is_none_or(|id| &CatalogId::of_manifest(m) == id))
        .map(package_info)
        .collect();
    infos.sort_by(|a, b| (&a.name, &a.catalog).cmp(&(&b.name, &b.catalog)));
    infos
}

/// `packages`.
pub async fn packages(env: &mut Env<'_>, catalog: Option<&str>, output: Output) -> Result<(), Error> {
    let loaded = catalogs::load(&env.client, &env.namespace, &env.global_namespace).await?;
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
    let unhealthy = loaded.unhealthy();
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
        if !unhealthy.is_empty() {
            let _ = writeln!(
                text,
                "Catalogs that are not READY (`kubectl olm catalogs` says why): {}",
                unhealthy.join(", ")
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

/// One bundle of a package. A PackageManifest describes channel heads only:
/// the other bundles have a name and a version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleInfo {
    /// The bundle.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Whether it heads a channel (and so is described).
    pub channel_head: bool,
    /// Display name from its CSV.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Supported install modes; `None` when not described.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub install_modes: Option<Vec<InstallModeType>>,
    /// APIs it provides, as `Kind.version.group`.
    pub provided_apis: Vec<String>,
    /// APIs it requires.
    pub required_apis: Vec<String>,
    /// The relation endpoints its CSV declares (annotation `olm-rs.dev/endpoints`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointInfo>,
    /// Why its declaration of endpoints cannot be read, if it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints_error: Option<String>,
    /// The actions its CSV declares (annotation `olm-rs.dev/actions`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<ActionInfo>,
    /// Why its declaration of actions cannot be read, if it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actions_error: Option<String>,
}

/// One action a bundle offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionInfo {
    /// The action.
    pub name: String,
    /// What running it does.
    pub description: String,
    /// Its parameters, by name.
    pub params: Vec<ParamInfo>,
}

/// One parameter of an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParamInfo {
    /// The parameter.
    pub name: String,
    /// Its JSON Schema type (`string`, `integer or null`); `any` when the schema gives none.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether a run must give it.
    pub required: bool,
}

/// The actions a channel head's CSV declares, or why they cannot be read.
fn head_actions(channel: &PackageChannel) -> (Vec<ActionInfo>, Option<String>) {
    let annotations = &channel.current_csv_desc.annotations;
    match Actions::of_annotations(&channel.current_csv, annotations) {
        Ok(actions) => {
            let infos = actions
                .iter()
                .flat_map(|a| a.iter())
                .map(|a| ActionInfo {
                    name: a.name.clone(),
                    description: a.description.trim().to_owned(),
                    params: a
                        .params
                        .iter()
                        .map(|(name, schema)| ParamInfo {
                            name: name.clone(),
                            type_: param_type(schema),
                            required: a.requires(name),
                        })
                        .collect(),
                })
                .collect();
            (infos, None)
        }
        Err(e) => (Vec::new(), Some(e.to_string())),
    }
}

/// A parameter schema's `type`: one name, or a list joined with " or "; `any` without it.
fn param_type(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".to_owned(),
    }
}

/// One relation endpoint of a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointInfo {
    /// provides, requires or peers.
    pub role: Role,
    /// The endpoint.
    pub name: String,
    /// The interface it speaks.
    pub interface: String,
    /// How many relations it takes; none for no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// global or container.
    pub scope: Scope,
}

/// The endpoints a channel head's CSV declares, or why they cannot be read.
fn head_endpoints(channel: &PackageChannel) -> (Vec<EndpointInfo>, Option<String>) {
    let annotations = &channel.current_csv_desc.annotations;
    match Endpoints::of_annotations(&channel.current_csv, annotations) {
        Ok(endpoints) => {
            let infos = endpoints
                .iter()
                .flat_map(|e| e.iter())
                .map(|(role, e)| EndpointInfo {
                    role,
                    name: e.name.clone(),
                    interface: e.interface.clone(),
                    limit: e.limit,
                    scope: e.scope,
                })
                .collect();
            (infos, None)
        }
        Err(e) => (Vec::new(), Some(e.to_string())),
    }
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
    pub bundles: Vec<BundleInfo>,
}

fn by_version(a: &str, b: &str) -> std::cmp::Ordering {
    let parse = |v: &str| semver::Version::parse(v).ok();
    parse(a).cmp(&parse(b)).then_with(|| a.cmp(b))
}

/// An owned or required API of a CSV description as `Kind.version.group`: CRDs
/// name `plural.group`, API services name their group.
fn api_text(api: &Value) -> String {
    let field = |name: &str| api.get(name).and_then(Value::as_str).unwrap_or_default();
    let group = match field("group") {
        "" => field("name").split_once('.').map(|(_, g)| g).unwrap_or_default(),
        group => group,
    };
    format!("{}.{}.{group}", field("kind"), field("version"))
}

fn apis(values: &[&[Value]]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for api in values.iter().flat_map(|v| v.iter()) {
        let text = api_text(api);
        if !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

/// The bundle heading `channel`, described.
fn head_info(channel: &PackageChannel) -> BundleInfo {
    let desc = &channel.current_csv_desc;
    let (endpoints, endpoints_error) = head_endpoints(channel);
    let (actions, actions_error) = head_actions(channel);
    BundleInfo {
        name: channel.current_csv.clone(),
        version: catalogs::head_version(channel),
        channel_head: true,
        display_name: Some(desc.display_name.clone()).filter(|d| !d.is_empty()),
        install_modes: (!desc.install_modes.is_empty()).then(|| {
            desc.install_modes
                .iter()
                .filter(|m| m.supported)
                .map(|m| m.type_)
                .collect()
        }),
        provided_apis: apis(&[
            desc.custom_resource_definitions.owned.as_slice(),
            desc.api_service_definitions.owned.as_slice(),
        ]),
        required_apis: apis(&[
            desc.custom_resource_definitions.required.as_slice(),
            desc.api_service_definitions.required.as_slice(),
        ]),
        endpoints,
        endpoints_error,
        actions,
        actions_error,
    }
}

/// The details of a PackageManifest (pure).
pub fn details(manifest: &PackageManifest) -> PackageDetails {
    let status = &manifest.status;
    let mut bundles: Vec<BundleInfo> = Vec::new();
    for channel in &status.channels {
        if !channel.current_csv.is_empty() && !bundles.iter().any(|b| b.name == channel.current_csv) {
            bundles.push(head_info(channel));
        }
    }
    for entry in status.channels.iter().flat_map(|c| &c.entries) {
        if !bundles.iter().any(|b| b.name == entry.name) {
            bundles.push(BundleInfo {
                name: entry.name.clone(),
                version: entry.version.clone(),
                ..BundleInfo::default()
            });
        }
    }
    bundles.sort_by(|a, b| by_version(&b.version, &a.version));
    let channels = status
        .channels
        .iter()
        .map(|channel| {
            let mut versions: Vec<String> = channel.entries.iter().map(|e| e.version.clone()).collect();
            versions.sort_by(|a, b| by_version(a, b));
            ChannelInfo {
                name: channel.name.clone(),
                head: channel.current_csv.clone(),
                versions,
            }
        })
        .collect();
    let description = catalogs::channel(manifest, &status.default_channel)
        .or_else(|| status.channels.first())
        .map(|c| c.current_csv_desc.long_description.clone())
        .filter(|d| !d.trim().is_empty());
    PackageDetails {
        name: status.package_name.clone(),
        catalog: CatalogId::of_manifest(manifest).to_string(),
        default_channel: status.default_channel.clone(),
        description,
        channels,
        bundles,
    }
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
            description.trim().lines().next().unwrap_or_default()
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
    let list = |items: &[String]| {
        if items.is_empty() {
            "-".to_owned()
        } else {
            items.join(", ")
        }
    };
    for bundle in &details.bundles {
        let _ = writeln!(out, "  {} ({})", bundle.name, bundle.version);
        if !bundle.channel_head {
            continue;
        }
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
        render_endpoints(&mut out, bundle);
        render_actions(&mut out, bundle);
    }
    let _ = writeln!(
        out,
        "\nChannel heads are described as the cluster's PackageManifest shows them; dependencies are not part of it: `kubectl olm plan {}` shows what an install pulls in.",
        details.name
    );
    out
}

/// A bundle's relation endpoints, when it declares any.
fn render_endpoints(out: &mut String, bundle: &BundleInfo) {
    if let Some(error) = &bundle.endpoints_error {
        let _ = writeln!(out, "    Endpoints:      cannot be read: {error}");
        return;
    }
    if bundle.endpoints.is_empty() {
        return;
    }
    let _ = writeln!(out, "    Endpoints:");
    let mut table = Table::new(&["      ROLE", "NAME", "INTERFACE", "LIMIT", "SCOPE"]);
    for e in &bundle.endpoints {
        table.row(vec![
            format!("      {}", e.role).into(),
            e.name.clone().into(),
            e.interface.clone().into(),
            e.limit.map_or_else(|| "-".to_owned(), |l| l.to_string()).into(),
            e.scope.to_string().into(),
        ]);
    }
    out.push_str(&table.render(false));
}

/// A bundle's actions, when it declares any: one row per action, its
/// parameters as `name (type, required)`, and the description's first line.
fn render_actions(out: &mut String, bundle: &BundleInfo) {
    if let Some(error) = &bundle.actions_error {
        let _ = writeln!(out, "    Actions:        cannot be read: {error}");
        return;
    }
    if bundle.actions.is_empty() {
        return;
    }
    let _ = writeln!(out, "    Actions:");
    let mut table = Table::new(&["      NAME", "PARAMETERS", "DESCRIPTION"]);
    for a in &bundle.actions {
        let params: Vec<String> = a
            .params
            .iter()
            .map(|p| match p.required {
                true => format!("{} ({}, required)", p.name, p.type_),
                false => format!("{} ({})", p.name, p.type_),
            })
            .collect();
        table.row(vec![
            format!("      {}", a.name).into(),
            match params.is_empty() {
                true => "-".to_owned(),
                false => params.join(", "),
            }
            .into(),
            a.description.lines().next().unwrap_or_default().to_owned().into(),
        ]);
    }
    out.push_str(&table.render(false));
}

/// `show`.
pub async fn show(
    env: &mut Env<'_>,
    package: &str,
    catalog: Option<&str>,
    output: Output,
) -> Result<(), Error> {
    let loaded = catalogs::load(&env.client, &env.namespace, &env.global_namespace).await?;
    let id = plan::choose_catalog(&loaded, package, catalog, &env.namespace, &env.global_namespace)?;
    let manifest = loaded
        .manifest(&id, package)
        .ok_or_else(|| Error::Failed(format!("catalog {id} serves no package {package}")))?;
    let details = details(manifest);
    print(env, output, &details, || render_details(&details))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// demo-db as the cluster serves it: two channels, CRDs in the head's description.
    pub(crate) fn demo_db() -> PackageManifest {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "packages.operators.coreos.com/v1", "kind": "PackageManifest",
            "metadata": {"name": "demo-db", "namespace": "team"},
            "spec": {},
            "status": {
                "catalogSource": "demo", "catalogSourceNamespace": "olm", "packageName": "demo-db",
                "defaultChannel": "stable",
                "channels": [
                    {"name": "alpha", "currentCSV": "demo-db.v1.2.0-alpha",
                     "currentCSVDesc": {"version": "1.2.0-alpha", "displayName": "Demo DB",
                                        "description": "A demo database.\nMore words.",
                                        "installModes": [{"type": "OwnNamespace", "supported": true}],
                                        "customresourcedefinitions": {"owned": [{"name": "databases.demo.olm-rs.dev", "version": "v1", "kind": "Database"}]}},
                     "entries": [{"name": "demo-db.v1.2.0-alpha", "version": "1.2.0-alpha"}, {"name": "demo-db.v1.1.0", "version": "1.1.0"}]},
                    {"name": "stable", "currentCSV": "demo-db.v1.1.0",
                     "currentCSVDesc": {"version": "1.1.0", "displayName": "Demo DB",
                                        "description": "A demo database.\nMore words.",
                                        "installModes": [{"type": "OwnNamespace", "supported": true},
                                                         {"type": "AllNamespaces", "supported": true},
                                                         {"type": "MultiNamespace", "supported": false}],
                                        "customresourcedefinitions": {"owned": [{"name": "databases.demo.olm-rs.dev", "version": "v1", "kind": "Database"}],
                                                                      "required": [{"name": "disks.storage.example.com", "version": "v1", "kind": "Disk"}]},
                                        "apiservicedefinitions": {"owned": [{"group": "metrics.demo.olm-rs.dev", "version": "v1", "kind": "Usage", "name": "usages"}]}},
                     "entries": [{"name": "demo-db.v1.1.0", "version": "1.1.0"}, {"name": "demo-db.v1.0.0", "version": "1.0.0"}]}
                ]
            }
        }))
        .expect("a PackageManifest")
    }

    #[test]
    fn packages_list_the_default_channels_head_version() {
        let info = package_info(&demo_db());
        assert_eq!(info.name, "demo-db");
        assert_eq!(info.catalog, "olm/demo");
        assert_eq!(info.default_channel, "stable");
        assert_eq!(info.channels, ["alpha", "stable"]);
        assert_eq!(info.latest, "1.1.0");
    }

    #[test]
    fn show_lists_channels_versions_and_what_the_heads_declare() {
        let details = details(&demo_db());
        let stable = details
            .channels
            .iter()
            .find(|c| c.name == "stable")
            .expect("stable");
        assert_eq!(stable.head, "demo-db.v1.1.0");
        assert_eq!(stable.versions, ["1.0.0", "1.1.0"]);
        let names: Vec<&str> = details.bundles.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(
            names,
            ["demo-db.v1.2.0-alpha", "demo-db.v1.1.0", "demo-db.v1.0.0"]
        );
        let head = &details.bundles[1];
        assert_eq!(
            head.install_modes,
            Some(vec![
                InstallModeType::OwnNamespace,
                InstallModeType::AllNamespaces
            ])
        );
        assert_eq!(
            head.provided_apis,
            ["Database.v1.demo.olm-rs.dev", "Usage.v1.metrics.demo.olm-rs.dev"]
        );
        assert_eq!(head.required_apis, ["Disk.v1.storage.example.com"]);
        assert!(!details.bundles[2].channel_head);
        let text = render_details(&details);
        assert!(text.contains("Default channel:  stable"), "{text}");
        assert!(text.contains("Description:      A demo database.\n"), "{text}");
        assert!(
            text.contains("  demo-db.v1.1.0 (1.1.0)\n    Install modes:  OwnNamespace, AllNamespaces"),
            "{text}"
        );
        assert!(text.contains("  demo-db.v1.0.0 (1.0.0)\n"), "{text}");
        assert!(!text.contains("demo-db.v1.0.0 (1.0.0)\n    Install"), "{text}");
        assert!(text.contains("`kubectl olm plan demo-db`"), "{text}");
    }

    #[test]
    fn show_lists_the_relation_endpoints_a_head_declares() {
        let mut manifest = demo_db();
        let annotation = |text: &str| [(olm_api::endpoints::ANNOTATION.to_owned(), text.to_owned())].into();
        manifest.status.channels[1].current_csv_desc.annotations = annotation(
            "provides: {db: {interface: postgresql, limit: 5}}\npeers: {ring: {interface: demo-db-ring, scope: container}}",
        );
        manifest.status.channels[0].current_csv_desc.annotations =
            annotation("provides: {db: {interface: ''}}");
        let details = details(&manifest);
        let stable = &details.bundles[1];
        assert_eq!(
            stable.endpoints,
            [
                EndpointInfo {
                    role: Role::Provides,
                    name: "db".into(),
                    interface: "postgresql".into(),
                    limit: Some(5),
                    scope: Scope::Global,
                },
                EndpointInfo {
                    role: Role::Peers,
                    name: "ring".into(),
                    interface: "demo-db-ring".into(),
                    limit: None,
                    scope: Scope::Container,
                },
            ]
        );
        let json = serde_json::to_value(stable).unwrap();
        assert_eq!(
            json["endpoints"][1],
            serde_json::json!({"role": "peers", "name": "ring", "interface": "demo-db-ring", "scope": "container"})
        );
        let text = render_details(&details);
        assert!(
            text.contains(
                "    Endpoints:\n      ROLE      NAME  INTERFACE     LIMIT  SCOPE\n      provides  db    postgresql    5      global\n      peers     ring  demo-db-ring  -      container\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "    Endpoints:      cannot be read: CSV demo-db.v1.2.0-alpha: annotation olm-rs.dev/endpoints: provides endpoint \"db\" has an empty interface"
            ),
            "{text}"
        );
        assert!(
            !show_text_of(demo_db()).contains("Endpoints"),
            "a bundle without endpoints shows none"
        );
    }

    fn show_text_of(manifest: PackageManifest) -> String {
        render_details(&details(&manifest))
    }

    #[test]
    fn catalogs_count_the_packages_served_from_each() {
        let source: olm_api::v1alpha1::CatalogSource = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "demo", "namespace": "olm"},
            "spec": {"sourceType": "grpc", "image": "unreachable.invalid/demo@sha256:00", "priority": 5},
            "status": {"connectionState": {"lastObservedState": "READY"}},
        }))
        .expect("a CatalogSource");
        let loaded = Catalogs {
            views: vec![catalogs::CatalogView {
                id: CatalogId::new("demo", "olm"),
                source,
            }],
            manifests: vec![demo_db()],
        };
        let infos = catalog_infos(&loaded);
        assert_eq!(infos.len(), 1);
        assert_eq!(
            (
                infos[0].source.as_str(),
                infos[0].state.as_str(),
                infos[0].priority,
                infos[0].packages
            ),
            ("image", "READY", 5, 1)
        );
        assert!(loaded.unhealthy().is_empty());
    }
}
