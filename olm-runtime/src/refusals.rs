//! Every request the API server refuses with 403 Forbidden, reported where it
//! happens.
//!
//! A missing RBAC permission shows up far from its cause: as a reconcile error
//! wrapped in the object it was about, as a condition message, or not at all
//! when the caller drops the error (an event that could not be published). The
//! [`RefusalLayer`] sits in the client and hands each 403 answer, with the API
//! server's message (`... is forbidden: User "system:serviceaccount:olm:olm-operator"
//! cannot create resource ...`), to a callback: the binaries log it at warn level
//! ([`log_refusal`]), so that the operator's log names every permission it
//! lacked; tests collect them to fail on them.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use kube::client::{Body, DynBody};
use tower::{BoxError, Layer, Service};

/// One request the API server refused with 403 Forbidden.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP method.
    pub method: Method,
    /// The request's path (no query).
    pub path: String,
    /// The API server's message (its `Status.message`), or the answer's body
    /// as text when it is not a Status.
    pub message: String,
}

/// What is done with each [`Refusal`].
pub type OnRefusal = Arc<dyn Fn(Refusal) + Send + Sync>;

/// The layer that hands every 403 answer to a callback (see the module docs).
#[derive(Clone)]
pub struct RefusalLayer {
    on_refusal: OnRefusal,
}

impl RefusalLayer {
    /// Calls `on_refusal` with every request the API server refuses.
    pub fn new(on_refusal: OnRefusal) -> Self {
        RefusalLayer { on_refusal }
    }

    /// Logs every refusal at warn level ([`log_refusal`]).
    pub fn logging() -> Self {
        RefusalLayer::new(Arc::new(log_refusal))
    }
}

/// Logs `refusal` at warn level, with the API server's message, which names
/// the user and the permission it lacks.
pub fn log_refusal(refusal: Refusal) {
    tracing::warn!(
        method = %refusal.method,
        path = refusal.path,
        "the API server refused a request (403 forbidden): {}",
        refusal.message
    );
}

impl<S> Layer<S> for RefusalLayer {
    type Service = RefusalService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RefusalService {
            inner,
            on_refusal: self.on_refusal.clone(),
        }
    }
}

/// The service of [`RefusalLayer`].
#[derive(Clone)]
pub struct RefusalService<S> {
    inner: S,
    on_refusal: OnRefusal,
}

impl<S> Service<Request<Body>> for RefusalService<S>
where
    S: Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let answer = self.inner.call(request);
        let on_refusal = self.on_refusal.clone();
        Box::pin(async move {
            let response = answer.await?;
            if response.status() != StatusCode::FORBIDDEN {
                return Ok(response);
            }
            // A refusal's body is a small Status: read it, report it, and pass
            // it on unchanged for the caller's error.
            let (parts, body) = response.into_parts();
            let bytes = body.collect().await?.to_bytes();
            on_refusal(Refusal {
                method,
                path,
                message: status_message(&bytes),
            });
            let body: Box<DynBody> = Box::new(Full::new(bytes).map_err(BoxError::from));
            Ok(Response::from_parts(parts, body))
        })
    }
}

/// The `message` of a Status body, or the body as text.
fn status_message(body: &[u8]) -> String {
    serde_json::from_slice::<kube::core::Status>(body)
        .ok()
        .map(|status| status.message)
        .filter(|message| !message.is_empty())
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use http::Request;
    use kube::client::ClientBuilder;
    use tower::ServiceExt;

    use super::*;

    type Answer = Response<Box<DynBody>>;
    type Answering = BoxFuture<'static, Result<Answer, BoxError>>;

    /// A stand-in API server answering every request with `code` and `body`.
    fn answering(
        code: u16,
        body: &'static str,
    ) -> impl Service<Request<Body>, Response = Answer, Error = BoxError, Future = Answering> + Clone {
        tower::service_fn(move |_request: Request<Body>| -> BoxFuture<'static, _> {
            Box::pin(async move {
                let body: Box<DynBody> =
                    Box::new(Full::new(bytes::Bytes::from(body)).map_err(BoxError::from));
                Ok::<_, BoxError>(Response::builder().status(code).body(body).expect("a response"))
            })
        })
    }

    fn recording() -> (RefusalLayer, Arc<Mutex<Vec<Refusal>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let layer = RefusalLayer::new(Arc::new(move |r: Refusal| record.lock().unwrap().push(r)));
        (layer, seen)
    }

    const FORBIDDEN: &str = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"roles.rbac.authorization.k8s.io is forbidden: User \"system:serviceaccount:olm:olm-operator\" cannot create resource \"roles\"","reason":"Forbidden","code":403}"#;

    #[tokio::test]
    async fn a_refusal_is_reported_and_its_answer_passed_on() {
        let (layer, seen) = recording();
        let client = ClientBuilder::new(layer.layer(answering(403, FORBIDDEN)), "default").build();
        let error = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client, "ns")
            .get("c")
            .await
            .expect_err("refused");
        assert_eq!(crate::errors::status_code(&error), Some(403), "{error}");
        assert!(error.to_string().contains("is forbidden"), "{error}");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].method, Method::GET);
        assert_eq!(seen[0].path, "/api/v1/namespaces/ns/configmaps/c");
        assert!(
            seen[0]
                .message
                .starts_with(r#"roles.rbac.authorization.k8s.io is forbidden: User "system:serviceaccount:olm:olm-operator""#),
            "{}",
            seen[0].message
        );
    }

    #[tokio::test]
    async fn other_answers_are_not_reported() {
        let (layer, seen) = recording();
        let mut service = layer.layer(answering(404, r#"{"kind":"Status","code":404}"#));
        let request = Request::get("/api/v1/namespaces/ns/configmaps/c")
            .body(Body::empty())
            .unwrap();
        let response = service.ready().await.unwrap().call(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert!(seen.lock().unwrap().is_empty());
        assert_eq!(status_message(b"not json"), "not json");
    }
}
