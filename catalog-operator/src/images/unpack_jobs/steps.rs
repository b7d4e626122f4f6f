//! `catalog-operator unpack`: the three steps of an unpack Job's Pod
//! ([`super`]), run by the node that pulls the bundle image.
//!
//! - `unpack install DEST`: copy this binary to DEST (the `util` container), so
//!   that the bundle image, which has no shell, can run it.
//! - `unpack copy DIR`: in the bundle image, find the bundle's
//!   `metadata/annotations.yaml` and copy its `metadata/` and `manifests/`
//!   (the directory its annotation names) to `DIR` (the `pull` container, as
//!   OLM's `cpb`).
//! - `unpack extract -m DIR -n NAMESPACE -c CONFIGMAP [-z]`: write the bundle
//!   in `DIR` into the ConfigMap (the `extract` container, as `opm alpha bundle
//!   extract`); the image named by `CONTAINER_IMAGE` is recorded on it.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use olm_api::labels::{bundle as bundle_keys, unpack};

use super::configmap;

/// The steps of an unpack Job.
#[derive(clap::Args, Debug)]
pub struct UnpackArgs {
    /// Which step.
    #[command(subcommand)]
    pub step: UnpackStep,
}

/// One step of an unpack Job.
#[derive(clap::Subcommand, Debug)]
pub enum UnpackStep {
    /// Copy this binary to DEST.
    Install {
        /// Where the copy goes.
        dest: PathBuf,
    },
    /// Copy the bundle of this image's file system to DIR.
    Copy {
        /// Where the bundle's `manifests/` and `metadata/` go.
        dir: PathBuf,
        /// Where the bundle image's file system starts.
        #[arg(long, default_value = "/")]
        from: PathBuf,
    },
    /// Write the bundle in a directory into a ConfigMap.
    Extract {
        /// The bundle directory (with `manifests/` and `metadata/`).
        #[arg(short = 'm', long = "manifestsdir")]
        manifests_dir: PathBuf,
        /// The ConfigMap's namespace.
        #[arg(short = 'n', long)]
        namespace: String,
        /// The ConfigMap.
        #[arg(short = 'c', long)]
        configmap: String,
        /// Gzip and base64 each file into `binaryData`.
        #[arg(short = 'z', long)]
        gzip: bool,
    },
}

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum UnpackStepError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The image has no bundle.
    #[error("no bundle under {0}: it has no metadata/annotations.yaml")]
    NoBundle(String),
    /// The bundle could not be put in ConfigMap form.
    #[error(transparent)]
    Format(#[from] configmap::FormatError),
    /// The ConfigMap could not be read or written.
    #[error("ConfigMap {namespace}/{name}: {source}")]
    Api {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> UnpackStepError + '_ {
    move |source| UnpackStepError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl UnpackArgs {
    /// Runs the step; errors go to stderr, and the exit code says how it went.
    pub fn run(self) -> ExitCode {
        let result = match self.step {
            UnpackStep::Install { dest } => install(&dest),
            UnpackStep::Copy { dir, from } => copy_bundle(&from, &dir).map(|copied| {
                println!("copied {copied} files of the bundle to {}", dir.display());
            }),
            UnpackStep::Extract {
                manifests_dir,
                namespace,
                configmap,
                gzip,
            } => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(io(Path::new("the async runtime")))
                .and_then(|runtime| runtime.block_on(extract(&manifests_dir, &namespace, &configmap, gzip))),
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {}", crate::error_chain(&error));
                ExitCode::FAILURE
            }
        }
    }
}

/// Copies this executable to `dest`, executable.
fn install(dest: &Path) -> Result<(), UnpackStepError> {
    let me = std::env::current_exe().map_err(io(Path::new("this executable")))?;
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::copy(&me, dest).map_err(io(dest))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755)).map_err(io(dest))?;
    }
    Ok(())
}

/// The bundle's `annotations.yaml` below `from`: at `metadata/annotations.yaml`,
/// or anywhere else (skipping the kernel's file systems).
fn find_annotations(from: &Path) -> Option<PathBuf> {
    let usual = from.join("metadata/annotations.yaml");
    if usual.is_file() {
        return Some(usual);
    }
    let mut dirs = vec![from.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() && !["dev", "proc", "sys"].iter().any(|k| path == from.join(k)) {
                dirs.push(path);
            } else if kind.is_file() && entry.file_name() == "annotations.yaml" {
                return Some(path);
            }
        }
    }
    None
}

/// The directory the bundle annotation `key` names, below `from`; none when
/// the annotation would lead out of `from` (`..`), so that a bundle cannot make
/// the Job copy files of the node or the Pod that are not in its image.
fn named_dir(annotations: &str, key: &str, from: &Path) -> Option<PathBuf> {
    let value: serde_json::Value = serde_saphyr::from_str(annotations).ok()?;
    let dir = Path::new(value.get("annotations")?.get(key)?.as_str()?);
    let inside = dir.components().all(|c| {
        matches!(
            c,
            std::path::Component::Normal(_) | std::path::Component::CurDir | std::path::Component::RootDir
        )
    });
    inside.then(|| from.join(dir.strip_prefix("/").unwrap_or(dir)))
}

/// Copies the regular files of `from` to the directory `to`.
fn copy_files(from: &Path, to: &Path) -> Result<usize, UnpackStepError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    let mut copied = 0;
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        if entry.file_type().map_err(io(&entry.path()))?.is_file() {
            let target = to.join(entry.file_name());
            std::fs::copy(entry.path(), &target).map_err(io(&target))?;
            copied += 1;
        }
    }
    Ok(copied)
}

/// Copies the bundle found below `from` to `dir` as `manifests/` and
/// `metadata/`; the number of files copied.
pub fn copy_bundle(from: &Path, dir: &Path) -> Result<usize, UnpackStepError> {
    let annotations =
        find_annotations(from).ok_or_else(|| UnpackStepError::NoBundle(from.display().to_string()))?;
    let metadata = annotations.parent().unwrap_or(from).to_path_buf();
    let text = std::fs::read_to_string(&annotations).map_err(io(&annotations))?;
    let manifests = named_dir(&text, bundle_keys::MANIFESTS, from)
        .filter(|d| d.is_dir())
        .unwrap_or_else(|| metadata.parent().unwrap_or(from).join("manifests"));
    Ok(copy_files(&metadata, &dir.join("metadata"))? + copy_files(&manifests, &dir.join("manifests"))?)
}

/// Writes the bundle in `dir` into ConfigMap `namespace/name`.
async fn extract(dir: &Path, namespace: &str, name: &str, gzip: bool) -> Result<(), UnpackStepError> {
    let image = std::env::var(unpack::CONTAINER_IMAGE_ENV)
        .ok()
        .filter(|i| !i.is_empty());
    let content = configmap::write(dir, image.as_deref(), gzip)?;
    let api_error = |source| UnpackStepError::Api {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    };
    let client = Client::try_default().await.map_err(api_error)?;
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let mut current = api.get(name).await.map_err(api_error)?;
    current
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .extend(content.metadata.annotations.unwrap_or_default());
    current.data = content.data;
    current.binary_data = content.binary_data;
    api.replace(name, &Default::default(), &current)
        .await
        .map_err(api_error)?;
    println!(
        "wrote the bundle in {} to ConfigMap {namespace}/{name}",
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_finds_the_bundle_of_an_image_file_system() {
        let corpus = olm_testkit::corpus_dir().join("bundles/kube-green/0.7.1");
        let bundle = olm_catalog::bundle::bundle_root(&corpus).unwrap();
        let image = tempfile::tempdir().unwrap();
        // An image with the bundle under a directory of its own.
        let nested = image.path().join("opt/bundle");
        copy_files(&bundle.join("manifests"), &nested.join("manifests")).unwrap();
        copy_files(&bundle.join("metadata"), &nested.join("metadata")).unwrap();
        let out = tempfile::tempdir().unwrap();
        let copied = copy_bundle(image.path(), out.path()).unwrap();
        let expected = std::fs::read_dir(bundle.join("manifests")).unwrap().count()
            + std::fs::read_dir(bundle.join("metadata")).unwrap().count();
        assert_eq!(copied, expected);
        assert!(olm_catalog::bundle::bundle_root(out.path()).is_some());
    }

    #[test]
    fn copy_without_a_bundle_says_where_it_looked() {
        let empty = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let error = copy_bundle(empty.path(), out.path()).unwrap_err();
        assert!(error.to_string().contains("annotations.yaml"), "{error}");
    }

    #[test]
    fn an_annotation_naming_a_directory_outside_the_image_is_not_followed() {
        // Security: `from` is the image's file system; a bundle whose annotation names
        // `../outside/` must not make the Job copy what lies beside it.
        let sandbox = tempfile::tempdir().unwrap();
        let outside = sandbox.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("token.yaml"), "kind: Secret").unwrap();
        let image = sandbox.path().join("image");
        std::fs::create_dir_all(image.join("metadata")).unwrap();
        std::fs::create_dir_all(image.join("manifests")).unwrap();
        std::fs::write(image.join("manifests/csv.yaml"), "kind: ClusterServiceVersion").unwrap();
        for named in ["../outside/", "manifests/../../outside", "/../outside"] {
            std::fs::write(
                image.join("metadata/annotations.yaml"),
                format!("annotations:\n  {}: {named}\n", bundle_keys::MANIFESTS),
            )
            .unwrap();
            let out = tempfile::tempdir().unwrap();
            copy_bundle(&image, out.path()).unwrap();
            let copied: Vec<_> = std::fs::read_dir(out.path().join("manifests"))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(
                copied,
                vec!["csv.yaml"],
                "{named}: only the image's own manifests"
            );
        }
    }
}
