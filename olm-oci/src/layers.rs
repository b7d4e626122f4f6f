//! Reading image layers (tar, gzip-compressed or not) into memory, within limits,
//! so that an oversized or malicious image fails cleanly instead of filling memory
//! or escaping a directory.

use std::{
    cell::Cell,
    collections::BTreeMap,
    io::{self, Read},
    path::{Component, Path, PathBuf},
    rc::Rc,
};

/// Size limits for the content of one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one compressed layer, as stored in the registry.
    pub layer_bytes: u64,
    /// Bytes of all files, uncompressed, together.
    pub total_bytes: u64,
    /// Number of entries over all layers.
    pub entries: usize,
}

impl Default for Limits {
    /// 64 MiB per layer, 256 MiB uncompressed, 100 000 entries: far beyond any
    /// real bundle or catalog image.
    fn default() -> Self {
        Self {
            layer_bytes: 64 << 20,
            total_bytes: 256 << 20,
            entries: 100_000,
        }
    }
}

/// Why a layer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The content is larger than a limit.
    #[error("the image is larger than the limit: {what} exceeds {limit} bytes")]
    TooLarge {
        /// What exceeded it.
        what: String,
        /// The limit.
        limit: u64,
    },
    /// Too many entries.
    #[error("the image has more than {0} files")]
    TooManyEntries(usize),
    /// Not a tar archive (or a corrupt one).
    #[error("a layer is not a readable tar archive: {0}")]
    Tar(#[source] io::Error),
}

/// Regular files of an image, by path relative to its root (later layers win;
/// OCI whiteouts remove what earlier layers added).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Files {
    files: BTreeMap<PathBuf, Vec<u8>>,
    total: u64,
    /// Only files under these directories are kept (all when empty).
    keep: Vec<PathBuf>,
}

/// A tar path made relative and normal, or nothing when it leaves the root.
fn normal_path(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// Bytes the tar reader may read between two entries: the next header with its GNU long name,
/// long link name and PAX records, which it holds in memory. Real ones take a few hundred bytes.
const ENTRY_METADATA_BYTES: u64 = 1 << 20;

/// How many more bytes a [`Metered`] reader may read (`None`: no limit), shared with its reader.
#[derive(Debug, Clone, Default)]
struct Meter(Rc<Cell<(Option<u64>, bool)>>);

impl Meter {
    fn allow(&self, bytes: Option<u64>) {
        self.0.set((bytes, false));
    }

    /// The error to report for `error` from the tar reader: the limit, when it was reached.
    fn error(&self, error: io::Error) -> LayerError {
        if self.0.get().1 {
            LayerError::TooLarge {
                what: "the header of an entry (with its long name or PAX records)".to_owned(),
                limit: ENTRY_METADATA_BYTES,
            }
        } else {
            LayerError::Tar(error)
        }
    }
}

/// A reader that fails once its [`Meter`] runs out.
struct Metered<R> {
    inner: R,
    meter: Meter,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (allowed, _) = self.meter.0.get();
        let len = match allowed {
            None => buf.len(),
            Some(0) => {
                self.meter.0.set((Some(0), true));
                return Err(io::Error::other("tar entry header over its size limit"));
            }
            Some(left) => buf.len().min(usize::try_from(left).unwrap_or(usize::MAX)),
        };
        let read = self.inner.read(&mut buf[..len])?;
        if let Some(left) = allowed {
            self.meter.0.set((Some(left - read as u64), false));
        }
        Ok(read)
    }
}

impl Files {
    /// Files that keep only what is under `dirs` (relative, e.g. `configs`): the
    /// rest of each layer is read past without being held, nor counted against
    /// [`Limits::total_bytes`]. Keeps everything when `dirs` is empty.
    pub fn keeping(dirs: Vec<PathBuf>) -> Self {
        let keep = dirs.iter().filter_map(|d| normal_path(d)).collect();
        Self {
            keep,
            ..Self::default()
        }
    }

    /// Adds one layer (gzip-compressed when it starts with the gzip magic bytes).
    pub fn add_layer(&mut self, bytes: &[u8], limits: &Limits) -> Result<(), LayerError> {
        if bytes.len() as u64 > limits.layer_bytes {
            return Err(LayerError::TooLarge {
                what: "a layer".to_owned(),
                limit: limits.layer_bytes,
            });
        }
        if bytes.starts_with(&[0x1f, 0x8b]) {
            self.read_tar(flate2::read::GzDecoder::new(bytes), limits)
        } else {
            self.read_tar(bytes, limits)
        }
    }

    fn read_tar(&mut self, reader: impl Read, limits: &Limits) -> Result<(), LayerError> {
        let meter = Meter::default();
        let mut archive = tar::Archive::new(Metered {
            inner: reader,
            meter: meter.clone(),
        });
        let mut entries = archive.entries().map_err(LayerError::Tar)?;
        let mut count = self.files.len();
        loop {
            // Between two entries the tar reader reads headers, GNU long names and PAX records
            // into memory, unbounded: only that much is allowed there. Each entry's content is
            // read to its end below, so none of it is left for this step to skip.
            meter.allow(Some(ENTRY_METADATA_BYTES));
            let next = entries.next().map(|entry| entry.map_err(|e| meter.error(e)));
            meter.allow(None);
            let Some(entry) = next else {
                return Ok(());
            };
            let mut entry = entry?;
            count += 1;
            if count > limits.entries {
                return Err(LayerError::TooManyEntries(limits.entries));
            }
            self.read_entry(&mut entry, limits)?;
            io::copy(&mut entry, &mut io::sink()).map_err(LayerError::Tar)?;
        }
    }

    /// Keeps one entry of a layer when it is a regular file under the kept directories, or
    /// applies it when it is a whiteout.
    fn read_entry(
        &mut self,
        entry: &mut tar::Entry<'_, impl Read>,
        limits: &Limits,
    ) -> Result<(), LayerError> {
        let Some(path) = normal_path(&entry.path().map_err(LayerError::Tar)?) else {
            return Ok(());
        };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if let Some(hidden) = name.strip_prefix(".wh.") {
            if hidden == ".wh..opq" {
                let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
                self.remove_under(&dir);
            } else {
                self.remove_under(&path.with_file_name(hidden));
            }
            return Ok(());
        }
        if !entry.header().entry_type().is_file() {
            return Ok(());
        }
        if !self.keep.is_empty() && !self.keep.iter().any(|k| path.starts_with(k)) {
            return Ok(());
        }
        let size = entry.header().size().map_err(LayerError::Tar)?;
        if self.total + size > limits.total_bytes {
            return Err(LayerError::TooLarge {
                what: format!("the uncompressed content (at {})", path.display()),
                limit: limits.total_bytes,
            });
        }
        let mut content = Vec::with_capacity(size as usize);
        // `take` guards against a header that understates its content.
        entry
            .take(limits.total_bytes - self.total)
            .read_to_end(&mut content)
            .map_err(LayerError::Tar)?;
        self.total += content.len() as u64;
        if let Some(old) = self.files.insert(path, content) {
            self.total -= old.len() as u64;
        }
        Ok(())
    }

    fn remove_under(&mut self, path: &Path) {
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| p.starts_with(path))
            .cloned()
            .collect();
        for p in gone {
            if let Some(old) = self.files.remove(&p) {
                self.total -= old.len() as u64;
            }
        }
    }

    /// The content of a file.
    pub fn get(&self, path: impl AsRef<Path>) -> Option<&[u8]> {
        self.files.get(path.as_ref()).map(Vec::as_slice)
    }

    /// Every file under a directory (e.g. `manifests`), with its path.
    pub fn under<'a>(&'a self, dir: &'a Path) -> impl Iterator<Item = (&'a Path, &'a [u8])> + 'a {
        self.files
            .iter()
            .filter(move |(p, _)| p.starts_with(dir))
            .map(|(p, c)| (p.as_path(), c.as_slice()))
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether there are no files.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Bytes of all files.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Writes the files under `prefixes` (all when empty) below `root`, so that
    /// directory loaders can read them as from disk. An error names the file it
    /// could not write (e.g. an image with both a file `a` and a file `a/b`).
    pub fn write_to(&self, root: &Path, prefixes: &[&Path]) -> io::Result<()> {
        for (path, content) in &self.files {
            if !prefixes.is_empty() && !prefixes.iter().any(|p| path.starts_with(p)) {
                continue;
            }
            let target = root.join(path);
            let named =
                |e: io::Error| io::Error::new(e.kind(), format!("cannot write {}: {e}", target.display()));
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(named)?;
            }
            std::fs::write(&target, content).map_err(named)?;
        }
        Ok(())
    }
}

/// A gzip tar layer of `files` (path in the image, content), with the digest of
/// the uncompressed tar (the config's `rootfs.diff_ids` entry). For building
/// bundle and catalog images.
pub fn tar_gz_layer(files: &[(PathBuf, Vec<u8>)]) -> io::Result<(Vec<u8>, String)> {
    use sha2::Digest;
    let mut builder = tar::Builder::new(Vec::new());
    for (path, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, path, content.as_slice())?;
    }
    let tar = builder.into_inner()?;
    let diff_id = format!("sha256:{:x}", sha2::Sha256::digest(&tar));
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    io::Write::write_all(&mut encoder, &tar)?;
    Ok((encoder.finish()?, diff_id))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn tar_of(files: &[(&str, &[u8])], gzip: bool) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, content) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            // Bypass the builder's path checks so that hostile paths can be tested.
            let name = &mut header.as_old_mut().name;
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, *content).unwrap();
        }
        let tar = builder.into_inner().unwrap();
        if !gzip {
            return tar;
        }
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&tar).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn reads_gzip_and_plain_layers_with_later_layers_and_whiteouts_winning() {
        let mut files = Files::default();
        let limits = Limits::default();
        let first = tar_of(
            &[
                ("manifests/csv.yaml", b"old"),
                ("./metadata/annotations.yaml", b"a"),
                ("tmp/x", b"x"),
            ],
            true,
        );
        files.add_layer(&first, &limits).unwrap();
        let second = tar_of(&[("manifests/csv.yaml", b"new"), ("tmp/.wh.x", b"")], false);
        files.add_layer(&second, &limits).unwrap();
        assert_eq!(files.get("manifests/csv.yaml"), Some(&b"new"[..]));
        assert_eq!(files.get("metadata/annotations.yaml"), Some(&b"a"[..]));
        assert_eq!(files.get("tmp/x"), None);
        assert_eq!(files.total_bytes(), 4);
        assert_eq!(files.under(Path::new("manifests")).count(), 1);
    }

    #[test]
    fn a_built_layer_reads_back() {
        let (layer, diff_id) =
            tar_gz_layer(&[(PathBuf::from("manifests/a.yaml"), b"kind: A".to_vec())]).unwrap();
        assert!(diff_id.starts_with("sha256:") && diff_id.len() == 71);
        let mut files = Files::default();
        files.add_layer(&layer, &Limits::default()).unwrap();
        assert_eq!(files.get("manifests/a.yaml"), Some(&b"kind: A"[..]));
    }

    #[test]
    fn paths_that_leave_the_root_are_ignored() {
        let mut files = Files::default();
        files
            .add_layer(
                &tar_of(&[("../etc/passwd", b"x"), ("/abs/ok", b"y")], false),
                &Limits::default(),
            )
            .unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files.get("abs/ok"), Some(&b"y"[..]));
    }

    #[test]
    fn only_the_kept_directories_are_held_and_counted() {
        let small = Limits {
            total_bytes: 4,
            ..Limits::default()
        };
        let mut files = Files::keeping(vec![PathBuf::from("/configs/")]);
        let layer = tar_of(
            &[
                ("bin/opm", b"a large binary"),
                ("configs/pkg/catalog.json", b"{}"),
            ],
            true,
        );
        files.add_layer(&layer, &small).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files.get("configs/pkg/catalog.json"), Some(&b"{}"[..]));
        assert_eq!(files.total_bytes(), 2);
    }

    #[test]
    fn oversized_content_fails_cleanly() {
        let small = Limits {
            layer_bytes: 1 << 20,
            total_bytes: 10,
            entries: 3,
        };
        let big = vec![0u8; 11];
        let error = Files::default()
            .add_layer(&tar_of(&[("big", &big)], true), &small)
            .unwrap_err();
        assert!(matches!(error, LayerError::TooLarge { limit: 10, .. }), "{error}");
        let many = tar_of(&[("a", b""), ("b", b""), ("c", b""), ("d", b"")], false);
        assert!(matches!(
            Files::default().add_layer(&many, &small),
            Err(LayerError::TooManyEntries(3))
        ));
        let tiny_layer = Limits {
            layer_bytes: 8,
            ..small
        };
        assert!(matches!(
            Files::default().add_layer(&many, &tiny_layer),
            Err(LayerError::TooLarge { limit: 8, .. })
        ));
        assert!(matches!(
            Files::default().add_layer(b"garbage that is not tar", &Limits::default()),
            Err(LayerError::Tar(_)) | Ok(())
        ));
    }

    /// A raw tar entry: a GNU header of type `kind` with `name`, then `content`, padded.
    fn raw_entry(kind: tar::EntryType, name: &str, content: &[u8]) -> Vec<u8> {
        let mut header = tar::Header::new_gnu();
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(kind);
        header.set_cksum();
        let mut out = header.as_bytes().to_vec();
        out.extend_from_slice(content);
        out.resize(out.len().div_ceil(512) * 512, 0);
        out
    }

    #[test]
    fn a_long_name_bomb_is_refused_at_the_header_limit() {
        // Found by the property tests: the tar reader held a GNU long name of any size in memory,
        // so a small gzip layer could make it allocate gigabytes.
        let mut tar = raw_entry(tar::EntryType::GNULongName, "././@LongLink", &vec![b'a'; 2 << 20]);
        tar.extend(raw_entry(tar::EntryType::Regular, "short", b"x"));
        tar.extend([0; 1024]);
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&tar).unwrap();
        let layer = encoder.finish().unwrap();
        assert!(layer.len() < 64 << 10, "{}", layer.len());
        let error = Files::default()
            .add_layer(&layer, &Limits::default())
            .unwrap_err();
        assert!(
            matches!(
                error,
                LayerError::TooLarge {
                    limit: ENTRY_METADATA_BYTES,
                    ..
                }
            ),
            "{error}"
        );
        assert!(error.to_string().contains("the header of an entry"), "{error}");
    }

    #[test]
    fn long_names_and_large_skipped_files_still_read() {
        let long = format!("configs/{}/catalog.json", "p".repeat(300));
        let mut name = long.clone().into_bytes();
        name.push(0);
        let mut tar = raw_entry(tar::EntryType::GNULongName, "././@LongLink", &name);
        tar.extend(raw_entry(tar::EntryType::Regular, "ignored", b"{}"));
        tar.extend(raw_entry(tar::EntryType::Regular, "bin/opm", &vec![7; 3 << 20]));
        tar.extend([0; 1024]);
        let mut files = Files::keeping(vec![PathBuf::from("configs")]);
        files.add_layer(&tar, &Limits::default()).unwrap();
        assert_eq!(files.get(&long), Some(&b"{}"[..]));
        assert_eq!(files.len(), 1);
    }

    #[test]
    fn a_file_that_cannot_be_written_is_named() {
        // Found by the property tests: a file `a` and a file `a/b` failed with only
        // "File exists (os error 17)".
        let mut files = Files::default();
        let layer = tar_of(&[("a", b"1"), ("a/b", b"2")], false);
        files.add_layer(&layer, &Limits::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let error = files.write_to(&root, &[]).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("cannot write {}", root.join("a").display())),
            "{message}"
        );
    }

    // Security: a bundle or catalog image cannot write outside the directory it is extracted
    // to. Each test extracts into `<tmp>/root` beside `<tmp>/outside`, which holds one file.

    /// A temporary directory with `outside/secret` in it, and where to extract.
    fn sandbox() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("outside/secret"), b"kept").unwrap();
        let root = dir.path().join("root");
        (dir, root)
    }

    /// Every path below `dir` (depth first), as `symlink_metadata` sees it.
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, std::fs::FileType)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            out.push((entry.path(), kind));
            if kind.is_dir() {
                walk(&entry.path(), out);
            }
        }
    }

    /// Writes `files` into the sandbox and checks that only `root` changed, that it holds no
    /// link, and that the file outside is untouched. The paths written, relative to `root`.
    fn write_confined(files: &Files, dir: &Path, root: &Path) -> Vec<PathBuf> {
        files.write_to(root, &[]).unwrap();
        let mut all = Vec::new();
        walk(dir, &mut all);
        let mut written = Vec::new();
        for (path, kind) in all {
            assert!(!kind.is_symlink(), "a link was made: {}", path.display());
            if let Ok(inside) = path.strip_prefix(root) {
                if kind.is_file() {
                    written.push(inside.to_path_buf());
                }
            } else {
                let allowed = [
                    dir.join("outside"),
                    dir.join("outside/secret"),
                    root.to_path_buf(),
                ];
                assert!(
                    allowed.contains(&path),
                    "written outside the root: {}",
                    path.display()
                );
            }
        }
        assert_eq!(std::fs::read(dir.join("outside/secret")).unwrap(), b"kept");
        written.sort();
        written
    }

    #[test]
    fn parent_directory_paths_are_not_extracted() {
        let (dir, root) = sandbox();
        let mut files = Files::default();
        let layer = tar_of(
            &[
                ("../outside/secret", b"overwritten"),
                ("manifests/../../outside/secret", b"overwritten"),
                ("./../outside/new", b"created"),
                ("manifests/../../../../../../tmp/escaped", b"created"),
                ("manifests/ok.yaml", b"kind: A"),
            ],
            false,
        );
        files.add_layer(&layer, &Limits::default()).unwrap();
        assert_eq!(files.len(), 1, "only the file inside is kept");
        let written = write_confined(&files, dir.path(), &root);
        assert_eq!(written, vec![PathBuf::from("manifests/ok.yaml")]);
    }

    #[test]
    fn absolute_paths_are_extracted_below_the_root() {
        let (dir, root) = sandbox();
        let secret = dir.path().join("outside/secret");
        let absolute = secret.to_str().unwrap().to_owned();
        let mut files = Files::default();
        let layer = tar_of(
            &[(&absolute, b"overwritten"), ("/manifests/a.yaml", b"kind: A")],
            true,
        );
        files.add_layer(&layer, &Limits::default()).unwrap();
        let written = write_confined(&files, dir.path(), &root);
        let relative = PathBuf::from(absolute.trim_start_matches('/'));
        let mut wanted = vec![PathBuf::from("manifests/a.yaml"), relative];
        wanted.sort();
        assert_eq!(written, wanted, "both land below the root");
    }

    #[test]
    fn a_symlink_is_never_made_nor_written_through() {
        let (dir, root) = sandbox();
        let outside = dir.path().join("outside");
        for target in [outside.to_str().unwrap(), "../outside", "../../../../../../"] {
            let mut tar = Vec::new();
            let mut link = raw_entry(tar::EntryType::Symlink, "manifests", b"");
            // The link's target, in the header's linkname field (offset 157).
            link[157..157 + target.len()].copy_from_slice(target.as_bytes());
            let mut header = tar::Header::from_byte_slice(&link[..512]).clone();
            header.set_cksum();
            tar.extend_from_slice(header.as_bytes());
            // Then a file written through the link, in the same layer and in the next one.
            tar.extend(raw_entry(
                tar::EntryType::Regular,
                "manifests/secret",
                b"overwritten",
            ));
            tar.extend([0; 1024]);
            let mut files = Files::default();
            files.add_layer(&tar, &Limits::default()).unwrap();
            files
                .add_layer(
                    &tar_of(&[("manifests/new", b"created")], false),
                    &Limits::default(),
                )
                .unwrap();
            let written = write_confined(&files, dir.path(), &root);
            assert_eq!(
                written,
                vec![PathBuf::from("manifests/new"), PathBuf::from("manifests/secret")],
                "link to {target}: the files land in a real directory below the root"
            );
            std::fs::remove_dir_all(&root).unwrap();
        }
    }

    #[test]
    fn a_hard_link_is_never_made_nor_followed() {
        let (dir, root) = sandbox();
        let secret = dir.path().join("outside/secret");
        for target in [secret.to_str().unwrap(), "../outside/secret", "/etc/passwd"] {
            let mut link = raw_entry(tar::EntryType::Link, "manifests/secret", b"");
            link[157..157 + target.len()].copy_from_slice(target.as_bytes());
            let mut header = tar::Header::from_byte_slice(&link[..512]).clone();
            header.set_cksum();
            let mut tar = header.as_bytes().to_vec();
            tar.extend([0; 1024]);
            let mut files = Files::default();
            files.add_layer(&tar, &Limits::default()).unwrap();
            assert!(files.is_empty(), "link to {target}: not kept");
            assert!(write_confined(&files, dir.path(), &root).is_empty());
        }
    }
}
