//! The API server endpoints an agent knows, and the one it uses.
//!
//! An agent learns every endpoint of the cluster (the `kubernetes` EndpointSlices
//! in `default`, where it may read them, and its pool's
//! `status.apiServerEndpoints`), keeps them in its state directory, and moves to
//! the next one when the one in use fails. On restart it starts from the saved list
//! with the endpoint that last worked, so it survives the loss of the endpoint it
//! was first given, also across its own restart.
//!
//! [`EndpointList`] is the pure part: merging, rotating, saving. The slices are
//! read by [`olm_runtime::endpoints::from_slices`], as olm-operator reads them.

use olm_runtime::endpoints::normalize;
use serde::{Deserialize, Serialize};

/// The known endpoints (`https://host:port`), in the order they were learned, and
/// the one in use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointList {
    /// Every known endpoint, without duplicates.
    pub endpoints: Vec<String>,
    /// The endpoint in use; one of `endpoints`.
    pub current: String,
}

impl EndpointList {
    /// A list with one endpoint, in use.
    pub fn new(first: &str) -> Self {
        let first = normalize(first);
        EndpointList {
            endpoints: vec![first.clone()],
            current: first,
        }
    }

    /// The saved list, with `configured` (the endpoint of the agent's flags or
    /// kubeconfig) added if it is not known yet; the saved current endpoint stays
    /// in use, since it is the last that worked.
    pub fn resume(saved: Option<EndpointList>, configured: &str) -> Self {
        match saved {
            Some(mut saved) if !saved.endpoints.is_empty() => {
                saved.merge([configured]);
                if !saved.endpoints.contains(&saved.current) {
                    saved.current = saved.endpoints[0].clone();
                }
                saved
            }
            _ => EndpointList::new(configured),
        }
    }

    /// Adds endpoints not known yet, at the end; returns whether the list changed.
    /// Endpoints are only added, never dropped: one missing from a source may be
    /// down for the moment, which is exactly when it must not be forgotten.
    pub fn merge<'a>(&mut self, learned: impl IntoIterator<Item = &'a str>) -> bool {
        let mut changed = false;
        for endpoint in learned {
            let endpoint = normalize(endpoint);
            if !endpoint.is_empty() && !self.endpoints.contains(&endpoint) {
                self.endpoints.push(endpoint);
                changed = true;
            }
        }
        changed
    }

    /// Records that `failed` did not answer: if it is the one in use, the next
    /// endpoint (wrapping around) is used from now on. Returns the endpoint now in
    /// use when it changed.
    pub fn fail(&mut self, failed: &str) -> Option<&str> {
        if self.current != failed || self.endpoints.len() < 2 {
            return None;
        }
        let at = self
            .endpoints
            .iter()
            .position(|e| *e == self.current)
            .unwrap_or(0);
        self.current = self.endpoints[(at + 1) % self.endpoints.len()].clone();
        Some(&self.current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_adds_new_endpoints_once_and_keeps_order() {
        let mut list = EndpointList::new("https://10.0.0.1:6443/");
        assert!(list.merge(["https://10.0.0.2:6443", "https://10.0.0.1:6443"]));
        assert!(!list.merge(["https://10.0.0.2:6443/"]));
        assert_eq!(list.endpoints, ["https://10.0.0.1:6443", "https://10.0.0.2:6443"]);
        assert_eq!(list.current, "https://10.0.0.1:6443");
    }

    #[test]
    fn a_failure_of_the_endpoint_in_use_moves_to_the_next_and_wraps() {
        let mut list = EndpointList::new("https://a:1");
        assert_eq!(list.fail("https://a:1"), None, "one endpoint: nowhere to go");
        list.merge(["https://b:2", "https://c:3"]);
        assert_eq!(list.fail("https://a:1"), Some("https://b:2"));
        // A late failure of a request still in flight on the old endpoint does not
        // move the agent again.
        assert_eq!(list.fail("https://a:1"), None);
        assert_eq!(list.fail("https://b:2"), Some("https://c:3"));
        assert_eq!(list.fail("https://c:3"), Some("https://a:1"));
    }

    #[test]
    fn a_restart_resumes_from_the_saved_endpoint_that_last_worked() {
        let saved = EndpointList {
            endpoints: vec!["https://a:1".into(), "https://b:2".into()],
            current: "https://b:2".into(),
        };
        // The flags still name the first endpoint, which is gone.
        let list = EndpointList::resume(Some(saved.clone()), "https://a:1");
        assert_eq!(list, saved);
        let list = EndpointList::resume(Some(saved), "https://c:3");
        assert_eq!(list.endpoints, ["https://a:1", "https://b:2", "https://c:3"]);
        assert_eq!(list.current, "https://b:2");
        assert_eq!(
            EndpointList::resume(None, "https://a:1"),
            EndpointList::new("https://a:1")
        );
    }
}
