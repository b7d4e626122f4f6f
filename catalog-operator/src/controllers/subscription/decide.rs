//! What a sync of a namespace writes besides its plans, as [`Effects`] for the
//! runtime's one applier ([`olm_runtime::apply::Writer::perform`]) (pure):
//! - [`unpacking`]: while the bundle images a plan needs are pulled, its
//!   Subscriptions show condition `BundleUnpacking` True (reason
//!   `UnpackingInProgress`), on the status they have;
//! - [`closing`]: the new InstallPlans (created, never applied: on HTTP 409 the
//!   plan of that name is left alone) and their statuses, the statuses of plans
//!   whose steps were never written, the statuses of the Subscriptions that
//!   changed, then the oldest InstallPlans beyond the limit that no
//!   Subscription refers to. A Subscription status that refers to a new plan
//!   is written only if that plan was created (so never onto a plan of the
//!   name that installs something else), with the UID it was created as.
//!
//! They fail only when a status cannot be encoded as JSON (a bug).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use olm_api::v1alpha1::{
    InstallPlan, Subscription, SubscriptionConditionReason as Reason, SubscriptionConditionType as Type,
    SubscriptionStatus,
};
use olm_runtime::effects::{Desired, Effects, Removal, StatusOf};

use super::{
    plans::{PlanWrite, PlanWriteKind, plans_to_delete},
    status::Statuses,
    unpacking::UnpackRequest,
};
use crate::controllers::conditions::set_subscription_condition;

/// The effects of a sync: InstallPlans to create, statuses of InstallPlans and
/// Subscriptions, and InstallPlans to remove; a namespace sync has no status
/// of its own.
pub type SyncEffects = Effects<SubscriptionStatus>;

/// The status `status` of Subscription `namespace`/`name`, as an effect.
fn status_of(
    namespace: &str,
    name: &str,
    status: &SubscriptionStatus,
) -> Result<StatusOf, serde_json::Error> {
    StatusOf::of::<Subscription, _>(Some(namespace), name, status)
}

/// A bundle image requested to be unpacked, and the Subscriptions whose plan
/// waits for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The image.
    pub image: String,
    /// The Subscriptions.
    pub members: Vec<String>,
}

impl From<&UnpackRequest> for Waiting {
    fn from(request: &UnpackRequest) -> Waiting {
        Waiting {
            image: request.image().to_owned(),
            members: request.members.clone(),
        }
    }
}

/// `BundleUnpacking` True on the Subscriptions of each plan `waiting` for an
/// unpack, added to the status they have (pure).
pub fn unpacking(
    namespace: &str,
    subscriptions: &[Arc<Subscription>],
    waiting: &[Waiting],
    now: &Time,
) -> Result<SyncEffects, serde_json::Error> {
    let mut marked: Vec<(String, SubscriptionStatus)> = Vec::new();
    for request in waiting {
        let message = format!("unpacking bundle image {}", request.image);
        for subscription in subscriptions
            .iter()
            .filter(|s| request.members.contains(&s.name_any()))
        {
            let name = subscription.name_any();
            let mut status = match marked.iter().position(|(n, _)| *n == name) {
                Some(at) => marked.remove(at).1,
                None => subscription.status.clone().unwrap_or_default(),
            };
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            set_subscription_condition(
                conditions,
                Type::BundleUnpacking,
                true,
                Reason::UnpackingInProgress,
                &message,
                now,
            );
            marked.push((name, status));
        }
    }
    let statuses = marked
        .iter()
        .map(|(name, status)| status_of(namespace, name, status))
        .collect::<Result<_, _>>()?;
    Ok(Effects {
        statuses,
        ..Effects::none()
    })
}

/// Where a Subscription's status holds the UID of its InstallPlan.
const PLAN_UID_AT: [&str; 2] = ["/installPlanRef/uid", "/installplan/uuid"];

/// The new plans of `writes` with their statuses, the statuses of the other
/// plans `writes` holds, the Subscription statuses that changed, then the
/// removal of the oldest plans of `plans` beyond `max_plans` that no status
/// refers to (pure).
pub fn closing(
    namespace: &str,
    statuses: &Statuses,
    plans: &[Arc<InstallPlan>],
    writes: &[PlanWrite],
    max_plans: usize,
) -> Result<SyncEffects, serde_json::Error> {
    let (objects, mut written) = plan_writes(namespace, writes)?;
    for update in statuses.updates.iter().filter(|update| update.changed) {
        let status = status_of(namespace, &update.subscription.name_any(), &update.status)?;
        let plan = update
            .status
            .install_plan_ref
            .as_ref()
            .and_then(|r| r.name.as_deref());
        written.push(match objects.iter().find(|new| Some(new.name()) == plan) {
            Some(new) => status.refers_to(new, &PLAN_UID_AT),
            None => status,
        });
    }
    let removals = plans_to_delete(plans, &statuses.referenced, max_plans)
        .iter()
        .map(|name| Removal::of::<InstallPlan>(Some(namespace), name))
        .collect();
    Ok(Effects {
        objects,
        statuses: written,
        removals,
        ..Effects::none()
    })
}

/// The plans to create, and the statuses of the plans `writes` holds (a new
/// plan's goes onto the plan created, an existing one's onto that very plan).
fn plan_writes(
    namespace: &str,
    writes: &[PlanWrite],
) -> Result<(Vec<Desired>, Vec<StatusOf>), serde_json::Error> {
    let mut objects = Vec::new();
    let mut statuses = Vec::new();
    for write in writes {
        let plan = write.plan.as_ref();
        let status = StatusOf::of::<InstallPlan, _>(Some(namespace), &plan.name_any(), &plan.status)?;
        match (write.kind, plan.uid()) {
            (PlanWriteKind::Create, _) => {
                let mut object = plan.clone();
                object.status = None;
                object.metadata.generation = None;
                objects.push(Desired::fields(&object)?.create_only());
                statuses.push(status);
            }
            (PlanWriteKind::Status, Some(uid)) => statuses.push(status.with_uid(&uid)),
            (PlanWriteKind::Status, None) => statuses.push(status),
        }
    }
    Ok((objects, statuses))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap, HashSet};

    use k8s_openapi::jiff::Timestamp;
    use olm_api::v1alpha1::Approval;
    use olm_resolver::model::CatalogId;

    use super::*;
    use crate::controllers::subscription::{
        inputs::NamespaceInputs,
        plans::{GroupPlans, UnpackState, tests::plan},
        resolve::{Decision, GroupDecision, tests::subscription},
        status::{self, StatusUpdate},
    };

    fn now() -> Time {
        Time(Timestamp::from_second(1_000).unwrap())
    }

    /// Subscription `name`, referring to plan `plan` when given.
    fn subscription_of(name: &str, plan: Option<&str>) -> Arc<Subscription> {
        let mut subscription = Arc::unwrap_or_clone(subscription(name, "demo-db", Approval::Automatic));
        subscription.status = plan.map(|plan| SubscriptionStatus {
            install_plan_ref: Some(k8s_openapi::api::core::v1::ObjectReference {
                name: Some(plan.into()),
                ..Default::default()
            }),
            ..SubscriptionStatus::default()
        });
        Arc::new(subscription)
    }

    fn update(subscription: Arc<Subscription>, changed: bool) -> StatusUpdate {
        let mut status = subscription.status.clone().unwrap_or_default();
        status.state = Some(olm_api::v1alpha1::SubscriptionState::AtLatestKnown);
        StatusUpdate {
            subscription,
            status,
            changed,
        }
    }

    /// The `(type, status, reason, message)` of the conditions of a written status.
    fn conditions(write: &StatusOf) -> Vec<(String, String, String, String)> {
        let field = |c: &serde_json::Value, key: &str| c[key].as_str().unwrap_or_default().to_owned();
        write.status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    field(c, "type"),
                    field(c, "status"),
                    field(c, "reason"),
                    field(c, "message"),
                )
            })
            .collect()
    }

    #[test]
    fn closing_writes_the_changed_statuses_and_removes_the_oldest_unreferenced_plans() {
        struct Case {
            name: &'static str,
            updates: Vec<StatusUpdate>,
            plans: Vec<Arc<InstallPlan>>,
            referenced: &'static [&'static str],
            writes: &'static [&'static str],
            removals: &'static [&'static str],
        }
        let seven: Vec<_> = (1..=7).map(|g| plan(&format!("install-{g}"), g)).collect();
        let cases = vec![
            Case {
                name: "a changed status is written, an unchanged one is not",
                updates: vec![
                    update(subscription_of("a", None), true),
                    update(subscription_of("b", None), false),
                ],
                plans: Vec::new(),
                referenced: &[],
                writes: &["a"],
                removals: &[],
            },
            Case {
                name: "at the limit nothing goes",
                updates: Vec::new(),
                plans: seven[..5].to_vec(),
                referenced: &[],
                writes: &[],
                removals: &[],
            },
            Case {
                name: "beyond the limit the oldest unreferenced plans go",
                updates: vec![update(subscription_of("a", Some("install-1")), false)],
                plans: seven.clone(),
                referenced: &["install-1"],
                writes: &[],
                removals: &["install-2", "install-3"],
            },
        ];
        for case in cases {
            let statuses = Statuses {
                updates: case.updates,
                referenced: case.referenced.iter().map(|s| s.to_string()).collect(),
            };
            let effects = closing("team", &statuses, &case.plans, &[], 5).unwrap();
            let written: Vec<&str> = effects.statuses.iter().map(|s| s.name.as_str()).collect();
            let removed: Vec<&str> = effects.removals.iter().map(|r| r.name.as_str()).collect();
            assert_eq!(written, case.writes, "{}", case.name);
            assert_eq!(removed, case.removals, "{}", case.name);
            assert!(
                effects.objects.is_empty() && effects.status.is_none(),
                "{}",
                case.name
            );
            assert!(
                effects
                    .statuses
                    .iter()
                    .all(|s| s.resource.kind == "Subscription" && s.namespace.as_deref() == Some("team")),
                "{}",
                case.name
            );
            assert!(
                effects.removals.iter().all(|r| r.resource.kind == "InstallPlan"),
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn new_plans_are_created_before_their_statuses_and_the_statuses_that_refer_to_them() {
        /// What one effect is about: (kind, name, how it is bound).
        type Effect = (&'static str, &'static str, &'static str);
        struct Case {
            name: &'static str,
            writes: Vec<PlanWrite>,
            updates: Vec<StatusUpdate>,
            objects: &'static [&'static str],
            statuses: &'static [Effect],
        }
        let planned = |name: &str, uid: Option<&str>, kind| {
            let mut plan = Arc::unwrap_or_clone(plan(name, 2));
            plan.metadata.uid = uid.map(Into::into);
            plan.metadata.generation = uid.map(|_| 1);
            let status = crate::controllers::plan::planned_status(&plan, &[], Approval::Automatic, &now());
            plan.status = Some(status);
            PlanWrite {
                plan: Arc::new(plan),
                kind,
            }
        };
        let cases = vec![
            Case {
                name: "a new plan, then its status, then the Subscription status that refers to it",
                writes: vec![planned("install-new", None, PlanWriteKind::Create)],
                updates: vec![
                    update(subscription_of("a", Some("install-new")), true),
                    update(subscription_of("b", Some("install-old")), true),
                ],
                objects: &["install-new"],
                statuses: &[
                    ("InstallPlan", "install-new", "the plan created"),
                    ("Subscription", "a", "after install-new"),
                    ("Subscription", "b", "unbound"),
                ],
            },
            Case {
                name: "a lagging store: the plan again, nothing refers to it anew",
                writes: vec![planned("install-new", None, PlanWriteKind::Create)],
                updates: vec![update(subscription_of("a", Some("install-new")), false)],
                objects: &["install-new"],
                statuses: &[("InstallPlan", "install-new", "the plan created")],
            },
            Case {
                name: "a plan whose steps were never written: its status only, onto that plan",
                writes: vec![planned("install-made", Some("uid-made"), PlanWriteKind::Status)],
                updates: vec![update(subscription_of("a", Some("install-made")), true)],
                objects: &[],
                statuses: &[
                    ("InstallPlan", "install-made", "uid-made"),
                    ("Subscription", "a", "unbound"),
                ],
            },
        ];
        for case in cases {
            let statuses = Statuses {
                updates: case.updates,
                referenced: HashSet::new(),
            };
            let effects = closing("team", &statuses, &[], &case.writes, 5).unwrap();
            let objects: Vec<&str> = effects.objects.iter().map(Desired::name).collect();
            assert_eq!(objects, case.objects, "{}", case.name);
            for object in &effects.objects {
                assert!(object.creates(), "{}: created, never applied", case.name);
                assert_eq!(object.resource.kind, "InstallPlan");
                assert!(
                    object.object.data.get("status").is_none_or(|s| s.is_null()),
                    "{}",
                    case.name
                );
                assert!(object.object.metadata.generation.is_none(), "{}", case.name);
            }
            let got: Vec<(String, String, String)> = effects
                .statuses
                .iter()
                .map(|write| {
                    let bound = match (&write.refers_to, &write.guard.uid) {
                        (Some(reference), None) => {
                            assert_eq!(reference.uid_at, PLAN_UID_AT, "{}", case.name);
                            format!("after {}", reference.name)
                        }
                        (None, Some(uid)) => uid.clone(),
                        (None, None) if write.resource.kind == "InstallPlan" => "the plan created".into(),
                        (None, None) => "unbound".into(),
                        (Some(_), Some(_)) => panic!("{}: bound twice", case.name),
                    };
                    (write.resource.kind.clone(), write.name.clone(), bound)
                })
                .collect();
            let want: Vec<(String, String, String)> = case
                .statuses
                .iter()
                .map(|(kind, name, bound)| (kind.to_string(), name.to_string(), bound.to_string()))
                .collect();
            assert_eq!(got, want, "{}", case.name);
        }
    }

    #[test]
    fn a_requested_unpack_shows_on_the_subscriptions_of_its_plan_only() {
        let subscriptions = vec![
            subscription_of("a", Some("install-1")),
            subscription_of("b", None),
        ];
        // Requested unpacks → (Subscription, its BundleUnpacking message).
        type Case = (Vec<Waiting>, Vec<(&'static str, &'static str)>);
        let waiting = |image: &str, members: &[&str]| Waiting {
            image: image.into(),
            members: members.iter().map(|m| m.to_string()).collect(),
        };
        let cases: Vec<Case> = vec![
            (Vec::new(), Vec::new()),
            (
                vec![waiting("reg/db:1", &["a"])],
                vec![("a", "unpacking bundle image reg/db:1")],
            ),
            (
                vec![waiting("reg/db:1", &["a", "b"]), waiting("reg/dep:1", &["b"])],
                vec![
                    ("a", "unpacking bundle image reg/db:1"),
                    ("b", "unpacking bundle image reg/dep:1"),
                ],
            ),
        ];
        for (waits, want) in cases {
            let effects = unpacking("team", &subscriptions, &waits, &now()).unwrap();
            let got: Vec<(&str, String)> = effects
                .statuses
                .iter()
                .map(|write| {
                    let [(kind, status, reason, message)] = conditions(write).try_into().unwrap();
                    assert_eq!((kind.as_str(), status.as_str()), ("BundleUnpacking", "True"));
                    assert_eq!(reason, "UnpackingInProgress");
                    (write.name.as_str(), message)
                })
                .collect();
            let want: Vec<(&str, String)> = want.iter().map(|(n, m)| (*n, m.to_string())).collect();
            assert_eq!(got, want, "{waits:?}");
            // The status a Subscription has is kept: only the condition is added.
            for write in &effects.statuses {
                let before = subscriptions.iter().find(|s| s.name_any() == write.name).unwrap();
                let plan = before.status.as_ref().and_then(|s| s.install_plan_ref.as_ref());
                assert_eq!(
                    write.status["installPlanRef"]["name"].as_str(),
                    plan.and_then(|p| p.name.as_deref())
                );
            }
        }
    }

    fn inputs(subscriptions: Vec<Arc<Subscription>>) -> NamespaceInputs {
        NamespaceInputs {
            namespace: "team".into(),
            subscriptions,
            csvs: Vec::new(),
            plans: Vec::new(),
            catalogs: Vec::new(),
            catalog_uids: HashMap::new(),
            unpack_policy: crate::images::unpack::policy_of(None),
            olm_config: None,
            fingerprint: 0,
        }
    }

    fn installing(step: &str) -> GroupDecision {
        GroupDecision {
            subscriptions: vec!["a".into()],
            decision: Decision::Install(vec![crate::controllers::plan::ResolvedStep {
                bundle: step.into(),
                package: "demo-db".into(),
                version: "1.0.0".into(),
                catalog: CatalogId::new("demo", "team"),
                channel: "stable".into(),
                replaces: None,
                reason: "subscribed".into(),
                dependency: false,
            }]),
            targets: HashMap::new(),
            approval: Approval::Automatic,
            catalogs: BTreeSet::new(),
            deprecations: Vec::new(),
        }
    }

    #[test]
    fn where_the_unpack_of_a_plan_stands_is_written_as_a_condition() {
        // Where the unpack stands, and the unpack conditions written.
        type Case = (
            Option<UnpackState>,
            bool,
            Vec<(&'static str, &'static str, &'static str)>,
        );
        let failed = "bundle demo-db.v1.0.0 of catalog team/demo: image reg/db:1 is not a bundle: no labels";
        let cases: Vec<Case> = vec![
            (
                Some(UnpackState::Unpacking(
                    "unpacking bundle image reg/db:1 in Job olm/x".into(),
                )),
                false,
                vec![(
                    "BundleUnpacking",
                    "UnpackingInProgress",
                    "unpacking bundle image reg/db:1 in Job olm/x",
                )],
            ),
            (
                Some(UnpackState::Failed(failed.into())),
                false,
                vec![("BundleUnpackFailed", "BundleUnpackFailed", failed)],
            ),
            // Marked while its image was pulled: written again, which clears it.
            (None, true, Vec::new()),
        ];
        for (state, marked, want) in cases {
            let inputs = inputs(vec![subscription_of("a", None)]);
            let decisions = vec![installing("demo-db.v1.0.0")];
            let written = GroupPlans {
                writes: Vec::new(),
                by_group: vec![None],
                all: Vec::new(),
                unpack: vec![state.clone()],
                unpack_error: None,
                marked_unpacking: if marked {
                    HashSet::from(["a".to_owned()])
                } else {
                    HashSet::new()
                },
                requests: Vec::new(),
            };
            let statuses = status::statuses(&inputs, &decisions, &written, &now());
            let effects = closing("team", &statuses, &written.all, &written.writes, 5).unwrap();
            let [write] = effects.statuses.as_slice() else {
                panic!("{state:?}: one status write, got {:?}", effects.statuses);
            };
            let got: Vec<(String, String, String)> = conditions(write)
                .into_iter()
                .filter(|(kind, ..)| kind.starts_with("BundleUnpack"))
                .map(|(kind, status, reason, message)| {
                    assert_eq!(status, "True");
                    (kind, reason, message)
                })
                .collect();
            let want: Vec<(String, String, String)> = want
                .iter()
                .map(|(k, r, m)| (k.to_string(), r.to_string(), m.to_string()))
                .collect();
            assert_eq!(got, want, "{state:?}");
        }
    }
}
