//! Dereference: reads everything a ClusterServiceVersion refers to, so that
//! validate and build can be pure: the OperatorGroups of its namespace (from
//! the shared stores, like its CSVs, Subscriptions and the OperatorCondition
//! of the CSV it replaces), the
//! CRDs it owns and requires, the service accounts and Deployments it will
//! create (to check who controls them), its neighbours in the upgrade
//! chain, the config of the Subscription that installed it, and whether the
//! CSV it replaces may be upgraded (its OperatorCondition).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    api::{apps::v1::Deployment, core::v1::ServiceAccount},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, ResourceExt, runtime::reflector::ObjectRef};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, CsvPhase, SubscriptionConfig},
    v2::OperatorCondition,
};

use crate::{
    context::Context,
    stores::{InstallStores, Stores, in_namespace},
};

/// Another CSV of the namespace, as far as the upgrade chain cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Its name.
    pub name: String,
    /// Its phase.
    pub phase: Option<CsvPhase>,
}

/// What a CSV refers to, as found in the cluster.
#[derive(Clone, Debug, Default)]
pub struct Dereferenced {
    /// The OperatorGroups of the CSV's namespace.
    pub operator_groups: Vec<OperatorGroup>,
    /// The owned and required CRDs that exist, by name, each holding only what
    /// the requirement checks read ([`super::crd_summary`]).
    pub crds: BTreeMap<String, CustomResourceDefinition>,
    /// The service accounts of the strategy that exist, by name (only their
    /// metadata, when they come from the store).
    pub service_accounts: BTreeMap<String, ServiceAccount>,
    /// The Deployments of the strategy that exist, by name (without their pod
    /// template, when they come from the store).
    pub deployments: BTreeMap<String, Deployment>,
    /// The names of every CSV in the namespace.
    pub namespace_csvs: BTreeSet<String>,
    /// A CSV of the namespace whose `spec.replaces` names this one.
    pub replacement: Option<Peer>,
    /// The CSV this one's `spec.replaces` names, when it is in the namespace.
    pub replaced: Option<Peer>,
    /// The API server's version.
    pub server_version: Option<semver::Version>,
    /// Owned CRDs of this CSV that another CSV of the namespace, outside its
    /// upgrade chain, also owns: `(crd, other csv)`.
    pub crd_owner_conflicts: Vec<(String, String)>,
    /// For each group/version of the CSV's `nativeAPIs` (`v1` for the core
    /// group), the kinds the API server serves there.
    pub served_kinds: BTreeMap<String, BTreeSet<String>>,
    /// The `spec.config` of the Subscription that installed this CSV
    /// ([`super::overrides::config_for`]).
    pub subscription_config: Option<SubscriptionConfig>,
    /// The replicas that Subscription asks of the Deployments
    /// ([`super::overrides::Replicas`]).
    pub replicas: super::overrides::Replicas,
    /// Why the CSV this one replaces may not be upgraded now, from its
    /// OperatorCondition ([`super::operator_condition::upgrade_hold`]).
    pub upgrade_hold: Option<String>,
    /// What serving needs: certificate Secrets and APIService holders
    /// ([`super::serving::read::read`]).
    pub serving: super::serving::read::Found,
    /// The remote data of the application's relations, as the Relation
    /// controller keeps it ([`super::relation_data::related`]).
    pub related: Vec<super::relation_data::Related>,
}

/// Why dereferencing failed; every case is a failed API call, worth a retry.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the certificate Secrets of the served Deployments failed.
    #[error("failed to read what the ClusterServiceVersion serves with")]
    Serving(#[source] super::serving::read::Error),
    /// API discovery failed.
    #[error("failed to discover the kinds of API {group_version}")]
    Discovery {
        /// The group/version.
        group_version: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Reading one object failed.
    #[error("failed to get {kind} {name}")]
    Get {
        /// The kind.
        kind: &'static str,
        /// The name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

/// Why the CSV `replaced` (the one this CSV replaces) holds its upgrade back,
/// from its OperatorCondition in the stores, if it does.
fn upgrade_hold(stores: &Stores, namespace: &str, replaced: Option<&Peer>) -> Option<String> {
    let peer = replaced?;
    let key = ObjectRef::<OperatorCondition>::new(&peer.name).within(namespace);
    let condition = stores.installs.operator_conditions.store.get(&key);
    super::operator_condition::upgrade_hold(condition.as_deref())
}

/// Reads what `csv` refers to: the OperatorGroups, CSVs and Subscriptions of
/// its namespace, and its Deployments and ServiceAccounts labelled for a CSV,
/// from the shared `stores` (synced), the rest from the API server.
pub async fn dereference(
    ctx: &Context,
    stores: &Stores,
    csv: &ClusterServiceVersion,
) -> Result<Dereferenced, Error> {
    let namespace = csv.namespace().unwrap_or_default();
    let client = ctx.client.clone();

    let operator_groups: Vec<OperatorGroup> = stores
        .operator_groups_in(&namespace)
        .iter()
        .map(|group| group.as_ref().clone())
        .collect();
    let csvs: Vec<ClusterServiceVersion> = stores
        .csvs_in(&namespace)
        .iter()
        .map(|other| other.as_ref().clone())
        .collect();
    let (replacement, replaced) = neighbours(csv, &csvs);
    let crd_owner_conflicts = crd_owner_conflicts(csv, &csvs);
    let upgrade_hold = upgrade_hold(stores, &namespace, replaced.as_ref());
    let subscriptions = in_namespace(&stores.subscriptions.store, &namespace);
    let subscription =
        super::overrides::subscription_for(subscriptions.iter().map(AsRef::as_ref), &csv.name_any());
    let subscription_config = subscription.and_then(|sub| sub.spec.config.clone());
    let replicas = super::overrides::Replicas::of(subscription);
    let related = super::relation_data::read(csv, &stores.relation_data.store);

    // The live reads are independent: all of them at once, one round trip.
    // A Deployment or ServiceAccount labelled for a CSV is in the stores; one
    // that is not (not made yet, or made by someone else, whose owner decides
    // whether it may be adopted) is read live.
    let installs = &stores.installs;
    let namespace = namespace.as_str();
    let accounts = &Api::<ServiceAccount>::namespaced(client.clone(), namespace);
    let deployment_api = &Api::<Deployment>::namespaced(client.clone(), namespace);
    let serving = async {
        super::serving::read::read(ctx, &installs.api_services.store, &stores.csvs.store, csv)
            .await
            .map_err(Error::Serving)
    };
    let (crds, service_accounts, deployments, served_kinds, serving) = futures::try_join!(
        read_each(crd_names(csv), |name| async {
            match stored_crd(installs, csv, &name) {
                Some(stored) => Ok(Some(stored)),
                None => crd(&client, name).await,
            }
        }),
        read_each(service_account_names(csv), |name| async move {
            let key = ObjectRef::new(&name).within(namespace);
            match installs.service_accounts.store.get(&key) {
                Some(stored) => Ok(Some(ServiceAccount {
                    metadata: stored.metadata.clone(),
                    ..ServiceAccount::default()
                })),
                None => get(accounts, &name, "ServiceAccount").await,
            }
        }),
        read_each(deployment_names(csv), |name| async move {
            let key = ObjectRef::new(&name).within(namespace);
            match installs.deployments.store.get(&key) {
                Some(stored) => Ok(Some(stored.as_ref().clone())),
                None => get(deployment_api, &name, "Deployment").await,
            }
        }),
        read_each(native_group_versions(csv), |group_version| async move {
            discover(ctx, &group_version).await.map(Some)
        }),
        serving,
    )?;

    Ok(Dereferenced {
        related,
        subscription_config,
        replicas,
        upgrade_hold,
        served_kinds,
        crd_owner_conflicts,
        operator_groups,
        crds,
        service_accounts,
        deployments,
        namespace_csvs: csvs.iter().map(ResourceExt::name_any).collect(),
        replacement,
        replaced,
        server_version: ctx.server_version().await,
        serving,
    })
}

/// What `read` finds for each of `names`, by name, all read at once; a name
/// it finds nothing for is left out.
async fn read_each<T, Fut>(
    names: impl IntoIterator<Item = String>,
    read: impl Fn(String) -> Fut,
) -> Result<BTreeMap<String, T>, Error>
where
    Fut: Future<Output = Result<Option<T>, Error>>,
{
    let reads = names.into_iter().map(|name| {
        let found = read(name.clone());
        async move { Ok::<_, Error>(found.await?.map(|value| (name, value))) }
    });
    Ok(futures::future::try_join_all(reads)
        .await?
        .into_iter()
        .flatten()
        .collect())
}

/// The CRD `name` from the store, when it shows it as `csv` needs it: every
/// version the CSV names for it served
/// ([`super::crd_summary::CrdSummary::serves`]).
fn stored_crd(
    installs: &InstallStores,
    csv: &ClusterServiceVersion,
    name: &str,
) -> Option<CustomResourceDefinition> {
    let stored = installs.crds.store.get(&ObjectRef::new(name))?;
    let versions = csv
        .owned_crds()
        .iter()
        .chain(csv.required_crds())
        .filter(|description| description.name == name)
        .map(|description| description.version.as_str());
    stored.serves(versions).then(|| stored.to_crd())
}

/// The CRD `name`, summed up ([`super::crd_summary`]); `None` when it does not exist.
async fn crd(client: &kube::Client, name: String) -> Result<Option<CustomResourceDefinition>, Error> {
    super::crd_summary::get(client, &name)
        .await
        .map_err(|source| Error::Get {
            kind: "CustomResourceDefinition",
            name,
            source,
        })
}

/// The kinds served at `group_version`; none when it is not served at all.
async fn discover(ctx: &Context, group_version: &str) -> Result<BTreeSet<String>, Error> {
    let listed = if group_version.contains('/') {
        ctx.client.list_api_group_resources(group_version).await
    } else {
        ctx.client.list_core_api_resources(group_version).await
    };
    match listed {
        Ok(list) => Ok(list
            .resources
            .into_iter()
            .filter(|resource| !resource.name.contains('/'))
            .map(|resource| resource.kind)
            .collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(BTreeSet::new()),
        Err(source) => Err(Error::Discovery {
            group_version: group_version.to_owned(),
            source,
        }),
    }
}

/// The group/version of a native API as discovery names it: `v1` for the
/// core group, `<group>/<version>` otherwise.
pub fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

fn native_group_versions(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    csv.spec
        .native_apis
        .iter()
        .flatten()
        .map(|api| group_version(&api.group, &api.version))
        .collect()
}

async fn get<K>(api: &Api<K>, name: &str, kind: &'static str) -> Result<Option<K>, Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(|source| Error::Get {
        kind,
        name: name.to_owned(),
        source,
    })
}

/// The CSV a rollback brought `csv` back from (its annotation
/// `olm-rs.dev/rolled-back-from`), if any.
pub fn rolled_back_from(csv: &ClusterServiceVersion) -> Option<&str> {
    csv.annotations()
        .get(olm_api::labels::revision::ROLLED_BACK_FROM)
        .map(String::as_str)
        .filter(|from| !from.is_empty())
}

/// Whether `newer` replaces `older` in the upgrade chain: its `spec.replaces`
/// names `older`, unless a rollback brought `older` back from `newer`; or a
/// rollback brought `newer` back from `older` (the older version replaces the
/// newer one, as an upgrade would, so that the newer one steps aside only
/// once the older one has succeeded again). Pure.
pub fn replaces(newer: &ClusterServiceVersion, older: &ClusterServiceVersion) -> bool {
    let (newer_name, older_name) = (newer.name_any(), older.name_any());
    if newer_name == older_name {
        return false;
    }
    if rolled_back_from(newer) == Some(older_name.as_str()) {
        return true;
    }
    newer.spec.replaces.as_deref() == Some(older_name.as_str())
        && rolled_back_from(older) != Some(newer_name.as_str())
}

/// The CSV of `csvs` that replaces `csv`, and the one `csv` replaces
/// ([`replaces`]). A CSV a rollback brought back has no CSV it replaces:
/// the one it came back from may have failed, and it installs beside it.
pub fn neighbours(
    csv: &ClusterServiceVersion,
    csvs: &[ClusterServiceVersion],
) -> (Option<Peer>, Option<Peer>) {
    let name = csv.name_any();
    let peer = |other: &ClusterServiceVersion| Peer {
        name: other.name_any(),
        phase: other.status.as_ref().and_then(|s| s.phase),
    };
    let mut replacements: Vec<&ClusterServiceVersion> =
        csvs.iter().filter(|other| replaces(other, csv)).collect();
    replacements.sort_by_key(|other| other.name_any());
    let replacement = replacements.first().map(|other| peer(other));
    let replaced = csv
        .spec
        .replaces
        .as_deref()
        .filter(|replaces| *replaces != name)
        .and_then(|replaces| csvs.iter().find(|other| other.name_any() == replaces))
        .filter(|older| replaces(csv, older))
        .map(peer);
    (replacement, replaced)
}

/// The names of the CSVs of `csvs` in `csv`'s upgrade chain (those it
/// replaces, transitively, and those that replace it), itself included.
pub fn replacement_chain(csv: &ClusterServiceVersion, csvs: &[ClusterServiceVersion]) -> BTreeSet<String> {
    let by_name: BTreeMap<String, &ClusterServiceVersion> = csvs.iter().map(|c| (c.name_any(), c)).collect();
    let mut chain = BTreeSet::from([csv.name_any()]);
    let mut previous = csv.spec.replaces.clone();
    while let Some(name) = previous {
        let Some(older) = by_name.get(&name) else { break };
        if !chain.insert(name) {
            break;
        }
        previous = older.spec.replaces.clone();
    }
    let mut current = csv.name_any();
    while let Some(newer) = csvs
        .iter()
        .find(|c| c.spec.replaces.as_deref() == Some(current.as_str()) && !chain.contains(&c.name_any()))
    {
        current = newer.name_any();
        chain.insert(current.clone());
    }
    chain
}

/// The owned CRDs of `csv` that a CSV of `csvs` outside its upgrade chain owns too.
pub fn crd_owner_conflicts(
    csv: &ClusterServiceVersion,
    csvs: &[ClusterServiceVersion],
) -> Vec<(String, String)> {
    let chain = replacement_chain(csv, csvs);
    let mut conflicts = Vec::new();
    for owned in csv.owned_crds() {
        for other in csvs.iter().filter(|other| !chain.contains(&other.name_any())) {
            if other.owned_crds().iter().any(|crd| crd.name == owned.name) {
                conflicts.push((owned.name.clone(), other.name_any()));
            }
        }
    }
    conflicts
}

/// Names of the owned and required CRDs.
pub fn crd_names(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    csv.owned_crds()
        .iter()
        .chain(csv.required_crds())
        .map(|crd| crd.name.clone())
        .collect()
}

fn service_account_names(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    let Some(details) = csv.spec.install.deployment() else {
        return BTreeSet::new();
    };
    details
        .permissions
        .iter()
        .flatten()
        .chain(details.cluster_permissions.iter().flatten())
        .map(|p| p.service_account_name.clone())
        .filter(|name| !name.is_empty())
        .collect()
}

fn deployment_names(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    csv.spec
        .install
        .deployment()
        .into_iter()
        .flat_map(|details| details.deployments.iter())
        .map(|d| d.name.clone())
        .filter(|name| !name.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(name: &str, replaces: Option<&str>, owns: &[&str]) -> ClusterServiceVersion {
        let owned: Vec<serde_json::Value> = owns
            .iter()
            .map(|crd| serde_json::json!({"name": crd, "version": "v1", "kind": "Thing"}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": "ops"},
            "spec": {
                "displayName": name,
                "replaces": replaces,
                "install": {"strategy": "deployment"},
                "customresourcedefinitions": {"owned": owned},
            },
        }))
        .expect("a valid CSV")
    }

    #[test]
    fn a_stored_crd_is_used_only_when_it_serves_what_the_csv_names() {
        let summary =
            |versions: serde_json::Value, established: &str| -> super::super::crd_summary::CrdSummary {
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": "things.example.com", "uid": "u-1"},
                    "spec": {"versions": versions},
                    "status": {"conditions": [{"type": "Established", "status": established},
                                              {"type": "NamesAccepted", "status": "True"}]},
                }))
                .expect("a CRD")
            };
        let stored = |crd| {
            let mut installs = InstallStores::empty();
            installs.crds = crate::stores::Cache::listed([crd]);
            installs
        };
        let owner = csv("a.v1", None, &["things.example.com"]);
        let served = stored(summary(
            serde_json::json!([{"name": "v1", "served": true}]),
            "True",
        ));
        let found = stored_crd(&served, &owner, "things.example.com").expect("from the store");
        assert_eq!(found.metadata.uid.as_deref(), Some("u-1"));
        // A store that lags behind a new version, or the CRD's establishment: read live.
        let older = stored(summary(
            serde_json::json!([{"name": "v1alpha1", "served": true}]),
            "True",
        ));
        assert!(stored_crd(&older, &owner, "things.example.com").is_none());
        let new = stored(summary(
            serde_json::json!([{"name": "v1", "served": true}]),
            "False",
        ));
        assert!(stored_crd(&new, &owner, "things.example.com").is_none());
        assert!(stored_crd(&InstallStores::empty(), &owner, "things.example.com").is_none());
    }

    #[test]
    fn the_upgrade_chain_runs_both_ways_and_stops_at_gaps_and_cycles() {
        let csvs = vec![
            csv("a.v1", None, &[]),
            csv("a.v2", Some("a.v1"), &[]),
            csv("a.v3", Some("a.v2"), &[]),
            csv("a.v5", Some("a.v4"), &[]),
            csv("loop.v1", Some("loop.v2"), &[]),
            csv("loop.v2", Some("loop.v1"), &[]),
        ];
        let chain = |name: &str| {
            let me = csvs.iter().find(|c| c.name_any() == name).expect("listed");
            replacement_chain(me, &csvs).into_iter().collect::<Vec<_>>()
        };
        assert_eq!(chain("a.v2"), ["a.v1", "a.v2", "a.v3"]);
        assert_eq!(chain("a.v5"), ["a.v5"]);
        assert_eq!(chain("loop.v1"), ["loop.v1", "loop.v2"]);
    }

    #[test]
    fn only_owners_outside_the_chain_conflict() {
        let csvs = vec![
            csv("a.v1", None, &["widgets.example.com"]),
            csv(
                "a.v2",
                Some("a.v1"),
                &["widgets.example.com", "gadgets.example.com"],
            ),
            csv("b.v1", None, &["gadgets.example.com"]),
        ];
        assert_eq!(
            crd_owner_conflicts(&csvs[1], &csvs),
            [("gadgets.example.com".to_owned(), "b.v1".to_owned())]
        );
        assert!(crd_owner_conflicts(&csvs[0], &csvs).is_empty());
    }

    #[test]
    fn neighbours_are_the_replaced_and_the_replacing_csv() {
        let mut newer = csv("a.v2", Some("a.v1"), &[]);
        newer.status = Some(olm_api::v1alpha1::ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Pending),
            ..Default::default()
        });
        let csvs = vec![csv("a.v1", None, &[]), newer];
        let (replacement, replaced) = neighbours(&csvs[0], &csvs);
        assert_eq!(
            replacement,
            Some(Peer {
                name: "a.v2".to_owned(),
                phase: Some(CsvPhase::Pending)
            })
        );
        assert_eq!(replaced, None);
        let (replacement, replaced) = neighbours(&csvs[1], &csvs);
        assert_eq!(
            (replacement, replaced.map(|p| p.name)),
            (None, Some("a.v1".to_owned()))
        );
    }

    #[test]
    fn a_csv_rolled_back_to_replaces_the_one_it_came_back_from() {
        let newer = csv("a.v2", Some("a.v1"), &[]);
        let mut older = csv("a.v1", None, &[]);
        older.annotations_mut().insert(
            olm_api::labels::revision::ROLLED_BACK_FROM.to_owned(),
            "a.v2".to_owned(),
        );
        let csvs = vec![older.clone(), newer.clone()];
        let names = |(replacement, replaced): (Option<Peer>, Option<Peer>)| {
            (replacement.map(|p| p.name), replaced.map(|p| p.name))
        };
        // The newer one steps aside for the older one; it replaces nothing now.
        assert_eq!(names(neighbours(&newer, &csvs)), (Some("a.v1".to_owned()), None));
        // The older one waits for nothing: the newer one may have failed.
        assert_eq!(names(neighbours(&older, &csvs)), (None, None));
        assert!(replaces(&older, &newer));
        assert!(!replaces(&newer, &older));
    }
}
