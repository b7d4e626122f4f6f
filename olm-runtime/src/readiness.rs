//! Readiness: `/readyz` turns true once every cache the binary needs has synced, on
//! standby replicas too (they must be ready to lead at once).
//!
//! The binary creates one [`ReadyGate`] per cache (or controller) *before* spawning
//! them, and each flips its gate once its store is synced, e.g. after
//! `Store::wait_until_ready`. The [`Readiness`] is ready when at least one gate was
//! created and all of them are flipped. A gate dropped without being flipped (its
//! task died) keeps the process unready.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard},
};

/// Shared readiness of a process; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    inner: Arc<Mutex<Gates>>,
}

#[derive(Debug, Default)]
struct Gates {
    next_id: u64,
    /// The gates not yet flipped, by id, with their names.
    pending: BTreeMap<u64, String>,
    /// Whether any gate was ever created.
    any: bool,
}

impl Readiness {
    /// Not ready until gates are created and flipped.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new pending gate named `name` (for `/readyz` to report what it waits for).
    pub fn gate(&self, name: impl Into<String>) -> ReadyGate {
        let mut gates = self.lock();
        let id = gates.next_id;
        gates.next_id += 1;
        gates.pending.insert(id, name.into());
        gates.any = true;
        ReadyGate {
            readiness: self.clone(),
            id,
        }
    }

    /// Whether every gate is flipped (and there is at least one).
    pub fn is_ready(&self) -> bool {
        let gates = self.lock();
        gates.any && gates.pending.is_empty()
    }

    /// The names of the gates not yet flipped.
    pub fn pending(&self) -> Vec<String> {
        self.lock().pending.values().cloned().collect()
    }

    fn lock(&self) -> MutexGuard<'_, Gates> {
        // The lock guards plain bookkeeping: a panic while holding it leaves it usable.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One thing the process waits for before it is ready.
#[derive(Debug)]
#[must_use = "a gate that is never flipped keeps the process unready"]
pub struct ReadyGate {
    readiness: Readiness,
    id: u64,
}

impl ReadyGate {
    /// Marks this gate ready.
    pub fn ready(self) {
        self.readiness.lock().pending.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_every_gate_is_flipped() {
        let readiness = Readiness::new();
        assert!(!readiness.is_ready(), "no gate yet: nothing has synced");
        let csvs = readiness.gate("csv store");
        let groups = readiness.gate("operatorgroup store");
        assert_eq!(readiness.pending(), ["csv store", "operatorgroup store"]);
        csvs.ready();
        assert!(!readiness.is_ready());
        assert_eq!(readiness.pending(), ["operatorgroup store"]);
        groups.ready();
        assert!(readiness.is_ready());
        assert!(readiness.clone().is_ready(), "clones share the state");
    }

    #[test]
    fn a_dropped_gate_keeps_the_process_unready() {
        let readiness = Readiness::new();
        let gate = readiness.gate("csv store");
        drop(gate);
        assert!(!readiness.is_ready());
    }
}
