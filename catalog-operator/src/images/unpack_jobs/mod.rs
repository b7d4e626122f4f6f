//! Unpacking bundle images in a Job, OLM's way, for catalogs whose bundle
//! images only the nodes can reach (annotation
//! `olm-rs.dev/bundle-unpack-method: Job` on the CatalogSource; the default is
//! pulling in process, [`crate::images::bundles`]).
//!
//! The objects ([`objects`]) match OLM's: a ConfigMap named after the image in
//! the CatalogSource's namespace, a Job whose Pod copies the bundle out of the
//! image and writes it into the ConfigMap ([`configmap`]), and the RBAC that
//! lets it. The extractor is catalog-operator itself (`catalog-operator
//! unpack`, whose steps are [`steps`]).
//!
//! [`unpack`] is called on every sync of a Subscription that needs the bundle
//! and never waits for the Job: it answers [`JobState::Pending`] (the
//! Subscription shows BundleUnpacking with the Job's state) until the bundle is
//! in the ConfigMap. The Job's active deadline is the unpack timeout; a failed
//! Job is tried again once the OperatorGroup's minimum retry interval has
//! passed, or when it expires (OLM keeps finished Jobs 5 minutes).
//!
//! What it reads comes from the shared stores ([`JobStores`]): the unpack Jobs
//! and the unpack ConfigMaps, whole (the bundle is the ConfigMap's data), both
//! watched only where labelled [`keys::REF`]. A store may lag; the decisions
//! allow for it:
//! - each attempt's Job has a name known before its create (the unpack's name,
//!   then that name and the attempt number, [`objects::attempt_name`], the
//!   attempt following the Jobs seen), so a sync that does not see the last
//!   Job yet asks for the same name, is refused (HTTP 409) and waits for the
//!   watch, instead of starting a second Job;
//! - a completed Job is said to have written no bundle only once its whole
//!   timeout has passed and [`BUNDLE_GRACE`] since its completion, time for the
//!   ConfigMap's watch to deliver the write that came before the completion. A
//!   verdict still wrong is undone by the next sync, which reads the bundle
//!   from the store before anything else.
//!
//! The one live read left is the LIST of a running Job's Pods, only for the
//! message ([`pod_waits`]).

pub mod configmap;
#[cfg(test)]
mod configmap_props;
pub mod objects;
pub mod steps;

use std::time::Duration;

use k8s_openapi::{
    api::{
        batch::v1::Job,
        core::v1::{ConfigMap, Pod, ServiceAccount},
        rbac::v1::{Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::ListParams,
    runtime::reflector::{ObjectRef, Store},
};
use olm_api::{labels::unpack as keys, v1alpha1::CatalogSource};
use olm_catalog::Bundle;
use olm_runtime::{
    apply::{WriteError, Writer},
    reflector::Synced,
};

use crate::images::bundles::UnpackError;
use objects::{Owner, Unpack};

/// How a catalog's bundle images are unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Method {
    /// Pulled by catalog-operator, in process.
    #[default]
    Pull,
    /// Pulled by a node, in a Job.
    Job,
}

impl Method {
    /// The method `source` asks for; an unknown value is the default, with a warning.
    pub fn of(source: &CatalogSource) -> Method {
        match source.annotations().get(keys::METHOD).map(String::as_str) {
            None | Some("Pull") => Method::Pull,
            Some("Job") => Method::Job,
            Some(other) => {
                tracing::warn!(
                    catalog_source = %source.name_any(),
                    value = other,
                    "unknown {}: pulling in process (the values are Pull and Job)",
                    keys::METHOD
                );
                Method::Pull
            }
        }
    }
}

/// Where an unpack in a Job stands.
#[derive(Debug)]
pub enum JobState {
    /// The bundle is in the ConfigMap.
    Unpacked(Bundle),
    /// Not yet: what it waits for.
    Pending(String),
}

/// What an unpack needs besides the CatalogSource and the image.
#[derive(Clone, Debug)]
pub struct JobSettings {
    /// The image with the extractor (catalog-operator's own).
    pub extractor_image: String,
    /// The Job's active deadline (the unpack timeout).
    pub timeout: Duration,
    /// The least time between a failed Job and the next attempt.
    pub min_retry: Option<Duration>,
}

/// How long after a Job completed its ConfigMap's watch is given to show the
/// bundle the Job wrote before the Job is said to have written none.
pub const BUNDLE_GRACE: Duration = Duration::from_secs(10);

/// The shared stores an unpack reads: the Jobs and ConfigMaps labelled
/// [`keys::REF`] (no other Job or ConfigMap is cached), whole.
#[derive(Clone)]
pub struct JobStores {
    /// The unpack Jobs.
    pub jobs: Store<Job>,
    /// The unpack ConfigMaps, with the bundles in their data.
    pub config_maps: Store<ConfigMap>,
    /// Whether `jobs` holds a complete list.
    pub jobs_synced: Synced,
    /// Whether `config_maps` holds a complete list.
    pub config_maps_synced: Synced,
}

impl JobStores {
    /// Whether both stores hold a complete list (an empty store before then
    /// would read as "no Job, no bundle").
    pub fn synced(&self) -> bool {
        self.jobs_synced.get() && self.config_maps_synced.get()
    }

    /// The Jobs of the unpack named `name` in `namespace`.
    fn jobs_of(&self, namespace: &str, name: &str) -> Vec<Job> {
        self.jobs
            .state()
            .into_iter()
            .filter(|job| {
                job.metadata.namespace.as_deref() == Some(namespace)
                    && job.labels().get(keys::REF).map(String::as_str) == Some(name)
            })
            .map(|job| job.as_ref().clone())
            .collect()
    }

    /// Synced stores holding `jobs` and `config_maps` (for tests).
    #[cfg(test)]
    pub fn listed(jobs: Vec<Job>, config_maps: Vec<ConfigMap>) -> JobStores {
        let synced = || {
            let synced = Synced::new();
            synced.set();
            synced
        };
        JobStores {
            jobs: olm_testkit::stores::listed(jobs),
            config_maps: olm_testkit::stores::listed(config_maps),
            jobs_synced: synced(),
            config_maps_synced: synced(),
        }
    }
}

fn write_error(image: &str) -> impl FnOnce(WriteError) -> UnpackError + '_ {
    move |error| UnpackError::Cluster {
        image: image.to_owned(),
        cause: crate::error_chain(&error),
    }
}

fn owner_of<K: Resource<DynamicType = ()>>(object: &K) -> Owner {
    Owner {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: object.meta().name.clone().unwrap_or_default(),
        uid: object.meta().uid.clone().unwrap_or_default(),
    }
}

/// The condition of type `kind` of `job`, when True.
fn condition<'a>(job: &'a Job, kind: &str) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
}

/// The Job that speaks for the unpack (pure): the newest that has not failed,
/// else the one that failed last.
pub fn latest(jobs: &[Job]) -> Option<&Job> {
    let failed_at = |job: &Job| condition(job, "Failed").and_then(|c| c.last_transition_time.clone());
    let created = |job: &Job| job.metadata.creation_timestamp.clone();
    jobs.iter()
        .filter(|j| condition(j, "Failed").is_none())
        .max_by_key(|j| created(j))
        .or_else(|| jobs.iter().max_by_key(|j| failed_at(j)))
}

/// Why a Pod of `job` has not started, from its waiting init containers (e.g.
/// an image that cannot be pulled).
async fn pod_waits(client: &Client, job: &Job) -> String {
    // A live LIST, by the Job's label, only while a Job runs and only for the
    // message: no store of unpack Pods exists (the Pod store holds registry Pods).
    let namespace = job.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let params = ListParams::default().labels(&format!("job-name={}", job.name_any()));
    let Ok(list) = pods.list(&params).await else {
        return String::new();
    };
    let mut waits = Vec::new();
    for pod in &list.items {
        let statuses = pod
            .status
            .iter()
            .flat_map(|s| s.init_container_statuses.iter().flatten());
        for status in statuses {
            if let Some(waiting) = status.state.as_ref().and_then(|s| s.waiting.as_ref()) {
                waits.push(format!(
                    "Pod {} container {} waits: {} {}",
                    pod.name_any(),
                    status.name,
                    waiting.reason.as_deref().unwrap_or_default(),
                    waiting.message.as_deref().unwrap_or_default()
                ));
            }
        }
    }
    waits.join("; ")
}

/// Reads the bundle of `image` from its ConfigMap, when it is there.
fn bundle_in(config_map: &ConfigMap, image: &str) -> Result<Option<Bundle>, UnpackError> {
    let holds_image = config_map
        .annotations()
        .get(keys::SOURCE_IMAGE)
        .is_none_or(|i| i == image);
    if !holds_image {
        return Ok(None);
    }
    let scratch = tempfile::tempdir().map_err(|e| UnpackError::NotABundle {
        image: image.to_owned(),
        cause: format!("no temporary directory to read it into: {e}"),
    })?;
    configmap::read(config_map, image, scratch.path()).map_err(|e| UnpackError::NotABundle {
        image: image.to_owned(),
        cause: format!(
            "ConfigMap {}/{}: {e}",
            config_map.namespace().unwrap_or_default(),
            config_map.name_any()
        ),
    })
}

/// Applies the unpack's ConfigMap, ServiceAccount, Role and RoleBinding before
/// a Job is created; the ConfigMap, as the owner of the rest and of the Job.
async fn ensure_objects(
    client: &Client,
    writer: &Writer,
    source: &CatalogSource,
    request: &Unpack,
) -> Result<Owner, UnpackError> {
    let (name, namespace, image) = (
        request.name.as_str(),
        request.namespace.as_str(),
        request.image.as_str(),
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let config_map = writer
        .apply(
            &config_maps,
            name,
            &objects::config_map(request, &owner_of(source)),
        )
        .await
        .map_err(write_error(image))?;
    let owner = owner_of(&config_map);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    writer
        .apply(&accounts, name, &objects::service_account(request, &owner))
        .await
        .map_err(write_error(image))?;
    let roles: Api<Role> = Api::namespaced(client.clone(), namespace);
    writer
        .apply(&roles, name, &objects::role(request, &owner))
        .await
        .map_err(write_error(image))?;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    writer
        .apply(&bindings, name, &objects::role_binding(request, &owner))
        .await
        .map_err(write_error(image))?;
    Ok(owner)
}

/// Advances the unpack of `image` for a bundle of `source` by one step, from
/// what `stores` show.
pub async fn unpack(
    client: &Client,
    writer: &Writer,
    stores: &JobStores,
    source: &CatalogSource,
    image: &str,
    settings: &JobSettings,
) -> Result<JobState, UnpackError> {
    let namespace = source.namespace().unwrap_or_default();
    let request = Unpack {
        name: objects::unpack_name(image),
        namespace: namespace.clone(),
        image: image.to_owned(),
        extractor_image: settings.extractor_image.clone(),
        pull_secrets: source.spec.secrets.clone().unwrap_or_default(),
        timeout: Some(settings.timeout),
    };
    let name = request.name.as_str();
    if !stores.synced() {
        return Ok(JobState::Pending(format!(
            "waiting for the unpack Jobs and ConfigMaps to be listed before unpacking bundle image {image}"
        )));
    }
    // Unpacked before (by this replica or another): no Job needed.
    if let Some(bundle) = read_bundle(stores, &request)? {
        return Ok(JobState::Unpacked(bundle));
    }
    if !writer.leadership().is_leader() {
        return Ok(JobState::Pending(format!(
            "the leading replica unpacks bundle image {image} in Job {namespace}/{name}"
        )));
    }
    let jobs = stores.jobs_of(&namespace, name);
    let job = latest(&jobs);
    let mut step = next_step(job, settings, Timestamp::now());
    if let JobStep::NoBundle { overdue } = step {
        let message = format!(
            "the Job completed but wrote no bundle into ConfigMap {namespace}/{name} within the unpack timeout of {:?}",
            settings.timeout
        );
        step = after_failure("NoBundle".to_owned(), message, overdue, settings.min_retry);
    }
    let job_name = job.map(ResourceExt::name_any).unwrap_or_default();
    match step {
        JobStep::Create => start_job(client, writer, source, &request, 1).await,
        JobStep::Retry => start_job(client, writer, source, &request, next_attempt(name, &jobs)).await,
        JobStep::WaitForBundle => Ok(JobState::Pending(format!(
            "unpack Job {namespace}/{job_name} completed; waiting for bundle image {image} in ConfigMap {namespace}/{name}"
        ))),
        JobStep::Fail { reason, message } => Err(UnpackError::JobFailed {
            image: image.to_owned(),
            namespace: namespace.clone(),
            job: job_name,
            reason,
            message,
        }),
        JobStep::Wait | JobStep::NoBundle { .. } => {
            let waits = match job {
                Some(job) => pod_waits(client, job).await,
                None => String::new(),
            };
            Ok(JobState::Pending(if waits.is_empty() {
                format!("unpacking bundle image {image} in Job {namespace}/{job_name}")
            } else {
                format!("unpacking bundle image {image} in Job {namespace}/{job_name}: {waits}")
            }))
        }
    }
}

/// The attempt after the last of `jobs`, the Jobs of the unpack named `name`
/// (pure): one more than the highest attempt their names tell, at least 2.
fn next_attempt(name: &str, jobs: &[Job]) -> u32 {
    let last = jobs
        .iter()
        .filter_map(|job| objects::attempt_of(name, &job.name_any()))
        .max()
        .unwrap_or(1);
    last.saturating_add(1).max(2)
}

/// Applies the unpack's objects and creates the Job of attempt `attempt` (1
/// for the first). A Job of that name that exists already (HTTP 409) was
/// created by an earlier sync whose create the Job store does not show yet:
/// the unpack waits for the watch.
async fn start_job(
    client: &Client,
    writer: &Writer,
    source: &CatalogSource,
    request: &Unpack,
    attempt: u32,
) -> Result<JobState, UnpackError> {
    let (namespace, image) = (request.namespace.as_str(), request.image.as_str());
    let owner = ensure_objects(client, writer, source, request).await?;
    let (job, again) = match attempt {
        0 | 1 => (objects::job(request, &owner), ""),
        _ => (objects::retry_job(request, &owner, attempt), " again"),
    };
    let job_name = job.name_any();
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    match writer.create(&jobs, &job).await {
        Ok(_) => Ok(JobState::Pending(format!(
            "unpacking bundle image {image}{again} in Job {namespace}/{job_name}"
        ))),
        Err(WriteError::Create {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 409 => Ok(JobState::Pending(format!(
            "unpacking bundle image {image} in Job {namespace}/{job_name}, created before and not yet watched"
        ))),
        Err(error) => Err(write_error(image)(error)),
    }
}

/// The bundle of the unpack's image in its ConfigMap in the store, when it is
/// there.
fn read_bundle(stores: &JobStores, request: &Unpack) -> Result<Option<Bundle>, UnpackError> {
    let reference = ObjectRef::<ConfigMap>::new(&request.name).within(&request.namespace);
    let Some(config_map) = stores.config_maps.get(&reference) else {
        return Ok(None);
    };
    bundle_in(&config_map, &request.image)
}

/// What to do about an unpack whose bundle is not in its ConfigMap yet.
#[derive(Debug, PartialEq)]
enum JobStep {
    /// No Job yet: create one.
    Create,
    /// The Job runs: wait for it.
    Wait,
    /// The Job completed, not long enough ago to call its bundle missing:
    /// wait for its bundle in the ConfigMap.
    WaitForBundle,
    /// The Job completed and wrote no bundle the store shows, though its whole
    /// timeout and [`BUNDLE_GRACE`] since its completion have passed, this much
    /// longer ago: a failure.
    NoBundle {
        /// How long past the later of the two.
        overdue: Duration,
    },
    /// The Job failed long enough ago: start a new one.
    Retry,
    /// The Job failed: report it.
    Fail {
        /// The Job's reason.
        reason: String,
        /// The Job's message.
        message: String,
    },
}

/// The next step for the latest unpack Job `job`, at `now` (pure).
fn next_step(job: Option<&Job>, settings: &JobSettings, now: Timestamp) -> JobStep {
    let Some(job) = job else {
        return JobStep::Create;
    };
    let since = |time: Option<&Time>| {
        time.map(|t| Duration::try_from(now.duration_since(t.0)).unwrap_or_default())
            .unwrap_or_default()
    };
    match (condition(job, "Failed"), condition(job, "Complete")) {
        (Some(failed), _) => after_failure(
            failed.reason.clone().unwrap_or_default(),
            failed.message.clone().unwrap_or_default(),
            since(failed.last_transition_time.as_ref()),
            settings.min_retry,
        ),
        // Its bundle is not in the ConfigMap the store showed.
        (None, Some(complete)) => {
            let created = job.metadata.creation_timestamp.as_ref();
            let completed = job
                .status
                .as_ref()
                .and_then(|s| s.completion_time.as_ref())
                .or(complete.last_transition_time.as_ref())
                .or(created);
            let past_timeout = since(created).checked_sub(settings.timeout);
            let past_grace = since(completed).checked_sub(BUNDLE_GRACE);
            match past_timeout.zip(past_grace) {
                Some((timeout, grace)) if !timeout.is_zero() && !grace.is_zero() => JobStep::NoBundle {
                    overdue: timeout.min(grace),
                },
                _ => JobStep::WaitForBundle,
            }
        }
        (None, None) => JobStep::Wait,
    }
}

/// After a failure `failed_for` ago: a new attempt once `min_retry` has passed
/// (never without one), else the failure.
fn after_failure(
    reason: String,
    message: String,
    failed_for: Duration,
    min_retry: Option<Duration>,
) -> JobStep {
    if min_retry.is_some_and(|interval| failed_for >= interval) {
        JobStep::Retry
    } else {
        JobStep::Fail { reason, message }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use kube::api::ObjectMeta;

    use super::*;

    fn job(name: &str, created: i64, failed_at: Option<i64>) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                creation_timestamp: Some(Time(Timestamp::from_second(created).unwrap())),
                ..ObjectMeta::default()
            },
            status: failed_at.map(|at| JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: "Failed".to_owned(),
                    status: "True".to_owned(),
                    last_transition_time: Some(Time(Timestamp::from_second(at).unwrap())),
                    ..JobCondition::default()
                }]),
                ..JobStatus::default()
            }),
            ..Job::default()
        }
    }

    /// What to do next, by what the latest Job says and how long ago (table).
    #[test]
    fn the_next_step_follows_the_latest_job() {
        let settings = |min_retry: Option<u64>| JobSettings {
            extractor_image: "catalog-operator".into(),
            timeout: Duration::from_secs(600),
            min_retry: min_retry.map(Duration::from_secs),
        };
        let completed_at = |created: i64, done: Option<i64>| {
            let mut job = job("j", created, None);
            job.status = Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: "Complete".to_owned(),
                    status: "True".to_owned(),
                    ..JobCondition::default()
                }]),
                completion_time: done.map(|at| Time(Timestamp::from_second(at).unwrap())),
                ..JobStatus::default()
            });
            job
        };
        let completed = |created: i64| completed_at(created, None);
        let fail = || JobStep::Fail {
            reason: String::new(),
            message: String::new(),
        };
        let now = Timestamp::from_second(10_000).unwrap();
        let cases: Vec<(&str, Option<Job>, Option<u64>, JobStep)> = vec![
            ("no job", None, None, JobStep::Create),
            ("running", Some(job("j", 9_000, None)), None, JobStep::Wait),
            ("failed, no retries", Some(job("j", 1, Some(2))), None, fail()),
            (
                "failed recently",
                Some(job("j", 1, Some(9_990))),
                Some(60),
                fail(),
            ),
            (
                "failed long ago",
                Some(job("j", 1, Some(9_000))),
                Some(60),
                JobStep::Retry,
            ),
            (
                "completed recently",
                Some(completed(9_500)),
                None,
                JobStep::WaitForBundle,
            ),
            (
                "completed past the timeout",
                Some(completed(9_000)),
                None,
                JobStep::NoBundle {
                    overdue: Duration::from_secs(400),
                },
            ),
            (
                "past the timeout, completed just now: the ConfigMap's watch may lag",
                Some(completed_at(9_000, Some(9_995))),
                None,
                JobStep::WaitForBundle,
            ),
            (
                "past the timeout, completed past the grace",
                Some(completed_at(9_000, Some(9_980))),
                None,
                JobStep::NoBundle {
                    overdue: Duration::from_secs(10),
                },
            ),
            (
                "completed long ago, within the timeout",
                Some(completed_at(9_500, Some(9_501))),
                None,
                JobStep::WaitForBundle,
            ),
        ];
        for (case, job, min_retry, want) in cases {
            assert_eq!(next_step(job.as_ref(), &settings(min_retry), now), want, "{case}");
        }
    }

    #[test]
    fn a_bundle_missing_past_the_timeout_is_retried_or_reported() {
        let step = |min_retry: Option<u64>, overdue: u64| {
            after_failure(
                "NoBundle".into(),
                "no bundle".into(),
                Duration::from_secs(overdue),
                min_retry.map(Duration::from_secs),
            )
        };
        assert_eq!(step(Some(60), 61), JobStep::Retry);
        assert!(matches!(step(Some(60), 59), JobStep::Fail { reason, .. } if reason == "NoBundle"));
        assert!(matches!(step(None, 1_000), JobStep::Fail { .. }));
    }

    #[test]
    fn a_retry_follows_the_highest_attempt_seen() {
        let name = objects::unpack_name("reg/bundle:1");
        let named = |n: &str| job(n, 1, Some(2));
        assert_eq!(next_attempt(&name, &[]), 2);
        assert_eq!(next_attempt(&name, &[named(&name)]), 2);
        let third = objects::attempt_name(&name, 3);
        assert_eq!(
            next_attempt(&name, &[named(&name), named(&third)]),
            4,
            "the first attempt may have expired or not"
        );
        assert_eq!(next_attempt(&name, &[named(&third)]), 4);
        assert_eq!(
            next_attempt(&name, &[named("generated-x7k2p")]),
            2,
            "a Job named otherwise counts as the first"
        );
    }

    #[test]
    fn the_jobs_of_an_unpack_are_those_of_its_label_and_namespace() {
        let labelled = |name: &str, namespace: &str, unpack: &str| {
            let mut job = job(name, 1, None);
            job.metadata.namespace = Some(namespace.to_owned());
            job.metadata.labels = Some([(keys::REF.to_owned(), unpack.to_owned())].into());
            job
        };
        let stores = JobStores::listed(
            vec![
                labelled("a", "olm", "u"),
                labelled("b", "olm", "v"),
                labelled("c", "other", "u"),
            ],
            Vec::new(),
        );
        let names: Vec<String> = stores.jobs_of("olm", "u").iter().map(|j| j.name_any()).collect();
        assert_eq!(names, ["a"]);
        assert!(stores.synced());
    }

    #[test]
    fn the_newest_job_that_did_not_fail_speaks() {
        let jobs = [job("a", 1, Some(5)), job("b", 3, None), job("c", 2, None)];
        assert_eq!(latest(&jobs).unwrap().name_any(), "b");
        let failed = [job("a", 1, Some(5)), job("b", 3, Some(9))];
        assert_eq!(latest(&failed).unwrap().name_any(), "b");
        assert!(latest(&[]).is_none());
    }

    #[test]
    fn the_method_is_an_annotation_of_the_catalog_source() {
        let mut source: CatalogSource = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "CatalogSource",
            "metadata": {"name": "c", "namespace": "olm"},
            "spec": {"sourceType": "grpc", "image": "reg/catalog:latest"}
        }))
        .unwrap();
        assert_eq!(Method::of(&source), Method::Pull);
        source
            .annotations_mut()
            .insert(keys::METHOD.to_owned(), "Job".to_owned());
        assert_eq!(Method::of(&source), Method::Job);
        source
            .annotations_mut()
            .insert(keys::METHOD.to_owned(), "job".to_owned());
        assert_eq!(
            Method::of(&source),
            Method::Pull,
            "values are exact, as OLM's enums"
        );
    }
}
