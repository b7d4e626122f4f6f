//! Waiting for the cluster to reach a state, always with a deadline.

use std::{fmt::Debug, future::Future, time::Duration};

use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Resource,
    runtime::wait::{Condition, await_condition},
};
use serde::{Serialize, de::DeserializeOwned};
use tokio::time::Instant;

/// How long a test waits for the cluster to reach a state before it fails. Generous: the
/// machines the tests run on are often loaded.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// How often [`eventually`] probes.
const EVENTUALLY_PERIOD: Duration = Duration::from_millis(300);

/// How often [`poll_until`] checks: often enough to time what it waits for.
const POLL_PERIOD: Duration = Duration::from_millis(20);

/// Waits until `condition` holds for the object `name`, and returns the object (`None` if the
/// condition holds for a missing object, as with `conditions::is_deleted`).
///
/// Panics after [`TIMEOUT`], saying what it waited for (`what`, e.g. "Deployment web is
/// Available") and showing the object as it was then.
pub async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, condition: impl Condition<K>) -> Option<K>
where
    K: Clone + Debug + Send + DeserializeOwned + Resource + Serialize + 'static,
{
    wait_for_within(TIMEOUT, api, name, what, condition).await
}

/// [`wait_for`] with a deadline of its own, for what is known to be slow.
pub async fn wait_for_within<K>(
    timeout: Duration,
    api: &Api<K>,
    name: &str,
    what: &str,
    condition: impl Condition<K>,
) -> Option<K>
where
    K: Clone + Debug + Send + DeserializeOwned + Resource + Serialize + 'static,
{
    match tokio::time::timeout(timeout, await_condition(api.clone(), name, condition)).await {
        Ok(Ok(object)) => object,
        Ok(Err(e)) => panic!("error while waiting until {what}: {e}"),
        Err(_) => {
            let seen = match api.get_opt(name).await {
                Ok(Some(mut object)) => {
                    object.meta_mut().managed_fields = None;
                    serde_json::to_string_pretty(&object).unwrap_or_else(|e| e.to_string())
                }
                Ok(None) => "it does not exist".to_string(),
                Err(e) => format!("cannot read it: {e}"),
            };
            panic!(
                "gave up after {}s waiting until {what}; it is now:\n{seen}",
                timeout.as_secs()
            )
        }
    }
}

/// Waits until the object `name` no longer exists; panics after [`TIMEOUT`] showing it.
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: Clone + Debug + Send + DeserializeOwned + Resource + Serialize + 'static,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let what = format!("{kind} {name} is gone");
    wait_for(api, name, &what, |object: Option<&K>| object.is_none()).await;
}

/// Checks `probe` until it returns true, or panics after [`TIMEOUT`] with `what`. For states no
/// single object's watch can tell (lists, absences across kinds, events).
pub async fn eventually<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if probe().await {
            return;
        }
        if Instant::now() >= deadline {
            panic!("{what}: still not so after {TIMEOUT:?}");
        }
        tokio::time::sleep(EVENTUALLY_PERIOD).await;
    }
}

/// Checks `check` every 20 ms until it holds or `limit` passes; returns the instant it was seen
/// to hold, so that a test can time how long it took, or `None`.
pub async fn poll_until(limit: Duration, mut check: impl FnMut() -> bool) -> Option<Instant> {
    let give_up = Instant::now() + limit;
    loop {
        if check() {
            return Some(Instant::now());
        }
        if Instant::now() >= give_up {
            return None;
        }
        tokio::time::sleep(POLL_PERIOD).await;
    }
}

/// A condition: the Deployment's controller has seen its latest spec and reports it Available.
pub fn is_deployment_available() -> impl Condition<Deployment> {
    |deployment: Option<&Deployment>| {
        let Some(deployment) = deployment else {
            return false;
        };
        let Some(status) = &deployment.status else {
            return false;
        };
        status.observed_generation >= deployment.metadata.generation
            && status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Available" && c.status == "True")
    }
}
