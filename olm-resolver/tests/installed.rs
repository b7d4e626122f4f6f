//! Installed operators constrain every group: a Subscription cannot upgrade a package into a
//! version that an installed operator does not allow, and says which operator holds it back.

mod common;

use common::*;
use olm_resolver::{
    model::{Constraint, Requirement},
    plan::{Change, Resolution},
};
use serde_json::json;

/// `a.v1.0.0` needs package `b` in `>=1.0.0 <2.0.0`; `b.v1.5.0` is installed; the catalog has
/// `b.v2.0.0` replacing it.
fn pinned_catalog() -> Cat {
    cat("community")
        .channel(
            "a",
            "stable",
            vec![b("a.v1.0.0", "1.0.0").requires_package("b", ">=1.0.0 <2.0.0")],
        )
        .channel(
            "b",
            "stable",
            vec![
                b("b.v2.0.0", "2.0.0").replaces("b.v1.5.0"),
                b("b.v1.5.0", "1.5.0"),
            ],
        )
}

fn installed_a() -> olm_resolver::model::InstalledCsv {
    installed("a.v1.0.0", "1.0.0").requires(Requirement::package("b", ">=1.0.0 <2.0.0").unwrap())
}

fn result<'a>(resolution: &'a Resolution, subscription: &str) -> &'a olm_resolver::plan::SubscriptionResult {
    plan(resolution, subscription)
        .subscriptions
        .iter()
        .find(|s| s.subscription == subscription)
        .expect("the Subscription has a result")
}

#[test]
fn an_installed_operator_holds_back_the_upgrade_of_its_dependency() {
    let index = index(vec![pinned_catalog()]);
    let subs = [
        sub("a", "a", "community").installed_csv("a.v1.0.0"),
        sub("b", "b", "community").installed_csv("b.v1.5.0"),
    ];
    let csvs = [installed_a(), installed("b.v1.5.0", "1.5.0")];
    let resolution = resolve(&index, &csvs, &subs);
    let b = result(&resolution, "b");
    assert_eq!((b.bundle.as_str(), &b.change), ("b.v1.5.0", &Change::Stay));
    assert!(steps(plan(&resolution, "b")).is_empty());
    let held = b.held_back.as_ref().expect("the upgrade is held back");
    assert_eq!(held.preferred, ["b.v2.0.0"]);
    assert_eq!(held.holders, ["a.v1.0.0"]);
    let text = held.to_string();
    assert!(
        text.starts_with("b.v2.0.0 held back by installed operator a.v1.0.0: "),
        "{text}"
    );
    assert!(
        text.contains("a.v1.0.0 requires package b in range >=1.0.0 <2.0.0"),
        "{text}"
    );
    assert!(text.contains("version 2.0.0 is outside >=1.0.0 <2.0.0"), "{text}");
    assert!(result(&resolution, "a").held_back.is_none());
}

#[test]
fn the_dependency_follows_once_the_operator_allows_it() {
    // a.v2.0.0 allows b 2.x: a upgrades, and b with it, in one plan.
    let index = index(vec![
        cat("community")
            .channel(
                "a",
                "stable",
                vec![
                    b("a.v2.0.0", "2.0.0")
                        .replaces("a.v1.0.0")
                        .requires_package("b", ">=1.0.0 <3.0.0"),
                    b("a.v1.0.0", "1.0.0").requires_package("b", ">=1.0.0 <2.0.0"),
                ],
            )
            .channel(
                "b",
                "stable",
                vec![
                    b("b.v2.0.0", "2.0.0").replaces("b.v1.5.0"),
                    b("b.v1.5.0", "1.5.0"),
                ],
            ),
    ]);
    let subs = [
        sub("a", "a", "community").installed_csv("a.v1.0.0"),
        sub("b", "b", "community").installed_csv("b.v1.5.0"),
    ];
    let csvs = [installed_a(), installed("b.v1.5.0", "1.5.0")];
    let resolution = resolve(&index, &csvs, &subs);
    assert_eq!(
        steps(plan(&resolution, "b")),
        ["b.v2.0.0", "a.v2.0.0"],
        "dependency first"
    );
    assert!(result(&resolution, "b").held_back.is_none());

    // With a.v2.0.0 installed, b upgrades.
    let csvs = [
        installed("a.v2.0.0", "2.0.0").requires(Requirement::package("b", ">=1.0.0 <3.0.0").unwrap()),
        installed("b.v1.5.0", "1.5.0"),
    ];
    let subs = [
        sub("a", "a", "community").installed_csv("a.v2.0.0"),
        sub("b", "b", "community").installed_csv("b.v1.5.0"),
    ];
    let resolution = resolve(&index, &csvs, &subs);
    assert_eq!(steps(plan(&resolution, "b")), ["b.v2.0.0"]);
    assert_eq!(
        result(&resolution, "b").change,
        Change::Upgrade {
            from: "b.v1.5.0".into()
        }
    );
}

#[test]
fn the_dependency_takes_the_newest_version_the_operator_allows() {
    let index = index(vec![pinned_catalog().channel(
        "b",
        "fast",
        vec![
            b("b.v2.0.0", "2.0.0").skip_range(">=1.5.0 <2.0.0"),
            b("b.v1.6.0", "1.6.0").replaces("b.v1.5.0"),
        ],
    )]);
    let subs = [
        sub("a", "a", "community").installed_csv("a.v1.0.0"),
        sub("b", "b", "community")
            .channel("fast")
            .installed_csv("b.v1.5.0"),
    ];
    let csvs = [installed_a(), installed("b.v1.5.0", "1.5.0")];
    let resolution = resolve(&index, &csvs, &subs);
    let b = result(&resolution, "b");
    assert_eq!(b.bundle, "b.v1.6.0");
    assert_eq!(steps(plan(&resolution, "b")), ["b.v1.6.0"]);
    assert_eq!(b.held_back.as_ref().expect("held back").preferred, ["b.v2.0.0"]);
}

#[test]
fn an_operator_without_subscription_holds_back_too() {
    let index = index(vec![pinned_catalog()]);
    let subs = [sub("b", "b", "community").installed_csv("b.v1.5.0")];
    let csvs = [installed_a(), installed("b.v1.5.0", "1.5.0")];
    let resolution = resolve(&index, &csvs, &subs);
    let b = result(&resolution, "b");
    assert_eq!(b.change, Change::Stay);
    let held = b.held_back.as_ref().expect("held back");
    assert_eq!(held.holders, ["a.v1.0.0"]);
    assert!(
        held.to_string()
            .contains("a.v1.0.0 requires package b in range >=1.0.0 <2.0.0"),
        "{held}"
    );
}

#[test]
fn an_operator_whose_catalog_is_gone_holds_back_too() {
    let index = index(vec![pinned_catalog()]);
    let subs = [
        sub("a", "a", "gone").installed_csv("a.v1.0.0"),
        sub("b", "b", "community").installed_csv("b.v1.5.0"),
    ];
    let csvs = [installed_a(), installed("b.v1.5.0", "1.5.0")];
    let resolution = resolve(&index, &csvs, &subs);
    assert_eq!(resolution.groups.len(), 2, "a's trouble stays in a's group");
    assert!(resolution.group_of("a").unwrap().outcome.plan().is_none());
    let b = result(&resolution, "b");
    assert_eq!(b.change, Change::Stay);
    assert_eq!(b.held_back.as_ref().expect("held back").holders, ["a.v1.0.0"]);
}

#[test]
fn a_required_api_must_stay_provided() {
    // b.v2.0.0 no longer provides Widget, which the installed a needs as a required CRD.
    let index = index(vec![cat("community").channel(
        "b",
        "stable",
        vec![
            b("b.v2.0.0", "2.0.0").replaces("b.v1.0.0").provides("Gadget"),
            b("b.v1.0.0", "1.0.0").provides("Widget"),
        ],
    )]);
    let subs = [sub("b", "b", "community").installed_csv("b.v1.0.0")];
    let csvs = [
        installed("a.v1.0.0", "1.0.0").requires(Requirement::csv_required_crd(api("Widget"))),
        installed("b.v1.0.0", "1.0.0").provides(api("Widget")),
    ];
    let resolution = resolve(&index, &csvs, &subs);
    let b = result(&resolution, "b");
    assert_eq!(b.change, Change::Stay);
    let text = b.held_back.as_ref().expect("held back").to_string();
    assert!(
        text.contains("a.v1.0.0 requires API example.com/v1 Widget (a required CRD of its CSV)"),
        "{text}"
    );

    // The same with olm.gvk.required, and a new version that keeps providing it upgrades.
    let index = index_with_widget_kept();
    let csvs = [
        installed("a.v1.0.0", "1.0.0").requires(Requirement::gvk(api("Widget"))),
        installed("b.v1.0.0", "1.0.0").provides(api("Widget")),
    ];
    let resolution = resolve(&index, &csvs, &subs);
    assert_eq!(steps(plan(&resolution, "b")), ["b.v2.0.0"]);
}

fn index_with_widget_kept() -> olm_resolver::CatalogIndex {
    index(vec![cat("community").channel(
        "b",
        "stable",
        vec![
            b("b.v2.0.0", "2.0.0").replaces("b.v1.0.0").provides("Widget"),
            b("b.v1.0.0", "1.0.0").provides("Widget"),
        ],
    )])
}

#[test]
fn an_olm_constraint_of_an_installed_operator_holds_back() {
    let constraint = Constraint::from_json(&json!({
        "failureMessage": "a works with b 1.x or with a Widget provider",
        "any": {"constraints": [
            {"package": {"packageName": "b", "versionRange": "<2.0.0"}},
            {"gvk": {"group": "example.com", "version": "v1", "kind": "Widget"}}
        ]}
    }))
    .unwrap();
    let index = index(vec![pinned_catalog()]);
    let subs = [sub("b", "b", "community").installed_csv("b.v1.5.0")];
    let csvs = [
        installed("a.v1.0.0", "1.0.0").requires(Requirement::Constraint(constraint.clone())),
        installed("b.v1.5.0", "1.5.0"),
    ];
    let resolution = resolve(&index, &csvs, &subs);
    let b = result(&resolution, "b");
    assert_eq!(b.change, Change::Stay);
    let text = b.held_back.as_ref().expect("held back").to_string();
    assert!(
        text.contains("a works with b 1.x or with a Widget provider"),
        "{text}"
    );

    // Another installed operator provides Widget: the constraint no longer depends on b.
    let csvs = [
        installed("a.v1.0.0", "1.0.0").requires(Requirement::Constraint(constraint)),
        installed("b.v1.5.0", "1.5.0"),
        installed("w.v1.0.0", "1.0.0").provides(api("Widget")),
    ];
    let resolution = resolve(&index, &csvs, &subs);
    assert_eq!(steps(plan(&resolution, "b")), ["b.v2.0.0"]);
}

#[test]
fn groups_that_do_not_touch_the_need_stay_independent() {
    let index = index(vec![pinned_catalog().channel(
        "c",
        "stable",
        vec![
            b("c.v2.0.0", "2.0.0").replaces("c.v1.0.0"),
            b("c.v1.0.0", "1.0.0"),
        ],
    )]);
    let subs = [
        sub("b", "b", "community").installed_csv("b.v1.5.0"),
        sub("c", "c", "community").installed_csv("c.v1.0.0"),
    ];
    let csvs = [
        installed_a(),
        installed("b.v1.5.0", "1.5.0"),
        installed("c.v1.0.0", "1.0.0"),
    ];
    let resolution = resolve(&index, &csvs, &subs);
    assert_eq!(resolution.groups.len(), 2);
    assert_eq!(steps(plan(&resolution, "c")), ["c.v2.0.0"]);
    assert!(result(&resolution, "c").held_back.is_none());
    assert_eq!(result(&resolution, "b").change, Change::Stay);
}

#[test]
fn an_unmet_need_of_an_operator_without_subscription_changes_nothing() {
    // a needs b <1.0.0, which nothing installed meets: b's upgrade is not held back by it.
    let index = index(vec![pinned_catalog()]);
    let subs = [sub("b", "b", "community").installed_csv("b.v1.5.0")];
    let csvs = [
        installed("a.v1.0.0", "1.0.0").requires(Requirement::package("b", "<1.0.0").unwrap()),
        installed("b.v1.5.0", "1.5.0"),
    ];
    let resolution = resolve(&index, &csvs, &subs);
    assert_eq!(steps(plan(&resolution, "b")), ["b.v2.0.0"]);
}

#[test]
fn an_upgrade_whose_own_needs_fail_is_held_back_without_holders() {
    let index = index(vec![cat("community").channel(
        "b",
        "stable",
        vec![
            b("b.v2.0.0", "2.0.0")
                .replaces("b.v1.5.0")
                .requires_package("missing", ">=1.0.0"),
            b("b.v1.5.0", "1.5.0"),
        ],
    )]);
    let subs = [sub("b", "b", "community").installed_csv("b.v1.5.0")];
    let resolution = resolve(&index, &[installed("b.v1.5.0", "1.5.0")], &subs);
    let b = result(&resolution, "b");
    assert_eq!(b.change, Change::Stay);
    let held = b.held_back.as_ref().expect("held back");
    assert!(held.holders.is_empty());
    let text = held.to_string();
    assert!(
        text.starts_with("b.v2.0.0 held back: no set of bundles"),
        "{text}"
    );
    assert!(
        text.contains("b.v2.0.0 requires package missing in range >=1.0.0; no catalog provides it"),
        "{text}"
    );
}
