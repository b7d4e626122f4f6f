//! `scale APP N`: how many units an application on machines runs. The count
//! is `spec.units.<APP>` of the MachinePool the application's CSV names, so a
//! GitOps repository can hold it beside the pool; olm-operator places the
//! units and says in the pool's status (`applications`, condition `Scaled`)
//! how many there are and whether the pool has machines enough.

use std::collections::BTreeMap;

use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
};
use olm_api::{model::application_of, substrate::MachinePool, v1alpha1::ClusterServiceVersion};

use crate::{DryRunArgs, Env, FIELD_MANAGER, Output, error::Error};

/// The pool of the application `application` among `csvs`: the pool its
/// machine CSV names, or why there is none. Pure.
pub fn pool_of(application: &str, namespace: &str, csvs: &[ClusterServiceVersion]) -> Result<String, Error> {
    let mut of_app = csvs
        .iter()
        .filter(|csv| application_of(&csv.name_any(), namespace, csv.labels()) == application)
        .peekable();
    if of_app.peek().is_none() {
        return Err(Error::Usage(format!(
            "no application {application} is installed in namespace {namespace}: name an installed operator's package (kubectl olm status lists them)"
        )));
    }
    of_app
        .find_map(|csv| csv.spec.install.machine().map(|m| m.pool.clone()))
        .ok_or_else(|| {
            Error::Usage(format!(
                "application {application} does not run on machines (its CSV has no machine install strategy); an operator in pods is scaled through its Subscription's config"
            ))
        })
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
    let pool_name = pool_of(application, &namespace, &csvs.items)?;
    let pools: Api<MachinePool> = Api::namespaced(env.client.clone(), &namespace);
    let pool = pools.get(&pool_name).await.map_err(Error::kube(format!(
        "read MachinePool {pool_name} in {namespace}"
    )))?;
    if dry_run.is_dry_run() {
        let pool = scaled(pool, application, units);
        return match dry_run.output {
            Some(Output::Json) => {
                let text = serde_json::to_string_pretty(&pool).map_err(|e| Error::Render(e.to_string()))?;
                Ok(writeln!(env.out, "{text}")?)
            }
            Some(_) => {
                let text = serde_saphyr::to_string(&pool).map_err(|e| Error::Render(e.to_string()))?;
                Ok(env.out.write_all(text.as_bytes())?)
            }
            None => Ok(writeln!(
                env.out,
                "MachinePool {pool_name} would run {units} unit(s) of {application} (dry run)"
            )?),
        };
    }
    let patch = serde_json::json!({"spec": {"units": {application: units}}});
    pools
        .patch(
            &pool_name,
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
        assert_eq!(pool_of("db", "ns", &csvs).unwrap(), "edge");
        let err = pool_of("web", "ns", &csvs).unwrap_err().to_string();
        assert!(err.contains("does not run on machines"), "{err}");
        let err = pool_of("nope", "ns", &csvs).unwrap_err().to_string();
        assert!(err.contains("no application nope is installed"), "{err}");
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
