//! What a side installed as Deployments (an operator in pods) gets from a
//! Ready relation (pure): a ConfigMap in its namespace holding the other
//! side's data ([`olm_api::relation_data::flatten`]), and a Role and
//! RoleBinding, all three of one name
//! ([`olm_api::relation_data::configmap_name`]), that let the ServiceAccounts
//! of its Deployments read that ConfigMap and the relation's Databags, and
//! write the data of its own application bag alone.
//!
//! An operator in pods has no units of its own in a relation: its pods are
//! replicas of one application, without an identity of their own. Its side is
//! its application bag only, written by the operator itself (one of its
//! replicas, as it chooses: its own leader election). The other side's unit
//! bags (of an application on machines) reach it in the ConfigMap, each key
//! prefixed by the unit's Machine.
//!
//! All three are owned by the Relation, so that removing the relation removes
//! them; a side no longer related (the relation not Ready) loses them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    api::{
        core::v1::ConfigMap,
        rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{Resource, ResourceExt, core::PartialObjectMeta};
use olm_api::{
    model::{APPLICATION_LABEL, Databag, RELATION_LABEL, Relation, ResolvedEndpoint, application_bag},
    relation_data::{DATA_HASH, ENDPOINT_LABEL, configmap_name, data_hash, flatten},
    v1alpha1::ClusterServiceVersion,
};
use olm_runtime::effects::{DESIRED_HASH, Desired, Removal};

use super::bags::BagSide;

/// Annotation on a ConfigMap of remote data: the hash of what its Role and
/// RoleBinding grant to whom.
const RBAC_HASH: &str = "olm-rs.dev/relation-rbac-hash";

/// The objects of one side in pods.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSide {
    /// The other side's data.
    pub configmap: ConfigMap,
    /// Reading it and the bags, writing its own application bag.
    pub role: Role,
    /// The Role, bound to the ServiceAccounts of the side's Deployments.
    pub binding: RoleBinding,
}

/// The objects of each side of `relation` installed as Deployments, given its
/// `joined` endpoints, their `sides` (as [`super::bags::sides`] makes them),
/// the CSVs of the namespace and the relation's live `bags`.
pub fn desired(
    relation: &Relation,
    joined: &[ResolvedEndpoint],
    sides: &[BagSide],
    csvs: &[&ClusterServiceVersion],
    bags: &[&Databag],
) -> Vec<PodSide> {
    let mut wanted = Vec::new();
    for (index, (endpoint, side)) in joined.iter().zip(sides).enumerate() {
        let Some(csv) = csvs.iter().find(|c| c.name_any() == endpoint.csv) else {
            continue;
        };
        if csv.spec.install.deployment().is_none() {
            continue;
        }
        // A peer relation has one side: its remote is itself.
        let remote = sides
            .iter()
            .enumerate()
            .find(|(other, _)| *other != index)
            .map_or(side, |(_, remote)| remote);
        let data = remote_data(bags, &remote.application);
        wanted.push(side_objects(relation, side, data, &service_accounts(csv)));
    }
    wanted
}

/// The data of `application`'s bags, flattened.
fn remote_data(bags: &[&Databag], application: &str) -> BTreeMap<String, String> {
    let of_app = |bag: &&&Databag| bag.spec.application == application;
    fn data(bag: &Databag) -> Option<&BTreeMap<String, String>> {
        bag.status.as_ref().map(|s| &s.data)
    }
    let app = bags
        .iter()
        .filter(of_app)
        .find(|b| b.spec.unit.is_none())
        .and_then(|b| data(b));
    let units = bags.iter().filter(of_app).filter_map(|b| {
        let unit = b.spec.unit.as_deref()?;
        Some((unit, data(b)?))
    });
    flatten(app, units)
}

/// The ServiceAccounts the Deployments of `csv` run as (`default` when one names none).
fn service_accounts(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    csv.spec
        .install
        .deployment()
        .into_iter()
        .flat_map(|details| details.deployments.iter())
        .map(|d| {
            d.spec
                .pointer("/template/spec/serviceAccountName")
                .and_then(serde_json::Value::as_str)
                .filter(|name| !name.is_empty())
                .unwrap_or("default")
                .to_owned()
        })
        .collect()
}

fn side_objects(
    relation: &Relation,
    side: &BagSide,
    data: BTreeMap<String, String>,
    accounts: &BTreeSet<String>,
) -> PodSide {
    let relation_name = relation.name_any();
    let name = configmap_name(&relation_name, &side.application);
    let namespace = relation.namespace();
    let meta = ObjectMeta {
        name: Some(name.clone()),
        namespace: namespace.clone(),
        labels: Some(BTreeMap::from([
            (RELATION_LABEL.to_owned(), relation_name.clone()),
            (APPLICATION_LABEL.to_owned(), side.application.clone()),
            (ENDPOINT_LABEL.to_owned(), side.endpoint.clone()),
        ])),
        owner_references: relation.controller_owner_ref(&()).map(|owner| vec![owner]),
        ..ObjectMeta::default()
    };
    let mut cm_meta = meta.clone();
    // The RBAC's content is in the ConfigMap's hash too: the Role and
    // RoleBinding are written when either changes (e.g. the ServiceAccounts
    // of a new version of the operator).
    let rbac = BTreeMap::from([(
        "accounts".to_owned(),
        accounts.iter().cloned().collect::<Vec<_>>().join(","),
    )]);
    cm_meta.annotations = Some(BTreeMap::from([
        (DATA_HASH.to_owned(), data_hash(&data)),
        (RBAC_HASH.to_owned(), data_hash(&rbac)),
    ]));
    let rule = |resource: &str, names: Vec<String>, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![if resource == "configmaps" {
            String::new()
        } else {
            olm_api::model::GROUP.to_owned()
        }]),
        resources: Some(vec![resource.to_owned()]),
        resource_names: Some(names),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    };
    let own_bag = application_bag(&relation_name, &side.application);
    let role = Role {
        metadata: meta.clone(),
        rules: Some(vec![
            rule("configmaps", vec![name.clone()], &["get", "list", "watch"]),
            rule("databags", vec![own_bag.clone()], &["get"]),
            rule("databags/status", vec![own_bag], &["get", "update", "patch"]),
        ]),
    };
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name,
        },
        subjects: Some(
            accounts
                .iter()
                .map(|account| Subject {
                    kind: "ServiceAccount".into(),
                    name: account.clone(),
                    namespace: namespace.clone(),
                    ..Subject::default()
                })
                .collect(),
        ),
    };
    PodSide {
        configmap: ConfigMap {
            metadata: cm_meta,
            data: Some(data),
            ..ConfigMap::default()
        },
        role,
        binding,
    }
}

/// The writes that bring the relation's live ConfigMaps (`live`: labelled
/// with its name, as metadata) to `wanted`: a ConfigMap is written when its
/// live copy does not carry its hash, the Role and RoleBinding with it
/// (SSA: unchanged ones are left as they are); those no longer wanted go,
/// each with its Role and RoleBinding.
pub fn changes(wanted: &[PodSide], live: &[&PartialObjectMeta<ConfigMap>]) -> (Vec<Desired>, Vec<Removal>) {
    let mut apply = Vec::new();
    for side in wanted {
        let (Ok(configmap), Ok(role), Ok(binding)) = (
            Desired::owned(&side.configmap),
            Desired::owned(&side.role),
            Desired::owned(&side.binding),
        ) else {
            continue;
        };
        let held = live
            .iter()
            .find(|l| l.name_any() == side.configmap.name_any())
            .and_then(|l| l.annotations().get(DESIRED_HASH));
        if held.map(String::as_str) != configmap.hash() {
            apply.extend([role, binding, configmap]);
        }
    }
    let names: BTreeSet<String> = wanted.iter().map(|s| s.configmap.name_any()).collect();
    let mut removals = Vec::new();
    for gone in live.iter().filter(|l| !names.contains(&l.name_any())) {
        let (namespace, name) = (gone.namespace(), gone.name_any());
        removals.push(Removal::of::<RoleBinding>(namespace.as_deref(), &name));
        removals.push(Removal::of::<Role>(namespace.as_deref(), &name));
        let removal = Removal::of::<ConfigMap>(namespace.as_deref(), &name);
        removals.push(match gone.uid() {
            Some(uid) => removal.with_uid(&uid),
            None => removal,
        });
    }
    (olm_runtime::effects::at_once(apply), removals)
}
