//! Resolver benchmarks on synthetic catalogs shaped like the community catalog (see
//! `shared/corpus`: ~20 bundles per package, ~9 provided APIs per bundle, replaces chains with
//! some skipRange, a second channel per package, dependencies by API and by package range).
//!
//! `cargo bench -p olm-resolver` prints the figures. Corpus-based benchmarks come once the
//! catalog crate's loaders can feed an adapter.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use olm_resolver::{
    CatalogIndex,
    model::{
        BundleInput, BundleVersion, CatalogId, CatalogSnapshot, ChannelEntry, ChannelInput, Gvk,
        InstalledCsv, PackageInput, Requirement, Subscription,
    },
    plan::Outcome,
    range::VersionRange,
};

const NAMESPACE: &str = "team-a";
const KINDS_PER_PACKAGE: usize = 9;

fn package_name(p: usize) -> String {
    format!("op-{p:03}")
}

fn version(i: usize) -> String {
    format!("{}.{}.0", 1 + i / 5, i % 5)
}

fn bundle_name(p: usize, i: usize) -> String {
    format!("{}.v{}", package_name(p), version(i))
}

fn kind(p: usize, k: usize) -> Gvk {
    Gvk::new(
        format!("{}.example.com", package_name(p)),
        "v1",
        format!("Kind{k}"),
    )
}

/// A catalog of `packages` packages with `per_package` bundles each.
fn catalog(name: &str, priority: i32, packages: usize, per_package: usize) -> CatalogSnapshot {
    let mut snapshot = CatalogSnapshot {
        id: CatalogId::new(name, "olm"),
        priority,
        packages: Vec::new(),
        bundles: Vec::new(),
    };
    for p in 0..packages {
        let mut stable = Vec::new();
        for i in 0..per_package {
            let mut entry = ChannelEntry::new(bundle_name(p, i));
            if i > 0 {
                entry = entry.replaces(bundle_name(p, i - 1));
            }
            if i % 5 == 4 {
                let range = format!(">={} <{}", version(i - 3), version(i));
                entry = entry.skip_range(VersionRange::parse(&range).unwrap());
            }
            stable.push(entry);
            let mut bundle = BundleInput::new(
                bundle_name(p, i),
                package_name(p),
                BundleVersion::parse(&version(i)).unwrap(),
            );
            bundle.provides = (0..KINDS_PER_PACKAGE).map(|k| kind(p, k)).collect();
            // About one package in three depends on an earlier one.
            if p >= 2 && p % 5 == 1 {
                bundle = bundle.requires(Requirement::gvk(kind(p - 1, 0)));
            }
            if p >= 2 && p % 7 == 2 {
                bundle = bundle.requires(Requirement::package(package_name(p - 2), ">=1.1.0").unwrap());
            }
            if p >= 4 && p % 11 == 4 {
                bundle = bundle.requires(Requirement::csv_required_crd(kind(p - 3, 1)));
            }
            snapshot.bundles.push(bundle);
        }
        let fast: Vec<ChannelEntry> = stable.iter().rev().take(3).cloned().collect();
        let mut fast_entries = fast;
        if let Some(last) = fast_entries.last_mut() {
            last.replaces = None;
        }
        snapshot.packages.push(PackageInput::new(
            package_name(p),
            Some("stable"),
            vec![
                ChannelInput::new("stable", stable),
                ChannelInput::new("fast", fast_entries),
            ],
        ));
    }
    snapshot
}

/// A catalog with a few alternative providers of the main catalog's APIs, at a lower priority.
fn mirror(packages: usize) -> CatalogSnapshot {
    let mut snapshot = catalog("mirror", -1, packages, 5);
    for bundle in &mut snapshot.bundles {
        bundle.name = format!("mirror-{}", bundle.name);
        bundle.package = format!("mirror-{}", bundle.package);
        bundle.requirements.clear();
    }
    for package in &mut snapshot.packages {
        package.name = format!("mirror-{}", package.name);
        for channel in &mut package.channels {
            for entry in &mut channel.entries {
                entry.bundle = format!("mirror-{}", entry.bundle);
                entry.replaces = entry.replaces.take().map(|r| format!("mirror-{r}"));
            }
        }
    }
    snapshot
}

fn subscription(p: usize) -> Subscription {
    Subscription::new(
        format!("sub-{p:03}"),
        NAMESPACE,
        package_name(p),
        CatalogId::new("community", "olm"),
    )
}

/// 20 Subscriptions over distinct packages; every other one has an older CSV installed.
fn namespace(packages: usize, per_package: usize) -> (Vec<InstalledCsv>, Vec<Subscription>) {
    let mut installed = Vec::new();
    let mut subs = Vec::new();
    for n in 0..20 {
        let p = (n * 3 + 1) % packages;
        let mut sub = subscription(p);
        if n % 2 == 0 {
            let i = per_package / 2;
            let mut csv = InstalledCsv::new(
                bundle_name(p, i),
                Some(&package_name(p)),
                BundleVersion::parse(&version(i)).unwrap(),
            );
            csv.provides = (0..KINDS_PER_PACKAGE).map(|k| kind(p, k)).collect();
            installed.push(csv);
            sub = sub.installed_csv(bundle_name(p, i));
        }
        subs.push(sub);
    }
    (installed, subs)
}

fn summarize(label: &str, index: &CatalogIndex, installed: &[InstalledCsv], subs: &[Subscription]) {
    let resolution = index.resolve(NAMESPACE, installed, subs);
    let plans = resolution
        .groups
        .iter()
        .filter(|g| matches!(g.outcome, Outcome::Plan(_)))
        .count();
    let steps: usize = resolution
        .groups
        .iter()
        .filter_map(|g| g.outcome.plan())
        .map(|p| p.steps.len())
        .sum();
    println!(
        "{label}: {} bundles, {} subscriptions, {} installed -> {} groups ({plans} with a plan), {steps} steps",
        index.bundle_count(),
        subs.len(),
        installed.len(),
        resolution.groups.len()
    );
    for explanation in resolution.groups.iter().filter_map(|g| g.outcome.explanation()) {
        println!("  {}", explanation.to_string().replace('\n', "\n  "));
    }
}

fn benches(c: &mut Criterion) {
    // ~700 bundles (the corpus' v4.21 catalog has 635) plus a small mirror catalog.
    let catalogs_700 = vec![catalog("community", 0, 35, 20), mirror(10)];
    // ~900 bundles in one catalog.
    let catalogs_900 = vec![catalog("community", 0, 45, 20)];

    c.bench_function("index/build ~750 bundles, 2 catalogs", |b| {
        b.iter(|| CatalogIndex::new(black_box(catalogs_700.clone())))
    });

    let index_900 = CatalogIndex::new(catalogs_900);
    let one = [subscription(12)];
    summarize("1 subscription", &index_900, &[], &one);
    c.bench_function("resolve/1 subscription, 900 bundles", |b| {
        b.iter(|| index_900.resolve(NAMESPACE, &[], black_box(&one)))
    });

    let index_700 = CatalogIndex::new(catalogs_700);
    let (installed, subs) = namespace(35, 20);
    summarize("20 subscriptions", &index_700, &installed, &subs);
    c.bench_function("resolve/20 subscriptions, 10 upgrades, ~750 bundles", |b| {
        b.iter(|| index_700.resolve(NAMESPACE, black_box(&installed), black_box(&subs)))
    });

    // The same namespace where one dependency is missing: one group fails and is explained.
    let mut broken = vec![catalog("community", 0, 35, 20), mirror(10)];
    for bundle in broken[0]
        .bundles
        .iter_mut()
        .filter(|b| b.package == package_name(16))
    {
        bundle
            .requirements
            .push(Requirement::gvk(Gvk::new("missing.example.com", "v1", "Nothing")));
    }
    let index_broken = CatalogIndex::new(broken);
    summarize(
        "20 subscriptions, one unsatisfiable",
        &index_broken,
        &installed,
        &subs,
    );
    c.bench_function("resolve/20 subscriptions, one unsatisfiable and explained", |b| {
        b.iter(|| index_broken.resolve(NAMESPACE, black_box(&installed), black_box(&subs)))
    });

    // Conflicting providers: two Subscriptions whose packages provide the same API, in a
    // namespace of 20, so that the search must exhaust and then minimise.
    let mut clash = vec![catalog("community", 0, 35, 20), mirror(10)];
    for bundle in clash[0]
        .bundles
        .iter_mut()
        .filter(|b| b.package == package_name(10))
    {
        bundle.provides.push(kind(4, 0));
    }
    let index_clash = CatalogIndex::new(clash);
    summarize("20 subscriptions, one API clash", &index_clash, &installed, &subs);
    c.bench_function("resolve/20 subscriptions, API clash explained", |b| {
        b.iter(|| index_clash.resolve(NAMESPACE, black_box(&installed), black_box(&subs)))
    });
}

criterion_group! {
    name = resolve;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(resolve);
