//! Resolution on the shared corpus of real OperatorHub bundles: every package
//! rendered into one catalog, as a CatalogSource would serve it.
//!
//! `cargo bench -p catalog-operator --bench corpus` prints the corpus size,
//! then criterion's figures for: building the resolver's index, one
//! Subscription (each package in turn), a namespace of 20 Subscriptions, and
//! an upgrade walked along the longest replaces chain.

use std::{
    hint::black_box,
    path::{Path, PathBuf},
    time::Instant,
};

use catalog_operator::{snapshot, source};
use criterion::{Criterion, criterion_group, criterion_main};
use olm_catalog::Catalog;
use olm_resolver::{
    CatalogIndex,
    model::{BundleVersion, CatalogId, InstalledCsv, Subscription},
    plan::{Change, Outcome},
};

const NAMESPACE: &str = "operators";

fn corpus_dir() -> PathBuf {
    match std::env::var_os("OLM_RS_CORPUS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
    }
}

fn disk_size(path: &Path) -> u64 {
    if path.is_dir() {
        std::fs::read_dir(path)
            .map(|entries| entries.flatten().map(|e| disk_size(&e.path())).sum())
            .unwrap_or(0)
    } else {
        path.metadata().map(|m| m.len()).unwrap_or(0)
    }
}

fn load() -> Catalog {
    let dir = corpus_dir();
    assert!(
        dir.is_dir(),
        "corpus missing at {}: set OLM_RS_CORPUS",
        dir.display()
    );
    let started = Instant::now();
    let mut catalog = Catalog::default();
    for part in ["bundles", "packagemanifests"] {
        let (content, _) = source::load(&dir.join(part)).expect("corpus loads");
        catalog.extend(content);
    }
    catalog.sort();
    println!(
        "corpus: {} packages, {} channels, {} bundles from {:.1} MiB of bundle directories, rendered in {:.2?}",
        catalog.packages.len(),
        catalog.channels.len(),
        catalog.bundles.len(),
        (disk_size(&dir.join("bundles")) + disk_size(&dir.join("packagemanifests"))) as f64 / 1_048_576.0,
        started.elapsed()
    );
    catalog
}

fn subscription(package: &str, catalog: &CatalogId) -> Subscription {
    Subscription::new(package, NAMESPACE, package, catalog.clone())
}

/// The channel with the longest `replaces` chain, and that chain's bundles, newest first.
fn longest_chain(catalog: &Catalog) -> (String, Vec<String>) {
    let mut best: (String, Vec<String>) = (String::new(), Vec::new());
    for channel in &catalog.channels {
        for start in &channel.entries {
            let mut chain = vec![start.name.clone()];
            let mut at = start;
            while let Some(next) = at.replaces.as_deref().and_then(|r| channel.entry(r)) {
                if chain.contains(&next.name) {
                    break;
                }
                chain.push(next.name.clone());
                at = next;
            }
            if chain.len() > best.1.len() {
                best = (channel.name.clone(), chain);
            }
        }
    }
    best
}

fn benches(c: &mut Criterion) {
    let catalog = load();
    let id = CatalogId::new("community", "olm");
    let snap = snapshot::snapshot(id.clone(), 0, &catalog).snapshot;

    c.bench_function("index: build from the corpus snapshot", |b| {
        b.iter(|| black_box(CatalogIndex::new(vec![snap.clone()])))
    });
    let index = CatalogIndex::new(vec![snap]);

    let packages: Vec<String> = catalog.packages.iter().map(|p| p.name.clone()).collect();
    let mut next = 0;
    c.bench_function("resolve: one subscription (each corpus package in turn)", |b| {
        b.iter(|| {
            let package = &packages[next % packages.len()];
            next += 1;
            black_box(index.resolve(NAMESPACE, &[], &[subscription(package, &id)]))
        })
    });

    // Twenty packages that resolve alone, subscribed together in one namespace.
    let twenty: Vec<Subscription> = packages
        .iter()
        .filter(|p| {
            let alone = index.resolve(NAMESPACE, &[], &[subscription(p, &id)]);
            matches!(alone.groups[0].outcome, Outcome::Plan(_))
        })
        .take(20)
        .map(|p| subscription(p, &id))
        .collect();
    c.bench_function("resolve: a namespace of 20 subscriptions", |b| {
        b.iter(|| black_box(index.resolve(NAMESPACE, &[], &twenty)))
    });

    // Installed at the oldest bundle of the longest chain, resolving again
    // after each step (OLM upgrades one step per resolution) until the head.
    let (channel, chain) = longest_chain(&catalog);
    let oldest = chain.last().expect("a chain").clone();
    let bundle = |name: &str| {
        catalog
            .bundles
            .iter()
            .find(|b| b.name == name)
            .expect("bundle of the chain")
    };
    let package = bundle(&oldest).package.clone();
    let walk = || {
        let mut at = oldest.clone();
        let mut steps = 0;
        loop {
            let version = bundle(&at).version().expect("version").as_str().to_owned();
            let installed = InstalledCsv::new(
                at.clone(),
                Some(&package),
                BundleVersion::parse(&version).expect("semver"),
            );
            let sub = subscription(&package, &id)
                .channel(channel.clone())
                .installed_csv(at.clone());
            let resolution = index.resolve(NAMESPACE, &[installed], &[sub]);
            let Outcome::Plan(plan) = &resolution.groups[0].outcome else {
                break;
            };
            match plan.subscriptions.first() {
                Some(result) if result.change != Change::Stay => {
                    at = result.bundle.clone();
                    steps += 1;
                }
                _ => break,
            }
        }
        (at, steps)
    };
    let (head, steps) = walk();
    assert!(steps > 0, "the walk from {oldest} upgrades at least once");
    println!(
        "longest replaces chain: {} bundles of {package} in channel {channel}, from {oldest} to {head} in {steps} upgrades",
        chain.len()
    );
    c.bench_function(
        "resolve: upgrade along the longest replaces chain (all steps)",
        |b| b.iter(|| black_box(walk())),
    );
}

criterion_group! {
    name = corpus;
    config = Criterion::default().sample_size(30);
    targets = benches
}
criterion_main!(corpus);
