//! Completing a resolved bundle from its bundle image when its catalog carries
//! only its metadata ([`crate::images::bundles`]), with the pull secrets of its
//! catalog ([`crate::images::pull_secrets`]).
//!
//! OLM's OperatorGroup annotations apply, read from the OperatorGroup of the
//! Subscription's namespace:
//! - `operatorframework.io/bundle-unpack-timeout` (a Go duration, default 10m):
//!   an unpack that takes longer fails with BundleUnpackFailed;
//! - `operatorframework.io/bundle-unpack-min-retry-interval`: after a failure,
//!   the image is not pulled again before this interval has passed (without
//!   it, a failed unpack is retried with the controller's backoff).
//!
//! While an image is pulled, the Subscriptions of the plan have condition
//! `BundleUnpacking` True (reason `UnpackingInProgress`).
//!
//! A CatalogSource annotated `olm-rs.dev/bundle-unpack-method: Job` has its
//! bundle images unpacked by a Job instead ([`crate::images::unpack_jobs`]): each sync
//! advances the Job by a step and, until the bundle is there, the plan waits
//! with BundleUnpacking True saying what the Job waits for.

use std::{collections::HashSet, time::Duration};

use kube::{Api, ResourceExt, runtime::reflector::ObjectRef};
use olm_api::v1::OperatorGroup;
use olm_api::v1alpha1::{
    CatalogSource, Subscription, SubscriptionConditionReason as Reason, SubscriptionConditionType as Type,
};
use olm_catalog::Bundle;
use olm_resolver::model::CatalogId;

use super::error::Error;
use crate::{
    controllers::{Context, catalogsource::parse_go_duration, conditions::set_subscription_condition},
    images::bundles::{BundleImages, UnpackError},
    images::unpack_jobs::{self, JobSettings, JobState, Method},
};

/// OLM's annotation with the time an unpack may take.
pub const TIMEOUT_ANNOTATION: &str = "operatorframework.io/bundle-unpack-timeout";
/// OLM's annotation with the least time between two attempts at a failed unpack.
pub const MIN_RETRY_ANNOTATION: &str = "operatorframework.io/bundle-unpack-min-retry-interval";
/// The unpack timeout when the OperatorGroup sets none (OLM's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// How bundle images are unpacked in one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnpackPolicy {
    /// The time an unpack may take.
    pub timeout: Duration,
    /// The least time between attempts at a failed unpack, if set.
    pub min_retry: Option<Duration>,
    /// The OperatorGroup they come from, for messages.
    pub operator_group: Option<String>,
}

/// The policy the annotations of `group` set (pure); invalid values are ignored
/// with a warning, as OLM ignores them.
pub fn policy_of(group: Option<&OperatorGroup>) -> UnpackPolicy {
    let annotation = |key: &str| {
        let value = group?.annotations().get(key)?;
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
        operator_group: group.map(|g| g.name_any()),
    }
}

/// The unpack policy of `namespace` (the defaults when it has no single
/// OperatorGroup or it cannot be read).
async fn policy(shared: &Context, namespace: &str) -> UnpackPolicy {
    let api: Api<OperatorGroup> = Api::namespaced(shared.client.clone(), namespace);
    match api.list(&Default::default()).await {
        Ok(list) if list.items.len() == 1 => policy_of(list.items.first()),
        Ok(_) => policy_of(None),
        Err(error) => {
            tracing::debug!(namespace, %error, "cannot read the OperatorGroup; default unpack policy");
            policy_of(None)
        }
    }
}

/// `bundle` with its manifests, pulled from its image when its catalog has none.
/// `members` are the Subscriptions of the plan: they get BundleUnpacking while
/// the image is pulled, and their names go into `marked`.
pub(super) async fn complete(
    shared: &Context,
    namespace: &str,
    members: &[&Subscription],
    marked: &mut HashSet<String>,
    catalog: &CatalogId,
    bundle: Bundle,
) -> Result<Bundle, Error> {
    if !crate::images::bundles::needs_unpacking(&bundle) {
        return Ok(bundle);
    }
    let images = BundleImages::global();
    let name = bundle.name.clone();
    let image = bundle.image.clone();
    let fail = |source: UnpackError| Error::Unpack {
        catalog: catalog.clone(),
        bundle: name.clone(),
        source,
    };
    if images.is_cached(&image) {
        return images
            .complete(&shared.client, catalog, &[], bundle)
            .await
            .map_err(fail);
    }
    let policy = policy(shared, namespace).await;
    let source = shared
        .stores
        .catalog_sources
        .get(&ObjectRef::<CatalogSource>::new(&catalog.name).within(&catalog.namespace));
    if let Some(source) = source.as_ref().filter(|s| Method::of(s) == Method::Job) {
        let settings = JobSettings {
            extractor_image: shared.options.unpack_job_image.clone(),
            timeout: policy.timeout,
            min_retry: policy.min_retry,
        };
        return match unpack_jobs::unpack(&shared.client, &shared.writer, source, &image, &settings).await {
            Ok(JobState::Unpacked(unpacked)) => {
                images.remember(&image, &unpacked);
                Ok(unpacked)
            }
            Ok(JobState::Pending(state)) => Err(fail(UnpackError::Pending(state))),
            Err(error) => Err(fail(error)),
        };
    }
    if let Some(error) = images.retry_wait(&image, policy.min_retry) {
        return Err(fail(error));
    }
    mark_unpacking(shared, namespace, members, marked, &image).await;
    let secrets = source
        .and_then(|source| source.spec.secrets.clone())
        .unwrap_or_default();
    let result = match tokio::time::timeout(
        policy.timeout,
        images.complete(&shared.client, catalog, &secrets, bundle),
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
    result.map_err(fail)
}

/// Sets BundleUnpacking True on the plan's Subscriptions while `image` is pulled
/// (best effort: a failed write only loses the transient condition).
async fn mark_unpacking(
    shared: &Context,
    namespace: &str,
    members: &[&Subscription],
    marked: &mut HashSet<String>,
    image: &str,
) {
    if !shared.writer.leadership().is_leader() {
        return;
    }
    let api: Api<Subscription> = Api::namespaced(shared.client.clone(), namespace);
    let now = olm_runtime::conditions::now();
    for subscription in members {
        let name = subscription.name_any();
        let mut status = subscription.status.clone().unwrap_or_default();
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        set_subscription_condition(
            conditions,
            Type::BundleUnpacking,
            true,
            Reason::UnpackingInProgress,
            &format!("unpacking bundle image {image}"),
            &now,
        );
        match shared.writer.apply_status(&api, &name, &status).await {
            Ok(_) => {
                marked.insert(name);
            }
            Err(error) => {
                tracing::debug!(namespace, subscription = %name, %error, "BundleUnpacking not written")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;

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
        let set = policy_of(Some(&group(&[
            (TIMEOUT_ANNOTATION, "1m30s"),
            (MIN_RETRY_ANNOTATION, "10s"),
        ])));
        assert_eq!(set.timeout, Duration::from_secs(90));
        assert_eq!(set.min_retry, Some(Duration::from_secs(10)));
        assert_eq!(set.operator_group.as_deref(), Some("og"));
        let defaults = policy_of(Some(&group(&[(TIMEOUT_ANNOTATION, "soon")])));
        assert_eq!(defaults.timeout, DEFAULT_TIMEOUT);
        assert_eq!(defaults.min_retry, None);
        assert_eq!(policy_of(None).timeout, DEFAULT_TIMEOUT);
    }
}
