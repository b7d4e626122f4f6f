use serde_json::json;

use super::*;

fn csv(ns: &str, name: &str, phase: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": ns}, "status": {"phase": phase}})
}

fn copy(ns: &str, name: &str, from: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": ns, "labels": {"olm.copiedFrom": from}},
           "status": {"phase": "Succeeded"}})
}

fn sub(ns: &str, state: &str, installed: &str, plan: &str) -> Value {
    json!({"metadata": {"name": "demo-app", "namespace": ns},
           "status": {"state": state, "installedCSV": installed, "installPlanRef": {"name": plan}}})
}

fn plan(ns: &str, name: &str, phase: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": ns}, "status": {"phase": phase}})
}

fn deployment(ns: &str, name: &str, owner: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": ns, "labels": {"olm.owner": owner}}})
}

fn installed(ns: &str) -> Snapshot {
    Snapshot {
        subscriptions: vec![sub(ns, "AtLatestKnown", "demo-app.v0.2.0", "p1")],
        csvs: vec![
            csv(ns, "demo-app.v0.2.0", "Succeeded"),
            csv(ns, "demo-db.v1.1.0", "Succeeded"),
        ],
        plans: vec![plan(ns, "p1", "Complete")],
        deployments: vec![
            deployment(ns, "demo-app", "demo-app.v0.2.0"),
            deployment(ns, "demo-db", "demo-db.v1.1.0"),
        ],
    }
}

fn expect(ns: &str, e: Expect) -> BTreeMap<String, Expect> {
    BTreeMap::from([(ns.to_owned(), e)])
}

#[test]
fn an_installed_namespace_has_no_violation() {
    assert_eq!(
        check(&installed("a"), &expect("a", Expect::Latest)),
        Vec::<String>::new()
    );
    assert_eq!(
        check(&installed("a"), &expect("a", Expect::LatestOrApproval)),
        Vec::<String>::new()
    );
    assert_eq!(
        check(&Snapshot::default(), &expect("a", Expect::Empty)),
        Vec::<String>::new()
    );
}

/// What breaks an invariant in an installed namespace.
type Breaker = Box<dyn Fn(&mut Snapshot)>;

#[test]
fn each_broken_invariant_is_named() {
    let cases: Vec<(&str, Breaker, &str)> = vec![
        (
            "two CSVs of one package",
            Box::new(|s| s.csvs.push(csv("a", "demo-app.v0.1.0", "Succeeded"))),
            "namespace a: 2 CSVs of package demo-app: demo-app.v0.2.0, demo-app.v0.1.0",
        ),
        (
            "a Deployment without its CSV",
            Box::new(|s| s.deployments.push(deployment("a", "old", "demo-app.v0.1.0"))),
            "Deployment a/old belongs to CSV demo-app.v0.1.0, which is gone",
        ),
        (
            "a copy without its original",
            Box::new(|s| s.csvs.push(copy("b", "demo-x.v1.0.0", "a"))),
            "copied CSV b/demo-x.v1.0.0 has no original in a",
        ),
        (
            "a half-applied InstallPlan",
            Box::new(|s| s.plans.push(plan("a", "p2", "Installing"))),
            "InstallPlan a/p2 is Installing",
        ),
        (
            "a Subscription behind that says nothing",
            Box::new(|s| s.subscriptions[0] = sub("a", "UpgradeAvailable", "demo-app.v0.2.0", "p1")),
            "Subscription a/demo-app is not at the newest version",
        ),
    ];
    for (what, break_it, violation) in cases {
        let mut snapshot = installed("a");
        break_it(&mut snapshot);
        let found = check(&snapshot, &BTreeMap::new());
        assert!(
            found.iter().any(|v| v.starts_with(violation)),
            "{what}: {violation:?} not in {found:?}"
        );
    }
}

#[test]
fn a_subscription_waiting_for_approval_or_saying_why_is_no_violation() {
    let mut waiting = Snapshot {
        subscriptions: vec![sub("a", "UpgradePending", "", "p1")],
        plans: vec![plan("a", "p1", "RequiresApproval")],
        ..Snapshot::default()
    };
    assert_eq!(
        check(&waiting, &expect("a", Expect::LatestOrApproval)),
        Vec::<String>::new()
    );
    assert_eq!(
        check(&waiting, &expect("a", Expect::Latest)).len(),
        1,
        "Automatic does not wait"
    );
    waiting.plans[0] = plan("a", "p1", "Complete");
    assert_eq!(
        check(&waiting, &BTreeMap::new()).len(),
        1,
        "not waiting, saying nothing"
    );
    waiting.subscriptions[0]["status"]["conditions"] =
        json!([{"type": "CatalogSourcesUnhealthy", "status": "True"}]);
    assert_eq!(
        check(&waiting, &BTreeMap::new()),
        Vec::<String>::new(),
        "says why"
    );
}

#[test]
fn an_emptied_namespace_holds_nothing_of_its_own() {
    let found = check(&installed("a"), &expect("a", Expect::Empty));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("namespace a is not Empty"), "{found:?}");
    let copies_only = Snapshot {
        csvs: vec![
            copy("a", "demo-app.v0.2.0", "b"),
            csv("b", "demo-app.v0.2.0", "Succeeded"),
        ],
        ..Snapshot::default()
    };
    assert_eq!(
        check(&copies_only, &expect("a", Expect::Empty)),
        Vec::<String>::new()
    );
}
