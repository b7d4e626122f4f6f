//! Image catalogs: the catalog image runs as a registry Pod behind a Service, as
//! OLM does, and is then read like any registry at an address
//! (`<service>.<namespace>.svc:50051`).
//!
//! This module makes the objects and plans which Pods serve ([`plan_pods`],
//! pure); it writes nothing: [`super::decide`] turns the plan into effects.
//!
//! The Pod is named after a hash of its spec (`<catalog>-<hash>`), so a changed
//! image or `grpcPodConfig` makes a new Pod and the old ones are deleted once it
//! exists. The name is the same in every reconcile that decides to start that
//! Pod, so a reconcile whose Pod store has not seen the Pod yet gets a 409 for
//! its create instead of starting a second one; an update Pod, which polls the
//! image, is named after the time its poll became due (`<catalog>-<hash>-<t>`)
//! for the same reason; both Pod and Service are owned by the CatalogSource, so deleting the
//! CatalogSource collects them. `grpcPodConfig` is honoured: node selector,
//! tolerations, affinity, priority class, `securityContextConfig`
//! (`restricted`, `legacy`, or by default what the namespace's Pod Security
//! enforcement asks for), `memoryTarget` (memory request and `GOMEMLIMIT`) and
//! `extractContent` (the image's own `opm` serves the given directories).
//!
//! Probes are gRPC probes with a generous startup budget: large catalogs take
//! minutes to start, and OLM's short startup probe killing them is a known
//! complaint (OLM#3269).

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::{
    api::core::v1::{
        Capabilities, Container, ContainerPort, EnvVar, GRPCAction, LocalObjectReference, Pod,
        PodSecurityContext, PodSpec, Probe, ResourceRequirements, SeccompProfile, SecurityContext, Service,
        ServicePort, ServiceSpec,
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{ObjectMeta, Time},
        util::intstr::IntOrString,
    },
};
use kube::{Resource, ResourceExt, runtime::reflector::ObjectRef};
use olm_api::{
    labels,
    v1alpha1::{CatalogSource, ExtractContentConfig, GrpcPodConfig, RegistryServiceStatus, SecurityConfig},
};
use olm_resolver::model::CatalogId;

use super::{context::CatalogSourceContext, validate::SourceSpec};

/// The port registry servers listen on.
pub const REGISTRY_PORT: i32 = 50051;
/// The label with the hash of a registry Pod's spec.
pub const POD_SPEC_HASH: &str = "olm.pod-spec-hash";
/// The name of the registry container.
const CONTAINER: &str = "registry-server";

/// Bytes of a quantity such as `100Mi`, `1G` or `52428800`; `None` if it is not one.
fn quantity_bytes(quantity: &Quantity) -> Option<u64> {
    let text = quantity.0.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor: f64 = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some((number * factor) as u64)
}

/// The Service in front of the registry Pods of `source`.
pub fn service(source: &CatalogSource) -> Service {
    let name = source.name_any();
    Service {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: source.namespace(),
            labels: Some(BTreeMap::from([(
                labels::CATALOG_SOURCE.to_owned(),
                name.clone(),
            )])),
            owner_references: source.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([(labels::CATALOG_SOURCE.to_owned(), name)])),
            ports: Some(vec![ServicePort {
                name: Some("grpc".to_owned()),
                port: REGISTRY_PORT,
                target_port: Some(IntOrString::Int(REGISTRY_PORT)),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

fn grpc_probe(period: i32, failures: i32) -> Probe {
    Probe {
        grpc: Some(GRPCAction {
            port: REGISTRY_PORT,
            service: None,
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(5),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

/// The registry Pod of `source` for `image`. `restricted` says which security
/// settings apply when `grpcPodConfig.securityContextConfig` is not set. The Pod
/// is labelled with a hash of its spec, so a changed spec makes a new Pod.
pub fn pod(source: &CatalogSource, image: &str, restricted_by_default: bool) -> Pod {
    let name = source.name_any();
    let spec = pod_spec(source, image, restricted_by_default);
    // Stable across releases (unlike std's hasher), so Pod names survive an upgrade.
    let hash = olm_runtime::effects::fnv1a(serde_json::to_string(&spec).unwrap_or_default().as_bytes());
    let short = &hash[..10];
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{}-{short}", name_prefix(&name))),
            namespace: source.namespace(),
            labels: Some(BTreeMap::from([
                (labels::CATALOG_SOURCE.to_owned(), name),
                (POD_SPEC_HASH.to_owned(), short.to_owned()),
            ])),
            owner_references: source.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The start of the names of `catalog`'s registry Pods: at most 40 characters,
/// which leaves room for the hash and an update Pod's suffix within the 63 a
/// Pod's host name takes.
fn name_prefix(catalog: &str) -> String {
    let prefix: String = catalog.chars().take(40).collect();
    prefix.trim_end_matches(['-', '.']).to_owned()
}

/// `pod` as the update Pod of the poll that became due at `since` (seconds
/// since the epoch): its name says when, so that every reconcile that starts
/// that poll names the same Pod.
pub(super) fn as_update_pod(mut pod: Pod, since: i64) -> Pod {
    let base = pod.metadata.name.take().unwrap_or_default();
    pod.metadata.name = Some(format!("{base}-{since}"));
    pod
}

/// The registry Pod's spec, as `grpcPodConfig` asks: scheduling, security, memory.
fn pod_spec(source: &CatalogSource, image: &str, restricted_by_default: bool) -> PodSpec {
    let GrpcPodConfig {
        node_selector,
        tolerations,
        affinity,
        priority_class_name,
        security_context_config,
        memory_target,
        extract_content,
    } = source.spec.grpc_pod_config.clone().unwrap_or_default();
    let restricted = match security_context_config {
        Some(SecurityConfig::Restricted) => true,
        Some(SecurityConfig::Legacy) => false,
        None => restricted_by_default,
    };
    let container = Container {
        command: extract_content.map(serve_command),
        security_context: restricted.then(|| SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: None,
            }),
            ..SecurityContext::default()
        }),
        ..registry_container(image, memory_target.as_ref())
    };
    PodSpec {
        containers: vec![container],
        node_selector: Some(
            node_selector
                .unwrap_or_else(|| BTreeMap::from([("kubernetes.io/os".to_owned(), "linux".to_owned())])),
        ),
        tolerations,
        affinity,
        priority_class_name,
        image_pull_secrets: source.spec.secrets.as_ref().map(|secrets| {
            secrets
                .iter()
                .map(|name| LocalObjectReference { name: name.clone() })
                .collect()
        }),
        security_context: restricted.then(|| PodSecurityContext {
            run_as_non_root: Some(true),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                localhost_profile: None,
            }),
            ..PodSecurityContext::default()
        }),
        ..PodSpec::default()
    }
}

/// `extractContent`: the image's own `opm` serves the given directories.
fn serve_command(extract: ExtractContentConfig) -> Vec<String> {
    let mut command = vec![
        "/bin/opm".to_owned(),
        "serve".to_owned(),
        extract.config_dir.unwrap_or_else(|| "/configs".to_owned()),
    ];
    if let Some(cache) = extract.cache_dir {
        command.push("--cache-dir".to_owned());
        command.push(cache);
    }
    command
}

/// The registry container, without the command and security settings:
/// its port, probes, and resources (`memoryTarget` as the memory request and
/// `GOMEMLIMIT`).
fn registry_container(image: &str, memory_target: Option<&Quantity>) -> Container {
    let mut requests = BTreeMap::from([
        ("cpu".to_owned(), Quantity("10m".to_owned())),
        ("memory".to_owned(), Quantity("50Mi".to_owned())),
    ]);
    let mut env = Vec::new();
    if let Some(target) = memory_target {
        requests.insert("memory".to_owned(), target.clone());
        if let Some(bytes) = quantity_bytes(target) {
            env.push(EnvVar {
                name: "GOMEMLIMIT".to_owned(),
                value: Some(bytes.to_string()),
                value_from: None,
            });
        }
    }
    let pinned = image.contains('@');
    Container {
        name: CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        image_pull_policy: Some(if pinned { "IfNotPresent" } else { "Always" }.to_owned()),
        ports: Some(vec![ContainerPort {
            name: Some("grpc".to_owned()),
            container_port: REGISTRY_PORT,
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        }]),
        env: (!env.is_empty()).then_some(env),
        resources: Some(ResourceRequirements {
            requests: Some(requests),
            ..ResourceRequirements::default()
        }),
        readiness_probe: Some(grpc_probe(10, 3)),
        liveness_probe: Some(grpc_probe(10, 3)),
        // Up to ten minutes to start: big catalogs build their cache first.
        startup_probe: Some(grpc_probe(10, 60)),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    }
}

/// Whether `pod` is Ready.
pub(super) fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The registry objects of one image catalog, as the stores hold them.
#[derive(Clone, Debug, Default)]
pub struct RegistryObjects {
    /// Its registry Pods, not being deleted.
    pub pods: Vec<Arc<Pod>>,
    /// Its registry Services, not being deleted.
    pub services: Vec<Arc<Service>>,
    /// Whether its namespace enforces the `restricted` Pod Security Standard.
    pub restricted_namespace: bool,
}

/// Whether `meta` is of an object of catalog `source` (labelled with it, owned
/// by it) that is not being deleted.
fn owned_by(meta: &ObjectMeta, source: &CatalogSource) -> bool {
    meta.namespace == source.namespace()
        && meta.deletion_timestamp.is_none()
        && meta.labels.as_ref().and_then(|l| l.get(labels::CATALOG_SOURCE)) == Some(&source.name_any())
        && meta
            .owner_references
            .iter()
            .flatten()
            .any(|o| Some(&o.uid) == source.uid().as_ref())
}

/// The registry objects of `source` in the shared stores; `None` while the
/// namespace store has not listed its namespace yet (it has not synced).
pub(super) fn read_objects(ctx: &CatalogSourceContext, source: &CatalogSource) -> Option<RegistryObjects> {
    let stores = &ctx.shared.stores;
    let namespace = source.namespace()?;
    let found = stores.namespaces.get(&ObjectRef::new(&namespace))?;
    Some(RegistryObjects {
        pods: stores
            .pods
            .state()
            .into_iter()
            .filter(|p| owned_by(&p.metadata, source))
            .collect(),
        services: stores
            .services
            .state()
            .into_iter()
            .filter(|s| owned_by(&s.metadata, source))
            .collect(),
        restricted_namespace: found
            .labels()
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str)
            == Some("restricted"),
    })
}

/// The registry Pod `source` wants for `image` in a namespace whose
/// enforcement `objects` says.
pub(super) fn wanted_pod(source: &CatalogSource, image: &str, objects: &RegistryObjects) -> Pod {
    let restricted = match source
        .spec
        .grpc_pod_config
        .as_ref()
        .and_then(|c| c.security_context_config)
    {
        Some(_) => false,
        None => objects.restricted_namespace,
    };
    pod(source, image, restricted)
}

/// The spec hash label of `pod`.
pub(super) fn spec_hash(pod: &Pod) -> String {
    pod.labels().get(POD_SPEC_HASH).cloned().unwrap_or_default()
}

/// The address of the registry Service of catalog `id`.
pub(super) fn address(id: &CatalogId) -> String {
    format!("{}.{}.svc:{REGISTRY_PORT}", id.name, id.namespace)
}

/// How the registry Service of `source` stands, for the status: when it was
/// created, once a store holds it.
pub(super) fn service_status(source: &CatalogSource, services: &[Arc<Service>]) -> RegistryServiceStatus {
    let name = source.name_any();
    let created_at = services
        .iter()
        .find(|s| s.name_any() == name)
        .and_then(|s| s.metadata.creation_timestamp.clone());
    RegistryServiceStatus {
        protocol: Some("grpc".to_owned()),
        service_name: Some(name),
        service_namespace: source.namespace(),
        port: Some(REGISTRY_PORT.to_string()),
        created_at,
    }
}

/// The Pod to read the catalog through: the plan's, or for a standby (which
/// starts no Pod) any that is there.
pub(super) fn serving_pod(pods: &[Arc<Pod>], hash: &str, leading: bool) -> Option<Arc<Pod>> {
    let plan = plan_pods(pods, hash, false);
    if leading { plan } else { as_standby(plan, pods) }.serve
}

/// The plan of a standby: only the leader manages registry Pods, so it deletes
/// and starts nothing and reads through what is there.
pub(super) fn as_standby(mut plan: PodPlan, pods: &[Arc<Pod>]) -> PodPlan {
    plan.delete.clear();
    plan.start_update = false;
    if plan.serve.is_none() {
        plan.serve = pods.first().cloned();
    }
    plan
}

/// What to do with the registry Pods of a catalog.
#[derive(Debug, PartialEq)]
pub(super) struct PodPlan {
    /// The Pod to read the catalog through; `None`: create one.
    pub(super) serve: Option<Arc<Pod>>,
    /// Pods to delete, by name.
    pub(super) delete: Vec<String>,
    /// Start an update Pod (same spec) to see whether the image changed.
    pub(super) start_update: bool,
}

fn image_id(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()
        .map(|c| c.image_id.as_str())
        .filter(|id| !id.is_empty())
}

/// The Pods of the current spec serve, oldest first. A newer Pod of the same spec
/// is an update Pod: once Ready it takes over if its image differs (or the old
/// one is not Ready), else it goes. Pods of another spec go once a Pod of the
/// current spec is Ready, so that the catalog is served throughout a change.
pub(super) fn plan_pods(pods: &[Arc<Pod>], hash: &str, poll_due: bool) -> PodPlan {
    let mut same: Vec<&Arc<Pod>> = pods
        .iter()
        .filter(|p| p.labels().get(POD_SPEC_HASH).map(String::as_str) == Some(hash))
        .collect();
    same.sort_by_key(|p| (p.metadata.creation_timestamp.clone().map(|t| t.0), p.name_any()));
    let others = pods
        .iter()
        .filter(|p| p.labels().get(POD_SPEC_HASH).map(String::as_str) != Some(hash))
        .map(|p| p.name_any());
    let Some(&oldest) = same.first() else {
        return PodPlan {
            serve: None,
            delete: Vec::new(),
            start_update: false,
        };
    };
    let mut delete: Vec<String> = Vec::new();
    let serve = match same.last() {
        Some(&newest) if same.len() > 1 && is_ready(newest) => {
            if !is_ready(oldest) || image_id(newest) != image_id(oldest) {
                delete.extend(same[..same.len() - 1].iter().map(|p| p.name_any()));
                newest
            } else {
                delete.extend(same[1..].iter().map(|p| p.name_any()));
                oldest
            }
        }
        _ => oldest,
    };
    if is_ready(serve) {
        delete.extend(others);
    }
    PodPlan {
        serve: Some(serve.clone()),
        delete,
        start_update: poll_due && same.len() == 1 && is_ready(oldest),
    }
}

/// When the image's poll became due (seconds since the epoch), if it is due
/// now: the CatalogSource asks for polling, the image is a tag (a digest never
/// changes), and the interval has passed since the last poll or since the
/// serving Pod started.
pub(super) fn poll_due(
    source: &CatalogSource,
    spec: &SourceSpec,
    image: &str,
    pods: &[Arc<Pod>],
    hash: &str,
    now: &Time,
) -> Option<i64> {
    if !spec.polls || image.contains('@') {
        return None;
    }
    let started = pods
        .iter()
        .filter(|p| p.labels().get(POD_SPEC_HASH).map(String::as_str) == Some(hash))
        .filter_map(|p| p.metadata.creation_timestamp.clone())
        .map(|t| t.0)
        .min();
    let last_poll = source
        .status
        .as_ref()
        .and_then(|s| s.latest_image_registry_poll.clone())
        .map(|t| t.0);
    let since = started.into_iter().chain(last_poll).max()?;
    let interval = spec.poll_interval.as_secs() as i64;
    (now.0.duration_since(since).as_secs() >= interval).then(|| since.as_second() + interval)
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::{CatalogSourceSpec, ExtractContentConfig, SourceType};

    use super::*;

    fn source(config: Option<GrpcPodConfig>) -> CatalogSource {
        let mut source = CatalogSource::new(
            "community",
            CatalogSourceSpec {
                source_type: SourceType::Grpc,
                priority: None,
                config_map: None,
                address: None,
                image: Some("quay.io/operatorhubio/catalog:latest".into()),
                grpc_pod_config: config,
                update_strategy: None,
                secrets: Some(vec!["pull".into()]),
                display_name: None,
                description: None,
                publisher: None,
                icon: None,
            },
        );
        source.metadata.namespace = Some("olm".into());
        source.metadata.uid = Some("uid-1".into());
        source
    }

    #[test]
    fn the_pod_follows_grpc_pod_config() {
        let config = GrpcPodConfig {
            node_selector: Some(BTreeMap::from([("role".into(), "catalogs".into())])),
            priority_class_name: Some("system-cluster-critical".into()),
            security_context_config: Some(SecurityConfig::Restricted),
            memory_target: Some(Quantity("100Mi".into())),
            extract_content: Some(ExtractContentConfig {
                cache_dir: Some("/tmp/cache".into()),
                config_dir: Some("/configs".into()),
            }),
            ..GrpcPodConfig::default()
        };
        let pod = pod(
            &source(Some(config)),
            "quay.io/operatorhubio/catalog:latest",
            false,
        );
        let spec = pod.spec.clone().unwrap();
        assert_eq!(spec.node_selector.unwrap()["role"], "catalogs");
        assert_eq!(
            spec.priority_class_name.as_deref(),
            Some("system-cluster-critical")
        );
        assert_eq!(spec.security_context.unwrap().run_as_non_root, Some(true));
        assert_eq!(spec.image_pull_secrets.unwrap()[0].name, "pull");
        let container = &spec.containers[0];
        assert_eq!(container.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            container.resources.as_ref().unwrap().requests.as_ref().unwrap()["memory"],
            Quantity("100Mi".into())
        );
        let env = container.env.as_ref().unwrap();
        assert_eq!(env[0].name, "GOMEMLIMIT");
        assert_eq!(env[0].value.as_deref(), Some("104857600"));
        assert_eq!(
            container.command.as_deref().unwrap(),
            ["/bin/opm", "serve", "/configs", "--cache-dir", "/tmp/cache"]
        );
        assert!(container.startup_probe.as_ref().unwrap().grpc.is_some());
        let labels = pod.metadata.labels.clone().unwrap();
        assert_eq!(labels[labels::CATALOG_SOURCE], "community");
        let hash = &labels[POD_SPEC_HASH];
        assert_eq!(pod.metadata.name, Some(format!("community-{hash}")));
        assert_eq!(
            as_update_pod(pod.clone(), 1061).metadata.name,
            Some(format!("community-{hash}-1061"))
        );
        let owner = &pod.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("CatalogSource", Some(true))
        );
    }

    #[test]
    fn a_changed_spec_makes_a_new_hash_and_defaults_are_legacy() {
        let plain = pod(&source(None), "quay.io/x/catalog@sha256:abc", false);
        let spec = plain.spec.clone().unwrap();
        assert!(spec.security_context.is_none(), "legacy: no security context");
        assert_eq!(spec.node_selector.unwrap()["kubernetes.io/os"], "linux");
        assert_eq!(
            spec.containers[0].image_pull_policy.as_deref(),
            Some("IfNotPresent")
        );
        let hash = |p: &Pod| p.labels()[POD_SPEC_HASH].clone();
        let again = pod(&source(None), "quay.io/x/catalog@sha256:abc", false);
        assert_eq!(hash(&plain), hash(&again), "same spec, same hash");
        let other = pod(&source(None), "quay.io/x/catalog@sha256:def", false);
        assert_ne!(hash(&plain), hash(&other));
        let restricted = pod(&source(None), "quay.io/x/catalog@sha256:abc", true);
        assert!(
            restricted.spec.unwrap().security_context.is_some(),
            "the namespace asks for restricted"
        );
    }

    #[test]
    fn the_service_selects_the_catalog_pods() {
        let service = service(&source(None));
        let spec = service.spec.unwrap();
        assert_eq!(spec.selector.unwrap()[labels::CATALOG_SOURCE], "community");
        assert_eq!(spec.ports.unwrap()[0].port, REGISTRY_PORT);
    }

    #[test]
    fn quantities_become_bytes() {
        assert_eq!(quantity_bytes(&Quantity("1Gi".into())), Some(1 << 30));
        assert_eq!(quantity_bytes(&Quantity("500M".into())), Some(500_000_000));
        assert_eq!(quantity_bytes(&Quantity("1024".into())), Some(1024));
        assert_eq!(quantity_bytes(&Quantity("1e3".into())), None);
    }

    fn running(name: &str, hash: &str, created: i64, ready: bool, image: &str) -> Arc<Pod> {
        use k8s_openapi::{
            api::core::v1::{ContainerStatus, PodCondition, PodStatus},
            jiff::Timestamp,
        };
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([(POD_SPEC_HASH.to_owned(), hash.to_owned())])),
                creation_timestamp: Some(Time(Timestamp::from_second(created).unwrap())),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..PodCondition::default()
                }]),
                container_statuses: Some(vec![ContainerStatus {
                    image_id: image.into(),
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            }),
        })
    }

    /// A standby deletes and starts nothing and reads through a Pod that is
    /// there, even one of another spec.
    #[test]
    fn a_standby_only_reads() {
        let old = running("a", "h1", 1, true, "sha256:1");
        let ready = running("b", "h2", 2, true, "sha256:2");
        let leader = plan_pods(&[old.clone(), ready.clone()], "h2", true);
        assert_eq!(leader.delete, ["a"]);
        let standby = as_standby(leader, &[old.clone(), ready.clone()]);
        assert_eq!(standby.serve, Some(ready));
        assert!(standby.delete.is_empty() && !standby.start_update);

        let leader = plan_pods(std::slice::from_ref(&old), "h2", false);
        assert_eq!(leader.serve, None, "the leader starts a Pod of the new spec");
        let standby = as_standby(leader, std::slice::from_ref(&old));
        assert_eq!(standby.serve, Some(old));
        assert_eq!(as_standby(plan_pods(&[], "h2", true), &[]).serve, None);
    }

    #[test]
    fn update_pods_take_over_only_with_a_new_image() {
        let old = running("a", "h1", 1, true, "sha256:1");
        let plan = plan_pods(std::slice::from_ref(&old), "h1", true);
        assert_eq!(plan.serve.as_deref().map(ResourceExt::name_any), Some("a".into()));
        assert!(plan.start_update, "poll: start an update pod");
        assert!(
            plan_pods(std::slice::from_ref(&old), "h1", false)
                .delete
                .is_empty()
        );

        let same = running("b", "h1", 2, true, "sha256:1");
        let plan = plan_pods(&[old.clone(), same], "h1", true);
        assert_eq!(plan.serve.as_deref().map(ResourceExt::name_any), Some("a".into()));
        assert_eq!(plan.delete, ["b"], "the same image: the update pod goes");
        assert!(!plan.start_update);

        let newer = running("c", "h1", 2, true, "sha256:2");
        let plan = plan_pods(&[old.clone(), newer], "h1", true);
        assert_eq!(plan.serve.as_deref().map(ResourceExt::name_any), Some("c".into()));
        assert_eq!(plan.delete, ["a"], "a new image: the old pod goes");

        let starting = running("d", "h1", 2, false, "");
        let plan = plan_pods(&[old.clone(), starting], "h1", true);
        assert_eq!(plan.serve.as_deref().map(ResourceExt::name_any), Some("a".into()));
        assert!(plan.delete.is_empty(), "wait for the update pod");

        let changed = running("e", "h2", 3, false, "");
        let plan = plan_pods(&[old.clone(), changed.clone()], "h2", false);
        assert_eq!(plan.serve.as_deref().map(ResourceExt::name_any), Some("e".into()));
        assert!(
            plan.delete.is_empty(),
            "the old spec serves until the new pod is ready"
        );
        let ready = running("e", "h2", 3, true, "sha256:3");
        assert_eq!(plan_pods(&[old, ready], "h2", false).delete, ["a"]);
        assert_eq!(plan_pods(&[], "h2", false).serve, None);
    }
}
