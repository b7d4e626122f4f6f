//! The `machine` install strategy: the operator runs as hooks on every
//! machine of a MachinePool, driven by the pool's agents.
//!
//! olm-operator treats such a CSV like a deployment CSV for OperatorGroup
//! membership, requirements and phases; in the cluster it builds only the
//! effective-config ConfigMap, and the install's health comes from the
//! Machines of the pool:
//! - requirements ([`requirements`]): the MachinePool exists; the hooks
//!   ConfigMap exists and has the required hooks (`install`, `start`);
//! - the effective config ([`effective_config`]): ConfigMap `<csv>-config`,
//!   owned by the CSV, labelled with the pool and the CSV, holding the CSV's
//!   default config overlaid with the `spec.config.env` of the Subscription
//!   that installed the CSV; the agents read config only from it;
//! - the peer relations ([`peer_relations`]): one Relation per `peers`
//!   endpoint the CSV declares, relating its application to itself, owned
//!   by the CSV, so that its units see each other through the relation's
//!   databags and hooks as through any other relation;
//! - health ([`health`]): ready when every ready machine of the pool reports
//!   the unit active at the CSV's version; waiting otherwise, with a message
//!   that names the machines in error and the lost machines. A CSV that stays
//!   waiting past the install timeout fails with InstallCheckFailed, and
//!   [`explain_timeout`] puts the machines in error into that message.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::ConfigMap},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
    jiff::Timestamp,
};
use kube::{
    Api, Resource, ResourceExt,
    api::ListParams,
    runtime::reflector::{ObjectRef, Store},
};
use olm_api::{
    endpoints::{Endpoints, Role},
    model::{ApplicationEndpoint, Relation, RelationSpec, application_of},
    substrate::{Machine, MachinePool, WorkloadState},
    v1alpha1::{
        ClusterServiceVersion, CsvPhase, CsvReason, MachineHook, RequirementStatus, StatusReason,
        StrategyDetailsMachine, Subscription,
    },
};
use olm_runtime::apply::WriteError;

use super::phase::{Health, Transition};
use crate::{
    context::Context,
    controllers::machinepool::{agent::POOL_LABEL, status as pool_status},
    stores::{Stores, in_namespace},
};

/// The label naming the application on the peer Relations olm-operator makes.
pub const PEERS_LABEL: &str = "model.olm-rs.dev/peers-of";

/// The name of the peer Relation of `application` on its `peers` endpoint `endpoint`.
pub fn peer_relation_name(application: &str, endpoint: &str) -> String {
    format!("{application}.{endpoint}.peers")
}

/// The peer Relations of `csv`: one per `peers` endpoint it declares, both of
/// whose sides are its application on that endpoint, owned by the CSV. A CSV
/// whose declaration cannot be read has none (its relations say why). Pure.
pub fn peer_relations(csv: &ClusterServiceVersion) -> Vec<Relation> {
    let name = csv.name_any();
    let Ok(Some(declared)) = Endpoints::of_annotations(&name, csv.annotations()) else {
        return Vec::new();
    };
    let application = application_of(&name, &csv.namespace().unwrap_or_default(), csv.labels());
    declared
        .iter()
        .filter(|(role, _)| *role == Role::Peers)
        .map(|(_, endpoint)| {
            let side = ApplicationEndpoint {
                application: application.clone(),
                endpoint: Some(endpoint.name.clone()),
                namespace: None,
            };
            let mut relation = Relation::new(
                &peer_relation_name(&application, &endpoint.name),
                RelationSpec {
                    endpoints: vec![side.clone(), side],
                },
            );
            relation.metadata.namespace = csv.namespace();
            relation.metadata.labels = Some(BTreeMap::from([(PEERS_LABEL.to_owned(), application.clone())]));
            relation.metadata.owner_references = csv.controller_owner_ref(&()).map(|owner| vec![owner]);
            relation
        })
        .collect()
}

/// Applies each of `csv`'s peer Relations that is missing or not as wanted.
async fn apply_peer_relations(ctx: &Context, csv: &ClusterServiceVersion) -> Result<(), Error> {
    let relations = Api::<Relation>::namespaced(ctx.client.clone(), &csv.namespace().unwrap_or_default());
    for relation in peer_relations(csv) {
        let name = relation.name_any();
        let live = relations
            .get_opt(&name)
            .await
            .map_err(read(csv, format!("Relation {name}")))?;
        let settled = live.is_some_and(|live| {
            live.spec == relation.spec && live.metadata.owner_references == relation.metadata.owner_references
        });
        if !settled {
            ctx.apply(&relations, &relation)
                .await
                .map_err(|source| Error::Write {
                    csv: csv.name_any(),
                    name: format!("Relation {name}"),
                    source,
                })?;
        }
    }
    Ok(())
}

/// The label naming the CSV on its effective-config ConfigMap.
pub const CSV_LABEL: &str = "substrate.olm-rs.dev/csv";

/// Why the machine strategy could not be looked at or applied.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the pool, the hooks, the Subscription, the Machines or Leases failed.
    #[error("failed to read {what} for ClusterServiceVersion {csv}")]
    Read {
        /// The CSV.
        csv: String,
        /// What was read.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Writing the effective-config ConfigMap or a peer Relation failed.
    #[error("failed to write {name} for ClusterServiceVersion {csv}")]
    Write {
        /// The CSV.
        csv: String,
        /// The object (kind and name).
        name: String,
        /// The cause.
        #[source]
        source: WriteError,
    },
}

impl Error {
    /// How to treat the error.
    pub fn class(&self) -> olm_runtime::ErrorClass {
        match self {
            Error::Read { source, .. } => olm_runtime::classify(source),
            Error::Write { source, .. } => source.class(),
        }
    }
}

fn read(csv: &ClusterServiceVersion, what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let (csv, what) = (csv.name_any(), what.into());
    move |source| Error::Read { csv, what, source }
}

/// The name of a CSV's effective-config ConfigMap.
pub fn config_map_name(csv: &str) -> String {
    format!("{csv}-config")
}

fn requirement(
    kind: &str,
    group: &str,
    name: &str,
    status: StatusReason,
    message: String,
) -> RequirementStatus {
    RequirementStatus {
        group: group.to_owned(),
        version: "v1alpha1".to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        status,
        message,
        uuid: None,
        dependents: None,
    }
}

/// The requirements of a machine CSV, from the pool and the hooks ConfigMap
/// as found (`None`: absent). Pure.
pub fn requirement_statuses(
    details: &StrategyDetailsMachine,
    pool: Option<&MachinePool>,
    hooks: Option<&ConfigMap>,
) -> Vec<RequirementStatus> {
    let pool_status = match pool {
        Some(_) => requirement(
            "MachinePool",
            olm_api::substrate::GROUP,
            &details.pool,
            StatusReason::Present,
            "MachinePool is present".to_owned(),
        ),
        None => requirement(
            "MachinePool",
            olm_api::substrate::GROUP,
            &details.pool,
            StatusReason::NotPresent,
            format!(
                "MachinePool {} does not exist in the CSV's namespace",
                details.pool
            ),
        ),
    };
    let name = &details.hooks.config_map;
    let mut hooks_status = requirement(
        "ConfigMap",
        "",
        name,
        StatusReason::Present,
        "hooks are present".to_owned(),
    );
    hooks_status.version = "v1".to_owned();
    match hooks {
        None => {
            hooks_status.status = StatusReason::NotPresent;
            hooks_status.message = format!("hooks ConfigMap {name} does not exist in the CSV's namespace");
        }
        Some(config_map) => {
            let data = config_map.data.clone().unwrap_or_default();
            let missing: Vec<&str> = MachineHook::REQUIRED
                .iter()
                .map(|hook| hook.as_str())
                .filter(|hook| data.get(*hook).is_none_or(|script| script.trim().is_empty()))
                .collect();
            if !missing.is_empty() {
                hooks_status.status = StatusReason::PresentNotSatisfied;
                hooks_status.message =
                    format!("hooks ConfigMap {name} has no {} hook", missing.join(" and no "));
            }
        }
    }
    vec![pool_status, hooks_status]
}

/// Reads the pool (from the shared store `pools`) and the hooks ConfigMap and
/// returns the requirement statuses.
pub async fn requirements(
    ctx: &Context,
    pools: &Store<MachinePool>,
    csv: &ClusterServiceVersion,
    details: &StrategyDetailsMachine,
) -> Result<Vec<RequirementStatus>, Error> {
    let namespace = csv.namespace().unwrap_or_default();
    let pool = pools.get(&ObjectRef::new(&details.pool).within(&namespace));
    // Read from the API server: no store can hold the hooks, as nothing
    // watches every ConfigMap of the cluster (their memory would dwarf the
    // operator's) and the hooks ConfigMap carries no label to select it by.
    let hooks = Api::<ConfigMap>::namespaced(ctx.client.clone(), &namespace)
        .get_opt(&details.hooks.config_map)
        .await
        .map_err(read(csv, format!("ConfigMap {}", details.hooks.config_map)))?;
    Ok(requirement_statuses(details, pool.as_deref(), hooks.as_ref()))
}

/// The effective config: the CSV's defaults overlaid with the Subscription's
/// `spec.config.env` (each `name` → `value`). Pure.
pub fn effective_config(
    details: &StrategyDetailsMachine,
    subscription: Option<&Subscription>,
) -> BTreeMap<String, String> {
    let mut config = details.config.clone().unwrap_or_default();
    let env = subscription
        .and_then(|s| s.spec.config.as_ref())
        .and_then(|c| c.env.as_ref());
    for var in env.into_iter().flatten() {
        config.insert(var.name.clone(), var.value.clone().unwrap_or_default());
    }
    config
}

/// The Subscription of `csv`: the one of its namespace whose installed or
/// current CSV it is.
fn subscription_of<'a>(
    subscriptions: impl IntoIterator<Item = &'a Subscription>,
    csv: &str,
) -> Option<&'a Subscription> {
    subscriptions.into_iter().find(|s| {
        s.status.as_ref().is_some_and(|status| {
            status.installed_csv.as_deref() == Some(csv) || status.current_csv.as_deref() == Some(csv)
        })
    })
}

/// The effective-config ConfigMap of `csv`. Pure.
pub fn config_map(
    csv: &ClusterServiceVersion,
    details: &StrategyDetailsMachine,
    data: BTreeMap<String, String>,
) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(config_map_name(&csv.name_any())),
            namespace: csv.namespace(),
            labels: Some(BTreeMap::from([
                (POOL_LABEL.to_owned(), details.pool.clone()),
                (CSV_LABEL.to_owned(), csv.name_any()),
            ])),
            owner_references: csv.controller_owner_ref(&()).map(|owner| vec![owner]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    }
}

/// The units of one machine for `csv`, as the install sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineView {
    /// The Machine's name.
    pub name: String,
    /// Its Lease expired.
    pub lost: bool,
    /// It reports Ready.
    pub ready: bool,
    /// The unit of the CSV on it, if any: (version, state, message).
    pub unit: Option<(String, WorkloadState, String)>,
    /// Its unit moved on to the CSV that replaces this one (an agent upgrades
    /// a unit to the newest CSV of the chain, even one it never installed).
    pub moved_on: bool,
}

/// How the install of `csv` (at `version`) is doing on `machines`. Pure.
///
/// A unit at the version that is `active`, or `blocked` (it waits for its
/// user: a relation to make, a setting to give, as Juju's units do), is
/// installed; one still in `maintenance` or `waiting` is not yet.
pub fn health(version: &str, machines: &[MachineView]) -> Health {
    let lost: Vec<&str> = machines
        .iter()
        .filter(|m| m.lost)
        .map(|m| m.name.as_str())
        .collect();
    let ready: Vec<&MachineView> = machines.iter().filter(|m| !m.lost && m.ready).collect();
    let mut errors = Vec::new();
    let mut pending = Vec::new();
    for machine in ready.iter().filter(|m| !m.moved_on) {
        match &machine.unit {
            Some((v, WorkloadState::Active | WorkloadState::Blocked, _)) if v == version => {}
            Some((_, WorkloadState::Error, message)) => errors.push(format!("{} ({message})", machine.name)),
            Some((v, state, message)) => pending.push(format!(
                "{} ({} at {v}{}{message})",
                machine.name,
                state_name(*state),
                if message.is_empty() { "" } else { ": " }
            )),
            None => pending.push(format!("{} (no unit yet)", machine.name)),
        }
    }
    if ready.is_empty() && lost.is_empty() {
        return Health::Waiting("no ready machine in the pool".to_owned());
    }
    let mut parts = Vec::new();
    if !errors.is_empty() {
        parts.push(format!("machines in error: {}", errors.join(", ")));
    }
    if !lost.is_empty() {
        parts.push(format!("machines lost (agent lost): {}", lost.join(", ")));
    }
    if !pending.is_empty() {
        parts.push(format!(
            "machines not active at {version}: {}",
            pending.join(", ")
        ));
    }
    if parts.is_empty() {
        Health::Ready
    } else {
        Health::Waiting(parts.join("; "))
    }
}

fn state_name(state: WorkloadState) -> &'static str {
    match state {
        WorkloadState::Active => "active",
        WorkloadState::Blocked => "blocked",
        WorkloadState::Maintenance => "maintenance",
        WorkloadState::Waiting => "waiting",
        WorkloadState::Error => "error",
    }
}

/// The views of the pool's `machines` for `csv` (replaced by `replacement`,
/// if any), at `now`. A machine with no unit of `csv` yet but a unit in
/// error on one of the CSVs `from` (those `csv` upgrades, or was rolled back
/// from: their units move to it) shows that unit: its failed `upgrade` is
/// what keeps `csv` waiting, and it is named. Pure.
pub fn views(
    csv: &str,
    from: &[&str],
    replacement: Option<&str>,
    machines: &[&Machine],
    leases: &BTreeMap<String, &Lease>,
    now: Timestamp,
) -> Vec<MachineView> {
    machines
        .iter()
        .map(|machine| {
            let name = machine.name_any();
            let units = machine.status.as_ref().and_then(|s| s.units.as_ref());
            let unit = units
                .and_then(|units| {
                    units.iter().find(|u| u.csv == csv).or_else(|| {
                        units
                            .iter()
                            .find(|u| u.state == WorkloadState::Error && from.contains(&u.csv.as_str()))
                    })
                })
                .map(|u| (u.version.clone(), u.state, u.message.clone().unwrap_or_default()));
            let moved_on = replacement
                .is_some_and(|next| units.is_some_and(|units| units.iter().any(|u| u.csv == next)));
            MachineView {
                moved_on,
                lost: pool_status::is_lost(machine, leases.get(&name).copied(), now),
                ready: pool_status::reports_ready(machine),
                name,
                unit,
            }
        })
        .collect()
}

/// Writes the effective-config ConfigMap (when it changed) and returns how
/// the install is doing on the pool's machines. The Subscriptions and
/// Machines come from the shared `stores`; the ConfigMap is read by name
/// (no store keeps ConfigMaps) and the Leases are listed when it runs, as
/// the MachinePool controller does: a watch would bring every renewal of
/// every Lease of the cluster.
pub async fn install(
    ctx: &Context,
    stores: &Stores,
    csv: &ClusterServiceVersion,
    details: &StrategyDetailsMachine,
    replacement: Option<&str>,
) -> Result<Health, Error> {
    let namespace = csv.namespace().unwrap_or_default();
    let client = ctx.client.clone();
    let subscriptions = in_namespace(&stores.subscriptions.store, &namespace);
    let subscription = subscription_of(subscriptions.iter().map(AsRef::as_ref), &csv.name_any());
    let data = effective_config(details, subscription);
    let name = config_map_name(&csv.name_any());
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), &namespace);
    let current = config_maps
        .get_opt(&name)
        .await
        .map_err(read(csv, format!("ConfigMap {name}")))?;
    if current.and_then(|c| c.data) != Some(data.clone()) {
        ctx.apply(&config_maps, &config_map(csv, details, data))
            .await
            .map_err(|source| Error::Write {
                csv: csv.name_any(),
                name: format!("ConfigMap {name}"),
                source,
            })?;
    }
    apply_peer_relations(ctx, csv).await?;

    let machines = in_namespace(&stores.machines.store, &namespace);
    let machines: Vec<&Machine> = machines
        .iter()
        .map(AsRef::as_ref)
        .filter(|m| m.spec.pool == details.pool)
        .collect();
    let leases = Api::<Lease>::namespaced(client, &namespace)
        .list(&ListParams::default())
        .await
        .map_err(read(csv, "the Leases of its namespace"))?;
    let leases: BTreeMap<String, &Lease> = leases.items.iter().map(|l| (l.name_any(), l)).collect();
    let version = csv.spec.version.clone().unwrap_or_default();
    let pool = stores
        .installs
        .machine_pools
        .store
        .get(&ObjectRef::new(&details.pool).within(&namespace));
    let application = application_of(&csv.name_any(), &namespace, csv.labels());
    let placed = placed_machines(pool.as_deref(), &application);
    let from = moving_from(csv);
    let views: Vec<MachineView> = views(
        &csv.name_any(),
        &from.iter().map(String::as_str).collect::<Vec<_>>(),
        replacement,
        &machines,
        &leases,
        olm_runtime::conditions::now().0,
    )
    .into_iter()
    .filter(|view| placed.as_ref().is_none_or(|placed| placed.contains(&view.name)))
    .collect();
    Ok(health(&version, &views))
}

/// The CSVs whose units move to `csv`: those it replaces or skips, and the
/// one a rollback brought it back from. Pure.
pub fn moving_from(csv: &ClusterServiceVersion) -> Vec<String> {
    let mut from: Vec<String> = csv.spec.replaces.iter().cloned().collect();
    from.extend(csv.spec.skips.iter().flatten().cloned());
    from.extend(super::dereference::rolled_back_from(csv).map(ToOwned::to_owned));
    from
}

/// The machines `pool` places the units of `application` on, when its
/// `spec.units` scales the application (none yet, before olm-operator placed
/// them for the pool's current spec); `None` when every machine of the pool
/// runs a unit. Only those count for the install's health. Pure.
pub fn placed_machines(pool: Option<&MachinePool>, application: &str) -> Option<Vec<String>> {
    let pool = pool?;
    pool.spec.units.as_ref()?.get(application)?;
    let placement = pool
        .status
        .as_ref()
        .filter(|s| s.observed_generation.is_some() && s.observed_generation == pool.metadata.generation)
        .and_then(|s| s.applications.as_ref())
        .and_then(|all| all.iter().find(|a| a.application == application));
    Some(placement.map(|p| p.machines.clone()).unwrap_or_default())
}

/// The CSVs of `namespace` with a `machine` strategy on `pool` (for a
/// change of one of the pool's Machines).
pub fn of_pool(
    store: &kube::runtime::reflector::Store<ClusterServiceVersion>,
    namespace: &str,
    pool: &str,
) -> Vec<kube::runtime::reflector::ObjectRef<ClusterServiceVersion>> {
    store
        .state()
        .iter()
        .filter(|csv| csv.meta().namespace.as_deref() == Some(namespace))
        .filter(|csv| csv.spec.install.machine().is_some_and(|d| d.pool == pool))
        .map(|csv| kube::runtime::reflector::ObjectRef::from_obj(csv.as_ref()))
        .collect()
}

/// The machine CSV a Subscription installed (for a change of its config).
pub fn of_subscription(
    store: &kube::runtime::reflector::Store<ClusterServiceVersion>,
    subscription: &Subscription,
) -> Vec<kube::runtime::reflector::ObjectRef<ClusterServiceVersion>> {
    let namespace = subscription.meta().namespace.clone().unwrap_or_default();
    let names: Vec<&str> = subscription
        .status
        .iter()
        .flat_map(|s| [s.installed_csv.as_deref(), s.current_csv.as_deref()])
        .flatten()
        .collect();
    store
        .state()
        .iter()
        .filter(|csv| csv.meta().namespace.as_deref() == Some(namespace.as_str()))
        .filter(|csv| csv.spec.install.machine().is_some() && names.contains(&csv.name_any().as_str()))
        .map(|csv| kube::runtime::reflector::ObjectRef::from_obj(csv.as_ref()))
        .collect()
}

/// How soon a machine CSV whose pool or hooks are missing looks again (no
/// watch covers every ConfigMap of the cluster).
pub const REQUIREMENTS_RECHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// A timeout of a machine install names what kept it waiting (the machines in
/// error, lost, or not active yet).
pub fn explain_timeout(transition: Option<Transition>, health: &Health) -> Option<Transition> {
    match (transition, health) {
        (Some(mut t), Health::Waiting(why))
            if t.phase == CsvPhase::Failed && t.reason == CsvReason::InstallCheckFailed =>
        {
            t.message = format!("install timeout: {why}");
            Some(t)
        }
        (transition, _) => transition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1alpha1::MachineHooks;

    fn details() -> StrategyDetailsMachine {
        StrategyDetailsMachine {
            pool: "edge".to_owned(),
            hooks: MachineHooks {
                config_map: "demo-hooks".to_owned(),
            },
            config: Some(BTreeMap::from([
                ("port".to_owned(), "8080".to_owned()),
                ("greeting".to_owned(), "hello".to_owned()),
            ])),
            hook_timeout_seconds: None,
            update_status_interval_seconds: None,
            privileged: false,
        }
    }

    fn hooks(keys: &[&str]) -> ConfigMap {
        ConfigMap {
            data: Some(
                keys.iter()
                    .map(|k| ((*k).to_owned(), "#!/bin/sh\ntrue\n".to_owned()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn a_missing_pool_and_a_missing_hook_are_named() {
        let statuses = requirement_statuses(&details(), None, Some(&hooks(&["install"])));
        assert_eq!(statuses[0].status, StatusReason::NotPresent);
        assert!(statuses[0].message.contains("MachinePool edge"));
        assert_eq!(statuses[1].status, StatusReason::PresentNotSatisfied);
        assert_eq!(
            statuses[1].message,
            "hooks ConfigMap demo-hooks has no start hook"
        );

        let statuses = requirement_statuses(&details(), None, None);
        assert!(
            statuses[1].message.contains("demo-hooks does not exist"),
            "{}",
            statuses[1].message
        );
    }

    #[test]
    fn complete_hooks_and_an_existing_pool_are_present() {
        let pool: MachinePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
            "metadata": {"name": "edge"}, "spec": {"agent": {"image": "a", "version": "1"}},
        }))
        .expect("a pool");
        let statuses = requirement_statuses(&details(), Some(&pool), Some(&hooks(&["install", "start"])));
        assert!(
            statuses.iter().all(|s| s.status == StatusReason::Present),
            "{statuses:?}"
        );
    }

    #[test]
    fn the_subscription_env_overlays_the_default_config() {
        let subscription: Subscription = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "demo", "namespace": "ops"},
            "spec": {"name": "demo", "source": "cat", "sourceNamespace": "olm",
                     "config": {"env": [{"name": "port", "value": "9090"}, {"name": "extra", "value": "x"}]}},
            "status": {"installedCSV": "demo.v1.0.0"},
        }))
        .expect("a subscription");
        let found = subscription_of([&subscription], "demo.v1.0.0");
        let config = effective_config(&details(), found);
        assert_eq!(config.get("port").map(String::as_str), Some("9090"));
        assert_eq!(config.get("greeting").map(String::as_str), Some("hello"));
        assert_eq!(config.get("extra").map(String::as_str), Some("x"));
        assert!(subscription_of([&subscription], "other.v1").is_none());
    }

    fn view(name: &str, lost: bool, ready: bool, unit: Option<(&str, WorkloadState, &str)>) -> MachineView {
        MachineView {
            name: name.to_owned(),
            lost,
            ready,
            unit: unit.map(|(v, s, m)| (v.to_owned(), s, m.to_owned())),
            moved_on: false,
        }
    }

    #[test]
    fn every_ready_machine_active_at_the_version_is_ready() {
        let machines = [
            view("edge-a", false, true, Some(("1.0.0", WorkloadState::Active, ""))),
            view(
                "edge-b",
                false,
                true,
                Some(("1.0.0", WorkloadState::Active, "serving")),
            ),
            // Not ready (registering): does not hold the install back.
            view("edge-c", false, false, None),
        ];
        assert_eq!(health("1.0.0", &machines), Health::Ready);
        assert!(
            matches!(health("1.1.0", &machines), Health::Waiting(m) if m.contains("edge-a (active at 1.0.0"))
        );
    }

    #[test]
    fn machines_in_error_and_lost_machines_are_named() {
        let machines = [
            view(
                "edge-a",
                false,
                true,
                Some(("1.0.0", WorkloadState::Error, "hook install failed: exit 3")),
            ),
            view("edge-b", true, true, Some(("1.0.0", WorkloadState::Active, ""))),
        ];
        let Health::Waiting(message) = health("1.0.0", &machines) else {
            panic!("not ready");
        };
        assert!(
            message.contains("machines in error: edge-a (hook install failed: exit 3)"),
            "{message}"
        );
        assert!(
            message.contains("machines lost (agent lost): edge-b"),
            "{message}"
        );
        let timeout = Transition {
            phase: CsvPhase::Failed,
            reason: CsvReason::InstallCheckFailed,
            message: "install timeout".to_owned(),
        };
        let explained = explain_timeout(Some(timeout), &Health::Waiting(message)).expect("a transition");
        assert!(
            explained
                .message
                .starts_with("install timeout: machines in error: edge-a"),
            "{}",
            explained.message
        );
    }

    #[test]
    fn a_unit_blocked_on_its_user_is_installed_and_one_still_working_is_not() {
        let blocked = view(
            "edge-a",
            false,
            true,
            Some(("1.0.0", WorkloadState::Blocked, "needs a database")),
        );
        assert_eq!(health("1.0.0", std::slice::from_ref(&blocked)), Health::Ready);
        // Blocked at an older version: not upgraded yet.
        assert!(matches!(health("1.1.0", &[blocked]), Health::Waiting(_)));
        for state in [WorkloadState::Maintenance, WorkloadState::Waiting] {
            let working = view("edge-a", false, true, Some(("1.0.0", state, "installing")));
            assert!(
                matches!(health("1.0.0", &[working]), Health::Waiting(m) if m.contains("edge-a (")),
                "{state:?}"
            );
        }
    }

    #[test]
    fn a_unit_whose_upgrade_to_the_csv_failed_is_named() {
        let machine = |units: serde_json::Value| -> Machine {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
                "metadata": {"name": "edge-b", "namespace": "ns"},
                "spec": {"pool": "edge"},
                "status": {"units": units},
            }))
            .expect("a Machine")
        };
        let failed = machine(
            serde_json::json!([{"csv": "demo.v2", "version": "2.0.0", "state": "error",
            "message": "upgrade hook failed (exit status: 2)"}]),
        );
        let settled = machine(serde_json::json!([{"csv": "demo.v2", "version": "2.0.0", "state": "active"}]));
        let now = Timestamp::from_second(1_800_000_000).expect("a time");
        let leases = BTreeMap::new();
        /// (what, the machine, the CSVs whose units move to demo.v1, the unit seen)
        type Case<'a> = (
            &'a str,
            &'a Machine,
            &'a [&'a str],
            Option<(&'a str, WorkloadState)>,
        );
        let cases: &[Case] = &[
            (
                "rolled back from demo.v2: its failed unit is named",
                &failed,
                &["demo.v2"],
                Some(("2.0.0", WorkloadState::Error)),
            ),
            ("an unrelated CSV's failure is not", &failed, &["demo.v0"], None),
            (
                "a unit not in error has not moved yet",
                &settled,
                &["demo.v2"],
                None,
            ),
        ];
        for (what, machine, from, want) in cases {
            let seen = views("demo.v1", from, None, &[*machine], &leases, now);
            let unit = seen[0].unit.as_ref().map(|(v, s, _)| (v.as_str(), *s));
            assert_eq!(unit, *want, "{what}");
        }
        let seen = views("demo.v1", &["demo.v2"], None, &[&failed], &leases, now);
        let mut ready = seen[0].clone();
        ready.ready = true;
        let Health::Waiting(message) = health("1.0.0", &[ready]) else {
            panic!("not ready");
        };
        assert!(
            message.contains("machines in error: edge-b (upgrade hook failed (exit status: 2))"),
            "{message}"
        );
    }

    #[test]
    fn units_moved_on_to_the_replacing_csv_do_not_hold_the_replaced_one() {
        let mut moved = view("edge-a", false, true, None);
        moved.moved_on = true;
        assert_eq!(health("1.0.0", &[moved]), Health::Ready);
    }

    #[test]
    fn a_pool_without_ready_machines_waits() {
        assert_eq!(
            health("1.0.0", &[]),
            Health::Waiting("no ready machine in the pool".to_owned())
        );
    }

    #[test]
    fn only_the_placed_machines_of_a_scaled_application_count() {
        let pool = |units: serde_json::Value, generation: i64, status: serde_json::Value| -> MachinePool {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
                "metadata": {"name": "edge", "namespace": "ns", "generation": generation},
                "spec": {"agent": {"image": "a", "version": "1"}, "units": units},
                "status": status,
            }))
            .expect("a MachinePool")
        };
        let placed = serde_json::json!({"observedGeneration": 2, "applications": [
            {"application": "demo", "desiredUnits": 1, "units": 1, "machines": ["m2"]}]});
        /// (what, the pool, the machines placed)
        type Case<'a> = (&'a str, Option<MachinePool>, Option<Vec<String>>);
        let cases: &[Case] = &[
            ("no pool", None, None),
            (
                "not scaled",
                Some(pool(serde_json::json!({"other": 1}), 2, placed.clone())),
                None,
            ),
            (
                "placed",
                Some(pool(serde_json::json!({"demo": 1}), 2, placed.clone())),
                Some(vec!["m2".into()]),
            ),
            (
                "placed for an older spec",
                Some(pool(serde_json::json!({"demo": 1}), 3, placed)),
                Some(vec![]),
            ),
            (
                "no status yet",
                Some(pool(serde_json::json!({"demo": 1}), 1, serde_json::json!(null))),
                Some(vec![]),
            ),
        ];
        for (what, pool, want) in cases {
            assert_eq!(placed_machines(pool.as_ref(), "demo"), *want, "{what}");
        }
    }

    #[test]
    fn each_peers_endpoint_gives_a_peer_relation_owned_by_the_csv() {
        let csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "db.v1", "namespace": "ns", "uid": "uid-db",
                         "labels": {"operators.coreos.com/db.ns": ""},
                         "annotations": {"olm-rs.dev/endpoints":
                            "provides: {db: {interface: pg}}\npeers: {ring: {interface: db-ring}, gossip: {interface: g}}"}},
            "spec": {"displayName": "db", "install": {"strategy": "machine", "spec": {
                "pool": "edge", "hooks": {"configMap": "hooks"}}}},
        }))
        .expect("a CSV");
        let relations = peer_relations(&csv);
        let mut names: Vec<String> = relations.iter().map(ResourceExt::name_any).collect();
        names.sort();
        assert_eq!(names, ["db.gossip.peers", "db.ring.peers"]);
        let ring = relations
            .iter()
            .find(|r| r.name_any() == "db.ring.peers")
            .expect("the ring relation");
        assert_eq!(ring.namespace().as_deref(), Some("ns"));
        assert_eq!(ring.spec.endpoints.len(), 2);
        assert_eq!(ring.spec.endpoints[0], ring.spec.endpoints[1]);
        assert_eq!(ring.spec.endpoints[0].application, "db");
        assert_eq!(ring.spec.endpoints[0].endpoint.as_deref(), Some("ring"));
        assert_eq!(ring.labels()[PEERS_LABEL], "db");
        assert_eq!(ring.owner_references()[0].uid, "uid-db");
        // No declaration, or no peers endpoint: none.
        let mut plain = csv.clone();
        plain.annotations_mut().clear();
        assert!(peer_relations(&plain).is_empty());
    }
}
