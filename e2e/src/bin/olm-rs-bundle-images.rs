//! Builds bundle images from package directories of bundle directories (e.g.
//! `../shared/corpus/bundles/kube-green`), pushes them to a registry, and writes
//! a file-based catalog in the community pipeline's shape: `olm.csv.metadata`
//! only, bundle images referenced by digest.
//!
//! Usage: `olm-rs-bundle-images <repository-prefix> <catalog.json> <package-dir>...`
//! e.g. `olm-rs-bundle-images 127.0.0.1:5000/bundles /tmp/catalog/catalog.json corpus/bundles/kube-green`.
//! With `OLM_RS_CATALOG_IMAGE=<repository:tag>`, the catalog is also pushed as a
//! catalog image (file-based catalog under `/configs`).
//! Credentials for the registry come from `$DOCKER_CONFIG/config.json` when that
//! file exists; a registry on loopback is spoken to over plain HTTP.

use std::path::PathBuf;

use olm_catalog::Catalog;
use olm_oci::{DockerConfig, PullOptions, Puller};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: olm-rs-bundle-images <repository-prefix> <catalog.json> <package-dir>...");
        std::process::exit(2);
    }
    let prefix = &args[0];
    let out = PathBuf::from(&args[1]);
    let secrets = match std::env::var_os("DOCKER_CONFIG").map(|d| PathBuf::from(d).join("config.json")) {
        Some(path) if path.is_file() => {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
            DockerConfig::parse(&bytes).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())))
        }
        _ => DockerConfig::default(),
    };
    let puller = Puller::new(PullOptions::default());
    let mut catalog = Catalog::default();
    for dir in &args[2..] {
        let package = e2e::images::image_catalog(&puller, PathBuf::from(dir).as_path(), prefix, &secrets)
            .await
            .unwrap_or_else(|e| fail(&format!("{dir}: {e}")));
        for bundle in &package.bundles {
            println!("{} {}", bundle.name, bundle.image);
        }
        catalog.extend(package);
    }
    std::fs::write(&out, olm_catalog::fbc::to_json_stream(&catalog))
        .unwrap_or_else(|e| fail(&format!("{}: {e}", out.display())));
    if let Ok(image) = std::env::var("OLM_RS_CATALOG_IMAGE") {
        let digest = e2e::images::push_catalog_image(&puller, &catalog, &image, &secrets)
            .await
            .unwrap_or_else(|e| fail(&format!("catalog image {image}: {e}")));
        println!("catalog {image} {digest}");
    }
}

fn fail(message: &str) -> ! {
    eprintln!("olm-rs-bundle-images: {message}");
    std::process::exit(1);
}
