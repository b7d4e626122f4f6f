//! Resolution rules, one test each, on small fixtures.

mod common;

use common::*;
use olm_resolver::{
    explain::{Conflict, Exclusion},
    model::CatalogId,
    plan::{Change, DeprecatedSubject, StepReason},
};
use serde_json::json;

fn etcd_channel() -> Vec<B> {
    vec![
        b("etcd.v0.9.4", "0.9.4").replaces("etcd.v0.9.2"),
        b("etcd.v0.9.2", "0.9.2").replaces("etcd.v0.9.0"),
        b("etcd.v0.9.0", "0.9.0").replaces("etcd.v0.6.1"),
    ]
}

#[test]
fn new_subscription_gets_the_channel_head() {
    let index = index(vec![cat("community").channel("etcd", "alpha", etcd_channel())]);
    let resolution = resolve(&index, &[], &[sub("etcd", "etcd", "community")]);
    let plan = plan(&resolution, "etcd");
    assert_eq!(steps(plan), ["etcd.v0.9.4"]);
    let step = &plan.steps[0];
    assert_eq!(step.channel, "alpha");
    assert_eq!(step.catalog, CatalogId::new("community", "olm"));
    assert_eq!(step.reason, StepReason::Subscription { name: "etcd".into() });
    assert_eq!(step.replaces, None);
    assert_eq!(plan.subscriptions[0].change, Change::Install);
}

#[test]
fn named_channel_and_default_channel() {
    let index = index(vec![
        cat("community")
            .channel("etcd", "alpha", etcd_channel())
            .channel("etcd", "singlenamespace-alpha", vec![b("etcd.v0.9.2", "0.9.2")])
            .default_channel("etcd", "singlenamespace-alpha"),
    ]);
    let resolution = resolve(
        &index,
        &[],
        &[
            sub("default", "etcd", "community"),
            sub("alpha", "etcd", "community").channel("alpha"),
        ],
    );
    // Both name the same package, so they are one group, and one bundle of it must serve both:
    // the alpha Subscription falls back from its head to the bundle both channels have.
    assert_eq!(resolution.groups.len(), 1);
    assert_eq!(steps(plan(&resolution, "default")), ["etcd.v0.9.2"]);
    let resolution = resolve(&index, &[], &[sub("default", "etcd", "community")]);
    assert_eq!(steps(plan(&resolution, "default")), ["etcd.v0.9.2"]);
    let resolution = resolve(&index, &[], &[sub("alpha", "etcd", "community").channel("alpha")]);
    assert_eq!(steps(plan(&resolution, "alpha")), ["etcd.v0.9.4"]);
}

#[test]
fn starting_csv_installs_exactly_that_bundle() {
    let index = index(vec![cat("community").channel(
        "etcd",
        "alpha",
        vec![
            b("etcd.v0.9.4", "0.9.4").replaces("etcd.v0.9.2").skips("etcd.v0.9.3"),
            b("etcd.v0.9.3", "0.9.3").replaces("etcd.v0.9.2"),
            b("etcd.v0.9.2", "0.9.2"),
        ],
    )]);
    let resolution = resolve(
        &index,
        &[],
        &[sub("etcd", "etcd", "community").starting_csv("etcd.v0.9.2")],
    );
    assert_eq!(steps(plan(&resolution, "etcd")), ["etcd.v0.9.2"]);
    // A skipped entry is not a candidate of the channel, but startingCSV can still name it.
    let resolution = resolve(
        &index,
        &[],
        &[sub("etcd", "etcd", "community").starting_csv("etcd.v0.9.3")],
    );
    assert_eq!(steps(plan(&resolution, "etcd")), ["etcd.v0.9.3"]);
    let resolution = resolve(
        &index,
        &[],
        &[sub("etcd", "etcd", "community").starting_csv("etcd.v9")],
    );
    assert_eq!(
        explanation(&resolution, "etcd"),
        "no set of bundles meets these constraints together:\n- subscription etcd wants package etcd from channel alpha of catalog olm/community, but its startingCSV etcd.v9 is not in that channel"
    );
}

#[test]
fn installed_csv_upgrades_to_a_successor_and_records_replaces() {
    let index = index(vec![cat("community").channel("etcd", "alpha", etcd_channel())]);
    let subscription = sub("etcd", "etcd", "community").installed_csv("etcd.v0.9.0");
    let resolution = resolve(&index, &[installed("etcd.v0.9.0", "0.9.0")], &[subscription]);
    let plan = plan(&resolution, "etcd");
    // One step per resolution, as OLM: only entries that replace, skip or skipRange-cover it.
    assert_eq!(steps(plan), ["etcd.v0.9.2"]);
    assert_eq!(plan.steps[0].replaces.as_deref(), Some("etcd.v0.9.0"));
    assert_eq!(
        plan.subscriptions[0].change,
        Change::Upgrade {
            from: "etcd.v0.9.0".into()
        }
    );
}

#[test]
fn installed_head_stays() {
    let index = index(vec![cat("community").channel("etcd", "alpha", etcd_channel())]);
    let subscription = sub("etcd", "etcd", "community").installed_csv("etcd.v0.9.4");
    let resolution = resolve(&index, &[installed("etcd.v0.9.4", "0.9.4")], &[subscription]);
    let plan = plan(&resolution, "etcd");
    assert!(plan.steps.is_empty());
    assert_eq!(plan.subscriptions[0].change, Change::Stay);
    assert_eq!(plan.subscriptions[0].bundle, "etcd.v0.9.4");
}

#[test]
fn skips_and_skip_range_jump_ahead() {
    let index = index(vec![cat("community").channel(
        "cert-manager",
        "stable",
        vec![
            b("cert-manager.v1.15.2", "1.15.2").replaces("cert-manager.v1.14.2").skip_range("<1.15.2"),
            b("cert-manager.v1.14.2", "1.14.2").skip_range("<1.14.2").skips("cert-manager.v1.14.1"),
            b("cert-manager.v1.14.1", "1.14.1"),
        ],
    )]);
    // A pre-release the channel no longer lists is covered by skipRange.
    let subscription = sub("cm", "cert-manager", "community").installed_csv("cert-manager.v1.14.2-rc1");
    let resolution = resolve(
        &index,
        &[installed("cert-manager.v1.14.2-rc1", "1.14.2-rc1")],
        &[subscription],
    );
    let plan = plan(&resolution, "cm");
    assert_eq!(steps(plan), ["cert-manager.v1.15.2"]);
    assert_eq!(
        plan.steps[0].replaces.as_deref(),
        Some("cert-manager.v1.14.2-rc1")
    );
}

#[test]
fn dangling_replaces_does_not_matter() {
    let index = index(vec![cat("community").channel(
        "aqua",
        "stable",
        vec![
            b("aqua.v2.0.0", "2.0.0").replaces("aqua.v1.0.0"),
            b("aqua.v1.0.0", "1.0.0").replaces("aqua.v0.1.0"),
        ],
    )]);
    let resolution = resolve(&index, &[], &[sub("aqua", "aqua", "community")]);
    assert_eq!(steps(plan(&resolution, "aqua")), ["aqua.v2.0.0"]);
    assert!(index.problems().is_empty());
}

#[test]
fn dependency_by_api_installs_first() {
    let index = index(vec![
        cat("community")
            .channel(
                "app",
                "stable",
                vec![b("app.v1.0.0", "1.0.0").requires_api("Database")],
            )
            .channel(
                "db",
                "stable",
                vec![
                    b("db.v2.0.0", "2.0.0")
                        .provides("Database")
                        .requires_api("Volume"),
                ],
            )
            .channel(
                "storage",
                "stable",
                vec![b("storage.v1.0.0", "1.0.0").provides("Volume")],
            ),
    ]);
    let resolution = resolve(&index, &[], &[sub("app", "app", "community")]);
    let plan = plan(&resolution, "app");
    assert_eq!(steps(plan), ["storage.v1.0.0", "db.v2.0.0", "app.v1.0.0"]);
    assert_eq!(
        plan.steps[1].reason,
        StepReason::Dependency {
            dependent: "app.v1.0.0".into(),
            requirement: "API example.com/v1 Database".into()
        }
    );
    assert_eq!(
        plan.steps[0].reason.to_string(),
        "db.v2.0.0 requires API example.com/v1 Volume"
    );
    assert_eq!(plan.steps[0].channel, "stable");
}

#[test]
fn dependency_by_package_range_takes_the_most_preferred_match() {
    let index = index(vec![
        cat("community")
            .channel(
                "topology",
                "stable",
                vec![b("topology.v1.19.2", "1.19.2").requires_package("rabbitmq", ">2.0.0 <2.3.0")],
            )
            .channel(
                "rabbitmq",
                "stable",
                vec![
                    b("rabbitmq.v2.3.0", "2.3.0").replaces("rabbitmq.v2.2.0"),
                    b("rabbitmq.v2.2.0", "2.2.0").replaces("rabbitmq.v2.1.0"),
                    b("rabbitmq.v2.1.0", "2.1.0").replaces("rabbitmq.v2.0.0"),
                    b("rabbitmq.v2.0.0", "2.0.0"),
                ],
            ),
    ]);
    let resolution = resolve(&index, &[], &[sub("topology", "topology", "community")]);
    assert_eq!(
        steps(plan(&resolution, "topology")),
        ["rabbitmq.v2.2.0", "topology.v1.19.2"]
    );
}

#[test]
fn exact_version_pin() {
    let index = index(vec![
        cat("community")
            .channel(
                "kuadrant",
                "stable",
                vec![b("kuadrant.v0.5.0", "0.5.0").requires_package("authorino", "0.10.0")],
            )
            .channel(
                "authorino",
                "stable",
                vec![
                    b("authorino.v0.11.1", "0.11.1").replaces("authorino.v0.10.0"),
                    b("authorino.v0.10.0", "0.10.0"),
                ],
            ),
    ]);
    let resolution = resolve(&index, &[], &[sub("kuadrant", "kuadrant", "community")]);
    assert_eq!(
        steps(plan(&resolution, "kuadrant")),
        ["authorino.v0.10.0", "kuadrant.v0.5.0"]
    );
}

#[test]
fn csv_required_crd_and_self_provided_api() {
    let index = index(vec![
        cat("community")
            .channel(
                "lbconfig",
                "beta",
                vec![
                    b("lbconfig.v0.6.0", "0.6.0")
                        .provides("ExternalLoadBalancer")
                        .requires_crd("ExternalLoadBalancer"),
                ],
            )
            .channel(
                "shipwright",
                "alpha",
                vec![b("shipwright.v0.15.2", "0.15.2").requires_crd("TektonConfig")],
            ),
    ]);
    let resolution = resolve(&index, &[], &[sub("lb", "lbconfig", "community")]);
    assert_eq!(steps(plan(&resolution, "lb")), ["lbconfig.v0.6.0"]);
    let resolution = resolve(&index, &[], &[sub("shipwright", "shipwright", "community")]);
    assert_eq!(
        explanation(&resolution, "shipwright"),
        "no set of bundles meets these constraints together:\n\
         - subscription shipwright wants package shipwright from channel alpha of catalog olm/community; candidates: shipwright.v0.15.2 (requires API example.com/v1 TektonConfig (a required CRD of its CSV))\n\
         - shipwright.v0.15.2 requires API example.com/v1 TektonConfig (a required CRD of its CSV); no catalog provides it"
    );
}

fn constraint_catalog(constraint: serde_json::Value) -> olm_resolver::CatalogIndex {
    index(vec![
        cat("community")
            .channel(
                "red",
                "stable",
                vec![b("red.v1.0.0", "1.0.0").constraint(constraint)],
            )
            .channel(
                "blue",
                "stable",
                vec![
                    b("blue.v2.0.0", "2.0.0").replaces("blue.v1.0.0"),
                    b("blue.v1.0.0", "1.0.0").provides("Green"),
                ],
            )
            .channel(
                "green",
                "stable",
                vec![b("green.v1.0.0", "1.0.0").provides("Green")],
            ),
    ])
}

#[test]
fn constraint_all_needs_one_bundle_meeting_every_child() {
    let index = constraint_catalog(json!({"all": {"constraints": [
        {"package": {"packageName": "blue", "versionRange": ">=1.0.0"}},
        {"gvk": {"group": "example.com", "version": "v1", "kind": "Green"}}
    ]}}));
    let resolution = resolve(&index, &[], &[sub("red", "red", "community")]);
    // blue.v2.0.0 is preferred in its channel but does not provide Green.
    assert_eq!(steps(plan(&resolution, "red")), ["blue.v1.0.0", "red.v1.0.0"]);
}

#[test]
fn constraint_any_takes_the_first_preferred_match() {
    let index = constraint_catalog(json!({"any": {"constraints": [
        {"package": {"packageName": "green", "versionRange": ">=1.0.0"}},
        {"package": {"packageName": "blue", "versionRange": ">=2.0.0"}}
    ]}}));
    let resolution = resolve(&index, &[], &[sub("red", "red", "community")]);
    // Within a catalog: default channels first, then by package name: blue before green.
    assert_eq!(steps(plan(&resolution, "red")), ["blue.v2.0.0", "red.v1.0.0"]);
}

#[test]
fn constraint_not_excludes_matching_bundles() {
    let index = constraint_catalog(json!({"all": {"constraints": [
        {"gvk": {"group": "example.com", "version": "v1", "kind": "Green"}},
        {"not": {"constraints": [{"package": {"packageName": "blue"}}]}}
    ]}}));
    let resolution = resolve(&index, &[], &[sub("red", "red", "community")]);
    assert_eq!(steps(plan(&resolution, "red")), ["green.v1.0.0", "red.v1.0.0"]);
}

#[test]
fn cel_constraints_are_rejected_by_name() {
    let index = constraint_catalog(json!({
        "failureMessage": "needs a blue bundle",
        "cel": {"rule": "properties.exists(p, p.type == 'olm.package' && p.value.packageName == 'blue')"}
    }));
    let resolution = resolve(&index, &[], &[sub("red", "red", "community")]);
    assert_eq!(
        explanation(&resolution, "red"),
        "no set of bundles meets these constraints together:\n\
         - subscription red wants package red from channel stable of catalog olm/community; candidates: red.v1.0.0 (requires olm.constraint cel \"properties.exists(p, p.type == 'olm.package' && p.value.packageName == 'blue')\")\n\
         - red.v1.0.0 requires olm.constraint cel \"properties.exists(p, p.type == 'olm.package' && p.value.packageName == 'blue')\" (\"needs a blue bundle\"); olm.constraint type cel (rule \"properties.exists(p, p.type == 'olm.package' && p.value.packageName == 'blue')\") is not supported yet by olm-rs"
    );
}

fn provider_catalogs() -> Vec<common::Cat> {
    let app = |catalog: &str| {
        cat(catalog).channel(
            "app",
            "stable",
            vec![b("app.v1.0.0", "1.0.0").requires_api("Database")],
        )
    };
    vec![
        app("a-home").channel(
            "db-home",
            "stable",
            vec![b("db-home.v1.0.0", "1.0.0").provides("Database")],
        ),
        cat("b-high").priority(10).channel(
            "db-high",
            "stable",
            vec![b("db-high.v1.0.0", "1.0.0").provides("Database")],
        ),
        cat("c-low").priority(-1).channel(
            "db-low",
            "stable",
            vec![b("db-low.v1.0.0", "1.0.0").provides("Database")],
        ),
        cat("d-local").namespace(NS).channel(
            "db-local",
            "stable",
            vec![b("db-local.v1.0.0", "1.0.0").provides("Database")],
        ),
        cat("e-other").channel(
            "db-other",
            "stable",
            vec![b("db-other.v1.0.0", "1.0.0").provides("Database")],
        ),
    ]
}

#[test]
fn dependency_preference_installed_then_same_catalog_then_priority_namespace_name() {
    let subscription = sub("app", "app", "a-home");
    // Installed first: nothing to install for the dependency.
    let index1 = index(provider_catalogs());
    let csv = installed("db-manual.v0.1.0", "0.1.0").provides(api("Database"));
    let resolution = resolve(&index1, &[csv], std::slice::from_ref(&subscription));
    assert_eq!(steps(plan(&resolution, "app")), ["app.v1.0.0"]);
    // Then the dependent's own catalog.
    let resolution = resolve(&index1, &[], std::slice::from_ref(&subscription));
    assert_eq!(steps(plan(&resolution, "app")), ["db-home.v1.0.0", "app.v1.0.0"]);
    // Then the highest priority.
    let mut catalogs = provider_catalogs();
    catalogs[0] = cat("a-home").channel(
        "app",
        "stable",
        vec![b("app.v1.0.0", "1.0.0").requires_api("Database")],
    );
    let resolution = resolve(&index(catalogs), &[], std::slice::from_ref(&subscription));
    assert_eq!(steps(plan(&resolution, "app")), ["db-high.v1.0.0", "app.v1.0.0"]);
    // Then a catalog in the Subscription's namespace.
    let mut catalogs = provider_catalogs();
    catalogs[0] = cat("a-home").channel(
        "app",
        "stable",
        vec![b("app.v1.0.0", "1.0.0").requires_api("Database")],
    );
    catalogs.remove(1);
    let resolution = resolve(&index(catalogs), &[], std::slice::from_ref(&subscription));
    assert_eq!(steps(plan(&resolution, "app")), ["db-local.v1.0.0", "app.v1.0.0"]);
    // Then by catalog name (c-low has a lower priority than e-other).
    let mut catalogs = provider_catalogs();
    catalogs[0] = cat("a-home").channel(
        "app",
        "stable",
        vec![b("app.v1.0.0", "1.0.0").requires_api("Database")],
    );
    catalogs.remove(3);
    catalogs.remove(1);
    let resolution = resolve(&index(catalogs), &[], &[subscription]);
    assert_eq!(steps(plan(&resolution, "app")), ["db-other.v1.0.0", "app.v1.0.0"]);
}

#[test]
fn within_a_catalog_default_channel_then_head_first() {
    let index = index(vec![
        cat("community")
            .channel(
                "app",
                "stable",
                vec![b("app.v1.0.0", "1.0.0").requires_package("db", ">=1.0.0")],
            )
            .channel(
                "db",
                "fast",
                vec![
                    b("db.v3.0.0", "3.0.0").replaces("db.v2.0.0"),
                    b("db.v2.0.0", "2.0.0"),
                ],
            )
            .channel(
                "db",
                "stable",
                vec![
                    b("db.v2.0.0", "2.0.0").replaces("db.v1.0.0"),
                    b("db.v1.0.0", "1.0.0"),
                ],
            )
            .default_channel("db", "stable"),
    ]);
    let resolution = resolve(&index, &[], &[sub("app", "app", "community")]);
    let plan = plan(&resolution, "app");
    assert_eq!(steps(plan), ["db.v2.0.0", "app.v1.0.0"]);
    assert_eq!(plan.steps[0].channel, "stable");
}

#[test]
fn backtracks_to_an_older_candidate_when_the_head_cannot_be_met() {
    let index = index(vec![
        cat("community")
            .channel(
                "app",
                "stable",
                vec![
                    b("app.v2.0.0", "2.0.0")
                        .replaces("app.v1.0.0")
                        .requires_api("Missing"),
                    b("app.v1.0.0", "1.0.0").requires_api("Database"),
                ],
            )
            .channel("db", "stable", vec![b("db.v1.0.0", "1.0.0").provides("Database")]),
    ]);
    let resolution = resolve(&index, &[], &[sub("app", "app", "community")]);
    assert_eq!(steps(plan(&resolution, "app")), ["db.v1.0.0", "app.v1.0.0"]);
}

#[test]
fn one_provider_per_api() {
    let index = index(vec![
        cat("community")
            .channel("a", "stable", vec![b("a.v1.0.0", "1.0.0").provides("Widget")])
            .channel("b", "stable", vec![b("b.v1.0.0", "1.0.0").provides("Widget")]),
    ]);
    let resolution = resolve(
        &index,
        &[],
        &[sub("sub-a", "a", "community"), sub("sub-b", "b", "community")],
    );
    assert_eq!(resolution.groups.len(), 1);
    assert_eq!(
        explanation(&resolution, "sub-a"),
        "no set of bundles meets these constraints together:\n\
         - subscription sub-a wants package a from channel stable of catalog olm/community; candidates: a.v1.0.0 (another provider of API example.com/v1 Widget is needed)\n\
         - subscription sub-b wants package b from channel stable of catalog olm/community; candidates: b.v1.0.0 (another provider of API example.com/v1 Widget is needed)\n\
         - at most one bundle can provide API example.com/v1 Widget in the namespace; it is provided by a.v1.0.0 and b.v1.0.0"
    );
}

#[test]
fn an_installed_provider_blocks_a_second_one() {
    let index = index(vec![cat("community").channel(
        "b",
        "stable",
        vec![b("b.v1.0.0", "1.0.0").provides("Widget")],
    )]);
    let csv = installed("a.v0.1.0", "0.1.0").provides(api("Widget"));
    let resolution = resolve(&index, &[csv], &[sub("sub-b", "b", "community")]);
    assert_eq!(
        explanation(&resolution, "sub-b"),
        "no set of bundles meets these constraints together:\n\
         - subscription sub-b wants package b from channel stable of catalog olm/community; candidates: b.v1.0.0 (another provider of API example.com/v1 Widget is needed)\n\
         - at most one bundle can provide API example.com/v1 Widget in the namespace; it is provided by a.v0.1.0 and b.v1.0.0"
    );
}

#[test]
fn one_bundle_per_package() {
    let index = index(vec![
        cat("community")
            .channel(
                "app",
                "stable",
                vec![b("app.v1.0.0", "1.0.0").requires_package("db", "<2.0.0")],
            )
            .channel(
                "db",
                "stable",
                vec![
                    b("db.v2.0.0", "2.0.0").replaces("db.v1.0.0"),
                    b("db.v1.0.0", "1.0.0"),
                ],
            ),
    ]);
    // The db Subscription is on the installed head and cannot go back; app needs db <2.0.0.
    let subs = [
        sub("app", "app", "community"),
        sub("db", "db", "community").installed_csv("db.v2.0.0"),
    ];
    let resolution = resolve(&index, &[installed("db.v2.0.0", "2.0.0")], &subs);
    assert_eq!(
        explanation(&resolution, "app"),
        "no set of bundles meets these constraints together:\n\
         - subscription app wants package app from channel stable of catalog olm/community; candidates: app.v1.0.0 (requires package db in range <2.0.0)\n\
         - subscription db wants package db from channel stable of catalog olm/community, upgrading from installed db.v2.0.0; candidates: db.v2.0.0 (installed; another bundle of package db is needed)\n\
         - app.v1.0.0 requires package db in range <2.0.0; installed: db.v2.0.0 (installed; version 2.0.0 is outside <2.0.0); and candidates in catalog olm/community: db.v2.0.0 (version 2.0.0 is outside <2.0.0), db.v1.0.0 (another bundle of package db is needed)\n\
         - at most one bundle of package db can be installed in the namespace, and the others need db.v2.0.0 or db.v1.0.0"
    );
}

#[test]
fn independent_groups_do_not_block_each_other() {
    let index = index(vec![
        cat("community")
            .channel(
                "che",
                "stable",
                vec![b("che.v7.50.0", "7.50.0").requires_package("devworkspace", ">=0.11.0")],
            )
            .channel("etcd", "alpha", etcd_channel()),
    ]);
    let resolution = resolve(
        &index,
        &[],
        &[sub("che", "che", "community"), sub("etcd", "etcd", "community")],
    );
    assert_eq!(resolution.groups.len(), 2);
    assert_eq!(steps(plan(&resolution, "etcd")), ["etcd.v0.9.4"]);
    assert_eq!(
        explanation(&resolution, "che"),
        "no set of bundles meets these constraints together:\n\
         - subscription che wants package che from channel stable of catalog olm/community; candidates: che.v7.50.0 (requires package devworkspace in range >=0.11.0)\n\
         - che.v7.50.0 requires package devworkspace in range >=0.11.0; no catalog provides it"
    );
}

#[test]
fn shared_dependency_joins_groups() {
    let index = index(vec![
        cat("community")
            .channel("a", "stable", vec![b("a.v1.0.0", "1.0.0").requires_api("Cert")])
            .channel("b", "stable", vec![b("b.v1.0.0", "1.0.0").requires_api("Cert")])
            .channel("c", "stable", vec![b("c.v1.0.0", "1.0.0")])
            .channel(
                "cert-manager",
                "stable",
                vec![b("cert-manager.v1.0.0", "1.0.0").provides("Cert")],
            ),
    ]);
    let subs = [
        sub("a", "a", "community"),
        sub("b", "b", "community"),
        sub("c", "c", "community"),
    ];
    let resolution = resolve(&index, &[], &subs);
    assert_eq!(resolution.groups.len(), 2);
    assert_eq!(resolution.groups[0].subscriptions, ["a", "b"]);
    assert_eq!(
        steps(plan(&resolution, "a")),
        ["cert-manager.v1.0.0", "a.v1.0.0", "b.v1.0.0"]
    );
    assert_eq!(steps(plan(&resolution, "c")), ["c.v1.0.0"]);
}

#[test]
fn unsatisfiable_range_lists_every_candidate_and_why() {
    let index = index(vec![
        cat("community")
            .channel(
                "rabbitmq-messaging-topology-operator",
                "stable",
                vec![
                    b("rabbitmq-messaging-topology-operator.v1.19.2", "1.19.2")
                        .replaces("rabbitmq-messaging-topology-operator.v1.18.2")
                        .requires_package("rabbitmq-cluster-operator", ">2.0.0"),
                    b("rabbitmq-messaging-topology-operator.v1.18.2", "1.18.2")
                        .requires_package("rabbitmq-cluster-operator", ">2.0.0"),
                ],
            )
            .channel(
                "rabbitmq-cluster-operator",
                "stable",
                vec![
                    b("rabbitmq-cluster-operator.v2.0.0", "2.0.0")
                        .replaces("rabbitmq-cluster-operator.v1.14.0"),
                    b("rabbitmq-cluster-operator.v1.14.0", "1.14.0"),
                ],
            ),
    ]);
    let resolution = resolve(
        &index,
        &[],
        &[sub(
            "topology",
            "rabbitmq-messaging-topology-operator",
            "community",
        )],
    );
    assert_eq!(
        explanation(&resolution, "topology"),
        "no set of bundles meets these constraints together:\n\
         - subscription topology wants package rabbitmq-messaging-topology-operator from channel stable of catalog olm/community; candidates: rabbitmq-messaging-topology-operator.v1.19.2, rabbitmq-messaging-topology-operator.v1.18.2 (each: requires package rabbitmq-cluster-operator in range >2.0.0)\n\
         - rabbitmq-messaging-topology-operator.v1.19.2 and rabbitmq-messaging-topology-operator.v1.18.2 require package rabbitmq-cluster-operator in range >2.0.0; candidates in catalog olm/community: rabbitmq-cluster-operator.v2.0.0 (version 2.0.0 is outside >2.0.0), rabbitmq-cluster-operator.v1.14.0 (version 1.14.0 is outside >2.0.0)"
    );
    // The typed structure carries the same facts.
    let explanation = resolution.groups[0].outcome.explanation().unwrap();
    let Conflict::Dependency(need) = &explanation.conflicts[1] else {
        panic!()
    };
    assert_eq!(
        need.candidates[0].excluded,
        [Exclusion::OutsideRange {
            range: ">2.0.0".parse().unwrap()
        }]
    );
}

#[test]
fn subscription_problems_are_named() {
    let index = index(vec![
        cat("community").channel("etcd", "alpha", etcd_channel()).channel(
            "broken",
            "stable",
            vec![b("broken.v2", "2.0.0"), b("broken.v1", "1.0.0")],
        ),
    ]);
    let cases = [
        (
            sub("s", "etcd", "missing"),
            "subscription s wants package etcd from the default channel of catalog olm/missing, but catalog olm/missing is not available",
        ),
        (
            sub("s", "nope", "community"),
            "subscription s wants package nope from the default channel of catalog olm/community, but catalog olm/community has no package nope",
        ),
        (
            sub("s", "etcd", "community").channel("beta"),
            "subscription s wants package etcd from channel beta of catalog olm/community, but the package has no such channel",
        ),
    ];
    for (subscription, expected) in cases {
        let resolution = resolve(&index, &[], &[subscription, sub("etcd", "etcd", "community")]);
        let text = explanation(&resolution, "s");
        assert_eq!(
            text,
            format!("no set of bundles meets these constraints together:\n- {expected}")
        );
        // The healthy Subscription in the same namespace still gets its plan unless it shares a
        // package with the broken one.
        if resolution.group_of("etcd") != resolution.group_of("s") {
            assert_eq!(steps(plan(&resolution, "etcd")), ["etcd.v0.9.4"]);
        }
    }
    // A channel with two heads (a catalog holding a window of a package's versions) is
    // reported, and still serves its highest version.
    assert_eq!(
        index.problems()[0].to_string(),
        "channel stable of package broken in catalog olm/community has 2 heads (broken.v1, broken.v2): every entry but one must be replaced or skipped by another entry"
    );
    let resolution = resolve(&index, &[], &[sub("s", "broken", "community")]);
    assert_eq!(steps(plan(&resolution, "s")), ["broken.v2"]);
}

#[test]
fn deprecations_are_reported_and_still_resolvable() {
    let mut catalog = cat("community").channel(
        "etcd",
        "alpha",
        vec![
            b("etcd.v0.9.4", "0.9.4")
                .replaces("etcd.v0.9.2")
                .deprecated("use 1.x"),
            b("etcd.v0.9.2", "0.9.2"),
        ],
    );
    catalog.0.packages[0].channels[0].deprecation =
        Some(olm_resolver::model::Deprecation::new("alpha is frozen"));
    let index = index(vec![catalog]);
    let resolution = resolve(&index, &[], &[sub("etcd", "etcd", "community")]);
    let plan = plan(&resolution, "etcd");
    assert_eq!(steps(plan), ["etcd.v0.9.4"]);
    let subjects: Vec<_> = plan.deprecations.iter().map(|d| d.subject.clone()).collect();
    assert_eq!(
        subjects,
        [
            DeprecatedSubject::Channel {
                package: "etcd".into(),
                channel: "alpha".into()
            },
            DeprecatedSubject::Bundle("etcd.v0.9.4".into())
        ]
    );
    assert_eq!(
        plan.deprecations[1].to_string(),
        "bundle etcd.v0.9.4 is deprecated in catalog olm/community: use 1.x"
    );
}

#[test]
fn resolution_is_deterministic() {
    let index = index(provider_catalogs());
    let subs = [sub("app", "app", "a-home"), sub("x", "db-low", "c-low")];
    let first = resolve(&index, &[], &subs);
    let mut reversed = subs.to_vec();
    reversed.reverse();
    assert_eq!(first, resolve(&index, &[], &reversed));
}

#[test]
fn a_skipped_starting_csv_still_meets_another_bundles_need() {
    let index = index(vec![
        cat("community")
            .channel(
                "db",
                "stable",
                vec![
                    b("db.v3.0.0", "3.0.0").replaces("db.v1.0.0").skips("db.v2.0.0"),
                    b("db.v2.0.0", "2.0.0").replaces("db.v1.0.0"),
                    b("db.v1.0.0", "1.0.0"),
                ],
            )
            .channel(
                "app",
                "stable",
                vec![b("app.v1.0.0", "1.0.0").requires_package("db", "2.0.0")],
            ),
    ]);
    let subs = [
        sub("app", "app", "community"),
        sub("db", "db", "community").starting_csv("db.v2.0.0"),
    ];
    let resolution = resolve(&index, &[], &subs);
    assert_eq!(steps(plan(&resolution, "app")), ["db.v2.0.0", "app.v1.0.0"]);
    assert_eq!(resolution.groups.len(), 1);
    // Without the Subscription that names it, the skipped entry is no candidate.
    let resolution = resolve(&index, &[], &subs[..1]);
    assert_eq!(
        explanation(&resolution, "app"),
        "no set of bundles meets these constraints together:\n\
         - subscription app wants package app from channel stable of catalog olm/community; candidates: app.v1.0.0 (requires package db in range 2.0.0)\n\
         - app.v1.0.0 requires package db in range 2.0.0; candidates in catalog olm/community: db.v3.0.0 (version 3.0.0 is outside 2.0.0), db.v1.0.0 (version 1.0.0 is outside 2.0.0)"
    );
}

#[test]
fn explanations_leave_out_what_is_not_part_of_the_conflict() {
    let index = index(vec![
        cat("community")
            .channel(
                "app",
                "stable",
                vec![
                    b("app.v2.0.0", "2.0.0")
                        .replaces("app.v1.0.0")
                        .requires_api("Database")
                        .requires_api("Queue"),
                    b("app.v1.0.0", "1.0.0")
                        .requires_api("Database")
                        .requires_api("Queue"),
                ],
            )
            .channel(
                "reporting",
                "stable",
                vec![b("reporting.v1.0.0", "1.0.0").requires_api("Database")],
            )
            .channel("db", "stable", vec![b("db.v1.0.0", "1.0.0").provides("Database")]),
    ]);
    // Both Subscriptions need Database, so they are one group; only app's missing Queue conflicts.
    let subs = [
        sub("app", "app", "community"),
        sub("reporting", "reporting", "community"),
    ];
    let resolution = resolve(&index, &[], &subs);
    assert_eq!(resolution.groups.len(), 1);
    assert_eq!(
        explanation(&resolution, "reporting"),
        "no set of bundles meets these constraints together:\n\
         - subscription app wants package app from channel stable of catalog olm/community; candidates: app.v2.0.0, app.v1.0.0 (each: requires API example.com/v1 Queue)\n\
         - app.v2.0.0 and app.v1.0.0 require API example.com/v1 Queue; no catalog provides it"
    );
}

#[test]
fn subscriptions_of_other_namespaces_are_ignored() {
    let index = index(vec![cat("community").channel("etcd", "alpha", etcd_channel())]);
    let mut elsewhere = sub("other", "etcd", "community");
    elsewhere.namespace = "team-b".into();
    let resolution = resolve(&index, &[], &[elsewhere, sub("etcd", "etcd", "community")]);
    assert_eq!(resolution.groups.len(), 1);
    assert_eq!(resolution.groups[0].subscriptions, ["etcd"]);
}
