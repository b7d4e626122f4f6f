//! Bundle content pulled from bundle images, in process.
//!
//! Current catalogs carry only `olm.csv.metadata` for their bundles; the
//! manifests are in the bundle image. When a resolved bundle has none in its
//! catalog, [`BundleImages::complete`] pulls the image (with the CatalogSource's
//! pull secrets, [`crate::images::pull_secrets`]), writes the directories its `operators.operatorframework.io.bundle.*`
//! labels name to a temporary directory, and renders that directory exactly as a
//! bundle directory read from disk. Content of references by digest is cached.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, OnceLock},
};

use kube::Client;
use olm_catalog::{
    Bundle, Property,
    render::{RenderOptions, render_bundle_dir},
};
use olm_oci::{Image, PullError, PullOptions, Puller};
use olm_resolver::model::CatalogId;

/// The label naming the manifests directory of a bundle image.
pub const MANIFESTS_LABEL: &str = "operators.operatorframework.io.bundle.manifests.v1";
/// The label naming the metadata directory of a bundle image.
pub const METADATA_LABEL: &str = "operators.operatorframework.io.bundle.metadata.v1";

/// Why a bundle image could not give a bundle.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// The image could not be pulled.
    #[error(transparent)]
    Pull(#[from] PullError),
    /// The image holds no bundle.
    #[error("image {image} is not a bundle: {cause}")]
    NotABundle {
        /// The image.
        image: String,
        /// What is missing or wrong.
        cause: String,
    },
    /// The unpack took longer than it may.
    #[error(
        "unpacking image {image} did not finish within {timeout:?} ({}): check that its registry is reachable, or allow more time",
        match operator_group {
            Some(group) => format!("annotation operatorframework.io/bundle-unpack-timeout of OperatorGroup {group}, default 10m"),
            None => "the default; OperatorGroup annotation operatorframework.io/bundle-unpack-timeout sets it".to_owned(),
        }
    )]
    TimedOut {
        /// The image.
        image: String,
        /// The time it had.
        timeout: std::time::Duration,
        /// The OperatorGroup whose annotations applied.
        operator_group: Option<String>,
    },
    /// The last attempt failed too recently to try again.
    #[error(
        "{last} (not retried for {}s more: annotation operatorframework.io/bundle-unpack-min-retry-interval)",
        .wait.as_secs().max(1)
    )]
    RetryLater {
        /// The last failure, in words.
        last: String,
        /// Time left before the next attempt.
        wait: std::time::Duration,
    },
    /// A pull secret could not be read.
    #[error(transparent)]
    Secret(#[from] crate::images::pull_secrets::PullSecretError),
    /// The unpack Job of the image failed ([`crate::images::unpack_jobs`]).
    #[error(
        "unpack Job {namespace}/{job} of image {image} failed: {reason}: {message} (see `kubectl -n {namespace} describe job {job}`; a new Job is made when it expires, or after annotation operatorframework.io/bundle-unpack-min-retry-interval)"
    )]
    JobFailed {
        /// The image.
        image: String,
        /// The Job's namespace.
        namespace: String,
        /// The Job.
        job: String,
        /// The Job's Failed reason (e.g. `DeadlineExceeded`, `BackoffLimitExceeded`).
        reason: String,
        /// The Job's Failed message.
        message: String,
    },
    /// The objects of an unpack Job could not be read or written.
    #[error("unpacking image {image} in a Job: {cause}")]
    Cluster {
        /// The image.
        image: String,
        /// What failed.
        cause: String,
    },
    /// Not an error: the unpack goes on ([`crate::images::unpack_jobs::JobState::Pending`]).
    #[error("{0}")]
    Pending(String),
}

impl UnpackError {
    /// Whether trying again later may succeed without a change.
    pub fn is_transient(&self) -> bool {
        matches!(self, UnpackError::Pull(e) if e.is_transient())
            || matches!(
                self,
                UnpackError::TimedOut { .. }
                    | UnpackError::RetryLater { .. }
                    | UnpackError::Cluster { .. }
                    | UnpackError::Pending(_)
            )
    }
}

/// Whether a catalog bundle must be completed from its image: it has an image,
/// and no bundle object is a CSV with an install strategy.
pub fn needs_unpacking(bundle: &Bundle) -> bool {
    if bundle.image.is_empty() {
        return false;
    }
    let has_installable_csv = bundle.properties.iter().any(|p| match p {
        Property::BundleObject(object) => object.decode().is_ok_and(|v| {
            v.get("kind").and_then(|k| k.as_str()) == Some("ClusterServiceVersion")
                && v.pointer("/spec/install").is_some()
        }),
        _ => false,
    });
    !has_installable_csv
}

/// A relative directory named by a label (`manifests/`, `/metadata/`), or the default.
fn label_dir(image: &Image, label: &str, default: &str) -> PathBuf {
    let value = image.labels.get(label).map(String::as_str).unwrap_or(default);
    PathBuf::from(value.trim_matches('/'))
}

/// Renders a pulled bundle image as a bundle directory: its manifests and
/// metadata directories are written below `root` as `manifests/` and `metadata/`.
pub fn bundle_from_image(image: &Image, reference: &str, root: &Path) -> Result<Bundle, UnpackError> {
    let not_a_bundle = |cause: String| UnpackError::NotABundle {
        image: reference.to_owned(),
        cause,
    };
    let manifests = label_dir(image, MANIFESTS_LABEL, "manifests");
    let metadata = label_dir(image, METADATA_LABEL, "metadata");
    if image.files.under(&manifests).next().is_none() {
        return Err(not_a_bundle(format!(
            "it has no files under {}/ (label {MANIFESTS_LABEL})",
            manifests.display()
        )));
    }
    for (from, to) in [(&manifests, "manifests"), (&metadata, "metadata")] {
        for (path, content) in image.files.under(from) {
            let relative = path.strip_prefix(from).unwrap_or(path);
            let target = root.join(to).join(relative);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| not_a_bundle(format!("writing its files: {e}")))?;
            }
            std::fs::write(&target, content).map_err(|e| not_a_bundle(format!("writing its files: {e}")))?;
        }
    }
    let options = RenderOptions {
        image: Some(reference.to_owned()),
        bundle_objects: true,
        csv_metadata: false,
    };
    render_bundle_dir(root, &options).map_err(|e| not_a_bundle(e.to_string()))
}

/// Pulls bundle images and keeps their content by digest.
#[derive(Debug)]
pub struct BundleImages {
    puller: Puller,
    by_digest: Mutex<HashMap<String, Arc<Bundle>>>,
    /// The last failure per image: when, and why.
    failures: Mutex<HashMap<String, (std::time::Instant, String)>>,
}

static GLOBAL: OnceLock<BundleImages> = OnceLock::new();

impl BundleImages {
    /// A puller with these options and an empty cache.
    pub fn new(options: PullOptions) -> Self {
        Self {
            puller: Puller::new(options),
            by_digest: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the content of `reference` (by digest) is cached: completing it pulls nothing.
    pub fn is_cached(&self, reference: &str) -> bool {
        reference.contains("@sha256:")
            && self
                .by_digest
                .lock()
                .expect("bundle image cache lock")
                .contains_key(reference)
    }

    /// Remembers that unpacking `reference` failed now.
    pub fn record_failure(&self, reference: &str, message: String) {
        self.failures
            .lock()
            .expect("bundle image failures lock")
            .insert(reference.to_owned(), (std::time::Instant::now(), message));
    }

    /// Forgets an earlier failure of `reference`.
    pub fn forget_failure(&self, reference: &str) {
        self.failures
            .lock()
            .expect("bundle image failures lock")
            .remove(reference);
    }

    /// The error to give instead of pulling `reference` again, when it failed less
    /// than `min_retry` ago.
    pub fn retry_wait(&self, reference: &str, min_retry: Option<std::time::Duration>) -> Option<UnpackError> {
        let min_retry = min_retry?;
        let failures = self.failures.lock().expect("bundle image failures lock");
        let (at, last) = failures.get(reference)?;
        let elapsed = at.elapsed();
        (elapsed < min_retry).then(|| UnpackError::RetryLater {
            last: last.clone(),
            wait: min_retry - elapsed,
        })
    }

    /// The process-wide instance (default pull options unless
    /// [`BundleImages::configure`] came first).
    pub fn global() -> &'static BundleImages {
        GLOBAL.get_or_init(|| BundleImages::new(PullOptions::default()))
    }

    /// Sets the pull options of the process-wide instance; `false` when it was
    /// already in use (its options stay).
    pub fn configure(options: PullOptions) -> bool {
        GLOBAL.set(BundleImages::new(options)).is_ok()
    }

    /// Keeps `bundle`, unpacked elsewhere (by a Job), as the content of `reference`
    /// when it is by digest.
    pub fn remember(&self, reference: &str, bundle: &Bundle) {
        if reference.contains("@sha256:") {
            self.by_digest
                .lock()
                .expect("bundle image cache lock")
                .insert(reference.to_owned(), Arc::new(bundle.clone()));
        }
    }

    /// The puller, for catalog images too.
    pub fn puller(&self) -> &Puller {
        &self.puller
    }

    /// `bundle` as planned: itself when its catalog carries its manifests, else
    /// the bundle read from its image.
    pub async fn complete(
        &self,
        client: &Client,
        catalog: &CatalogId,
        secrets: &[String],
        bundle: Bundle,
    ) -> Result<Bundle, UnpackError> {
        if !needs_unpacking(&bundle) {
            return Ok(bundle);
        }
        let reference = bundle.image.clone();
        let cached = reference.contains("@sha256:").then(|| {
            self.by_digest
                .lock()
                .expect("bundle image cache lock")
                .get(&reference)
                .cloned()
        });
        if let Some(Some(found)) = cached {
            return Ok(found.as_ref().clone());
        }
        let config = crate::images::pull_secrets::pull_secrets(client, catalog, secrets).await?;
        let started = std::time::Instant::now();
        let image = self.puller.pull(&reference, &config).await?;
        let dir = tempfile::tempdir().map_err(|e| UnpackError::NotABundle {
            image: reference.clone(),
            cause: format!("no temporary directory to unpack into: {e}"),
        })?;
        let unpacked = bundle_from_image(&image, &reference, dir.path())?;
        tracing::info!(
            catalog = %catalog,
            bundle = %unpacked.name,
            image = %reference,
            digest = %image.digest,
            files = image.files.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "unpacked bundle image"
        );
        let mut cache = self.by_digest.lock().expect("bundle image cache lock");
        let key = if reference.contains("@sha256:") {
            reference
        } else {
            format!(
                "{}@{}",
                reference.split(['@']).next().unwrap_or(&reference),
                image.digest
            )
        };
        cache.insert(key, Arc::new(unpacked.clone()));
        Ok(unpacked)
    }
}

#[cfg(test)]
mod tests {
    use olm_oci::{Files, Limits};

    use super::*;

    fn image_with(files: &[(&str, &str)], labels: &[(&str, &str)]) -> Image {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, content) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            builder
                .append_data(&mut header, path, content.as_bytes())
                .unwrap();
        }
        let mut all = Files::default();
        all.add_layer(&builder.into_inner().unwrap(), &Limits::default())
            .unwrap();
        Image {
            pulled_from: "r/x@sha256:0".into(),
            digest: "sha256:0".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            files: all,
        }
    }

    #[test]
    fn labels_naming_directories_outside_the_image_write_nothing_outside() {
        // Security: the labels choose which directories of the image are the bundle; the
        // image's paths are relative and normal, so no label leads a write out of `root`.
        let sandbox = tempfile::tempdir().unwrap();
        let root = sandbox.path().join("bundle");
        for label in ["../", "../../outside/", "/../..", "manifests/../../"] {
            let image = image_with(
                &[
                    ("manifests/csv.yaml", "kind: ClusterServiceVersion"),
                    ("metadata/annotations.yaml", "annotations: {}"),
                ],
                &[(MANIFESTS_LABEL, label), (METADATA_LABEL, label)],
            );
            let error = bundle_from_image(&image, "reg/x@sha256:0", &root).unwrap_err();
            assert!(
                error.to_string().contains("has no files under"),
                "{label}: {error}"
            );
            let entries: Vec<_> = std::fs::read_dir(sandbox.path()).unwrap().collect();
            assert!(entries.is_empty(), "{label}: nothing written: {entries:?}");
        }
    }

    #[test]
    fn an_image_without_manifests_is_not_a_bundle() {
        let image = image_with(&[("etc/hosts", "x")], &[]);
        let dir = tempfile::tempdir().unwrap();
        let error = bundle_from_image(&image, "reg/x@sha256:0", dir.path()).unwrap_err();
        assert!(
            error.to_string().contains("reg/x@sha256:0") && error.to_string().contains("manifests"),
            "{error}"
        );
    }

    #[test]
    fn a_corpus_bundle_reads_as_from_its_directory() {
        let corpus = olm_testkit::corpus_dir();
        let version = corpus.join("bundles/kube-green/0.7.1");
        let root = olm_catalog::bundle::bundle_root(&version).unwrap();
        let mut files = Vec::new();
        for sub in ["manifests", "metadata"] {
            for entry in std::fs::read_dir(root.join(sub)).unwrap() {
                let path = entry.unwrap().path();
                let name = format!("{sub}/{}", path.file_name().unwrap().to_str().unwrap());
                files.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
        let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let image = image_with(
            &refs,
            &[(MANIFESTS_LABEL, "manifests/"), (METADATA_LABEL, "metadata/")],
        );
        let dir = tempfile::tempdir().unwrap();
        let from_image = bundle_from_image(&image, "reg/kube-green@sha256:1", dir.path()).unwrap();
        let from_dir = render_bundle_dir(&root, &RenderOptions::default()).unwrap();
        assert_eq!(from_image.name, from_dir.name);
        assert_eq!(from_image.image, "reg/kube-green@sha256:1");
        assert_eq!(from_image.properties, from_dir.properties);
        assert!(!needs_unpacking(&from_image));
        let metadata_only = Bundle {
            properties: vec![],
            ..from_image
        };
        assert!(needs_unpacking(&metadata_only));
    }
}
