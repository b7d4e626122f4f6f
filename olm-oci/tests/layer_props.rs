//! Property tests of image layer extraction on generated input: arbitrary bytes (plain and
//! gzip), tar archives whose entries try to leave the root (`../`, absolute paths, symlinks and
//! hard links pointing out, whiteouts of `..`), and decompression bombs.
//!
//! The properties: reading a layer never panics; a rejection is an error with a message; every
//! file kept has a relative, normal path; writing the files out creates nothing outside the
//! extraction directory and no links; bombs stop at a limit, with the limit's error.

use std::{
    io::Write,
    path::{Component, Path, PathBuf},
    sync::OnceLock,
};

use olm_oci::{Files, LayerError, Limits};
use proptest::prelude::*;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// A raw tar entry: a GNU header of type `kind` named `name` (written as is, without the tar
/// builder's path checks), linking to `link`, then `content`, padded to the block size.
fn raw_entry(kind: tar::EntryType, name: &[u8], link: &[u8], content: &[u8]) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    let old = header.as_old_mut();
    old.name[..name.len().min(100)].copy_from_slice(&name[..name.len().min(100)]);
    old.linkname[..link.len().min(100)].copy_from_slice(&link[..link.len().min(100)]);
    header.set_size(content.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(kind);
    header.set_cksum();
    let mut out = header.as_bytes().to_vec();
    out.extend_from_slice(content);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

#[derive(Debug, Clone)]
enum Kind {
    File,
    Dir,
    Symlink,
    HardLink,
    /// A regular file whose name is given in a GNU long-name entry before it.
    LongName,
}

#[derive(Debug, Clone)]
struct Entry {
    kind: Kind,
    path: String,
    link: String,
    content: Vec<u8>,
}

/// Paths built from parts that try to escape, or to confuse a path check.
fn hostile_path() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just("".to_owned()),
        Just("/".to_owned()),
        Just("configs".to_owned()),
        Just("manifests".to_owned()),
        Just(".wh..wh..opq".to_owned()),
        Just(".wh...".to_owned()),
        Just(".wh.configs".to_owned()),
        Just("escape".to_owned()),
        "[a-z.]{1,8}",
    ];
    (any::<bool>(), proptest::collection::vec(part, 1..6)).prop_map(|(absolute, parts)| {
        let joined = parts.join("/");
        if absolute { format!("/{joined}") } else { joined }
    })
}

fn entry() -> impl Strategy<Value = Entry> {
    let kind = prop_oneof![
        4 => Just(Kind::File),
        1 => Just(Kind::Dir),
        2 => Just(Kind::Symlink),
        1 => Just(Kind::HardLink),
        1 => Just(Kind::LongName),
    ];
    let link = prop_oneof![
        Just("/etc".to_owned()),
        Just("../../..".to_owned()),
        Just("../outside".to_owned()),
        hostile_path(),
    ];
    (
        kind,
        hostile_path(),
        link,
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(kind, path, link, content)| Entry {
            kind,
            path,
            link,
            content,
        })
}

fn tar_of(entries: &[Entry]) -> Vec<u8> {
    use tar::EntryType as T;
    let mut out = Vec::new();
    for e in entries {
        let (path, link) = (e.path.as_bytes(), e.link.as_bytes());
        out.extend(match e.kind {
            Kind::File => raw_entry(T::Regular, path, b"", &e.content),
            Kind::Dir => raw_entry(T::Directory, path, b"", b""),
            Kind::Symlink => raw_entry(T::Symlink, path, link, b""),
            Kind::HardLink => raw_entry(T::Link, path, link, b""),
            Kind::LongName => {
                let mut name = format!("{}/{}", "long".repeat(40), e.path).into_bytes();
                name.push(0);
                let mut both = raw_entry(T::GNULongName, b"././@LongLink", b"", &name);
                both.extend(raw_entry(T::Regular, b"placeholder", b"", &e.content));
                both
            }
        });
    }
    out.extend([0; 1024]);
    out
}

/// Every file and directory under `dir` (not following links), and whether any is a link.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let kind = e.file_type().unwrap();
        assert!(!kind.is_symlink(), "a link was written: {}", e.path().display());
        out.push(e.path());
        if kind.is_dir() {
            walk(&e.path(), out);
        }
    }
}

/// Reads the layer; on success writes it out under a fresh directory and checks that nothing
/// left it.
fn extract_and_check(layer: &[u8], limits: &Limits) -> Result<Files, LayerError> {
    let mut files = Files::default();
    if let Err(error) = files.add_layer(layer, limits) {
        assert!(!error.to_string().is_empty());
        return Err(error);
    }
    for (path, _) in files.under(Path::new("")) {
        assert!(
            path.components().all(|c| matches!(c, Component::Normal(_))),
            "a kept path is not relative and normal: {}",
            path.display()
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::create_dir(tmp.path().join("outside")).unwrap();
    // Two files at `a` and `a/b` cannot both be written; that is an error naming the file, not
    // an escape.
    if let Err(error) = files.write_to(&root, &[]) {
        assert!(error.to_string().contains(&root.display().to_string()), "{error}");
    }
    let mut written = Vec::new();
    walk(tmp.path(), &mut written);
    for path in &written {
        assert!(
            path.starts_with(&root) || path == &tmp.path().join("outside"),
            "{} was written outside the extraction directory",
            path.display()
        );
    }
    Ok(files)
}

fn small_limits() -> Limits {
    Limits {
        layer_bytes: 1 << 20,
        total_bytes: 1 << 20,
        entries: 1000,
    }
}

/// A gzip layer of a tar whose entry of type `kind` has `size` bytes of one letter: a few kilobytes
/// that expand to `size`.
fn bomb(kind: tar::EntryType, name: &[u8], size: usize) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let mut header = tar::Header::new_gnu();
    header.as_old_mut().name[..name.len()].copy_from_slice(name);
    header.set_size(size as u64);
    header.set_mode(0o644);
    header.set_entry_type(kind);
    header.set_cksum();
    encoder.write_all(header.as_bytes()).unwrap();
    let filler = vec![b'a'; 1 << 20];
    for _ in 0..size >> 20 {
        encoder.write_all(&filler).unwrap();
    }
    encoder.write_all(&[0; 1024]).unwrap();
    encoder.finish().unwrap()
}

/// 16 MiB in each bomb: sixteen times the small limits.
const BOMB_BYTES: usize = 16 << 20;

fn file_bomb() -> &'static [u8] {
    static BOMB: OnceLock<Vec<u8>> = OnceLock::new();
    BOMB.get_or_init(|| bomb(tar::EntryType::Regular, b"configs/bomb", BOMB_BYTES))
}

#[test]
fn a_file_bomb_stops_at_the_content_limit() {
    let layer = file_bomb();
    assert!(layer.len() < 64 << 10, "the bomb is {} bytes", layer.len());
    let error = extract_and_check(layer, &small_limits()).unwrap_err();
    assert!(
        matches!(error, LayerError::TooLarge { limit, .. } if limit == 1 << 20),
        "{error}"
    );
    assert!(error.to_string().contains("configs/bomb"), "{error}");
}

#[test]
fn long_name_and_pax_bombs_stop_at_the_header_limit() {
    for kind in [
        tar::EntryType::GNULongName,
        tar::EntryType::GNULongLink,
        tar::EntryType::XHeader,
    ] {
        let layer = bomb(kind, b"././@LongLink", BOMB_BYTES);
        assert!(layer.len() < 64 << 10, "the bomb is {} bytes", layer.len());
        let error = extract_and_check(&layer, &Limits::default()).unwrap_err();
        assert!(
            matches!(error, LayerError::TooLarge { limit, .. } if limit == 1 << 20),
            "{kind:?}: {error}"
        );
    }
}

#[test]
fn a_header_claiming_a_terabyte_is_refused_before_reading() {
    let mut tar = raw_entry(tar::EntryType::Regular, b"configs/huge", b"", b"");
    let mut header = tar::Header::from_byte_slice(&tar[..512]).clone();
    header.set_size(1 << 40);
    header.set_cksum();
    tar[..512].copy_from_slice(header.as_bytes());
    let error = extract_and_check(&gzip(&tar), &Limits::default()).unwrap_err();
    assert!(matches!(error, LayerError::TooLarge { .. }), "{error}");
}

#[test]
fn a_bomb_outside_the_kept_directories_is_read_past_not_held() {
    let layer = bomb(tar::EntryType::Regular, b"bin/opm", 4 << 20);
    let mut files = Files::keeping(vec![PathBuf::from("configs")]);
    files.add_layer(&layer, &small_limits()).unwrap();
    assert!(files.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = extract_and_check(&bytes, &small_limits());
        let _ = extract_and_check(&gzip(&bytes), &small_limits());
        // Gzip magic followed by garbage.
        let mut magic = vec![0x1f, 0x8b];
        magic.extend(&bytes);
        let _ = extract_and_check(&magic, &small_limits());
    }

    #[test]
    fn hostile_entries_never_escape(entries in proptest::collection::vec(entry(), 1..12), gz in any::<bool>()) {
        let tar = tar_of(&entries);
        let layer = if gz { gzip(&tar) } else { tar };
        let _ = extract_and_check(&layer, &small_limits());
    }

    #[test]
    fn damaged_archives_never_panic(
        entries in proptest::collection::vec(entry(), 1..6),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut tar = tar_of(&entries);
        for (at, byte) in &flips {
            let i = at.index(tar.len());
            tar[i] = *byte;
        }
        let _ = extract_and_check(&tar, &small_limits());
        let cut = cut.index(tar.len());
        let _ = extract_and_check(&gzip(&tar)[..cut.min(gzip(&tar).len())], &small_limits());
    }

    #[test]
    fn regular_files_read_back_as_written(
        files in proptest::collection::btree_map("[a-z]{1,8}(/[a-z]{1,8}){0,2}", proptest::collection::vec(any::<u8>(), 0..256), 1..8),
    ) {
        // No file may also be a directory of another, or the layer could not be written out.
        let paths: Vec<&String> = files.keys().collect();
        prop_assume!(!paths.iter().any(|a| paths.iter().any(|b| b.starts_with(&format!("{a}/")))));
        let list: Vec<(PathBuf, Vec<u8>)> = files.iter().map(|(p, c)| (PathBuf::from(p), c.clone())).collect();
        let (layer, _) = olm_oci::tar_gz_layer(&list).unwrap();
        let read = extract_and_check(&layer, &small_limits()).unwrap();
        prop_assert_eq!(read.len(), files.len());
        for (path, content) in &files {
            prop_assert_eq!(read.get(path), Some(content.as_slice()));
        }
    }
}
