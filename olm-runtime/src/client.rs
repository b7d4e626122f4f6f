//! The Kubernetes client of a binary, counting every request it sends.
//!
//! [`instrumented`] builds a [`kube::Client`] from a [`kube::Config`] with one
//! extra tower layer that counts each request into
//! `olm_kube_requests_total{verb,resource}` ([`RequestMetrics`]). The verb is
//! the Kubernetes one, told apart from the URL as the API server does (a GET
//! is `get`, `list` or `watch`), and the resource is `plural[.group][/subresource]`:
//! no names and no namespaces, so the series stay few. This is what shows
//! whether a binary at rest only watches and renews its Lease, or polls.

use std::fmt;

use http::{Method, Request};
use kube::{Client, Config, client::ClientBuilder};
use prometheus::{IntCounterVec, Opts, Registry};
use tower::util::MapRequestLayer;

use crate::refusals::RefusalLayer;

/// A Kubernetes API verb, as the API server names it in audit logs and
/// `apiserver_request_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true` (or of the legacy `/watch/` paths).
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH (server-side apply included).
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// Any other method (HEAD, OPTIONS ...).
    Other,
}

impl Verb {
    /// The label value: the API server's own name for the verb.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Other => "other",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one request is: its verb and the resource it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestKind {
    /// The Kubernetes verb.
    pub verb: Verb,
    /// `plural[.group][/subresource]` (`leases.coordination.k8s.io`,
    /// `clusterserviceversions.operators.coreos.com/status`), or `discovery`
    /// for the API server's other paths (`/version`, `/apis` ...).
    pub resource: String,
}

/// The resource label of requests outside resource paths (`/version`, `/apis` ...).
const DISCOVERY: &str = "discovery";

/// Sorts a request by its method, path and query into a [`RequestKind`].
///
/// Paths are `/api/v1/...` (core) or `/apis/<group>/<version>/...`, then either
/// `namespaces/<ns>/<plural>[/<name>[/<sub>]]` or `<plural>[/<name>[/<sub>]]`.
/// `namespaces/<ns>/<x>` is read as the collection `<x>` in namespace `<ns>`,
/// so the rare subresources of a Namespace (`finalize`, `status`) count as a
/// resource of that name.
pub fn classify_request(method: &Method, path: &str, query: Option<&str>) -> RequestKind {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => ("", &[][..]),
    };
    let (legacy_watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let (plural, name, subresource) = match rest {
        ["namespaces", _ns, plural, tail @ ..] => (*plural, tail.first(), tail.get(1)),
        [plural, tail @ ..] => (*plural, tail.first(), tail.get(1)),
        [] => {
            let verb = if *method == Method::GET {
                Verb::Get
            } else {
                Verb::Other
            };
            return RequestKind {
                verb,
                resource: DISCOVERY.to_owned(),
            };
        }
    };
    let one = name.is_some();
    let watch = legacy_watch || query.is_some_and(is_watch_query);
    let verb = match *method {
        Method::GET if watch => Verb::Watch,
        Method::GET if one => Verb::Get,
        Method::GET => Verb::List,
        Method::POST => Verb::Create,
        Method::PUT => Verb::Update,
        Method::PATCH => Verb::Patch,
        Method::DELETE if one => Verb::Delete,
        Method::DELETE => Verb::DeleteCollection,
        _ => Verb::Other,
    };
    let mut resource = plural.to_owned();
    if !group.is_empty() {
        resource.push('.');
        resource.push_str(group);
    }
    if let Some(subresource) = subresource {
        resource.push('/');
        resource.push_str(subresource);
    }
    RequestKind { verb, resource }
}

/// Whether the query asks for a watch (`watch=true` or `watch=1`).
fn is_watch_query(query: &str) -> bool {
    query
        .split('&')
        .any(|pair| matches!(pair, "watch=true" | "watch=1"))
}

/// `olm_kube_requests_total{verb,resource}`: the requests a binary sent to the
/// API server, counted when sent (whatever the answer).
#[derive(Clone, Debug)]
pub struct RequestMetrics {
    requests: IntCounterVec,
}

impl RequestMetrics {
    /// Registers the counter on `registry` (the binary's, served on `/metrics`).
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "olm_kube_requests_total",
                "Requests sent to the Kubernetes API server, by verb and resource.",
            ),
            &["verb", "resource"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        Ok(RequestMetrics { requests })
    }

    /// Counts one request of `kind`.
    pub fn observe(&self, kind: &RequestKind) {
        self.requests
            .with_label_values(&[kind.verb.as_str(), kind.resource.as_str()])
            .inc();
    }
}

/// A client for `config` whose every request is counted in `metrics`, and
/// whose every request the API server refuses (403) is logged with the API
/// server's message ([`crate::refusals`]).
///
/// Fails as [`kube::Client::try_from`] does: when the configuration's TLS or
/// authentication cannot be set up.
pub fn instrumented(config: Config, metrics: &RequestMetrics) -> Result<Client, kube::Error> {
    let metrics = metrics.clone();
    let count = MapRequestLayer::new(move |request: Request<kube::client::Body>| {
        let uri = request.uri();
        metrics.observe(&classify_request(request.method(), uri.path(), uri.query()));
        request
    });
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&RefusalLayer::logging())
        .with_layer(&count)
        .build())
}

#[cfg(test)]
mod tests {
    use prometheus::TextEncoder;

    use super::*;

    fn kind(method: Method, path: &str, query: Option<&str>) -> (Verb, String) {
        let kind = classify_request(&method, path, query);
        (kind.verb, kind.resource)
    }

    #[test]
    fn gets_are_told_apart_as_the_api_server_does() {
        assert_eq!(
            kind(
                Method::GET,
                "/apis/operators.coreos.com/v1alpha1/namespaces/ns/subscriptions",
                Some("watch=true&resourceVersion=5&timeoutSeconds=290")
            ),
            (Verb::Watch, "subscriptions.operators.coreos.com".to_owned())
        );
        assert_eq!(
            kind(
                Method::GET,
                "/apis/operators.coreos.com/v1alpha1/subscriptions",
                Some("limit=500")
            ),
            (Verb::List, "subscriptions.operators.coreos.com".to_owned())
        );
        assert_eq!(
            kind(Method::GET, "/api/v1/namespaces/ns/configmaps/c", None),
            (Verb::Get, "configmaps".to_owned())
        );
        assert_eq!(
            kind(Method::GET, "/api/v1/namespaces", Some("watch=1")),
            (Verb::Watch, "namespaces".to_owned())
        );
        assert_eq!(
            kind(Method::GET, "/api/v1/namespaces/kube-system", None),
            (Verb::Get, "namespaces".to_owned())
        );
        assert_eq!(
            kind(Method::GET, "/api/v1/watch/namespaces/ns/pods", None),
            (Verb::Watch, "pods".to_owned())
        );
    }

    #[test]
    fn writes_name_their_verb_and_subresource() {
        assert_eq!(
            kind(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases/olm-operator",
                None
            ),
            (Verb::Update, "leases.coordination.k8s.io".to_owned())
        );
        assert_eq!(
            kind(
                Method::PATCH,
                "/apis/operators.coreos.com/v1alpha1/namespaces/ns/clusterserviceversions/a/status",
                Some("fieldManager=olm")
            ),
            (
                Verb::Patch,
                "clusterserviceversions.operators.coreos.com/status".to_owned()
            )
        );
        assert_eq!(
            kind(Method::POST, "/api/v1/namespaces/ns/secrets", None),
            (Verb::Create, "secrets".to_owned())
        );
        assert_eq!(
            kind(Method::DELETE, "/api/v1/namespaces/ns/pods/p", None),
            (Verb::Delete, "pods".to_owned())
        );
        assert_eq!(
            kind(Method::DELETE, "/api/v1/namespaces/ns/pods", None),
            (Verb::DeleteCollection, "pods".to_owned())
        );
    }

    #[test]
    fn other_paths_are_discovery() {
        assert_eq!(
            kind(Method::GET, "/version", None),
            (Verb::Get, "discovery".to_owned())
        );
        assert_eq!(
            kind(Method::GET, "/apis/apps/v1", None),
            (Verb::Get, "discovery".to_owned())
        );
    }

    #[tokio::test]
    async fn the_client_counts_what_it_sends() {
        let registry = Registry::new();
        let metrics = RequestMetrics::register(&registry).unwrap();
        // Nothing listens on port 1: the request fails, but it was sent.
        let config = Config::new("http://127.0.0.1:1".parse().unwrap());
        let client = instrumented(config, &metrics).unwrap();
        let _ = client.apiserver_version().await;
        let _ = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client, "ns")
            .list(&Default::default())
            .await;
        let text = TextEncoder::new().encode_to_string(&registry.gather()).unwrap();
        assert!(
            text.contains(r#"olm_kube_requests_total{resource="discovery",verb="get"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"olm_kube_requests_total{resource="pods",verb="list"} 1"#),
            "{text}"
        );
    }
}
