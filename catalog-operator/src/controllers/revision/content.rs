//! A revision's manifests within the size an object may have (pure): inline
//! while they fit in [`CONTENT_BUDGET`], the largest gzipped (then base64)
//! until they do, and what still does not fit left out by name.

use std::io::{Read, Write};

use base64::Engine;
use olm_api::model::{CONTENT_BUDGET, ObjectKey, RecordedObject};
use serde_json::Value;

/// Why a recorded object's manifest cannot be read back.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Corrupt {
    /// It holds both an inline manifest and a gzipped one, or neither.
    #[error("{0} holds {1}: it must hold exactly one of manifest and gzip")]
    NotOne(String, &'static str),
    /// Its gzipped manifest is not base64, gzip or JSON.
    #[error("the gzipped manifest of {0} cannot be read: {1}")]
    Unreadable(String, String),
}

/// `kind/name` of an object, for messages.
pub fn describe(key: &ObjectKey) -> String {
    format!("{}/{}", key.kind, key.name)
}

/// The manifest of `object`, inline or gzipped.
pub fn manifest(object: &RecordedObject) -> Result<Value, Corrupt> {
    match (&object.manifest, &object.gzip) {
        (Some(manifest), None) => Ok(manifest.clone()),
        (None, Some(text)) => unzip(text).map_err(|e| Corrupt::Unreadable(describe(&object.key), e)),
        (Some(_), Some(_)) => Err(Corrupt::NotOne(describe(&object.key), "both")),
        (None, None) => Err(Corrupt::NotOne(describe(&object.key), "neither")),
    }
}

/// `objects` (key and manifest) as a revision keeps them: every manifest
/// inline while they fit in the budget; otherwise the largest gzipped first,
/// then, largest first, left out (the second list) until the rest fits.
pub fn fit(objects: Vec<(ObjectKey, Value)>) -> (Vec<RecordedObject>, Vec<ObjectKey>) {
    fit_within(objects, CONTENT_BUDGET)
}

/// [`fit`] with a budget of `budget` bytes.
pub fn fit_within(objects: Vec<(ObjectKey, Value)>, budget: usize) -> (Vec<RecordedObject>, Vec<ObjectKey>) {
    let mut recorded: Vec<RecordedObject> = objects
        .into_iter()
        .map(|(key, manifest)| RecordedObject {
            key,
            manifest: Some(manifest),
            gzip: None,
        })
        .collect();
    let mut sizes: Vec<usize> = recorded.iter().map(size).collect();
    // Largest first, by their inline size.
    let mut order: Vec<usize> = (0..recorded.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    for &i in &order {
        if sizes.iter().sum::<usize>() <= budget {
            break;
        }
        // Kept gzipped only when that is smaller.
        if let Some(zipped) = recorded[i].manifest.as_ref().and_then(zip)
            && zipped.len() < sizes[i]
        {
            recorded[i].manifest = None;
            sizes[i] = zipped.len();
            recorded[i].gzip = Some(zipped);
        }
    }
    let mut left_out = vec![false; recorded.len()];
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    for &i in &order {
        if sizes.iter().sum::<usize>() <= budget {
            break;
        }
        left_out[i] = true;
        sizes[i] = 0;
    }
    let mut kept = Vec::new();
    let mut omitted = Vec::new();
    for (object, out) in recorded.into_iter().zip(left_out) {
        if out {
            omitted.push(object.key);
        } else {
            kept.push(object);
        }
    }
    (kept, omitted)
}

/// `manifest` kept gzipped (then base64) as the object `key`.
pub fn gzipped(key: ObjectKey, manifest: &Value) -> Option<RecordedObject> {
    Some(RecordedObject {
        key,
        manifest: None,
        gzip: Some(zip(manifest)?),
    })
}

/// The bytes an object's manifest takes in the revision.
fn size(object: &RecordedObject) -> usize {
    match (&object.manifest, &object.gzip) {
        (Some(manifest), _) => serde_json::to_vec(manifest).map_or(0, |bytes| bytes.len()),
        (None, Some(text)) => text.len(),
        (None, None) => 0,
    }
}

/// `manifest`'s JSON, gzipped, then base64.
fn zip(manifest: &Value) -> Option<String> {
    let json = serde_json::to_vec(manifest).ok()?;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&json).ok()?;
    let zipped = encoder.finish().ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(zipped))
}

/// The JSON value of a gzip+base64 text.
fn unzip(text: &str) -> Result<Value, String> {
    let zipped = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(zipped.as_slice())
        .read_to_end(&mut json)
        .map_err(|e| format!("not gzip: {e}"))?;
    serde_json::from_slice(&json).map_err(|e| format!("not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            kind: "CustomResourceDefinition".into(),
            name: name.into(),
        }
    }

    /// A manifest of about `bytes` bytes, compressible (repeated text) or not.
    fn manifest(name: &str, bytes: usize, compressible: bool) -> Value {
        let filler: String = if compressible {
            "a".repeat(bytes)
        } else {
            // A simple generator: the text does not repeat, so gzip cannot shrink it much.
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            (0..bytes)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    char::from(b'!' + (x % 90) as u8)
                })
                .collect()
        };
        json!({"metadata": {"name": name}, "filler": filler})
    }

    /// What a budget keeps inline, gzipped and left out, by name (table).
    #[test]
    fn manifests_are_inline_then_gzipped_then_left_out_largest_first() {
        // (case, objects as (name, bytes, compressible), budget, [inline, gzipped, omitted])
        type Objects<'a> = Vec<(&'a str, usize, bool)>;
        type Case<'a> = (&'a str, Objects<'a>, usize, [&'a [&'a str]; 3]);
        let cases: [Case; 4] = [
            (
                "all fit",
                vec![("a", 100, false), ("b", 200, false)],
                1000,
                [&["a", "b"], &[], &[]],
            ),
            (
                "the largest is gzipped",
                vec![("small", 100, false), ("big", 5000, true)],
                1000,
                [&["small"], &["big"], &[]],
            ),
            (
                "an incompressible one is left out",
                vec![("small", 100, false), ("noise", 5000, false)],
                1000,
                [&["small"], &[], &["noise"]],
            ),
            (
                "nothing fits",
                vec![("x", 3000, false), ("y", 3000, false)],
                10,
                [&[], &[], &["x", "y"]],
            ),
        ];
        for (case, objects, budget, [inline, gzipped, omitted]) in cases {
            let objects = objects
                .into_iter()
                .map(|(name, bytes, compressible)| (key(name), manifest(name, bytes, compressible)))
                .collect();
            let (kept, left_out) = fit_within(objects, budget);
            let names = |keep: fn(&RecordedObject) -> bool| -> Vec<String> {
                kept.iter()
                    .filter(|o| keep(o))
                    .map(|o| o.key.name.clone())
                    .collect()
            };
            assert_eq!(names(|o| o.manifest.is_some()), inline, "{case}: inline");
            assert_eq!(names(|o| o.gzip.is_some()), gzipped, "{case}: gzipped");
            let left_out: Vec<&str> = left_out.iter().map(|k| k.name.as_str()).collect();
            assert_eq!(left_out, omitted, "{case}: omitted");
        }
    }

    #[test]
    fn a_gzipped_manifest_reads_back_as_it_was() {
        let original = manifest("big", 5000, true);
        let (kept, _) = fit_within(vec![(key("big"), original.clone())], 1000);
        assert!(kept[0].gzip.is_some(), "{kept:?}");
        assert_eq!(super::manifest(&kept[0]), Ok(original));
    }

    /// A recorded object with both, neither, or an unreadable gzip is corrupt, named (table).
    #[test]
    fn a_corrupt_recorded_object_is_named() {
        let object = |manifest: Option<Value>, gzip: Option<&str>| RecordedObject {
            key: key("things.demo.io"),
            manifest,
            gzip: gzip.map(str::to_owned),
        };
        let cases = [
            (object(Some(json!({})), Some("x")), "holds both"),
            (object(None, None), "holds neither"),
            (object(None, Some("%%%")), "not base64"),
            (object(None, Some("aGVsbG8=")), "not gzip"),
        ];
        for (object, expected) in cases {
            let error = super::manifest(&object).unwrap_err().to_string();
            assert!(
                error.contains("CustomResourceDefinition/things.demo.io"),
                "{error}"
            );
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }
}
