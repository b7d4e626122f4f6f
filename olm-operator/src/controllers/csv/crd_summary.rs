//! Reading a CRD for the requirement checks without its schema.
//!
//! The CSV reconcile only asks of a CRD whether a version is served, whether it
//! is Established and NamesAccepted, and its uid ([`super::validate`]), and
//! whether its `spec.conversion` already calls the CSV's conversion webhook
//! ([`super::webhooks::conversion_current`]). A CRD's
//! schema is often hundreds of kilobytes; parsed into
//! [`CustomResourceDefinition`] it becomes thousands of small allocations made
//! and dropped on every reconcile, which the allocator keeps as resident memory.
//! A [`CrdSummary`] is a CRD parsed into the few fields read, skipping the rest
//! while parsing: what the shared store of CRDs holds
//! ([`crate::stores::InstallStores::crds`]), and what [`get`] reads when
//! the store does not hold a CRD as the CSV needs it ([`CrdSummary::serves`]).

use std::{borrow::Cow, collections::BTreeMap};

use k8s_openapi::{
    ClusterResourceScope,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionCondition,
        CustomResourceDefinitionSpec, CustomResourceDefinitionStatus, CustomResourceDefinitionVersion,
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
};
use kube::{
    Client,
    api::GetParams,
    core::{Request, Resource},
};
use serde::{Deserialize, Deserializer};

/// The fields of a CRD that the requirement checks read; a [`Resource`], so
/// that CRDs can be watched and stored as summaries.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct CrdSummary {
    #[serde(default, deserialize_with = "summary_meta")]
    metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_as_default")]
    spec: SummarySpec,
    #[serde(default, deserialize_with = "null_as_default")]
    status: SummaryStatus,
}

/// A field the API server may send as `null` read as its default: a CRD
/// just created has `"conditions": null` in the event that adds it, and a
/// summary that refused it would fail the whole watch.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The metadata a CRD's watch, its store and the CSVs' wake-ups read: not
/// its managed fields, which name every field of the schema and are skipped
/// while parsing, like the schema.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SummaryMeta {
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    deletion_timestamp: Option<Time>,
}

fn summary_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    let meta = SummaryMeta::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name: meta.name,
        uid: meta.uid,
        resource_version: meta.resource_version,
        generation: meta.generation,
        labels: meta.labels,
        annotations: meta.annotations,
        deletion_timestamp: meta.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
struct SummarySpec {
    #[serde(default, deserialize_with = "null_as_default")]
    versions: Vec<SummaryVersion>,
    /// Small: a strategy, and the webhook's client config when there is one.
    #[serde(default)]
    conversion: Option<CustomResourceConversion>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
struct SummaryVersion {
    name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    served: bool,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
struct SummaryStatus {
    #[serde(default, deserialize_with = "null_as_default")]
    conditions: Vec<SummaryCondition>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
struct SummaryCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

impl Resource for CrdSummary {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        CustomResourceDefinition::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        CustomResourceDefinition::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        CustomResourceDefinition::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        CustomResourceDefinition::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl CrdSummary {
    /// Whether the CRD is Established, its names accepted, and serves every
    /// one of `versions`: all a CSV asks of a CRD it owns or requires (a
    /// store's copy that is not is read again live, as the store may lag
    /// behind a CRD just made or changed).
    pub fn serves<'a>(&self, mut versions: impl Iterator<Item = &'a str>) -> bool {
        let condition_true = |kind: &str| {
            self.status
                .conditions
                .iter()
                .any(|c| c.type_ == kind && c.status == "True")
        };
        condition_true("Established")
            && condition_true("NamesAccepted")
            && versions.all(|wanted| self.spec.versions.iter().any(|v| v.name == wanted && v.served))
    }

    /// A CRD that carries only the summarised fields (name, uid, the versions'
    /// names and `served`, the conversion, the conditions' types and statuses).
    pub fn to_crd(&self) -> CustomResourceDefinition {
        CustomResourceDefinition {
            metadata: ObjectMeta {
                name: self.metadata.name.clone(),
                uid: self.metadata.uid.clone(),
                ..ObjectMeta::default()
            },
            spec: CustomResourceDefinitionSpec {
                versions: self
                    .spec
                    .versions
                    .iter()
                    .map(|version| CustomResourceDefinitionVersion {
                        name: version.name.clone(),
                        served: version.served,
                        ..CustomResourceDefinitionVersion::default()
                    })
                    .collect(),
                conversion: self.spec.conversion.clone(),
                ..CustomResourceDefinitionSpec::default()
            },
            status: Some(CustomResourceDefinitionStatus {
                conditions: Some(
                    self.status
                        .conditions
                        .iter()
                        .map(|condition| CustomResourceDefinitionCondition {
                            type_: condition.type_.clone(),
                            status: condition.status.clone(),
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
    match client.request::<CrdSummary>(request).await {
        Ok(summary) => Ok(Some(summary.to_crd())),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_keeps_what_the_requirement_checks_read_and_skips_the_schema() {
        let summary: CrdSummary = serde_json::from_value(serde_json::json!({
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
        assert_eq!(summary.meta().managed_fields, None, "skipped while parsing");
        let crd = summary.to_crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("etcds.example.com"));
        assert_eq!(crd.metadata.uid.as_deref(), Some("u-1"));
        assert!(summary.serves(["v1"].into_iter()));
        assert!(
            !summary.serves(["v1", "v1beta1"].into_iter()),
            "v1beta1 is not served"
        );
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
    fn the_event_that_adds_a_new_crd_reads_with_no_conditions() {
        // What a watch of CRDs gets when one is created (its status not yet
        // written by the API server's controllers): conditions are null.
        let event = r#"{"type":"ADDED","object":{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1","metadata":{"name":"widgets.probe.example.com","uid":"u-2","resourceVersion":"812","generation":1,"labels":null},"spec":{"group":"probe.example.com","names":{"plural":"widgets","kind":"Widget"},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}],"conversion":{"strategy":"None"}},"status":{"conditions":null,"acceptedNames":{"plural":"","kind":""},"storedVersions":["v1"]}}}"#;
        let event: kube::core::WatchEvent<CrdSummary> = serde_json::from_str(event).expect("a watch event");
        let kube::core::WatchEvent::Added(summary) = event else {
            panic!("an ADDED event: {event:?}");
        };
        assert_eq!(
            summary.metadata.name.as_deref(),
            Some("widgets.probe.example.com")
        );
        assert!(summary.status.conditions.is_empty());
        assert!(!summary.serves(["v1"].into_iter()), "not Established yet");
        let nulls: CrdSummary = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "x"}, "spec": {"versions": null}, "status": null
        }))
        .expect("nulls read as empty");
        assert_eq!(nulls.to_crd().spec.versions, []);
    }

    #[test]
    fn a_crd_without_status_has_no_conditions() {
        let summary: CrdSummary = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "etcds.example.com"},
            "spec": {"versions": [{"name": "v1", "served": true}]}
        }))
        .expect("a CRD");
        let crd = summary.to_crd();
        assert_eq!(crd.status.and_then(|s| s.conditions), Some(Vec::new()));
        assert!(!summary.serves(std::iter::empty()), "not Established");
    }
}
