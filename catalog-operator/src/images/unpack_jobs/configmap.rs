//! A bundle in a ConfigMap, in the format OLM's unpack Job writes (`opm alpha
//! bundle extract`): every file of the bundle's `manifests/` and `metadata/`
//! directories is one key (its file name, with characters a key cannot hold
//! made `-`), except `metadata/annotations.yaml`, whose six bundle annotations
//! become the ConfigMap's annotations. With `gzip`, each value is gzipped and
//! base64-encoded into `binaryData`, and annotation `olm.contentEncoding` says
//! so. Annotation `olm.sourceImage` names the image.
//!
//! [`write`] is the extractor's half, [`read`] the controller's: both pure.

use std::{
    collections::BTreeMap,
    io::{Read, Write},
    path::Path,
};

use base64::Engine;
use k8s_openapi::{ByteString, api::core::v1::ConfigMap};
use olm_api::labels::{bundle as bundle_keys, unpack};
use olm_catalog::{
    Bundle,
    render::{RenderOptions, render_bundle_dir},
};

/// The most data one ConfigMap may carry (the API server's limit is 1 MiB for
/// the whole object; annotations and metadata need the rest).
pub const MAX_DATA_BYTES: usize = 1_000_000;
/// The most all the gzipped files of one ConfigMap may unzip to together: manifests
/// compress about tenfold, so a bundle that fits a ConfigMap is far below it, and a few
/// kilobytes of gzip that unzip to gigabytes are refused at it.
pub const MAX_UNZIPPED_BYTES: usize = 8 * MAX_DATA_BYTES;

/// The six bundle annotations that become the ConfigMap's annotations.
const BUNDLE_ANNOTATIONS: [&str; 6] = [
    bundle_keys::MANIFESTS,
    bundle_keys::MEDIATYPE,
    bundle_keys::METADATA,
    bundle_keys::PACKAGE,
    bundle_keys::CHANNELS,
    bundle_keys::DEFAULT_CHANNEL,
];

/// Why a bundle directory cannot be written into a ConfigMap, or a ConfigMap
/// cannot be read as a bundle.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `metadata/annotations.yaml` is not what a bundle has.
    #[error("{path} is not a bundle's annotations file: {cause}")]
    Annotations {
        /// The file.
        path: String,
        /// What is wrong.
        cause: String,
    },
    /// The bundle is too large for a ConfigMap.
    #[error("bundle files exceed the {limit}-byte limit of a ConfigMap")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// A value is not gzip+base64 as its annotation says.
    #[error("key {key} is not gzip+base64: {cause}")]
    Encoding {
        /// The key.
        key: String,
        /// What is wrong.
        cause: String,
    },
    /// A key is not a file name.
    #[error("key {key:?} is not the name of a bundle's file")]
    Key {
        /// The key.
        key: String,
    },
    /// The files do not render as a bundle.
    #[error("the unpacked files are not a bundle: {0}")]
    NotABundle(String),
}

/// A key a ConfigMap can hold for a file name (OLM's translation).
pub fn key_for(file_name: &str) -> String {
    file_name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '-',
        })
        .collect()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FormatError + '_ {
    move |source| FormatError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn gzip_base64(content: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(content).expect("gzip into memory");
    let zipped = encoder.finish().expect("gzip into memory");
    base64::engine::general_purpose::STANDARD
        .encode(zipped)
        .into_bytes()
}

fn gunzip_base64(key: &str, value: &[u8], left: &mut usize) -> Result<String, FormatError> {
    let bad = |cause: String| FormatError::Encoding {
        key: key.to_owned(),
        cause,
    };
    let zipped = base64::engine::general_purpose::STANDARD
        .decode(value)
        .map_err(|e| bad(e.to_string()))?;
    let mut text = String::new();
    // One byte over what is left tells a file too large from one that just fits.
    flate2::read::GzDecoder::new(zipped.as_slice())
        .take(*left as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| bad(e.to_string()))?;
    if text.len() > *left {
        return Err(bad(format!(
            "the bundle's files unzip to more than {MAX_UNZIPPED_BYTES} bytes, more than any bundle's"
        )));
    }
    *left -= text.len();
    Ok(text)
}

/// The content of a ConfigMap that holds the bundle in directory `root` (with
/// `manifests/` and `metadata/`): `data` or `binaryData`, and annotations. Only
/// these three parts are set; the caller writes them over the ConfigMap it has.
pub fn write(root: &Path, image: Option<&str>, gzip: bool) -> Result<ConfigMap, FormatError> {
    let mut data = BTreeMap::new();
    let mut binary = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    let mut total = 0usize;
    for dir in ["manifests", "metadata"] {
        let dir = root.join(dir);
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(io(&dir))?
            .collect::<Result<_, _>>()
            .map_err(io(&dir))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            if !entry.file_type().map_err(io(&path))?.is_file() {
                continue;
            }
            let content = std::fs::read(&path).map_err(io(&path))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "annotations.yaml" && dir.ends_with("metadata") {
                annotations.extend(bundle_annotations(&path, &content)?);
                continue;
            }
            let key = key_for(&name);
            if gzip {
                let value = gzip_base64(&content);
                total += value.len();
                binary.insert(key, ByteString(value));
            } else {
                total += content.len();
                let text = String::from_utf8(content).map_err(|e| FormatError::Io {
                    path: path.display().to_string(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                })?;
                data.insert(key, text);
            }
            if total > MAX_DATA_BYTES {
                return Err(FormatError::TooLarge {
                    limit: MAX_DATA_BYTES,
                });
            }
        }
    }
    if let Some(image) = image {
        annotations.insert(unpack::SOURCE_IMAGE.to_owned(), image.to_owned());
    }
    if gzip {
        annotations.insert(
            unpack::CONTENT_ENCODING.to_owned(),
            unpack::GZIP_BASE64.to_owned(),
        );
    }
    let mut config_map = ConfigMap::default();
    config_map.metadata.annotations = Some(annotations);
    config_map.data = Some(data);
    config_map.binary_data = Some(binary);
    Ok(config_map)
}

/// The six bundle annotations of an `annotations.yaml`.
fn bundle_annotations(path: &Path, content: &[u8]) -> Result<BTreeMap<String, String>, FormatError> {
    #[derive(serde::Deserialize)]
    struct File {
        annotations: BTreeMap<String, serde_json::Value>,
    }
    let bad = |cause: String| FormatError::Annotations {
        path: path.display().to_string(),
        cause,
    };
    let text = std::str::from_utf8(content).map_err(|e| bad(e.to_string()))?;
    let file: File = serde_saphyr::from_str(text).map_err(|e| bad(e.to_string()))?;
    Ok(BUNDLE_ANNOTATIONS
        .iter()
        .filter_map(|key| {
            let value = match file.annotations.get(*key)? {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            Some(((*key).to_owned(), value))
        })
        .collect())
}

/// Whether `key` can be the name of a file in the directory [`read`] lays the files out in, as
/// every key [`write`] makes can (the API server refuses other keys too, but a name that could
/// leave the directory is refused here whatever the object went through).
fn is_file_key(key: &str) -> bool {
    !key.is_empty() && key_for(key) == key && !key.starts_with("..") && key != "."
}

/// The files of a ConfigMap written by [`write`], decoded, by key. Empty when
/// nothing was extracted into it yet.
pub fn files(config_map: &ConfigMap) -> Result<BTreeMap<String, String>, FormatError> {
    let gzip = config_map
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(unpack::CONTENT_ENCODING))
        .is_some_and(|e| e == unpack::GZIP_BASE64);
    let mut files: BTreeMap<String, String> = config_map.data.clone().unwrap_or_default();
    let binary = config_map.binary_data.iter().flatten().map(|(k, _)| k);
    if let Some(key) = files.keys().chain(binary).find(|k| !is_file_key(k)) {
        return Err(FormatError::Key { key: key.clone() });
    }
    if gzip {
        let mut left = MAX_UNZIPPED_BYTES;
        for (key, value) in config_map.binary_data.iter().flatten() {
            files.insert(key.clone(), gunzip_base64(key, &value.0, &mut left)?);
        }
    }
    Ok(files)
}

/// Whether a file of the ConfigMap is a manifest (a Kubernetes object) rather
/// than bundle metadata (`dependencies.yaml`, `properties.yaml`).
fn is_manifest(content: &str) -> bool {
    serde_saphyr::from_str::<serde_json::Value>(content)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
        .is_some()
}

/// The bundle a ConfigMap written by [`write`] holds, rendered as a bundle
/// directory read from disk would be (with `image` recorded); `None` while it
/// holds no file yet. `scratch` is an empty directory to lay the files out in.
pub fn read(config_map: &ConfigMap, image: &str, scratch: &Path) -> Result<Option<Bundle>, FormatError> {
    let files = files(config_map)?;
    if files.is_empty() {
        return Ok(None);
    }
    let manifests = scratch.join("manifests");
    let metadata = scratch.join("metadata");
    std::fs::create_dir_all(&manifests).map_err(io(&manifests))?;
    std::fs::create_dir_all(&metadata).map_err(io(&metadata))?;
    for (key, content) in &files {
        let dir = if is_manifest(content) {
            &manifests
        } else {
            &metadata
        };
        let path = dir.join(key);
        std::fs::write(&path, content).map_err(io(&path))?;
    }
    let annotations: BTreeMap<&str, &str> = config_map
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| BUNDLE_ANNOTATIONS.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let document = serde_json::json!({ "annotations": annotations });
    let path = metadata.join("annotations.yaml");
    std::fs::write(&path, document.to_string()).map_err(io(&path))?;
    let options = RenderOptions {
        image: Some(image.to_owned()),
        bundle_objects: true,
        csv_metadata: false,
    };
    render_bundle_dir(scratch, &options)
        .map(Some)
        .map_err(|e| FormatError::NotABundle(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus_bundle(package: &str, version: &str) -> std::path::PathBuf {
        let dir = olm_testkit::corpus_dir()
            .join("bundles")
            .join(package)
            .join(version);
        olm_catalog::bundle::bundle_root(&dir).expect("a corpus bundle")
    }

    #[test]
    fn keys_are_file_names_a_config_map_can_hold() {
        assert_eq!(
            key_for("kube-green.clusterserviceversion.yaml"),
            "kube-green.clusterserviceversion.yaml"
        );
        assert_eq!(key_for("a b:c.yaml"), "a-b-c.yaml");
    }

    #[test]
    fn a_corpus_bundle_reads_back_as_from_its_directory() {
        let root = corpus_bundle("kube-green", "0.7.1");
        let from_dir = render_bundle_dir(&root, &RenderOptions::default()).unwrap();
        for gzip in [false, true] {
            let written = write(&root, Some("reg/kube-green@sha256:1"), gzip).unwrap();
            let annotations = written.metadata.annotations.clone().unwrap();
            assert_eq!(
                annotations.get(bundle_keys::PACKAGE).map(String::as_str),
                Some("kube-green")
            );
            assert_eq!(
                annotations.get(unpack::SOURCE_IMAGE).map(String::as_str),
                Some("reg/kube-green@sha256:1")
            );
            assert_eq!(
                written.binary_data.as_ref().is_some_and(|b| !b.is_empty()),
                gzip,
                "gzip puts the files in binaryData"
            );
            let scratch = tempfile::tempdir().unwrap();
            let bundle = read(&written, "reg/kube-green@sha256:1", scratch.path())
                .unwrap()
                .expect("a bundle");
            assert_eq!(bundle.name, from_dir.name);
            assert_eq!(bundle.package, from_dir.package);
            assert_eq!(bundle.image, "reg/kube-green@sha256:1");
            assert_eq!(bundle.properties, from_dir.properties, "gzip {gzip}");
        }
    }

    #[test]
    fn an_empty_config_map_holds_no_bundle_yet() {
        let scratch = tempfile::tempdir().unwrap();
        assert!(
            read(&ConfigMap::default(), "x", scratch.path())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn files_that_are_not_a_bundle_say_so() {
        let config_map = ConfigMap {
            data: Some(BTreeMap::from([("notes.txt".to_owned(), "hello".to_owned())])),
            ..ConfigMap::default()
        };
        let scratch = tempfile::tempdir().unwrap();
        let error = read(&config_map, "reg/x@sha256:2", scratch.path()).unwrap_err();
        assert!(matches!(error, FormatError::NotABundle(_)), "{error}");
    }

    #[test]
    fn a_bad_encoding_names_the_key() {
        let mut config_map = ConfigMap::default();
        config_map.metadata.annotations = Some(BTreeMap::from([(
            unpack::CONTENT_ENCODING.to_owned(),
            unpack::GZIP_BASE64.to_owned(),
        )]));
        config_map.binary_data = Some(BTreeMap::from([(
            "csv.yaml".to_owned(),
            ByteString(b"not base64!".to_vec()),
        )]));
        let error = files(&config_map).unwrap_err();
        assert!(error.to_string().contains("csv.yaml"), "{error}");
    }
}
