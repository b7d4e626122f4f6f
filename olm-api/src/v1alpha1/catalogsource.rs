//! `CatalogSource`: where catalog content (packages, channels, bundles) comes from.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Affinity, Toleration},
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{Condition, Time},
    },
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// The spec of a CatalogSource.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "CatalogSource",
    plural = "catalogsources",
    namespaced,
    status = "CatalogSourceStatus",
    shortname = "catsrc",
    category = "olm",
    derive = "PartialEq",
    doc = "CatalogSource is a repository of operator packages, channels and bundles.",
    printcolumn(
        name = "Display",
        type_ = "string",
        json_path = ".spec.displayName",
        description = "The pretty name of the catalog"
    ),
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".spec.sourceType",
        description = "The type of the catalog"
    ),
    printcolumn(
        name = "Publisher",
        type_ = "string",
        json_path = ".spec.publisher",
        description = "The publisher of the catalog"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceSpec {
    /// How the catalog is served.
    pub source_type: SourceType,
    /// Weight in dependency resolution: higher is preferred (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// The ConfigMap holding the catalog, for `configmap` sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// `host:port` of a running registry server, for `grpc` sources without an image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// A catalog image to run as a registry Pod, for `grpc` sources. Wins over `address`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Overrides for the registry Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_pod_config: Option<GrpcPodConfig>,
    /// How often to look for a newer catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Pull secrets for the catalog and its bundles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Vec<String>>,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Who publishes the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// An icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<CatalogIcon>,
}

/// How a CatalogSource is served.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum SourceType {
    /// The operator-registry gRPC API, at `address` or from `image`.
    #[serde(rename = "grpc")]
    Grpc,
    /// OLM's ConfigMap catalog format.
    #[serde(rename = "configmap")]
    ConfigMap,
    /// The deprecated name of `configmap`.
    #[serde(rename = "internal")]
    Internal,
}

/// An icon of a CatalogSource. Both fields may be empty, as in OLM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CatalogIcon {
    /// The image data, base64.
    #[serde(rename = "base64data", default)]
    pub data: String,
    /// The media type.
    #[serde(rename = "mediatype", default)]
    pub media_type: String,
}

/// The pod security settings of a registry Pod.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum SecurityConfig {
    /// No security context is set.
    #[serde(rename = "legacy")]
    Legacy,
    /// The pod runs under the `restricted` Pod Security Standard.
    #[serde(rename = "restricted")]
    Restricted,
}

/// Overrides for the registry Pod of an image-backed CatalogSource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcPodConfig {
    /// Node selector of the registry Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of the registry Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Affinity of the registry Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Priority class of the registry Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// `legacy` or `restricted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context_config: Option<SecurityConfig>,
    /// A soft memory limit for the registry server; also its memory request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_target: Option<Quantity>,
    /// Serve the catalog's file-based content with a known server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_content: Option<ExtractContentConfig>,
}

/// Where an image keeps its file-based catalog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtractContentConfig {
    /// The directory of the pre-computed cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<String>,
    /// The directory of the file-based catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_dir: Option<String>,
}

/// How a CatalogSource looks for updates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// Poll the registry on an interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_poll: Option<RegistryPoll>,
}

/// Registry polling.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RegistryPoll {
    /// A Go duration such as `45m` or `1h30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// The observed state of a CatalogSource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceStatus {
    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Why the CatalogSource is in its state, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the CatalogSource is in its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CatalogSourceReason>,
    /// When the catalog image was last polled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_image_registry_poll: Option<Time>,
    /// The ConfigMap behind a `configmap` source.
    #[serde(
        rename = "configMapReference",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub config_map_resource: Option<ConfigMapResourceReference>,
    /// The Service in front of the registry Pod.
    #[serde(rename = "registryService", default, skip_serializing_if = "Option::is_none")]
    pub registry_service: Option<RegistryServiceStatus>,
    /// The state of the gRPC connection.
    #[serde(rename = "connectionState", default, skip_serializing_if = "Option::is_none")]
    pub connection_state: Option<GrpcConnectionState>,
    /// Standard conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions_list_map::<Condition>")]
    pub conditions: Option<Vec<Condition>>,
}

/// Why a CatalogSource is in error.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum CatalogSourceReason {
    /// A field of the spec is invalid.
    #[serde(rename = "SpecInvalidError")]
    SpecInvalid,
    /// The ConfigMap could not be read.
    #[serde(rename = "ConfigMapError")]
    ConfigMap,
    /// The registry server could not be queried.
    #[serde(rename = "RegistryServerError")]
    RegistryServer,
    /// The polling interval is invalid.
    #[serde(rename = "InvalidIntervalError")]
    InvalidInterval,
}

/// The ConfigMap behind a `configmap` CatalogSource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapResourceReference {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The resource version that was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// When it was last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

/// The Service in front of a registry Pod.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryServiceStatus {
    /// The protocol, `grpc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The Service's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// The Service's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,
    /// The Service's port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// When the Service was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
}

/// The states of a gRPC connection, as gRPC names them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConnectivityState {
    /// Not connecting.
    Idle,
    /// Connecting.
    Connecting,
    /// Connected and serving.
    Ready,
    /// The last attempt failed; retrying.
    TransientFailure,
    /// Shut down.
    Shutdown,
}

/// The state of the connection to a catalog's registry server.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcConnectionState {
    /// The address connected to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The last state seen.
    pub last_observed_state: ConnectivityState,
    /// When the connection was last attempted.
    #[serde(rename = "lastConnect", default, skip_serializing_if = "Option::is_none")]
    pub last_connect_time: Option<Time>,
}
