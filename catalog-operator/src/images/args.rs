//! The flags of `catalog-operator run` for pulling bundle and catalog images:
//! timeouts, retries, size limits, plain-HTTP registries and registry mirrors.
//!
//! Mirrors come from `--image-mirror source=mirror[,mirror...]` flags and from
//! `--image-mirrors-file`, a YAML or JSON file in the shape of an
//! ImageDigestMirrorSet (`spec.imageDigestMirrors`, or `imageDigestMirrors` at
//! the top): a list of `{source, mirrors}`. As with ImageDigestMirrorSet, mirrors
//! are tried, in order, before the source, for references by digest only.

use std::{path::PathBuf, time::Duration};

use olm_oci::{Limits, Mirrors, PullOptions, mirror::MirrorRule};
use olm_runtime::leader::parse_duration;
use serde::Deserialize;

/// Image pulling flags.
#[derive(clap::Args, Debug, Clone)]
pub struct ImageArgs {
    /// Time for one request to a registry (connect, and each read).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub image_pull_timeout: Duration,
    /// Attempts per image before a registry is reported unreachable (with
    /// exponential backoff from 200ms between them).
    #[arg(long, default_value_t = 4)]
    pub image_pull_attempts: u32,
    /// Largest compressed layer of an image, in bytes.
    #[arg(long, default_value_t = Limits::default().layer_bytes)]
    pub image_max_layer_bytes: u64,
    /// Largest uncompressed content kept of one image, in bytes.
    #[arg(long, default_value_t = Limits::default().total_bytes)]
    pub image_max_bytes: u64,
    /// A registry (`host:port`) spoken to over plain HTTP (repeatable); registries
    /// on loopback always are.
    #[arg(long = "insecure-registry")]
    pub insecure_registries: Vec<String>,
    /// A mirror mapping `source=mirror[,mirror...]` (repeatable), e.g.
    /// `quay.io/operatorhubio=mirror.local/operatorhubio`.
    #[arg(long = "image-mirror")]
    pub image_mirrors: Vec<String>,
    /// A file of mirror mappings in the shape of an ImageDigestMirrorSet.
    #[arg(long)]
    pub image_mirrors_file: Option<PathBuf>,
}

/// One `imageDigestMirrors` entry.
#[derive(Deserialize)]
struct DigestMirror {
    source: String,
    #[serde(default)]
    mirrors: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MirrorList {
    #[serde(default)]
    image_digest_mirrors: Vec<DigestMirror>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MirrorFile {
    #[serde(default)]
    spec: Option<MirrorList>,
    #[serde(default)]
    image_digest_mirrors: Vec<DigestMirror>,
}

/// The mirror rules of a mirrors file's text; `path` names it in errors.
pub fn parse_mirrors_file(path: &str, text: &str) -> Result<Vec<MirrorRule>, String> {
    let file: MirrorFile = serde_saphyr::from_str(text).map_err(|e| format!("mirrors file {path}: {e}"))?;
    let entries = file
        .spec
        .map(|s| s.image_digest_mirrors)
        .filter(|e| !e.is_empty())
        .unwrap_or(file.image_digest_mirrors);
    entries
        .into_iter()
        .map(|e| {
            let source = e.source.trim().to_owned();
            if source.is_empty() || e.mirrors.is_empty() {
                return Err(format!(
                    "mirrors file {path}: every entry needs a source and at least one mirror"
                ));
            }
            Ok(MirrorRule {
                source,
                mirrors: e.mirrors,
            })
        })
        .collect()
}

impl ImageArgs {
    /// The pull options these flags describe.
    pub fn pull_options(&self) -> Result<PullOptions, String> {
        let mut rules = Vec::new();
        if let Some(path) = &self.image_mirrors_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read mirrors file {}: {e}", path.display()))?;
            rules.extend(parse_mirrors_file(&path.display().to_string(), &text)?);
        }
        let flags = Mirrors::parse(&self.image_mirrors)?;
        rules.extend(flags.rules().iter().cloned());
        Ok(PullOptions {
            timeout: self.image_pull_timeout,
            attempts: self.image_pull_attempts.max(1),
            limits: Limits {
                layer_bytes: self.image_max_layer_bytes,
                total_bytes: self.image_max_bytes,
                ..Limits::default()
            },
            insecure_registries: self.insecure_registries.clone(),
            mirrors: Mirrors::new(rules),
            ..PullOptions::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_digest_mirror_set_and_the_bare_list_both_read() {
        let idms = "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: m\nspec:\n  imageDigestMirrors:\n  - source: quay.io/operatorhubio\n    mirrors: [mirror.local/hub]\n";
        let rules = parse_mirrors_file("m.yaml", idms).unwrap();
        assert_eq!(rules[0].source, "quay.io/operatorhubio");
        assert_eq!(rules[0].mirrors, vec!["mirror.local/hub"]);
        let bare = r#"{"imageDigestMirrors": [{"source": "quay.io", "mirrors": ["a.local", "b.local"]}]}"#;
        assert_eq!(parse_mirrors_file("m.json", bare).unwrap()[0].mirrors.len(), 2);
        assert!(parse_mirrors_file("bad.yaml", "imageDigestMirrors: [{source: quay.io}]").is_err());
    }

    #[test]
    fn flags_become_pull_options() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            images: ImageArgs,
        }
        let cli = Cli::parse_from([
            "x",
            "--image-pull-timeout",
            "5s",
            "--image-max-bytes",
            "1000",
            "--image-mirror",
            "quay.io=m.local/quay",
        ]);
        let options = cli.images.pull_options().unwrap();
        assert_eq!(options.timeout, Duration::from_secs(5));
        assert_eq!(options.limits.total_bytes, 1000);
        assert_eq!(
            options.mirrors.candidates("quay.io/x/y@sha256:1")[0],
            "m.local/quay/x/y@sha256:1"
        );
    }
}
