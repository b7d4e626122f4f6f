//! A registry that goes away in the middle of a pull: the connection drops
//! halfway through a layer. The pull is retried with backoff and recovers once
//! the registry serves again; a registry that never comes back ends in
//! `Unreachable`, naming the image and the attempts. The registry here is a
//! small HTTP server on loopback speaking the distribution API's read side.

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use olm_oci::{DockerConfig, PullError, PullOptions, Puller, tar_gz_layer};
use sha2::{Digest, Sha256};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// One image: its manifest, config and layer, by digest.
struct Image {
    manifest: Vec<u8>,
    manifest_digest: String,
    config: Vec<u8>,
    config_digest: String,
    layer: Vec<u8>,
    layer_digest: String,
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

fn image() -> Image {
    let (layer, _) = tar_gz_layer(&[(
        PathBuf::from("configs/catalog.json"),
        br#"{"schema":"olm.package","name":"demo"}"#.repeat(2000),
    )])
    .expect("a layer");
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": {"operators.operatorframework.io.index.configs.v1": "/configs"}},
        "rootfs": {"type": "layers", "diff_ids": []},
    }))
    .expect("config");
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(&config), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest(&layer), "size": layer.len()}],
    }))
    .expect("manifest");
    Image {
        manifest_digest: digest(&manifest),
        config_digest: digest(&config),
        layer_digest: digest(&layer),
        manifest,
        config,
        layer,
    }
}

/// Serves `image` as `demo/catalog:v1`. The first `drops` requests for its
/// layer get their headers and half the body, then the connection closes.
async fn serve(image: Arc<Image>, drops: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = listener.local_addr().expect("an address").to_string();
    let layer_requests = Arc::new(AtomicUsize::new(0));
    let counter = layer_requests.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (image, counter) = (image.clone(), counter.clone());
            tokio::spawn(async move { answer(stream, &image, &counter, drops).await });
        }
    });
    (address, layer_requests)
}

async fn answer(mut stream: TcpStream, image: &Image, layer_requests: &AtomicUsize, drops: usize) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (status, content_type, body, extra): (&str, &str, &[u8], String) = match path {
        "/v2/" => ("200 OK", "application/json", b"{}", String::new()),
        p if p == "/v2/demo/catalog/manifests/v1" || p.ends_with(&image.manifest_digest) => (
            "200 OK",
            "application/vnd.oci.image.manifest.v1+json",
            &image.manifest,
            format!("Docker-Content-Digest: {}\r\n", image.manifest_digest),
        ),
        p if p.ends_with(&image.config_digest) => {
            ("200 OK", "application/octet-stream", &image.config, String::new())
        }
        p if p.ends_with(&image.layer_digest) => {
            let n = layer_requests.fetch_add(1, Ordering::SeqCst);
            if n < drops {
                // Going away mid-layer: the full length announced, half of it sent.
                let header = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    image.layer.len()
                );
                let _ = stream.write_all(header.as_bytes()).await;
                let _ = stream.write_all(&image.layer[..image.layer.len() / 2]).await;
                let _ = stream.flush().await;
                return;
            }
            ("200 OK", "application/octet-stream", &image.layer, String::new())
        }
        _ => (
            "404 Not Found",
            "application/json",
            br#"{"errors":[{"code":"NAME_UNKNOWN","message":"unknown"}]}"#,
            String::new(),
        ),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(header.as_bytes()).await;
    if method != "HEAD" {
        let _ = stream.write_all(body).await;
    }
    let _ = stream.flush().await;
}

fn options() -> PullOptions {
    PullOptions {
        timeout: Duration::from_secs(5),
        attempts: 3,
        backoff: Duration::from_millis(50),
        ..PullOptions::default()
    }
}

#[tokio::test]
async fn a_pull_cut_off_mid_layer_is_retried_and_recovers() {
    let image = Arc::new(image());
    let (address, layer_requests) = serve(image.clone(), 2).await;
    let reference = format!("{address}/demo/catalog:v1");
    let pulled = Puller::new(options())
        .pull(&reference, &DockerConfig::default())
        .await
        .expect("the third attempt gets the whole layer");
    assert_eq!(pulled.digest, image.manifest_digest);
    assert_eq!(
        layer_requests.load(Ordering::SeqCst),
        3,
        "two cut-off attempts, then one whole"
    );
    assert_eq!(
        pulled.files.get("configs/catalog.json").map(<[u8]>::len),
        Some(br#"{"schema":"olm.package","name":"demo"}"#.len() * 2000)
    );
}

#[tokio::test]
async fn a_registry_that_stays_away_is_unreachable_after_every_attempt() {
    let image = Arc::new(image());
    let (address, layer_requests) = serve(image, usize::MAX).await;
    let reference = format!("{address}/demo/catalog:v1");
    let error = Puller::new(options())
        .pull(&reference, &DockerConfig::default())
        .await
        .expect_err("every attempt is cut off");
    assert!(error.is_transient(), "{error}");
    let PullError::Unreachable { image, attempts, .. } = &error else {
        panic!("not Unreachable: {error}")
    };
    assert_eq!((image.as_str(), *attempts), (reference.as_str(), 3));
    assert_eq!(layer_requests.load(Ordering::SeqCst), 3);
    println!("registry gone: {error}");
}
