//! The admin server: `/metrics`, `/healthz` and `/readyz` on one port.
//!
//! - `/healthz` answers 200 while the process serves requests; nothing more (a liveness
//!   probe must not fail because the API server is slow).
//! - `/readyz` answers 200 once the [`Readiness`] is ready, 503 with what it still waits
//!   for before that. It does not depend on leadership: standbys are ready too.
//! - `/metrics` is the Prometheus text exposition of the registry passed in.

use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{
    Method, Request, Response, StatusCode,
    header::{ALLOW, CONTENT_TYPE, HeaderValue},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::{rt::TokioIo, server::graceful::GracefulShutdown};
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::{net::TcpListener, task::JoinSet};
use tracing::{debug, info, warn};

use crate::readiness::Readiness;

/// How long open connections get to finish after shutdown begins.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Admin server flags (flatten into the binary's `Args`).
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct AdminArgs {
    /// Where the admin server listens (`/metrics`, `/healthz`, `/readyz`).
    #[arg(long, env = "OLM_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    pub admin_addr: SocketAddr,
}

/// Errors of the admin server.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The address could not be bound.
    #[error("failed to bind the admin server to {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

struct State {
    registry: Registry,
    readiness: Readiness,
}

/// A bound admin server; [`serve`](AdminServer::serve) runs it.
pub struct AdminServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    state: Arc<State>,
}

impl AdminServer {
    /// Binds `addr` (so a taken port fails at startup, not later).
    pub async fn bind(
        addr: SocketAddr,
        registry: Registry,
        readiness: Readiness,
    ) -> Result<Self, AdminError> {
        let bind_error = |source| AdminError::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        Ok(AdminServer {
            listener,
            local_addr,
            state: Arc::new(State { registry, readiness }),
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until `shutdown` resolves, then stops accepting and gives open
    /// connections a few seconds to finish. Spawn it and hold the `JoinHandle`.
    pub async fn serve<F: Future<Output = ()>>(self, shutdown: F) {
        info!(addr = %self.local_addr, "admin server listening");
        let graceful = GracefulShutdown::new();
        let mut connections = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                accepted = self.listener.accept() => {
                    let stream = match accepted {
                        Ok((stream, _peer)) => stream,
                        Err(error) => {
                            // E.g. out of file descriptors: back off instead of spinning.
                            warn!(error = &error as &dyn std::error::Error, "admin server failed to accept");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    let state = self.state.clone();
                    let service = service_fn(move |request| {
                        let response = respond(&state, &request);
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let connection = graceful.watch(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
                    connections.spawn(async move {
                        if let Err(error) = connection.await {
                            debug!(error = &error as &dyn std::error::Error, "admin connection ended with an error");
                        }
                    });
                }
            }
        }
        drop(self.listener);
        if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
            .await
            .is_err()
        {
            debug!("admin connections did not finish in time; closing them");
        }
        connections.shutdown().await;
        info!("admin server stopped");
    }
}

fn respond<B>(state: &State, request: &Request<B>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and HEAD are served\n".into(),
        );
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match request.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" if state.readiness.is_ready() => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => {
            let pending = state.readiness.pending();
            let why = if pending.is_empty() {
                "not ready: nothing has been registered yet\n".to_owned()
            } else {
                format!("not ready: waiting for {}\n", pending.join(", "))
            };
            text(StatusCode::SERVICE_UNAVAILABLE, why)
        }
        "/metrics" => metrics(&state.registry),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /healthz or /readyz\n".into(),
        ),
    }
}

fn metrics(registry: &Registry) -> Response<Full<Bytes>> {
    let encoder = TextEncoder::new();
    let mut body = Vec::new();
    match encoder.encode(&registry.gather(), &mut body) {
        Ok(()) => {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            if let Ok(content_type) = HeaderValue::from_str(encoder.format_type()) {
                response.headers_mut().insert(CONTENT_TYPE, content_type);
            }
            response
        }
        Err(error) => {
            warn!(
                error = &error as &dyn std::error::Error,
                "failed to encode metrics"
            );
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("failed to encode metrics: {error}\n"),
            )
        }
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddrV4};

    use prometheus::IntGauge;
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpStream,
        sync::oneshot,
    };

    use super::*;

    async fn get(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response.split(' ').nth(1).unwrap().parse().unwrap();
        (status, response)
    }

    fn body(response: &str) -> &str {
        response.split_once("\r\n\r\n").map_or("", |(_, body)| body)
    }

    #[tokio::test]
    async fn serves_health_readiness_and_metrics_then_stops() {
        let registry = Registry::new();
        let gauge = IntGauge::new("csv_count", "Number of CSVs").unwrap();
        registry.register(Box::new(gauge.clone())).unwrap();
        gauge.set(3);
        let readiness = Readiness::new();
        let gate = readiness.gate("csv store");

        let loopback = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        let server = AdminServer::bind(loopback, registry, readiness.clone())
            .await
            .unwrap();
        let addr = server.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async {
            let _ = stopped.await;
        }));

        let (status, response) = get(addr, "GET", "/healthz").await;
        assert_eq!((status, body(&response)), (200, "ok\n"));

        let (status, response) = get(addr, "GET", "/readyz").await;
        assert_eq!(status, 503);
        assert!(body(&response).contains("csv store"), "{response}");
        gate.ready();
        let (status, _) = get(addr, "GET", "/readyz").await;
        assert_eq!(status, 200);

        let (status, response) = get(addr, "GET", "/metrics").await;
        assert_eq!(status, 200);
        assert!(response.contains("text/plain; version=0.0.4"), "{response}");
        assert!(body(&response).contains("csv_count 3"), "{response}");

        let (status, response) = get(addr, "HEAD", "/healthz").await;
        assert_eq!((status, body(&response)), (200, ""));
        let (status, _) = get(addr, "GET", "/nope").await;
        assert_eq!(status, 404);
        let (status, response) = get(addr, "POST", "/healthz").await;
        assert_eq!(status, 405);
        assert!(
            response.to_ascii_lowercase().contains("allow: get, head"),
            "{response}"
        );

        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "the listener must be closed after shutdown"
        );
    }

    #[tokio::test]
    async fn shutdown_waits_for_an_open_keep_alive_connection_to_close() {
        let loopback = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        let server = AdminServer::bind(loopback, Registry::new(), Readiness::new())
            .await
            .unwrap();
        let addr = server.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async {
            let _ = stopped.await;
        }));
        // A keep-alive client that stays connected: graceful shutdown closes it.
        let mut idle = TcpStream::connect(addr).await.unwrap();
        idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 256];
        let n = idle.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
        let mut rest = Vec::new();
        let _ = idle.read_to_end(&mut rest).await;
    }

    #[tokio::test]
    async fn a_taken_port_fails_at_bind() {
        let loopback = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        let first = AdminServer::bind(loopback, Registry::new(), Readiness::new())
            .await
            .unwrap();
        let taken = first.local_addr();
        let error = AdminServer::bind(taken, Registry::new(), Readiness::new())
            .await
            .err()
            .unwrap();
        assert!(error.to_string().contains(&taken.to_string()));
    }
}
