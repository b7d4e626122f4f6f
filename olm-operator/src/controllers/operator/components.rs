//! The kinds an Operator's components can be, and reading the components of
//! one Operator from the API server by its label.
//!
//! The kinds are OLM's (Subscriptions, InstallPlans, CSVs, OperatorConditions,
//! CRDs, APIServices, Deployments, Services, Namespaces, ServiceAccounts,
//! Secrets, ConfigMaps, Roles, RoleBindings, ClusterRoles, ClusterRoleBindings)
//! plus the webhook configurations that olm-rs labels too. Kinds that can have
//! `status.conditions` are read whole, the others as metadata only.

use kube::{
    Api, Client, ResourceExt,
    api::{DynamicObject, GroupVersionKind, ListParams},
    core::ApiResource,
};

use super::decide::{Component, conditions_of};

/// One kind of component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ComponentKind {
    /// API group (empty for the core group).
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name.
    pub plural: &'static str,
    /// Whether objects of this kind report `status.conditions` worth copying.
    pub conditions: bool,
}

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    conditions: bool,
) -> ComponentKind {
    ComponentKind {
        group,
        version,
        kind,
        plural,
        conditions,
    }
}

/// Every kind whose objects can be components of an Operator.
pub const KINDS: &[ComponentKind] = &[
    kind(
        "operators.coreos.com",
        "v1alpha1",
        "Subscription",
        "subscriptions",
        true,
    ),
    kind(
        "operators.coreos.com",
        "v1alpha1",
        "InstallPlan",
        "installplans",
        true,
    ),
    kind(
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        "clusterserviceversions",
        true,
    ),
    kind(
        "operators.coreos.com",
        "v2",
        "OperatorCondition",
        "operatorconditions",
        true,
    ),
    kind(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        true,
    ),
    kind("apiregistration.k8s.io", "v1", "APIService", "apiservices", true),
    kind("apps", "v1", "Deployment", "deployments", true),
    kind("", "v1", "Service", "services", true),
    kind("", "v1", "Namespace", "namespaces", true),
    kind("", "v1", "ServiceAccount", "serviceaccounts", false),
    kind("", "v1", "Secret", "secrets", false),
    kind("", "v1", "ConfigMap", "configmaps", false),
    kind("rbac.authorization.k8s.io", "v1", "Role", "roles", false),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        false,
    ),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    kind(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
    ),
];

impl ComponentKind {
    /// The resource, for dynamic clients.
    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }
}

/// Why the components could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot list the {kind} objects labelled {selector}; check that olm-operator may list them")]
pub struct ListError {
    /// The kind listed.
    pub kind: &'static str,
    /// The label selector.
    pub selector: String,
    /// The cause.
    #[source]
    pub source: kube::Error,
}

/// Every object of [`KINDS`] that matches `selector` (a label key: the label exists).
pub async fn list(client: &Client, selector: &str) -> Result<Vec<Component>, ListError> {
    let mut found = Vec::new();
    for kind in KINDS {
        found.extend(list_kind(client, kind, selector).await?);
    }
    Ok(found)
}

async fn list_kind(
    client: &Client,
    kind: &ComponentKind,
    selector: &str,
) -> Result<Vec<Component>, ListError> {
    let resource = kind.resource();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let params = ListParams::default().labels(selector);
    let error = |source| ListError {
        kind: kind.kind,
        selector: selector.to_owned(),
        source,
    };
    let component = |name: String, namespace: Option<String>| Component {
        api_version: resource.api_version.clone(),
        kind: kind.kind.to_owned(),
        name,
        namespace,
        conditions: None,
    };
    let listed = if kind.conditions {
        api.list(&params).await.map(|list| {
            list.items
                .iter()
                .map(|object| Component {
                    conditions: conditions_of(object.data.get("status")),
                    ..component(object.name_any(), object.namespace())
                })
                .collect()
        })
    } else {
        api.list_metadata(&params).await.map(|list| {
            list.items
                .iter()
                .map(|object| component(object.name_any(), object.namespace()))
                .collect()
        })
    };
    match listed {
        Ok(components) => Ok(components),
        // A kind this cluster does not serve has no components.
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(Vec::new()),
        Err(source) => Err(error(source)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kinds_cover_olms_and_the_webhooks() {
        let kinds: Vec<&str> = KINDS.iter().map(|k| k.kind).collect();
        for wanted in [
            "Subscription",
            "InstallPlan",
            "ClusterServiceVersion",
            "OperatorCondition",
            "CustomResourceDefinition",
            "APIService",
            "Deployment",
            "Service",
            "Namespace",
            "ServiceAccount",
            "Secret",
            "ConfigMap",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        ] {
            assert!(kinds.contains(&wanted), "{wanted}");
        }
        let crd = KINDS
            .iter()
            .find(|k| k.kind == "CustomResourceDefinition")
            .expect("CRDs");
        assert_eq!(crd.resource().api_version, "apiextensions.k8s.io/v1");
        let secret = KINDS.iter().find(|k| k.kind == "Secret").expect("Secrets");
        assert_eq!(secret.resource().api_version, "v1");
        assert!(!secret.conditions, "Secrets are read as metadata");
    }
}
