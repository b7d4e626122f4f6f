//! Overrides: a Subscription's `spec.config` merged into the Deployments of
//! its CSV, with OLM's rules, computed without a client.
//!
//! The Subscription is the one in the CSV's namespace whose
//! `status.installedCSV` names the CSV (OLM's lookup). Its config is merged
//! into every Deployment of the CSV, in OLM's order, each rule as OLM has it:
//!
//! | field | rule |
//! |---|---|
//! | `env` | per container, by name: the config's value wins in place; new names are appended in the config's order |
//! | `envFrom` | per container: a source not already there (same prefix and reference) is appended |
//! | `volumes` | by name: the config's volume replaces the pod's, new ones are appended |
//! | `volumeMounts` | per container, by name: replaced or appended, as volumes |
//! | `tolerations` | appended, unless the pod already has an equal one |
//! | `resources` | replace every container's resources |
//! | `nodeSelector` | replaces the pod's |
//! | `affinity` | replaces each of node, pod and pod anti-affinity it sets; an empty one (`{}`) removes it, and `affinity: {}` removes all |
//! | `annotations` | added to the Deployment and its pod template; annotations already there win |
//!
//! Beside the config, the Subscription's annotation `olm-rs.dev/replicas`
//! (olm-rs's own: OLM's config has no replicas) sets `spec.replicas` of
//! every Deployment of the CSV ([`Replicas`]).
//!
//! `selector` is not used: OLM applies the config to every Deployment of the
//! CSV. Only the containers get env, mounts and resources, not the init
//! containers, as in OLM.
//!
//! The Deployment is server-side applied from the CSV and this merge, so a
//! field the config no longer sets leaves the Deployment at the next apply:
//! removing the config reverts the Deployments. The `olm.deployment-spec-hash`
//! label is computed again after the merge, so a change of config is a change
//! of spec (a new rollout), as in OLM.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Affinity, EnvFromSource, EnvVar, PodSpec, Toleration, Volume, VolumeMount},
};
use kube::{
    ResourceExt,
    runtime::events::{Event, EventType},
};
use olm_api::{
    labels,
    replicas::{InvalidReplicas, replicas},
    v1alpha1::{Subscription, SubscriptionConfig},
};

use super::naming::spec_hash;

/// The Subscription among `subscriptions` that installed the CSV named
/// `csv`: the one whose `status.installedCSV` names it, as OLM finds it.
pub fn subscription_for<'a>(
    subscriptions: impl IntoIterator<Item = &'a Subscription>,
    csv: &str,
) -> Option<&'a Subscription> {
    subscriptions
        .into_iter()
        .find(|sub| sub.status.as_ref().and_then(|s| s.installed_csv.as_deref()) == Some(csv))
}

/// The config of the Subscription among `subscriptions` that installed the
/// CSV named `csv` ([`subscription_for`]). None when no Subscription names it
/// or it has no config.
pub fn config_for<'a>(
    subscriptions: impl IntoIterator<Item = &'a Subscription>,
    csv: &str,
) -> Option<SubscriptionConfig> {
    subscription_for(subscriptions, csv).and_then(|sub| sub.spec.config.clone())
}

/// The replicas the Subscription that installed a CSV asks of its
/// Deployments.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Replicas {
    /// No Subscription asks: each Deployment runs the replicas its CSV declares.
    #[default]
    Declared,
    /// Every Deployment runs this many.
    Asked(i32),
    /// The Subscription's annotation cannot be read: the Deployments run the
    /// replicas their CSV declares, and the Subscription is told why.
    Invalid {
        /// The Subscription, to be told.
        subscription: Box<Subscription>,
        /// What is wrong.
        invalid: InvalidReplicas,
    },
}

impl Replicas {
    /// What `subscription` (the one that installed the CSV, if any) asks.
    pub fn of(subscription: Option<&Subscription>) -> Replicas {
        let Some(subscription) = subscription else {
            return Replicas::Declared;
        };
        match replicas(subscription.annotations()) {
            Ok(None) => Replicas::Declared,
            Ok(Some(n)) => Replicas::Asked(n),
            Err(invalid) => Replicas::Invalid {
                subscription: Box::new(subscription.clone()),
                invalid,
            },
        }
    }

    /// The count every Deployment runs, when one is asked.
    pub fn asked(&self) -> Option<i32> {
        match self {
            Replicas::Asked(n) => Some(*n),
            Replicas::Declared | Replicas::Invalid { .. } => None,
        }
    }
}

/// The CSV whose Deployments a change of `subscription` may change: the one
/// its `status.installedCSV` names.
pub fn installed_csv(
    subscription: &Subscription,
) -> Option<kube::runtime::reflector::ObjectRef<olm_api::v1alpha1::ClusterServiceVersion>> {
    let csv = subscription.status.as_ref()?.installed_csv.as_deref()?;
    let namespace = subscription.namespace()?;
    Some(kube::runtime::reflector::ObjectRef::new(csv).within(&namespace))
}

/// The Warning Event that tells a Subscription its replicas annotation
/// cannot be read.
pub fn invalid_replicas_event(invalid: &InvalidReplicas) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "InvalidReplicas".to_owned(),
        note: Some(invalid.to_string()),
        action: "Scale".to_owned(),
        secondary: None,
    }
}

/// Merges `config` into each of `deployments`, sets the `replicas` asked,
/// and stamps their spec hash again. Without either, nothing changes.
pub fn apply(deployments: &mut [Deployment], config: Option<&SubscriptionConfig>, replicas: &Replicas) {
    if config.is_none() && replicas.asked().is_none() {
        return;
    }
    for deployment in deployments {
        if let Some(config) = config {
            merge(deployment, config);
        }
        if let (Some(n), Some(spec)) = (replicas.asked(), deployment.spec.as_mut()) {
            spec.replicas = Some(n);
        }
        if let Some(spec) = deployment.spec.as_ref() {
            let hash = spec_hash(spec);
            deployment
                .labels_mut()
                .insert(labels::DEPLOYMENT_SPEC_HASH.to_owned(), hash);
        }
    }
}

/// Merges `config` into `deployment`, in OLM's order: env, envFrom, volumes,
/// volume mounts, tolerations, resources, node selector, affinity, annotations.
pub fn merge(deployment: &mut Deployment, config: &SubscriptionConfig) {
    if let Some(pod) = deployment
        .spec
        .as_mut()
        .and_then(|spec| spec.template.spec.as_mut())
    {
        merge_pod(pod, config);
    }
    if let Some(annotations) = &config.annotations {
        let merged = under(annotations, deployment.metadata.annotations.take());
        deployment.metadata.annotations = Some(merged);
        if let Some(spec) = deployment.spec.as_mut() {
            let template = spec.template.metadata.get_or_insert_with(Default::default);
            template.annotations = Some(under(annotations, template.annotations.take()));
        }
    }
}

fn merge_pod(pod: &mut PodSpec, config: &SubscriptionConfig) {
    for container in &mut pod.containers {
        if let Some(env) = &config.env {
            container.env = Some(merge_env(container.env.take().unwrap_or_default(), env));
        }
        if let Some(env_from) = &config.env_from {
            container.env_from = Some(merge_env_from(
                container.env_from.take().unwrap_or_default(),
                env_from,
            ));
        }
    }
    if let Some(volumes) = &config.volumes {
        pod.volumes = Some(merge_by_name(
            pod.volumes.take().unwrap_or_default(),
            volumes,
            |v: &Volume| &v.name,
        ));
    }
    if let Some(mounts) = &config.volume_mounts {
        for container in &mut pod.containers {
            container.volume_mounts = Some(merge_by_name(
                container.volume_mounts.take().unwrap_or_default(),
                mounts,
                |m: &VolumeMount| &m.name,
            ));
        }
    }
    if let Some(tolerations) = &config.tolerations {
        pod.tolerations = Some(merge_tolerations(
            pod.tolerations.take().unwrap_or_default(),
            tolerations,
        ));
    }
    if let Some(resources) = &config.resources {
        for container in &mut pod.containers {
            container.resources = Some(resources.clone());
        }
    }
    if let Some(node_selector) = &config.node_selector {
        pod.node_selector = Some(node_selector.clone());
    }
    if let Some(affinity) = &config.affinity {
        pod.affinity = override_affinity(pod.affinity.take(), affinity);
    }
}

/// The container's variables, each replaced in place by the config's of the
/// same name, then the config's new names in the config's order.
fn merge_env(existing: Vec<EnvVar>, config: &[EnvVar]) -> Vec<EnvVar> {
    // A name given twice in the config takes its last value.
    let wanted: BTreeMap<&str, &EnvVar> = config.iter().map(|var| (var.name.as_str(), var)).collect();
    let existing_names: Vec<String> = existing.iter().map(|var| var.name.clone()).collect();
    let mut merged: Vec<EnvVar> = existing
        .into_iter()
        .map(|var| match wanted.get(var.name.as_str()) {
            Some(replacement) => (*replacement).clone(),
            None => var,
        })
        .collect();
    let mut added: Vec<&str> = Vec::new();
    for var in config {
        if existing_names.contains(&var.name) || added.contains(&var.name.as_str()) {
            continue;
        }
        added.push(&var.name);
        merged.push(wanted[var.name.as_str()].clone());
    }
    merged
}

/// The container's sources, then each of the config's not already among them.
fn merge_env_from(existing: Vec<EnvFromSource>, config: &[EnvFromSource]) -> Vec<EnvFromSource> {
    let mut merged = existing.clone();
    merged.extend(config.iter().filter(|source| !existing.contains(source)).cloned());
    merged
}

/// `existing` with each item of the same name replaced by the config's, then
/// the config's new names appended.
fn merge_by_name<T: Clone>(existing: Vec<T>, config: &[T], name: impl Fn(&T) -> &String) -> Vec<T> {
    let mut merged = existing;
    for item in config {
        match merged.iter_mut().find(|present| name(present) == name(item)) {
            Some(present) => *present = item.clone(),
            None => merged.push(item.clone()),
        }
    }
    merged
}

/// The pod's tolerations, then each of the config's that the pod lacks.
fn merge_tolerations(existing: Vec<Toleration>, config: &[Toleration]) -> Vec<Toleration> {
    let mut merged = existing.clone();
    merged.extend(
        config
            .iter()
            .filter(|toleration| !existing.contains(toleration))
            .cloned(),
    );
    merged
}

/// The pod's affinity with the config's on top: each part the config sets
/// replaces the pod's, an empty part removes it, an empty affinity removes all.
fn override_affinity(existing: Option<Affinity>, config: &Affinity) -> Option<Affinity> {
    let empty = Affinity::default();
    if *config == empty {
        return None;
    }
    let Some(mut affinity) = existing.filter(|a| *a != empty) else {
        return Some(config.clone());
    };
    if let Some(node) = &config.node_affinity {
        affinity.node_affinity = (*node != Default::default()).then(|| node.clone());
    }
    if let Some(pod) = &config.pod_affinity {
        affinity.pod_affinity = (*pod != Default::default()).then(|| pod.clone());
    }
    if let Some(anti) = &config.pod_anti_affinity {
        affinity.pod_anti_affinity = (*anti != Default::default()).then(|| anti.clone());
    }
    (affinity != empty).then_some(affinity)
}

/// `added` with `existing` on top: annotations already there win.
fn under(
    added: &BTreeMap<String, String>,
    existing: Option<BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut merged = added.clone();
    merged.extend(existing.unwrap_or_default());
    merged
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        api::{
            apps::v1::DeploymentSpec,
            core::v1::{
                ConfigMapEnvSource, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement,
                NodeSelectorTerm, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodTemplateSpec,
                ResourceRequirements, SecretEnvSource,
            },
        },
        apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::ObjectMeta},
    };
    use olm_api::v1alpha1::{SubscriptionSpec, SubscriptionStatus};

    use super::*;

    fn var(name: &str, value: &str) -> EnvVar {
        EnvVar {
            name: name.to_owned(),
            value: Some(value.to_owned()),
            value_from: None,
        }
    }

    fn container(name: &str, env: Vec<EnvVar>) -> Container {
        Container {
            name: name.to_owned(),
            image: Some("registry.k8s.io/pause:3.10".to_owned()),
            env: Some(env),
            ..Container::default()
        }
    }

    fn deployment(pod: PodSpec) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("demo".to_owned()),
                labels: Some(BTreeMap::from([(
                    labels::DEPLOYMENT_SPEC_HASH.to_owned(),
                    "before".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(DeploymentSpec {
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(pod),
                },
                ..DeploymentSpec::default()
            }),
            status: None,
        }
    }

    fn pod(deployment: &Deployment) -> &PodSpec {
        deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("a pod spec")
    }

    fn merged(pod: PodSpec, config: &SubscriptionConfig) -> Deployment {
        let mut deployment = deployment(pod);
        merge(&mut deployment, config);
        deployment
    }

    fn two_containers() -> PodSpec {
        PodSpec {
            containers: vec![
                container("manager", vec![var("A", "1"), var("B", "2")]),
                container("proxy", vec![]),
            ],
            ..PodSpec::default()
        }
    }

    fn volume(name: &str, config_map: &str) -> Volume {
        serde_json::from_value(serde_json::json!({"name": name, "configMap": {"name": config_map}}))
            .expect("a volume")
    }

    fn mount(name: &str, path: &str) -> VolumeMount {
        VolumeMount {
            name: name.to_owned(),
            mount_path: path.to_owned(),
            ..VolumeMount::default()
        }
    }

    fn toleration(key: &str) -> Toleration {
        Toleration {
            key: Some(key.to_owned()),
            operator: Some("Exists".to_owned()),
            effect: Some("NoSchedule".to_owned()),
            ..Toleration::default()
        }
    }

    fn node_affinity(zone: &str) -> NodeAffinity {
        NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "zone".to_owned(),
                        operator: "In".to_owned(),
                        values: Some(vec![zone.to_owned()]),
                    }]),
                    match_fields: None,
                }],
            }),
            preferred_during_scheduling_ignored_during_execution: None,
        }
    }

    fn pod_affinity(key: &str) -> PodAffinity {
        PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                topology_key: key.to_owned(),
                ..PodAffinityTerm::default()
            }]),
            preferred_during_scheduling_ignored_during_execution: None,
        }
    }

    fn anti_affinity(key: &str) -> PodAntiAffinity {
        PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                topology_key: key.to_owned(),
                ..PodAffinityTerm::default()
            }]),
            preferred_during_scheduling_ignored_during_execution: None,
        }
    }

    #[test]
    fn env_is_merged_by_name_the_config_winning_in_place_and_new_names_appended() {
        let config = SubscriptionConfig {
            env: Some(vec![var("C", "3"), var("A", "10"), var("D", "4")]),
            ..SubscriptionConfig::default()
        };
        let merged = merged(two_containers(), &config);
        let env = |i: usize| pod(&merged).containers[i].env.clone().unwrap_or_default();
        assert_eq!(
            env(0),
            [var("A", "10"), var("B", "2"), var("C", "3"), var("D", "4")],
            "A replaced where it was, C and D appended in the config's order"
        );
        assert_eq!(
            env(1),
            [var("C", "3"), var("A", "10"), var("D", "4")],
            "every container gets the variables"
        );
    }

    #[test]
    fn a_name_given_twice_in_the_config_takes_its_last_value_once() {
        let config = SubscriptionConfig {
            env: Some(vec![
                var("X", "first"),
                var("X", "last"),
                var("A", "a1"),
                var("A", "a2"),
            ]),
            ..SubscriptionConfig::default()
        };
        let merged = merged(two_containers(), &config);
        assert_eq!(
            pod(&merged).containers[0].env.clone().unwrap_or_default(),
            [var("A", "a2"), var("B", "2"), var("X", "last")]
        );
    }

    #[test]
    fn env_from_sources_are_appended_unless_already_there() {
        let config_map = EnvFromSource {
            config_map_ref: Some(ConfigMapEnvSource {
                name: "settings".to_owned(),
                optional: None,
            }),
            prefix: None,
            secret_ref: None,
        };
        let secret = EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: "license".to_owned(),
                optional: Some(true),
            }),
            prefix: Some("LICENSE_".to_owned()),
            config_map_ref: None,
        };
        let mut pod_spec = two_containers();
        pod_spec.containers[0].env_from = Some(vec![config_map.clone()]);
        let config = SubscriptionConfig {
            env_from: Some(vec![config_map.clone(), secret.clone()]),
            ..SubscriptionConfig::default()
        };
        let merged = merged(pod_spec, &config);
        assert_eq!(
            pod(&merged).containers[0].env_from.clone().unwrap_or_default(),
            [config_map.clone(), secret.clone()]
        );
        assert_eq!(
            pod(&merged).containers[1].env_from.clone().unwrap_or_default(),
            [config_map, secret]
        );
    }

    #[test]
    fn volumes_and_mounts_are_replaced_by_name_or_appended() {
        let mut pod_spec = two_containers();
        pod_spec.volumes = Some(vec![volume("certs", "old"), volume("cache", "cache")]);
        pod_spec.containers[0].volume_mounts = Some(vec![mount("certs", "/old"), mount("cache", "/cache")]);
        let config = SubscriptionConfig {
            volumes: Some(vec![volume("certs", "new"), volume("extra", "extra")]),
            volume_mounts: Some(vec![mount("certs", "/etc/certs"), mount("extra", "/extra")]),
            ..SubscriptionConfig::default()
        };
        let merged = merged(pod_spec, &config);
        assert_eq!(
            pod(&merged).volumes.clone().unwrap_or_default(),
            [
                volume("certs", "new"),
                volume("cache", "cache"),
                volume("extra", "extra")
            ]
        );
        assert_eq!(
            pod(&merged).containers[0]
                .volume_mounts
                .clone()
                .unwrap_or_default(),
            [
                mount("certs", "/etc/certs"),
                mount("cache", "/cache"),
                mount("extra", "/extra")
            ]
        );
        assert_eq!(
            pod(&merged).containers[1]
                .volume_mounts
                .clone()
                .unwrap_or_default(),
            [mount("certs", "/etc/certs"), mount("extra", "/extra")],
            "every container gets the mounts"
        );
    }

    #[test]
    fn tolerations_are_appended_without_duplicates() {
        let mut pod_spec = two_containers();
        pod_spec.tolerations = Some(vec![toleration("infra")]);
        let config = SubscriptionConfig {
            tolerations: Some(vec![toleration("infra"), toleration("gpu")]),
            ..SubscriptionConfig::default()
        };
        let merged = merged(pod_spec, &config);
        assert_eq!(
            pod(&merged).tolerations.clone().unwrap_or_default(),
            [toleration("infra"), toleration("gpu")]
        );
    }

    #[test]
    fn resources_replace_those_of_every_container() {
        let mut pod_spec = two_containers();
        pod_spec.containers[0].resources = Some(ResourceRequirements {
            limits: Some(BTreeMap::from([("cpu".to_owned(), Quantity("2".to_owned()))])),
            ..ResourceRequirements::default()
        });
        let wanted = ResourceRequirements {
            requests: Some(BTreeMap::from([(
                "memory".to_owned(),
                Quantity("64Mi".to_owned()),
            )])),
            ..ResourceRequirements::default()
        };
        let config = SubscriptionConfig {
            resources: Some(wanted.clone()),
            ..SubscriptionConfig::default()
        };
        let merged = merged(pod_spec, &config);
        for container in &pod(&merged).containers {
            assert_eq!(container.resources.as_ref(), Some(&wanted), "{}", container.name);
        }
    }

    #[test]
    fn the_node_selector_is_replaced() {
        let mut pod_spec = two_containers();
        pod_spec.node_selector = Some(BTreeMap::from([("old".to_owned(), "yes".to_owned())]));
        let wanted = BTreeMap::from([("role".to_owned(), "infra".to_owned())]);
        let config = SubscriptionConfig {
            node_selector: Some(wanted.clone()),
            ..SubscriptionConfig::default()
        };
        assert_eq!(pod(&merged(pod_spec, &config)).node_selector, Some(wanted));
    }

    #[test]
    fn affinity_parts_are_replaced_and_empty_ones_removed() {
        let mut pod_spec = two_containers();
        pod_spec.affinity = Some(Affinity {
            node_affinity: Some(node_affinity("a")),
            pod_affinity: Some(pod_affinity("zone")),
            pod_anti_affinity: Some(anti_affinity("host")),
        });
        let with = |affinity: Affinity| {
            merged(
                pod_spec.clone(),
                &SubscriptionConfig {
                    affinity: Some(affinity),
                    ..SubscriptionConfig::default()
                },
            )
        };

        // Only the node affinity is set: it replaces the pod's, the rest stays.
        let replaced = with(Affinity {
            node_affinity: Some(node_affinity("b")),
            ..Affinity::default()
        });
        assert_eq!(
            pod(&replaced).affinity,
            Some(Affinity {
                node_affinity: Some(node_affinity("b")),
                pod_affinity: Some(pod_affinity("zone")),
                pod_anti_affinity: Some(anti_affinity("host")),
            })
        );

        // An empty part removes that part.
        let removed = with(Affinity {
            pod_affinity: Some(PodAffinity::default()),
            pod_anti_affinity: Some(PodAntiAffinity::default()),
            ..Affinity::default()
        });
        assert_eq!(
            pod(&removed).affinity,
            Some(Affinity {
                node_affinity: Some(node_affinity("a")),
                ..Affinity::default()
            })
        );

        // `affinity: {}` removes it all; so does emptying every part.
        assert_eq!(pod(&with(Affinity::default())).affinity, None);
        let emptied = with(Affinity {
            node_affinity: Some(NodeAffinity::default()),
            pod_affinity: Some(PodAffinity::default()),
            pod_anti_affinity: Some(PodAntiAffinity::default()),
        });
        assert_eq!(pod(&emptied).affinity, None);

        // A pod without affinity takes the config's as it is.
        let bare = merged(
            two_containers(),
            &SubscriptionConfig {
                affinity: Some(Affinity {
                    pod_anti_affinity: Some(anti_affinity("host")),
                    ..Affinity::default()
                }),
                ..SubscriptionConfig::default()
            },
        );
        assert_eq!(
            pod(&bare).affinity,
            Some(Affinity {
                pod_anti_affinity: Some(anti_affinity("host")),
                ..Affinity::default()
            })
        );
    }

    #[test]
    fn annotations_are_added_to_the_deployment_and_pods_without_overwriting() {
        let mut deployment = deployment(two_containers());
        deployment.metadata.annotations = Some(BTreeMap::from([("kept".to_owned(), "csv".to_owned())]));
        if let Some(spec) = deployment.spec.as_mut() {
            spec.template.metadata = Some(ObjectMeta {
                annotations: Some(BTreeMap::from([("pod".to_owned(), "csv".to_owned())])),
                ..ObjectMeta::default()
            });
        }
        let config = SubscriptionConfig {
            annotations: Some(BTreeMap::from([
                ("kept".to_owned(), "config".to_owned()),
                ("pod".to_owned(), "config".to_owned()),
                ("added".to_owned(), "config".to_owned()),
            ])),
            ..SubscriptionConfig::default()
        };
        merge(&mut deployment, &config);
        let on_deployment = deployment.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(on_deployment["kept"], "csv");
        assert_eq!(on_deployment["pod"], "config");
        assert_eq!(on_deployment["added"], "config");
        let on_pods = deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default();
        assert_eq!(on_pods["kept"], "config");
        assert_eq!(on_pods["pod"], "csv");
        assert_eq!(on_pods["added"], "config");
    }

    #[test]
    fn an_empty_config_changes_nothing_and_no_config_keeps_the_hash() {
        let original = deployment(two_containers());
        let mut untouched = original.clone();
        merge(&mut untouched, &SubscriptionConfig::default());
        assert_eq!(untouched, original);

        let mut deployments = vec![original.clone()];
        apply(&mut deployments, None, &Replicas::Declared);
        assert_eq!(
            deployments[0], original,
            "no config: not even the hash is stamped again"
        );
    }

    #[test]
    fn a_config_changes_the_spec_hash() {
        let mut plain = vec![deployment(two_containers())];
        apply(
            &mut plain,
            Some(&SubscriptionConfig::default()),
            &Replicas::Declared,
        );
        let mut configured = vec![deployment(two_containers())];
        apply(
            &mut configured,
            Some(&SubscriptionConfig {
                env: Some(vec![var("LOG", "debug")]),
                ..SubscriptionConfig::default()
            }),
            &Replicas::Declared,
        );
        let hash = |d: &Deployment| d.labels().get(labels::DEPLOYMENT_SPEC_HASH).cloned();
        assert_eq!(
            hash(&plain[0]),
            deployment(two_containers()).spec.as_ref().map(spec_hash),
            "the hash is the spec's"
        );
        assert_ne!(hash(&plain[0]), hash(&configured[0]));
    }

    #[test]
    fn the_subscription_s_replicas_reach_every_deployment_and_a_bad_value_is_kept_for_it() {
        let subscription = |value: Option<&str>| -> Subscription {
            let mut sub: Subscription = serde_json::from_value(serde_json::json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "app", "namespace": "ns"},
                "spec": {"name": "app", "source": "c", "sourceNamespace": "olm"},
            }))
            .expect("a Subscription");
            if let Some(value) = value {
                sub.annotations_mut()
                    .insert(labels::REPLICAS.to_owned(), value.to_owned());
            }
            sub
        };
        assert_eq!(Replicas::of(None), Replicas::Declared);
        assert_eq!(Replicas::of(Some(&subscription(None))), Replicas::Declared);
        let three = Replicas::of(Some(&subscription(Some("3"))));
        assert_eq!(three, Replicas::Asked(3));
        let bad = Replicas::of(Some(&subscription(Some("many"))));
        let Replicas::Invalid {
            subscription: told,
            invalid,
        } = &bad
        else {
            panic!("{bad:?}");
        };
        assert_eq!(
            (told.name_any().as_str(), invalid.value.as_str()),
            ("app", "many")
        );

        let replicas = |d: &Deployment| d.spec.as_ref().and_then(|s| s.replicas);
        let mut scaled = vec![deployment(two_containers()), deployment(two_containers())];
        apply(&mut scaled, None, &three);
        assert!(scaled.iter().all(|d| replicas(d) == Some(3)));
        let mut kept = vec![deployment(two_containers())];
        apply(&mut kept, None, &bad);
        assert_eq!(
            kept[0],
            deployment(two_containers()),
            "a bad value changes nothing"
        );
        let hash = |d: &Deployment| d.labels().get(labels::DEPLOYMENT_SPEC_HASH).cloned();
        assert_ne!(hash(&scaled[0]), hash(&kept[0]), "a new count is a new spec");
    }

    #[test]
    fn the_subscription_is_the_one_whose_installed_csv_names_the_csv() {
        let subscription = |name: &str, installed: Option<&str>, current: &str, env: &str| Subscription {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: SubscriptionSpec {
                catalog_source: "catalog".to_owned(),
                catalog_source_namespace: "olm".to_owned(),
                package: name.to_owned(),
                channel: None,
                starting_csv: None,
                install_plan_approval: None,
                config: Some(SubscriptionConfig {
                    env: Some(vec![var("FROM", env)]),
                    ..SubscriptionConfig::default()
                }),
            },
            status: Some(SubscriptionStatus {
                installed_csv: installed.map(str::to_owned),
                current_csv: Some(current.to_owned()),
                ..SubscriptionStatus::default()
            }),
        };
        let subscriptions = [
            subscription("other", Some("other.v1"), "other.v1", "other"),
            subscription("pending", None, "demo.v1", "pending"),
            subscription("demo", Some("demo.v1"), "demo.v2", "demo"),
        ];
        let config = config_for(&subscriptions, "demo.v1").expect("a config");
        assert_eq!(config.env, Some(vec![var("FROM", "demo")]));
        assert_eq!(
            config_for(&subscriptions, "demo.v2"),
            None,
            "currentCSV alone does not name the CSV"
        );
        assert_eq!(config_for(&subscriptions, "missing.v1"), None);
    }
}
