//! Cross-checks the search against brute force on many small random namespaces: a group has a
//! plan exactly when some choice of bundles meets every rule, and every plan meets them.

mod common;

use std::collections::HashMap;

use common::*;
use olm_resolver::{
    model::{BundleInput, Requirement},
    plan::Outcome,
};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const PACKAGES: [&str; 4] = ["pa", "pb", "pc", "pd"];
const KINDS: [&str; 3] = ["K1", "K2", "K3"];

/// One random catalog: each package has 1-3 versions in one channel, random APIs and needs.
fn random_catalog(rng: &mut Rng) -> (Cat, Vec<BundleInput>) {
    let mut catalog = cat("community");
    let mut bundles = Vec::new();
    for package in PACKAGES {
        let count = 1 + rng.below(3) as usize;
        let mut entries = Vec::new();
        for i in (0..count).rev() {
            let mut bundle = b(&format!("{package}.v{i}.0.0"), &format!("{i}.0.0"));
            if i > 0 {
                bundle = bundle.replaces(&format!("{package}.v{}.0.0", i - 1));
            }
            for kind in KINDS {
                if rng.below(4) == 0 {
                    bundle = bundle.provides(kind);
                }
            }
            match rng.below(6) {
                0 => bundle = bundle.requires_api(KINDS[rng.below(3) as usize]),
                1 => {
                    let other = PACKAGES[rng.below(4) as usize];
                    let range = [">=1.0.0", "<1.0.0", "1.0.0", ">=0.0.0"][rng.below(4) as usize];
                    bundle = bundle.requires_package(other, range);
                }
                _ => {}
            }
            bundles.push(bundle.bundle.clone());
            entries.push(bundle);
        }
        catalog = catalog.channel(package, "stable", entries);
    }
    (catalog, bundles)
}

fn meets(bundle: &BundleInput, requirement: &Requirement) -> bool {
    match requirement {
        Requirement::Gvk { gvk, .. } => bundle.provides.contains(gvk),
        Requirement::Package { package, range } => {
            bundle.package == *package && range.matches(bundle.version.version())
        }
        Requirement::Constraint(_) => false,
    }
}

/// Whether a set of bundles meets every rule for Subscriptions to `packages`.
fn valid(chosen: &[&BundleInput], packages: &[&str]) -> bool {
    let mut per_package: HashMap<&str, usize> = HashMap::new();
    let mut per_api: HashMap<&olm_resolver::model::Gvk, usize> = HashMap::new();
    for bundle in chosen {
        *per_package.entry(&bundle.package).or_default() += 1;
        for gvk in &bundle.provides {
            *per_api.entry(gvk).or_default() += 1;
        }
    }
    per_package.values().all(|&n| n <= 1)
        && per_api.values().all(|&n| n <= 1)
        && packages.iter().all(|p| per_package.contains_key(p))
        && chosen.iter().all(|bundle| {
            bundle
                .requirements
                .iter()
                .all(|r| chosen.iter().any(|c| meets(c, r)))
        })
}

/// Brute force: at most one bundle per package, every combination, plus the fixed bundles.
fn satisfiable(bundles: &[BundleInput], fixed: &[BundleInput], packages: &[&str]) -> bool {
    let options: Vec<Vec<Option<&BundleInput>>> = PACKAGES
        .iter()
        .map(|p| {
            std::iter::once(None)
                .chain(bundles.iter().filter(|b| b.package == *p).map(Some))
                .collect()
        })
        .collect();
    let mut choice = vec![0usize; options.len()];
    loop {
        let chosen: Vec<&BundleInput> = choice
            .iter()
            .zip(&options)
            .filter_map(|(&i, o)| o[i])
            .chain(fixed)
            .collect();
        if valid(&chosen, packages) {
            return true;
        }
        let mut position = 0;
        loop {
            if position == choice.len() {
                return false;
            }
            choice[position] += 1;
            if choice[position] < options[position].len() {
                break;
            }
            choice[position] = 0;
            position += 1;
        }
    }
}

#[test]
fn search_agrees_with_brute_force() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut satisfiable_cases, mut unsatisfiable_cases) = (0, 0);
    for case in 0..2000 {
        let (catalog, bundles) = random_catalog(&mut rng);
        let index = index(vec![catalog]);
        let count = 1 + rng.below(3) as usize;
        let mut packages: Vec<&str> = (0..count).map(|_| PACKAGES[rng.below(4) as usize]).collect();
        packages.sort();
        packages.dedup();
        let subs: Vec<_> = packages
            .iter()
            .map(|p| sub(&format!("sub-{p}"), p, "community"))
            .collect();
        // Sometimes a CSV installed by hand (no Subscription, package outside the catalog): it
        // stays, provides its APIs and may meet needs.
        let mut fixed = Vec::new();
        let mut csvs = Vec::new();
        if rng.below(3) == 0 {
            let mut csv = installed("manual.v1.0.0", "1.0.0");
            let mut bundle = BundleInput::new("manual.v1.0.0", "manual", v("1.0.0"));
            for kind in KINDS {
                if rng.below(3) == 0 {
                    csv = csv.provides(api(kind));
                    bundle = bundle.provides(api(kind));
                }
            }
            csvs.push(csv);
            fixed.push(bundle);
        }
        let resolution = resolve(&index, &csvs, &subs);
        let all_planned = resolution
            .groups
            .iter()
            .all(|g| matches!(g.outcome, Outcome::Plan(_)));
        let expected = satisfiable(&bundles, &fixed, &packages);
        assert_eq!(
            all_planned, expected,
            "case {case}: {packages:?} over {bundles:#?}\n{resolution:#?}"
        );
        if expected {
            satisfiable_cases += 1;
            let chosen: Vec<&BundleInput> = resolution
                .groups
                .iter()
                .filter_map(|g| g.outcome.plan())
                .flat_map(|p| &p.steps)
                .map(|s| bundles.iter().find(|b| b.name == s.bundle).unwrap())
                .chain(&fixed)
                .collect();
            assert!(valid(&chosen, &packages), "case {case}: invalid plan {chosen:#?}");
        } else {
            unsatisfiable_cases += 1;
            // A group without a plan explains itself with at least one conflicting constraint.
            for group in &resolution.groups {
                if let Some(explanation) = group.outcome.explanation() {
                    assert!(!explanation.conflicts.is_empty(), "case {case}");
                }
            }
        }
    }
    // The generator must exercise both outcomes.
    assert!(
        satisfiable_cases > 200 && unsatisfiable_cases > 200,
        "{satisfiable_cases} / {unsatisfiable_cases}"
    );
}
