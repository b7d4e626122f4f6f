//! What the controller's reconciles get, and the state of the controller that
//! outlives a reconcile (namespace locks, what was synced).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use crate::controllers::Context;

/// State of the controller that outlives a reconcile.
#[derive(Default)]
pub struct State {
    /// One lock per namespace: a namespace is resolved by one reconcile at a time.
    namespace_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
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
