//! The ServiceAccount, Role and RoleBinding a MachinePool's agent or joined
//! machine runs as, and how they are applied.

use k8s_openapi::api::{
    core::v1::ServiceAccount,
    rbac::v1::{Role, RoleBinding},
};
use kube::{Api, ResourceExt};

use super::error::{Error, write_error};
use crate::context::Context;

/// A ServiceAccount with its Role and RoleBinding, all in one namespace.
pub type Account = (ServiceAccount, Role, RoleBinding);

/// Applies `account` for pool `pool`; `whose` names it in errors ("agent").
pub async fn apply_account(ctx: &Context, pool: &str, account: &Account, whose: &str) -> Result<(), Error> {
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
