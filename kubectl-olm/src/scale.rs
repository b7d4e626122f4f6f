//! `scale APP N`: how many units an application runs.
//!
//! - On machines, the count is `spec.units.<APP>` of the MachinePool the
//!   application's CSV names, so a GitOps repository can hold it beside the
//!   pool; olm-operator places the units and says in the pool's status
//!   (`applications`, condition `Scaled`) how many there are and whether the
//!   pool has machines enough.
//! - In pods, the count is the application's Subscription's annotation
//!   `olm-rs.dev/replicas` (OLM's `spec.config` has no replicas), which
//!   olm-operator sets on every Deployment of the installed CSV.

use std::collections::BTreeMap;

use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
};
use olm_api::{
    labels::REPLICAS,
    model::application_of,
    replicas::MAX_REPLICAS,
    substrate::MachinePool,
    v1alpha1::{ClusterServiceVersion, Subscription},
};

use crate::{
    DryRunArgs, Env, FIELD_MANAGER,
    commands::{Named, find_subscription},
    error::Error,
};

/// Where an application's count is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// On machines: the MachinePool of this name.
    Pool(String),
    /// In pods: its Subscription's replicas annotation.
    Pods,
}

/// Where the count of application `application` among `csvs` is kept: the
/// pool its machine CSV names, or its Subscription when it runs in pods; or
/// why it cannot be scaled. Pure.
pub fn target_of(
    application: &str,
    namespace: &str,
    csvs: &[ClusterServiceVersion],
) -> Result<Target, Error> {
    let of_app: Vec<&ClusterServiceVersion> = csvs
        .iter()
        .filter(|csv| application_of(&csv.name_any(), namespace, csv.labels()) == application)
        .collect();
    if of_app.is_empty() {
        return Err(Error::Usage(format!(
            "no application {application} is installed in namespace {namespace}: name an installed operator's package (kubectl olm status lists them)"
        )));
    }
    let pool = of_app
        .iter()
        .find_map(|csv| csv.spec.install.machine().map(|m| m.pool.clone()));
    Ok(pool.map_or(Target::Pods, Target::Pool))
}

/// `subscription` asking for `replicas` of each Deployment of its CSV. Pure.
pub fn with_replicas(mut subscription: Subscription, replicas: u32) -> Result<Subscription, Error> {
    if replicas > MAX_REPLICAS.unsigned_abs() {
        return Err(Error::Usage(format!(
            "{replicas} replicas is more than olm-rs sets through {REPLICAS} (at most {MAX_REPLICAS})"
        )));
    }
    subscription
        .annotations_mut()
        .insert(REPLICAS.to_owned(), replicas.to_string());
    subscription.metadata.managed_fields = None;
    subscription.metadata.resource_version = None;
    subscription.status = None;
    Ok(subscription)
}

/// `pool` with `application` scaled to `units`. Pure.
pub fn scaled(mut pool: MachinePool, application: &str, units: u32) -> MachinePool {
    pool.spec
        .units
        .get_or_insert_with(BTreeMap::new)
        .insert(application.to_owned(), units);
    pool.metadata.managed_fields = None;
    pool.metadata.resource_version = None;
    pool.status = None;
    pool
}

/// `scale APP N`.
pub async fn scale(
    env: &mut Env<'_>,
    application: &str,
    units: u32,
    dry_run: &DryRunArgs,
) -> Result<(), Error> {
    let namespace = env.namespace.clone();
    let csvs = Api::<ClusterServiceVersion>::namespaced(env.client.clone(), &namespace)
        .list(&Default::default())
        .await
        .map_err(Error::kube(format!("list the CSVs of {namespace}")))?;
    match target_of(application, &namespace, &csvs.items)? {
        Target::Pool(pool) => scale_units(env, application, &pool, units, dry_run).await,
        Target::Pods => scale_replicas(env, application, units, dry_run).await,
    }
}

/// Scales an application in pods: its Subscription's replicas annotation.
async fn scale_replicas(
    env: &mut Env<'_>,
    application: &str,
    replicas: u32,
    dry_run: &DryRunArgs,
) -> Result<(), Error> {
    let namespace = env.namespace.clone();
    let subscription = find_subscription(env, application, Named::PackageFirst).await?;
    let name = subscription.name_any();
    let scaled = with_replicas(subscription, replicas)?;
    if dry_run.is_dry_run() {
        return match dry_run.output {
            Some(output) => env.print_object(&scaled, Some(output)),
            None => Ok(writeln!(
                env.out,
                "Subscription {name} would ask {replicas} replica(s) of each Deployment of {application} (dry run)"
            )?),
        };
    }
    let patch = serde_json::json!({"metadata": {"annotations": {REPLICAS: replicas.to_string()}}});
    Api::<Subscription>::namespaced(env.client.clone(), &namespace)
        .patch(&name, &PatchParams::apply(FIELD_MANAGER), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!(
            "scale {application} through Subscription {name}"
        )))?;
    writeln!(
        env.out,
        "{application} scaled to {replicas} replica(s) through Subscription {name} in {namespace} (annotation {REPLICAS}); olm-operator sets them on each Deployment of its CSV"
    )?;
    Ok(())
}

/// Scales an application on machines: its count in `pool_name`.
async fn scale_units(
    env: &mut Env<'_>,
    application: &str,
    pool_name: &str,
    units: u32,
    dry_run: &DryRunArgs,
) -> Result<(), Error> {
    let namespace = env.namespace.clone();
    let pools: Api<MachinePool> = Api::namespaced(env.client.clone(), &namespace);
    let pool = pools.get(pool_name).await.map_err(Error::kube(format!(
        "read MachinePool {pool_name} in {namespace}"
    )))?;
    if dry_run.is_dry_run() {
        return match dry_run.output {
            Some(output) => env.print_object(&scaled(pool, application, units), Some(output)),
            None => Ok(writeln!(
                env.out,
                "MachinePool {pool_name} would run {units} unit(s) of {application} (dry run)"
            )?),
        };
    }
    let patch = serde_json::json!({"spec": {"units": {application: units}}});
    pools
        .patch(
            pool_name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(Error::kube(format!(
            "scale {application} in MachinePool {pool_name}"
        )))?;
    writeln!(
        env.out,
        "{application} scaled to {units} unit(s) on MachinePool {pool_name} in {namespace}; `kubectl get machinepool {pool_name} -n {namespace} -o yaml` shows its units and condition Scaled"
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(name: &str, package: &str, install: serde_json::Value) -> ClusterServiceVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": "ns",
                         "labels": {format!("operators.coreos.com/{package}.ns"): ""}},
            "spec": {"displayName": package, "install": install},
        }))
        .expect("a CSV")
    }

    #[test]
    fn the_pool_of_an_application_is_the_one_its_machine_csv_names() {
        let machine = serde_json::json!({"strategy": "machine",
            "spec": {"pool": "edge", "hooks": {"configMap": "hooks"}}});
        let pods = serde_json::json!({"strategy": "deployment", "spec": {"deployments": []}});
        let csvs = [csv("db.v1", "db", machine), csv("web.v1", "web", pods)];
        assert_eq!(target_of("db", "ns", &csvs).unwrap(), Target::Pool("edge".into()));
        assert_eq!(target_of("web", "ns", &csvs).unwrap(), Target::Pods);
        let err = target_of("nope", "ns", &csvs).unwrap_err().to_string();
        assert!(err.contains("no application nope is installed"), "{err}");
    }

    #[test]
    fn an_application_in_pods_is_scaled_by_its_subscription_s_annotation() {
        let subscription: Subscription = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "9",
                         "annotations": {"keep": "me"}},
            "spec": {"name": "web", "source": "c", "sourceNamespace": "olm"},
            "status": {"installedCSV": "web.v1"},
        }))
        .expect("a Subscription");
        let scaled = with_replicas(subscription.clone(), 3).unwrap();
        assert_eq!(scaled.annotations()[REPLICAS], "3");
        assert_eq!(scaled.annotations()["keep"], "me");
        assert_eq!((scaled.status, scaled.metadata.resource_version), (None, None));
        let err = with_replicas(subscription, 1001).unwrap_err().to_string();
        assert!(err.contains("at most 1000"), "{err}");
    }

    #[test]
    fn scaling_sets_one_application_and_keeps_the_others() {
        let pool: MachinePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "MachinePool",
            "metadata": {"name": "edge", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"agent": {"image": "a", "version": "1"}, "units": {"web": 2}},
            "status": {"machines": 3},
        }))
        .expect("a MachinePool");
        let pool = scaled(pool, "db", 3);
        assert_eq!(
            pool.spec.units,
            Some(BTreeMap::from([("db".into(), 3), ("web".into(), 2)]))
        );
        assert_eq!((pool.status, pool.metadata.resource_version), (None, None));
    }
}
