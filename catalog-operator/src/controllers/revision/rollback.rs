//! A rollback asked for on a Subscription, decided (pure).
//!
//! The request is the Subscription's annotation `olm-rs.dev/rollback-to`
//! ([`labels::revision::ROLLBACK_TO`]): the name of a recorded revision (its
//! CSV's) or its number. It is declarative, so `kubectl apply` and GitOps
//! drive it as they drive the rest of the Subscription, and it holds: while
//! it is there, the Subscription controller leaves the Subscription out of
//! resolution (no upgrade back to the channel head), and this controller
//! alone writes its status. Removing it lifts the hold.
//!
//! A rollback goes through these stages, one decision per reconcile, each
//! decided from what the stores show:
//! 1. refused ([`Refusal`]), before anything is touched: no such revision, an
//!    InstallPlan still applying, a revision that lacks objects or cannot be
//!    read back, or a CRD of the revision that does not declare a version
//!    objects are stored in ([`safety::dropped`]), or under whose schemas
//!    existing custom resources would not validate ([`schemas::invalid`]),
//!    or a revision that an
//!    installed operator's needs rule out ([`dependents::broken`], the
//!    resolver's answer). The current version keeps
//!    running; the Subscription says why and what to do, and stays so until
//!    something changes;
//! 2. [`Stage::Removing`]: the current CSV is deleted (olm-operator would
//!    otherwise see that it replaces the revision's CSV and remove that one);
//! 3. [`Stage::Installing`]: the revision's CRDs, then its CSV, are applied
//!    from the revision itself, never from the catalog;
//! 4. [`Stage::Waiting`]: the revision's other objects are applied, owned by
//!    the CSV, until the CSV is Succeeded;
//! 5. [`Stage::Done`]: held at the revision.
//!
//! A revision whose CSV has the `machine` strategy is installed beside the
//! current CSV instead of after it: the units of the current CSV must move
//! back to the revision's with `upgrade`, as Juju's `refresh --revision`
//! does, and a unit whose CSV is gone is removed (`stop`, `remove`). Its CSV
//! names the current one in annotation `olm-rs.dev/rolled-back-from`, so
//! that the agents move every unit to it and olm-operator takes it as
//! replacing the current one; once every unit is active at its version and
//! it is Succeeded, the current CSV is removed ([`Stage::Removing`] after
//! [`Stage::Waiting`]), and the rollback is done. While it waits, the
//! Subscription's condition carries the CSV's message, which names the
//! machines whose unit failed.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::{
    ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use olm_api::{
    labels,
    model::{ObjectKey, OperatorRevision, RecordedObject},
    v1alpha1::{
        ClusterServiceVersion, CsvPhase, InstallPlan, InstallPlanPhase, Subscription,
        SubscriptionConditionReason as Reason, SubscriptionConditionType as Type, SubscriptionState,
        SubscriptionStatus,
    },
};
use olm_runtime::effects::{Desired, Effects, Removal, StatusWrite};
use serde_json::Value;

use super::{
    content::{self, Corrupt},
    dependents,
    safety::{self, DroppedVersions},
    schemas::{self, InvalidObjects, Listed},
};
use crate::controllers::conditions::{remove_subscription_condition, set_subscription_condition};

/// The revision a Subscription asks to be rolled back to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// By number (`spec.revision`).
    Number(i64),
    /// By name (the revision's, which is its CSV's).
    Name(String),
}

impl Request {
    /// The request an annotation value makes: a number, or a name; `None`
    /// when it is empty.
    pub fn parse(text: &str) -> Option<Request> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        Some(match text.parse::<i64>() {
            Ok(number) => Request::Number(number),
            Err(_) => Request::Name(text.to_owned()),
        })
    }

    /// Whether `revision` is the one asked for.
    pub fn matches(&self, revision: &OperatorRevision) -> bool {
        match self {
            Request::Number(number) => revision.spec.revision == *number,
            Request::Name(name) => revision.name_any() == *name,
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Number(number) => write!(f, "number {number}"),
            Request::Name(name) => write!(f, "{name}"),
        }
    }
}

/// The rollback `subscription` asks for, if any.
pub fn requested(subscription: &Subscription) -> Option<Request> {
    subscription
        .annotations()
        .get(labels::revision::ROLLBACK_TO)
        .and_then(|value| Request::parse(value))
}

/// Whether `subscription` is held by a rollback: the Subscription controller
/// leaves it out of resolution.
pub fn held(subscription: &Subscription) -> bool {
    requested(subscription).is_some()
}

/// What a reconcile of a Subscription that asks for a rollback read.
pub struct Read<'a> {
    /// The Subscription.
    pub subscription: &'a Subscription,
    /// What it asks for.
    pub request: &'a Request,
    /// Its revisions, as the store keeps them (without objects).
    pub revisions: &'a [&'a OperatorRevision],
    /// The CSVs of its namespace.
    pub csvs: &'a [&'a ClusterServiceVersion],
    /// The InstallPlans of its namespace.
    pub plans: &'a [&'a InstallPlan],
    /// The revision asked for, whole, when [`content_needed`] said so and it
    /// was found.
    pub content: Option<&'a OperatorRevision>,
    /// Why the revision asked for, found, could not be decoded (then
    /// `content` is `None`): it is refused as corrupt.
    pub undecodable: Option<&'a str>,
    /// The live CRDs the revision holds, by name, as the API server has them.
    pub crds: &'a [(String, Value)],
    /// The custom resources of the CRD versions the revision changes
    /// ([`schemas::to_check`]), as the API server lists them.
    pub objects: &'a [Listed],
    /// Now.
    pub now: &'a Time,
}

/// Why a rollback is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No recorded revision is the one asked for.
    NotFound {
        /// What was asked for.
        asked: String,
        /// The revisions recorded, as `number (name)`.
        known: Vec<String>,
    },
    /// An InstallPlan of the Subscription is still applying.
    InFlight {
        /// The plan.
        plan: String,
    },
    /// The revision lacks objects that did not fit in it.
    Incomplete {
        /// The revision.
        revision: String,
        /// The objects it lacks, as `kind/name`.
        omitted: Vec<String>,
    },
    /// A manifest of the revision cannot be read back.
    Corrupt {
        /// The revision.
        revision: String,
        /// What is wrong, naming the object.
        cause: String,
    },
    /// CRDs of the revision would drop versions objects are stored in.
    DropsStoredVersions {
        /// The revision.
        revision: String,
        /// Each CRD and the versions.
        dropped: Vec<DroppedVersions>,
    },
    /// Existing custom resources do not validate against the schemas of the
    /// revision's CRDs.
    InvalidObjects {
        /// The revision.
        revision: String,
        /// Each CRD version and its objects.
        invalid: Vec<InvalidObjects>,
    },
    /// Installed operators need the current version, and the revision does
    /// not meet their needs (or the revision needs what is not installed).
    BreaksDependents {
        /// The revision.
        revision: String,
        /// The installed CSVs that need the current version.
        dependents: Vec<String>,
        /// The resolver's explanation.
        explanation: String,
    },
}

impl Refusal {
    /// The condition reason.
    pub fn reason(&self) -> Reason {
        match self {
            Refusal::NotFound { .. } => Reason::RevisionNotFound,
            Refusal::InFlight { .. } => Reason::UpgradeInFlight,
            Refusal::Incomplete { .. } => Reason::RevisionIncomplete,
            Refusal::Corrupt { .. } => Reason::RevisionCorrupt,
            Refusal::DropsStoredVersions { .. } => Reason::StoredVersionsDropped,
            Refusal::InvalidObjects { .. } => Reason::CustomResourcesInvalid,
            Refusal::BreaksDependents { .. } => Reason::RollbackBreaksDependents,
        }
    }

    /// Whether it may pass by itself (an InstallPlan finishes): the
    /// reconcile looks again soon; the others wait for a change.
    pub fn is_temporary(&self) -> bool {
        matches!(self, Refusal::InFlight { .. })
    }
}

/// How to lift the hold, for the messages.
const LIFT: &str = "or remove annotation olm-rs.dev/rollback-to to lift the hold";

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotFound { asked, known } => write!(
                f,
                "rollback refused: no revision {asked} is recorded (recorded: {}); set annotation \
                 olm-rs.dev/rollback-to to one of them (kubectl olm revisions lists them), {LIFT}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
            Refusal::InFlight { plan } => write!(
                f,
                "rollback waits: InstallPlan {plan} is still applying; it starts once the plan is done"
            ),
            Refusal::Incomplete { revision, omitted } => write!(
                f,
                "rollback refused: revision {revision} lacks {} (too large to keep), so it cannot be \
                 installed again; roll back to another revision, {LIFT}",
                omitted.join(", ")
            ),
            Refusal::Corrupt { revision, cause } => write!(
                f,
                "rollback refused: revision {revision} is corrupt: {cause}; roll back to another revision, {LIFT}"
            ),
            Refusal::DropsStoredVersions { revision, dropped } => write!(
                f,
                "rollback to revision {revision} refused, the current version keeps running: {}. \
                 Migrate those objects to a version the revision declares and remove the versions \
                 from the CRD's status.storedVersions first, {LIFT}",
                dropped
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Refusal::InvalidObjects { revision, invalid } => write!(
                f,
                "rollback to revision {revision} refused, the current version keeps running: {}. \
                 Change or remove those objects so that the revision's schema accepts them first, {LIFT}",
                invalid
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Refusal::BreaksDependents {
                revision,
                dependents,
                explanation,
            } => {
                write!(
                    f,
                    "rollback to revision {revision} refused, the current version keeps running: "
                )?;
                match dependents.as_slice() {
                    [] => f.write_str("the revision cannot be installed beside what the namespace holds")?,
                    [one] => write!(
                        f,
                        "installed operator {one} needs what only the current version gives"
                    )?,
                    many => write!(
                        f,
                        "installed operators {} need what only the current version gives",
                        many.join(", ")
                    )?,
                }
                write!(
                    f,
                    ". {explanation}\nRemove or upgrade those operators first, roll back to another \
                     revision, {LIFT}"
                )
            }
        }
    }
}

/// Where a rollback stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Refused; nothing is touched.
    Refused(Refusal),
    /// The current CSV is being removed.
    Removing {
        /// The CSV.
        csv: String,
    },
    /// The revision's CRDs and CSV are applied.
    Installing,
    /// The revision's CSV exists and is not Succeeded yet.
    Waiting {
        /// Its phase.
        phase: Option<CsvPhase>,
        /// Its status message (for a machine CSV, the machines whose unit
        /// is not active at its version, and why).
        message: Option<String>,
    },
    /// The revision is installed again, its CSV Succeeded: held there.
    Done,
}

/// The decision: the effects and the stage, for the log and the tests.
pub struct Decision {
    /// What to write.
    pub effects: Effects<SubscriptionStatus>,
    /// Where the rollback stands.
    pub stage: Stage,
}

/// A revision read untyped, decoded; why not, when it cannot be.
pub fn decode(object: &DynamicObject) -> Result<OperatorRevision, String> {
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| e.to_string())
}

/// The revision asked for, among those of `read`.
fn target<'a>(read: &Read<'a>) -> Option<&'a OperatorRevision> {
    read.revisions.iter().copied().find(|r| read.request.matches(r))
}

fn csv<'a>(read: &Read<'a>, name: &str) -> Option<&'a ClusterServiceVersion> {
    read.csvs.iter().copied().find(|c| c.name_any() == name)
}

/// The revision the reconcile must read whole (with the live CRDs it
/// holds): the one asked for, while its CSV is not installed yet or not
/// Succeeded (its objects are applied until then), or while another CSV of
/// the Subscription is still to be removed (the checks come before that).
pub fn content_needed(read: &Read<'_>) -> Option<String> {
    let target = target(read)?;
    let name = &target.spec.cluster_service_version;
    let phase = csv(read, name).and_then(|c| c.status.as_ref()?.phase);
    (phase != Some(CsvPhase::Succeeded) || !current(read, name).is_empty()).then(|| target.name_any())
}

/// The CSVs to remove before the revision's goes in: the Subscription's
/// installed and current CSVs other than the revision's, that exist.
fn current<'a>(read: &Read<'a>, keep: &str) -> Vec<&'a ClusterServiceVersion> {
    let status = read.subscription.status.as_ref();
    let mut names: Vec<&str> = status
        .into_iter()
        .flat_map(|s| [s.installed_csv.as_deref(), s.current_csv.as_deref()])
        .flatten()
        .filter(|name| *name != keep)
        .collect();
    names.dedup();
    names.into_iter().filter_map(|name| csv(read, name)).collect()
}

/// The plan the Subscription refers to, when it is still applying.
fn in_flight(read: &Read<'_>) -> Option<String> {
    let name = read
        .subscription
        .status
        .as_ref()?
        .install_plan_ref
        .as_ref()?
        .name
        .clone()?;
    let plan = read.plans.iter().find(|p| p.name_any() == name)?;
    let phase = plan.status.as_ref().map(|s| s.phase);
    matches!(
        phase,
        Some(InstallPlanPhase::Installing | InstallPlanPhase::Planning)
    )
    .then_some(name)
}

/// Whether the revision can be installed again: its objects whole and
/// readable, no stored CRD version dropped, and the existing custom
/// resources valid under its CRDs' schemas.
fn check(revision: &OperatorRevision, crds: &[(String, Value)], objects: &[Listed]) -> Result<(), Refusal> {
    let name = revision.name_any();
    if !revision.spec.omitted.is_empty() {
        return Err(Refusal::Incomplete {
            revision: name,
            omitted: revision.spec.omitted.iter().map(content::describe).collect(),
        });
    }
    let unreadable = revision
        .spec
        .objects
        .iter()
        .find_map(|o| content::manifest(o).err())
        .map(|e| e.to_string())
        .or_else(|| {
            (!revision
                .spec
                .objects
                .iter()
                .any(|o| o.key.kind == "ClusterServiceVersion"))
            .then(|| "it holds no ClusterServiceVersion".to_owned())
        });
    if let Some(cause) = unreadable {
        return Err(Refusal::Corrupt {
            revision: name,
            cause,
        });
    }
    let dropped = safety::dropped(revision, crds);
    if !dropped.is_empty() {
        return Err(Refusal::DropsStoredVersions {
            revision: name,
            dropped,
        });
    }
    let invalid = schemas::invalid(revision, objects);
    if !invalid.is_empty() {
        return Err(Refusal::InvalidObjects {
            revision: name,
            invalid,
        });
    }
    Ok(())
}

/// Whether the installed operators of the namespace can do with the revision
/// in place of the current version ([`dependents::broken`]).
fn needed(read: &Read<'_>, revision: &OperatorRevision) -> Result<(), Refusal> {
    let Some(current) = current_name(read.subscription) else {
        return Ok(());
    };
    let Some(csv) = recorded_csv(revision) else {
        return Ok(());
    };
    let broken = dependents::broken(&dependents::Read {
        subscription: read.subscription,
        current: &current,
        revision: &csv,
        csvs: read.csvs,
    });
    match broken {
        Some(broken) => Err(Refusal::BreaksDependents {
            revision: revision.name_any(),
            dependents: broken.dependents,
            explanation: broken.explanation,
        }),
        None => Ok(()),
    }
}

/// The CSV a revision holds, typed; `None` when it cannot be read (the
/// revision is then refused as corrupt by [`check`]).
fn recorded_csv(revision: &OperatorRevision) -> Option<ClusterServiceVersion> {
    let object = revision.spec.objects.iter().find(|o| is_csv(&o.key))?;
    serde_json::from_value(content::manifest(object).ok()?).ok()
}

/// Where the rollback of `read` stands.
pub fn stage(read: &Read<'_>) -> Stage {
    let Some(target) = target(read) else {
        let mut known: Vec<&&OperatorRevision> = read.revisions.iter().collect();
        known.sort_by_key(|r| r.spec.revision);
        return Stage::Refused(Refusal::NotFound {
            asked: read.request.to_string(),
            known: known
                .iter()
                .map(|r| format!("{} ({})", r.spec.revision, r.name_any()))
                .collect(),
        });
    };
    let name = &target.spec.cluster_service_version;
    let other = current(read, name).first().map(|c| c.name_any());
    if let Some(installed) = csv(read, name)
        && other.is_none()
    {
        return installed_stage(read, installed);
    }
    // Something is still to be removed or installed: checked first.
    if let Some(plan) = in_flight(read) {
        return Stage::Refused(Refusal::InFlight { plan });
    }
    let Some(whole) = read.content else {
        if let Some(cause) = read.undecodable {
            return Stage::Refused(Refusal::Corrupt {
                revision: target.name_any(),
                cause: format!("the object cannot be decoded: {cause}"),
            });
        }
        // Listed, but gone when it was read.
        return Stage::Refused(Refusal::NotFound {
            asked: read.request.to_string(),
            known: Vec::new(),
        });
    };
    if let Err(refusal) = check(whole, read.crds, read.objects).and_then(|()| needed(read, whole)) {
        return Stage::Refused(refusal);
    }
    match other {
        Some(csv) if !is_machine(whole) => Stage::Removing { csv },
        _ => Stage::Installing,
    }
}

/// Whether the revision's CSV has the `machine` strategy: it installs beside
/// the current CSV.
fn is_machine(revision: &OperatorRevision) -> bool {
    recorded_csv(revision).is_some_and(|csv| csv.spec.install.machine().is_some())
}

/// The stage once the revision's CSV is installed: waiting for it to
/// succeed, then removing the CSV it came back from should that one still
/// be there (a machine rollback installs beside it), then done.
fn installed_stage(read: &Read<'_>, installed: &ClusterServiceVersion) -> Stage {
    let status = installed.status.as_ref();
    match status.and_then(|s| s.phase) {
        Some(CsvPhase::Succeeded) => {
            let from = installed
                .annotations()
                .get(labels::revision::ROLLED_BACK_FROM)
                .filter(|from| **from != installed.name_any())
                .and_then(|from| csv(read, from));
            match from {
                Some(from) => Stage::Removing { csv: from.name_any() },
                None => Stage::Done,
            }
        }
        phase => Stage::Waiting {
            phase,
            message: status.and_then(|s| s.message.clone()).filter(|m| !m.is_empty()),
        },
    }
}

/// The effects of the rollback of `read`. A recorded object that cannot be
/// made an object to apply refuses the rollback as corrupt.
pub fn decide(read: &Read<'_>) -> Decision {
    let mut stage = stage(read);
    let target = target(read);
    let effects = match stage_effects(read, &stage, target) {
        Ok(effects) => effects,
        Err(corrupt) => {
            stage = Stage::Refused(Refusal::Corrupt {
                revision: target.map(ResourceExt::name_any).unwrap_or_default(),
                cause: corrupt.to_string(),
            });
            Effects::none()
        }
    };
    let mut effects = effects;
    let status = status(read, &stage, target);
    effects.status = (Some(&status) != read.subscription.status.as_ref()).then(|| StatusWrite {
        name: read.subscription.name_any(),
        status,
    });
    Decision { effects, stage }
}

/// The objects to write and remove at `stage`.
fn stage_effects(
    read: &Read<'_>,
    stage: &Stage,
    target: Option<&OperatorRevision>,
) -> Result<Effects<SubscriptionStatus>, Corrupt> {
    let mut effects = Effects::none();
    let namespace = read.subscription.namespace().unwrap_or_default();
    match stage {
        Stage::Removing { csv: name } => {
            if let Some(csv) = csv(read, name).filter(|c| c.metadata.deletion_timestamp.is_none()) {
                let removal = Removal::of::<ClusterServiceVersion>(Some(&namespace), name);
                effects.removals.push(match csv.uid() {
                    Some(uid) => removal.with_uid(&uid),
                    None => removal,
                });
            }
        }
        Stage::Installing => {
            if let Some(whole) = read.content {
                effects.objects = install_objects(read, whole, &namespace)?;
            }
        }
        Stage::Waiting { .. } => {
            let owner = target.and_then(|t| csv(read, &t.spec.cluster_service_version));
            if let (Some(whole), Some(owner)) = (read.content, owner) {
                effects.objects = owned_objects(whole, &namespace, owner)?;
            }
        }
        Stage::Refused(_) | Stage::Done => {}
    }
    Ok(effects)
}

/// Kinds a bundle may ship that are not namespaced.
const CLUSTER_SCOPED: [&str; 8] = [
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "PriorityClass",
    "APIService",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "StorageClass",
];

fn is_crd(key: &ObjectKey) -> bool {
    key.kind == "CustomResourceDefinition"
}

fn is_csv(key: &ObjectKey) -> bool {
    key.kind == "ClusterServiceVersion"
}

/// Stage 3: the revision's CRDs at once, then its CSV (pruned as an
/// InstallPlan prunes it, and marked with the CSV it replaces).
fn install_objects(
    read: &Read<'_>,
    whole: &OperatorRevision,
    namespace: &str,
) -> Result<Vec<Desired>, Corrupt> {
    let crds = whole.spec.objects.iter().filter(|o| is_crd(&o.key));
    let mut objects: Vec<Desired> = olm_runtime::effects::at_once(
        crds.map(|o| desired(o, namespace, None))
            .collect::<Result<Vec<_>, _>>()?,
    );
    let from = current_name(read.subscription);
    for object in whole.spec.objects.iter().filter(|o| is_csv(&o.key)) {
        let mut csv = desired(object, namespace, None)?;
        let mut typed: ClusterServiceVersion =
            serde_json::from_value(serde_json::to_value(&csv.object).unwrap_or_default())
                .map_err(|e| Corrupt::Unreadable(content::describe(&object.key), e.to_string()))?;
        typed.status = None;
        if let Some(from) = &from {
            typed
                .annotations_mut()
                .insert(labels::revision::ROLLED_BACK_FROM.to_owned(), from.clone());
        }
        let value = serde_json::to_value(&typed).unwrap_or_default();
        csv.object = serde_json::from_value(value)
            .map_err(|e| Corrupt::Unreadable(content::describe(&object.key), e.to_string()))?;
        objects.push(Desired::dynamic_fields(&csv.resource, &csv.object));
    }
    Ok(objects)
}

/// The CSV the Subscription reports installed, as the rollback found it.
fn current_name(subscription: &Subscription) -> Option<String> {
    subscription.status.as_ref()?.installed_csv.clone()
}

/// Stage 4: the revision's other objects, the namespaced ones owned by its CSV.
fn owned_objects(
    whole: &OperatorRevision,
    namespace: &str,
    owner: &ClusterServiceVersion,
) -> Result<Vec<Desired>, Corrupt> {
    let Some(uid) = owner.uid() else {
        return Ok(Vec::new());
    };
    let reference = OwnerReference {
        api_version: "operators.coreos.com/v1alpha1".to_owned(),
        kind: "ClusterServiceVersion".to_owned(),
        name: owner.name_any(),
        uid,
        controller: Some(false),
        block_owner_deletion: Some(false),
    };
    let others = whole
        .spec
        .objects
        .iter()
        .filter(|o| !is_crd(&o.key) && !is_csv(&o.key) && o.key.kind != "Subscription");
    Ok(olm_runtime::effects::at_once(
        others
            .map(|o| desired(o, namespace, Some(reference.clone())))
            .collect::<Result<Vec<_>, _>>()?,
    ))
}

/// One recorded object as it is applied again: in `namespace` unless its
/// kind is cluster-scoped, owned by `owner` when namespaced and given.
fn desired(
    object: &RecordedObject,
    namespace: &str,
    owner: Option<OwnerReference>,
) -> Result<Desired, Corrupt> {
    let key = &object.key;
    let manifest = content::manifest(object)?;
    let mut dynamic: DynamicObject = serde_json::from_value(manifest)
        .map_err(|e| Corrupt::Unreadable(content::describe(key), format!("not an object: {e}")))?;
    let namespaced = !CLUSTER_SCOPED.contains(&key.kind.as_str());
    let metadata = &mut dynamic.metadata;
    metadata.name = Some(key.name.clone());
    metadata.namespace = namespaced.then(|| namespace.to_owned());
    metadata.uid = None;
    metadata.resource_version = None;
    metadata.creation_timestamp = None;
    metadata.managed_fields = None;
    if namespaced && let Some(owner) = owner {
        metadata.owner_references = Some(vec![owner]);
    }
    // The group and version the manifest was applied as, else the key's.
    let gvk = dynamic
        .types
        .as_ref()
        .and_then(|t| GroupVersionKind::try_from(t).ok())
        .unwrap_or_else(|| GroupVersionKind::gvk(&key.group, &key.version, &key.kind));
    Ok(Desired::dynamic_fields(&ApiResource::from_gvk(&gvk), &dynamic))
}

/// The Subscription's status at `stage`: the rollback's condition and the
/// kstatus conditions (Ready, Reconciling, Stalled), the state Argo CD
/// reads, and the installed CSV once the revision's exists.
fn status(read: &Read<'_>, stage: &Stage, target: Option<&OperatorRevision>) -> SubscriptionStatus {
    let subscription = read.subscription;
    let old = subscription.status.clone().unwrap_or_default();
    let mut status = old.clone();
    status.observed_generation = subscription.metadata.generation;
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let now = read.now;
    for gone in [
        Type::InstallPlanPending,
        Type::InstallPlanFailed,
        Type::InstallPlanMissing,
    ] {
        remove_subscription_condition(&mut conditions, gone);
    }
    let automatic = Automatic::of(subscription);
    let (state, settled) = set_conditions(&mut conditions, stage, target, old.state, now, automatic.as_ref());
    status.state = state;
    if let Some(target) = settled {
        status.installed_csv = Some(target.spec.cluster_service_version.clone());
        status.current_csv = Some(target.spec.cluster_service_version.clone());
    }
    status.conditions = Some(conditions);
    let mut without_time = status.clone();
    without_time.last_updated = old.last_updated.clone();
    if without_time != old {
        status.last_updated = Some(now.clone());
    }
    status
}

fn describe(t: &OperatorRevision) -> String {
    format!(
        "revision {} ({}{})",
        t.spec.revision,
        t.spec.cluster_service_version,
        t.spec
            .version
            .as_deref()
            .map(|v| format!(", version {v}"))
            .unwrap_or_default()
    )
}

/// The words of a rollback that olm-rs started by itself on a failed
/// upgrade ([`super::auto`]): the failure, and when its hold ends.
pub struct Automatic {
    /// Both versions and the cause.
    pub cause: String,
    /// When the failed version is tried again.
    pub hold: String,
}

impl Automatic {
    /// The words of `subscription`'s automatic rollback, when it is one.
    pub fn of(subscription: &Subscription) -> Option<Automatic> {
        let failed = super::auto::failed_upgrade(subscription)?;
        Some(Automatic {
            cause: super::auto::failure_cause(subscription)
                .map_or_else(|| format!("the upgrade to {failed} failed"), ToOwned::to_owned),
            hold: super::auto::hold_words(subscription),
        })
    }
}

/// What a rollback under way is doing at `stage`, in words.
fn under_way(stage: &Stage) -> String {
    match stage {
        Stage::Removing { csv } => format!("removing CSV {csv}"),
        Stage::Installing => "installing its CRDs and CSV from the revision".to_owned(),
        Stage::Waiting { phase, message } => format!(
            "waiting for its CSV to succeed (phase {}){}",
            phase.map_or("none yet".to_owned(), |p| format!("{p:?}")),
            message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
        ),
        _ => String::new(),
    }
}

/// The conditions of `stage`; the state, and the revision to report as
/// installed (once its CSV exists).
fn set_conditions<'a>(
    conditions: &mut Vec<olm_api::v1alpha1::SubscriptionCondition>,
    stage: &Stage,
    target: Option<&'a OperatorRevision>,
    state: Option<SubscriptionState>,
    now: &Time,
    automatic: Option<&Automatic>,
) -> (Option<SubscriptionState>, Option<&'a OperatorRevision>) {
    let words = |message: String| match automatic {
        Some(automatic) => format!("{}; {message}", automatic.cause),
        None => message,
    };
    match (stage, target) {
        (Stage::Refused(refusal), _) if refusal.is_temporary() => {
            // It passes by itself: under way, not stalled.
            let message = words(refusal.to_string());
            let reason = refusal.reason();
            set_subscription_condition(conditions, Type::RolledBack, false, reason.clone(), &message, now);
            set_subscription_condition(conditions, Type::Ready, false, reason.clone(), &message, now);
            set_subscription_condition(conditions, Type::Reconciling, true, reason, &message, now);
            remove_subscription_condition(conditions, Type::Stalled);
            remove_subscription_condition(conditions, Type::ResolutionFailed);
            (state, None)
        }
        (Stage::Refused(refusal), _) => {
            let message = words(refusal.to_string());
            let reason = refusal.reason();
            set_subscription_condition(conditions, Type::RolledBack, false, reason.clone(), &message, now);
            set_subscription_condition(
                conditions,
                Type::ResolutionFailed,
                true,
                reason.clone(),
                &message,
                now,
            );
            set_subscription_condition(conditions, Type::Ready, false, reason.clone(), &message, now);
            remove_subscription_condition(conditions, Type::Reconciling);
            set_subscription_condition(conditions, Type::Stalled, true, reason, &message, now);
            (state, None)
        }
        (Stage::Done, Some(target)) => {
            let message = match automatic {
                Some(automatic) => format!(
                    "{}; rolled back to {}; {}",
                    automatic.cause,
                    describe(target),
                    automatic.hold
                ),
                None => format!(
                    "rolled back to {}; held there: no upgrade until annotation olm-rs.dev/rollback-to is removed",
                    describe(target)
                ),
            };
            let reason = Reason::RolledBack;
            set_subscription_condition(conditions, Type::RolledBack, true, reason.clone(), &message, now);
            set_subscription_condition(conditions, Type::Ready, true, reason, &message, now);
            remove_subscription_condition(conditions, Type::Reconciling);
            remove_subscription_condition(conditions, Type::Stalled);
            remove_subscription_condition(conditions, Type::ResolutionFailed);
            (Some(SubscriptionState::AtLatestKnown), Some(target))
        }
        (stage, target) => {
            let message = words(format!(
                "rolling back to {}: {}",
                target.map(describe).unwrap_or_default(),
                under_way(stage)
            ));
            let reason = Reason::RollingBack;
            set_subscription_condition(conditions, Type::RolledBack, false, reason.clone(), &message, now);
            set_subscription_condition(conditions, Type::Ready, false, reason.clone(), &message, now);
            set_subscription_condition(conditions, Type::Reconciling, true, reason, &message, now);
            remove_subscription_condition(conditions, Type::Stalled);
            remove_subscription_condition(conditions, Type::ResolutionFailed);
            let installed = matches!(stage, Stage::Installing | Stage::Waiting { .. });
            (
                Some(SubscriptionState::UpgradePending),
                target.filter(|_| installed),
            )
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
