//! How the objects of a CSV's install are named, labelled and hashed: pure
//! helpers shared by the steps before [`super::build`] and by it, kept apart so
//! that no step has to use the build step to name what it reads.

use k8s_openapi::api::apps::v1::DeploymentSpec;
use kube::ResourceExt;
use olm_api::{labels, v1alpha1::ClusterServiceVersion};

/// The longest name a generated object gets (a label value's limit, so that
/// names stay usable as label values too).
const MAX_NAME: usize = 63;

/// The label `operators.coreos.com/<package>.<namespace>` (empty value) that
/// ties the objects of `csv`'s install to its `Operator`, when its package is
/// known ([`package_of`]).
pub fn operator_label_of(csv: &ClusterServiceVersion) -> Option<(String, String)> {
    let namespace = csv.namespace()?;
    package_of(csv).map(|package| (labels::operator_label(&package, &namespace), String::new()))
}

/// The package of a CSV, when something says it: a label
/// `operators.coreos.com/<package>.<namespace>` on the CSV, or an `olm.package`
/// property in its `operatorframework.io/properties` or `olm.properties` annotation.
pub fn package_of(csv: &ClusterServiceVersion) -> Option<String> {
    let namespace = csv.namespace().unwrap_or_default();
    let suffix = format!(".{namespace}");
    let from_label = csv.labels().keys().find_map(|key| {
        key.strip_prefix("operators.coreos.com/")
            .and_then(|rest| rest.strip_suffix(&suffix))
            .filter(|package| !package.is_empty())
            .map(str::to_owned)
    });
    if from_label.is_some() {
        return from_label;
    }
    let annotations = csv.annotations();
    let installed = annotations
        .get(labels::INSTALLED_PROPERTIES)
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .and_then(|value| value.get("properties").cloned());
    let declared = annotations
        .get(labels::PROPERTIES)
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok());
    [installed, declared]
        .into_iter()
        .flatten()
        .find_map(|properties| {
            properties.as_array()?.iter().find_map(|property| {
                (property.get("type")?.as_str()? == "olm.package")
                    .then(|| {
                        property
                            .get("value")?
                            .get("packageName")?
                            .as_str()
                            .map(str::to_owned)
                    })
                    .flatten()
            })
        })
}

/// The hash of a Deployment spec, as the `olm.deployment-spec-hash` label
/// carries it. The OperatorGroup annotations are left out, so that a change of
/// targets alone does not count as a new spec.
pub fn spec_hash(spec: &DeploymentSpec) -> String {
    let mut value = serde_json::to_value(spec).unwrap_or_default();
    if let Some(annotations) = value
        .pointer_mut("/template/metadata/annotations")
        .and_then(|a| a.as_object_mut())
    {
        annotations.remove(labels::OPERATOR_GROUP);
        annotations.remove(labels::OPERATOR_NAMESPACE);
        annotations.remove(labels::TARGET_NAMESPACES);
    }
    format!("{:08x}", fnv1a(value.to_string().as_bytes()))
}

/// A name of at most 63 characters: `base` (shortened if needed), a dash and
/// a hash of `parts`.
pub fn generate_name(base: &str, parts: &[&str]) -> String {
    let hash = format!("{:08x}", fnv1a(parts.join("\u{0}").as_bytes()));
    let room = MAX_NAME - hash.len() - 1;
    let mut base: String = base.chars().take(room).collect();
    while base.ends_with(['-', '.']) {
        base.pop();
    }
    format!("{base}-{hash}")
}

/// FNV-1a in 32 bits. Not [`olm_runtime::effects::fnv1a`] (64 bits): the names
/// and `olm.deployment-spec-hash` labels of installs already in clusters carry
/// these 8 hex digits, and a different hash would rename (and so re-create)
/// every Role and roll every Deployment on upgrade.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}
