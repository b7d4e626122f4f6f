//! Build: every object a ClusterServiceVersion's install strategy needs,
//! computed without a client.
//!
//! - one ServiceAccount per service account the permissions name;
//! - for `permissions`: a Role and RoleBinding in the operator's namespace,
//!   copied into each target namespace when the OperatorGroup targets other
//!   namespaces, and a ClusterRole and ClusterRoleBinding when it targets all;
//! - for `clusterPermissions`: a ClusterRole and ClusterRoleBinding;
//! - the Deployments of `install.spec.deployments`, with OLM's labels and pod
//!   template annotations.
//!
//! Every object carries the labels `olm.owner`, `olm.owner.kind`,
//! `olm.owner.namespace` (and `operators.coreos.com/<package>.<namespace>`
//! when the package is known); objects in the CSV's namespace also carry a
//! controller owner reference to it, so that Kubernetes collects them with it.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec},
        core::v1::{EnvVar, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{Resource, ResourceExt};
use olm_api::{
    labels,
    v1alpha1::{ClusterServiceVersion, StrategyDeploymentPermissions},
};

use super::validate::{Membership, NamedDeployment, Strategy, Targets};

/// The kind that `olm.owner.kind` names.
pub const OWNER_KIND: &str = "ClusterServiceVersion";

/// The longest name a generated object gets (a label value's limit, so that
/// names stay usable as label values too).
const MAX_NAME: usize = 63;

/// Annotations of the CSV that are not copied onto pod templates.
const NOT_COPIED: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// The objects of one CSV's install.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Children {
    /// Service accounts, in the CSV's namespace.
    pub service_accounts: Vec<ServiceAccount>,
    /// Roles, in the CSV's namespace and the target namespaces.
    pub roles: Vec<Role>,
    /// RoleBindings, beside the Roles.
    pub role_bindings: Vec<RoleBinding>,
    /// ClusterRoles.
    pub cluster_roles: Vec<ClusterRole>,
    /// ClusterRoleBindings.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    /// Deployments, in the CSV's namespace.
    pub deployments: Vec<Deployment>,
}

/// Why nothing could be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CSV lacks metadata the API server always sets.
    #[error("the ClusterServiceVersion has no {0}")]
    MissingMetadata(&'static str),
}

/// Builds the install of `csv`.
pub fn build(
    csv: &ClusterServiceVersion,
    membership: &Membership,
    strategy: &Strategy,
) -> Result<Children, Error> {
    let owner = Owner::of(csv)?;
    let mut children = Children::default();

    for account in strategy.service_accounts() {
        children.service_accounts.push(ServiceAccount {
            metadata: owner.namespaced_meta(&account),
            ..ServiceAccount::default()
        });
    }

    let mut role_namespaces = vec![owner.namespace.clone()];
    if let Targets::Namespaces(targets) = &membership.targets {
        role_namespaces.extend(targets.iter().filter(|ns| **ns != owner.namespace).cloned());
    }
    for permission in &strategy.permissions {
        let name = generate_name(
            &format!("{}-{}", owner.name, permission.service_account_name),
            &[
                &owner.name,
                &permission.service_account_name,
                &rules_key(permission),
            ],
        );
        for namespace in &role_namespaces {
            let metadata = if *namespace == owner.namespace {
                owner.namespaced_meta(&name)
            } else {
                owner.labelled_meta(&name, Some(namespace))
            };
            children.roles.push(Role {
                metadata: metadata.clone(),
                rules: Some(permission.rules.clone()),
            });
            children.role_bindings.push(RoleBinding {
                metadata,
                role_ref: role_ref("Role", &name),
                subjects: Some(vec![owner.subject(&permission.service_account_name)]),
            });
        }
        if membership.targets == Targets::All {
            let name = generate_name(
                &owner.name,
                &[
                    "permissions",
                    &owner.name,
                    &owner.namespace,
                    &rules_key(permission),
                ],
            );
            owner.push_cluster_role(&mut children, &name, permission);
        }
    }
    for permission in &strategy.cluster_permissions {
        let name = generate_name(
            &owner.name,
            &[&owner.name, &owner.namespace, &rules_key(permission)],
        );
        owner.push_cluster_role(&mut children, &name, permission);
    }

    let pod_annotations = pod_annotations(csv, membership);
    for deployment in &strategy.deployments {
        children
            .deployments
            .push(owner.deployment(deployment, &pod_annotations));
    }
    Ok(children)
}

/// The labels that tie an object to its CSV.
pub fn owner_labels(name: &str, namespace: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::OWNER.to_owned(), name.to_owned()),
        (labels::OWNER_KIND.to_owned(), OWNER_KIND.to_owned()),
        (labels::OWNER_NAMESPACE.to_owned(), namespace.to_owned()),
    ])
}

/// A label selector for the objects of one CSV.
pub fn owner_selector(name: &str, namespace: &str) -> String {
    owner_labels(name, namespace)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
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

/// The annotations OLM puts on a CSV and its pods to name its OperatorGroup.
pub fn operator_group_annotations(membership: &Membership) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            labels::OPERATOR_GROUP.to_owned(),
            membership.operator_group.clone(),
        ),
        (
            labels::OPERATOR_NAMESPACE.to_owned(),
            membership.operator_namespace.clone(),
        ),
        (
            labels::TARGET_NAMESPACES.to_owned(),
            membership.targets.annotation(),
        ),
    ])
}

/// The annotations every pod template gets: the CSV's own, with the
/// OperatorGroup's on top (the template's own annotations win over both).
fn pod_annotations(csv: &ClusterServiceVersion, membership: &Membership) -> BTreeMap<String, String> {
    let mut annotations: BTreeMap<String, String> = csv
        .annotations()
        .iter()
        .filter(|(key, _)| !NOT_COPIED.contains(&key.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.extend(operator_group_annotations(membership));
    annotations
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

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

fn rules_key(permission: &StrategyDeploymentPermissions) -> String {
    serde_json::to_string(&permission.rules).unwrap_or_default()
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: Some("rbac.authorization.k8s.io".to_owned()),
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

/// The CSV as the owner of what is built.
struct Owner {
    name: String,
    namespace: String,
    reference: OwnerReference,
    labels: BTreeMap<String, String>,
}

impl Owner {
    fn of(csv: &ClusterServiceVersion) -> Result<Self, Error> {
        let name = csv.metadata.name.clone().ok_or(Error::MissingMetadata("name"))?;
        let namespace = csv
            .metadata
            .namespace
            .clone()
            .ok_or(Error::MissingMetadata("namespace"))?;
        let mut reference = csv
            .controller_owner_ref(&())
            .ok_or(Error::MissingMetadata("uid"))?;
        // Not blocking: deleting the CSV must not wait for its children, and
        // a scoped install's service account need not be allowed to block.
        reference.block_owner_deletion = Some(false);
        let mut labels = owner_labels(&name, &namespace);
        if let Some(package) = package_of(csv) {
            labels.insert(labels::operator_label(&package, &namespace), String::new());
        }
        Ok(Self {
            name,
            namespace,
            reference,
            labels,
        })
    }

    /// Metadata of a child in the CSV's namespace: labels and owner reference.
    fn namespaced_meta(&self, name: &str) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(vec![self.reference.clone()]),
            ..self.labelled_meta(name, Some(&self.namespace))
        }
    }

    /// Metadata of a child that cannot carry an owner reference (cluster-scoped,
    /// or in another namespace): labels only.
    fn labelled_meta(&self, name: &str, namespace: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: namespace.map(str::to_owned),
            labels: Some(self.labels.clone()),
            ..ObjectMeta::default()
        }
    }

    fn subject(&self, service_account: &str) -> Subject {
        Subject {
            kind: "ServiceAccount".to_owned(),
            name: service_account.to_owned(),
            namespace: Some(self.namespace.clone()),
            api_group: None,
        }
    }

    fn push_cluster_role(
        &self,
        children: &mut Children,
        name: &str,
        permission: &StrategyDeploymentPermissions,
    ) {
        children.cluster_roles.push(ClusterRole {
            metadata: self.labelled_meta(name, None),
            rules: Some(permission.rules.clone()),
            aggregation_rule: None,
        });
        children.cluster_role_bindings.push(ClusterRoleBinding {
            metadata: self.labelled_meta(name, None),
            role_ref: role_ref("ClusterRole", name),
            subjects: Some(vec![self.subject(&permission.service_account_name)]),
        });
    }

    fn deployment(
        &self,
        deployment: &NamedDeployment,
        pod_annotations: &BTreeMap<String, String>,
    ) -> Deployment {
        let mut spec = deployment.spec.clone();
        let template_meta = spec.template.metadata.get_or_insert_with(ObjectMeta::default);
        let mut annotations = pod_annotations.clone();
        annotations.extend(template_meta.annotations.take().unwrap_or_default());
        template_meta.annotations = Some(annotations);
        if let Some(pod) = spec.template.spec.as_mut() {
            for container in &mut pod.containers {
                let env = container.env.get_or_insert_with(Vec::new);
                if !env
                    .iter()
                    .any(|var| var.name == labels::OPERATOR_CONDITION_NAME_ENV)
                {
                    env.push(EnvVar {
                        name: labels::OPERATOR_CONDITION_NAME_ENV.to_owned(),
                        value: Some(self.name.clone()),
                        value_from: None,
                    });
                }
            }
        }
        let mut labels = deployment.labels.clone();
        labels.extend(self.labels.clone());
        labels.insert(labels::DEPLOYMENT_SPEC_HASH.to_owned(), spec_hash(&spec));
        let mut metadata = self.namespaced_meta(&deployment.name);
        metadata.labels = Some(labels);
        Deployment {
            metadata,
            spec: Some(spec),
            status: None,
        }
    }
}
