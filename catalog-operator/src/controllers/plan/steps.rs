//! The steps of an InstallPlan, built from the resolved bundles' manifests (pure).
//!
//! Per bundle, dependencies first: its CRDs (`v1beta1` ones written as `v1`,
//! which Kubernetes still serves: [`crd_v1`]), then its CSV, then the other objects
//! OLM lets a bundle carry, then (for a bundle pulled in as a dependency) a
//! Subscription to its package, so that it is upgraded later like any other.
//! The CSV gets the bundle's properties in `operatorframework.io/properties`, and
//! `spec.replaces` set to the CSV it actually replaces (OLM does both).

use olm_api::{
    OPERATORS_GROUP, labels,
    v1alpha1::{Approval, Step, StepResource, StepStatus},
};
use olm_catalog::{Bundle, Property};
use serde_json::{Map, Value, json};

use super::{ResolvedStep, crd_v1};

/// A resolved bundle with its content.
#[derive(Clone, Debug)]
pub struct PlannedBundle {
    /// Where it comes from and why.
    pub step: ResolvedStep,
    /// The bundle, with its manifests.
    pub bundle: Bundle,
}

/// Why steps could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// A manifest does not decode.
    #[error("bundle {bundle}: {message}")]
    Manifest {
        /// The bundle.
        bundle: String,
        /// What is wrong.
        message: String,
    },
    /// The bundle carries no manifests.
    #[error(
        "bundle {bundle} carries no manifests in catalog {catalog}, nor did its image {image:?} give any: check that the image is a bundle image (manifests/ and metadata/)"
    )]
    NoManifests {
        /// The bundle.
        bundle: String,
        /// The catalog.
        catalog: String,
        /// The bundle image.
        image: String,
    },
}

/// The kinds an InstallPlan may create, by API group (OLM's list).
const SUPPORTED: &[(&str, &str)] = &[
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    (OPERATORS_GROUP, "ClusterServiceVersion"),
    (OPERATORS_GROUP, "Subscription"),
    ("", "Secret"),
    ("", "ConfigMap"),
    ("", "ServiceAccount"),
    ("", "Service"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("monitoring.coreos.com", "PrometheusRule"),
    ("monitoring.coreos.com", "ServiceMonitor"),
    ("monitoring.coreos.com", "PodMonitor"),
    ("policy", "PodDisruptionBudget"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("autoscaling.k8s.io", "VerticalPodAutoscaler"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("console.openshift.io", "ConsoleYAMLSample"),
    ("console.openshift.io", "ConsoleQuickStart"),
    ("console.openshift.io", "ConsoleCLIDownload"),
    ("console.openshift.io", "ConsoleLink"),
    ("console.openshift.io", "ConsolePlugin"),
];

/// Whether an InstallPlan may create objects of this kind.
pub fn is_supported(group: &str, kind: &str) -> bool {
    SUPPORTED.iter().any(|&(g, k)| g == group && k == kind)
}

/// `group` and `version` of an `apiVersion`.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// The name of the Subscription OLM creates for a dependency:
/// `<package>-<channel>-<catalog>-<catalog namespace>`, made a valid object name.
pub fn dependency_subscription_name(step: &ResolvedStep) -> String {
    let raw = format!(
        "{}-{}-{}-{}",
        step.package, step.channel, step.catalog.name, step.catalog.namespace
    );
    let mut name: String = raw
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    name.truncate(253);
    name.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_owned()
}

/// Metadata fields that the server owns and a manifest must not carry.
const SERVER_FIELDS: &[&str] = &[
    "namespace",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
];

/// A manifest cleaned for applying: no server-owned metadata, no status.
fn clean(mut object: Value) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in SERVER_FIELDS {
                meta.remove(*field);
            }
        }
    }
    object
}

/// `{"properties": [...]}` of the bundle, without its manifests, as OLM writes it
/// on the CSV it installs.
fn properties_annotation(bundle: &Bundle) -> String {
    let properties: Vec<Value> = bundle
        .properties
        .iter()
        .filter(|p| !matches!(p, Property::BundleObject(_)))
        .map(|p| {
            json!({
                "type": p.type_name(),
                "value": serde_json::from_str::<Value>(&p.value_json()).unwrap_or(Value::Null),
            })
        })
        .collect();
    json!({ "properties": properties }).to_string()
}

fn step(planned: &PlannedBundle, object: &Value, status: StepStatus) -> Step {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (group, version) = split_api_version(api_version);
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Step {
        resolving: planned.step.bundle.clone(),
        resource: StepResource {
            catalog_source: planned.step.catalog.name.clone(),
            catalog_source_namespace: planned.step.catalog.namespace.clone(),
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            manifest: Some(object.to_string()),
        },
        status,
        optional: None,
    }
}

/// `object` with the label `key` (empty value, as OLM sets it) added to its metadata.
fn with_label(mut object: Value, key: &str) -> Value {
    if let Some(map) = object.as_object_mut() {
        let metadata = map.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
        if let Some(metadata) = metadata.as_object_mut() {
            let labels = metadata
                .entry("labels")
                .or_insert_with(|| Value::Object(Map::new()));
            if !labels.is_object() {
                *labels = Value::Object(Map::new());
            }
            if let Some(labels) = labels.as_object_mut() {
                labels.insert(key.to_owned(), Value::String(String::new()));
            }
        }
    }
    object
}

/// The steps for `bundles`, installed in `namespace`, in install order.
/// `approval` is given to the Subscriptions created for dependencies. Every
/// object is labelled `operators.coreos.com/<package>.<namespace>`, which makes
/// it a component of its package's `Operator`.
pub fn build(bundles: &[PlannedBundle], approval: Approval, namespace: &str) -> Result<Vec<Step>, StepError> {
    let mut steps = Vec::new();
    for planned in bundles {
        let label = labels::operator_label(&planned.step.package, namespace);
        let objects = bundle_objects(planned, &label)?;
        steps.extend(object_steps(planned, objects));
        if planned.step.dependency {
            let subscription = dependency_subscription(planned, approval);
            steps.push(step(
                planned,
                &with_label(subscription, &label),
                StepStatus::NotPresent,
            ));
        }
    }
    Ok(steps)
}

/// The objects of the bundle (its `olm.bundle.object`s), cleaned and labelled;
/// an error when they are not manifests, or when the catalog carries only the
/// CSV's metadata and the manifests are in the bundle image.
fn bundle_objects(planned: &PlannedBundle, label: &str) -> Result<Vec<Value>, StepError> {
    let mut objects = Vec::new();
    for property in &planned.bundle.properties {
        if let Property::BundleObject(object) = property {
            let value = object.decode().map_err(|message| StepError::Manifest {
                bundle: planned.bundle.name.clone(),
                message,
            })?;
            if !value.is_object() {
                return Err(StepError::Manifest {
                    bundle: planned.bundle.name.clone(),
                    message: "a manifest is not a JSON object".to_owned(),
                });
            }
            objects.push(with_label(clean(value), label));
        }
    }
    // Catalogs that carry only `olm.csv.metadata` serve a CSV made from it, with
    // no install strategy and no CRDs: the real manifests are in the image.
    let only_metadata = !objects.iter().any(|o| {
        o.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion")
            && o.pointer("/spec/install").is_some()
    });
    if objects.is_empty() || (only_metadata && !planned.bundle.image.is_empty()) {
        return Err(StepError::NoManifests {
            bundle: planned.bundle.name.clone(),
            catalog: planned.step.catalog.to_string(),
            image: planned.bundle.image.clone(),
        });
    }
    Ok(objects)
}

/// The steps for a bundle's objects: CRDs first, then the CSV, then the rest
/// (marked unsupported when the plan cannot create their kind).
fn object_steps(planned: &PlannedBundle, objects: Vec<Value>) -> Vec<Step> {
    let kind_of = |o: &Value| {
        o.get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (crds, rest): (Vec<Value>, Vec<Value>) = objects
        .into_iter()
        .partition(|o| kind_of(o) == "CustomResourceDefinition");
    let (csvs, others): (Vec<Value>, Vec<Value>) = rest
        .into_iter()
        .partition(|o| kind_of(o) == "ClusterServiceVersion");
    let mut steps = Vec::new();
    for crd in crds {
        steps.push(step(planned, &crd_v1::upgrade(crd), StepStatus::NotPresent));
    }
    for csv in csvs {
        let csv = prepare_csv(csv, planned);
        steps.push(step(planned, &csv, StepStatus::NotPresent));
    }
    for other in &others {
        let api_version = other
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (group, _) = split_api_version(api_version);
        let status = if is_supported(group, &kind_of(other)) {
            StepStatus::NotPresent
        } else {
            StepStatus::UnsupportedResource
        };
        steps.push(step(planned, other, status));
    }
    steps
}

/// The Subscription that keeps a dependency the resolver added up to date.
fn dependency_subscription(planned: &PlannedBundle, approval: Approval) -> Value {
    json!({
        "apiVersion": format!("{OPERATORS_GROUP}/v1alpha1"),
        "kind": "Subscription",
        "metadata": { "name": dependency_subscription_name(&planned.step) },
        "spec": {
            "source": planned.step.catalog.name,
            "sourceNamespace": planned.step.catalog.namespace,
            "name": planned.step.package,
            "channel": planned.step.channel,
            "startingCSV": planned.step.bundle,
            "installPlanApproval": approval,
        },
    })
}

/// The CSV as installed: the bundle's properties annotated, `spec.replaces` set to
/// the CSV it replaces in the namespace.
fn prepare_csv(mut csv: Value, planned: &PlannedBundle) -> Value {
    if let Some(map) = csv.as_object_mut() {
        let metadata = map.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
        if let Some(metadata) = metadata.as_object_mut() {
            let annotations = metadata
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(annotations) = annotations.as_object_mut() {
                annotations.insert(
                    labels::INSTALLED_PROPERTIES.to_owned(),
                    Value::String(properties_annotation(&planned.bundle)),
                );
            }
        }
        if let Some(replaces) = &planned.step.replaces
            && let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.insert("replaces".to_owned(), Value::String(replaces.clone()));
        }
    }
    csv
}

#[cfg(test)]
mod tests {
    use olm_catalog::property::BundleObject;
    use olm_resolver::model::CatalogId;

    use super::*;

    fn planned(dependency: bool, objects: &[Value]) -> PlannedBundle {
        let mut properties = vec![Property::Package(olm_catalog::property::PackageProperty {
            package_name: "db".into(),
            version: olm_catalog::Version::new("1.1.0"),
            release: None,
        })];
        properties.extend(
            objects
                .iter()
                .map(|o| Property::BundleObject(BundleObject::from_json(&o.to_string()))),
        );
        PlannedBundle {
            step: ResolvedStep {
                bundle: "db.v1.1.0".into(),
                package: "db".into(),
                version: "1.1.0".into(),
                catalog: CatalogId::new("Demo", "olm"),
                channel: "stable".into(),
                replaces: Some("db.v1.0.0".into()),
                reason: "subscribed".into(),
                dependency,
            },
            bundle: Bundle {
                name: "db.v1.1.0".into(),
                package: "db".into(),
                image: String::new(),
                properties,
                related_images: Vec::new(),
            },
        }
    }

    #[test]
    fn crds_come_first_then_the_csv_then_the_rest() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "db", "namespace": "x"}}),
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": {"name": "db.v1.1.0"}, "spec": {"version": "1.1.0"}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "dbs.demo.io"}, "status": {"storedVersions": []}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "stray"}}),
        ];
        let steps = build(&[planned(true, &objects)], Approval::Manual, "ops").unwrap();
        let kinds: Vec<_> = steps
            .iter()
            .map(|s| (s.resource.kind.as_str(), s.status))
            .collect();
        assert_eq!(
            kinds,
            [
                ("CustomResourceDefinition", StepStatus::NotPresent),
                ("ClusterServiceVersion", StepStatus::NotPresent),
                ("ServiceAccount", StepStatus::NotPresent),
                ("Deployment", StepStatus::UnsupportedResource),
                ("Subscription", StepStatus::NotPresent),
            ]
        );
        let crd: Value = serde_json::from_str(steps[0].resource.manifest.as_deref().unwrap()).unwrap();
        assert!(crd.get("status").is_none());
        assert_eq!(steps[0].resource.group, "apiextensions.k8s.io");
        let csv: Value = serde_json::from_str(steps[1].resource.manifest.as_deref().unwrap()).unwrap();
        assert_eq!(csv["spec"]["replaces"], "db.v1.0.0");
        let properties = csv["metadata"]["annotations"][labels::INSTALLED_PROPERTIES]
            .as_str()
            .unwrap();
        assert!(properties.contains("olm.package"), "{properties}");
        assert!(!properties.contains("olm.bundle.object"));
        let sa: Value = serde_json::from_str(steps[2].resource.manifest.as_deref().unwrap()).unwrap();
        assert!(sa["metadata"].get("namespace").is_none());
        let sub = &steps[4].resource;
        assert_eq!(sub.name, "db-stable-demo-olm");
        let sub: Value = serde_json::from_str(sub.manifest.as_deref().unwrap()).unwrap();
        assert_eq!(sub["spec"]["startingCSV"], "db.v1.1.0");
        assert_eq!(sub["spec"]["installPlanApproval"], "Manual");
    }

    #[test]
    fn every_object_carries_the_label_of_its_operator() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "db", "labels": {"app": "db"}}}),
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": {"name": "db.v1.1.0"}, "spec": {"version": "1.1.0", "install": {"strategy": "deployment"}}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "dbs.demo.io"}}),
        ];
        let steps = build(&[planned(true, &objects)], Approval::Automatic, "ops").unwrap();
        assert_eq!(steps.len(), 4, "CRD, CSV, ServiceAccount, Subscription");
        for step in &steps {
            let object: Value = serde_json::from_str(step.resource.manifest.as_deref().unwrap()).unwrap();
            assert_eq!(
                object["metadata"]["labels"]["operators.coreos.com/db.ops"],
                json!(""),
                "{}",
                step.resource.kind
            );
        }
        let account: Value = serde_json::from_str(steps[2].resource.manifest.as_deref().unwrap()).unwrap();
        assert_eq!(
            account["metadata"]["labels"]["app"], "db",
            "the bundle's own labels stay"
        );
    }

    #[test]
    fn a_bundle_without_manifests_is_refused() {
        let error = build(&[planned(false, &[])], Approval::Automatic, "ops").unwrap_err();
        assert!(matches!(error, StepError::NoManifests { .. }), "{error}");
        // A CSV made from olm.csv.metadata (no install strategy) for a bundle image.
        let mut metadata_only = planned(
            false,
            &[
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": {"name": "db.v1.1.0"}, "spec": {"displayName": "DB"}}),
            ],
        );
        metadata_only.bundle.image = "quay.io/demo/db-bundle:v1.1.0".into();
        let error = build(&[metadata_only], Approval::Automatic, "ops").unwrap_err();
        assert!(
            error.to_string().contains("quay.io/demo/db-bundle:v1.1.0"),
            "{error}"
        );
    }
}
