//! APIServices of a ClusterServiceVersion, as OLM makes them: for each owned
//! API service an `apiregistration.k8s.io/v1` APIService `<version>.<group>`
//! that sends the group/version to the Service of its Deployment, with the CA
//! of that Deployment's certificate as `caBundle` (group priority 2000,
//! version priority 15, as OLM sets them); and for each required API service
//! a requirement that is met while that APIService is Available.
//!
//! The APIServices made are typed (`k8s-openapi`'s aggregator types), so that
//! they are stamped and skipped like the other serving objects
//! ([`super::stamp`]); those read for requirements are dynamic objects.
//! Everything in this module is pure.

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString,
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
    kube_aggregator::pkg::apis::apiregistration::v1::{APIService, APIServiceSpec, ServiceReference},
};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use olm_api::v1alpha1::{ApiServiceDescription, ClusterServiceVersion, RequirementStatus, StatusReason};

use super::certs;

/// OLM's group priority for the APIServices it creates.
pub const GROUP_PRIORITY_MINIMUM: i32 = 2000;
/// OLM's version priority for the APIServices it creates.
pub const VERSION_PRIORITY: i32 = 15;

/// The APIService resource (`apiregistration.k8s.io/v1`).
pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
        "apiservices",
    )
}

/// The name of the APIService of a description: `<version>.<group>`.
pub fn name(desc: &ApiServiceDescription) -> String {
    format!("{}.{}", desc.version, desc.group)
}

/// The owned API services of a CSV.
pub fn owned(csv: &ClusterServiceVersion) -> impl Iterator<Item = &ApiServiceDescription> {
    csv.spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.as_ref())
        .into_iter()
        .flatten()
}

/// The required API services of a CSV.
pub fn required(csv: &ClusterServiceVersion) -> impl Iterator<Item = &ApiServiceDescription> {
    csv.spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.required.as_ref())
        .into_iter()
        .flatten()
}

/// The APIService of an owned description, served by the Service of its
/// Deployment in `namespace`, trusting `ca_pem`, labelled with `labels`.
pub fn api_service(
    desc: &ApiServiceDescription,
    namespace: &str,
    ca_pem: &str,
    labels: &BTreeMap<String, String>,
) -> APIService {
    let deployment = desc.deployment_name.clone().unwrap_or_default();
    let port = desc
        .container_port
        .filter(|p| *p > 0)
        .unwrap_or(certs::DEFAULT_PORT);
    APIService {
        metadata: ObjectMeta {
            name: Some(name(desc)),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(APIServiceSpec {
            group: Some(desc.group.clone()),
            version: Some(desc.version.clone()),
            group_priority_minimum: GROUP_PRIORITY_MINIMUM,
            version_priority: VERSION_PRIORITY,
            service: Some(ServiceReference {
                namespace: Some(namespace.to_owned()),
                name: Some(certs::service_name(&deployment)),
                port: Some(port),
            }),
            ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
            insecure_skip_tls_verify: None,
        }),
        status: None,
    }
}

/// The CSVs that own or require the APIService `name` (for the APIService watch).
pub fn naming_api_service(
    store: &kube::runtime::reflector::Store<ClusterServiceVersion>,
    name: &str,
) -> Vec<kube::runtime::reflector::ObjectRef<ClusterServiceVersion>> {
    store
        .state()
        .iter()
        .filter(|csv| {
            owned(csv)
                .chain(required(csv))
                .any(|desc| self::name(desc) == name)
        })
        .map(|csv| kube::runtime::reflector::ObjectRef::from_obj(csv.as_ref()))
        .collect()
}

/// Who holds an existing APIService, by its `olm.owner*` labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// Nobody OLM knows (no owner labels): the API server's own, or another tool's.
    Unowned,
    /// A ClusterServiceVersion: `(namespace, name)`.
    Csv(String, String),
}

/// The holder of an existing APIService, by its metadata.
pub fn holder(existing: &ObjectMeta) -> Holder {
    let labels = existing.labels.clone().unwrap_or_default();
    let get = |key: &str| labels.get(key).filter(|v| !v.is_empty()).cloned();
    match (
        get(olm_api::labels::OWNER_KIND).as_deref(),
        get(olm_api::labels::OWNER_NAMESPACE),
        get(olm_api::labels::OWNER),
    ) {
        (Some("ClusterServiceVersion"), Some(namespace), Some(name)) => Holder::Csv(namespace, name),
        _ => Holder::Unowned,
    }
}

/// Whether `csv` may take over an APIService held by `holder` without asking
/// anyone: it holds it, or the CSV it replaces does (OLM's adoption rule; a
/// holder that is gone or being replaced is checked by the caller).
pub fn adoptable_at_once(csv: &ClusterServiceVersion, holder: &Holder) -> bool {
    match holder {
        Holder::Unowned => false,
        Holder::Csv(namespace, name) => {
            csv.metadata.namespace.as_deref() == Some(namespace.as_str())
                && (csv.metadata.name.as_deref() == Some(name.as_str())
                    || csv.spec.replaces.as_deref() == Some(name.as_str()))
        }
    }
}

/// Whether an APIService reports `Available=True`.
pub fn is_available(api_service: &DynamicObject) -> bool {
    api_service.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Available" && c["status"] == "True")
}

/// The requirement status of a required API service, given the APIService
/// found under its name (OLM: not found → NotPresent, not Available →
/// PresentNotSatisfied).
pub fn requirement(desc: &ApiServiceDescription, found: Option<&DynamicObject>) -> RequirementStatus {
    let (status, message) = match found {
        None => (StatusReason::NotPresent, "APIService not found"),
        Some(service) if !is_available(service) => {
            (StatusReason::PresentNotSatisfied, "APIService not available")
        }
        Some(_) => (StatusReason::Present, "APIService available"),
    };
    RequirementStatus {
        group: "apiregistration.k8s.io".to_owned(),
        version: "v1".to_owned(),
        kind: "APIService".to_owned(),
        name: name(desc),
        status,
        message: message.to_owned(),
        uuid: found.and_then(|s| s.metadata.uid.clone()),
        dependents: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> ApiServiceDescription {
        serde_json::from_value(serde_json::json!({
            "name": "widgets", "group": "example.com", "version": "v1alpha1", "kind": "Widget",
            "deploymentName": "widget.server", "containerPort": 8443
        }))
        .expect("a description")
    }

    #[test]
    fn an_owned_api_service_points_at_its_deployments_service() {
        let labels = BTreeMap::from([("olm.owner".to_owned(), "demo.v1.0.0".to_owned())]);
        let object = api_service(&desc(), "ops", "CA PEM", &labels);
        assert_eq!(object.metadata.name.as_deref(), Some("v1alpha1.example.com"));
        assert_eq!(object.metadata.labels.as_ref(), Some(&labels));
        let object = serde_json::to_value(&object).expect("JSON");
        assert_eq!(object["apiVersion"], "apiregistration.k8s.io/v1");
        assert_eq!(object["kind"], "APIService");
        let spec = &object["spec"];
        assert_eq!(spec["group"], "example.com");
        assert_eq!(spec["version"], "v1alpha1");
        assert_eq!(spec["groupPriorityMinimum"], 2000);
        assert_eq!(spec["versionPriority"], 15);
        assert_eq!(
            spec["service"],
            serde_json::json!({"namespace": "ops", "name": "widget-server-service", "port": 8443})
        );
        assert_eq!(spec["caBundle"], "Q0EgUEVN");
    }

    #[test]
    fn an_api_service_is_taken_over_only_from_this_csv_or_the_one_it_replaces() {
        let csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "demo.v2.0.0", "namespace": "ops"},
            "spec": {"displayName": "demo", "install": {"strategy": "deployment"}, "replaces": "demo.v1.0.0"}
        }))
        .expect("a CSV");
        let held_by = |namespace: &str, name: &str| {
            let labels = crate::controllers::csv::build::owner_labels(name, namespace);
            holder(&api_service(&desc(), "ops", "", &labels).metadata)
        };
        let builtin = holder(&api_service(&desc(), "ops", "", &BTreeMap::new()).metadata);
        assert_eq!(builtin, Holder::Unowned);
        assert!(!adoptable_at_once(&csv, &builtin), "never the API server's own");
        assert!(adoptable_at_once(&csv, &held_by("ops", "demo.v2.0.0")));
        assert!(adoptable_at_once(&csv, &held_by("ops", "demo.v1.0.0")));
        assert!(!adoptable_at_once(&csv, &held_by("other", "demo.v1.0.0")));
        assert!(!adoptable_at_once(&csv, &held_by("ops", "another.v1.0.0")));
    }

    #[test]
    fn a_required_api_service_is_met_while_available() {
        let mut found = DynamicObject::new("v1alpha1.example.com", &resource());
        assert_eq!(requirement(&desc(), None).status, StatusReason::NotPresent);
        assert_eq!(
            requirement(&desc(), Some(&found)).status,
            StatusReason::PresentNotSatisfied
        );
        found.data["status"] = serde_json::json!({"conditions": [{"type": "Available", "status": "True"}]});
        let met = requirement(&desc(), Some(&found));
        assert_eq!(met.status, StatusReason::Present);
        assert_eq!(met.kind, "APIService");
        assert_eq!(met.name, "v1alpha1.example.com");
    }
}
