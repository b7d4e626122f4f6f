//! What keeping copied CSVs needs across reconciles, held by the
//! [`crate::context::Context`]: the caches the copies are kept from and the
//! status hashes recorded on originals. A leaf: the context holds it without
//! using the copies' controller, which uses the context.

use std::{collections::HashMap, sync::Mutex};

use k8s_openapi::api::core::v1::Namespace;
use kube::{ResourceExt, core::PartialObjectMeta};
use olm_api::v1alpha1::ClusterServiceVersion;

use crate::stores::Cache;

/// The caches copies are kept from: the originals, the copies (trimmed
/// metadata, see [`crate::controllers::csv::copied::trim`]) and the
/// namespaces. Without them the same is read from the API server; while they
/// fill, [`crate::controllers::csv::copied::sync`] waits for them (a list of
/// every copy of an original, with all its annotations and managed fields,
/// costs more than the wait).
#[derive(Clone)]
pub struct Caches {
    /// Every CSV that is no copy.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every copy, as trimmed metadata.
    pub copies: Cache<PartialObjectMeta<ClusterServiceVersion>>,
    /// Every namespace, as metadata.
    pub namespaces: Cache<PartialObjectMeta<Namespace>>,
}

impl Caches {
    /// Whether all three caches are filled.
    pub fn synced(&self) -> bool {
        self.csvs.synced.get() && self.copies.synced.get() && self.namespaces.synced.get()
    }

    /// The namespaces of the cluster, by name, without those being deleted.
    pub fn live_namespaces(&self) -> Vec<String> {
        self.namespaces
            .store
            .state()
            .iter()
            .filter(|ns| ns.metadata.deletion_timestamp.is_none())
            .map(|ns| ns.name_any())
            .collect()
    }
}

/// The status hashes this process recorded on originals
/// ([`crate::controllers::csv::copy_hashes::STATUS_HASH`]), by the original's
/// UID. The reconcile after a fan-out is triggered by the
/// fan-out's own writes and may start before the cache shows the record;
/// without this it would write every copy once more. (A hash covers the
/// phase's `lastTransitionTime`, so an old one never matches a new status.)
#[derive(Debug, Default)]
pub struct Recorded(Mutex<HashMap<String, String>>);

impl Recorded {
    /// The hash recorded on the original with UID `uid`.
    pub fn get(&self, uid: &str) -> Option<String> {
        self.lock().get(uid).cloned()
    }

    /// Records `hash` for the original with UID `uid` (none without a UID).
    pub fn set(&self, uid: &str, hash: &str) {
        if !uid.is_empty() {
            self.lock().insert(uid.to_owned(), hash.to_owned());
        }
    }

    /// Forgets the original with UID `uid`.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_this_process_are_kept_by_uid_until_forgotten() {
        let recorded = Recorded::default();
        recorded.set("uid-1", "h1");
        recorded.set("", "ignored");
        assert_eq!(recorded.get("uid-1").as_deref(), Some("h1"));
        assert_eq!(recorded.get(""), None);
        recorded.set("uid-1", "h2");
        assert_eq!(recorded.get("uid-1").as_deref(), Some("h2"));
        recorded.forget("uid-1");
        assert_eq!(recorded.get("uid-1"), None);
    }
}
