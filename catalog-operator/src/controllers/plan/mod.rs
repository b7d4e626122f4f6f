//! InstallPlans as objects, shared by the Subscription controller (which makes
//! them) and the InstallPlan controller (which runs them); neither controller
//! reaches into the other.
//!
//! Everything here is pure: [`install_plan_name`] names a new plan after what it
//! installs, [`new_install_plan`] builds the object for a group's resolved bundles, [`steps::build`] turns the bundles' manifests into steps
//! (writing `v1beta1` CRDs as `v1`: [`crd_v1`]),
//! [`planned_status`] gives a fresh plan its first status, [`covering_plan`]
//! finds an existing plan that already installs what a group wants, and
//! [`status`] moves a plan's phase and conditions.

pub mod crd_v1;
pub mod status;
pub mod steps;

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    sync::Arc,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::{ResourceExt, api::ObjectMeta};
use olm_api::{
    OPERATORS_GROUP, labels,
    v1alpha1::{
        Approval, InstallPlan, InstallPlanConditionReason, InstallPlanConditionType, InstallPlanPhase,
        InstallPlanSpec, InstallPlanStatus, Subscription,
    },
};

use self::steps::PlannedBundle;
use super::conditions::set_install_plan_condition;
pub use olm_resolution::ResolvedStep;

/// The alphabet of the names the API server generates (`generateName`): no
/// vowels, nor the digits 0, 1 and 3, so that no word is spelled.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The name of a new InstallPlan, in OLM's shape (`install-` and five lowercase
/// alphanumerics, as `generateName` would give it), derived from what the plan
/// installs: its namespace, generation and approval, its bundles (with the
/// catalog, package and channel of each) and the Subscriptions it serves (with
/// their UIDs). The same resolution gets the same name, so that a sync that
/// does not see the plan it made yet (a store lagging) makes no second one; a
/// later, different plan differs at least by its generation. A name that one
/// of the `known` plans already holds (a plan installing something else, e.g.
/// an older one of the same generation) is never reused: the next candidate is
/// taken.
pub fn install_plan_name(
    namespace: &str,
    subscriptions: &[&Subscription],
    steps: &[ResolvedStep],
    approval: Approval,
    generation: i64,
    known: &[Arc<InstallPlan>],
) -> String {
    let mut content = format!("{namespace}\0{generation}\0{approval:?}");
    for step in steps {
        let catalog = &step.catalog;
        let (bundle, package, channel) = (&step.bundle, &step.package, &step.channel);
        content.push_str(&format!(
            "\0{bundle}\0{}/{}\0{package}\0{channel}",
            catalog.namespace, catalog.name
        ));
    }
    for subscription in subscriptions {
        let uid = subscription.uid().unwrap_or_default();
        content.push_str(&format!("\0{}\0{uid}", subscription.name_any()));
    }
    (0u32..)
        .map(|attempt| {
            name_from_hash(&olm_runtime::effects::fnv1a(
                format!("{content}\0{attempt}").as_bytes(),
            ))
        })
        .find(|name| !known.iter().any(|p| p.name_any() == *name))
        .expect("the known plans hold finitely many names")
}

/// `install-` and five characters of [`NAME_ALPHABET`] from a 64-bit hash in hex.
fn name_from_hash(hex: &str) -> String {
    let mut rest = u64::from_str_radix(hex, 16).unwrap_or_default();
    let base = NAME_ALPHABET.len() as u64;
    let mut name = String::from("install-");
    for _ in 0..5 {
        name.push(char::from(NAME_ALPHABET[(rest % base) as usize]));
        rest /= base;
    }
    name
}

/// A new InstallPlan named `name` ([`install_plan_name`]) for `steps`, owned by
/// the `subscriptions` of the group it installs for.
pub fn new_install_plan(
    name: String,
    namespace: &str,
    subscriptions: &[&Subscription],
    steps: &[ResolvedStep],
    approval: Approval,
    generation: i64,
) -> InstallPlan {
    let owners: Vec<OwnerReference> = subscriptions
        .iter()
        .filter_map(|s| {
            Some(OwnerReference {
                api_version: format!("{OPERATORS_GROUP}/v1alpha1"),
                kind: "Subscription".to_owned(),
                name: s.name_any(),
                uid: s.uid()?,
                controller: Some(false),
                block_owner_deletion: Some(false),
            })
        })
        .collect();
    let first = steps.first();
    // A component of the Operator of every package it installs or is subscribed to.
    let labels: BTreeMap<String, String> = subscriptions
        .iter()
        .map(|s| s.spec.package.as_str())
        .chain(steps.iter().map(|s| s.package.as_str()))
        .filter(|package| !package.is_empty())
        .map(|package| (labels::operator_label(package, namespace), String::new()))
        .collect();
    InstallPlan {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_owned()),
            labels: (!labels.is_empty()).then_some(labels),
            owner_references: Some(owners),
            ..ObjectMeta::default()
        },
        spec: InstallPlanSpec {
            catalog_source: first.map(|s| s.catalog.name.clone()),
            catalog_source_namespace: first.map(|s| s.catalog.namespace.clone()),
            cluster_service_version_names: steps.iter().map(|s| s.bundle.clone()).collect(),
            approval,
            approved: approval == Approval::Automatic,
            generation: Some(generation),
        },
        status: None,
    }
}

/// The status of a freshly planned InstallPlan: its steps built from `bundles`,
/// or Failed (with the reason in its message) when their manifests cannot make
/// steps. `approval` is given to the Subscriptions created for dependencies.
pub fn planned_status(
    plan: &InstallPlan,
    bundles: &[PlannedBundle],
    approval: Approval,
    now: &Time,
) -> InstallPlanStatus {
    let mut catalog_sources: Vec<String> = Vec::new();
    for planned in bundles {
        if !catalog_sources.contains(&planned.step.catalog.name) {
            catalog_sources.push(planned.step.catalog.name.clone());
        }
    }
    let mut status = InstallPlanStatus {
        observed_generation: plan.metadata.generation,
        phase: if plan.spec.approved {
            InstallPlanPhase::Installing
        } else {
            InstallPlanPhase::RequiresApproval
        },
        conditions: None,
        catalog_sources,
        plan: None,
        bundle_lookups: None,
        attenuated_service_account_ref: None,
        start_time: None,
        message: None,
    };
    let namespace = plan.metadata.namespace.as_deref().unwrap_or_default();
    match steps::build(bundles, approval, namespace) {
        Ok(built) => status.plan = Some(built),
        Err(error) => {
            let message = error.to_string();
            status.phase = InstallPlanPhase::Failed;
            status.plan = Some(Vec::new());
            status.message = Some(message.clone());
            let mut conditions = Vec::new();
            set_install_plan_condition(
                &mut conditions,
                InstallPlanConditionType::Installed,
                false,
                InstallPlanConditionReason::ComponentFailed,
                &message,
                now,
            );
            status.conditions = Some(conditions);
        }
    }
    status::set_kstatus(&mut status, now);
    status
}

/// The existing plan that covers `steps`: one that installs (or installed) every
/// bundle still wanted, since the CSV store may show some of a plan's CSVs before
/// the others; a failed plan only when it wanted exactly these bundles. Among
/// several, one that a Subscription of the group refers to (`referenced`), then
/// the newest.
pub fn covering_plan(
    plans: &[Arc<InstallPlan>],
    steps: &[ResolvedStep],
    referenced: &HashSet<String>,
) -> Option<Arc<InstallPlan>> {
    let wanted: BTreeSet<&str> = steps.iter().map(|s| s.bundle.as_str()).collect();
    plans
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let names: BTreeSet<&str> = p
                .spec
                .cluster_service_version_names
                .iter()
                .map(String::as_str)
                .collect();
            let exact = names == wanted;
            let failed = p.status.as_ref().map(|s| s.phase) == Some(InstallPlanPhase::Failed);
            exact || (!failed && wanted.is_subset(&names))
        })
        .max_by_key(|p| (referenced.contains(&p.name_any()), p.spec.generation.unwrap_or(0)))
        .cloned()
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::SubscriptionSpec;
    use olm_resolver::model::CatalogId;

    use super::*;

    fn step(bundle: &str) -> ResolvedStep {
        ResolvedStep {
            bundle: bundle.into(),
            package: bundle.split('.').next().unwrap_or_default().into(),
            version: "1.0.0".into(),
            catalog: CatalogId::new("demo", "olm"),
            channel: "stable".into(),
            replaces: None,
            reason: "subscribed".into(),
            dependency: false,
        }
    }

    fn plan(name: &str, generation: i64, csvs: &[&str], phase: Option<InstallPlanPhase>) -> Arc<InstallPlan> {
        let mut plan = new_install_plan(
            name.into(),
            "team",
            &[],
            &csvs.iter().map(|c| step(c)).collect::<Vec<_>>(),
            Approval::Automatic,
            generation,
        );
        if let Some(phase) = phase {
            let mut status = planned_status(&plan, &[], Approval::Automatic, &olm_runtime::conditions::now());
            status.phase = phase;
            plan.status = Some(status);
        }
        Arc::new(plan)
    }

    #[test]
    fn a_new_plan_is_owned_by_its_group_and_approved_when_automatic() {
        let mut sub = Subscription::new(
            "db",
            SubscriptionSpec {
                catalog_source: "demo".into(),
                catalog_source_namespace: "olm".into(),
                package: "db".into(),
                channel: None,
                starting_csv: None,
                install_plan_approval: None,
                config: None,
            },
        );
        sub.metadata.uid = Some("uid-1".into());
        let steps = [step("db.v1"), step("app.v1")];
        let plan = new_install_plan(
            "install-abcde".into(),
            "team",
            &[&sub],
            &steps,
            Approval::Automatic,
            3,
        );
        assert_eq!(plan.spec.cluster_service_version_names, ["db.v1", "app.v1"]);
        assert_eq!(plan.spec.catalog_source.as_deref(), Some("demo"));
        assert_eq!(plan.spec.generation, Some(3));
        assert!(plan.spec.approved);
        let labels: Vec<&String> = plan.metadata.labels.as_ref().unwrap().keys().collect();
        assert_eq!(
            labels,
            ["operators.coreos.com/app.team", "operators.coreos.com/db.team"],
            "a component of each Operator it installs for"
        );
        let owners = plan.metadata.owner_references.unwrap();
        assert_eq!((owners[0].name.as_str(), owners[0].uid.as_str()), ("db", "uid-1"));
        let manual = new_install_plan(
            "install-abcde".into(),
            "team",
            &[&sub],
            &steps,
            Approval::Manual,
            3,
        );
        assert!(!manual.spec.approved);
        let status = planned_status(&manual, &[], Approval::Manual, &olm_runtime::conditions::now());
        assert_eq!(
            status.phase,
            InstallPlanPhase::RequiresApproval,
            "a Manual plan waits"
        );
    }

    #[test]
    fn a_plan_is_named_after_what_it_installs_in_olms_shape() {
        let sub = |uid: &str| {
            let mut sub = Subscription::new(
                "db",
                SubscriptionSpec {
                    catalog_source: "demo".into(),
                    catalog_source_namespace: "olm".into(),
                    package: "db".into(),
                    channel: None,
                    starting_csv: None,
                    install_plan_approval: None,
                    config: None,
                },
            );
            sub.metadata.uid = Some(uid.into());
            sub
        };
        let (one, other) = (sub("uid-1"), sub("uid-2"));
        let steps = [step("db.v1"), step("app.v1")];
        let name =
            |subs: &[&Subscription], steps: &[ResolvedStep], generation, known: &[Arc<InstallPlan>]| {
                install_plan_name("team", subs, steps, Approval::Automatic, generation, known)
            };
        let base = name(&[&one], &steps, 3, &[]);
        assert!(
            base.strip_prefix("install-").is_some_and(|suffix| suffix.len() == 5
                && suffix.bytes().all(|b| NAME_ALPHABET.contains(&b))),
            "{base}"
        );
        assert_eq!(
            base,
            name(&[&one], &steps, 3, &[]),
            "the same plan, the same name"
        );
        // What must make a different plan differ.
        let differing = [
            ("another generation", name(&[&one], &steps, 4, &[])),
            (
                "another bundle",
                name(&[&one], &[step("db.v2"), step("app.v1")], 3, &[]),
            ),
            ("a recreated Subscription", name(&[&other], &steps, 3, &[])),
            (
                "another namespace",
                install_plan_name("ops", &[&one], &steps, Approval::Automatic, 3, &[]),
            ),
            (
                "another approval",
                install_plan_name("team", &[&one], &steps, Approval::Manual, 3, &[]),
            ),
        ];
        for (why, differs) in differing {
            assert_ne!(differs, base, "{why}");
        }
        // A name some plan holds already is never given to a new one.
        let holder = plan(&base, 3, &["other.v1"], None);
        let next = name(&[&one], &steps, 3, std::slice::from_ref(&holder));
        assert_ne!(next, base);
        assert_eq!(
            next,
            name(&[&one], &steps, 3, &[holder]),
            "and the next one is deterministic too"
        );
    }

    #[test]
    fn the_covering_plan_installs_every_wanted_bundle() {
        let wanted = [step("db.v1")];
        let plans = vec![
            plan("install-1", 1, &["db.v1"], Some(InstallPlanPhase::Failed)),
            plan(
                "install-2",
                2,
                &["db.v1", "app.v1"],
                Some(InstallPlanPhase::Complete),
            ),
            plan("install-3", 3, &["other.v1"], None),
        ];
        let none = HashSet::new();
        let chosen = covering_plan(&plans, &wanted, &none).unwrap();
        assert_eq!(chosen.name_any(), "install-2", "the newest that covers");
        let referenced = HashSet::from(["install-1".to_owned()]);
        let chosen = covering_plan(&plans, &wanted, &referenced).unwrap();
        assert_eq!(chosen.name_any(), "install-1", "the one a Subscription refers to");
        let failed_superset = vec![plan(
            "install-4",
            4,
            &["db.v1", "app.v1"],
            Some(InstallPlanPhase::Failed),
        )];
        assert!(
            covering_plan(&failed_superset, &wanted, &none).is_none(),
            "a failed plan covers only exactly its bundles"
        );
    }
}
