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

pub mod agent;
pub mod endpoints;
pub mod join;
pub mod status;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{Node, ServiceAccount},
        rbac::v1::{Role, RoleBinding},
    },
    jiff::Timestamp,
};
use kube::{
    Api, Resource, ResourceExt,
    api::ListParams,
    core::PartialObjectMeta,
    runtime::{controller::Action, reflector::ObjectRef},
};
use olm_api::substrate::{Machine, MachinePool};
use olm_runtime::{ErrorClass, ReconcileError, apply::WriteError, classify};

use crate::context::Context;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "machinepool";

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The MachinePool has no namespace (it always should).
    #[error("the MachinePool has no namespace")]
    NoNamespace,
    /// Reading something the status is computed from failed.
    #[error("failed to read {what} for MachinePool {pool}")]
    Read {
        /// The pool.
        pool: String,
        /// What was read.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The join token Secret the pool names exists and was not made by olm-operator.
    #[error(
        "MachinePool {pool} names join token Secret {secret}, which exists and is no join token Secret (type substrate.olm-rs.dev/join-token): name another Secret, or delete it so that olm-operator makes it"
    )]
    ForeignJoinSecret {
        /// The pool.
        pool: String,
        /// The Secret.
        secret: String,
    },
    /// The API server issued a join token that is no JWT with an id and expiry.
    #[error("the join token issued for MachinePool {pool} carries no id (jti) and expiry (exp)")]
    UnreadableToken {
        /// The pool.
        pool: String,
    },
    /// Writing an agent object, a lost machine's condition or the status failed.
    #[error("failed to write {what} for MachinePool {pool}")]
    Write {
        /// The pool.
        pool: String,
        /// What was written.
        what: String,
        /// The cause.
        #[source]
        source: WriteError,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace | Error::ForeignJoinSecret { .. } => "invalid",
            Error::UnreadableToken { .. } | Error::Read { .. } => "dereference",
            Error::Write { .. } => "apply",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace | Error::ForeignJoinSecret { .. } => ErrorClass::Terminal,
            Error::UnreadableToken { .. } => ErrorClass::Transient,
            Error::Read { source, .. } => classify(source),
            Error::Write { source, .. } => source.class(),
        }
    }
}

/// Reconciles one MachinePool.
pub async fn reconcile(pool: Arc<MachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if !ctx.is_leader() {
        return Ok(Action::await_change());
    }
    let namespace = pool.namespace().ok_or(Error::NoNamespace)?;
    let name = pool.name_any();
    let read = |what: &str| read_error(&name, what);
    let write = |what: &str| write_error(&name, what);
    let client = ctx.client.clone();

    // The agent's workload, for pools of cluster nodes.
    let daemonset = match agent::daemonset(&pool) {
        Some(daemonset) => {
            let account = (
                agent::service_account(&pool),
                agent::role(&pool),
                agent::role_binding(&pool),
            );
            apply_account(&ctx, &name, &account, "agent").await?;
            Some(
                ctx.apply(&Api::namespaced(client.clone(), &namespace), &daemonset)
                    .await
                    .map_err(write("the agent DaemonSet"))?,
            )
        }
        None => None,
    };

    // What the status is computed from.
    let matching_nodes = match pool.spec.node_selector.as_ref() {
        Some(selector) => {
            let labels = selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            let nodes = Api::<PartialObjectMeta<Node>>::all(client.clone())
                .list_metadata(&ListParams::default().labels(&labels))
                .await
                .map_err(read("the nodes its selector matches"))?;
            Some(nodes.items.iter().map(ResourceExt::name_any).collect())
        }
        None => None,
    };
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

    let endpoints = endpoints::discover(&client, &ctx.settings.apiserver_endpoints).await;
    let observed = status::Observed {
        matching_nodes,
        machines,
        refused: joins.refused,
        leases,
        daemonset: daemonset.as_ref(),
        endpoints,
    };

    // Lost machines: only the Ready condition, forced, as the contract allows.
    let now = olm_runtime::conditions::now();
    for machine in &observed.machines {
        let lease = observed.leases.get(&machine.name_any()).copied();
        if status::is_lost(machine, lease, now.0) && !status::marked_lost(machine) {
            let condition = status::lost_condition(machine, status::heartbeat_deadline(machine, lease), &now);
            let body = serde_json::json!({ "conditions": [condition] });
            ctx.apply_status(
                &Api::<Machine>::namespaced(client.clone(), &namespace),
                &machine.name_any(),
                &body,
            )
            .await
            .map_err(write(&format!(
                "the lost condition of Machine {}",
                machine.name_any()
            )))?;
            tracing::warn!(pool = %name, %namespace, machine = %machine.name_any(), "machine lost: its Lease expired");
        }
    }

    // The status, written only when it changed.
    let next = status::compute(&pool, &observed, &now);
    if pool.status.as_ref() != Some(&next) {
        ctx.apply_status(&Api::<MachinePool>::namespaced(client, &namespace), &name, &next)
            .await
            .map_err(write("its status"))?;
        tracing::info!(pool = %name, %namespace, ready = ?next.ready_machines, lost = ?next.lost_machines, "MachinePool status updated");
    }

    // Look again when the next live machine would turn lost.
    let resync = if joins.admitting {
        join::ADMITTING_RECHECK
    } else {
        ctx.settings.resync
    };
    let again = status::next_expiry(&observed, now.0)
        .map(|deadline| until(now.0, deadline) + Duration::from_secs(1))
        .map_or(resync, |d| d.min(resync));
    Ok(Action::requeue(again))
}

/// A ServiceAccount with its Role and RoleBinding, all in one namespace.
pub type Account = (ServiceAccount, Role, RoleBinding);

/// Applies `account` for pool `pool`; `whose` names it in errors ("agent").
async fn apply_account(ctx: &Context, pool: &str, account: &Account, whose: &str) -> Result<(), Error> {
    let (service_account, role, binding) = account;
    let namespace = service_account.namespace().unwrap_or_default();
    let write = |what: &str| write_error(pool, &format!("the {whose} {what}"));
    ctx.apply(&Api::namespaced(ctx.client.clone(), &namespace), service_account)
        .await
        .map_err(write("ServiceAccount"))?;
    ctx.apply(&Api::namespaced(ctx.client.clone(), &namespace), role)
        .await
        .map_err(write("Role"))?;
    ctx.apply(&Api::namespaced(ctx.client.clone(), &namespace), binding)
        .await
        .map_err(write("RoleBinding"))?;
    Ok(())
}

/// How a failed read of `what` for pool `pool` is told.
fn read_error(pool: &str, what: &str) -> impl FnOnce(kube::Error) -> Error + use<> {
    let (pool, what) = (pool.to_owned(), what.to_owned());
    move |source| Error::Read { pool, what, source }
}

/// How a failed write of `what` for pool `pool` is told.
fn write_error(pool: &str, what: &str) -> impl FnOnce(WriteError) -> Error + use<> {
    let (pool, what) = (pool.to_owned(), what.to_owned());
    move |source| Error::Write { pool, what, source }
}

fn until(now: Timestamp, then: Timestamp) -> Duration {
    Duration::try_from(then.duration_since(now)).unwrap_or_default()
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
