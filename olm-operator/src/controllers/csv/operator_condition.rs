//! OperatorConditions: one per CSV, as OLM makes them.
//!
//! - The OperatorCondition has the CSV's name and namespace, lists the CSV's
//!   service accounts (those its permissions and cluster permissions name, or
//!   `default`) and Deployments, and is controlled by the CSV, so that it goes
//!   with it.
//! - A Role and RoleBinding of the same name, controlled by the
//!   OperatorCondition, let those service accounts get, update and patch that
//!   one OperatorCondition (and its status), and nothing else.
//! - The operator reports its conditions in `spec.conditions` (`v2`); they are
//!   copied into `status.conditions`, each stamped with the generation it was
//!   copied at.
//! - Before a CSV replaces another, the replaced CSV's OperatorCondition is
//!   asked whether the operator may be upgraded ([`upgrade_hold`]): an
//!   `Upgradeable` override decides; otherwise an `Upgradeable=False`
//!   condition, or one observed at an older generation, holds the upgrade.
//!
//! The Deployments get `OPERATOR_CONDITION_NAME`, naming this object, from
//! [`super::build`].

use std::collections::BTreeMap;

use k8s_openapi::{
    api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference},
    jiff::Timestamp,
};
use kube::{
    Api, Resource, ResourceExt,
    api::DynamicObject,
    runtime::reflector::{ObjectRef, Store},
};
use olm_api::{
    v1alpha1::ClusterServiceVersion,
    v2::{OperatorCondition, OperatorConditionSpec, OperatorConditionStatus, UPGRADEABLE},
};
use olm_runtime::apply::WriteError;
use olm_runtime::effects::{Effects, ObjectOutcome, StatusOf, at_once};

use super::stamp;
use crate::{context::Context, fields::LiveCopies};

/// The label OLM puts on the Role and RoleBinding it makes for an OperatorCondition.
pub const OLM_MANAGED: &str = "olm.managed";

/// Why the OperatorCondition of a CSV could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CSV lacks metadata the API server always sets.
    #[error("the ClusterServiceVersion has no {0}")]
    MissingMetadata(&'static str),
    /// The OperatorCondition, its Role or its RoleBinding could not be applied.
    #[error("failed to keep the ClusterServiceVersion's OperatorCondition")]
    Apply(#[from] super::stamp::Error),
    /// The status could not be encoded (a bug: it is plain JSON).
    #[error("failed to encode the status of OperatorCondition {name}")]
    Encode {
        /// The OperatorCondition.
        name: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The OperatorCondition the API server returned could not be read (a
    /// bug: it is the object written).
    #[error("failed to read OperatorCondition {name} as the API server returned it")]
    Decode {
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: kube::core::dynamic::ParseDynamicObjectError,
    },
    /// A write failed.
    #[error("failed to write {kind} {namespace}/{name} for the ClusterServiceVersion's OperatorCondition")]
    Write {
        /// The kind written.
        kind: String,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: Box<WriteError>,
    },
}

impl Error {
    /// What kind of failure this is, for the reconcile's error policy.
    pub fn class(&self) -> olm_runtime::ErrorClass {
        match self {
            Error::MissingMetadata(_) | Error::Encode { .. } | Error::Decode { .. } => {
                olm_runtime::ErrorClass::Terminal
            }
            Error::Write { source, .. } => source.class(),
            Error::Apply(super::stamp::Error::Write { source, .. }) => source.class(),
            Error::Apply(super::stamp::Error::Encode { .. }) => olm_runtime::ErrorClass::Terminal,
        }
    }
}

/// The OperatorCondition OLM makes for `csv`: its name, its service accounts
/// and Deployments, controlled by the CSV.
pub fn desired(csv: &ClusterServiceVersion) -> Result<OperatorCondition, Error> {
    let name = csv.metadata.name.clone().ok_or(Error::MissingMetadata("name"))?;
    let mut reference = csv
        .controller_owner_ref(&())
        .ok_or(Error::MissingMetadata("uid"))?;
    reference.block_owner_deletion = Some(false);
    let details = csv.spec.install.deployment();
    let mut accounts: Vec<String> = Vec::new();
    let permissions = details.into_iter().flat_map(|d| {
        d.cluster_permissions
            .iter()
            .flatten()
            .chain(d.permissions.iter().flatten())
    });
    for permission in permissions {
        let account = &permission.service_account_name;
        if !account.is_empty() && !accounts.contains(account) {
            accounts.push(account.clone());
        }
    }
    if accounts.is_empty() {
        accounts.push("default".to_owned());
    }
    let deployments: Vec<String> = details
        .into_iter()
        .flat_map(|d| d.deployments.iter())
        .map(|d| d.name.clone())
        .filter(|name| !name.is_empty())
        .collect();
    let mut condition = OperatorCondition::new(
        &name,
        OperatorConditionSpec {
            service_accounts: Some(accounts),
            deployments: Some(deployments),
            ..OperatorConditionSpec::default()
        },
    );
    condition.metadata.namespace = csv.metadata.namespace.clone();
    condition.metadata.owner_references = Some(vec![reference]);
    condition.metadata.labels = super::naming::operator_label_of(csv).map(|label| BTreeMap::from([label]));
    Ok(condition)
}

/// The Role that lets the operator get, update and patch its own
/// OperatorCondition (by name), controlled by that OperatorCondition.
pub fn role(condition: &OperatorCondition, owner: OwnerReference) -> Role {
    Role {
        metadata: managed_meta(condition, owner),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![olm_api::OPERATORS_GROUP.to_owned()]),
            resources: Some(vec![
                "operatorconditions".to_owned(),
                "operatorconditions/status".to_owned(),
            ]),
            resource_names: Some(vec![condition.name_any()]),
            verbs: vec!["get".to_owned(), "update".to_owned(), "patch".to_owned()],
            non_resource_urls: None,
        }]),
    }
}

/// The RoleBinding of [`role`] to the OperatorCondition's service accounts.
pub fn role_binding(condition: &OperatorCondition, owner: OwnerReference) -> RoleBinding {
    let namespace = condition.namespace();
    let subjects = condition
        .spec
        .service_accounts
        .iter()
        .flatten()
        .map(|account| Subject {
            kind: "ServiceAccount".to_owned(),
            name: account.clone(),
            namespace: namespace.clone(),
            api_group: Some(String::new()),
        })
        .collect();
    RoleBinding {
        metadata: managed_meta(condition, owner),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: condition.name_any(),
        },
        subjects: Some(subjects),
    }
}

fn managed_meta(condition: &OperatorCondition, owner: OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(condition.name_any()),
        namespace: condition.namespace(),
        labels: Some(
            condition
                .labels()
                .iter()
                .filter(|(key, _)| key.starts_with(olm_api::labels::OPERATOR_LABEL_PREFIX))
                .map(|(key, value)| (key.clone(), value.clone()))
                .chain([(OLM_MANAGED.to_owned(), "true".to_owned())])
                .collect(),
        ),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    }
}

/// The status conditions once the operator's `spec.conditions` are copied in,
/// each stamped with the object's generation; None when nothing changes. The
/// transition time of a condition moves only when its status does; conditions
/// of other types stay.
pub fn synced_conditions(condition: &OperatorCondition, now: Timestamp) -> Option<Vec<Condition>> {
    let generation = condition.metadata.generation.unwrap_or_default();
    let mut status: Vec<Condition> = condition
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut changed = false;
    for reported in condition.spec.conditions.iter().flatten() {
        let position = status.iter().position(|c| c.type_ == reported.type_);
        if let Some(current) = position.map(|i| &status[i])
            && current.status == reported.status
            && current.observed_generation == Some(generation)
            && current.reason == reported.reason
            && current.message == reported.message
        {
            continue;
        }
        let mut copied = reported.clone();
        copied.observed_generation = Some(generation);
        match position {
            Some(i) => {
                if status[i].status == copied.status {
                    copied.last_transition_time = status[i].last_transition_time.clone();
                } else if copied.last_transition_time == status[i].last_transition_time {
                    copied.last_transition_time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now);
                }
                status[i] = copied;
            }
            None => status.push(copied),
        }
        changed = true;
    }
    changed.then_some(status)
}

/// Why the operator whose OperatorCondition is `condition` may not be upgraded
/// now, in OLM's words; None when it may (no OperatorCondition, no
/// `Upgradeable` condition, or an override that says True).
pub fn upgrade_hold(condition: Option<&OperatorCondition>) -> Option<String> {
    let condition = condition?;
    if let Some(forced) = condition
        .spec
        .overrides
        .iter()
        .flatten()
        .find(|o| o.type_ == UPGRADEABLE)
    {
        return (forced.status != "True")
            .then(|| format!("the operator is not upgradeable: {}", forced.message));
    }
    let reported = condition
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == UPGRADEABLE))?;
    if reported.observed_generation != condition.metadata.generation {
        return Some(format!(
            "the operatorcondition status {:?}={:?} is outdated",
            reported.type_, reported.status
        ));
    }
    (reported.status == "False").then(|| format!("the operator is not upgradeable: {}", reported.message))
}

/// The message a replacing CSV waits with while `hold` stands (OLM's).
pub fn pending_message(hold: &str) -> String {
    format!("operator is not upgradeable: {hold}")
}

/// Decides what keeps the OperatorCondition of `csv` (pure): the
/// OperatorCondition, and once a store shows it (`live`, with its UID), what
/// depends on it ([`dependents`]). Objects whose live copy in `copies` is
/// current are left out ([`stamp::desired`]).
pub fn plan(
    csv: &ClusterServiceVersion,
    live: Option<&OperatorCondition>,
    copies: &dyn LiveCopies,
    now: Timestamp,
) -> Result<Effects<()>, Error> {
    let wanted = desired(csv)?;
    let (condition, current) = stamp::desired(&wanted, "OperatorCondition", copies)?;
    let mut effects = match live {
        Some(live) => dependents(&wanted, live, copies, now)?,
        None => Effects::none(),
    };
    if !current {
        let dependents = std::mem::take(&mut effects.objects);
        effects.objects = at_once(std::iter::once(condition).chain(dependents));
    }
    Ok(effects)
}

/// What depends on the OperatorCondition `live` (as stored, with its UID),
/// which `wanted` says how it should be (pure): the Role and RoleBinding it
/// controls, both at once (a binding may name a Role not there yet), named
/// after `wanted`'s service accounts (newer than the stored ones when the
/// OperatorCondition is being changed), and its status with the operator's
/// `spec.conditions` copied in.
pub fn dependents(
    wanted: &OperatorCondition,
    live: &OperatorCondition,
    copies: &dyn LiveCopies,
    now: Timestamp,
) -> Result<Effects<()>, Error> {
    let owner = live
        .controller_owner_ref(&())
        .ok_or(Error::MissingMetadata("OperatorCondition uid"))?;
    let owner = OwnerReference {
        block_owner_deletion: Some(false),
        ..owner
    };
    let rbac = [
        stamp::desired(&role(wanted, owner.clone()), "Role", copies)?,
        stamp::desired(&role_binding(wanted, owner), "RoleBinding", copies)?,
    ];
    let stale = rbac
        .into_iter()
        .filter(|(_, current)| !current)
        .map(|(object, _)| object);
    Ok(Effects {
        objects: at_once(stale),
        statuses: status_write(live, now)?.into_iter().collect(),
        removals: Vec::new(),
        status: None,
    })
}

/// The status of `live` once the operator's `spec.conditions` are copied in,
/// owning only the types the operator reports (others, of an operator that
/// writes its status itself, stay theirs); `None` when nothing changes.
fn status_write(live: &OperatorCondition, now: Timestamp) -> Result<Option<StatusOf>, Error> {
    let Some(mut conditions) = synced_conditions(live, now) else {
        return Ok(None);
    };
    let reported: Vec<&str> = live
        .spec
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    conditions.retain(|c| reported.contains(&c.type_.as_str()));
    let status = OperatorConditionStatus {
        conditions: Some(conditions),
    };
    StatusOf::of::<OperatorCondition, _>(live.namespace().as_deref(), &live.name_any(), &status)
        .map(Some)
        .map_err(|source| Error::Encode {
            name: live.name_any(),
            source,
        })
}

/// Keeps the OperatorCondition of `csv` through the one applier: what
/// [`plan`] decides from `live` (its copy in the store). Without one, the
/// OperatorCondition is written first and what depends on it is decided from
/// what the API server stored ([`dependents`]), then written.
pub async fn keep(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    live: Option<&OperatorCondition>,
    copies: &dyn LiveCopies,
) -> Result<(), Error> {
    let now = crate::context::now();
    let namespace = csv.namespace().unwrap_or_default();
    let effects = plan(csv, live, copies, now)?;
    if live.is_some() || effects.objects.is_empty() {
        return perform(ctx, &namespace, &effects).await;
    }
    let outcomes = ctx
        .writer
        .write_objects(&ctx.client, &effects.objects, &())
        .await
        .map_err(|source| write_error(&namespace, source))?;
    let Some(ObjectOutcome::Written(stored)) = outcomes.first() else {
        return Ok(());
    };
    let stored: OperatorCondition =
        DynamicObject::clone(stored)
            .try_parse()
            .map_err(|source| Error::Decode {
                name: csv.name_any(),
                source,
            })?;
    let rest = dependents(&desired(csv)?, &stored, copies, now)?;
    perform(ctx, &namespace, &rest).await
}

/// Performs `effects` through the one applier.
async fn perform(ctx: &Context, namespace: &str, effects: &Effects<()>) -> Result<(), Error> {
    if effects.is_empty() {
        return Ok(());
    }
    let api = Api::<OperatorCondition>::namespaced(ctx.client.clone(), namespace);
    ctx.writer
        .perform(&ctx.client, &api, effects, &())
        .await
        .map(drop)
        .map_err(|source| write_error(namespace, source))
}

fn write_error(namespace: &str, source: WriteError) -> Error {
    Error::Write {
        kind: source.object().0.to_owned(),
        namespace: namespace.to_owned(),
        name: source.object().1.to_owned(),
        source: Box::new(source),
    }
}

/// The CSVs a change of the OperatorCondition named `name` in `namespace`
/// concerns: the CSV of that name (its status is synced there) and those that
/// replace it (their upgrade may be held or released).
pub fn concerned_csvs(
    store: &Store<ClusterServiceVersion>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<ClusterServiceVersion>> {
    let mut concerned = vec![ObjectRef::new(name).within(namespace)];
    concerned.extend(
        store
            .state()
            .iter()
            .filter(|csv| {
                csv.namespace().as_deref() == Some(namespace) && csv.spec.replaces.as_deref() == Some(name)
            })
            .map(|csv| ObjectRef::from_obj(csv.as_ref())),
    );
    concerned
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use olm_api::v2::OverrideCondition;
    use olm_runtime::effects::Desired;

    use super::*;
    use crate::controllers::csv::fixtures::{self, Copies, NAMESPACE, modes};

    const LIMITADOR: &str =
        "bundles/limitador-operator/0.11.0/manifests/limitador-operator.clusterserviceversion.yaml";

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).expect("a time")
    }

    fn condition(type_: &str, status: &str, message: &str, generation: Option<i64>) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: "Reported".to_owned(),
            message: message.to_owned(),
            last_transition_time: Time(at(0)),
            observed_generation: generation,
        }
    }

    fn operator_condition(
        generation: i64,
        reported: Vec<Condition>,
        observed: Vec<Condition>,
        overrides: Vec<OverrideCondition>,
    ) -> OperatorCondition {
        let mut object = OperatorCondition::new(
            "demo.v1.0.0",
            OperatorConditionSpec {
                conditions: Some(reported),
                overrides: Some(overrides),
                ..OperatorConditionSpec::default()
            },
        );
        object.metadata.generation = Some(generation);
        object.status = Some(OperatorConditionStatus {
            conditions: Some(observed),
        });
        object
    }

    fn forced(status: &str) -> OverrideCondition {
        OverrideCondition {
            type_: UPGRADEABLE.to_owned(),
            status: status.to_owned(),
            reason: "Admin".to_owned(),
            message: format!("forced {status}"),
            ..OverrideCondition::default()
        }
    }

    #[test]
    fn one_operator_condition_per_csv_with_its_accounts_and_deployments() {
        let csv = fixtures::corpus_csv(LIMITADOR);
        let wanted = desired(&csv).expect("desired");
        assert_eq!(wanted.name_any(), "limitador-operator.v0.11.0");
        assert_eq!(wanted.namespace().as_deref(), Some(NAMESPACE));
        assert_eq!(
            wanted.spec.service_accounts,
            Some(vec!["limitador-operator-controller-manager".to_owned()]),
            "the account named by both permissions and clusterPermissions, once"
        );
        assert_eq!(
            wanted.spec.deployments,
            Some(vec!["limitador-operator-controller-manager".to_owned()])
        );
        assert_eq!(
            wanted.spec.conditions, None,
            "the operator's conditions are not ours"
        );
        assert_eq!(wanted.spec.overrides, None, "the admin's overrides are not ours");
        let owner = &wanted.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("ClusterServiceVersion", "limitador-operator.v0.11.0", Some(true))
        );
        assert_eq!(owner.block_owner_deletion, Some(false));
        assert_eq!(
            serde_json::to_value(&wanted).expect("json")["apiVersion"],
            "operators.coreos.com/v2"
        );
    }

    #[test]
    fn a_csv_without_permissions_names_the_default_service_account() {
        let mut csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        if let Some(details) = csv.spec.install.deployment_mut() {
            details.permissions = None;
            details.cluster_permissions = None;
        }
        let wanted = desired(&csv).expect("desired");
        assert_eq!(wanted.spec.service_accounts, Some(vec!["default".to_owned()]));
    }

    #[test]
    fn the_role_grants_only_that_operator_condition_to_its_service_accounts() {
        let csv = fixtures::corpus_csv(LIMITADOR);
        let mut wanted = desired(&csv).expect("desired");
        wanted.metadata.uid = Some("oc-uid".to_owned());
        let owner = wanted.controller_owner_ref(&()).expect("an owner reference");
        let role = role(&wanted, owner.clone());
        let rules = role.rules.expect("rules");
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].api_groups, Some(vec!["operators.coreos.com".to_owned()]));
        assert_eq!(
            rules[0].resource_names,
            Some(vec!["limitador-operator.v0.11.0".to_owned()])
        );
        assert_eq!(rules[0].verbs, ["get", "update", "patch"]);
        assert_eq!(
            role.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(OLM_MANAGED))
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(
            role.metadata.owner_references.as_ref().map(|o| o[0].uid.as_str()),
            Some("oc-uid")
        );
        let binding = role_binding(&wanted, owner);
        assert_eq!(binding.role_ref.name, "limitador-operator.v0.11.0");
        let subjects = binding.subjects.expect("subjects");
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].name, "limitador-operator-controller-manager");
        assert_eq!(subjects[0].namespace.as_deref(), Some(NAMESPACE));
    }

    #[test]
    fn reported_conditions_are_copied_into_the_status_with_the_generation() {
        let reported = condition(UPGRADEABLE, "False", "migrating", None);
        let object = operator_condition(3, vec![reported.clone()], vec![], vec![]);
        let copied = synced_conditions(&object, at(10)).expect("a change");
        assert_eq!(copied.len(), 1);
        assert_eq!(copied[0].observed_generation, Some(3));
        assert_eq!(copied[0].status, "False");

        // Already copied at this generation: nothing to write.
        let settled = operator_condition(3, vec![reported.clone()], copied.clone(), vec![]);
        assert_eq!(synced_conditions(&settled, at(20)), None);

        // A new generation is stamped again; the time stays while the status does.
        let newer = operator_condition(4, vec![reported.clone()], copied.clone(), vec![]);
        let restamped = synced_conditions(&newer, at(30)).expect("a change");
        assert_eq!(restamped[0].observed_generation, Some(4));
        assert_eq!(restamped[0].last_transition_time, copied[0].last_transition_time);

        // A flip moves the transition time when the operator did not.
        let flipped = operator_condition(
            5,
            vec![condition(UPGRADEABLE, "True", "done", None)],
            restamped,
            vec![],
        );
        let after = synced_conditions(&flipped, at(40)).expect("a change");
        assert_eq!(after[0].status, "True");
        assert_eq!(after[0].last_transition_time, Time(at(40)));

        // Conditions the operator does not report stay.
        let other = condition("Custom", "True", "mine", Some(1));
        let kept = operator_condition(6, vec![reported], vec![other.clone()], vec![]);
        let merged = synced_conditions(&kept, at(50)).expect("a change");
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0], other);
    }

    #[test]
    fn upgradeable_false_holds_an_upgrade_until_true_or_overridden() {
        assert_eq!(upgrade_hold(None), None, "no OperatorCondition: no hold");
        let none = operator_condition(1, vec![], vec![], vec![]);
        assert_eq!(
            upgrade_hold(Some(&none)),
            None,
            "no Upgradeable condition: no hold"
        );

        let held = operator_condition(
            2,
            vec![],
            vec![condition(UPGRADEABLE, "False", "migrating data", Some(2))],
            vec![],
        );
        assert_eq!(
            upgrade_hold(Some(&held)).as_deref(),
            Some("the operator is not upgradeable: migrating data")
        );
        assert_eq!(
            pending_message(&upgrade_hold(Some(&held)).unwrap_or_default()),
            "operator is not upgradeable: the operator is not upgradeable: migrating data"
        );

        let released = operator_condition(
            2,
            vec![],
            vec![condition(UPGRADEABLE, "True", "done", Some(2))],
            vec![],
        );
        assert_eq!(upgrade_hold(Some(&released)), None);

        let outdated = operator_condition(
            3,
            vec![],
            vec![condition(UPGRADEABLE, "True", "done", Some(2))],
            vec![],
        );
        assert_eq!(
            upgrade_hold(Some(&outdated)).as_deref(),
            Some(r#"the operatorcondition status "Upgradeable"="True" is outdated"#)
        );

        let overridden = operator_condition(
            2,
            vec![],
            vec![condition(UPGRADEABLE, "False", "migrating data", Some(2))],
            vec![forced("True")],
        );
        assert_eq!(
            upgrade_hold(Some(&overridden)),
            None,
            "an override to True releases it"
        );
        let forced_false = operator_condition(2, vec![], vec![], vec![forced("False")]);
        assert_eq!(
            upgrade_hold(Some(&forced_false)).as_deref(),
            Some("the operator is not upgradeable: forced False")
        );
    }

    /// What `effects` writes: each object's kind and whether alongside the
    /// one before, then each status's kind.
    fn writes(effects: &Effects<()>) -> (Vec<(String, bool)>, Vec<String>) {
        let objects = effects
            .objects
            .iter()
            .map(|d| (d.resource.kind.clone(), d.is_alongside_previous()))
            .collect();
        let statuses = effects.statuses.iter().map(|s| s.resource.kind.clone()).collect();
        (objects, statuses)
    }

    #[test]
    fn the_operator_condition_its_rbac_and_its_status_are_written_only_when_not_current() {
        let csv = fixtures::small_csv(&modes(&["OwnNamespace"]), "");
        let wanted = desired(&csv).expect("an OperatorCondition");
        // As stored: with a UID, and a condition the operator reported.
        let mut stored = wanted.clone();
        stored.metadata.uid = Some("oc-uid".to_owned());
        let reported = condition("Upgradeable", "False", "migrating", None);
        stored.spec.conditions = Some(vec![reported]);
        stored.metadata.generation = Some(2);
        let mut synced = stored.clone();
        let copied = synced_conditions(&stored, at(5)).expect("copied");
        synced.status = Some(OperatorConditionStatus {
            conditions: Some(copied),
        });
        let current = || Copies {
            hashes: current_hashes(&wanted, &stored),
            ..Copies::default()
        };
        let kind = |k: &str, alongside: bool| (k.to_owned(), alongside);
        // case, the store's OperatorCondition, the live copies, objects, statuses
        type Case<'a> = (
            &'a str,
            Option<&'a OperatorCondition>,
            Copies,
            Vec<(String, bool)>,
            Vec<&'a str>,
        );
        let cases: [Case; 4] = [
            (
                "nothing live: the OperatorCondition alone",
                None,
                Copies::default(),
                vec![kind("OperatorCondition", false)],
                vec![],
            ),
            (
                "stored, nothing stamped: all three at once, then its status",
                Some(&stored),
                Copies::default(),
                vec![
                    kind("OperatorCondition", false),
                    kind("Role", true),
                    kind("RoleBinding", true),
                ],
                vec!["OperatorCondition"],
            ),
            (
                "all current, a report not copied yet: the status alone",
                Some(&stored),
                current(),
                vec![],
                vec!["OperatorCondition"],
            ),
            (
                "all current and copied: nothing",
                Some(&synced),
                current(),
                vec![],
                vec![],
            ),
        ];
        for (case, live, copies, objects, statuses) in cases {
            let effects = plan(&csv, live, &copies, at(5)).expect(case);
            let (written, status_kinds) = writes(&effects);
            assert_eq!(written, objects, "{case}");
            assert_eq!(status_kinds, statuses, "{case}");
        }
    }

    /// The hashes of the OperatorCondition `wanted` and of its Role and
    /// RoleBinding, owned by `stored`.
    fn current_hashes(
        wanted: &OperatorCondition,
        stored: &OperatorCondition,
    ) -> std::collections::BTreeMap<(String, String), String> {
        let owner = OwnerReference {
            block_owner_deletion: Some(false),
            ..stored.controller_owner_ref(&()).expect("an owner")
        };
        let mut copies = Copies::default();
        copies.carry(&Desired::owned(wanted).unwrap());
        copies.carry(&Desired::owned(&role(wanted, owner.clone())).unwrap());
        copies.carry(&Desired::owned(&role_binding(wanted, owner)).unwrap());
        copies.hashes
    }
}
