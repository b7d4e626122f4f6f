//! Property tests of how a bundle is read back from its unpack ConfigMap, on generated input:
//! bundle directories written by [`configmap::write`] (plain and gzipped), and ConfigMaps as
//! anyone who may edit them could make them: keys that are not file names (`..`, `a/b`, empty),
//! values that are not base64, base64 that is not gzip, and gzip that unzips to far more than a
//! bundle (one large file, or many small bombs).
//!
//! The properties: nothing panics; a refusal names the key it is about; what is read is exactly
//! what was written; all the files read together stay under the limit; laying the files out
//! writes nothing outside the scratch directory.

use std::{collections::BTreeMap, io::Write, sync::OnceLock};

use base64::Engine;
use k8s_openapi::{ByteString, api::core::v1::ConfigMap};
use olm_api::labels::unpack;
use proptest::prelude::*;

use super::configmap::{self, FormatError, MAX_UNZIPPED_BYTES};

fn gzip(content: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(content).unwrap();
    encoder.finish().unwrap()
}

fn base64(bytes: &[u8]) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .encode(bytes)
        .into_bytes()
}

/// Base64 of gzip of `MiB` mebibytes of spaces (a few KiB each), made once.
fn bomb(mib: usize) -> Vec<u8> {
    static BOMBS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    let bombs = BOMBS.get_or_init(|| {
        [1usize, 3, 9]
            .iter()
            .map(|m| base64(&gzip(&vec![b' '; m << 20])))
            .collect()
    });
    bombs[[1usize, 3, 9].iter().position(|m| *m == mib).unwrap()].clone()
}

#[derive(Debug, Clone)]
enum Content {
    Text(String),
    Bytes(Vec<u8>),
    Base64Of(Vec<u8>),
    Gzipped(String),
    Bomb(usize),
}

impl Content {
    fn value(&self) -> Vec<u8> {
        match self {
            Content::Text(text) => text.clone().into_bytes(),
            Content::Bytes(bytes) => bytes.clone(),
            Content::Base64Of(bytes) => base64(bytes),
            Content::Gzipped(text) => base64(&gzip(text.as_bytes())),
            Content::Bomb(mib) => bomb(*mib),
        }
    }
}

fn content() -> impl Strategy<Value = Content> {
    prop_oneof![
        1 => "[ -~\n]{0,64}".prop_map(Content::Text),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Content::Bytes),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Content::Base64Of),
        3 => "(kind: [A-Z][a-z]{1,6}\n|\\PC{0,12}\n){0,4}".prop_map(Content::Gzipped),
        1 => prop::sample::select(vec![1usize, 3, 9]).prop_map(Content::Bomb),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]{1,8}\\.(yaml|json)",
        1 => prop::sample::select(vec!["..", ".", "", "../x.yaml", "../../escaped.yaml", "a/b.yaml", "..x", "é.yaml", "a b"])
            .prop_map(str::to_owned),
    ]
}

fn config_map(gzipped: bool, files: &BTreeMap<String, Content>) -> ConfigMap {
    let mut config_map = ConfigMap::default();
    if gzipped {
        config_map.metadata.annotations = Some(BTreeMap::from([(
            unpack::CONTENT_ENCODING.to_owned(),
            unpack::GZIP_BASE64.to_owned(),
        )]));
        config_map.binary_data = Some(
            files
                .iter()
                .map(|(k, c)| (k.clone(), ByteString(c.value())))
                .collect(),
        );
    } else {
        config_map.data = Some(
            files
                .iter()
                .map(|(k, c)| (k.clone(), String::from_utf8_lossy(&c.value()).into_owned()))
                .collect(),
        );
    }
    config_map
}

/// Every path under `dir`.
fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        out.push(path.clone());
        if path.is_dir() {
            walk(&path, out);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_config_map_reads_as_written_or_names_the_key(
        files in prop::collection::btree_map(key(), content(), 0..5),
        gzipped in prop::bool::weighted(0.8),
    ) {
        let config_map = config_map(gzipped, &files);
        match configmap::files(&config_map) {
            Ok(read) => {
                let total: usize = read.values().map(String::len).sum();
                prop_assert!(!gzipped || total <= MAX_UNZIPPED_BYTES, "{total} bytes unzipped");
                for (key, content) in &files {
                    let expected = if gzipped {
                        reference(&content.value())
                            .unwrap_or_else(|| panic!("{key}: {content:?} is not gzip+base64 text, yet it was read"))
                    } else {
                        String::from_utf8_lossy(&content.value()).into_owned()
                    };
                    prop_assert!(read.get(key) == Some(&expected), "{key} does not read as written");
                }
            }
            Err(error) => {
                let named = match &error {
                    FormatError::Encoding { key, .. } | FormatError::Key { key } => key,
                    other => panic!("not a ConfigMap's error: {other}"),
                };
                prop_assert!(files.contains_key(named.as_str()));
                prop_assert!(error.to_string().contains(named.as_str()), "{}", error);
            }
        }
        let parent = tempfile::tempdir().unwrap();
        let scratch = parent.path().join("scratch");
        std::fs::create_dir(&scratch).unwrap();
        let _ = configmap::read(&config_map, "example.com/bundle:v1", &scratch);
        let mut written = Vec::new();
        walk(parent.path(), &mut written);
        prop_assert!(written.iter().all(|p| p.starts_with(&scratch)), "{written:?}");
    }

    #[test]
    fn a_bundle_directory_reads_back_as_written(
        files in prop::collection::btree_map("[a-z]{1,8}\\.(yaml|json)", "\\PC{0,64}", 1..5),
        gzipped in any::<bool>(),
    ) {
        let root = tempfile::tempdir().unwrap();
        for dir in ["manifests", "metadata"] {
            std::fs::create_dir(root.path().join(dir)).unwrap();
        }
        for (name, text) in &files {
            std::fs::write(root.path().join("manifests").join(name), text).unwrap();
        }
        let config_map = configmap::write(root.path(), Some("example.com/bundle:v1"), gzipped).unwrap();
        let read = configmap::files(&config_map).unwrap();
        let expected: BTreeMap<String, String> = files.into_iter().filter(|(n, _)| n != "annotations.yaml").collect();
        prop_assert_eq!(read, expected);
    }
}

/// What `value` holds if it is base64 of gzip of text, read with no limit.
fn reference(value: &[u8]) -> Option<String> {
    use std::io::Read;
    let zipped = base64::engine::general_purpose::STANDARD.decode(value).ok()?;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(zipped.as_slice())
        .read_to_end(&mut out)
        .ok()?;
    String::from_utf8(out).ok()
}

#[test]
fn a_file_over_the_limit_is_refused_naming_it_not_cut() {
    let files = BTreeMap::from([("big.yaml".to_owned(), Content::Bomb(9))]);
    let error = configmap::files(&config_map(true, &files)).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "key big.yaml is not gzip+base64: the bundle's files unzip to more than {MAX_UNZIPPED_BYTES} bytes, more than any bundle's"
        )
    );
}

#[test]
fn many_small_bombs_are_refused_together() {
    let files: BTreeMap<String, Content> = (0..4).map(|n| (format!("f{n}.yaml"), Content::Bomb(3))).collect();
    let error = configmap::files(&config_map(true, &files)).unwrap_err();
    assert!(error.to_string().starts_with("key f2.yaml "), "{error}");
}

#[test]
fn a_key_that_leaves_the_directory_is_refused() {
    let files = BTreeMap::from([("../x.yaml".to_owned(), Content::Text("kind: X".into()))]);
    let error = configmap::files(&config_map(false, &files)).unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"key "../x.yaml" is not the name of a bundle's file"#
    );
}
