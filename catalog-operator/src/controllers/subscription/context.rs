//! What the controller's reconciles get, and the state of the controller that
//! outlives a reconcile (namespace locks, plans created lately, what was synced).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use kube::ResourceExt;
use olm_api::v1alpha1::InstallPlan;
use tokio::time::Instant;

use crate::controllers::Context;

/// How long an InstallPlan created by this replica is remembered while the
/// InstallPlan store has not seen it yet.
const RECENT_PLAN_TTL: Duration = Duration::from_secs(120);

/// An InstallPlan this replica created, until the store has it.
struct RecentPlan {
    plan: Arc<InstallPlan>,
    at: Instant,
}

/// State of the controller that outlives a reconcile.
#[derive(Default)]
pub struct State {
    /// One lock per namespace: a namespace is resolved by one reconcile at a time.
    namespace_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    recent: Mutex<HashMap<String, Vec<RecentPlan>>>,
    synced: Mutex<HashMap<String, u64>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl State {
    /// The lock of `namespace`.
    pub(super) fn namespace_lock(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.namespace_locks)
            .entry(namespace.to_owned())
            .or_default()
            .clone()
    }

    /// The plans created lately in `namespace` that `stored` does not hold yet.
    pub(super) fn recent(&self, namespace: &str, stored: &[Arc<InstallPlan>]) -> Vec<Arc<InstallPlan>> {
        let mut recent = lock(&self.recent);
        let Some(plans) = recent.get_mut(namespace) else {
            return Vec::new();
        };
        plans.retain(|r| {
            r.at.elapsed() < RECENT_PLAN_TTL && !stored.iter().any(|s| s.name_any() == r.plan.name_any())
        });
        plans.iter().map(|r| r.plan.clone()).collect()
    }

    pub(super) fn remember(&self, namespace: &str, plan: Arc<InstallPlan>) {
        let mut recent = lock(&self.recent);
        let plans = recent.entry(namespace.to_owned()).or_default();
        plans.retain(|r| r.plan.name_any() != plan.name_any());
        plans.push(RecentPlan {
            plan,
            at: Instant::now(),
        });
    }

    pub(super) fn synced(&self, namespace: &str) -> Option<u64> {
        lock(&self.synced).get(namespace).copied()
    }

    pub(super) fn set_synced(&self, namespace: &str, fingerprint: Option<u64>) {
        let mut synced = lock(&self.synced);
        match fingerprint {
            Some(f) => synced.insert(namespace.to_owned(), f),
            None => synced.remove(namespace),
        };
    }

    /// Forgets what was synced (leadership changed hands: start afresh).
    pub(super) fn reset(&self) {
        lock(&self.synced).clear();
    }
}

/// What the controller's reconciles get: the context every controller shares,
/// and this controller's own state.
pub struct SubscriptionContext {
    /// What every controller shares.
    pub shared: Arc<Context>,
    pub(super) state: State,
}

impl SubscriptionContext {
    /// The controller's context over `shared`, with fresh state.
    pub fn new(shared: Arc<Context>) -> Self {
        SubscriptionContext {
            shared,
            state: State::default(),
        }
    }
}
