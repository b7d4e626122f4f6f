//! Validate: pure checks of a ClusterServiceVersion against what dereference
//! found. Three independent verdicts:
//!
//! - [`Membership`]: the one OperatorGroup of the namespace, its target
//!   namespaces, and whether the CSV's install modes support them
//!   (OLM's `NoOperatorGroup`, `TooManyOperatorGroups`, `NoTargetNamespaces`,
//!   `InvalidInstallModes`, `UnsupportedOperatorGroup`);
//! - [`Strategy`]: the `deployment` install strategy, with every Deployment
//!   spec parsed (OLM's `InvalidInstallStrategy`);
//! - [`Requirements`]: `status.requirementStatus`, one entry per required and
//!   owned CRD, native API, the minimum Kubernetes version and each service
//!   account.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    api::{apps::v1::DeploymentSpec, core::v1::ServiceAccount},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use olm_api::{
    v1::{OperatorGroup, UpgradeStrategyName},
    v1alpha1::{
        ClusterServiceVersion, CsvReason, InstallModeType, RequirementStatus, StatusReason,
        StrategyDeploymentPermissions,
    },
};

use super::dereference::{Dereferenced, group_version};

/// Everything validate concluded about one CSV.
#[derive(Clone, Debug)]
pub struct Validation {
    /// The CSV's OperatorGroup and targets, or why it has none usable.
    pub membership: Result<Membership, MembershipError>,
    /// The parsed install strategy, or why it is invalid.
    pub strategy: Result<Strategy, InvalidStrategy>,
    /// The status of every requirement.
    pub requirements: Requirements,
    /// Another CSV of the namespace already owns a CRD this one owns.
    pub owner_conflict: Option<OwnerConflict>,
}

/// Runs every check.
pub fn validate(csv: &ClusterServiceVersion, found: &Dereferenced) -> Validation {
    Validation {
        membership: membership(csv, &found.operator_groups),
        strategy: strategy(csv),
        requirements: requirements(csv, found),
        owner_conflict: found
            .crd_owner_conflicts
            .first()
            .map(|(crd, owner)| OwnerConflict {
                crd: crd.clone(),
                owner: owner.clone(),
            }),
    }
}

/// A CRD this CSV owns that another CSV of the namespace owns too (OLM's `OwnerConflict`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("conflicting CRD owner in namespace: {crd} is owned by ClusterServiceVersion {owner}")]
pub struct OwnerConflict {
    /// The CRD.
    pub crd: String,
    /// The other CSV.
    pub owner: String,
}

// === Membership ===

/// The OperatorGroup a CSV belongs to, and what it asks of the CSV.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    /// The OperatorGroup's name.
    pub operator_group: String,
    /// The namespace of the OperatorGroup and of the operator.
    pub operator_namespace: String,
    /// The namespaces the operator serves.
    pub targets: Targets,
    /// The service account that bounds the install (`spec.serviceAccountName`).
    pub service_account: Option<String>,
    /// The OperatorGroup lets a newer CSV replace a Failed one.
    pub fail_forward: bool,
}

/// The namespaces an operator serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Targets {
    /// Every namespace (`status.namespaces: [""]`).
    All,
    /// These namespaces, sorted and without repeats.
    Namespaces(Vec<String>),
}

impl Targets {
    /// The targets an OperatorGroup's `status.namespaces` names.
    pub fn from_status(namespaces: &[String]) -> Self {
        if namespaces.iter().any(String::is_empty) {
            return Targets::All;
        }
        let set: BTreeSet<&String> = namespaces.iter().collect();
        Targets::Namespaces(set.into_iter().cloned().collect())
    }

    /// The value of the `olm.targetNamespaces` annotation: the namespaces
    /// joined by commas, or the empty string for all namespaces.
    pub fn annotation(&self) -> String {
        match self {
            Targets::All => String::new(),
            Targets::Namespaces(namespaces) => namespaces.join(","),
        }
    }
}

/// Why a CSV has no usable OperatorGroup.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    /// The namespace has no OperatorGroup.
    #[error("csv in namespace with no operatorgroups")]
    NoOperatorGroup,
    /// The namespace has several.
    #[error("csv created in namespace with multiple operatorgroups, can't pick one automatically: {}", .0.join(", "))]
    TooManyOperatorGroups(Vec<String>),
    /// The OperatorGroup has not listed its namespaces yet; this resolves by itself.
    #[error("operatorgroup {0} has not selected its namespaces yet")]
    NotReady(String),
    /// The OperatorGroup selects no namespace.
    #[error("no targetNamespaces are matched operatorgroups namespace selection")]
    NoTargetNamespaces,
    /// The CSV's install modes contradict each other.
    #[error("{0}")]
    InvalidInstallModes(String),
    /// The OperatorGroup's shape is not one the CSV supports.
    #[error("{0}")]
    Unsupported(String),
}

impl MembershipError {
    /// OLM's reason for this problem; `None` while it is only not ready yet.
    pub fn reason(&self) -> Option<CsvReason> {
        match self {
            MembershipError::NoOperatorGroup => Some(CsvReason::NoOperatorGroup),
            MembershipError::TooManyOperatorGroups(_) => Some(CsvReason::TooManyOperatorGroups),
            MembershipError::NotReady(_) => None,
            MembershipError::NoTargetNamespaces => Some(CsvReason::NoTargetNamespaces),
            MembershipError::InvalidInstallModes(_) => Some(CsvReason::InvalidInstallModes),
            MembershipError::Unsupported(_) => Some(CsvReason::UnsupportedOperatorGroup),
        }
    }
}

/// Finds the CSV's OperatorGroup and checks its install modes against it.
pub fn membership(
    csv: &ClusterServiceVersion,
    operator_groups: &[OperatorGroup],
) -> Result<Membership, MembershipError> {
    let group = match operator_groups {
        [] => return Err(MembershipError::NoOperatorGroup),
        [group] => group,
        many => {
            let mut names: Vec<String> = many.iter().filter_map(|g| g.metadata.name.clone()).collect();
            names.sort();
            return Err(MembershipError::TooManyOperatorGroups(names));
        }
    };
    let group_name = group.metadata.name.clone().unwrap_or_default();
    let operator_namespace = group
        .metadata
        .namespace
        .clone()
        .or_else(|| csv.metadata.namespace.clone())
        .unwrap_or_default();
    let Some(namespaces) = group.status.as_ref().and_then(|s| s.namespaces.as_ref()) else {
        return Err(MembershipError::NotReady(group_name));
    };
    if namespaces.is_empty() {
        return Err(MembershipError::NoTargetNamespaces);
    }
    let targets = Targets::from_status(namespaces);
    check_install_modes(csv, &operator_namespace, namespaces)?;
    Ok(Membership {
        operator_group: group_name,
        operator_namespace,
        targets,
        service_account: group
            .spec
            .service_account_name
            .clone()
            .filter(|name| !name.is_empty()),
        fail_forward: group
            .spec
            .upgrade_strategy
            .as_ref()
            .is_some_and(|s| s.name == UpgradeStrategyName::TechPreviewUnsafeFailForward),
    })
}

/// Whether the CSV's install modes allow an operator in `operator_namespace`
/// to serve `namespaces` (an OperatorGroup's `status.namespaces`).
pub fn check_install_modes(
    csv: &ClusterServiceVersion,
    operator_namespace: &str,
    namespaces: &[String],
) -> Result<(), MembershipError> {
    let mut declared = BTreeMap::new();
    for mode in csv.spec.install_modes.iter().flatten() {
        if declared.insert(mode.type_, mode.supported).is_some() {
            return Err(MembershipError::InvalidInstallModes(format!(
                "install mode {:?} is listed more than once",
                mode.type_
            )));
        }
    }
    let supports = |mode: InstallModeType| declared.get(&mode).copied().unwrap_or(false);
    let unsupported = |mode: InstallModeType, what: String| {
        Err(MembershipError::Unsupported(format!(
            "{mode:?} InstallModeType not supported, cannot configure to watch {what}"
        )))
    };
    match namespaces {
        [] => Err(MembershipError::NoTargetNamespaces),
        [one] if one.is_empty() => {
            if supports(InstallModeType::AllNamespaces) {
                Ok(())
            } else {
                unsupported(InstallModeType::AllNamespaces, "all namespaces".to_owned())
            }
        }
        [one] if one == operator_namespace => {
            if supports(InstallModeType::OwnNamespace) {
                Ok(())
            } else {
                unsupported(InstallModeType::OwnNamespace, "own namespace".to_owned())
            }
        }
        [_] => {
            if supports(InstallModeType::SingleNamespace) {
                Ok(())
            } else {
                unsupported(InstallModeType::SingleNamespace, "one namespace".to_owned())
            }
        }
        many => {
            if many.iter().any(String::is_empty) {
                return Err(MembershipError::Unsupported(
                    "operatorgroup has invalid selected namespaces, NamespaceAll found when |selected namespaces| > 1"
                        .to_owned(),
                ));
            }
            if !supports(InstallModeType::MultiNamespace) {
                return unsupported(
                    InstallModeType::MultiNamespace,
                    format!("{} namespaces", many.len()),
                );
            }
            if many.iter().any(|ns| ns == operator_namespace) && !supports(InstallModeType::OwnNamespace) {
                return Err(MembershipError::Unsupported(
                    "OwnNamespace InstallModeType not supported with MultiNamespace, cannot configure to watch own namespace"
                        .to_owned(),
                ));
            }
            Ok(())
        }
    }
}

// === Strategy ===

/// The `deployment` install strategy of a CSV, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Strategy {
    /// The Deployments, in the order the CSV lists them.
    pub deployments: Vec<NamedDeployment>,
    /// Namespaced permissions.
    pub permissions: Vec<StrategyDeploymentPermissions>,
    /// Cluster-wide permissions.
    pub cluster_permissions: Vec<StrategyDeploymentPermissions>,
}

/// One Deployment of the strategy.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedDeployment {
    /// Its name.
    pub name: String,
    /// Its spec.
    pub spec: DeploymentSpec,
    /// Labels the CSV asks for on the Deployment.
    pub labels: BTreeMap<String, String>,
}

impl Strategy {
    /// Every service account the permissions name, in first-mention order.
    pub fn service_accounts(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        self.permissions
            .iter()
            .chain(&self.cluster_permissions)
            .map(|p| p.service_account_name.clone())
            .filter(|name| seen.insert(name.clone()))
            .collect()
    }
}

/// Why an install strategy cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("install strategy invalid: {0}")]
pub struct InvalidStrategy(pub String);

/// Parses the install strategy.
pub fn strategy(csv: &ClusterServiceVersion) -> Result<Strategy, InvalidStrategy> {
    let Some(details) = csv.spec.install.deployment() else {
        // The machine strategy builds nothing here: `csv::machine` does its work.
        return Ok(Strategy {
            deployments: Vec::new(),
            permissions: Vec::new(),
            cluster_permissions: Vec::new(),
        });
    };
    let mut names = BTreeSet::new();
    let mut deployments = Vec::with_capacity(details.deployments.len());
    for deployment in &details.deployments {
        if deployment.name.is_empty() {
            return Err(InvalidStrategy("a deployment has no name".to_owned()));
        }
        if !names.insert(deployment.name.as_str()) {
            return Err(InvalidStrategy(format!(
                "deployment {} is listed more than once",
                deployment.name
            )));
        }
        let spec: DeploymentSpec = serde_json::from_value(deployment.spec.clone())
            .map_err(|e| InvalidStrategy(format!("deployment {}: {e}", deployment.name)))?;
        deployments.push(NamedDeployment {
            name: deployment.name.clone(),
            spec,
            labels: deployment.label.clone().unwrap_or_default(),
        });
    }
    for permission in details
        .permissions
        .iter()
        .flatten()
        .chain(details.cluster_permissions.iter().flatten())
    {
        if permission.service_account_name.is_empty() {
            return Err(InvalidStrategy(
                "a permission names no service account".to_owned(),
            ));
        }
    }
    Ok(Strategy {
        deployments,
        permissions: details.permissions.clone().unwrap_or_default(),
        cluster_permissions: details.cluster_permissions.clone().unwrap_or_default(),
    })
}

// === Requirements ===

/// The requirement statuses of a CSV and whether all blocking ones are met.
#[derive(Clone, Debug, PartialEq)]
pub struct Requirements {
    /// Every CRD is there and established, and the cluster is new enough.
    /// Service accounts do not count: the install creates them.
    pub met: bool,
    /// One entry per requirement, as `status.requirementStatus` lists them.
    pub statuses: Vec<RequirementStatus>,
}

impl Requirements {
    /// The names of the unmet requirements, for messages.
    pub fn unmet(&self) -> Vec<String> {
        self.statuses
            .iter()
            .filter(|s| s.kind != "ServiceAccount" && s.status != StatusReason::Present)
            .map(|s| format!("{} {}", s.kind, s.name))
            .collect()
    }
}

/// Checks the CRDs, the Kubernetes version and the service accounts.
pub fn requirements(csv: &ClusterServiceVersion, found: &Dereferenced) -> Requirements {
    let mut met = true;
    let mut statuses = Vec::new();

    if let Some(status) = min_kube_version(csv, found.server_version.as_ref()) {
        met &= status.status == StatusReason::Present;
        statuses.push(status);
    }

    for api in csv.spec.native_apis.iter().flatten() {
        let served = found
            .served_kinds
            .get(&group_version(&api.group, &api.version))
            .is_some_and(|kinds| kinds.contains(&api.kind));
        met &= served;
        statuses.push(RequirementStatus {
            group: api.group.clone(),
            version: api.version.clone(),
            kind: api.kind.clone(),
            name: format!("{}.{}", api.version, api.group),
            status: if served {
                StatusReason::Present
            } else {
                StatusReason::NotPresent
            },
            message: if served {
                "Native API exists".to_owned()
            } else {
                "Native API does not exist".to_owned()
            },
            uuid: None,
            dependents: None,
        });
    }

    let mut seen = BTreeSet::new();
    for description in csv.owned_crds().iter().chain(csv.required_crds()) {
        if !seen.insert(description.name.as_str()) {
            continue;
        }
        let status = crd_status(
            &description.name,
            &description.version,
            found.crds.get(&description.name),
        );
        met &= status.status == StatusReason::Present;
        statuses.push(status);
    }

    if let Ok(strategy) = strategy(csv) {
        for name in strategy.service_accounts() {
            statuses.push(service_account_status(&name, found.service_accounts.get(&name)));
        }
    }
    Requirements { met, statuses }
}

fn crd_status(name: &str, version: &str, crd: Option<&CustomResourceDefinition>) -> RequirementStatus {
    let mut status = RequirementStatus {
        group: "apiextensions.k8s.io".to_owned(),
        version: "v1".to_owned(),
        kind: "CustomResourceDefinition".to_owned(),
        name: name.to_owned(),
        status: StatusReason::NotPresent,
        message: "CRD is not present".to_owned(),
        uuid: None,
        dependents: None,
    };
    let Some(crd) = crd else {
        return status;
    };
    if !crd.spec.versions.iter().any(|v| v.name == version && v.served) {
        status.message = format!("CRD version {version} is not served");
        return status;
    }
    let condition_true = |kind: &str| {
        crd.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == kind && c.status == "True"))
    };
    status.uuid = crd.metadata.uid.clone();
    if condition_true("Established") && condition_true("NamesAccepted") {
        status.status = StatusReason::Present;
        status.message = "CRD is present and Established condition is true".to_owned();
    } else {
        status.status = StatusReason::PresentNotAvailable;
        status.message = "CRD is present but the Established condition is False (not available)".to_owned();
    }
    status
}

fn service_account_status(name: &str, account: Option<&ServiceAccount>) -> RequirementStatus {
    let (status, message, uuid) = match account {
        Some(account) => (
            StatusReason::Present,
            "Service account is present".to_owned(),
            account.metadata.uid.clone(),
        ),
        None => (
            StatusReason::NotPresent,
            "Service account does not exist yet; the install creates it".to_owned(),
            None,
        ),
    };
    RequirementStatus {
        group: String::new(),
        version: "v1".to_owned(),
        kind: "ServiceAccount".to_owned(),
        name: name.to_owned(),
        status,
        message,
        uuid,
        dependents: None,
    }
}

fn min_kube_version(
    csv: &ClusterServiceVersion,
    server: Option<&semver::Version>,
) -> Option<RequirementStatus> {
    let wanted = csv
        .spec
        .min_kube_version
        .as_deref()
        .filter(|v| !v.trim().is_empty())?;
    let mut status = RequirementStatus {
        group: "operators.coreos.com".to_owned(),
        version: "v1alpha1".to_owned(),
        kind: "ClusterServiceVersion".to_owned(),
        name: csv.metadata.name.clone().unwrap_or_default(),
        status: StatusReason::PresentNotSatisfied,
        message: String::new(),
        uuid: None,
        dependents: None,
    };
    let Some(server) = server else {
        status.message = "Server version discovery error".to_owned();
        return Some(status);
    };
    let Some(minimum) = crate::context::parse_kube_version(wanted) else {
        status.message = format!("minKubeVersion {wanted} is not a version");
        return Some(status);
    };
    if minimum > *server {
        status.message =
            format!("CSV version requirement not met: minKubeVersion ({wanted}) > server version ({server})");
    } else {
        status.status = StatusReason::Present;
        status.message = format!("CSV minKubeVersion ({wanted}) less than server version ({server})");
    }
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::csv::fixtures::{self, NAMESPACE, modes};
    use olm_api::v1alpha1::{MachineHooks, NamedInstallStrategy, StrategyDetailsMachine};

    fn group(yaml_status: &str) -> OperatorGroup {
        fixtures::operator_group(&format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: og}}\n{yaml_status}\n"
        ))
    }

    fn membership_with(supported: &[&str], namespaces: &[&str]) -> Result<Membership, MembershipError> {
        let csv = fixtures::small_csv(&modes(supported), "");
        let list: Vec<String> = namespaces.iter().map(|ns| format!("\"{ns}\"")).collect();
        membership(
            &csv,
            &[group(&format!("status: {{namespaces: [{}]}}", list.join(", ")))],
        )
    }

    // --- Membership ---

    #[test]
    fn no_operator_group_and_too_many_are_olm_failures() {
        let csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        let error = membership(&csv, &[]).unwrap_err();
        assert_eq!(error.reason(), Some(CsvReason::NoOperatorGroup));
        let mut second = group("");
        second.metadata.name = Some("another".to_owned());
        let error = membership(&csv, &[group(""), second]).unwrap_err();
        assert_eq!(error.reason(), Some(CsvReason::TooManyOperatorGroups));
        assert!(error.to_string().contains("another, og"), "{error}");
    }

    #[test]
    fn an_operator_group_without_status_is_not_ready_yet_and_an_empty_one_targets_nothing() {
        let csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        let error = membership(&csv, &[group("")]).unwrap_err();
        assert_eq!(error, MembershipError::NotReady("og".to_owned()));
        assert_eq!(error.reason(), None);
        let error = membership(&csv, &[group("status: {namespaces: []}")]).unwrap_err();
        assert_eq!(error.reason(), Some(CsvReason::NoTargetNamespaces));
    }

    #[test]
    fn install_modes_decide_which_operator_groups_fit() {
        let all = membership_with(&["AllNamespaces"], &[""]).expect("all namespaces fits");
        assert_eq!(all.targets, Targets::All);
        assert_eq!(all.targets.annotation(), "");

        let own = membership_with(&["OwnNamespace"], &[NAMESPACE]).expect("own namespace fits");
        assert_eq!(own.targets, Targets::Namespaces(vec![NAMESPACE.to_owned()]));

        let error = membership_with(&["OwnNamespace"], &[""]).unwrap_err();
        assert_eq!(error.reason(), Some(CsvReason::UnsupportedOperatorGroup));
        assert_eq!(
            error.to_string(),
            "AllNamespaces InstallModeType not supported, cannot configure to watch all namespaces"
        );
        let error = membership_with(&["AllNamespaces"], &[NAMESPACE]).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("OwnNamespace InstallModeType not supported"),
            "{error}"
        );
        let error = membership_with(&["OwnNamespace"], &["elsewhere"]).unwrap_err();
        assert!(error.to_string().starts_with("SingleNamespace"), "{error}");
        let error = membership_with(&["OwnNamespace", "SingleNamespace"], &["a", "b"]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "MultiNamespace InstallModeType not supported, cannot configure to watch 2 namespaces"
        );
        let error = membership_with(&["MultiNamespace"], &["b", NAMESPACE]).unwrap_err();
        assert!(error.to_string().contains("own namespace"), "{error}");
        let multi =
            membership_with(&["MultiNamespace", "OwnNamespace"], &["b", NAMESPACE, "b"]).expect("fits");
        assert_eq!(
            multi.targets,
            Targets::Namespaces(vec!["b".to_owned(), NAMESPACE.to_owned()])
        );
        assert_eq!(multi.targets.annotation(), format!("b,{NAMESPACE}"));
    }

    #[test]
    fn repeated_install_modes_are_invalid() {
        let csv = fixtures::small_csv(
            "[{type: OwnNamespace, supported: true}, {type: OwnNamespace, supported: false}]",
            "",
        );
        let error =
            membership(&csv, &[group(&format!("status: {{namespaces: [{NAMESPACE}]}}"))]).unwrap_err();
        assert_eq!(error.reason(), Some(CsvReason::InvalidInstallModes));
    }

    #[test]
    fn the_operator_groups_service_account_and_upgrade_strategy_are_kept() {
        let csv = fixtures::small_csv(&modes(&["AllNamespaces"]), "");
        let group = fixtures::operator_group(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og}\n\
             spec: {serviceAccountName: installer, upgradeStrategy: {name: TechPreviewUnsafeFailForward}}\n\
             status: {namespaces: ['']}\n",
        );
        let membership = membership(&csv, &[group]).expect("fits");
        assert_eq!(membership.service_account.as_deref(), Some("installer"));
        assert!(membership.fail_forward);
    }

    // --- Strategy ---

    #[test]
    fn the_deployment_strategy_parses_and_lists_service_accounts_once() {
        let csv = fixtures::small_csv(
            &modes(&["OwnNamespace"]),
            "      clusterPermissions:\n      - serviceAccountName: demo\n        rules: []\n      - serviceAccountName: helper\n        rules: []",
        );
        let strategy = strategy(&csv).expect("a valid strategy");
        assert_eq!(strategy.deployments.len(), 1);
        assert_eq!(strategy.deployments[0].name, "demo");
        assert_eq!(
            strategy.deployments[0]
                .labels
                .get("app.kubernetes.io/name")
                .map(String::as_str),
            Some("demo")
        );
        assert_eq!(
            strategy.service_accounts(),
            vec!["demo".to_owned(), "helper".to_owned()]
        );
    }

    #[test]
    fn invalid_strategies_say_what_is_wrong() {
        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        csv.spec.install = NamedInstallStrategy::Machine(StrategyDetailsMachine {
            pool: "edge".to_owned(),
            hooks: MachineHooks {
                config_map: "demo-hooks".to_owned(),
            },
            config: None,
            hook_timeout_seconds: None,
            update_status_interval_seconds: None,
            privileged: false,
        });
        let machine = strategy(&csv).expect("the machine strategy is valid");
        assert!(
            machine.deployments.is_empty(),
            "a machine strategy builds no Deployment"
        );

        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        let details = csv.spec.install.deployment_mut().expect("details");
        details.deployments.push(details.deployments[0].clone());
        assert_eq!(
            strategy(&csv).unwrap_err().to_string(),
            "install strategy invalid: deployment demo is listed more than once"
        );

        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        csv.spec.install.deployment_mut().expect("details").deployments[0].spec["replicas"] = "many".into();
        let error = strategy(&csv).unwrap_err();
        assert!(error.0.starts_with("deployment demo: "), "{error}");
    }

    // --- Requirements ---

    fn needing(crds: &str) -> ClusterServiceVersion {
        fixtures::small_csv(
            &modes(&["OwnNamespace"]),
            &format!("  customresourcedefinitions:\n{crds}"),
        )
    }

    #[test]
    fn missing_unserved_and_unestablished_crds_are_unmet_and_listed() {
        let csv = needing(
            "    owned: [{name: widgets.example.com, version: v1, kind: Widget}]\n    required:\n    - {name: gadgets.example.com, version: v2, kind: Gadget}\n    - {name: gizmos.example.com, version: v1, kind: Gizmo}\n    - {name: widgets.example.com, version: v1, kind: Widget}",
        );
        let found = fixtures::found(
            vec![
                fixtures::crd("widgets.example.com", &["v1"], false),
                fixtures::crd("gadgets.example.com", &["v1"], true),
            ],
            vec![],
            &[NAMESPACE],
        );
        let requirements = requirements(&csv, &found);
        assert!(!requirements.met);
        let by_name = |name: &str| {
            requirements
                .statuses
                .iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("{name} listed"))
        };
        assert_eq!(
            by_name("widgets.example.com").status,
            StatusReason::PresentNotAvailable
        );
        assert_eq!(by_name("gadgets.example.com").status, StatusReason::NotPresent);
        assert_eq!(
            by_name("gadgets.example.com").message,
            "CRD version v2 is not served"
        );
        assert_eq!(by_name("gizmos.example.com").status, StatusReason::NotPresent);
        assert_eq!(
            requirements
                .statuses
                .iter()
                .filter(|s| s.name == "widgets.example.com")
                .count(),
            1,
            "a CRD both owned and required is listed once"
        );
        assert_eq!(
            requirements.unmet(),
            vec![
                "CustomResourceDefinition widgets.example.com",
                "CustomResourceDefinition gadgets.example.com",
                "CustomResourceDefinition gizmos.example.com",
            ]
        );
    }

    #[test]
    fn established_crds_are_met_and_missing_service_accounts_do_not_block() {
        let csv = needing("    required: [{name: widgets.example.com, version: v1, kind: Widget}]");
        let found = fixtures::found(
            vec![fixtures::crd("widgets.example.com", &["v1"], true)],
            vec![],
            &[NAMESPACE],
        );
        let requirements = requirements(&csv, &found);
        assert!(requirements.met, "{:#?}", requirements.statuses);
        let crd = &requirements.statuses[0];
        assert_eq!(
            (crd.kind.as_str(), crd.status),
            ("CustomResourceDefinition", StatusReason::Present)
        );
        assert_eq!(crd.uuid.as_deref(), Some("uid-widgets.example.com"));
        let account = &requirements.statuses[1];
        assert_eq!(
            (account.kind.as_str(), account.name.as_str()),
            ("ServiceAccount", "demo")
        );
        assert_eq!(account.status, StatusReason::NotPresent);

        let with_account = fixtures::found(
            vec![fixtures::crd("widgets.example.com", &["v1"], true)],
            vec![fixtures::service_account("demo")],
            &[NAMESPACE],
        );
        let requirements = super::requirements(&csv, &with_account);
        assert_eq!(requirements.statuses[1].status, StatusReason::Present);
    }

    #[test]
    fn a_cluster_older_than_min_kube_version_is_unmet() {
        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        csv.spec.min_kube_version = Some("1.40.0".to_owned());
        let found = fixtures::found(vec![], vec![], &[NAMESPACE]);
        let requirements = requirements(&csv, &found);
        assert!(!requirements.met);
        assert_eq!(requirements.statuses[0].status, StatusReason::PresentNotSatisfied);
        assert!(requirements.statuses[0].message.contains("1.40.0"));
        csv.spec.min_kube_version = Some("1.25".to_owned());
        assert!(super::requirements(&csv, &found).met);
    }

    #[test]
    fn native_apis_must_be_served() {
        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        csv.spec.native_apis = Some(vec![
            olm_api::v1alpha1::GroupVersionKind {
                group: String::new(),
                version: "v1".to_owned(),
                kind: "ConfigMap".to_owned(),
            },
            olm_api::v1alpha1::GroupVersionKind {
                group: "example.com".to_owned(),
                version: "v1".to_owned(),
                kind: "Gadget".to_owned(),
            },
        ]);
        let mut found = fixtures::found(vec![], vec![], &[NAMESPACE]);
        found
            .served_kinds
            .insert("v1".to_owned(), ["ConfigMap".to_owned()].into());
        found
            .served_kinds
            .insert("example.com/v1".to_owned(), BTreeSet::new());
        let requirements = requirements(&csv, &found);
        assert!(!requirements.met);
        let statuses: Vec<(&str, StatusReason)> = requirements
            .statuses
            .iter()
            .take(2)
            .map(|s| (s.name.as_str(), s.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("v1.", StatusReason::Present),
                ("v1.example.com", StatusReason::NotPresent)
            ]
        );
        assert_eq!(requirements.unmet(), vec!["Gadget v1.example.com"]);
    }

    // --- A real bundle ---

    #[test]
    fn a_corpus_csv_with_permissions_and_cluster_permissions_validates() {
        let csv = fixtures::corpus_csv(
            "bundles/limitador-operator/0.11.0/manifests/limitador-operator.clusterserviceversion.yaml",
        );
        let found = fixtures::found(
            vec![fixtures::crd(
                "limitadors.limitador.kuadrant.io",
                &["v1alpha1"],
                true,
            )],
            vec![],
            &[""],
        );
        let validation = validate(&csv, &found);
        let membership = validation
            .membership
            .expect("AllNamespaces fits an all-namespaces group");
        assert_eq!(membership.targets, Targets::All);
        let strategy = validation.strategy.expect("the strategy parses");
        assert_eq!(strategy.deployments.len(), 1);
        assert_eq!(strategy.permissions.len(), 1);
        assert_eq!(strategy.cluster_permissions.len(), 1);
        assert_eq!(
            strategy.service_accounts(),
            vec!["limitador-operator-controller-manager".to_owned()]
        );
        assert!(
            validation.requirements.met,
            "{:#?}",
            validation.requirements.statuses
        );
        let kinds: Vec<&str> = validation
            .requirements
            .statuses
            .iter()
            .map(|s| s.kind.as_str())
            .collect();
        assert_eq!(
            kinds,
            [
                "ClusterServiceVersion",
                "CustomResourceDefinition",
                "ServiceAccount"
            ]
        );

        // The same bundle in its own namespace only is refused, as OLM refuses it.
        let own = fixtures::found(vec![], vec![], &[NAMESPACE]);
        let error = validate(&csv, &own).membership.unwrap_err();
        assert_eq!(error.reason(), Some(CsvReason::UnsupportedOperatorGroup));
    }

    #[test]
    fn every_corpus_csv_with_a_deployment_strategy_parses() {
        let mut files = Vec::new();
        collect_csvs(&fixtures::corpus_dir().join("bundles"), &mut files);
        assert!(files.len() > 200, "the corpus has its CSVs ({})", files.len());
        for path in files {
            let csv: ClusterServiceVersion =
                olm_api::manifest::read_one(&path).unwrap_or_else(|e| panic!("{e}"));
            if let Err(error) = strategy(&csv) {
                panic!("{}: {error}", path.display());
            }
        }
    }

    fn collect_csvs(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                collect_csvs(&path, out);
            } else if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("clusterserviceversion.yaml"))
            {
                out.push(path);
            }
        }
    }
}
