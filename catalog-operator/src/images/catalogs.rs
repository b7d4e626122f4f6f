//! Catalog images read in process: the file-based catalog inside an image
//! (the directory its `operators.operatorframework.io.index.configs.v1` label
//! names, `/configs` by default) becomes catalog content served from memory,
//! with no registry Pod. Images that hold no file-based catalog (old SQLite
//! index images) are recognised, so that they keep the registry Pod.
//!
//! [`pull_catalog`] pulls a catalog image (only its file-based catalog directory)
//! and says how it is served ([`PullOutcome`]); [`digest_of`] polls its digest.
//! The CatalogSource controller acts on the answer
//! (`controllers::catalogsource::image`).

use std::path::{Path, PathBuf};

use olm_catalog::{Catalog, LoadError, fbc};
use olm_oci::{DockerConfig, Image, PullError};

use crate::{chain, images::bundles::BundleImages};

/// The label naming the file-based catalog directory of a catalog image.
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";
/// The label naming the SQLite database of an old index image.
pub const DATABASE_LABEL: &str = "operators.operatorframework.io.index.database.v1";
/// The directory of the file-based catalog when the image has no label for it.
pub const DEFAULT_CONFIGS: &str = "/configs";

/// Why a catalog image gives no content to serve from memory.
#[derive(Debug, thiserror::Error)]
pub enum CatalogImageError {
    /// The image holds no file-based catalog: a registry Pod must serve it.
    #[error("image {image} holds no file-based catalog: {cause}")]
    NoFileBasedCatalog {
        /// The image.
        image: String,
        /// What it holds instead, in words.
        cause: String,
    },
    /// The file-based catalog does not load.
    #[error("the file-based catalog of image {image} is invalid: {source}")]
    Invalid {
        /// The image.
        image: String,
        /// Why.
        #[source]
        source: LoadError,
    },
}

/// The file-based catalog directory of an image with these labels, relative
/// (`configs`), as the pull keeps it.
pub fn configs_dir(labels: &std::collections::BTreeMap<String, String>) -> PathBuf {
    let value = labels
        .get(CONFIGS_LABEL)
        .map(String::as_str)
        .filter(|v| !v.trim().is_empty())
        .unwrap_or(DEFAULT_CONFIGS);
    PathBuf::from(value.trim().trim_matches('/'))
}

/// Whether `opm` reads a file of this name as catalog content.
fn is_catalog_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("json" | "yaml" | "yml")
    )
}

/// The catalog in `image` (pulled from `reference`), read from its file-based
/// catalog directory as `opm serve` reads it: every JSON and YAML file below it,
/// in path order.
pub fn catalog_from_image(image: &Image, reference: &str) -> Result<Catalog, CatalogImageError> {
    let dir = configs_dir(&image.labels);
    let mut catalog = Catalog::default();
    let mut files = 0usize;
    for (path, content) in image.files.under(&dir) {
        if !is_catalog_file(path) {
            continue;
        }
        files += 1;
        let invalid = |source| CatalogImageError::Invalid {
            image: reference.to_owned(),
            source,
        };
        let text = String::from_utf8_lossy(content);
        catalog.extend(fbc::parse_str(Path::new("/").join(path), &text).map_err(invalid)?);
    }
    if files == 0 {
        let cause = match image.labels.get(DATABASE_LABEL) {
            Some(database) => format!(
                "it is a SQLite index image (label {DATABASE_LABEL}={database}) with no catalog files under /{}",
                dir.display()
            ),
            None => format!(
                "it has no JSON or YAML files under /{} (label {CONFIGS_LABEL})",
                dir.display()
            ),
        };
        return Err(CatalogImageError::NoFileBasedCatalog {
            image: reference.to_owned(),
            cause,
        });
    }
    Ok(catalog)
}

/// Why a catalog image is served by a registry Pod rather than from memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodReason {
    /// The image holds no file-based catalog (a SQLite index image).
    NoFileBasedCatalog,
    /// The image is larger than the pull limits.
    ImageTooLarge,
    /// catalog-operator could not pull the image.
    PullFailed,
}

/// How a pulled catalog image is served.
#[derive(Debug)]
pub enum PullOutcome {
    /// From memory: the image holds a file-based catalog.
    Memory {
        /// The catalog in it.
        catalog: Box<Catalog>,
        /// The image pulled.
        image: Box<Image>,
    },
    /// Not at all: the image's catalog is invalid.
    Invalid {
        /// Why, in words.
        message: String,
    },
    /// By a registry Pod, for this reason.
    Pod {
        /// Why not from memory.
        reason: PodReason,
        /// Why, in words.
        message: String,
    },
}

/// Pulls catalog image `image` in process with the credentials `secrets`, only
/// its file-based catalog directory, and says how it is served.
pub async fn pull_catalog(image: &str, secrets: &DockerConfig) -> PullOutcome {
    let pulled = BundleImages::global()
        .puller()
        .pull_selected(image, secrets, &|labels| vec![configs_dir(labels)])
        .await;
    serving_path(pulled, image)
}

/// The digest catalog image `image` has now in its registry.
pub async fn digest_of(image: &str, secrets: &DockerConfig) -> Result<String, PullError> {
    BundleImages::global().puller().digest_of(image, secrets).await
}

/// How to serve catalog image `image`, from what pulling it gave (pure).
pub fn serving_path(pulled: Result<Image, PullError>, image: &str) -> PullOutcome {
    let pulled = match pulled {
        Ok(pulled) => pulled,
        Err(error) => {
            let reason = match &error {
                PullError::Content { .. } => PodReason::ImageTooLarge,
                _ => PodReason::PullFailed,
            };
            let message = format!(
                "catalog-operator could not read image {image} in process ({}): a registry Pod serves it",
                chain(&error)
            );
            return PullOutcome::Pod { reason, message };
        }
    };
    match catalog_from_image(&pulled, image) {
        Ok(catalog) => PullOutcome::Memory {
            catalog: Box::new(catalog),
            image: Box::new(pulled),
        },
        Err(error @ CatalogImageError::NoFileBasedCatalog { .. }) => PullOutcome::Pod {
            reason: PodReason::NoFileBasedCatalog,
            message: format!("{error}: a registry Pod serves it"),
        },
        Err(error @ CatalogImageError::Invalid { .. }) => PullOutcome::Invalid {
            message: chain(&error),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use olm_oci::{Files, Limits};

    use super::*;

    fn image(files: &[(&str, &str)], labels: &[(&str, &str)]) -> Image {
        let owned: Vec<(PathBuf, Vec<u8>)> = files
            .iter()
            .map(|(p, c)| (PathBuf::from(p), c.as_bytes().to_vec()))
            .collect();
        let (layer, _) = olm_oci::tar_gz_layer(&owned).unwrap();
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut all = Files::keeping(vec![configs_dir(&labels)]);
        all.add_layer(&layer, &Limits::default()).unwrap();
        Image {
            pulled_from: "r/catalog:latest".into(),
            digest: "sha256:0".into(),
            labels,
            files: all,
        }
    }

    const PACKAGE: &str = r#"{"schema": "olm.package", "name": "demo", "defaultChannel": "stable"}"#;

    #[test]
    fn the_labelled_directory_is_read_and_the_default_is_configs() {
        let labelled = image(
            &[("catalog/demo/index.json", PACKAGE), ("bin/opm", "binary")],
            &[(CONFIGS_LABEL, "/catalog")],
        );
        let catalog = catalog_from_image(&labelled, "r/catalog:latest").unwrap();
        assert_eq!(catalog.packages.len(), 1);
        assert_eq!(labelled.files.len(), 1, "only the catalog directory is kept");
        let unlabelled = image(
            &[("configs/demo/catalog.yaml", "schema: olm.package\nname: demo\n")],
            &[],
        );
        assert_eq!(
            catalog_from_image(&unlabelled, "r/c:1").unwrap().packages[0].name,
            "demo"
        );
    }

    #[test]
    fn a_sqlite_index_image_is_not_served_from_memory() {
        let sqlite = image(
            &[("database/index.db", "SQLite format 3")],
            &[(DATABASE_LABEL, "/database/index.db")],
        );
        let error = catalog_from_image(&sqlite, "r/index:v1").unwrap_err();
        assert!(
            matches!(error, CatalogImageError::NoFileBasedCatalog { .. }),
            "{error}"
        );
        assert!(
            error.to_string().contains("SQLite") && error.to_string().contains("r/index:v1"),
            "{error}"
        );
    }

    #[test]
    fn an_invalid_catalog_names_the_image_and_the_file() {
        let bad = image(&[("configs/demo/index.json", "{\"schema\": ")], &[]);
        let error = catalog_from_image(&bad, "r/c:1").unwrap_err();
        assert!(matches!(error, CatalogImageError::Invalid { .. }), "{error}");
        assert!(error.to_string().contains("r/c:1"), "{error}");
    }

    /// What a pull gives decides the path: memory for a file-based catalog, a
    /// Pod for an image without one or one that could not be read, nothing for
    /// a broken catalog (table).
    #[test]
    fn the_pull_decides_how_the_catalog_is_served() {
        let package = r#"{"schema": "olm.package", "name": "demo", "defaultChannel": "stable"}"#;
        let refused = || PullError::Refused {
            image: "r/catalog:1".into(),
            message: "unauthorized".into(),
        };
        let cases: Vec<(&str, Result<Image, PullError>, &str)> = vec![
            (
                "file-based",
                Ok(image(&[("configs/demo/index.json", package)], &[])),
                "memory",
            ),
            (
                "sqlite",
                Ok(image(&[("database/index.db", "SQLite format 3")], &[])),
                "pod NoFileBasedCatalog",
            ),
            (
                "broken",
                Ok(image(&[("configs/demo/index.json", "{not json")], &[])),
                "invalid",
            ),
            ("refused", Err(refused()), "pod PullFailed"),
        ];
        for (case, pulled, want) in cases {
            let got = match serving_path(pulled, "r/catalog:1") {
                PullOutcome::Memory { catalog, .. } => {
                    assert_eq!(catalog.packages.len(), 1, "{case}");
                    "memory".to_owned()
                }
                PullOutcome::Invalid { message } => {
                    assert!(message.contains("r/catalog:1"), "{case}: {message}");
                    "invalid".to_owned()
                }
                PullOutcome::Pod { reason, message } => {
                    assert!(message.ends_with("a registry Pod serves it"), "{case}: {message}");
                    format!("pod {reason:?}")
                }
            };
            assert_eq!(got, want, "{case}");
        }
    }
}
