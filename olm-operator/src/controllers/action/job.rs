//! The Job that runs an action of an operator installed as Deployments
//! (pure): which Deployment and container of the CSV's install strategy give
//! it its image, ServiceAccount and environment ([`target`]), and the Job
//! itself ([`build`]).
//!
//! The Job's one container runs the command the action declares
//! (`job.command`), with the parameters as JSON in the environment variable
//! [`PARAMS_ENV`]. It writes its results as `key=value` lines to its
//! termination message ([`RESULTS_PATH`], also in [`RESULTS_ENV`]), which the
//! controller reads back once the Job ends ([`super::job_end`]). The Job runs
//! once (`backoffLimit: 0`), at most for the Action's timeout
//! (`activeDeadlineSeconds`), where the Deployment's Pods may run (its node
//! selector, affinity and tolerations), and is owned by the Action, so that
//! it goes when the Action does.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::DeploymentSpec,
        batch::v1::{Job, JobSpec as K8sJobSpec},
        core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{Resource, ResourceExt};
use olm_api::{actions::JobSpec, model::Action, v1alpha1::ClusterServiceVersion};
use olm_runtime::effects::fnv1a;

/// The label on an action's Job and its Pod: the Action's name.
pub const ACTION_LABEL: &str = "olm-rs.dev/action";
/// The name of the Job's container.
pub const CONTAINER: &str = "action";
/// The environment variable that holds the parameters, as a JSON object.
pub const PARAMS_ENV: &str = "OLM_RS_ACTION_PARAMS";
/// The environment variable that holds the action's name.
pub const ACTION_ENV: &str = "OLM_RS_ACTION";
/// The environment variable that holds the path the results are written to.
pub const RESULTS_ENV: &str = "OLM_RS_ACTION_RESULTS";
/// Where the container writes its results, `key=value` a line: its
/// termination message.
pub const RESULTS_PATH: &str = "/dev/termination-log";
/// How long a Job may run when the Action sets no timeout, in seconds.
pub const DEFAULT_TIMEOUT_SECONDS: i64 = 600;
/// The longest name of a Job (its Pods carry it in a label).
const MAX_NAME: usize = 63;

/// What an action's Job is made from: a Deployment of the CSV's install
/// strategy (the operator's one unit is named after it), its Pod spec and
/// the container that gives the image and environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The Deployment's name: the unit.
    pub deployment: String,
    /// Its Pod spec.
    pub pod: PodSpec,
    /// The chosen container.
    pub container: Container,
}

/// Why an action's `job` does not fit the CSV's install strategy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// The install strategy has no Deployment.
    #[error("CSV {csv} installs no Deployment to run the action's Job from")]
    NoDeployments {
        /// The CSV.
        csv: String,
    },
    /// The named Deployment is not in the install strategy.
    #[error(
        "CSV {csv} installs no Deployment {deployment} (its Deployments: {known}); fix job.deployment of the action"
    )]
    UnknownDeployment {
        /// The CSV.
        csv: String,
        /// The name the action gives.
        deployment: String,
        /// The Deployments it installs.
        known: String,
    },
    /// The Deployment's spec is not an `apps/v1` DeploymentSpec.
    #[error("CSV {csv}: the spec of Deployment {deployment} cannot be read: {cause}")]
    BadSpec {
        /// The CSV.
        csv: String,
        /// The Deployment.
        deployment: String,
        /// What is wrong.
        cause: String,
    },
    /// The named container is not in the Deployment, or it has none.
    #[error(
        "Deployment {deployment} of CSV {csv} has no container {container}; fix job.container of the action"
    )]
    UnknownContainer {
        /// The CSV.
        csv: String,
        /// The Deployment.
        deployment: String,
        /// The name the action gives, or `(any)` when it gives none.
        container: String,
    },
}

/// The Deployment and container of `csv`'s install strategy that `declared`
/// names (by default the first of each).
pub fn target(csv: &ClusterServiceVersion, declared: &JobSpec) -> Result<Target, TargetError> {
    let name = csv.name_any();
    let deployments = csv
        .spec
        .install
        .deployment()
        .map(|d| d.deployments.as_slice())
        .unwrap_or_default();
    let chosen = match &declared.deployment {
        Some(wanted) => deployments.iter().find(|d| &d.name == wanted).ok_or_else(|| {
            let known: Vec<&str> = deployments.iter().map(|d| d.name.as_str()).collect();
            TargetError::UnknownDeployment {
                csv: name.clone(),
                deployment: wanted.clone(),
                known: known.join(", "),
            }
        })?,
        None => deployments
            .first()
            .ok_or_else(|| TargetError::NoDeployments { csv: name.clone() })?,
    };
    let spec: DeploymentSpec =
        serde_json::from_value(chosen.spec.clone()).map_err(|e| TargetError::BadSpec {
            csv: name.clone(),
            deployment: chosen.name.clone(),
            cause: e.to_string(),
        })?;
    let pod = spec.template.spec.unwrap_or_default();
    let container = match &declared.container {
        Some(wanted) => pod.containers.iter().find(|c| &c.name == wanted),
        None => pod.containers.first(),
    }
    .cloned()
    .ok_or_else(|| TargetError::UnknownContainer {
        csv: name.clone(),
        deployment: chosen.name.clone(),
        container: declared.container.clone().unwrap_or_else(|| "(any)".to_owned()),
    })?;
    Ok(Target {
        deployment: chosen.name.clone(),
        pod,
        container,
    })
}

/// The name of Action `action`'s Job: the Action's own, or, when that is too
/// long for a label, its start and a hash of the whole.
pub fn job_name(action: &str) -> String {
    if action.len() <= MAX_NAME {
        return action.to_owned();
    }
    let hash = fnv1a(action.as_bytes());
    let hash = &hash[..hash.len().min(8)];
    let keep = MAX_NAME - hash.len() - 1;
    let start = action[..keep].trim_end_matches(['-', '.']);
    format!("{start}-{hash}")
}

/// The Job that runs `action` from `target` with `declared`'s command, or
/// `None` when the Action has no UID to own it by (a stored one always has).
pub fn build(action: &Action, target: &Target, declared: &JobSpec) -> Option<Job> {
    let owner = action.controller_owner_ref(&())?;
    let labels = BTreeMap::from([(ACTION_LABEL.to_owned(), action.name_any())]);
    let params = serde_json::Value::Object(action.spec.params.clone().unwrap_or_default()).to_string();
    let mut env = target.container.env.clone().unwrap_or_default();
    let ours = [
        (ACTION_ENV, action.spec.action.clone()),
        (PARAMS_ENV, params),
        (RESULTS_ENV, RESULTS_PATH.to_owned()),
    ];
    env.retain(|e| !ours.iter().any(|(name, _)| e.name == *name));
    env.extend(ours.into_iter().map(|(name, value)| EnvVar {
        name: name.to_owned(),
        value: Some(value),
        value_from: None,
    }));
    let source = &target.container;
    let container = Container {
        name: CONTAINER.to_owned(),
        image: source.image.clone(),
        image_pull_policy: source.image_pull_policy.clone(),
        command: Some(declared.command.clone()),
        env: Some(env),
        env_from: source.env_from.clone(),
        resources: source.resources.clone(),
        security_context: source.security_context.clone(),
        working_dir: source.working_dir.clone(),
        termination_message_path: Some(RESULTS_PATH.to_owned()),
        termination_message_policy: Some("File".to_owned()),
        ..Container::default()
    };
    let pod = &target.pod;
    let spec = PodSpec {
        restart_policy: Some("Never".to_owned()),
        service_account_name: pod
            .service_account_name
            .clone()
            .or_else(|| pod.service_account.clone()),
        image_pull_secrets: pod.image_pull_secrets.clone(),
        node_selector: pod.node_selector.clone(),
        affinity: pod.affinity.clone(),
        tolerations: pod.tolerations.clone(),
        security_context: pod.security_context.clone(),
        priority_class_name: pod.priority_class_name.clone(),
        containers: vec![container],
        ..PodSpec::default()
    };
    Some(Job {
        metadata: ObjectMeta {
            name: Some(job_name(&action.name_any())),
            namespace: action.namespace(),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(K8sJobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(timeout_seconds(action)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(spec),
            },
            ..K8sJobSpec::default()
        }),
        status: None,
    })
}

/// How long `action`'s Job may run, in seconds.
pub fn timeout_seconds(action: &Action) -> i64 {
    action.spec.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS)
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
