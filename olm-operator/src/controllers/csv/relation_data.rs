//! Relation data: the remote data of a CSV's relations delivered into its
//! Deployments as the CSV asks ([`olm_api::relation_data`]), computed without
//! a client.
//!
//! The Relation controller keeps, for each side in pods of a Ready relation,
//! a ConfigMap of the other side's data, labelled with the relation, the
//! application and its endpoint, and annotated with the hash of its data
//! ([`olm_api::relation_data::DATA_HASH`]). For each of those of the CSV's
//! application whose endpoint the CSV asks for:
//!
//! - `env`: every container gets `envFrom` the ConfigMap, and the pod
//!   template the annotation [`DATA_HASH`] with a hash of every such
//!   ConfigMap's hash: a change of the data rolls the Deployment;
//! - `mount`: the pod gets the ConfigMap as a volume, and every container
//!   mounts it read-only at `<mount>/<relation>`; nothing on the template
//!   changes with the data (the kubelet updates the files).
//!
//! A ConfigMap is referenced as optional, so that a relation removed before
//! the CSV is reconciled again does not keep its pods from starting.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{
        ConfigMap, ConfigMapEnvSource, ConfigMapVolumeSource, EnvFromSource, PodSpec, Volume, VolumeMount,
    },
};
use kube::{
    ResourceExt,
    core::PartialObjectMeta,
    runtime::{
        events::{Event, EventType},
        reflector::Store,
    },
};
use olm_api::{
    endpoints::Endpoints,
    labels,
    model::{APPLICATION_LABEL, RELATION_LABEL, application_of},
    relation_data::{
        DATA_HASH, Deliveries, Delivery, ENDPOINT_LABEL, RelationDataError, data_hash, of_annotations,
    },
    v1alpha1::ClusterServiceVersion,
};

use super::naming::spec_hash;

/// The remote data of one relation of the CSV's application, as its ConfigMap holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Related {
    /// The Relation.
    pub relation: String,
    /// The application's endpoint in it.
    pub endpoint: String,
    /// The ConfigMap.
    pub configmap: String,
    /// The hash of its data.
    pub hash: String,
}

/// The deliveries `csv` asks for: none without the annotation; an error that
/// names the CSV and the cause when it cannot be read.
pub fn deliveries(csv: &ClusterServiceVersion) -> Result<Deliveries, RelationDataError> {
    let name = csv.name_any();
    let declared = Endpoints::of_annotations(&name, csv.annotations()).ok().flatten();
    let declared: Vec<&str> = declared
        .iter()
        .flat_map(|endpoints| endpoints.iter().map(|(_, e)| e.name.as_str()))
        .collect();
    of_annotations(&name, csv.annotations(), &declared)
}

/// The relation-data ConfigMaps of `csv`'s application in `store` ([`related`]).
pub fn read(csv: &ClusterServiceVersion, store: &Store<PartialObjectMeta<ConfigMap>>) -> Vec<Related> {
    let namespace = csv.namespace().unwrap_or_default();
    let configmaps = crate::stores::in_namespace(store, &namespace);
    let configmaps: Vec<&PartialObjectMeta<ConfigMap>> = configmaps.iter().map(AsRef::as_ref).collect();
    related(csv, &configmaps)
}

/// The relation-data ConfigMaps of `csv`'s application among `configmaps`
/// (the labelled ones of its namespace), by relation.
pub fn related(csv: &ClusterServiceVersion, configmaps: &[&PartialObjectMeta<ConfigMap>]) -> Vec<Related> {
    let namespace = csv.namespace().unwrap_or_default();
    let application = application_of(&csv.name_any(), &namespace, csv.labels());
    let mut related: Vec<Related> = configmaps
        .iter()
        .filter(|cm| cm.labels().get(APPLICATION_LABEL) == Some(&application))
        .filter_map(|cm| {
            Some(Related {
                relation: cm.labels().get(RELATION_LABEL)?.clone(),
                endpoint: cm.labels().get(ENDPOINT_LABEL)?.clone(),
                configmap: cm.name_any(),
                hash: cm.annotations().get(DATA_HASH).cloned().unwrap_or_default(),
            })
        })
        .collect();
    related.sort_by(|a, b| a.relation.cmp(&b.relation));
    related
}

/// Delivers the data of `related` into each of `deployments` as `deliveries`
/// ask, and stamps their spec hash again. Nothing changes when no relation
/// is delivered.
pub fn apply(deployments: &mut [Deployment], deliveries: &Deliveries, related: &[Related]) {
    let delivered: Vec<(&Related, &Delivery)> = related
        .iter()
        .filter_map(|r| Some((r, deliveries.get(&r.endpoint)?)))
        .collect();
    if delivered.is_empty() {
        return;
    }
    let env_hashes: BTreeMap<String, String> = delivered
        .iter()
        .filter(|(_, d)| **d == Delivery::Env)
        .map(|(r, _)| (r.configmap.clone(), r.hash.clone()))
        .collect();
    for deployment in deployments.iter_mut() {
        let Some(template) = deployment.spec.as_mut().map(|s| &mut s.template) else {
            continue;
        };
        if !env_hashes.is_empty() {
            template
                .metadata
                .get_or_insert_with(Default::default)
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(DATA_HASH.to_owned(), data_hash(&env_hashes));
        }
        let pod = template.spec.get_or_insert_with(PodSpec::default);
        for (related, delivery) in &delivered {
            deliver(pod, related, delivery);
        }
        if let Some(spec) = deployment.spec.as_ref() {
            let hash = spec_hash(spec);
            deployment
                .labels_mut()
                .insert(labels::DEPLOYMENT_SPEC_HASH.to_owned(), hash);
        }
    }
}

fn deliver(pod: &mut PodSpec, related: &Related, delivery: &Delivery) {
    match delivery {
        Delivery::Env => {
            for container in &mut pod.containers {
                container
                    .env_from
                    .get_or_insert_with(Vec::new)
                    .push(EnvFromSource {
                        config_map_ref: Some(ConfigMapEnvSource {
                            name: related.configmap.clone(),
                            optional: Some(true),
                        }),
                        ..EnvFromSource::default()
                    });
            }
        }
        Delivery::Mount(path) => {
            let volume = volume_name(&related.configmap);
            pod.volumes.get_or_insert_with(Vec::new).push(Volume {
                name: volume.clone(),
                config_map: Some(ConfigMapVolumeSource {
                    name: related.configmap.clone(),
                    optional: Some(true),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            });
            for container in &mut pod.containers {
                container
                    .volume_mounts
                    .get_or_insert_with(Vec::new)
                    .push(VolumeMount {
                        name: volume.clone(),
                        mount_path: format!("{}/{}", path.trim_end_matches('/'), related.relation),
                        read_only: Some(true),
                        ..VolumeMount::default()
                    });
            }
        }
    }
}

/// A volume name (a DNS label) for ConfigMap `configmap`.
fn volume_name(configmap: &str) -> String {
    let hash = data_hash(&BTreeMap::from([(configmap.to_owned(), String::new())]));
    format!("relation-data-{hash}")
}

/// The Warning Event that tells a CSV its relation-data annotation cannot be read.
pub fn invalid_event(invalid: &RelationDataError) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "InvalidRelationData".to_owned(),
        note: Some(invalid.to_string()),
        action: "Install".to_owned(),
        secondary: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(annotations: serde_json::Value) -> ClusterServiceVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "app.v1", "namespace": "ns",
                         "labels": {"operators.coreos.com/app.ns": ""},
                         "annotations": annotations},
            "spec": {"displayName": "app", "install": {"strategy": "deployment"}},
        }))
        .expect("a CSV")
    }

    fn deployment() -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "app"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}},
        }))
        .expect("a Deployment")
    }

    fn related(relation: &str, endpoint: &str, hash: &str) -> Related {
        Related {
            relation: relation.into(),
            endpoint: endpoint.into(),
            configmap: format!("{relation}.app.remote"),
            hash: hash.into(),
        }
    }

    fn template_hash(d: &Deployment) -> Option<String> {
        let meta = d.spec.as_ref()?.template.metadata.as_ref()?;
        meta.annotations.as_ref()?.get(DATA_HASH).cloned()
    }

    const ENDPOINTS: &str = "requires: {db: {interface: pg}, logs: {interface: loki}}";

    #[test]
    fn the_csv_asks_and_bad_asks_are_named() {
        let ok = csv(serde_json::json!({
            "olm-rs.dev/endpoints": ENDPOINTS,
            "olm-rs.dev/relation-data": r#"{"db": {"env": true}}"#}));
        assert_eq!(deliveries(&ok).unwrap()["db"], Delivery::Env);
        assert!(deliveries(&csv(serde_json::json!({}))).unwrap().is_empty());
        let bad = csv(serde_json::json!({
            "olm-rs.dev/endpoints": ENDPOINTS,
            "olm-rs.dev/relation-data": r#"{"cache": {"env": true}}"#}));
        let error = deliveries(&bad).unwrap_err();
        assert!(error.to_string().contains("CSV app.v1"), "{error}");
        assert!(
            error.to_string().contains("endpoint cache is not declared"),
            "{error}"
        );
        assert_eq!(invalid_event(&error).reason, "InvalidRelationData");
    }

    #[test]
    fn env_rolls_with_the_data_and_a_mount_does_not() {
        let env = Deliveries::from([("db".to_owned(), Delivery::Env)]);
        let mount = Deliveries::from([("db".to_owned(), Delivery::Mount("/var/run/rel/".into()))]);
        let cases: &[(&Deliveries, &[Related], bool)] = &[
            // (asked, related, env delivered)
            (&env, &[related("r", "db", "h1")], true),
            (&mount, &[related("r", "db", "h1")], false),
            (&env, &[related("r", "logs", "h1")], false),
            (&Deliveries::new(), &[related("r", "db", "h1")], false),
        ];
        for (asked, related, is_env) in cases {
            let mut d = [deployment()];
            apply(&mut d, asked, related);
            let pod = d[0].spec.as_ref().unwrap().template.spec.as_ref().unwrap();
            let env_from = pod.containers[1].env_from.clone().unwrap_or_default();
            assert_eq!(env_from.len(), usize::from(*is_env), "{asked:?} {related:?}");
            assert_eq!(template_hash(&d[0]).is_some(), *is_env);
        }
        // env: the template's hash follows the data.
        let (mut one, mut two) = ([deployment()], [deployment()]);
        apply(&mut one, &env, &[related("r", "db", "h1")]);
        apply(&mut two, &env, &[related("r", "db", "h2")]);
        assert_ne!(template_hash(&one[0]), template_hash(&two[0]));
        let source = one[0]
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .env_from
            .as_ref()
            .unwrap()[0]
            .config_map_ref
            .clone()
            .unwrap();
        assert_eq!(source.name, "r.app.remote");
        // mount: the template is the same whatever the data.
        let (mut one, mut two) = ([deployment()], [deployment()]);
        apply(&mut one, &mount, &[related("r", "db", "h1")]);
        apply(&mut two, &mount, &[related("r", "db", "h2")]);
        assert_eq!(one[0].spec, two[0].spec);
        let pod = one[0].spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        let volume = &pod.volumes.as_ref().unwrap()[0];
        assert_eq!(volume.config_map.as_ref().unwrap().name, "r.app.remote");
        let mounted = &pod.containers[1].volume_mounts.as_ref().unwrap()[0];
        assert_eq!(mounted.mount_path, "/var/run/rel/r");
        assert_eq!(
            (mounted.name.as_str(), mounted.read_only),
            (volume.name.as_str(), Some(true))
        );
        assert!(volume.name.len() <= 63);
    }

    #[test]
    fn only_the_applications_own_configmaps_are_related() {
        let cm = |name: &str, application: &str| -> PartialObjectMeta<ConfigMap> {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "ns",
                    "labels": {RELATION_LABEL: "r", APPLICATION_LABEL: application, ENDPOINT_LABEL: "db"},
                    "annotations": {DATA_HASH: "h"}},
            }))
            .expect("metadata")
        };
        let (mine, theirs) = (cm("r.app.remote", "app"), cm("r.db.remote", "db"));
        let found = super::related(&csv(serde_json::json!({})), &[&mine, &theirs]);
        assert_eq!(found, [related("r", "db", "h")]);
    }
}
