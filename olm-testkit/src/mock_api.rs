//! A mocked API server: the test tier between a pure `decide` and a cluster.
//!
//! A reconcile's *apply* step and its wiring are tested against [`MockApi`]:
//! a kube [`Client`] whose requests go to a function of the test instead of
//! an API server. Every request is recorded as a [`Request`] (`"METHOD
//! /path"` and its JSON body), so a test asserts which writes a reconcile
//! sent, in which order, and with which content, and that a reconcile whose
//! objects are live in its stores sends none.

use std::sync::{Arc, Mutex};

use kube::{Client, client::Body};
use serde_json::Value;

/// One request the mocked API server received.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// `"METHOD /path"`, e.g. `"PATCH /api/v1/namespaces/ops/services/web"`.
    pub line: String,
    /// The query string, if any (e.g. `fieldManager=...&force=true`).
    pub query: Option<String>,
    /// The body as JSON; `Null` when it had none or it was not JSON.
    pub body: Value,
}

/// What the mocked API server answers to one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The HTTP status code.
    pub status: u16,
    /// The body.
    pub body: Value,
}

impl Answer {
    /// 200 with `body`.
    pub fn ok(body: Value) -> Answer {
        Answer { status: 200, body }
    }

    /// A Kubernetes `Status` failure with `code` and `reason`, as the API
    /// server sends it (e.g. 404 `NotFound`, 409 `AlreadyExists`).
    pub fn failure(code: u16, reason: &str) -> Answer {
        Answer {
            status: code,
            body: serde_json::json!({
                "apiVersion": "v1", "kind": "Status", "status": "Failure",
                "message": format!("mocked {reason}"), "reason": reason, "code": code,
            }),
        }
    }

    /// An empty list of `kind` (e.g. `"LeaseList"`) of `api_version`.
    pub fn empty_list(api_version: &str, kind: &str) -> Answer {
        Answer::ok(serde_json::json!({
            "apiVersion": api_version, "kind": kind, "metadata": {}, "items": [],
        }))
    }
}

/// The requests received so far, shared with the server.
#[derive(Clone, Debug, Default)]
pub struct MockApi {
    seen: Arc<Mutex<Vec<Request>>>,
}

impl MockApi {
    /// A client whose API server calls `answer` with each request; where
    /// `answer` gives `None` it answers 200 with the request's own body (a
    /// write returns what it was sent), or `{}` for a request without one.
    pub fn new<F>(answer: F) -> (Client, MockApi)
    where
        F: Fn(&Request) -> Option<Answer> + Send + Sync + 'static,
    {
        let mock = MockApi::default();
        let seen = mock.seen.clone();
        let answer = Arc::new(answer);
        let service = tower::service_fn(move |request: http::Request<Body>| {
            let (seen, answer) = (seen.clone(), answer.clone());
            async move {
                let line = format!("{} {}", request.method(), request.uri().path());
                let query = request.uri().query().map(str::to_owned);
                let bytes = request.into_body().collect_bytes().await.expect("a body");
                let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let request = Request { line, query, body };
                let Answer { status, body } = answer(&request).unwrap_or_else(|| {
                    Answer::ok(match &request.body {
                        Value::Null => serde_json::json!({}),
                        sent => sent.clone(),
                    })
                });
                seen.lock().expect("not poisoned").push(request);
                let bytes = serde_json::to_vec(&body).expect("JSON");
                let response = http::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(bytes))
                    .expect("a response");
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        (Client::new(service, "default"), mock)
    }

    /// A client whose API server answers every request with its own body.
    pub fn echo() -> (Client, MockApi) {
        MockApi::new(|_| None)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().expect("not poisoned").clone()
    }

    /// The `"METHOD /path"` of every request so far, in order.
    pub fn lines(&self) -> Vec<String> {
        self.requests().into_iter().map(|r| r.line).collect()
    }

    /// The requests that change something (every method but GET), in order.
    pub fn writes(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| !r.line.starts_with("GET "))
            .collect()
    }

    /// The body of the last request whose line is `line`.
    pub fn last_body(&self, line: &str) -> Option<Value> {
        self.requests()
            .into_iter()
            .rev()
            .find(|r| r.line == line)
            .map(|r| r.body)
    }

    /// Forgets the requests so far (e.g. between two reconciles of a test).
    pub fn clear(&self) {
        self.seen.lock().expect("not poisoned").clear();
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{Api, api::PostParams};

    use super::*;

    #[tokio::test]
    async fn it_records_requests_and_answers_as_told() {
        let (client, api) = MockApi::new(|request| {
            request
                .line
                .ends_with("/configmaps/gone")
                .then(|| Answer::failure(404, "NotFound"))
        });
        let maps: Api<ConfigMap> = Api::namespaced(client, "ops");
        let mut map = ConfigMap::default();
        map.metadata.name = Some("made".into());
        let made = maps.create(&PostParams::default(), &map).await.expect("echoed");
        assert_eq!(made.metadata.name.as_deref(), Some("made"));
        let error = maps.get("gone").await.expect_err("404");
        assert!(matches!(error, kube::Error::Api(status) if status.code == 404));
        assert_eq!(
            api.lines(),
            [
                "POST /api/v1/namespaces/ops/configmaps",
                "GET /api/v1/namespaces/ops/configmaps/gone"
            ]
        );
        assert_eq!(api.writes().len(), 1);
        assert_eq!(
            api.last_body("POST /api/v1/namespaces/ops/configmaps")
                .expect("sent")["metadata"]["name"],
            "made"
        );
    }
}
