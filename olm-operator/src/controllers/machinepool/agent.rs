//! The objects that run a pool's agent on the nodes its selector matches
//! (pure): the ServiceAccount `machine-agent-<pool>`, its Role and
//! RoleBinding, and the agent DaemonSet.
//!
//! Host access is stated in the pod spec, not hidden in the image: the agent
//! installs and runs software on the machine, so its pod uses the host's
//! network and process namespaces, runs privileged, and mounts the host's
//! root at `/host` (hooks reach the host through it) and a per-pool state
//! directory at `/var/lib/olm-rs-agent`.
//!
//! The agent runs the hooks of units not marked `privileged` as an
//! unprivileged user, so its ServiceAccount token must be readable by root
//! only: the default token volume gives mode 0644, so the pod mounts its own
//! (the same projected token, CA and namespace, at the same path, where the
//! agent's client finds them) with mode 0600.
//!
//! The Role lets the agent read what its pool needs (the pool, CSVs and
//! ConfigMaps of the pool's namespace, no Secrets) and write Machines and Leases
//! there. Which Machine and Lease an agent may write (only its own, named
//! `<pool>-<its node>`) is enforced in the API server by a
//! ValidatingAdmissionPolicy keyed on the node name of the pod-bound token
//! (`manifests/machine-agent-policy.yaml`), since RBAC cannot tell two pods of
//! one DaemonSet apart.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet},
        core::v1::{
            ConfigMapProjection, Container, DownwardAPIProjection, DownwardAPIVolumeFile, EnvVar,
            EnvVarSource, HostPathVolumeSource, KeyToPath, ObjectFieldSelector, PodSpec, PodTemplateSpec,
            ProjectedVolumeSource, SecurityContext, ServiceAccount, ServiceAccountTokenProjection, Volume,
            VolumeMount, VolumeProjection,
        },
        rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::{
        apis::meta::v1::{LabelSelector, ObjectMeta},
        util::intstr::IntOrString,
    },
};
use kube::{Resource, ResourceExt};
use olm_api::substrate::MachinePool;

/// The label naming the pool on everything made for it.
pub const POOL_LABEL: &str = "substrate.olm-rs.dev/pool";
/// The label naming the agent version on the agent pods.
pub const AGENT_VERSION_LABEL: &str = "substrate.olm-rs.dev/agent-version";
/// Where the agent keeps its state, inside its container.
pub const STATE_DIR: &str = "/var/lib/olm-rs-agent";
/// Where the host's root is mounted in the agent container.
pub const HOST_ROOT: &str = "/host";
/// Where a pod's ServiceAccount token, CA and namespace are, and where the
/// agent's in-cluster client reads them.
pub const TOKEN_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The mode of the agent's token files: root's only (the default is 0644).
pub const TOKEN_MODE: i32 = 0o600;

/// A ServiceAccount with its Role and RoleBinding, all in one namespace.
pub type Account = (ServiceAccount, Role, RoleBinding);

/// The name of the agent's ServiceAccount, Role, RoleBinding and DaemonSet.
pub fn agent_name(pool: &str) -> String {
    format!("machine-agent-{pool}")
}

/// The name of the Machine (and its Lease) of `node` in `pool`.
pub fn machine_name(pool: &str, node: &str) -> String {
    format!("{pool}-{node}")
}

/// The agent image reference: the pool's image, tagged with its version
/// unless the image already names a tag or digest.
pub fn image(pool: &MachinePool) -> String {
    let image = &pool.spec.agent.image;
    let last = image.rsplit('/').next().unwrap_or(image);
    if last.contains(':') || last.contains('@') {
        image.clone()
    } else {
        format!("{image}:{}", pool.spec.agent.version)
    }
}

/// The labels of everything made for `pool`.
pub fn labels(pool: &MachinePool) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "machine-agent".to_owned()),
        (olm_api::labels::MANAGED_BY.to_owned(), "olm-operator".to_owned()),
        (POOL_LABEL.to_owned(), pool.name_any()),
    ])
}

/// The metadata of the object `name` made for `pool`, owned by it.
pub fn meta(pool: &MachinePool, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: pool.namespace(),
        labels: Some(labels(pool)),
        owner_references: pool.controller_owner_ref(&()).map(|owner| vec![owner]),
        ..ObjectMeta::default()
    }
}

/// The ServiceAccount the agent pods run as.
pub fn service_account(pool: &MachinePool) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(pool, agent_name(&pool.name_any())),
        ..ServiceAccount::default()
    }
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The rules of an agent in its pool's namespace.
pub fn agent_rules() -> Vec<PolicyRule> {
    const WRITE: &[&str] = &["get", "list", "watch", "create", "update", "patch"];
    let mut rules = vec![
        rule(olm_api::substrate::GROUP, &["machines"], WRITE),
        rule(
            olm_api::substrate::GROUP,
            &["machines/status"],
            &["get", "update", "patch"],
        ),
        rule("coordination.k8s.io", &["leases"], WRITE),
    ];
    rules.extend(read_rules());
    rules.push(bag_rule());
    rules.push(task_rule());
    rules
}

/// The tasks of its units on Actions, through their status (each agent
/// reads the Action and replaces the status with its own task changed).
pub fn task_rule() -> PolicyRule {
    rule(
        olm_api::model::GROUP,
        &["actions/status"],
        &["get", "update", "patch"],
    )
}

/// The data of the Databags of its units (and, while it leads, of their
/// applications), through their status: which bags, the admission policy
/// `olm-rs-databag-writers` checks.
pub fn bag_rule() -> PolicyRule {
    rule(
        olm_api::model::GROUP,
        &["databags/status"],
        &["get", "update", "patch"],
    )
}

/// What every agent reads in its pool's namespace (the pools, the CSVs and
/// Subscriptions, the hooks and config ConfigMaps, the Relations and their
/// Databags, the Actions on its units) and its events. No
/// Secrets: the credentials of machines joined from outside are kept there.
pub fn read_rules() -> Vec<PolicyRule> {
    const READ: &[&str] = &["get", "list", "watch"];
    vec![
        rule(olm_api::substrate::GROUP, &["machinepools"], READ),
        rule(
            "operators.coreos.com",
            &["clusterserviceversions", "subscriptions"],
            READ,
        ),
        rule("", &["configmaps"], READ),
        rule(olm_api::model::GROUP, &["relations", "databags"], READ),
        rule(olm_api::model::GROUP, &["actions"], READ),
        rule("", &["events"], &["create", "patch"]),
        rule("events.k8s.io", &["events"], &["create", "patch"]),
    ]
}

/// The Role of the agents, in the pool's namespace.
pub fn role(pool: &MachinePool) -> Role {
    Role {
        metadata: meta(pool, agent_name(&pool.name_any())),
        rules: Some(agent_rules()),
    }
}

/// Binds the agents' Role to their ServiceAccount.
pub fn role_binding(pool: &MachinePool) -> RoleBinding {
    let name = agent_name(&pool.name_any());
    RoleBinding {
        metadata: meta(pool, name.clone()),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name,
            namespace: pool.namespace(),
            ..Subject::default()
        }]),
    }
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn host_path(name: &str, path: String, kind: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        host_path: Some(HostPathVolumeSource {
            path,
            type_: Some(kind.to_owned()),
        }),
        ..Volume::default()
    }
}

/// The pod's ServiceAccount token, CA bundle and namespace, as the API server's
/// default token volume gives them (`kube-api-access-*`, refreshed by the
/// kubelet) but readable by root only.
fn token_volume() -> Volume {
    Volume {
        name: "token".to_owned(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(TOKEN_MODE),
            sources: Some(vec![
                VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        path: "token".to_owned(),
                        // The default volume's lifetime: the kubelet renews it at 80%.
                        expiration_seconds: Some(3607),
                        ..ServiceAccountTokenProjection::default()
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: "kube-root-ca.crt".to_owned(),
                        items: Some(vec![KeyToPath {
                            key: "ca.crt".to_owned(),
                            path: "ca.crt".to_owned(),
                            mode: None,
                        }]),
                        optional: None,
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    downward_api: Some(DownwardAPIProjection {
                        items: Some(vec![DownwardAPIVolumeFile {
                            path: "namespace".to_owned(),
                            field_ref: Some(ObjectFieldSelector {
                                field_path: "metadata.namespace".to_owned(),
                                ..ObjectFieldSelector::default()
                            }),
                            ..DownwardAPIVolumeFile::default()
                        }]),
                    }),
                    ..VolumeProjection::default()
                },
            ]),
        }),
        ..Volume::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

/// The agent DaemonSet of a pool with a node selector; `None` without one
/// (a pool of machines joined from outside has no pods).
pub fn daemonset(pool: &MachinePool) -> Option<DaemonSet> {
    let selector = pool.spec.node_selector.clone()?;
    let name = pool.name_any();
    let mut pod_labels = labels(pool);
    pod_labels.insert(
        AGENT_VERSION_LABEL.to_owned(),
        label_value(&pool.spec.agent.version),
    );
    let match_labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "machine-agent".to_owned()),
        (POOL_LABEL.to_owned(), name.clone()),
    ]);
    let max_unavailable = pool
        .spec
        .upgrade
        .as_ref()
        .and_then(|u| u.max_unavailable)
        .unwrap_or(1);
    let container = container(pool);
    Some(DaemonSet {
        metadata: meta(pool, agent_name(&name)),
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(match_labels),
                ..LabelSelector::default()
            },
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".to_owned()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString::Int(max_unavailable)),
                    ..RollingUpdateDaemonSet::default()
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(pool, selector, container)),
            },
            ..DaemonSetSpec::default()
        }),
        status: None,
    })
}

/// The agent's container: privileged, with the machine's state, its root
/// and the service account token mounted.
fn container(pool: &MachinePool) -> Container {
    let name = pool.name_any();
    Container {
        name: "agent".to_owned(),
        image: Some(image(pool)),
        command: Some(vec![
            "machine-agent".to_owned(),
            "run".to_owned(),
            "--state-dir".to_owned(),
            STATE_DIR.to_owned(),
            "--pool".to_owned(),
            name.clone(),
        ]),
        env: Some(vec![
            field_env("NODE_NAME", "spec.nodeName"),
            field_env("POD_NAMESPACE", "metadata.namespace"),
            // Host network: the admin server stays on loopback, on a port of its own.
            EnvVar {
                name: olm_api::substrate::AGENT_ADMIN_ADDR_ENV.to_owned(),
                value: Some(olm_api::substrate::AGENT_ADMIN_ADDR.to_owned()),
                ..EnvVar::default()
            },
        ]),
        security_context: Some(SecurityContext {
            privileged: Some(true),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![
            mount("state", STATE_DIR),
            mount("host", HOST_ROOT),
            VolumeMount {
                read_only: Some(true),
                ..mount("token", TOKEN_DIR)
            },
        ]),
        ..Container::default()
    }
}

/// The agent's pod: on the host's network and PID namespace of each node the
/// pool's `selector` matches.
fn pod_spec(pool: &MachinePool, selector: BTreeMap<String, String>, container: Container) -> PodSpec {
    let name = pool.name_any();
    let namespace = pool.namespace().unwrap_or_default();
    PodSpec {
        service_account_name: Some(agent_name(&name)),
        // Mounted as `token`, readable by root only.
        automount_service_account_token: Some(false),
        host_network: Some(true),
        host_pid: Some(true),
        dns_policy: Some("ClusterFirstWithHostNet".to_owned()),
        node_selector: Some(selector),
        tolerations: pool.spec.tolerations.clone(),
        containers: vec![container],
        volumes: Some(vec![
            host_path(
                "state",
                format!("{STATE_DIR}/{namespace}/{name}"),
                "DirectoryOrCreate",
            ),
            host_path("host", "/".to_owned(), "Directory"),
            token_volume(),
        ]),
        ..PodSpec::default()
    }
}

/// `value` made a valid label value (63 characters of `[A-Za-z0-9._-]`).
fn label_value(value: &str) -> String {
    let cleaned: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Toleration;
    use olm_api::substrate::{AgentSpec, AgentUpgrade, MachinePoolSpec};

    fn pool() -> MachinePool {
        let mut pool = MachinePool::new(
            "edge",
            MachinePoolSpec {
                node_selector: Some(BTreeMap::from([("edge".to_owned(), "true".to_owned())])),
                tolerations: Some(vec![Toleration {
                    key: Some("edge".to_owned()),
                    operator: Some("Exists".to_owned()),
                    ..Toleration::default()
                }]),
                agent: AgentSpec {
                    image: "ghcr.io/olm-rs/machine-agent".to_owned(),
                    version: "0.2.0".to_owned(),
                },
                external: None,
                upgrade: Some(AgentUpgrade {
                    max_unavailable: Some(2),
                }),
                units: None,
            },
        );
        pool.metadata.namespace = Some("ops".to_owned());
        pool.metadata.uid = Some("uid-1".to_owned());
        pool
    }

    #[test]
    fn the_daemonset_runs_the_pools_agent_on_its_nodes_with_stated_host_access() {
        let ds = daemonset(&pool()).expect("a selector makes a DaemonSet");
        assert_eq!(ds.metadata.name.as_deref(), Some("machine-agent-edge"));
        assert_eq!(ds.metadata.owner_references.as_ref().map(Vec::len), Some(1));
        let spec = ds.spec.expect("spec");
        let strategy = spec.update_strategy.expect("strategy");
        assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
        assert_eq!(
            strategy.rolling_update.and_then(|r| r.max_unavailable),
            Some(IntOrString::Int(2))
        );
        let pod = spec.template.spec.expect("pod");
        assert_eq!(pod.service_account_name.as_deref(), Some("machine-agent-edge"));
        assert_eq!(pod.host_network, Some(true));
        assert_eq!(pod.host_pid, Some(true));
        assert_eq!(
            pod.node_selector
                .as_ref()
                .and_then(|s| s.get("edge"))
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(pod.tolerations.as_ref().map(Vec::len), Some(1));
        let container = &pod.containers[0];
        assert_eq!(
            container.image.as_deref(),
            Some("ghcr.io/olm-rs/machine-agent:0.2.0")
        );
        assert_eq!(
            container.command.as_deref().map(|c| c.join(" ")),
            Some("machine-agent run --state-dir /var/lib/olm-rs-agent --pool edge".to_owned())
        );
        let env: Vec<_> = container.env.iter().flatten().map(|e| e.name.as_str()).collect();
        assert_eq!(env, ["NODE_NAME", "POD_NAMESPACE", "OLM_ADMIN_ADDR"]);
        assert_eq!(
            container.security_context.as_ref().and_then(|s| s.privileged),
            Some(true)
        );
        let paths: Vec<_> = pod
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| v.host_path.as_ref().map(|h| h.path.as_str()))
            .collect();
        assert_eq!(paths, ["/var/lib/olm-rs-agent/ops/edge", "/"]);
        assert_eq!(
            spec.template
                .metadata
                .and_then(|m| m.labels)
                .and_then(|l| l.get(AGENT_VERSION_LABEL).cloned()),
            Some("0.2.0".to_owned())
        );
    }

    #[test]
    fn the_agents_token_is_readable_by_root_only() {
        let spec = daemonset(&pool()).expect("a DaemonSet").spec.expect("spec");
        let pod = spec.template.spec.expect("pod");
        let container = &pod.containers[0];
        // The token, CA and namespace where the agent's client reads them,
        // readable by root only: unprivileged hooks cannot act as the agent.
        assert_eq!(pod.automount_service_account_token, Some(false));
        let token = pod
            .volumes
            .iter()
            .flatten()
            .find_map(|v| v.projected.as_ref())
            .expect("a projected token volume");
        assert_eq!(token.default_mode, Some(0o600));
        let sources = token.sources.as_deref().unwrap_or_default();
        assert_eq!(
            sources
                .iter()
                .find_map(|s| s.service_account_token.as_ref())
                .map(|t| t.path.as_str()),
            Some("token")
        );
        assert!(sources.iter().any(|s| {
            s.config_map
                .as_ref()
                .is_some_and(|c| c.name == "kube-root-ca.crt")
        }));
        assert!(sources.iter().any(|s| s.downward_api.is_some()));
        let mount = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "token")
            .expect("the token is mounted");
        assert_eq!(mount.mount_path, "/var/run/secrets/kubernetes.io/serviceaccount");
        assert_eq!(mount.read_only, Some(true));
    }

    #[test]
    fn a_pool_without_selector_has_no_daemonset() {
        let mut pool = pool();
        pool.spec.node_selector = None;
        assert!(daemonset(&pool).is_none());
    }

    #[test]
    fn a_tagged_image_is_kept() {
        let mut pool = pool();
        pool.spec.agent.image = "localhost:5000/agent@sha256:abc".to_owned();
        assert_eq!(image(&pool), "localhost:5000/agent@sha256:abc");
        pool.spec.agent.image = "localhost:5000/agent".to_owned();
        assert_eq!(image(&pool), "localhost:5000/agent:0.2.0");
    }

    #[test]
    fn the_agents_read_their_namespace_and_write_only_machines_leases_bag_data_and_tasks() {
        let writes: Vec<_> = agent_rules()
            .into_iter()
            .filter(|r| r.verbs.iter().any(|v| v == "create" || v == "update"))
            .flat_map(|r| r.resources.unwrap_or_default())
            .collect();
        assert_eq!(
            writes,
            [
                "machines",
                "machines/status",
                "leases",
                "events",
                "events",
                "databags/status",
                "actions/status"
            ]
        );
        assert!(
            agent_rules()
                .iter()
                .all(|r| !r.resources.iter().flatten().any(|r| r == "secrets")),
            "agents read no Secret"
        );
        let binding = role_binding(&pool());
        assert_eq!(binding.subjects.expect("subjects")[0].name, "machine-agent-edge");
    }
}
