//! The MachinePool controller: runs a pool's agent and reports its machines.
//!
//! For a pool with a node selector it applies the agent's ServiceAccount,
//! Role, RoleBinding and DaemonSet ([`agent`]). For every pool it reads the
//! pool's Machines, their heartbeat Leases and the nodes its selector
//! matches, marks the machines whose Lease expired as lost (their `Ready`
//! condition `Unknown`, reason `AgentLost`, the only field olm-operator
//! writes on a Machine), and writes the pool's status ([`status`]) with the
//! API server endpoints agents fail over between ([`endpoints`]).
//!
//! A reconcile is triggered by the pool, its DaemonSet, its Machines and
//! node changes (wired in [`crate::watches`]), and runs again when the next
//! machine's Lease would expire, so a machine is marked lost within one lease
//! duration without watching every Lease of the cluster.
//!
//! For a pool with `spec.external` it keeps the pool's join token and gives
//! each machine that joins with it its own credentials ([`join`]); a machine
//! that registered with a used token is refused and named in the pool's
//! status, and counted nowhere else.

pub mod account;
pub mod agent;
pub mod endpoints;
pub mod error;
pub mod join;
pub mod status;

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::{apps::v1::DaemonSet, coordination::v1::Lease, core::v1::Node};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::ListParams,
    core::PartialObjectMeta,
    runtime::{controller::Action, reflector::ObjectRef},
};
use olm_api::substrate::{Machine, MachinePool};

pub use self::error::Error;
use self::{
    account::apply_account,
    error::{read_error, write_error},
    status::Observed,
};
use crate::context::Context;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "machinepool";

/// Reconciles one MachinePool: applies its agent, reads its machines, marks
/// the lost ones, writes its status and looks again when the next machine
/// would turn lost.
pub async fn reconcile(pool: Arc<MachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if !ctx.is_leader() {
        return Ok(Action::await_change());
    }
    let namespace = pool.namespace().ok_or(Error::NoNamespace)?;
    let name = pool.name_any();
    let read = |what: &str| read_error(&name, what);
    let client = ctx.client.clone();

    let daemonset = apply_agent(&ctx, &pool, &namespace).await?;
    let matching_nodes = matching_nodes(&client, &pool)
        .await
        .map_err(read("the nodes its selector matches"))?;
    let machines = Api::<Machine>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .map_err(read("its Machines"))?;
    let machines: Vec<&Machine> = machines.items.iter().filter(|m| m.spec.pool == name).collect();
    let leases = Api::<Lease>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .map_err(read("the Leases of its namespace"))?;
    let leases: BTreeMap<String, &Lease> = leases.items.iter().map(|l| (l.name_any(), l)).collect();

    // Machines joining from outside: refused ones count nowhere but in Degraded.
    let lease_names = leases.keys().cloned().collect();
    let joins = join::reconcile(&ctx, &pool, &machines, &lease_names).await?;
    let machines = machines
        .into_iter()
        .filter(|m| !joins.refused.contains_key(&m.name_any()))
        .collect();

    let observed = Observed {
        matching_nodes,
        machines,
        refused: joins.refused,
        leases,
        daemonset: daemonset.as_ref(),
        endpoints: endpoints::discover(&client, &ctx.settings.apiserver_endpoints).await,
    };
    let now = olm_runtime::conditions::now();
    mark_lost(&ctx, &pool, &observed, &now).await?;
    write_status(&ctx, &pool, &status::compute(&pool, &observed, &now)).await?;

    let resync = if joins.admitting {
        join::ADMITTING_RECHECK
    } else {
        ctx.settings.resync
    };
    Ok(Action::requeue(status::requeue_after(&observed, now.0, resync)))
}

/// Applies the agent's account and DaemonSet, for pools of cluster nodes
/// (those with a node selector); returns the DaemonSet as applied.
async fn apply_agent(ctx: &Context, pool: &MachinePool, namespace: &str) -> Result<Option<DaemonSet>, Error> {
    let Some(daemonset) = agent::daemonset(pool) else {
        return Ok(None);
    };
    let name = pool.name_any();
    let account = (
        agent::service_account(pool),
        agent::role(pool),
        agent::role_binding(pool),
    );
    apply_account(ctx, &name, &account, "agent").await?;
    let applied = ctx
        .apply(&Api::namespaced(ctx.client.clone(), namespace), &daemonset)
        .await
        .map_err(write_error(&name, "the agent DaemonSet"))?;
    Ok(Some(applied))
}

/// The names of the nodes the pool's node selector matches; `None` without a
/// selector.
async fn matching_nodes(
    client: &Client,
    pool: &MachinePool,
) -> Result<Option<std::collections::BTreeSet<String>>, kube::Error> {
    let Some(selector) = pool.spec.node_selector.as_ref() else {
        return Ok(None);
    };
    let labels = selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let nodes = Api::<PartialObjectMeta<Node>>::all(client.clone())
        .list_metadata(&ListParams::default().labels(&labels))
        .await?;
    Ok(Some(nodes.items.iter().map(ResourceExt::name_any).collect()))
}

/// Marks the machines lost whose Lease expired: only their `Ready`
/// condition, forced, as the contract allows.
async fn mark_lost(
    ctx: &Context,
    pool: &MachinePool,
    observed: &Observed<'_>,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Result<(), Error> {
    let (name, namespace) = (pool.name_any(), pool.namespace().unwrap_or_default());
    let api = Api::<Machine>::namespaced(ctx.client.clone(), &namespace);
    for (machine, condition) in status::newly_lost(observed, now) {
        let body = serde_json::json!({ "conditions": [condition] });
        ctx.apply_status(&api, &machine.name_any(), &body)
            .await
            .map_err(write_error(
                &name,
                &format!("the lost condition of Machine {}", machine.name_any()),
            ))?;
        tracing::warn!(pool = %name, %namespace, machine = %machine.name_any(), "machine lost: its Lease expired");
    }
    Ok(())
}

/// Writes the pool's status `next`, only when it changed.
async fn write_status(
    ctx: &Context,
    pool: &MachinePool,
    next: &olm_api::substrate::MachinePoolStatus,
) -> Result<(), Error> {
    if pool.status.as_ref() == Some(next) {
        return Ok(());
    }
    let (name, namespace) = (pool.name_any(), pool.namespace().unwrap_or_default());
    ctx.apply_status(
        &Api::<MachinePool>::namespaced(ctx.client.clone(), &namespace),
        &name,
        next,
    )
    .await
    .map_err(write_error(&name, "its status"))?;
    tracing::info!(pool = %name, %namespace, ready = ?next.ready_machines, lost = ?next.lost_machines, "MachinePool status updated");
    Ok(())
}

/// What to do after a failed reconcile.
pub fn error_policy(pool: Arc<MachinePool>, error: &Error, ctx: Arc<Context>) -> Action {
    olm_runtime::error_policy(CONTROLLER, pool.as_ref(), error, &ctx.metrics.runtime().reconcile)
}

/// The pool a Machine belongs to.
pub fn of_machine(machine: &Machine) -> Option<ObjectRef<MachinePool>> {
    let namespace = machine.meta().namespace.as_deref()?;
    Some(ObjectRef::new(&machine.spec.pool).within(namespace))
}
