//! Where an install's time goes: the moment a watch first sees each state of
//! the Subscriptions, InstallPlans, CSVs, Deployments and Pods of a
//! namespace, counted from the
//! moment the install starts. Event-driven (a watch, not a poll), so each figure
//! is when the change reached a client, within the API server's fan-out.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::watcher::{self, Event},
};
use olm_api::v1alpha1::{ClusterServiceVersion, InstallPlan, Subscription};
use serde::de::DeserializeOwned;
use tokio::{sync::oneshot, task::JoinHandle};

/// What one install went through: each milestone and when it was first seen.
pub type Seen = Vec<(String, Duration)>;

/// A watch of one namespace's milestones, running until [`Milestones::stop`].
pub struct Milestones {
    seen: Arc<Mutex<Vec<(String, Instant)>>>,
    task: JoinHandle<()>,
}

/// One watched event, named by the milestone it reaches (`None`: none), or the end of a list.
enum Observed {
    Milestone(Option<String>),
    Listed,
}

impl Milestones {
    /// Watches `namespace`; returns once the watches have listed, so that
    /// nothing after it is missed.
    pub async fn watch(client: &Client, namespace: &str) -> Milestones {
        let streams = vec![
            observe::<Subscription>(client, namespace, subscription_milestone),
            observe::<InstallPlan>(client, namespace, plan_milestone),
            observe::<ClusterServiceVersion>(client, namespace, csv_milestone),
            observe::<Deployment>(client, namespace, deployment_milestone),
            observe::<Pod>(client, namespace, pod_milestone),
        ];
        let watches = streams.len();
        let seen: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
        let (listed, when_listed) = oneshot::channel();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut events = futures::stream::select_all(streams);
            let (mut lists, mut listed) = (0, Some(listed));
            while let Some(observed) = events.next().await {
                match observed {
                    Observed::Listed => {
                        lists += 1;
                        if lists == watches {
                            listed.take().map(|tx| tx.send(()));
                        }
                    }
                    Observed::Milestone(Some(name)) => {
                        let mut seen = record.lock().expect("the milestones");
                        if !seen.iter().any(|(known, _)| *known == name) {
                            seen.push((name, Instant::now()));
                        }
                    }
                    Observed::Milestone(None) => {}
                }
            }
        });
        let _ = when_listed.await;
        Milestones { seen, task }
    }

    /// Stops watching; the milestones in the order they were seen, each timed
    /// from `started`, the start of the install.
    pub fn stop(self, started: Instant) -> Seen {
        self.task.abort();
        let seen = self.seen.lock().expect("the milestones");
        seen.iter()
            .map(|(name, at)| (name.clone(), at.saturating_duration_since(started)))
            .collect()
    }
}

/// The watch of `K` in `namespace`, each object named by `milestone`.
fn observe<K>(
    client: &Client,
    namespace: &str,
    milestone: fn(&K) -> Option<String>,
) -> BoxStream<'static, Observed>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    watcher::watcher(api, watcher::Config::default())
        .filter_map(move |event| {
            std::future::ready(match event {
                Ok(Event::Apply(object) | Event::InitApply(object)) => {
                    Some(Observed::Milestone(milestone(&object)))
                }
                Ok(Event::InitDone) => Some(Observed::Listed),
                _ => None,
            })
        })
        .boxed()
}

fn subscription_milestone(subscription: &Subscription) -> Option<String> {
    let state = subscription.status.as_ref()?.state.as_ref()?;
    Some(format!("Subscription {} {state:?}", subscription.name_any()))
}

fn plan_milestone(plan: &InstallPlan) -> Option<String> {
    let phase = plan.status.as_ref().map(|s| format!("{:?}", s.phase));
    Some(format!("InstallPlan {}", phase.as_deref().unwrap_or("created")))
}

/// The state of an installed CSV; copies of CSVs installed elsewhere are not milestones.
fn csv_milestone(csv: &ClusterServiceVersion) -> Option<String> {
    if csv.labels().contains_key(olm_api::labels::COPIED_FROM) {
        return None;
    }
    let phase = csv.status.as_ref().and_then(|s| s.phase.as_ref());
    let phase = phase.map_or_else(|| "created".to_owned(), |p| format!("{p:?}"));
    Some(format!("CSV {} {phase}", csv.name_any()))
}

/// A Deployment created, then Available: where the kube-controller-manager's
/// part of an install begins and ends.
fn deployment_milestone(deployment: &Deployment) -> Option<String> {
    let available = deployment
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"));
    let state = if available { "Available" } else { "created" };
    Some(format!("Deployment {} {state}", deployment.name_any()))
}

/// A Deployment's Pod created, bound to a node, then Ready (the fake
/// kubelet's part), named by its Deployment (its ReplicaSet's name without
/// the template hash).
fn pod_milestone(pod: &Pod) -> Option<String> {
    let owner = pod.owner_references().first()?;
    let deployment = owner
        .name
        .rsplit_once('-')
        .map_or(owner.name.as_str(), |(name, _)| name);
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
    let state = match (ready, bound) {
        (true, _) => "Ready",
        (false, true) => "bound",
        (false, false) => "created",
    };
    Some(format!("Pod of {deployment} {state}"))
}

/// Per milestone, the median over the installs that reached it, and in how many
/// of them it was seen; ordered by that median.
pub fn medians(installs: &[Seen]) -> Vec<(String, Duration, usize)> {
    let mut by_name: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for seen in installs {
        for (name, at) in seen {
            by_name.entry(name).or_default().push(*at);
        }
    }
    let mut out: Vec<(String, Duration, usize)> = by_name
        .into_iter()
        .map(|(name, mut times)| {
            times.sort();
            (name.to_owned(), times[times.len() / 2], times.len())
        })
        .collect();
    out.sort_by_key(|(_, median, _)| *median);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn medians_are_per_milestone_and_ordered_by_time() {
        let installs = vec![
            vec![("plan".to_owned(), ms(10)), ("csv".to_owned(), ms(50))],
            vec![("plan".to_owned(), ms(30)), ("csv".to_owned(), ms(40))],
            vec![("plan".to_owned(), ms(20))],
        ];
        assert_eq!(
            medians(&installs),
            vec![("plan".to_owned(), ms(20), 3), ("csv".to_owned(), ms(50), 2)]
        );
    }
}
