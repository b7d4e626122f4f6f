//! The invariants the chaos campaign checks on the cluster, as a pure function of what it read
//! ([`Snapshot`]) and of what each namespace's work should have led to ([`Expect`]). Each
//! violation is a sentence naming the objects.
//!
//! - every Subscription is at the newest version its channel allows, or waits for an approval,
//!   or says why not (a condition that is True);
//! - no two CSVs of one package in a namespace (copies aside);
//! - no Deployment without its CSV;
//! - no copied CSV without its original;
//! - no InstallPlan half-applied (Installing) or Failed;
//! - each namespace is where its work should have led it ([`Expect`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The package's newest CSV in the channel the campaign subscribes to, and its dependency's.
pub const LATEST: [&str; 2] = ["demo-app.v0.2.0", "demo-db.v1.1.0"];

/// The objects of the campaign's namespaces, as JSON.
#[derive(Default, Debug, Clone)]
pub struct Snapshot {
    /// Subscriptions.
    pub subscriptions: Vec<Value>,
    /// ClusterServiceVersions, copies included.
    pub csvs: Vec<Value>,
    /// InstallPlans.
    pub plans: Vec<Value>,
    /// Deployments.
    pub deployments: Vec<Value>,
}

/// Where a namespace's work should lead it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Uninstalled: no Subscription, no CSV of its own, no Deployment.
    Empty,
    /// An Automatic Subscription: demo-app and demo-db at their newest, Succeeded.
    Latest,
    /// A Manual Subscription: at the newest, or waiting for the approval of its InstallPlan.
    LatestOrApproval,
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn name(object: &Value) -> &str {
    text(object, "/metadata/name")
}

fn namespace(object: &Value) -> &str {
    text(object, "/metadata/namespace")
}

fn is_copy(csv: &Value) -> bool {
    csv.pointer("/metadata/labels/olm.copiedFrom").is_some()
}

/// The package of a CSV named `package.vX.Y.Z`.
fn package(csv_name: &str) -> &str {
    csv_name.split_once(".v").map_or(csv_name, |(p, _)| p)
}

impl Snapshot {
    fn in_namespace<'a>(objects: &'a [Value], ns: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        objects.iter().filter(move |o| namespace(o) == ns)
    }

    fn csv(&self, ns: &str, csv: &str) -> Option<&Value> {
        self.csvs
            .iter()
            .find(|c| namespace(c) == ns && name(c) == csv && !is_copy(c))
    }

    fn plan(&self, ns: &str, plan: &str) -> Option<&Value> {
        self.plans.iter().find(|p| namespace(p) == ns && name(p) == plan)
    }

    fn succeeded(&self, ns: &str, csv: &str) -> bool {
        self.csv(ns, csv)
            .is_some_and(|c| text(c, "/status/phase") == "Succeeded")
    }
}

/// Every violation in `snapshot`, given where each namespace should be (`expected`).
pub fn check(snapshot: &Snapshot, expected: &BTreeMap<String, Expect>) -> Vec<String> {
    let mut violations = Vec::new();
    violations.extend(duplicate_csvs(snapshot));
    violations.extend(orphan_deployments(snapshot));
    violations.extend(orphan_copies(snapshot));
    violations.extend(stuck_plans(snapshot));
    violations.extend(
        snapshot
            .subscriptions
            .iter()
            .filter_map(|s| subscription_says_why(snapshot, s)),
    );
    for (ns, expect) in expected {
        violations.extend(expectation(snapshot, ns, *expect));
    }
    violations
}

/// Two CSVs (not copies) of one package in one namespace.
fn duplicate_csvs(snapshot: &Snapshot) -> Vec<String> {
    let mut by_package: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for csv in snapshot.csvs.iter().filter(|c| !is_copy(c)) {
        by_package
            .entry((namespace(csv), package(name(csv))))
            .or_default()
            .push(name(csv));
    }
    by_package
        .into_iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|((ns, package), names)| {
            format!(
                "namespace {ns}: {} CSVs of package {package}: {}",
                names.len(),
                names.join(", ")
            )
        })
        .collect()
}

/// Deployments whose CSV (label `olm.owner`, or an owner reference) is not there.
fn orphan_deployments(snapshot: &Snapshot) -> Vec<String> {
    let mut violations = Vec::new();
    for deployment in &snapshot.deployments {
        let ns = namespace(deployment);
        let owner = deployment
            .pointer("/metadata/labels/olm.owner")
            .and_then(Value::as_str)
            .or_else(|| {
                let refs = deployment.pointer("/metadata/ownerReferences")?.as_array()?;
                refs.iter()
                    .find(|r| text(r, "/kind") == "ClusterServiceVersion")
                    .map(|r| text(r, "/name"))
            });
        match owner {
            Some(csv) if snapshot.csv(ns, csv).is_some() => {}
            Some(csv) => violations.push(format!(
                "Deployment {ns}/{} belongs to CSV {csv}, which is gone",
                name(deployment)
            )),
            None => violations.push(format!("Deployment {ns}/{} has no CSV", name(deployment))),
        }
    }
    violations
}

/// Copied CSVs whose original is not in the namespace they name.
fn orphan_copies(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .csvs
        .iter()
        .filter(|c| is_copy(c))
        .filter(|copy| {
            let from = text(copy, "/metadata/labels/olm.copiedFrom");
            snapshot.csv(from, name(copy)).is_none()
        })
        .map(|copy| {
            format!(
                "copied CSV {}/{} has no original in {}",
                namespace(copy),
                name(copy),
                text(copy, "/metadata/labels/olm.copiedFrom")
            )
        })
        .collect()
}

/// InstallPlans half-applied (still Installing) or Failed.
fn stuck_plans(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .plans
        .iter()
        .filter_map(|plan| {
            let phase = text(plan, "/status/phase");
            matches!(phase, "Installing" | "Failed").then(|| {
                let message = plan
                    .pointer("/status/message")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!(
                    "InstallPlan {}/{} is {phase} {message}",
                    namespace(plan),
                    name(plan)
                )
            })
        })
        .collect()
}

/// A Subscription at the newest version (installed and Succeeded), or waiting for an approval,
/// or with a True condition that says why not: `None`; else the violation.
fn subscription_says_why(snapshot: &Snapshot, sub: &Value) -> Option<String> {
    let ns = namespace(sub);
    let installed = text(sub, "/status/installedCSV");
    let state = text(sub, "/status/state");
    let at_latest =
        state == "AtLatestKnown" && LATEST.contains(&installed) && snapshot.succeeded(ns, installed);
    if at_latest || waits_for_approval(snapshot, sub) {
        return None;
    }
    let says_why = sub
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| text(c, "/status") == "True"));
    (!says_why).then(|| {
        format!(
            "Subscription {ns}/{} is not at the newest version (state {state:?}, installed {installed:?}) \
             and no condition says why",
            name(sub)
        )
    })
}

/// The Subscription is UpgradePending on an InstallPlan that requires approval.
fn waits_for_approval(snapshot: &Snapshot, sub: &Value) -> bool {
    let plan = text(sub, "/status/installPlanRef/name");
    text(sub, "/status/state") == "UpgradePending"
        && snapshot
            .plan(namespace(sub), plan)
            .is_some_and(|p| text(p, "/status/phase") == "RequiresApproval")
}

/// Where namespace `ns` should be and is not.
fn expectation(snapshot: &Snapshot, ns: &str, expect: Expect) -> Vec<String> {
    let subs: Vec<&Value> = Snapshot::in_namespace(&snapshot.subscriptions, ns).collect();
    let own_csvs: BTreeSet<&str> = Snapshot::in_namespace(&snapshot.csvs, ns)
        .filter(|c| !is_copy(c))
        .map(name)
        .collect();
    let at_latest = LATEST.iter().all(|csv| snapshot.succeeded(ns, csv));
    let app = subs.iter().find(|s| name(s) == "demo-app");
    let waiting = app.is_some_and(|s| waits_for_approval(snapshot, s));
    let ok = match expect {
        Expect::Empty => {
            subs.is_empty()
                && own_csvs.is_empty()
                && Snapshot::in_namespace(&snapshot.deployments, ns).next().is_none()
        }
        Expect::Latest => app.is_some() && at_latest,
        Expect::LatestOrApproval => app.is_some() && (at_latest || waiting),
    };
    if ok {
        return Vec::new();
    }
    let subs: Vec<String> = subs
        .iter()
        .map(|s| format!("{} ({})", name(s), text(s, "/status/state")))
        .collect();
    vec![format!(
        "namespace {ns} is not {expect:?}: Subscriptions [{}], CSVs [{}]",
        subs.join(", "),
        own_csvs.into_iter().collect::<Vec<_>>().join(", ")
    )]
}

#[cfg(test)]
mod tests;
