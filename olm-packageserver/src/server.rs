//! The HTTPS server: TLS with the shared serving certificate, the front proxy's
//! client certificate checked on every connection (each connection takes the
//! TLS configuration current when it is accepted: [`super::serving`]), answers
//! from [`super::api`] and [`super::icon`], and watch streams that follow the
//! catalog store.

use std::{
    collections::{BTreeMap, VecDeque},
    convert::Infallible,
    net::SocketAddr,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::UnsyncBoxBody};
use hyper::{
    Request, Response,
    body::{Frame, Incoming},
    service::service_fn,
};
use hyper_util::rt::TokioIo;
use olm_api::packages::{PackageManifest, PackagePlan};
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::watch};
use tokio_rustls::TlsAcceptor;

use super::{
    api::{self, Answer, Format, Query},
    icon::{self, IconAnswer},
    plan::PlanError,
    serving::Serving,
    view::{Key, Packages},
};

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The largest PackagePlan body read.
const MAX_PLAN_BODY: usize = 1 << 20;

/// Who is on the other end of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The API server's front proxy (a certificate of the request-header CA with an allowed name).
    FrontProxy,
    /// No client certificate.
    Anonymous,
    /// A certificate of the CA, but with a name not allowed.
    NotAllowed(String),
}

/// Serves `packages` on `listener` with the TLS configuration `serving`
/// holds when each connection comes, until the task is dropped.
pub async fn serve(listener: TcpListener, serving: watch::Receiver<Arc<Serving>>, packages: Packages) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "package server: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let current = serving.borrow().clone();
        let packages = packages.clone();
        tokio::spawn(async move {
            let acceptor = TlsAcceptor::from(current.tls.clone());
            let stream = match acceptor.accept(tcp).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "package server: TLS handshake failed");
                    return;
                }
            };
            let caller = caller(stream.get_ref().1.peer_certificates(), &current.allowed_names);
            let service = service_fn(move |request: Request<Incoming>| {
                let (packages, caller) = (packages.clone(), caller.clone());
                async move { Ok::<_, Infallible>(respond(&packages, &caller, request).await) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "package server: connection ended");
            }
        });
    }
}

/// Binds `addr`.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

fn caller(certs: Option<&[rustls::pki_types::CertificateDer<'static>]>, allowed: &[String]) -> Caller {
    let Some(leaf) = certs.and_then(<[_]>::first) else {
        return Caller::Anonymous;
    };
    let name = olm_certs::common_name(leaf).unwrap_or_default();
    if allowed.is_empty() || allowed.contains(&name) {
        Caller::FrontProxy
    } else {
        Caller::NotAllowed(name)
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// Answers one request: health, then (from the front proxy only) a plan or a read.
async fn respond(packages: &Packages, caller: &Caller, request: Request<Incoming>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    if matches!(path.as_str(), "/healthz" | "/readyz" | "/livez") {
        return text(200, "ok");
    }
    if let Some(denied) = refusal(caller) {
        return json_response(denied);
    }
    let Some((namespace, package)) = api::plan_path(&path) else {
        return handle(packages, &request);
    };
    if request.method() != http::Method::POST {
        return json_response(api::status(
            405,
            "MethodNotAllowed",
            &format!(
                "{} is not supported: a plan is asked for with POST",
                request.method()
            ),
        ));
    }
    let body = match Limited::new(request.into_body(), MAX_PLAN_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return json_response(api::status(
                400,
                "BadRequest",
                &format!("cannot read the body: {e}"),
            ));
        }
    };
    let result = serde_json::from_slice::<PackagePlan>(&body)
        .map_err(|e| PlanError::BadBody(e.to_string()))
        .and_then(|request| packages.plan(namespace, package, request));
    match result {
        Ok(plan) => json_response(Answer::Json(201, serde_json::to_value(plan).unwrap_or_default())),
        Err(e) => {
            let (code, reason) = e.code();
            json_response(api::status(code, reason, &e.to_string()))
        }
    }
}

/// Why a caller other than the API server's front proxy is turned away.
fn refusal(caller: &Caller) -> Option<Answer> {
    match caller {
        Caller::FrontProxy => None,
        Caller::Anonymous => Some(api::status(
            401,
            "Unauthorized",
            "no client certificate: PackageManifests are served through the Kubernetes API server",
        )),
        Caller::NotAllowed(name) => Some(api::status(
            403,
            "Forbidden",
            &format!("client certificate {name:?} is not among the API server's requestheader-allowed-names"),
        )),
    }
}

fn handle<B>(packages: &Packages, request: &Request<B>) -> Response<Body> {
    let path = request.uri().path();
    let query = parse_query(request.uri().query().unwrap_or(""));
    let seconds = query.get("timeoutSeconds").and_then(|s| s.parse::<u64>().ok());
    let watch_timeout = Duration::from_secs(seconds.unwrap_or(30 * 60).clamp(1, 60 * 60));
    let accept = request
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let list = |namespace: Option<&str>| {
        (
            packages.list(namespace),
            packages.catalogs.generation().to_string(),
        )
    };
    match api::answer(request.method().as_str(), path, &query, accept, list, now()) {
        Answer::Json(code, body) => json_response(Answer::Json(code, body)),
        Answer::Watch(query) => watch_response(packages.clone(), query, watch_timeout),
        Answer::Icon { namespace, name } => {
            let if_none_match = request
                .headers()
                .get(http::header::IF_NONE_MATCH)
                .and_then(|v| v.to_str().ok());
            let found = packages.icon(&namespace, &name);
            icon_response(icon::answer(found, if_none_match), &name)
        }
    }
}

fn icon_response(answer: IconAnswer, name: &str) -> Response<Body> {
    let (code, media_type, data, etag) = match answer {
        IconAnswer::NotFound => return json_response(api::not_found(name)),
        IconAnswer::NotModified { etag } => (304, None, Bytes::new(), Some(etag)),
        IconAnswer::Image {
            media_type,
            data,
            etag,
        } => (200, Some(media_type), data, etag),
    };
    let mut response = Response::new(Full::new(data).boxed_unsync());
    *response.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::OK);
    let headers = response.headers_mut();
    if let Some(value) = media_type.and_then(|m| http::HeaderValue::from_str(&m).ok()) {
        headers.insert(http::header::CONTENT_TYPE, value);
    }
    if let Some(value) = etag.and_then(|e| http::HeaderValue::from_str(&e).ok()) {
        headers.insert(http::header::ETAG, value);
    }
    response
}

fn text(code: u16, body: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed_unsync());
    *response.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::OK);
    response
}

fn json_response(answer: Answer) -> Response<Body> {
    let Answer::Json(code, body) = answer else {
        return text(500, "internal error");
    };
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(bytes)).boxed_unsync());
    *response.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// What a watch has sent: each PackageManifest as last written (resource version aside).
struct WatchState {
    packages: Packages,
    query: Query,
    changes: watch::Receiver<u64>,
    known: BTreeMap<Key, Value>,
    pending: VecDeque<Bytes>,
    deadline: tokio::time::Instant,
}

impl WatchState {
    /// Queues an event for each PackageManifest added, changed or removed since last time.
    fn diff(&mut self) {
        let generation = self.packages.catalogs.generation().to_string();
        let now = now();
        let current: BTreeMap<Key, PackageManifest> = self
            .packages
            .keyed(self.query.namespace.as_deref())
            .into_iter()
            .filter(|(_, m)| self.query.matches(m))
            .collect();
        let mut events = Vec::new();
        for (key, manifest) in &current {
            let value = serde_json::to_value(manifest).unwrap_or_default();
            match self.known.get(key) {
                None => events.push(("ADDED", manifest.clone())),
                Some(old) if *old != value => events.push(("MODIFIED", manifest.clone())),
                Some(_) => {}
            }
            self.known.insert(key.clone(), value);
        }
        let gone: Vec<Key> = self
            .known
            .keys()
            .filter(|k| !current.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            if let Some(old) = self.known.remove(&key)
                && let Ok(manifest) = serde_json::from_value::<PackageManifest>(old)
            {
                events.push(("DELETED", manifest));
            }
        }
        for (kind, mut manifest) in events {
            manifest.metadata.resource_version = Some(generation.clone());
            let object = match self.query.format {
                Format::Object => serde_json::to_value(&manifest).unwrap_or_default(),
                format @ Format::Table(_) => {
                    api::render(vec![manifest], format, Some(&generation), now, true)
                }
            };
            let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
            line.push(b'\n');
            self.pending.push_back(Bytes::from(line));
        }
    }
}

fn watch_response(packages: Packages, query: Query, timeout: Duration) -> Response<Body> {
    let mut changes = packages.catalogs.subscribe();
    changes.borrow_and_update();
    let mut state = WatchState {
        packages,
        query,
        changes,
        known: BTreeMap::new(),
        pending: VecDeque::new(),
        deadline: tokio::time::Instant::now() + timeout,
    };
    // A client that resumes at the current version has seen everything; any
    // other starts with every PackageManifest as ADDED.
    let current = state.packages.catalogs.generation().to_string();
    state.diff();
    if state.query.resource_version.as_deref() == Some(current.as_str()) {
        state.pending.clear();
    }
    let stream = futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.pending.pop_front() {
                return Some((event, state));
            }
            match tokio::time::timeout_at(state.deadline, state.changes.changed()).await {
                Ok(Ok(())) => {
                    state.changes.borrow_and_update();
                    state.diff();
                }
                _ => return None,
            }
        }
    });
    let body = StreamBody::new(stream.map(|bytes| Ok::<_, Infallible>(Frame::data(bytes))));
    let mut response = Response::new(BodyExt::boxed_unsync(body));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// Parses a query string (`a=b&c=d`, percent- and `+`-decoded).
pub fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(high << 4 | low);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_decoded() {
        let q = parse_query("labelSelector=catalog%3Ddemo%2Cprovider+in+(a)&watch=1&x");
        assert_eq!(q["labelSelector"], "catalog=demo,provider in (a)");
        assert_eq!(q["watch"], "1");
        assert_eq!(q["x"], "");
        assert_eq!(decode("100%"), "100%");
    }
}
