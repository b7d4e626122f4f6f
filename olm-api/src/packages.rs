//! `packages.operators.coreos.com/v1` PackageManifest: the read-only,
//! aggregated API that consoles (OperatorHub) read to list what the catalogs
//! offer. It is not a CRD: catalog-operator serves it from the catalogs it
//! holds in memory. The fields are OLM's packageserver's, with its JSON names
//! and its rules for which fields are always written and which only when set.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize, Serializer, ser::SerializeStruct};
use serde_json::Value;

use crate::v1alpha1::{Approval, GroupVersionKind, InstallMode, InstallModeType, SubscriptionSpec};

/// The API group.
pub const GROUP: &str = "packages.operators.coreos.com";
/// The only version.
pub const VERSION: &str = "v1";
/// `group/version`.
pub const API_VERSION: &str = "packages.operators.coreos.com/v1";
/// The kind.
pub const KIND: &str = "PackageManifest";
/// The kind of a list.
pub const LIST_KIND: &str = "PackageManifestList";
/// The resource (plural) name.
pub const PLURAL: &str = "packagemanifests";
/// The singular name.
pub const SINGULAR: &str = "packagemanifest";
/// The name of the APIService that registers the API with the aggregator.
pub const API_SERVICE: &str = "v1.packages.operators.coreos.com";
/// The subresource of a PackageManifest that answers a [`PackagePlan`]
/// (`POST .../namespaces/<ns>/packagemanifests/<package>/plan`, verb `create`).
pub const PLAN_SUBRESOURCE: &str = "plan";
/// The kind a plan request and its answer are written as.
pub const PLAN_KIND: &str = "PackagePlan";

/// Well-known labels of a PackageManifest (label selectors use them).
pub mod labels {
    /// The CatalogSource's name.
    pub const CATALOG: &str = "catalog";
    /// The CatalogSource's namespace.
    pub const CATALOG_NAMESPACE: &str = "catalog-namespace";
    /// The provider of the default channel's head.
    pub const PROVIDER: &str = "provider";
    /// The provider's URL.
    pub const PROVIDER_URL: &str = "provider-url";
    /// Prefix of the operating-system labels (`operatorframework.io/os.linux`).
    pub const OS_PREFIX: &str = "operatorframework.io/os";
    /// Prefix of the architecture labels (`operatorframework.io/arch.amd64`).
    pub const ARCH_PREFIX: &str = "operatorframework.io/arch";
    /// Set when the CSV names no operating system.
    pub const DEFAULT_OS: &str = "operatorframework.io/os.linux";
    /// Set when the CSV names no architecture.
    pub const DEFAULT_ARCH: &str = "operatorframework.io/arch.amd64";
    /// The value of the default os and arch labels.
    pub const SUPPORTED: &str = "supported";
}

/// One package of one catalog, as a console shows it.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PackageManifest {
    /// Name (the package name), namespace (the namespace asked for: global
    /// catalogs' packages appear in every namespace), labels and the
    /// CatalogSource's creation time.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Always empty.
    #[serde(default)]
    pub spec: PackageManifestSpec,
    /// What the catalog says of the package.
    #[serde(default)]
    pub status: PackageManifestStatus,
}

impl Serialize for PackageManifest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct(KIND, 5)?;
        st.serialize_field("apiVersion", API_VERSION)?;
        st.serialize_field("kind", KIND)?;
        st.serialize_field("metadata", &self.metadata)?;
        st.serialize_field("spec", &self.spec)?;
        st.serialize_field("status", &self.status)?;
        st.end()
    }
}

impl k8s_openapi::Resource for PackageManifest {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = KIND;
    const VERSION: &'static str = VERSION;
    const URL_PATH_SEGMENT: &'static str = PLURAL;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for PackageManifest {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The (empty) spec of a PackageManifest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct PackageManifestSpec {}

/// What a catalog says of one package.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifestStatus {
    /// The CatalogSource's name.
    #[serde(default)]
    pub catalog_source: String,
    /// The CatalogSource's `spec.displayName`.
    #[serde(default)]
    pub catalog_source_display_name: String,
    /// The CatalogSource's `spec.publisher`.
    #[serde(default)]
    pub catalog_source_publisher: String,
    /// The CatalogSource's namespace.
    #[serde(default)]
    pub catalog_source_namespace: String,
    /// The provider of the default channel's head (else of the first channel's).
    #[serde(default)]
    pub provider: AppLink,
    /// The package name.
    #[serde(default)]
    pub package_name: String,
    /// Set when the catalog deprecates the package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    /// The channels, by name.
    #[serde(default)]
    pub channels: Vec<PackageChannel>,
    /// The channel a Subscription without one follows.
    #[serde(default)]
    pub default_channel: String,
}

/// A deprecation notice.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Deprecation {
    /// What to tell users.
    pub message: String,
}

/// One channel of a package.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PackageChannel {
    /// The channel name.
    pub name: String,
    /// The channel head's CSV name.
    #[serde(rename = "currentCSV", default)]
    pub current_csv: String,
    /// What the channel head's CSV says of itself.
    #[serde(rename = "currentCSVDesc", default)]
    pub current_csv_desc: CsvDescription,
    /// Set when the catalog deprecates the channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    /// Every bundle of the channel, newest version first.
    #[serde(default)]
    pub entries: Vec<ChannelEntry>,
}

/// One bundle of a channel.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ChannelEntry {
    /// The bundle (CSV) name.
    pub name: String,
    /// Its version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Set when the catalog deprecates the bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
}

/// The presentation fields of a CSV, as consoles show them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CsvDescription {
    /// `spec.displayName`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// `spec.icon`; left out of list and get answers, as OLM does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icon: Vec<Icon>,
    /// `spec.version`.
    #[serde(default)]
    pub version: String,
    /// `spec.provider`.
    #[serde(default)]
    pub provider: AppLink,
    /// `metadata.annotations`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `spec.keywords`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// `spec.links`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<AppLink>,
    /// `spec.maintainers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    /// `spec.maturity`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub maturity: String,
    /// `spec.description`.
    #[serde(rename = "description", default, skip_serializing_if = "String::is_empty")]
    pub long_description: String,
    /// `spec.installModes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<InstallMode>,
    /// `spec.customresourcedefinitions`, owned and required, as the CSV writes them.
    #[serde(rename = "customresourcedefinitions", default)]
    pub custom_resource_definitions: Descriptions,
    /// `spec.apiservicedefinitions`, owned and required, as the CSV writes them.
    #[serde(rename = "apiservicedefinitions", default)]
    pub api_service_definitions: Descriptions,
    /// `spec.nativeAPIs`.
    #[serde(rename = "nativeApis", default, skip_serializing_if = "Vec::is_empty")]
    pub native_apis: Vec<GroupVersionKind>,
    /// `spec.minKubeVersion`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub min_kube_version: String,
    /// The images the bundle uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<String>,
}

/// Owned and required API descriptions (CRDs or APIServices) of a CSV, kept
/// as the CSV writes them (descriptors included) since consoles read them all.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Descriptions {
    /// APIs the operator provides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<Value>,
    /// APIs the operator needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<Value>,
}

/// A named link.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct AppLink {
    /// The name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
}

/// A maintainer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Maintainer {
    /// The name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The e-mail address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
}

/// An icon, base64-encoded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Icon {
    /// The image data, base64.
    #[serde(rename = "base64data", default, skip_serializing_if = "String::is_empty")]
    pub base64_data: String,
    /// The media type.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mediatype: String,
}

/// A dry run of a Subscription: the request names the Subscription as it
/// would be created; catalog-operator resolves it with the namespace's
/// Subscriptions and installed CSVs, exactly as its Subscription controller
/// would, and answers with the same object and `status` set. Nothing is created.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PackagePlan {
    /// `packages.operators.coreos.com/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `PackagePlan`.
    #[serde(default)]
    pub kind: String,
    /// The package (name) and the namespace.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The Subscription to resolve.
    #[serde(default)]
    pub spec: PackagePlanSpec,
    /// The answer; unset in a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PackagePlanStatus>,
}

impl PackagePlan {
    /// A request for the Subscription `subscription_name` with `spec`, in `namespace`.
    pub fn request(namespace: &str, subscription_name: &str, spec: SubscriptionSpec) -> Self {
        PackagePlan {
            api_version: API_VERSION.to_owned(),
            kind: PLAN_KIND.to_owned(),
            metadata: ObjectMeta {
                name: Some(spec.package.clone()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            spec: PackagePlanSpec {
                subscription_name: Some(subscription_name.to_owned()),
                subscription: spec,
            },
            status: None,
        }
    }
}

/// The Subscription a plan is made for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PackagePlanSpec {
    /// The Subscription's name (default: the package's); it stands in for an
    /// existing Subscription of that name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_name: Option<String>,
    /// The Subscription's spec (`name` is the package, `source` and
    /// `sourceNamespace` the catalog).
    #[serde(flatten)]
    pub subscription: SubscriptionSpec,
}

/// What resolution decided for the Subscription.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlanResult {
    /// The bundles of `steps` would be installed, dependencies first.
    #[default]
    Install,
    /// What it gets is installed already.
    UpToDate,
    /// No set of bundles satisfies it; `message` says why.
    Unsatisfiable,
}

/// The plan catalog-operator makes for the Subscription.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PackagePlanStatus {
    /// Install, UpToDate or Unsatisfiable.
    pub result: PlanResult,
    /// Why it is unsatisfiable, in plain words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The bundle (CSV) the Subscription gets.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bundle: String,
    /// The install modes that bundle supports, when the catalog says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_modes: Option<Vec<InstallModeType>>,
    /// Automatic, or Manual when any Subscription of its group is.
    #[serde(default)]
    pub approval: Approval,
    /// The bundles to install, dependencies first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<PlanStep>,
    /// Deprecation notices of what it installs or keeps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deprecations: Vec<String>,
}

/// One bundle a plan installs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PlanStep {
    /// The bundle (CSV).
    pub bundle: String,
    /// Its package.
    pub package: String,
    /// Its version.
    #[serde(default)]
    pub version: String,
    /// Its CatalogSource's name.
    #[serde(default)]
    pub catalog_source: String,
    /// Its CatalogSource's namespace.
    #[serde(default)]
    pub catalog_source_namespace: String,
    /// The installed CSV it replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Why the resolver chose it.
    #[serde(default)]
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_fields_are_written_as_olm_writes_them() {
        let manifest = PackageManifest {
            status: PackageManifestStatus {
                package_name: "etcd".into(),
                channels: vec![PackageChannel {
                    name: "alpha".into(),
                    entries: vec![ChannelEntry {
                        name: "etcd.v1".into(),
                        ..ChannelEntry::default()
                    }],
                    ..PackageChannel::default()
                }],
                ..PackageManifestStatus::default()
            },
            ..PackageManifest::default()
        };
        let json = serde_json::to_value(&manifest).unwrap();
        assert_eq!(json["apiVersion"], API_VERSION);
        assert_eq!(json["kind"], KIND);
        assert_eq!(json["spec"], serde_json::json!({}));
        assert_eq!(json["status"]["catalogSourcePublisher"], "");
        assert_eq!(json["status"]["provider"], serde_json::json!({}));
        assert!(json["status"].get("deprecation").is_none());
        let channel = &json["status"]["channels"][0];
        assert_eq!(channel["currentCSV"], "");
        assert_eq!(
            channel["currentCSVDesc"],
            serde_json::json!({"version": "", "provider": {}, "customresourcedefinitions": {}, "apiservicedefinitions": {}})
        );
        assert_eq!(channel["entries"], serde_json::json!([{"name": "etcd.v1"}]));
        let back: PackageManifest = serde_json::from_value(json).unwrap();
        assert_eq!(back, manifest);
    }

    #[test]
    fn a_plan_request_is_a_subscription_spec_under_its_package() {
        let spec = SubscriptionSpec {
            catalog_source: "demo".into(),
            catalog_source_namespace: "olm".into(),
            package: "demo-app".into(),
            channel: Some("stable".into()),
            starting_csv: None,
            install_plan_approval: Some(Approval::Manual),
            config: None,
        };
        let request = PackagePlan::request("team", "demo-app", spec);
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": API_VERSION, "kind": PLAN_KIND,
                "metadata": {"name": "demo-app", "namespace": "team"},
                "spec": {"subscriptionName": "demo-app", "source": "demo", "sourceNamespace": "olm",
                         "name": "demo-app", "channel": "stable", "installPlanApproval": "Manual"},
            })
        );
        let back: PackagePlan = serde_json::from_value(json).unwrap();
        assert_eq!(back, request);
        let answer: PackagePlanStatus = serde_json::from_value(serde_json::json!({
            "result": "Unsatisfiable", "message": "no", "approval": "Automatic"
        }))
        .unwrap();
        assert_eq!(answer.result, PlanResult::Unsatisfiable);
        assert!(answer.steps.is_empty());
    }
}
