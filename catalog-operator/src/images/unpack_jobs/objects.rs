//! The objects of one bundle unpack, in the shape OLM gives them (pure).
//!
//! All share one name, derived from the bundle image, in the CatalogSource's
//! namespace (a retried Job adds its attempt: [`retry_job`]): a ConfigMap owned
//! by the CatalogSource, which the bundle is written into, labelled like the
//! Job with [`unpack::REF`] so that catalog-operator's watch selects it; a ServiceAccount, a Role that may write only that ConfigMap and
//! its RoleBinding, all owned by the ConfigMap; and the Job, owned by the
//! ConfigMap, whose Pod has three containers:
//! - `util` (the extractor image) copies the extractor binary to a shared volume;
//! - `pull` (the bundle image, pulled by the node) runs that binary to copy the
//!   bundle's `manifests/` and `metadata/` to a second shared volume;
//! - `extract` (the extractor image) writes them into the ConfigMap.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::{
        batch::v1::{Job, JobSpec},
        core::v1::{
            Capabilities, ConfigMap, Container, EmptyDirVolumeSource, EnvVar, LocalObjectReference,
            PodSecurityContext, PodSpec, PodTemplateSpec, ResourceRequirements, SeccompProfile,
            SecurityContext, ServiceAccount, Toleration, Volume, VolumeMount,
        },
        rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::OwnerReference},
};
use kube::api::ObjectMeta;
use olm_api::labels::{OLM_MANAGED, unpack};
use sha2::{Digest, Sha256};

/// Where the extractor binary is in the extractor image.
pub const EXTRACTOR_PATH: &str = "/usr/local/bin/catalog-operator";
/// Where the `util` container puts the extractor for the `pull` container.
pub const UTIL_DIR: &str = "/util";
/// Where the `pull` container copies the bundle for the `extract` container.
pub const BUNDLE_DIR: &str = "/bundle";
/// Attempts of the Pod before the Job fails (OLM's).
pub const BACKOFF_LIMIT: i32 = 3;
/// Seconds a finished Job is kept (OLM's), after which a failed unpack may be tried again.
pub const TTL_SECONDS_AFTER_FINISHED: i32 = 300;

/// The name of every object of the unpack of `image`: OLM's, the SHA-256 of the
/// reference in hex without its last digit (63 characters, a valid name).
pub fn unpack_name(image: &str) -> String {
    let mut hex = format!("{:x}", Sha256::digest(image.as_bytes()));
    hex.pop();
    hex
}

/// What an owner reference needs of its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
}

impl Owner {
    /// OLM's owner reference: neither controller nor blocking deletion.
    fn reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(false),
            block_owner_deletion: Some(false),
        }
    }
}

/// One bundle unpack.
#[derive(Clone, Debug)]
pub struct Unpack {
    /// The name of its objects ([`unpack_name`]).
    pub name: String,
    /// The CatalogSource's namespace.
    pub namespace: String,
    /// The bundle image.
    pub image: String,
    /// The image with the extractor binary at [`EXTRACTOR_PATH`].
    pub extractor_image: String,
    /// The CatalogSource's pull secrets.
    pub pull_secrets: Vec<String>,
    /// The Job's active deadline; `None` for none.
    pub timeout: Option<Duration>,
}

fn meta(unpack: &Unpack, owner: &Owner) -> ObjectMeta {
    ObjectMeta {
        name: Some(unpack.name.clone()),
        namespace: Some(unpack.namespace.clone()),
        labels: Some(BTreeMap::from([(OLM_MANAGED.to_owned(), "true".to_owned())])),
        owner_references: Some(vec![owner.reference()]),
        ..ObjectMeta::default()
    }
}

/// The labels of the Job, its Pod and the ConfigMap: OLM's, with the unpack's
/// name under [`unpack::REF`].
fn unpack_labels(unpack: &Unpack) -> BTreeMap<String, String> {
    BTreeMap::from([
        (OLM_MANAGED.to_owned(), "true".to_owned()),
        (unpack::REF.to_owned(), unpack.name.clone()),
    ])
}

/// The ConfigMap the bundle is written into, owned by the CatalogSource.
pub fn config_map(unpack: &Unpack, catalog_source: &Owner) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            labels: Some(unpack_labels(unpack)),
            ..meta(unpack, catalog_source)
        },
        ..ConfigMap::default()
    }
}

/// The Job's ServiceAccount, owned by the ConfigMap.
pub fn service_account(unpack: &Unpack, config_map: &Owner) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(unpack, config_map),
        ..ServiceAccount::default()
    }
}

/// A Role that may create, read and update only the ConfigMap, owned by it.
pub fn role(unpack: &Unpack, config_map: &Owner) -> Role {
    Role {
        metadata: meta(unpack, config_map),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".to_owned()]),
            resource_names: Some(vec![unpack.name.clone()]),
            verbs: ["create", "get", "update"].map(str::to_owned).to_vec(),
            ..PolicyRule::default()
        }]),
    }
}

/// The binding of the Role to the ServiceAccount, owned by the ConfigMap.
pub fn role_binding(unpack: &Unpack, config_map: &Owner) -> RoleBinding {
    RoleBinding {
        metadata: meta(unpack, config_map),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: unpack.name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: unpack.name.clone(),
            namespace: Some(unpack.namespace.clone()),
            ..Subject::default()
        }]),
    }
}

fn small_requests() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity("10m".to_owned())),
            ("memory".to_owned(), Quantity("50Mi".to_owned())),
        ])),
        ..ResourceRequirements::default()
    }
}

fn restricted() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

fn container(name: &str, image: &str, command: Vec<String>, mounts: Vec<VolumeMount>) -> Container {
    Container {
        name: name.to_owned(),
        image: Some(image.to_owned()),
        command: Some(command),
        volume_mounts: Some(mounts),
        resources: Some(small_requests()),
        security_context: Some(restricted()),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    }
}

/// OLM's pull policy for an image: by digest, it never changes.
fn pull_policy(image: &str) -> &'static str {
    if image.contains("@sha256:") {
        "IfNotPresent"
    } else {
        "Always"
    }
}

fn toleration(
    key: &str,
    operator: &str,
    value: Option<&str>,
    effect: Option<&str>,
    seconds: Option<i64>,
) -> Toleration {
    Toleration {
        key: Some(key.to_owned()),
        operator: Some(operator.to_owned()),
        value: value.map(str::to_owned),
        effect: effect.map(str::to_owned),
        toleration_seconds: seconds,
    }
}

/// The unpack Job, owned by the ConfigMap; `name` is its own (the unpack's name
/// for the first attempt).
pub fn job(unpack: &Unpack, config_map: &Owner) -> Job {
    let labels = unpack_labels(unpack);
    Job {
        metadata: ObjectMeta {
            labels: Some(labels.clone()),
            ..meta(unpack, config_map)
        },
        spec: Some(JobSpec {
            backoff_limit: Some(BACKOFF_LIMIT),
            active_deadline_seconds: unpack.timeout.map(|t| t.as_secs().max(1) as i64),
            ttl_seconds_after_finished: Some(TTL_SECONDS_AFTER_FINISHED),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    name: Some(unpack.name.clone()),
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(unpack)),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

/// The unpack Pod: `util` copies catalog-operator into a shared volume, `pull`
/// (the bundle image) copies the bundle out with it, `extract` writes the
/// bundle into the ConfigMap.
fn pod_spec(unpack: &Unpack) -> PodSpec {
    let empty = |name: &str| Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    let (util, pull, extract) = containers(unpack);
    PodSpec {
        restart_policy: Some("Never".to_owned()),
        service_account_name: Some(unpack.name.clone()),
        image_pull_secrets: (!unpack.pull_secrets.is_empty()).then(|| {
            unpack
                .pull_secrets
                .iter()
                .map(|name| LocalObjectReference { name: name.clone() })
                .collect()
        }),
        security_context: Some(PodSecurityContext {
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                ..SeccompProfile::default()
            }),
            ..PodSecurityContext::default()
        }),
        init_containers: Some(vec![util, pull]),
        containers: vec![extract],
        volumes: Some(vec![empty("bundle"), empty("util")]),
        node_selector: Some(BTreeMap::from([(
            "kubernetes.io/os".to_owned(),
            "linux".to_owned(),
        )])),
        tolerations: Some(tolerations()),
        ..PodSpec::default()
    }
}

/// The unpack Pod's containers: `util` and `pull` (init containers), `extract`.
fn containers(unpack: &Unpack) -> (Container, Container, Container) {
    let extractor = format!("{UTIL_DIR}/catalog-operator");
    let util = container(
        "util",
        &unpack.extractor_image,
        vec![
            EXTRACTOR_PATH.to_owned(),
            "unpack".to_owned(),
            "install".to_owned(),
            extractor.clone(),
        ],
        vec![mount("util", UTIL_DIR)],
    );
    let pull = Container {
        image_pull_policy: Some(pull_policy(&unpack.image).to_owned()),
        ..container(
            "pull",
            &unpack.image,
            vec![
                extractor,
                "unpack".to_owned(),
                "copy".to_owned(),
                BUNDLE_DIR.to_owned(),
            ],
            vec![mount("bundle", BUNDLE_DIR), mount("util", UTIL_DIR)],
        )
    };
    let extract = Container {
        env: Some(vec![EnvVar {
            name: unpack::CONTAINER_IMAGE_ENV.to_owned(),
            value: Some(unpack.image.clone()),
            ..EnvVar::default()
        }]),
        ..container(
            "extract",
            &unpack.extractor_image,
            vec![
                EXTRACTOR_PATH.to_owned(),
                "unpack".to_owned(),
                "extract".to_owned(),
                "-m".to_owned(),
                format!("{BUNDLE_DIR}/"),
                "-n".to_owned(),
                unpack.namespace.clone(),
                "-c".to_owned(),
                unpack.name.clone(),
                "-z".to_owned(),
            ],
            vec![mount("bundle", BUNDLE_DIR)],
        )
    };
    (util, pull, extract)
}

/// OLM's tolerations for unpack Pods: every architecture, control-plane nodes,
/// and two minutes on unreachable or not-ready nodes.
fn tolerations() -> Vec<Toleration> {
    let mut tolerations: Vec<Toleration> = ["amd64", "arm64", "ppc64le", "s390x"]
        .iter()
        .map(|arch| toleration("kubernetes.io/arch", "Equal", Some(arch), None, None))
        .collect();
    tolerations.extend([
        toleration(
            "node-role.kubernetes.io/master",
            "Exists",
            None,
            Some("NoSchedule"),
            None,
        ),
        toleration(
            "node.kubernetes.io/unreachable",
            "Exists",
            None,
            Some("NoExecute"),
            Some(120),
        ),
        toleration(
            "node.kubernetes.io/not-ready",
            "Exists",
            None,
            Some("NoExecute"),
            Some(120),
        ),
    ]);
    tolerations
}

/// The longest name a Job may have (its Pods carry it in label `job-name`).
const MAX_JOB_NAME: usize = 63;

/// The name of attempt `attempt` of the unpack named `name`: the unpack's name
/// for the first, else that name cut to fit `-<attempt>` after it.
pub fn attempt_name(name: &str, attempt: u32) -> String {
    if attempt <= 1 {
        return name.to_owned();
    }
    let suffix = format!("-{attempt}");
    let base: String = name.chars().take(MAX_JOB_NAME - suffix.len()).collect();
    format!("{base}{suffix}")
}

/// The attempt a Job named `job` is of the unpack named `name` (pure): 1 for the
/// unpack's own name, `n` for [`attempt_name`]'s `-n`, else `None` (e.g. a Job
/// an older release named by `generateName`).
pub fn attempt_of(name: &str, job: &str) -> Option<u32> {
    if job == name {
        return Some(1);
    }
    let (base, attempt) = job.rsplit_once('-')?;
    let attempt: u32 = attempt.parse().ok().filter(|n| *n > 1)?;
    name.starts_with(base).then_some(attempt)
}

/// Attempt `attempt` (at least 2) after a failed one: the same Job, named by
/// [`attempt_name`] (OLM keeps the failed Jobs for inspection until they
/// expire). The name is known before the create, so that a sync that does not
/// see the Job yet asks for the same name and is refused (HTTP 409) instead of
/// starting a second Job.
pub fn retry_job(unpack: &Unpack, config_map: &Owner, attempt: u32) -> Job {
    let mut job = job(unpack, config_map);
    job.metadata.name = Some(attempt_name(&unpack.name, attempt.max(2)));
    job
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unpack() -> Unpack {
        Unpack {
            name: unpack_name("quay.io/x/bundle@sha256:abc"),
            namespace: "olm".to_owned(),
            image: "quay.io/x/bundle@sha256:abc".to_owned(),
            extractor_image: "ghcr.io/olm-rs/catalog-operator:latest".to_owned(),
            pull_secrets: vec!["quay".to_owned()],
            timeout: Some(Duration::from_secs(90)),
        }
    }

    fn owner(kind: &str) -> Owner {
        Owner {
            api_version: "v1".to_owned(),
            kind: kind.to_owned(),
            name: "n".to_owned(),
            uid: "u".to_owned(),
        }
    }

    #[test]
    fn the_name_is_olms_hash_of_the_image() {
        let name = unpack_name("quay.io/x/bundle@sha256:abc");
        assert_eq!(name.len(), 63);
        assert!(name.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(name, unpack_name("quay.io/x/bundle@sha256:abd"));
    }

    #[test]
    fn the_job_has_olms_shape() {
        let job = job(&unpack(), &owner("ConfigMap"));
        let name = unpack().name;
        assert_eq!(job.metadata.name.as_deref(), Some(name.as_str()));
        assert_eq!(
            job.metadata.labels.as_ref().unwrap().get(unpack::REF),
            Some(&name)
        );
        let spec = job.spec.unwrap();
        assert_eq!(spec.backoff_limit, Some(3));
        assert_eq!(spec.active_deadline_seconds, Some(90));
        assert_eq!(spec.ttl_seconds_after_finished, Some(300));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        assert_eq!(pod.service_account_name.as_deref(), Some(name.as_str()));
        assert_eq!(pod.image_pull_secrets.unwrap()[0].name, "quay");
        let init: Vec<_> = pod.init_containers.unwrap();
        assert_eq!(
            init.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["util", "pull"]
        );
        assert_eq!(init[1].image.as_deref(), Some("quay.io/x/bundle@sha256:abc"));
        assert_eq!(init[1].image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(
            init[1].command.as_ref().unwrap()[0],
            "/util/catalog-operator",
            "the bundle image has no shell: it runs the copied extractor"
        );
        let extract = &pod.containers[0];
        assert_eq!(extract.name, "extract");
        let command = extract.command.clone().unwrap();
        assert!(command.ends_with(&[
            "-m".into(),
            "/bundle/".into(),
            "-n".into(),
            "olm".into(),
            "-c".into(),
            name.clone(),
            "-z".into()
        ]));
        assert_eq!(extract.env.as_ref().unwrap()[0].name, "CONTAINER_IMAGE");
    }

    #[test]
    fn the_role_writes_only_the_config_map() {
        let role = role(&unpack(), &owner("ConfigMap"));
        let rule = &role.rules.unwrap()[0];
        assert_eq!(rule.resources.as_deref(), Some(&["configmaps".to_owned()][..]));
        assert_eq!(rule.resource_names.as_deref(), Some(&[unpack().name][..]));
        assert_eq!(rule.verbs, ["create", "get", "update"]);
    }

    #[test]
    fn a_retry_job_is_named_after_its_attempt_and_fits() {
        let name = unpack().name;
        let job = retry_job(&unpack(), &owner("ConfigMap"), 2);
        let retried = job.metadata.name.unwrap();
        assert!(job.metadata.generate_name.is_none());
        assert_eq!(retried.len(), 63, "{retried}");
        assert!(retried.ends_with("-2"), "{retried}");
        assert_eq!(attempt_of(&name, &retried), Some(2));
        let late = attempt_name(&name, 12_345);
        assert_eq!((late.len(), attempt_of(&name, &late)), (63, Some(12_345)));
        assert_eq!(attempt_name(&name, 1), name);
    }

    #[test]
    fn the_attempt_of_a_job_is_read_from_its_name() {
        let name = unpack().name;
        assert_eq!(attempt_of(&name, &name), Some(1));
        assert_eq!(attempt_of(&name, &attempt_name(&name, 7)), Some(7));
        let base: String = name.chars().take(57).collect();
        assert_eq!(attempt_of(&name, &format!("{base}-x7k2p")), None, "generated");
        assert_eq!(attempt_of(&name, "other-3"), None, "another unpack");
        assert_eq!(
            attempt_of(&name, &format!("{base}-1")),
            None,
            "1 is the bare name"
        );
    }

    #[test]
    fn the_config_map_carries_the_unpack_label() {
        let map = config_map(&unpack(), &owner("CatalogSource"));
        let labels = map.metadata.labels.unwrap();
        assert_eq!(labels.get(unpack::REF), Some(&unpack().name));
        assert_eq!(labels.get(OLM_MANAGED).map(String::as_str), Some("true"));
    }
}
