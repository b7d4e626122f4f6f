//! Pulling one image: manifest (an index resolved to one platform), config
//! labels, and layers read into memory, with retries, timeouts and limits.

use std::{collections::BTreeMap, time::Duration};

use futures::TryStreamExt;
use oci_client::{
    Client, Reference,
    client::{ClientConfig, ClientProtocol, Config, ImageLayer},
    errors::OciDistributionError,
    manifest::{IMAGE_CONFIG_MEDIA_TYPE, IMAGE_LAYER_GZIP_MEDIA_TYPE, ImageIndexEntry},
    secrets::RegistryAuth,
};
use sha2::{Digest, Sha256};

use crate::{DockerConfig, Files, LayerError, Limits, Mirrors};

/// How images are pulled.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// Time for one attempt at one request (connect and each read).
    pub timeout: Duration,
    /// Attempts per reference before giving up on a transient failure.
    pub attempts: u32,
    /// Wait after the first failed attempt; doubled after each further one.
    pub backoff: Duration,
    /// Size limits.
    pub limits: Limits,
    /// Registries (`host:port`) spoken to over plain HTTP, e.g. a registry on loopback.
    pub insecure_registries: Vec<String>,
    /// Mirrors tried before the source of a reference by digest.
    pub mirrors: Mirrors,
}

impl Default for PullOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            attempts: 4,
            backoff: Duration::from_millis(200),
            limits: Limits::default(),
            insecure_registries: Vec::new(),
            mirrors: Mirrors::default(),
        }
    }
}

/// A pulled image.
#[derive(Debug, Clone)]
pub struct Image {
    /// The reference it was pulled from (a mirror's, when a mirror served it).
    pub pulled_from: String,
    /// The digest of its image manifest.
    pub digest: String,
    /// The labels of its config.
    pub labels: BTreeMap<String, String>,
    /// Its files, all layers applied.
    pub files: Files,
}

/// Why an image could not be pulled.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The reference does not parse.
    #[error("image reference {image:?} is not valid: {message}")]
    Reference {
        /// The reference.
        image: String,
        /// Why.
        message: String,
    },
    /// The registry refused (authentication, not found, bad content): retrying
    /// does not help until something changes.
    #[error("pulling image {image}: the registry answered: {message}")]
    Refused {
        /// The image.
        image: String,
        /// The registry's answer.
        message: String,
    },
    /// The registry could not be reached or failed, every attempt.
    #[error("pulling image {image}: the registry is unreachable after {attempts} attempts: {message}")]
    Unreachable {
        /// The image.
        image: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        message: String,
    },
    /// The content is too large or not a readable layer.
    #[error("pulling image {image}: {source}")]
    Content {
        /// The image.
        image: String,
        /// Why.
        source: LayerError,
    },
}

impl PullError {
    /// Whether trying again later may succeed (the registry was unreachable).
    pub fn is_transient(&self) -> bool {
        matches!(self, PullError::Unreachable { .. })
    }
}

/// One attempt's failure, before it is known whether to retry.
enum Failure {
    Transient(String),
    Terminal(PullError),
}

fn classify(image: &str, error: OciDistributionError) -> Failure {
    use OciDistributionError as E;
    match error {
        E::RequestError(e) => Failure::Transient(e.to_string()),
        E::IoError(e) => Failure::Transient(e.to_string()),
        E::ServerError { code, .. } if code >= 500 || code == 429 => Failure::Transient(error.to_string()),
        E::RegistryError { ref envelope, .. }
            if envelope
                .errors
                .iter()
                .any(|e| e.code == oci_client::errors::OciErrorCode::Toomanyrequests) =>
        {
            Failure::Transient(error.to_string())
        }
        other => Failure::Terminal(PullError::Refused {
            image: image.to_owned(),
            message: other.to_string(),
        }),
    }
}

/// Picks one manifest of an image index: this machine's platform, else
/// linux/amd64, else the first (bundle and catalog content is the same on all).
fn pick_platform(entries: &[ImageIndexEntry]) -> Option<String> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let is = |e: &&ImageIndexEntry, a: &str| {
        e.platform
            .as_ref()
            .is_some_and(|p| p.os.to_string() == "linux" && p.architecture.to_string() == a)
    };
    entries
        .iter()
        .find(|e| is(e, arch))
        .or_else(|| entries.iter().find(|e| is(e, "amd64")))
        .or_else(|| entries.first())
        .map(|e| e.digest.clone())
}

/// Chooses, from an image's labels, the directories of it to keep.
pub type Select<'a> = dyn Fn(&BTreeMap<String, String>) -> Vec<std::path::PathBuf> + Send + Sync + 'a;

/// Pulls images from OCI registries.
///
/// Each pull gets a client of its own: an oci-client `Client` keeps the first
/// credentials it was given per registry, and pulls here carry different pull
/// secrets (a secret added after a refused pull must take effect).
pub struct Puller {
    options: PullOptions,
}

/// Whether a registry (`host[:port]`) is on this machine.
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => registry.split(':').next().unwrap_or(registry),
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl std::fmt::Debug for Puller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Puller").field("options", &self.options).finish()
    }
}

impl Puller {
    /// A puller with these options.
    pub fn new(options: PullOptions) -> Self {
        // reqwest is built without a TLS provider of its own: use ring, as kube does.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Another thread may have installed one meanwhile; either is ring.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        Self { options }
    }

    /// A client for the registry of `reference`: plain HTTP for registries on
    /// loopback (as a container runtime treats 127.0.0.0/8 as insecure) and for
    /// the configured insecure registries, HTTPS otherwise.
    fn client_for(&self, reference: &Reference) -> Client {
        let protocol = if is_loopback(reference.resolve_registry()) {
            ClientProtocol::Http
        } else if self.options.insecure_registries.is_empty() {
            ClientProtocol::Https
        } else {
            ClientProtocol::HttpsExcept(self.options.insecure_registries.clone())
        };
        Client::new(ClientConfig {
            protocol,
            platform_resolver: Some(Box::new(pick_platform)),
            read_timeout: Some(self.options.timeout),
            connect_timeout: Some(self.options.timeout),
            ..ClientConfig::default()
        })
    }

    /// Pushes a one-layer image (a gzip tar `layer`, config `labels`) to `image`
    /// and returns the digest of its manifest. For tools and tests that build
    /// bundle and catalog images.
    pub async fn push_one_layer(
        &self,
        image: &str,
        layer: Vec<u8>,
        uncompressed_digest: &str,
        labels: &BTreeMap<String, String>,
        secrets: &DockerConfig,
    ) -> Result<String, PullError> {
        let (reference, auth) = parse(image, secrets)?;
        let config = serde_json::json!({
            "architecture": "amd64",
            "os": "linux",
            "config": {"Labels": labels},
            "rootfs": {"type": "layers", "diff_ids": [uncompressed_digest]},
        });
        let refused = |e: OciDistributionError| PullError::Refused {
            image: image.to_owned(),
            message: e.to_string(),
        };
        let client = self.client_for(&reference);
        client
            .push(
                &reference,
                &[ImageLayer::new(
                    layer,
                    IMAGE_LAYER_GZIP_MEDIA_TYPE.to_owned(),
                    None,
                )],
                Config::new(
                    config.to_string().into_bytes(),
                    IMAGE_CONFIG_MEDIA_TYPE.to_owned(),
                    None,
                ),
                &auth,
                None,
            )
            .await
            .map_err(refused)?;
        client
            .fetch_manifest_digest(&reference, &auth)
            .await
            .map_err(refused)
    }

    /// The options.
    pub fn options(&self) -> &PullOptions {
        &self.options
    }

    /// Pulls `image` (by tag or digest), trying its mirrors first, with the
    /// credentials `secrets` hold for each registry.
    pub async fn pull(&self, image: &str, secrets: &DockerConfig) -> Result<Image, PullError> {
        self.pull_selected(image, secrets, &|_| Vec::new()).await
    }

    /// Like [`Puller::pull`], keeping only the files under the directories that
    /// `select` names from the image's labels (everything when it names none):
    /// e.g. the `configs` directory of a catalog image, not its `opm` binary.
    pub async fn pull_selected(
        &self,
        image: &str,
        secrets: &DockerConfig,
        select: &Select<'_>,
    ) -> Result<Image, PullError> {
        let mut last = None;
        for candidate in self.options.mirrors.candidates(image) {
            match self.pull_with_retries(&candidate, secrets, select).await {
                Ok(image) => return Ok(image),
                Err(error) => {
                    tracing::debug!(image = %candidate, %error, "pull failed");
                    last = Some(error);
                }
            }
        }
        Err(last.expect("candidates always include the image itself"))
    }

    async fn pull_with_retries(
        &self,
        image: &str,
        secrets: &DockerConfig,
        select: &Select<'_>,
    ) -> Result<Image, PullError> {
        let (reference, auth) = parse(image, secrets)?;
        let mut wait = self.options.backoff;
        let attempts = self.options.attempts.max(1);
        let mut message = String::new();
        for attempt in 1..=attempts {
            match self.pull_once(image, &reference, &auth, select).await {
                Ok(image) => return Ok(image),
                Err(Failure::Terminal(error)) => return Err(error),
                Err(Failure::Transient(m)) => {
                    tracing::info!(image, attempt, error = %m, "registry unreachable; retrying");
                    message = m;
                }
            }
            if attempt < attempts {
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
        }
        Err(PullError::Unreachable {
            image: image.to_owned(),
            attempts,
            message,
        })
    }

    async fn pull_once(
        &self,
        image: &str,
        reference: &Reference,
        auth: &RegistryAuth,
        select: &Select<'_>,
    ) -> Result<Image, Failure> {
        let limits = self.options.limits;
        let client = self.client_for(reference);
        let (manifest, digest, config) = client
            .pull_manifest_and_config(reference, auth)
            .await
            .map_err(|e| classify(image, e))?;
        let labels = labels_of(&config);
        let mut files = Files::keeping(select(&labels));
        for layer in &manifest.layers {
            let content_error = |source| {
                Failure::Terminal(PullError::Content {
                    image: image.to_owned(),
                    source,
                })
            };
            if layer.size < 0 || layer.size as u64 > limits.layer_bytes {
                return Err(content_error(LayerError::TooLarge {
                    what: format!("layer {} ({} bytes)", layer.digest, layer.size),
                    limit: limits.layer_bytes,
                }));
            }
            let sized = client
                .pull_blob_stream(reference, layer)
                .await
                .map_err(|e| classify(image, e))?;
            let mut bytes = Vec::with_capacity(layer.size as usize);
            let mut stream = sized.stream;
            while let Some(chunk) = stream
                .try_next()
                .await
                .map_err(|e| Failure::Transient(format!("reading layer {}: {e}", layer.digest)))?
            {
                if (bytes.len() + chunk.len()) as u64 > limits.layer_bytes {
                    return Err(content_error(LayerError::TooLarge {
                        what: format!("layer {}", layer.digest),
                        limit: limits.layer_bytes,
                    }));
                }
                bytes.extend_from_slice(&chunk);
            }
            let actual = format!("sha256:{:x}", Sha256::digest(&bytes));
            if layer.digest.starts_with("sha256:") && actual != layer.digest {
                return Err(Failure::Terminal(PullError::Refused {
                    image: image.to_owned(),
                    message: format!(
                        "layer content has digest {actual}, not the {} its manifest names",
                        layer.digest
                    ),
                }));
            }
            files.add_layer(&bytes, &limits).map_err(content_error)?;
        }
        Ok(Image {
            pulled_from: image.to_owned(),
            digest,
            labels,
            files,
        })
    }

    /// The digest an image reference points at now (for polling a tag).
    pub async fn digest_of(&self, image: &str, secrets: &DockerConfig) -> Result<String, PullError> {
        let (reference, auth) = parse(image, secrets)?;
        self.client_for(&reference)
            .fetch_manifest_digest(&reference, &auth)
            .await
            .map_err(|e| match classify(image, e) {
                Failure::Terminal(error) => error,
                Failure::Transient(message) => PullError::Unreachable {
                    image: image.to_owned(),
                    attempts: 1,
                    message,
                },
            })
    }
}

/// The parsed reference and the credentials for its registry.
fn parse(image: &str, secrets: &DockerConfig) -> Result<(Reference, RegistryAuth), PullError> {
    let reference = crate::reference::parse(image).map_err(|e| PullError::Reference {
        image: image.to_owned(),
        message: e.to_string(),
    })?;
    let auth = match secrets.credentials_for(reference.resolve_registry()) {
        Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
        None => RegistryAuth::Anonymous,
    };
    Ok((reference, auth))
}

/// The `config.Labels` of an image config (OCI and Docker v2 alike).
fn labels_of(config: &str) -> BTreeMap<String, String> {
    serde_json::from_str::<serde_json::Value>(config)
        .ok()
        .and_then(|v| v.pointer("/config/Labels").cloned())
        .and_then(|l| serde_json::from_value(l).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_registries_are_recognised() {
        for yes in [
            "127.0.0.1:5000",
            "localhost",
            "localhost:443",
            "[::1]:5000",
            "127.1.2.3",
        ] {
            assert!(is_loopback(yes), "{yes}");
        }
        for no in ["quay.io", "10.0.0.1:5000", "registry.local:5000", "docker.io"] {
            assert!(!is_loopback(no), "{no}");
        }
    }

    #[test]
    fn labels_come_from_the_config() {
        let config = r#"{"architecture":"amd64","config":{"Labels":{"operators.operatorframework.io.bundle.manifests.v1":"manifests/"}}}"#;
        assert_eq!(
            labels_of(config)
                .get("operators.operatorframework.io.bundle.manifests.v1")
                .map(String::as_str),
            Some("manifests/")
        );
        assert!(labels_of("{}").is_empty());
        assert!(labels_of(r#"{"config":{"Labels":null}}"#).is_empty());
    }
}
