//! Prints figures (no assertions) for catalog images served from memory: the
//! time to pull a catalog image and load it, and the memory the loaded catalog
//! takes relative to the size of its file-based catalog.
//!
//! Usage: `olm-rs-bench-images [fbc-dir]` with `hack/registry.sh up` done (the
//! registry's address is read from `hack/registry.sh env`); the default catalog
//! is the corpus's `fbc/v4.21`. Each figure is the best of five runs.

use std::{path::PathBuf, time::Instant};

use catalog_operator::{
    bundles::BundleSource,
    catalogs::CatalogContent,
    images::catalogs::{catalog_from_image, configs_dir},
};
use olm_oci::{PullOptions, Puller};
use olm_resolver::model::CatalogId;

/// Resident memory of this process, in bytes (Linux).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| olm_testkit::corpus_dir().join("fbc/v4.21"));
    let registry = e2e::images::test_registry();
    let catalog = olm_catalog::fbc::load_dir(&dir)
        .unwrap_or_else(|e| panic!("{} is a file-based catalog: {e}", dir.display()));
    let fbc_bytes: usize = e2e::images::catalog_image_content(&catalog)
        .iter()
        .map(|(_, c)| c.len())
        .sum();
    let puller = Puller::new(PullOptions::default());
    let image = format!("{}/bench/catalog:latest", registry.address);
    let digest = e2e::images::push_catalog_image(&puller, &catalog, &image, &registry.secrets)
        .await
        .expect("the catalog image is pushed");
    println!(
        "catalog {}: {} packages, {} bundles, file-based catalog {:.1} MiB, image {image}@{digest}",
        dir.display(),
        catalog.packages.len(),
        catalog.bundles.len(),
        mib(fbc_bytes as u64)
    );
    drop(catalog);

    let mut pulls = Vec::new();
    let mut loads = Vec::new();
    let mut kept = Vec::new();
    for _ in 0..5 {
        let before = rss();
        let started = Instant::now();
        let pulled = puller
            .pull_selected(&image, &registry.secrets, &|labels| vec![configs_dir(labels)])
            .await
            .expect("the catalog image is pulled");
        let pulled_at = started.elapsed();
        let loaded = catalog_from_image(&pulled, &image).expect("the image holds a catalog");
        drop(pulled);
        let content = CatalogContent::new(
            CatalogId::new("bench", "olm"),
            loaded,
            Vec::new(),
            BundleSource::Memory,
        );
        let total = started.elapsed();
        pulls.push(pulled_at);
        loads.push(total - pulled_at);
        kept.push(rss().saturating_sub(before));
        drop(content);
    }
    let best = |v: &[std::time::Duration]| v.iter().min().copied().unwrap_or_default();
    let memory = kept.iter().copied().max().unwrap_or(0);
    println!(
        "pull (manifest, config, layers, digests checked): {:?}",
        best(&pulls)
    );
    println!(
        "load (parse the file-based catalog, build the snapshot): {:?}",
        best(&loads)
    );
    println!("image to READY content: {:?}", best(&pulls) + best(&loads));
    println!(
        "memory kept per loaded catalog: {:.1} MiB ({:.2}x its file-based catalog; resident set growth)",
        mib(memory),
        memory as f64 / fbc_bytes.max(1) as f64
    );
}
