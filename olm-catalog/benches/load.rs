//! Catalog loading on the real corpus (`../shared/corpus` next to the workspace, or
//! `OLM_RS_CORPUS`): fbc/v4.21 alone, and the whole corpus (every bundle directory rendered into
//! its package's catalog, the enmasse package manifest, both FBC trees).
//!
//! Besides criterion's timings it prints the corpus size on disk and the memory the loaded model
//! takes, measured two ways: `Catalog::heap_size` (capacities of every string and vector of the
//! model, allocator overhead excluded) and the growth of the process's resident set while the
//! model is alive (includes allocator overhead and memory the allocator kept after parsing, so
//! it overstates). A counting global allocator would need `unsafe`, which the workspace forbids.

use std::{
    hint::black_box,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use criterion::{Criterion, criterion_group, criterion_main};
use olm_catalog::{Catalog, fbc, manifests_dir, render};

fn corpus() -> PathBuf {
    let dir = match std::env::var_os("OLM_RS_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
    };
    assert!(
        dir.join("bundles").is_dir(),
        "the corpus is not at {}: put shared/corpus next to the workspace or set OLM_RS_CORPUS",
        dir.display()
    );
    dir
}

fn disk_size(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            total += disk_size(&entry.path());
        } else if matches!(
            entry.path().extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            total += meta.len();
        }
    }
    total
}

fn load_all(corpus: &Path) -> Vec<Catalog> {
    let mut out = Vec::new();
    let mut pkgs: Vec<PathBuf> = std::fs::read_dir(corpus.join("bundles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    pkgs.sort();
    for pkg in pkgs {
        out.push(render::render_package_dir(&pkg).unwrap().catalog);
    }
    out.push(
        manifests_dir::load(corpus.join("packagemanifests/enmasse"))
            .unwrap()
            .catalog,
    );
    out.push(fbc::load_dir(corpus.join("fbc/v4.21")).unwrap());
    out.push(fbc::load_dir(corpus.join("fbc/v4.16-bundle-object")).unwrap());
    out
}

/// Resident set size of this process, in bytes (Linux), or 0.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// CPU time (user + system, all threads) this process has used, from /proc (Linux), or zero.
/// On a shared machine wall-clock time varies with the load; CPU time much less.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (in parentheses); times are in clock ticks, 100 a second.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // fields[0] is the state; utime and stime are fields 14 and 15 of the whole line.
    let ticks = field(11) + field(12);
    Duration::from_millis(ticks * 10)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn figures(corpus: &Path) {
    let v421 = corpus.join("fbc/v4.21");
    let disk_v421 = disk_size(&v421);
    let disk_all = disk_size(&corpus.join("bundles"))
        + disk_size(&corpus.join("packagemanifests"))
        + disk_size(&corpus.join("fbc"));

    let before = rss();
    let start = Instant::now();
    let cat = fbc::load_dir(&v421).unwrap();
    let took = start.elapsed();
    let heap = cat.heap_size() as u64;
    let grown = rss().saturating_sub(before);
    println!(
        "fbc/v4.21: {:.1} MiB on disk, loaded once in {took:.0?}; model heap {:.1} MiB ({:.2}x disk), RSS grew {:.1} MiB",
        mib(disk_v421),
        mib(heap),
        heap as f64 / disk_v421 as f64,
        mib(grown)
    );
    drop(cat);

    let before = rss();
    let start = Instant::now();
    let all = load_all(corpus);
    let took = start.elapsed();
    let heap: u64 = all.iter().map(|c| c.heap_size() as u64).sum();
    let grown = rss().saturating_sub(before);
    let bundles: usize = all.iter().map(|c| c.bundles.len()).sum();
    println!(
        "whole corpus: {:.1} MiB on disk, {bundles} bundles, loaded once in {took:.0?}; model heap {:.1} MiB ({:.2}x disk), RSS grew {:.1} MiB ({:.2}x disk)",
        mib(disk_all),
        mib(heap),
        heap as f64 / disk_all as f64,
        mib(grown),
        grown as f64 / disk_all as f64
    );
    drop(all);

    // CPU time per v4.21 load, over enough loads for the 10 ms clock-tick resolution.
    let runs = 10;
    let (cpu0, wall0) = (cpu_time(), Instant::now());
    for _ in 0..runs {
        black_box(fbc::load_dir(&v421).unwrap());
    }
    let (cpu, wall) = (cpu_time() - cpu0, wall0.elapsed());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "fbc/v4.21 over {runs} loads: {:.0?} wall and {:.0?} CPU per load ({threads} threads; on an idle machine \
         wall time is about CPU time / threads)",
        wall / runs,
        cpu / runs
    );
}

fn bench(c: &mut Criterion) {
    let corpus = corpus();
    figures(&corpus);
    let v421 = corpus.join("fbc/v4.21");
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    group.bench_function("fbc_v4.21", |b| {
        b.iter(|| black_box(fbc::load_dir(&v421).unwrap()))
    });
    group.bench_function("whole_corpus", |b| b.iter(|| black_box(load_all(&corpus))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
