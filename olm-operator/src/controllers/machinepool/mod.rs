//! The MachinePool controller: runs a pool's agent and reports its machines.
//!
//! For a pool with a node selector it applies the agent's ServiceAccount,
//! Role, RoleBinding and DaemonSet ([`agent`]). For every pool it reads the
//! pool's Machines, their heartbeat Leases and the nodes its selector
//! matches, marks the machines whose Lease expired as lost (their `Ready`
//! condition `Unknown`, reason `AgentLost`, the only field olm-operator
//! writes on a Machine), and writes the pool's status ([`status`]) with the
//! API server endpoints agents fail over between: those the `kubernetes`
//! EndpointSlices list ([`olm_runtime::endpoints::from_slices`], as the agents
//! read them), then those given with `--apiserver-endpoints`, for servers the
//! slices do not list (two servers on one address with different ports, as on
//! the test control plane).
//!
//! For a pool with `spec.external` it keeps the pool's join token and gives
//! each machine that joins with it its own credentials ([`join`]); a machine
//! that registered with a used token is refused and named in the pool's
//! status, and counted nowhere else.
//!
//! A reconcile has the three steps of every reconciler: it *reads* the shared
//! stores ([`PoolStores`]: Machines, Nodes, the agent DaemonSets, the
//! `kubernetes` EndpointSlices, and the metadata of the ServiceAccounts,
//! Roles, RoleBindings and Secrets made for pools), *decides* in
//! [`decide::decide`] (pure), and *applies* the decision through the
//! runtime's applier, which skips every object whose live copy in those
//! stores already carries the desired hash. Three things stay live calls:
//! - the Leases of the pool's namespace, listed when the reconcile runs:
//!   agents renew them every few seconds, and a watch would bring every
//!   renewal of every Lease of the cluster (node Leases included, which no
//!   label tells apart) to olm-operator; instead the pool is looked at again
//!   when its next machine would turn lost;
//! - the pool's join token Secret, read by name: the pool may name a Secret
//!   olm-operator did not make, which no label-selected store holds, and a
//!   store of every Secret of the cluster would keep every Secret in memory;
//! - a join token's renewal ([`join::renew`]): the new token is issued by the
//!   API server for a Secret that must exist first, so it is a sequence of
//!   requests, not an object to apply.
//!
//! A reconcile is triggered by the pool, its DaemonSet, its Machines, node
//! changes and the `kubernetes` EndpointSlices (wired in [`crate::watches`]),
//! and runs again when the next machine's Lease would expire, so a machine is
//! marked lost within one lease duration without watching every Lease of the
//! cluster.

pub mod agent;
pub mod decide;
pub mod error;
pub mod join;
pub mod placement;
pub mod status;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Secret};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::ListParams,
    runtime::{
        controller::Action,
        reflector::{ObjectRef, Store},
    },
};
use olm_api::substrate::{Machine, MachinePool};
use olm_runtime::effects::{Effects, Live};

pub use self::error::Error;
use self::{
    decide::{Decision, Read},
    error::{read_error, write_error},
};
use crate::{
    context::Context,
    stores::{PoolStores, in_namespace},
};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "machinepool";

/// How soon a pool is looked at again while the stores have not synced yet.
const UNTIL_SYNCED: Duration = Duration::from_secs(1);

/// Reconciles one MachinePool from the shared `stores`: reads, decides,
/// applies, and looks again when the next machine would turn lost.
pub async fn reconcile(
    pool: Arc<MachinePool>,
    ctx: Arc<Context>,
    stores: PoolStores,
) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if !ctx.is_leader() {
        return Ok(Action::await_change());
    }
    if !stores.synced() {
        // An unsynced store would read as "no machines, no nodes".
        return Ok(Action::requeue(UNTIL_SYNCED));
    }
    let namespace = pool.namespace().ok_or(Error::NoNamespace)?;
    let name = pool.name_any();

    // Read: the stores, the Leases and the join token Secret (see the module docs).
    let machines: Vec<Arc<Machine>> = in_namespace(&stores.machines.store, &namespace)
        .into_iter()
        .filter(|m| m.spec.pool == name)
        .collect();
    let leases = Api::<Lease>::namespaced(ctx.client.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .map_err(read_error(&name, "the Leases of its namespace"))?;
    let join_secret = join_secret(&ctx.client, &pool).await?;
    let daemonset = stores
        .daemonsets
        .store
        .get(&ObjectRef::new(&agent::agent_name(&name)).within(&namespace));
    let slices = stores.endpoint_slices.store.state();
    let read = Read {
        matching_nodes: matching_nodes(&stores, &pool),
        machines: machines.iter().map(AsRef::as_ref).collect(),
        leases: leases.items.iter().map(|l| (l.name_any(), l)).collect(),
        daemonset: daemonset.as_deref(),
        endpoints: olm_runtime::endpoints::merge(
            olm_runtime::endpoints::from_slices(slices.iter().map(AsRef::as_ref)),
            &ctx.settings.apiserver_endpoints,
        ),
        join_secret: join_secret.as_ref(),
        credentials: credentials(&stores, &namespace, &name),
        zones: zones(&stores, &machines),
        now: olm_runtime::conditions::now(),
        resync: ctx.settings.resync,
    };

    // Decide, then apply.
    let decision = decide::decide(&pool, &read)?;
    let requeue = decision.requeue;
    perform(&ctx, &pool, decision, join_secret.as_ref(), &stores.live()).await?;
    Ok(Action::requeue(requeue))
}

/// Performs `decision` for `pool`: the objects, the join token's renewal,
/// the machines' conditions, and the pool's status last.
async fn perform(
    ctx: &Context,
    pool: &MachinePool,
    decision: Decision,
    join_secret: Option<&Secret>,
    live: &(dyn Live + Sync),
) -> Result<(), Error> {
    let (name, namespace) = (pool.name_any(), pool.namespace().unwrap_or_default());
    let pools: Api<MachinePool> = Api::namespaced(ctx.client.clone(), &namespace);
    let Effects {
        objects,
        statuses,
        removals,
        status,
    } = decision.effects;
    let objects: Effects<olm_api::substrate::MachinePoolStatus> = Effects {
        objects,
        statuses,
        removals,
        status: None,
    };
    ctx.writer
        .perform(&ctx.client, &pools, &objects, live)
        .await
        .map_err(write_error(&name, "its agent and join objects"))?;
    if let (Some(renewal), Some(external)) = (decision.renew, pool.spec.external.as_ref()) {
        join::renew(ctx, pool, &external.token_secret_name, join_secret, renewal).await?;
    }
    let machines: Api<Machine> = Api::namespaced(ctx.client.clone(), &namespace);
    for mark in decision.machines {
        let what = format!("the Ready condition of Machine {}", mark.name);
        let effects = Effects {
            status: Some(mark),
            ..Effects::none()
        };
        ctx.writer
            .perform(&ctx.client, &machines, &effects, live)
            .await
            .map_err(write_error(&name, &what))?;
        tracing::warn!(pool = %name, %namespace, "{what} written: lost or refused");
    }
    let Some(status) = status else {
        return Ok(());
    };
    let (ready, lost) = (status.status.ready_machines, status.status.lost_machines);
    let effects = Effects {
        status: Some(status),
        ..Effects::none()
    };
    ctx.writer
        .perform(&ctx.client, &pools, &effects, live)
        .await
        .map_err(write_error(&name, "its status"))?;
    tracing::info!(pool = %name, %namespace, ?ready, ?lost, "MachinePool status updated");
    Ok(())
}

/// The names of the nodes the pool's node selector matches; `None` without a
/// selector.
fn matching_nodes(stores: &PoolStores, pool: &MachinePool) -> Option<BTreeSet<String>> {
    let selector = pool.spec.node_selector.as_ref()?;
    let nodes = stores.nodes.store.state();
    let matches = |labels: &BTreeMap<String, String>| selector.iter().all(|(k, v)| labels.get(k) == Some(v));
    Some(
        nodes
            .iter()
            .filter(|node| matches(node.labels()))
            .map(|node| node.name_any())
            .collect(),
    )
}

/// The zone of each of `machines` whose node carries
/// [`placement::ZONE_LABEL`], or, for a machine joined from outside, whose
/// Machine does.
fn zones(stores: &PoolStores, machines: &[Arc<Machine>]) -> BTreeMap<String, String> {
    machines
        .iter()
        .filter_map(|machine| {
            let zone = match &machine.spec.node_name {
                Some(node) => stores
                    .nodes
                    .store
                    .get(&ObjectRef::new(node))
                    .and_then(|n| n.labels().get(placement::ZONE_LABEL).cloned()),
                None => machine.labels().get(placement::ZONE_LABEL).cloned(),
            }?;
            Some((machine.name_any(), zone))
        })
        .collect()
}

/// The names of the credentials Secrets of the joined machines of pool `name`.
fn credentials(stores: &PoolStores, namespace: &str, name: &str) -> BTreeSet<String> {
    in_namespace(&stores.secrets.store, namespace)
        .iter()
        .filter(|secret| {
            let labels = secret.labels();
            labels.get(agent::POOL_LABEL).map(String::as_str) == Some(name)
                && labels.contains_key(join::MACHINE_LABEL)
        })
        .map(|secret| secret.name_any())
        .collect()
}

/// The join token Secret a pool with `spec.external` names, if it exists.
/// Read by name, not from a store: see the module docs.
async fn join_secret(client: &Client, pool: &MachinePool) -> Result<Option<Secret>, Error> {
    let Some(external) = pool.spec.external.as_ref() else {
        return Ok(None);
    };
    Api::<Secret>::namespaced(client.clone(), &pool.namespace().unwrap_or_default())
        .get_opt(&external.token_secret_name)
        .await
        .map_err(read_error(&pool.name_any(), "its join token Secret"))
}

/// What to do after a failed reconcile.
pub fn error_policy(pool: Arc<MachinePool>, error: &Error, ctx: Arc<Context>) -> Action {
    olm_runtime::error_policy(CONTROLLER, pool.as_ref(), error, &ctx.metrics.runtime().reconcile)
}

/// Every pool with a node selector (for a node's change).
pub fn with_selector(store: &Store<MachinePool>) -> Vec<ObjectRef<MachinePool>> {
    store
        .state()
        .iter()
        .filter(|pool| pool.spec.node_selector.is_some())
        .map(|pool| ObjectRef::from_obj(pool.as_ref()))
        .collect()
}

/// Every pool (for a change of the API server endpoints).
pub fn all(store: &Store<MachinePool>) -> Vec<ObjectRef<MachinePool>> {
    store
        .state()
        .iter()
        .map(|pool| ObjectRef::from_obj(pool.as_ref()))
        .collect()
}

/// The pool a Machine belongs to.
pub fn of_machine(machine: &Machine) -> Option<ObjectRef<MachinePool>> {
    let namespace = machine.meta().namespace.as_deref()?;
    Some(ObjectRef::new(&machine.spec.pool).within(namespace))
}

#[cfg(test)]
mod tests;
