//! OLM's kinds as they are served on the wire, for dynamic clients.

use kube::{
    Api, Client,
    api::{DynamicObject, GroupVersionKind},
    core::ApiResource,
};

/// An OLM kind as served on the wire: group, version, kind and plural are part of the API that
/// olm-rs must serve unchanged.
#[derive(Clone, Copy, Debug)]
pub struct OlmKind {
    /// API group.
    pub group: &'static str,
    /// The version the tests write.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Resource name in URLs.
    pub plural: &'static str,
}

impl OlmKind {
    /// The `ApiResource` for dynamic clients.
    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }

    /// An API for this kind in `namespace`.
    pub fn api(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &self.resource())
    }

    /// `apiVersion` of this kind.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }
}

/// OLM's kinds, as operator-framework's OLM serves them.
pub mod olm {
    use super::OlmKind;

    /// ClusterServiceVersion.
    pub const CSV: OlmKind = OlmKind {
        group: "operators.coreos.com",
        version: "v1alpha1",
        kind: "ClusterServiceVersion",
        plural: "clusterserviceversions",
    };
    /// Subscription.
    pub const SUBSCRIPTION: OlmKind = OlmKind {
        group: "operators.coreos.com",
        version: "v1alpha1",
        kind: "Subscription",
        plural: "subscriptions",
    };
    /// CatalogSource.
    pub const CATALOG_SOURCE: OlmKind = OlmKind {
        group: "operators.coreos.com",
        version: "v1alpha1",
        kind: "CatalogSource",
        plural: "catalogsources",
    };
    /// InstallPlan.
    pub const INSTALL_PLAN: OlmKind = OlmKind {
        group: "operators.coreos.com",
        version: "v1alpha1",
        kind: "InstallPlan",
        plural: "installplans",
    };
    /// OperatorGroup.
    pub const OPERATOR_GROUP: OlmKind = OlmKind {
        group: "operators.coreos.com",
        version: "v1",
        kind: "OperatorGroup",
        plural: "operatorgroups",
    };
}
