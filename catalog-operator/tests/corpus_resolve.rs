//! Every package of the shared corpus of real OperatorHub bundles renders and
//! resolves on its default channel: to a plan that includes its
//! dependencies, or, for the packages whose dependencies no bundle of the
//! corpus provides, to an explanation that names what is missing.

use catalog_operator::{
    cli::{GroupStatus, OfflineCatalogs, Report, SubscriptionArg, resolve},
    source,
};
use olm_catalog::Catalog;
use olm_resolver::model::CatalogId;
use olm_testkit::corpus_dir;

/// Every bundle package and package manifest of the corpus, rendered into one
/// catalog (once for all tests of this file).
fn corpus_catalog() -> Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(load_corpus).clone()
}

fn load_corpus() -> Catalog {
    let dir = corpus_dir();
    let mut catalog = Catalog::default();
    for part in ["bundles", "packagemanifests"] {
        let (content, _warnings) =
            source::load(&dir.join(part)).unwrap_or_else(|e| panic!("corpus {part} must load: {e}"));
        catalog.extend(content);
    }
    catalog.sort();
    catalog
}

fn resolve_package(catalogs: &OfflineCatalogs, package: &str) -> Report {
    let sub = SubscriptionArg::parse(package).expect("package name");
    resolve(catalogs, &catalogs.ids()[0], "operators", &[sub], &[])
}

/// Bundles whose dependencies nothing in the corpus provides, and what the
/// explanation must name (corpus README, "Dangling dependencies").
const DANGLING: &[(&str, &str, &str)] = &[
    ("eclipse-che", "eclipse-che.v7.50.0", "devworkspace-operator"),
    ("bpfman-operator", "bpfman-operator.v0.5.6", "SelinuxProfile"),
    (
        "shipwright-operator",
        "shipwright-operator.v0.15.2",
        "TektonConfig",
    ),
    (
        "silicom-sts-operator",
        "silicom-sts-operator.v0.0.1",
        "NodeFeatureDiscovery",
    ),
    (
        "special-resource-operator",
        "special-resource-operator.v4.9.0",
        "NodeFeatureDiscovery",
    ),
];

/// Each package's default channel resolves as OLM would: to the most
/// preferred bundle whose dependencies the corpus meets, with those
/// dependencies in the plan. Where no bundle of the channel can be met, the
/// explanation names the missing dependency.
#[test]
fn every_corpus_package_resolves_or_explains() {
    let catalog = corpus_catalog();
    let packages: Vec<String> = catalog.packages.iter().map(|p| p.name.clone()).collect();
    let catalogs = OfflineCatalogs::new(vec![(CatalogId::new("community", "olm"), catalog)]);
    let mut resolved = 0;
    let mut explained = 0;
    let mut failures = Vec::new();
    for package in &packages {
        let report = resolve_package(&catalogs, package);
        let group = &report.groups[0];
        match group.status {
            GroupStatus::Resolved => {
                if !group.steps.iter().any(|s| &s.package == package) {
                    failures.push(format!(
                        "{package}: plan without the package itself: {:?}",
                        group.steps
                    ));
                }
                resolved += 1;
            }
            GroupStatus::Unsatisfiable => {
                let why = group.explanation.as_deref().unwrap_or_default();
                match DANGLING.iter().find(|(p, _, _)| p == package) {
                    Some((_, _, missing)) if why.contains(missing) => explained += 1,
                    _ => failures.push(format!("{package}: unsatisfiable:\n{why}")),
                }
            }
        }
    }
    println!(
        "corpus: {} packages: {resolved} resolved with their dependencies, {explained} explained as unsatisfiable",
        packages.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(packages.len(), 41, "40 bundle packages and one package manifest");
}

/// A bundle whose dependency the corpus lacks, asked for by name, gets an
/// explanation that names what is missing.
#[test]
fn dangling_dependencies_are_explained() {
    let catalogs = OfflineCatalogs::new(vec![(CatalogId::new("community", "olm"), corpus_catalog())]);
    let mut failures = Vec::new();
    for (package, bundle, missing) in DANGLING {
        let sub = SubscriptionArg::parse(&format!("{package}@{bundle}")).expect("valid");
        let report = resolve(&catalogs, &catalogs.ids()[0], "operators", &[sub], &[]);
        let group = &report.groups[0];
        let why = group.explanation.as_deref().unwrap_or_default();
        if group.status != GroupStatus::Unsatisfiable || !why.contains(missing) || !why.contains(bundle) {
            failures.push(format!(
                "{bundle}: expected an explanation naming {missing}, got {:?}:\n{why}",
                group.status
            ));
        }
    }
    println!("corpus: {} dangling dependencies explained", DANGLING.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn kuadrant_pulls_the_exact_versions_it_pins() {
    let catalogs = OfflineCatalogs::new(vec![(CatalogId::new("community", "olm"), corpus_catalog())]);
    let report = resolve_package(&catalogs, "kuadrant-operator");
    let group = &report.groups[0];
    assert_eq!(group.status, GroupStatus::Resolved, "{:?}", group.explanation);
    let kuadrant = group
        .steps
        .iter()
        .find(|s| s.package == "kuadrant-operator")
        .expect("kuadrant step");
    // The pins of each kuadrant release, from its metadata/dependencies.yaml.
    let deps = corpus_dir().join(format!(
        "bundles/kuadrant-operator/{}/metadata/dependencies.yaml",
        kuadrant.version
    ));
    let pins = std::fs::read_to_string(&deps).unwrap_or_else(|e| panic!("{}: {e}", deps.display()));
    for dependency in ["authorino-operator", "limitador-operator", "dns-operator"] {
        let step = group
            .steps
            .iter()
            .find(|s| s.package == dependency)
            .unwrap_or_else(|| {
                panic!(
                    "kuadrant {} pulls {dependency}: {:?}",
                    kuadrant.version, group.steps
                )
            });
        assert!(
            pins.contains(&format!("version: {}", step.version))
                || pins.contains(&format!("version: \"{}\"", step.version))
                || pins.contains(&format!("version: '{}'", step.version)),
            "{dependency} {} is not the version kuadrant {} pins:\n{pins}",
            step.version,
            kuadrant.version
        );
    }
    let position = |package: &str| {
        group
            .steps
            .iter()
            .position(|s| s.package == package)
            .expect("step")
    };
    assert!(
        position("authorino-operator") < position("kuadrant-operator"),
        "dependencies first"
    );
}

/// rabbitmq-messaging-topology-operator needs rabbitmq-cluster-operator
/// `>2.0.0`: it pulls the newest cluster operator, and a namespace pinned to
/// 2.0.0 (or one that could only have 1.14.0 or 2.0.0) cannot have it, with
/// each rejected version named.
#[test]
fn rabbitmq_topology_rejects_cluster_operator_1_14_and_2_0() {
    let mut catalog = corpus_catalog();
    let catalogs = OfflineCatalogs::new(vec![(CatalogId::new("community", "olm"), catalog.clone())]);
    let report = resolve_package(&catalogs, "rabbitmq-messaging-topology-operator");
    let group = &report.groups[0];
    assert_eq!(group.status, GroupStatus::Resolved, "{:?}", group.explanation);
    let cluster = group
        .steps
        .iter()
        .find(|s| s.package == "rabbitmq-cluster-operator")
        .expect("the cluster operator is pulled in");
    assert!(
        !["1.14.0", "2.0.0"].contains(&cluster.version.as_str()),
        "{cluster:?}"
    );

    let pinned = [
        SubscriptionArg::parse(
            "rabbitmq-messaging-topology-operator@rabbitmq-messaging-topology-operator.v1.19.3",
        )
        .expect("valid"),
        SubscriptionArg::parse("rabbitmq-cluster-operator@rabbitmq-cluster-operator.v2.0.0").expect("valid"),
    ];
    let report = resolve(&catalogs, &catalogs.ids()[0], "operators", &pinned, &[]);
    let why = report.groups[0]
        .explanation
        .clone()
        .expect("unsatisfiable when pinned to 2.0.0");
    assert!(
        why.contains("rabbitmq-cluster-operator.v2.0.0 (version 2.0.0 is outside >2.0.0)"),
        "{why}"
    );

    // Only the two versions below the range left in the catalog.
    catalog.bundles.retain(|b| {
        b.package != "rabbitmq-cluster-operator"
            || [
                "rabbitmq-cluster-operator.v1.14.0",
                "rabbitmq-cluster-operator.v2.0.0",
            ]
            .contains(&b.name.as_str())
    });
    let kept: Vec<String> = catalog.bundles.iter().map(|b| b.name.clone()).collect();
    for channel in catalog
        .channels
        .iter_mut()
        .filter(|c| c.package == "rabbitmq-cluster-operator")
    {
        channel.entries.retain(|e| kept.contains(&e.name));
    }
    let catalogs = OfflineCatalogs::new(vec![(CatalogId::new("community", "olm"), catalog)]);
    let report = resolve(&catalogs, &catalogs.ids()[0], "operators", &pinned[..1], &[]);
    let why = report.groups[0]
        .explanation
        .clone()
        .expect("unsatisfiable without a cluster operator >2.0.0");
    for text in [
        "requires package rabbitmq-cluster-operator in range >2.0.0",
        "rabbitmq-cluster-operator.v2.0.0 (version 2.0.0 is outside >2.0.0)",
        "rabbitmq-cluster-operator.v1.14.0 (version 1.14.0 is outside >2.0.0)",
    ] {
        assert!(why.contains(text), "explanation lacks {text:?}:\n{why}");
    }
}
