//! The decision of a reconcile (pure): from what was [read](super::read), every
//! effect on the cluster, as [`Effects`], in the order the applier performs them:
//!
//! 1. the registry objects of an image a Pod serves: its Service (owned,
//!    hash-stamped: skipped while the live copy carries the hash) and, when no
//!    Pod of the current spec serves or a poll is due, a new Pod (created,
//!    under a name every reconcile that starts it gives it alike, so a
//!    reconcile whose store lags gets a 409 rather than a second Pod);
//! 2. the registry Pods that go: outdated ones once a Pod of the current spec
//!    is Ready, and update Pods that found the same image; all of them (and
//!    the Service) for an image served from memory;
//! 3. the status, when it changed.
//!
//! The status of a reconcile that starts the registry Pod is left to the
//! reconcile the new Pod triggers, which sees whether the Pod was made. Only the leader writes: a standby's decision holds no effect.

use std::time::Duration;

use k8s_openapi::{
    api::core::v1::{Pod, Service},
    apimachinery::pkg::apis::meta::v1::Time,
};
use kube::ResourceExt;
use olm_api::v1alpha1::CatalogSourceStatus;
use olm_resolver::model::CatalogId;
use olm_runtime::effects::{Desired, Effects, Removal, StatusWrite};

use super::{
    observed::Observed,
    read::{Read, Registry, not_ready},
    registry_pod::{self, as_standby, is_ready, plan_pods, poll_due},
    status,
    validate::SourceSpec,
};

/// What a reconcile decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// What to write, status last.
    pub effects: Effects<CatalogSourceStatus>,
    /// Whether the catalog is READY, for the metrics.
    pub ready: bool,
    /// How soon to look again; `None`: only on a change.
    pub requeue: Option<Duration>,
}

/// The effects on the registry objects, and what the catalog is observed as.
struct RegistryEffects {
    objects: Vec<Desired>,
    removals: Vec<Removal>,
    /// `None`: the status waits for the Pod started now.
    observed: Option<Observed>,
    /// When the image is polled now (by an update Pod).
    polled: Option<Time>,
}

/// Decides what a reconcile of `read` writes. `health_interval` is how often
/// a reachable catalog is checked.
pub fn decide(read: &Read, health_interval: Duration) -> Result<Decision, serde_json::Error> {
    let registry = match &read.registry {
        Some(registry) if registry.by_pod => by_pod(read, registry)?,
        Some(registry) if read.serving.as_ref().is_some_and(|s| s.from_memory) => RegistryEffects {
            objects: Vec::new(),
            removals: removals(registry),
            observed: read.observed.clone(),
            polled: None,
        },
        _ => RegistryEffects {
            objects: Vec::new(),
            removals: Vec::new(),
            observed: read.observed.clone(),
            polled: None,
        },
    };
    let polled = registry.polled.or_else(|| read.polled.clone());
    let status = registry
        .observed
        .as_ref()
        .map(|observed| status_of(read, observed, polled))
        .filter(|status| read.source.status.as_ref() != Some(status))
        .map(|status| StatusWrite {
            name: read.source.name_any(),
            status,
        });
    let effects = if read.leading {
        Effects {
            objects: registry.objects,
            statuses: Vec::new(),
            removals: registry.removals,
            status,
        }
    } else {
        Effects::none()
    };
    Ok(Decision {
        effects,
        ready: registry.observed.as_ref().is_some_and(Observed::is_ready),
        requeue: requeue_after(health_interval, &read.spec, registry.observed.as_ref()),
    })
}

/// The status after `observed`, with the time of a poll made now and how an
/// image is served.
fn status_of(read: &Read, observed: &Observed, polled: Option<Time>) -> CatalogSourceStatus {
    let mut new_status = status::compute(&read.source, &read.spec, observed, &read.now);
    if polled.is_some() {
        new_status.latest_image_registry_poll = polled;
    }
    status::set_serving(
        &mut new_status,
        read.serving.as_ref(),
        read.source.metadata.generation,
        &read.now,
    );
    new_status
}

/// Every registry object of an image catalog served from memory goes.
fn removals(registry: &Registry) -> Vec<Removal> {
    let pods = registry
        .objects
        .pods
        .iter()
        .map(|pod| removal::<Pod>(&pod.metadata));
    let services = registry
        .objects
        .services
        .iter()
        .map(|service| removal::<Service>(&service.metadata));
    pods.chain(services).collect()
}

/// The removal of exactly the object of `meta`.
fn removal<K: kube::Resource<DynamicType = ()>>(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Removal {
    let name = meta.name.as_deref().unwrap_or_default();
    let removal = Removal::of::<K>(meta.namespace.as_deref(), name);
    match meta.uid.as_deref() {
        Some(uid) => removal.with_uid(uid),
        None => removal,
    }
}

/// The registry Service and Pods of an image a Pod serves, and what the
/// catalog is observed as through them.
fn by_pod(read: &Read, registry: &Registry) -> Result<RegistryEffects, serde_json::Error> {
    let source = &read.source;
    let pods = &registry.objects.pods;
    let wanted = registry_pod::wanted_pod(source, &registry.image, &registry.objects);
    let hash = registry_pod::spec_hash(&wanted);
    let due = poll_due(source, &read.spec, &registry.image, pods, &hash, &read.now);
    let plan = plan_pods(pods, &hash, due.is_some());
    let plan = if read.leading {
        plan
    } else {
        as_standby(plan, pods)
    };

    let mut objects = vec![Desired::owned(&registry_pod::service(source))?];
    match due {
        Some(since) if plan.start_update => {
            let update = registry_pod::as_update_pod(wanted, since);
            objects.push(Desired::owned(&update)?.create_only());
        }
        _ if plan.serve.is_none() => objects.push(Desired::owned(&wanted)?.create_only()),
        _ => {}
    }
    let removals = plan
        .delete
        .iter()
        .filter_map(|name| pods.iter().find(|pod| pod.name_any() == *name))
        .map(|pod| removal::<Pod>(&pod.metadata))
        .collect();
    let id = CatalogId::new(source.name_any(), source.namespace().unwrap_or_default());
    let starting = |message: String| Observed::Starting {
        address: Some(registry_pod::address(&id)),
        registry_service: Some(registry_pod::service_status(source, &registry.objects.services)),
        message,
    };
    let observed = match &plan.serve {
        None if !read.leading => Some(starting(
            "the leader has not started the registry pod yet".to_owned(),
        )),
        None => None,
        Some(pod) if !is_ready(pod) => Some(starting(not_ready(&pod.name_any()))),
        Some(_) => read.observed.clone(),
    };
    Ok(RegistryEffects {
        objects,
        removals,
        observed,
        polled: plan.start_update.then(|| read.now.clone()),
    })
}

/// How soon to look at the catalog again: a reachable one every health
/// interval (or poll interval, if shorter), one that is not (yet) within ten
/// seconds, an invalid one only when it changes.
fn requeue_after(
    health_interval: Duration,
    spec: &SourceSpec,
    observed: Option<&Observed>,
) -> Option<Duration> {
    match observed {
        Some(Observed::Invalid { .. }) => None,
        Some(Observed::Ready { .. }) => Some(health_interval.min(spec.poll_interval)),
        Some(Observed::Unreachable { .. } | Observed::Starting { .. }) | None => {
            Some(health_interval.min(Duration::from_secs(10)))
        }
    }
}

#[cfg(test)]
mod tests;
