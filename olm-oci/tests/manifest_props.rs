//! Property tests of how a pull reads manifests and image indexes, on generated input served by
//! a small registry on loopback: a valid one-layer image whose manifest is mutated (media types,
//! descriptors with bad digests and sizes, fields removed or of other types), served alone or
//! behind an image index (platforms odd or missing, an index inside the index, descriptors
//! pointing nowhere).
//!
//! The properties: a pull never panics; a refusal is an error that names the image and says
//! why; a layer larger than the limit, declared or served, is refused with the limit's error;
//! an accepted pull has the digest of a manifest that was served.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, OnceLock},
    time::Duration,
};

use olm_oci::{DockerConfig, LayerError, Limits, PullError, PullOptions, Puller, tar_gz_layer};
use proptest::prelude::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const LAYER_LIMIT: u64 = 64 * 1024;

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// What the registry serves: by path, the content type and body.
type Blobs = HashMap<String, (String, Vec<u8>)>;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

async fn answer(mut stream: TcpStream, blobs: &Blobs) {
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
    let not_found = (
        "application/json".to_owned(),
        br#"{"errors":[{"code":"NAME_UNKNOWN","message":"unknown"}]}"#.to_vec(),
    );
    let ((content_type, body), status) = match (path, blobs.get(path)) {
        ("/v2/", _) => (("application/json".to_owned(), b"{}".to_vec()), "200 OK"),
        (_, Some(found)) => (found.clone(), "200 OK"),
        _ => (not_found, "404 Not Found"),
    };
    let extra = if path.contains("/manifests/") && status == "200 OK" {
        format!("Docker-Content-Digest: {}\r\n", digest(&body))
    } else {
        String::new()
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(header.as_bytes()).await;
    if method != "HEAD" {
        let _ = stream.write_all(&body).await;
    }
    let _ = stream.flush().await;
}

/// Serves `blobs` until the returned task is aborted; returns its address.
async fn serve(blobs: Blobs) -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = listener.local_addr().expect("an address").to_string();
    let blobs = Arc::new(blobs);
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let blobs = blobs.clone();
            tokio::spawn(async move { answer(stream, &blobs).await });
        }
    });
    (address, task)
}

const FILE: &str = "configs/catalog.json";

/// The config and layer of the image, and the manifest that describes them.
fn parts() -> (Vec<u8>, Vec<u8>, Value) {
    let (layer, _) = tar_gz_layer(&[(
        PathBuf::from(FILE),
        br#"{"schema":"olm.package","name":"demo"}"#.to_vec(),
    )])
    .expect("a layer");
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": {"operators.operatorframework.io.index.configs.v1": "/configs"}},
        "rootfs": {"type": "layers", "diff_ids": []},
    }))
    .unwrap();
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(&config), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest(&layer), "size": layer.len()}],
    });
    (config, layer, manifest)
}

fn index(manifest_digest: &str, size: usize, platforms: &[Value]) -> Value {
    let manifests: Vec<Value> = platforms
        .iter()
        .map(|platform| {
            let mut d = json!({"mediaType": MANIFEST, "digest": manifest_digest, "size": size});
            if !platform.is_null() {
                d["platform"] = platform.clone();
            }
            d
        })
        .collect();
    json!({"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests})
}

/// Odd values for a manifest's fields: bad digests and sizes, media types, descriptors.
fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(json!(-1)),
        Just(json!(0)),
        Just(json!(i64::MAX)),
        Just(json!(u64::MAX)),
        Just(json!(1.5)),
        Just(json!("12")),
        Just(json!("")),
        Just(json!("sha256:")),
        Just(json!("sha256:../../etc/passwd")),
        Just(json!(format!("sha256:{}", "0".repeat(64)))),
        Just(json!(format!("SHA256:{}", "A".repeat(64)))),
        Just(json!("sha512:abc")),
        Just(json!("md5:x")),
        Just(json!(MANIFEST)),
        Just(json!(INDEX)),
        Just(json!("application/vnd.docker.distribution.manifest.v2+json")),
        Just(json!("application/vnd.docker.distribution.manifest.list.v2+json")),
        Just(json!("text/plain")),
        Just(json!([])),
        Just(json!({})),
        Just(
            json!([{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:00", "size": 1}])
        ),
        Just(json!({"os": "linux", "architecture": "amd64"})),
        "[ -~]{0,16}".prop_map(Value::String),
    ]
}

fn pointer() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "/schemaVersion",
        "/mediaType",
        "/config",
        "/config/digest",
        "/config/size",
        "/config/mediaType",
        "/layers",
        "/layers/0",
        "/layers/0/digest",
        "/layers/0/size",
        "/layers/0/mediaType",
        "/layers/0/urls",
        "/annotations",
    ])
}

/// One change of the manifest: a field set to an odd value, or removed.
fn change() -> impl Strategy<Value = (&'static str, Option<Value>)> {
    (
        pointer(),
        prop_oneof![3 => odd_value().prop_map(Some), 1 => Just(None)],
    )
}

fn apply(manifest: &mut Value, (pointer, value): &(&'static str, Option<Value>)) {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    let Some(parent) = manifest.pointer_mut(parent) else {
        return;
    };
    match (parent, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(key.to_owned(), v.clone());
        }
        (Value::Object(map), None) => {
            map.remove(key);
        }
        (Value::Array(items), v) => {
            if let Ok(i) = key.parse::<usize>()
                && i < items.len()
            {
                match v {
                    Some(v) => items[i] = v.clone(),
                    None => {
                        items.remove(i);
                    }
                }
            }
        }
        _ => {}
    }
}

/// How the image is served.
#[derive(Debug, Clone)]
enum Shape {
    /// The manifest at the tag.
    Manifest,
    /// An index at the tag, one entry per platform (null: no platform).
    Index(Vec<Value>),
    /// An index at the tag whose entry is another index.
    Nested,
}

fn shape() -> impl Strategy<Value = Shape> {
    let platform = prop_oneof![
        Just(Value::Null),
        Just(json!({"os": "linux", "architecture": "amd64"})),
        Just(json!({"os": "linux", "architecture": "arm64", "variant": "v8"})),
        Just(json!({"os": "windows", "architecture": "amd64"})),
        Just(json!({"os": "", "architecture": ""})),
        Just(json!({"os": 1})),
        Just(json!("linux/amd64")),
    ];
    prop_oneof![
        2 => Just(Shape::Manifest),
        2 => proptest::collection::vec(platform, 0..4).prop_map(Shape::Index),
        1 => Just(Shape::Nested),
    ]
}

/// What the registry serves for `manifest` served as `shape`; the tag is `demo/img:v1`.
fn blobs(config: &[u8], layer: &[u8], manifest: &Value, shape: &Shape) -> (Blobs, Vec<String>) {
    let mut blobs = Blobs::new();
    let blob = |d: String| format!("/v2/demo/img/blobs/{d}");
    let at = |r: &str| format!("/v2/demo/img/manifests/{r}");
    blobs.insert(
        blob(digest(config)),
        ("application/octet-stream".into(), config.to_vec()),
    );
    blobs.insert(
        blob(digest(layer)),
        ("application/octet-stream".into(), layer.to_vec()),
    );
    let manifest = serde_json::to_vec(manifest).unwrap();
    let manifest_digest = digest(&manifest);
    blobs.insert(at(&manifest_digest), (MANIFEST.into(), manifest.clone()));
    let mut served = vec![manifest_digest.clone()];
    match shape {
        Shape::Manifest => {
            blobs.insert(at("v1"), (MANIFEST.into(), manifest));
        }
        Shape::Index(platforms) => {
            let index = serde_json::to_vec(&index(&manifest_digest, manifest.len(), platforms)).unwrap();
            blobs.insert(at("v1"), (INDEX.into(), index));
        }
        Shape::Nested => {
            let inner = serde_json::to_vec(&index(&manifest_digest, manifest.len(), &[Value::Null])).unwrap();
            let inner_digest = digest(&inner);
            let mut outer = index(
                &inner_digest,
                inner.len(),
                &[json!({"os": "linux", "architecture": "amd64"})],
            );
            outer["manifests"][0]["mediaType"] = json!(INDEX);
            blobs.insert(at(&inner_digest), (INDEX.into(), inner));
            blobs.insert(at("v1"), (INDEX.into(), serde_json::to_vec(&outer).unwrap()));
            served.push(inner_digest);
        }
    }
    (blobs, served)
}

fn puller() -> Puller {
    Puller::new(PullOptions {
        timeout: Duration::from_secs(2),
        attempts: 1,
        backoff: Duration::from_millis(1),
        limits: Limits {
            layer_bytes: LAYER_LIMIT,
            ..Limits::default()
        },
        ..PullOptions::default()
    })
}

/// Pulls the image served from `blobs`: never panics; a refusal names the image and says why;
/// an accepted pull is of a served manifest and holds the layer's file.
fn pull(blobs: Blobs, served: &[String]) -> Result<olm_oci::Image, PullError> {
    runtime().block_on(async {
        let (address, server) = serve(blobs).await;
        let image = format!("{address}/demo/img:v1");
        let result = puller().pull(&image, &DockerConfig::default()).await;
        server.abort();
        match &result {
            Ok(pulled) => {
                assert!(
                    served.contains(&pulled.digest),
                    "{} was not served",
                    pulled.digest
                );
            }
            Err(error) => {
                let message = error.to_string();
                assert!(
                    message.contains(&image),
                    "the error does not name {image}: {message}"
                );
                assert!(message.len() > image.len() + 20, "no cause in {message:?}");
            }
        }
        result
    })
}

#[test]
fn the_valid_image_pulls_in_every_shape() {
    let (config, layer, manifest) = parts();
    for shape in [
        Shape::Manifest,
        Shape::Index(vec![json!({"os": "linux", "architecture": "amd64"})]),
        Shape::Index(vec![Value::Null]),
    ] {
        let (blobs, served) = blobs(&config, &layer, &manifest, &shape);
        let pulled = pull(blobs, &served).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        assert!(
            pulled.files.get(FILE).is_some(),
            "{shape:?}: the layer's file is missing"
        );
    }
}

#[test]
fn a_layer_over_the_limit_is_refused_declared_or_served() {
    let (config, _, manifest) = parts();
    let big: Vec<u8> = (0..LAYER_LIMIT as usize * 2)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    // Declared too large: refused before it is fetched.
    let mut declared = manifest.clone();
    declared["layers"][0]["size"] = json!(LAYER_LIMIT + 1);
    // Declared small, served large (with its true digest).
    let mut served_large = manifest;
    served_large["layers"][0]["digest"] = json!(digest(&big));
    served_large["layers"][0]["size"] = json!(100);
    for manifest in [declared, served_large] {
        let (blobs, served) = blobs(&config, &big, &manifest, &Shape::Manifest);
        let error = pull(blobs, &served).expect_err("over the limit");
        assert!(
            matches!(&error, PullError::Content { source: LayerError::TooLarge { limit, .. }, .. } if *limit == LAYER_LIMIT),
            "{error}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_changed_manifest_pulls_or_fails_naming_the_image(
        changes in proptest::collection::vec(change(), 1..4),
        shape in shape(),
    ) {
        let (config, layer, mut manifest) = parts();
        for c in &changes {
            apply(&mut manifest, c);
        }
        let (blobs, served) = blobs(&config, &layer, &manifest, &shape);
        let _ = pull(blobs, &served);
    }

    #[test]
    fn arbitrary_bytes_as_the_manifest_fail_naming_the_image(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
        as_index in any::<bool>(),
    ) {
        let mut blobs = Blobs::new();
        blobs.insert(
            "/v2/demo/img/manifests/v1".into(),
            ((if as_index { INDEX } else { MANIFEST }).into(), bytes),
        );
        prop_assert!(pull(blobs, &[]).is_err());
    }
}
