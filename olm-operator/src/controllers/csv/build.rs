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
        apps::v1::Deployment,
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

use super::{
    copy_hashes::STATUS_HASH,
    naming::{generate_name, operator_label_of, spec_hash},
    validate::{Membership, NamedDeployment, Strategy, Targets},
};

/// The kind that `olm.owner.kind` names.
pub const OWNER_KIND: &str = "ClusterServiceVersion";

/// Annotations of the CSV that are not copied onto pod templates (the record
/// of its copies changes with every phase: on a template it would roll the
/// Deployment).
const NOT_COPIED: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration", STATUS_HASH];

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
        labels.extend(operator_label_of(csv));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::csv::{
        fixtures::{self, NAMESPACE, modes},
        naming::package_of,
        validate::{self, Targets},
    };

    const LIMITADOR: &str =
        "bundles/limitador-operator/0.11.0/manifests/limitador-operator.clusterserviceversion.yaml";
    const ETCD: &str = "bundles/etcd/0.9.4/manifests/etcdoperator.v0.9.4.clusterserviceversion.yaml";

    fn build_for(csv: &ClusterServiceVersion, targets: Targets) -> Children {
        let strategy = validate::strategy(csv).expect("a valid strategy");
        build(csv, &fixtures::membership(targets), &strategy).expect("builds")
    }

    fn owned_by_csv(meta: &ObjectMeta) -> bool {
        meta.owner_references.as_ref().is_some_and(|refs| {
            refs.len() == 1
                && refs[0].kind == "ClusterServiceVersion"
                && refs[0].controller == Some(true)
                && refs[0].block_owner_deletion == Some(false)
        })
    }

    fn has_owner_labels(meta: &ObjectMeta, csv: &str) -> bool {
        let labels = meta.labels.clone().unwrap_or_default();
        labels.get(labels::OWNER).map(String::as_str) == Some(csv)
            && labels.get(labels::OWNER_KIND).map(String::as_str) == Some(OWNER_KIND)
            && labels.get(labels::OWNER_NAMESPACE).map(String::as_str) == Some(NAMESPACE)
    }

    #[test]
    fn a_corpus_csv_for_all_namespaces_gets_its_service_account_and_role() {
        let csv = fixtures::corpus_csv(LIMITADOR);
        let name = "limitador-operator.v0.11.0";
        let details = csv.spec.install.deployment().cloned().expect("details");
        let children = build_for(&csv, Targets::All);

        assert_eq!(children.service_accounts.len(), 1);
        let account = &children.service_accounts[0];
        assert_eq!(
            account.metadata.name.as_deref(),
            Some("limitador-operator-controller-manager")
        );
        assert!(owned_by_csv(&account.metadata) && has_owner_labels(&account.metadata, name));

        assert_eq!(children.roles.len(), 1);
        let role = &children.roles[0];
        assert_eq!(role.metadata.namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(
            role.rules.as_ref(),
            Some(&details.permissions.as_ref().expect("permissions")[0].rules)
        );
        assert!(owned_by_csv(&role.metadata) && has_owner_labels(&role.metadata, name));
        let binding = &children.role_bindings[0];
        assert_eq!(binding.metadata.name, role.metadata.name);
        assert_eq!(binding.role_ref.kind, "Role");
        let subject = &binding.subjects.as_ref().expect("subjects")[0];
        assert_eq!(subject.name, "limitador-operator-controller-manager");
        assert_eq!(subject.namespace.as_deref(), Some(NAMESPACE));
    }

    #[test]
    fn a_corpus_csv_for_all_namespaces_gets_cluster_roles() {
        let csv = fixtures::corpus_csv(LIMITADOR);
        let name = "limitador-operator.v0.11.0";
        let details = csv.spec.install.deployment().cloned().expect("details");
        let children = build_for(&csv, Targets::All);
        // clusterPermissions, plus the permissions cluster-wide (all namespaces).
        assert_eq!(children.cluster_roles.len(), 2);
        assert_eq!(children.cluster_role_bindings.len(), 2);
        let cluster_rules = &details.cluster_permissions.as_ref().expect("clusterPermissions")[0].rules;
        assert!(
            children
                .cluster_roles
                .iter()
                .any(|r| r.rules.as_ref() == Some(cluster_rules))
        );
        for role in &children.cluster_roles {
            assert!(
                role.metadata.owner_references.is_none(),
                "cluster-scoped: no owner reference"
            );
            assert!(has_owner_labels(&role.metadata, name));
            assert!(
                role.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.len() <= 63 && n.starts_with(name))
            );
        }
        for (role, binding) in children.cluster_roles.iter().zip(&children.cluster_role_bindings) {
            assert_eq!(binding.metadata.name, role.metadata.name);
            assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
        }
    }

    #[test]
    fn a_corpus_csv_for_all_namespaces_gets_its_deployment() {
        let csv = fixtures::corpus_csv(LIMITADOR);
        let name = "limitador-operator.v0.11.0";
        let children = build_for(&csv, Targets::All);
        assert_eq!(children.deployments.len(), 1);
        let deployment = &children.deployments[0];
        assert!(owned_by_csv(&deployment.metadata) && has_owner_labels(&deployment.metadata, name));
        let labels = deployment.metadata.labels.clone().expect("labels");
        assert_eq!(
            labels.get("control-plane").map(String::as_str),
            Some("controller-manager")
        );
        let spec = deployment.spec.as_ref().expect("spec");
        assert_eq!(labels.get(labels::DEPLOYMENT_SPEC_HASH), Some(&spec_hash(spec)));
        let template = spec.template.metadata.as_ref().expect("template metadata");
        let annotations = template.annotations.clone().expect("annotations");
        assert_eq!(
            annotations.get(labels::OPERATOR_GROUP).map(String::as_str),
            Some("og")
        );
        assert_eq!(
            annotations.get(labels::OPERATOR_NAMESPACE).map(String::as_str),
            Some(NAMESPACE)
        );
        assert_eq!(
            annotations.get(labels::TARGET_NAMESPACES).map(String::as_str),
            Some("")
        );
        assert_eq!(
            annotations.get("capabilities").map(String::as_str),
            Some("Basic Install")
        );
        assert!(
            annotations.contains_key(labels::ALM_EXAMPLES),
            "the CSV's annotations are copied"
        );
        let container = &spec.template.spec.as_ref().expect("pod spec").containers[0];
        let env = container.env.clone().unwrap_or_default();
        assert!(
            env.iter()
                .any(|e| e.name == labels::OPERATOR_CONDITION_NAME_ENV && e.value.as_deref() == Some(name))
        );
    }

    #[test]
    fn a_corpus_csv_for_its_own_namespace_gets_no_cluster_roles() {
        let csv = fixtures::corpus_csv(ETCD);
        let children = build_for(&csv, Targets::Namespaces(vec![NAMESPACE.to_owned()]));
        assert_eq!(children.service_accounts.len(), 1);
        assert_eq!(children.roles.len(), 1);
        assert!(children.cluster_roles.is_empty() && children.cluster_role_bindings.is_empty());
        assert_eq!(children.deployments.len(), 1);
        let annotations = children.deployments[0]
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.clone())
            .expect("annotations");
        assert_eq!(
            annotations.get(labels::TARGET_NAMESPACES).map(String::as_str),
            Some(NAMESPACE)
        );
    }

    #[test]
    fn roles_are_copied_into_other_target_namespaces_with_labels_only() {
        let csv = fixtures::small_csv(&modes(&["MultiNamespace", "OwnNamespace"]), "");
        let children = build_for(
            &csv,
            Targets::Namespaces(vec!["apps".to_owned(), NAMESPACE.to_owned()]),
        );
        let placed: Vec<(Option<&str>, bool)> = children
            .roles
            .iter()
            .map(|r| {
                (
                    r.metadata.namespace.as_deref(),
                    r.metadata.owner_references.is_some(),
                )
            })
            .collect();
        assert_eq!(placed, [(Some(NAMESPACE), true), (Some("apps"), false)]);
        assert!(
            children
                .roles
                .iter()
                .all(|r| has_owner_labels(&r.metadata, "demo.v1.0.0"))
        );
        let binding = &children.role_bindings[1];
        let subject = &binding.subjects.as_ref().expect("subjects")[0];
        assert_eq!(
            subject.namespace.as_deref(),
            Some(NAMESPACE),
            "the subject stays in the operator's namespace"
        );
        assert!(children.cluster_roles.is_empty());
    }

    #[test]
    fn pod_template_annotations_win_over_the_csvs() {
        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        csv.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert("own".to_owned(), "from the csv".to_owned());
        let children = build_for(&csv, Targets::Namespaces(vec![NAMESPACE.to_owned()]));
        let annotations = children.deployments[0]
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.clone())
            .expect("annotations");
        assert_eq!(annotations.get("own").map(String::as_str), Some("kept"));
        let labels = children.deployments[0].metadata.labels.clone().expect("labels");
        assert_eq!(
            labels.get("app.kubernetes.io/name").map(String::as_str),
            Some("demo")
        );
    }

    #[test]
    fn the_record_of_the_copies_stays_off_pod_templates() {
        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        let annotations = csv.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(STATUS_HASH.to_owned(), "h".to_owned());
        annotations.insert("own".to_owned(), "from the csv".to_owned());
        let children = build_for(&csv, Targets::Namespaces(vec![NAMESPACE.to_owned()]));
        let template = children.deployments[0]
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.clone())
            .expect("annotations");
        assert!(!template.contains_key(STATUS_HASH));
        assert!(
            template.contains_key("own"),
            "the CSV's other annotations are there"
        );
    }

    #[test]
    fn the_package_label_comes_from_the_csvs_label_or_properties() {
        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        assert_eq!(package_of(&csv), None);
        csv.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(
            labels::PROPERTIES.to_owned(),
            r#"[{"type":"olm.package","value":{"packageName":"demo-pkg","version":"1.0.0"}}]"#.to_owned(),
        );
        assert_eq!(package_of(&csv).as_deref(), Some("demo-pkg"));
        csv.metadata.labels.get_or_insert_with(BTreeMap::new).insert(
            format!("operators.coreos.com/labelled.{NAMESPACE}"),
            String::new(),
        );
        assert_eq!(package_of(&csv).as_deref(), Some("labelled"));
        let children = build_for(&csv, Targets::Namespaces(vec![NAMESPACE.to_owned()]));
        let wanted = labels::operator_label("labelled", NAMESPACE);
        assert_eq!(
            children.deployments[0]
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(&wanted))
                .map(String::as_str),
            Some("")
        );
        assert!(
            children.roles[0]
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(&wanted))
        );
    }

    #[test]
    fn the_spec_hash_ignores_operator_group_annotations_only() {
        let csv = fixtures::small_csv(&modes(&["OwnNamespace", "AllNamespaces"]), "");
        let own = build_for(&csv, Targets::Namespaces(vec![NAMESPACE.to_owned()]));
        let all = build_for(&csv, Targets::All);
        let hash = |c: &Children| {
            c.deployments[0]
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::DEPLOYMENT_SPEC_HASH))
                .cloned()
        };
        assert_eq!(hash(&own), hash(&all));
        let mut changed = csv.clone();
        changed
            .spec
            .install
            .deployment_mut()
            .expect("details")
            .deployments[0]
            .spec["replicas"] = 3.into();
        assert_ne!(hash(&own), hash(&build_for(&changed, Targets::All)));
    }

    #[test]
    fn generated_names_fit_in_63_characters_and_differ_by_content() {
        let long = "a-very-long-operator-name.v1.2.3-with-a-build-suffix-that-goes-on-and-on";
        let name = generate_name(long, &["x"]);
        assert!(name.len() <= 63, "{name}");
        assert!(name.starts_with("a-very-long-operator-name"));
        assert_ne!(generate_name(long, &["x"]), generate_name(long, &["y"]));
        assert_eq!(generate_name("demo", &["x"]), generate_name("demo", &["x"]));
        let trimmed = generate_name(&format!("{}-", "b".repeat(54)), &["x"]);
        assert!(!trimmed.contains("--"), "{trimmed}");
    }

    #[test]
    fn a_csv_without_uid_cannot_own_anything() {
        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        csv.metadata.uid = None;
        let strategy = validate::strategy(&csv).expect("valid");
        let error = build(&csv, &fixtures::membership(Targets::All), &strategy).unwrap_err();
        assert_eq!(error.to_string(), "the ClusterServiceVersion has no uid");
    }

    /// Security: whatever a CSV says of namespaces, its install writes only in
    /// its own namespace and the targets of its OperatorGroup (as `membership`
    /// has them). Here the CSV claims other targets and another operator
    /// namespace in OLM's annotations and puts its pod template in another
    /// namespace: none of it leads a child elsewhere.
    #[test]
    fn a_csv_cannot_place_its_children_outside_its_targets() {
        let csv = fixtures::small_csv(&modes(&["MultiNamespace", "OwnNamespace"]), "");
        let mut value = serde_json::to_value(&csv).expect("a CSV");
        value["metadata"]["annotations"] = serde_json::json!({
            labels::TARGET_NAMESPACES: "victim,kube-system",
            labels::OPERATOR_NAMESPACE: "victim",
            labels::OPERATOR_GROUP: "theirs",
        });
        value["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["metadata"]["namespace"] =
            "victim".into();
        let csv: ClusterServiceVersion = serde_json::from_value(value).expect("a CSV");
        for targets in [
            vec![NAMESPACE.to_owned()],
            vec!["apps".to_owned(), NAMESPACE.to_owned()],
        ] {
            let children = build_for(&csv, Targets::Namespaces(targets.clone()));
            let namespaces: Vec<Option<String>> = (children.service_accounts.iter().map(|o| &o.metadata))
                .chain(children.roles.iter().map(|o| &o.metadata))
                .chain(children.role_bindings.iter().map(|o| &o.metadata))
                .chain(children.deployments.iter().map(|o| &o.metadata))
                .map(|meta| meta.namespace.clone())
                .collect();
            assert!(!namespaces.is_empty());
            for namespace in &namespaces {
                let namespace = namespace.as_deref().expect("namespaced");
                assert!(
                    targets.iter().any(|t| t == namespace),
                    "{namespace} is not a target of {targets:?}"
                );
            }
            let subjects = children
                .role_bindings
                .iter()
                .flat_map(|b| b.subjects.iter().flatten());
            assert!(
                subjects
                    .into_iter()
                    .all(|s| s.namespace.as_deref() == Some(NAMESPACE))
            );
            assert!(children.cluster_roles.is_empty() && children.cluster_role_bindings.is_empty());
            let pod = children.deployments[0]
                .spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref());
            let annotations = pod.and_then(|m| m.annotations.clone()).expect("annotations");
            assert_eq!(
                annotations.get(labels::TARGET_NAMESPACES),
                Some(&targets.join(","))
            );
            assert_eq!(
                annotations.get(labels::OPERATOR_NAMESPACE).map(String::as_str),
                Some(NAMESPACE)
            );
            assert_eq!(
                annotations.get(labels::OPERATOR_GROUP).map(String::as_str),
                Some("og")
            );
        }
    }
}
