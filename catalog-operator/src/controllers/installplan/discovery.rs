//! What the API server serves, as discovery lists it, kept between reconciles.
//!
//! Discovery is read live (no store says which APIs are served), and a plan's
//! first pass used to spend a round trip on it before applying anything. The
//! answers are kept here per group/version, and trusted only to say that a
//! kind *is* served: a kind missing from a kept answer is read live again,
//! so an API that became served since is never reported as waiting. A kept
//! answer is dropped when a CRD or an APIService of its group changes
//! ([`Discovered::forget_group`]), so a removed API is read again too.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use kube::{core::ApiResource, discovery::ApiCapabilities};

/// The kinds the API server serves at one group/version, as discovery lists them.
pub type Served = Vec<(ApiResource, ApiCapabilities)>;

/// Discovery answers by group/version, shared by every reconcile of the
/// controller (clones share one map).
#[derive(Clone, Default)]
pub struct Discovered(Arc<Mutex<HashMap<(String, String), Served>>>);

impl Discovered {
    /// The kept resource of `kind` at `group`/`version`, if a kept answer
    /// lists it.
    pub fn find(&self, group: &str, version: &str, kind: &str) -> Option<(ApiResource, ApiCapabilities)> {
        let kept = self.lock();
        let served = kept.get(&(group.to_owned(), version.to_owned()))?;
        served.iter().find(|(resource, _)| resource.kind == kind).cloned()
    }

    /// Keeps `served`, the answer just read for `group`/`version`.
    pub fn keep(&self, group: &str, version: &str, served: Served) {
        self.lock().insert((group.to_owned(), version.to_owned()), served);
    }

    /// Drops the answer for `group`/`version` (it could not be read).
    pub fn forget(&self, group: &str, version: &str) {
        self.lock().remove(&(group.to_owned(), version.to_owned()));
    }

    /// Drops every answer of `group`: one of its CRDs or APIServices changed.
    pub fn forget_group(&self, group: &str) {
        self.lock().retain(|(kept, _), _| kept != group);
    }

    /// The map; one poisoned by a panic elsewhere is still a cache.
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), Served>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The API group a CRD or an APIService named `name` serves: both are named
/// `<plural or version>.<group>`.
pub fn group_of(name: &str) -> Option<&str> {
    name.split_once('.').map(|(_, group)| group)
}

#[cfg(test)]
mod tests {
    use kube::discovery::Scope;

    use super::*;

    fn served(kinds: &[&str]) -> Served {
        let capabilities = ApiCapabilities {
            scope: Scope::Namespaced,
            subresources: Vec::new(),
            operations: Vec::new(),
        };
        kinds
            .iter()
            .map(|kind| {
                let resource = ApiResource {
                    group: "demo.example.com".to_owned(),
                    version: "v1".to_owned(),
                    api_version: "demo.example.com/v1".to_owned(),
                    kind: (*kind).to_owned(),
                    plural: format!("{}s", kind.to_lowercase()),
                };
                (resource, capabilities.clone())
            })
            .collect()
    }

    #[test]
    fn a_kept_answer_finds_only_the_kinds_it_lists() {
        let discovered = Discovered::default();
        assert!(discovered.find("demo.example.com", "v1", "Database").is_none());
        discovered.keep("demo.example.com", "v1", served(&["Database"]));
        let (resource, _) = discovered
            .find("demo.example.com", "v1", "Database")
            .expect("kept");
        assert_eq!(resource.plural, "databases");
        assert!(discovered.find("demo.example.com", "v1", "Backup").is_none());
        assert!(discovered.find("demo.example.com", "v2", "Database").is_none());
    }

    #[test]
    fn a_change_in_a_group_drops_its_answers_and_no_other() {
        let discovered = Discovered::default();
        let clone = discovered.clone();
        discovered.keep("demo.example.com", "v1", served(&["Database"]));
        discovered.keep("demo.example.com", "v2", served(&["Database"]));
        discovered.keep("other.example.com", "v1", served(&["Database"]));
        clone.forget_group(group_of("databases.demo.example.com").expect("a group"));
        assert!(discovered.find("demo.example.com", "v1", "Database").is_none());
        assert!(discovered.find("demo.example.com", "v2", "Database").is_none());
        assert!(discovered.find("other.example.com", "v1", "Database").is_some());
        discovered.forget("other.example.com", "v1");
        assert!(discovered.find("other.example.com", "v1", "Database").is_none());
    }

    #[test]
    fn an_api_service_names_its_group_after_its_version() {
        assert_eq!(group_of("v1beta1.metrics.k8s.io"), Some("metrics.k8s.io"));
        assert_eq!(group_of("v1"), None);
    }
}
