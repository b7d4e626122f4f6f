//! Reading a CRD for the requirement checks without its schema.
//!
//! The CSV reconcile only asks of a CRD whether a version is served, whether it
//! is Established and NamesAccepted, and its uid ([`super::validate`]), and
//! whether its `spec.conversion` already calls the CSV's conversion webhook
//! ([`super::webhooks::conversion_current`]). A CRD's
//! schema is often hundreds of kilobytes; parsed into
//! [`CustomResourceDefinition`] it becomes thousands of small allocations made
//! and dropped on every reconcile, which the allocator keeps as resident memory.
//! [`get`] parses the response into the few fields read and skips the rest
//! while parsing.

use k8s_openapi::{
    apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionCondition,
        CustomResourceDefinitionSpec, CustomResourceDefinitionStatus, CustomResourceDefinitionVersion,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Client,
    api::GetParams,
    core::{Request, Resource},
};
use serde::Deserialize;

/// The fields of a CRD that the requirement checks read.
#[derive(Debug, Default, Deserialize, PartialEq)]
struct Summary {
    #[serde(default)]
    metadata: SummaryMeta,
    #[serde(default)]
    spec: SummarySpec,
    #[serde(default)]
    status: SummaryStatus,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
struct SummaryMeta {
    name: Option<String>,
    uid: Option<String>,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
struct SummarySpec {
    #[serde(default)]
    versions: Vec<SummaryVersion>,
    /// Small: a strategy, and the webhook's client config when there is one.
    #[serde(default)]
    conversion: Option<CustomResourceConversion>,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
struct SummaryVersion {
    name: String,
    #[serde(default)]
    served: bool,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
struct SummaryStatus {
    #[serde(default)]
    conditions: Vec<SummaryCondition>,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
struct SummaryCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

impl Summary {
    /// A CRD that carries only the summarised fields (name, uid, the versions'
    /// names and `served`, the conversion, the conditions' types and statuses).
    fn into_crd(self) -> CustomResourceDefinition {
        CustomResourceDefinition {
            metadata: ObjectMeta {
                name: self.metadata.name,
                uid: self.metadata.uid,
                ..ObjectMeta::default()
            },
            spec: CustomResourceDefinitionSpec {
                versions: self
                    .spec
                    .versions
                    .into_iter()
                    .map(|version| CustomResourceDefinitionVersion {
                        name: version.name,
                        served: version.served,
                        ..CustomResourceDefinitionVersion::default()
                    })
                    .collect(),
                conversion: self.spec.conversion,
                ..CustomResourceDefinitionSpec::default()
            },
            status: Some(CustomResourceDefinitionStatus {
                conditions: Some(
                    self.status
                        .conditions
                        .into_iter()
                        .map(|condition| CustomResourceDefinitionCondition {
                            type_: condition.type_,
                            status: condition.status,
                            ..CustomResourceDefinitionCondition::default()
                        })
                        .collect(),
                ),
                ..CustomResourceDefinitionStatus::default()
            }),
        }
    }
}

/// The CRD `name`, holding only its name, uid, versions (name and `served`),
/// conversion and conditions (type and status); `None` when it does not exist.
pub async fn get(client: &Client, name: &str) -> Result<Option<CustomResourceDefinition>, kube::Error> {
    let request = Request::new(CustomResourceDefinition::url_path(&(), None))
        .get(name, &GetParams::default())
        .map_err(kube::Error::BuildRequest)?;
    match client.request::<Summary>(request).await {
        Ok(summary) => Ok(Some(summary.into_crd())),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_keeps_what_the_requirement_checks_read_and_skips_the_schema() {
        let summary: Summary = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "etcds.example.com", "uid": "u-1", "managedFields": [{"manager": "x"}]},
            "spec": {
                "group": "example.com",
                "names": {"kind": "Etcd", "plural": "etcds"},
                "scope": "Namespaced",
                "conversion": {"strategy": "None"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}},
                    {"name": "v1beta1", "served": false, "storage": false}
                ]
            },
            "status": {"conditions": [
                {"type": "Established", "status": "True", "lastTransitionTime": "2026-11-25T10:00:00Z", "reason": "InitialNamesAccepted", "message": "ok"},
                {"type": "NamesAccepted", "status": "True"}
            ], "storedVersions": ["v1"]}
        }))
        .expect("a CRD");
        let crd = summary.into_crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("etcds.example.com"));
        assert_eq!(crd.metadata.uid.as_deref(), Some("u-1"));
        let versions: Vec<(&str, bool)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served))
            .collect();
        assert_eq!(versions, [("v1", true), ("v1beta1", false)]);
        assert!(crd.spec.versions.iter().all(|v| v.schema.is_none()));
        let conversion = crd.spec.conversion.as_ref().expect("a conversion");
        assert_eq!(conversion.strategy, "None");
        let conditions: Vec<(&str, &str)> = crd
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .expect("conditions")
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(conditions, [("Established", "True"), ("NamesAccepted", "True")]);
    }

    #[test]
    fn a_crd_without_status_has_no_conditions() {
        let summary: Summary = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "etcds.example.com"},
            "spec": {"versions": [{"name": "v1", "served": true}]}
        }))
        .expect("a CRD");
        let crd = summary.into_crd();
        assert_eq!(crd.status.and_then(|s| s.conditions), Some(Vec::new()));
    }
}
