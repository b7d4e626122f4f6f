//! Completing a resolved bundle from its bundle image when its catalog carries
//! only its metadata: pulled in process ([`crate::images::bundles`]) with the pull
//! secrets of its catalog ([`crate::images::pull_secrets`]), or unpacked by a Job
//! ([`crate::images::unpack_jobs`]).
//!
//! OLM's OperatorGroup annotations apply, from the OperatorGroup of the
//! Subscription's namespace ([`policy_of`], which the Subscription controller
//! gives it from its OperatorGroup store):
//! - `operatorframework.io/bundle-unpack-timeout` (a Go duration, default 10m):
//!   an unpack that takes longer fails with BundleUnpackFailed;
//! - `operatorframework.io/bundle-unpack-min-retry-interval`: after a failure,
//!   the image is not pulled again before this interval has passed (without
//!   it, a failed unpack is retried with the controller's backoff).
//!
//! While an image is pulled, the caller is told first (the Subscription
//! controller sets condition `BundleUnpacking` True, reason
//! `UnpackingInProgress`, on the Subscriptions of the plan).
//!
//! A CatalogSource annotated `olm-rs.dev/bundle-unpack-method: Job` has its
//! bundle images unpacked by a Job instead: each sync advances the Job by a step
//! and, until the bundle is there, the plan waits with BundleUnpacking True
//! saying what the Job waits for.

use std::time::Duration;

use kube::{Client, api::ObjectMeta};
use olm_api::v1alpha1::CatalogSource;
use olm_catalog::Bundle;
use olm_resolver::model::CatalogId;
use olm_runtime::apply::Writer;

use crate::{
    go_duration::parse_go_duration,
    images::bundles::{BundleImages, UnpackError},
    images::unpack_jobs::{self, JobSettings, JobState, JobStores, Method},
};

/// OLM's annotation with the time an unpack may take.
pub const TIMEOUT_ANNOTATION: &str = "operatorframework.io/bundle-unpack-timeout";
/// OLM's annotation with the least time between two attempts at a failed unpack.
pub const MIN_RETRY_ANNOTATION: &str = "operatorframework.io/bundle-unpack-min-retry-interval";
/// The unpack timeout when the OperatorGroup sets none (OLM's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// How bundle images are unpacked in one namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UnpackPolicy {
    /// The time an unpack may take.
    pub timeout: Duration,
    /// The least time between attempts at a failed unpack, if set.
    pub min_retry: Option<Duration>,
    /// The OperatorGroup they come from, for messages.
    pub operator_group: Option<String>,
}

/// The annotations [`policy_of`] reads.
pub const POLICY_ANNOTATIONS: [&str; 2] = [TIMEOUT_ANNOTATION, MIN_RETRY_ANNOTATION];

/// The policy the annotations of `group` (the metadata of the namespace's one
/// OperatorGroup) set (pure); invalid values are ignored with a warning, as
/// OLM ignores them.
pub fn policy_of(group: Option<&ObjectMeta>) -> UnpackPolicy {
    let annotation = |key: &str| {
        let value = group?.annotations.as_ref()?.get(key)?;
        match parse_go_duration(value) {
            Ok(duration) => Some(duration),
            Err(error) => {
                tracing::warn!(annotation = key, value, %error, "ignoring an invalid unpack annotation");
                None
            }
        }
    };
    UnpackPolicy {
        timeout: annotation(TIMEOUT_ANNOTATION)
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_TIMEOUT),
        min_retry: annotation(MIN_RETRY_ANNOTATION).filter(|d| !d.is_zero()),
        operator_group: group.and_then(|g| g.name.clone()),
    }
}

/// Where a bundle of one catalog is unpacked from, and with what.
pub struct Unpack<'a> {
    /// A client for the pull secrets and the unpack Job.
    pub client: &'a Client,
    /// The writer of the unpack Job's objects.
    pub writer: &'a Writer,
    /// The stores of the unpack Jobs and their ConfigMaps.
    pub stores: &'a JobStores,
    /// The catalog the bundle comes from.
    pub catalog: &'a CatalogId,
    /// Its CatalogSource, if the store has it (its pull secrets, its unpack method).
    pub source: Option<&'a CatalogSource>,
    /// The image of the unpack Job's `extract` container.
    pub extractor_image: &'a str,
    /// The unpack policy of the namespace the bundle is planned for.
    pub policy: &'a UnpackPolicy,
}

/// What [`prepare`] found.
#[derive(Debug)]
pub enum Prepared {
    /// The bundle, complete, or why it is not (yet).
    Done(Result<Bundle, UnpackError>),
    /// The bundle's image is to be pulled in process: [`pull`] does it.
    Pull(Pull),
    /// The bundle's image is unpacked by a Job: [`advance_job`] advances it.
    Job(Box<ByJob>),
}

/// A bundle image unpacked by the Job of its catalog, with what the Job needs.
#[derive(Debug)]
pub struct ByJob {
    /// The CatalogSource asking for Jobs.
    source: CatalogSource,
    /// The image.
    image: String,
    /// The unpack policy of the namespace.
    policy: UnpackPolicy,
}

impl ByJob {
    /// The image to unpack.
    pub fn image(&self) -> &str {
        &self.image
    }
}

/// A bundle image to pull in process, with what the pull needs.
#[derive(Debug)]
pub struct Pull {
    /// The bundle, without its manifests.
    bundle: Bundle,
    /// The unpack policy of the namespace.
    policy: UnpackPolicy,
    /// The pull secrets of the catalog.
    secrets: Vec<String>,
}

impl Pull {
    /// The image to pull.
    pub fn image(&self) -> &str {
        &self.bundle.image
    }
}

/// `bundle` with its manifests if it needs no unpack now: its catalog carries
/// them, or its image was read before; else the pull to make, or the Job to
/// advance.
pub async fn prepare(unpack: &Unpack<'_>, bundle: Bundle) -> Prepared {
    if !crate::images::bundles::needs_unpacking(&bundle) {
        return Prepared::Done(Ok(bundle));
    }
    let images = BundleImages::global();
    let image = bundle.image.clone();
    if images.is_cached(&image) {
        return Prepared::Done(images.complete(unpack.client, unpack.catalog, &[], bundle).await);
    }
    let policy = unpack.policy.clone();
    if let Some(source) = unpack.source.filter(|s| Method::of(s) == Method::Job) {
        return Prepared::Job(Box::new(ByJob {
            source: source.clone(),
            image,
            policy,
        }));
    }
    if let Some(error) = images.retry_wait(&image, policy.min_retry) {
        return Prepared::Done(Err(error));
    }
    let secrets = unpack
        .source
        .and_then(|source| source.spec.secrets.clone())
        .unwrap_or_default();
    Prepared::Pull(Pull {
        bundle,
        policy,
        secrets,
    })
}

/// The bundle of the image of `job` as its unpack Job wrote it, or where the
/// Job is ([`UnpackError::Pending`]), after advancing the Job by a step.
pub async fn advance_job(unpack: &Unpack<'_>, job: Box<ByJob>) -> Result<Bundle, UnpackError> {
    by_job(unpack, &job.source, &job.image, &job.policy).await
}

/// The bundle of `image` as the unpack Job of `source` wrote it, or where the Job is.
async fn by_job(
    unpack: &Unpack<'_>,
    source: &CatalogSource,
    image: &str,
    policy: &UnpackPolicy,
) -> Result<Bundle, UnpackError> {
    let settings = JobSettings {
        extractor_image: unpack.extractor_image.to_owned(),
        timeout: policy.timeout,
        min_retry: policy.min_retry,
    };
    let state = unpack_jobs::unpack(
        unpack.client,
        unpack.writer,
        unpack.stores,
        source,
        image,
        &settings,
    )
    .await?;
    match state {
        JobState::Unpacked(unpacked) => {
            BundleImages::global().remember(image, &unpacked);
            Ok(unpacked)
        }
        JobState::Pending(state) => Err(UnpackError::Pending(state)),
    }
}

/// Pulls the bundle image of `pull` in process, within the policy's timeout, and
/// remembers a failure for the policy's least retry interval.
pub async fn pull(unpack: &Unpack<'_>, pull: Pull) -> Result<Bundle, UnpackError> {
    let images = BundleImages::global();
    let Pull {
        bundle,
        policy,
        secrets,
    } = pull;
    let image = bundle.image.clone();
    let result = match tokio::time::timeout(
        policy.timeout,
        images.complete(unpack.client, unpack.catalog, &secrets, bundle),
    )
    .await
    {
        Ok(result) => result,
        Err(_) => Err(UnpackError::TimedOut {
            image: image.clone(),
            timeout: policy.timeout,
            operator_group: policy.operator_group.clone(),
        }),
    };
    match &result {
        Ok(_) => images.forget_failure(&image),
        Err(error) => images.record_failure(&image, error.to_string()),
    }
    result
}

#[cfg(test)]
mod tests {
    use olm_api::v1::OperatorGroup;

    use super::*;

    fn group(annotations: &[(&str, &str)]) -> OperatorGroup {
        let mut group = OperatorGroup::new("og", Default::default());
        group.metadata = ObjectMeta {
            name: Some("og".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        };
        group
    }

    #[test]
    fn the_operator_group_annotations_set_the_unpack_policy() {
        let set = policy_of(Some(
            &group(&[(TIMEOUT_ANNOTATION, "1m30s"), (MIN_RETRY_ANNOTATION, "10s")]).metadata,
        ));
        assert_eq!(set.timeout, Duration::from_secs(90));
        assert_eq!(set.min_retry, Some(Duration::from_secs(10)));
        assert_eq!(set.operator_group.as_deref(), Some("og"));
        let defaults = policy_of(Some(&group(&[(TIMEOUT_ANNOTATION, "soon")]).metadata));
        assert_eq!(defaults.timeout, DEFAULT_TIMEOUT);
        assert_eq!(defaults.min_retry, None);
        assert_eq!(policy_of(None).timeout, DEFAULT_TIMEOUT);
    }
}
