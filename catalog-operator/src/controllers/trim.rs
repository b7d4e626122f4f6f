//! What the stores keep of each object: only what the controllers read.
//!
//! The reflectors pass every object through these functions before it enters
//! a store. Nothing trimmed here is ever written back: status writes are built
//! from the controllers' own decisions, never from a stored object.

use k8s_openapi::api::batch::v1::Job;
use olm_api::{
    model::OperatorRevision,
    v1alpha1::{ClusterServiceVersion, InstallPlan, InstallPlanPhase},
};

/// A CSV as the catalog-operator keeps it: without its presentation (icon,
/// descriptions) and without its Deployments and permissions, which only the olm-operator reads.
pub fn csv(csv: &mut ClusterServiceVersion) {
    csv.drop_presentation();
    if let Some(details) = csv.spec.install.deployment_mut() {
        details.deployments = Vec::new();
        details.permissions = None;
        details.cluster_permissions = None;
    }
}

/// An InstallPlan as the catalog-operator keeps it: a plan that is done
/// (Complete or Failed) is never applied again, so its steps keep their kind
/// and name but not their manifests, which are the bundle's whole content.
pub fn install_plan(plan: &mut InstallPlan) {
    let Some(status) = plan.status.as_mut() else {
        return;
    };
    if !matches!(
        status.phase,
        InstallPlanPhase::Complete | InstallPlanPhase::Failed
    ) {
        return;
    }
    for step in status.plan.iter_mut().flatten() {
        step.resource.manifest = None;
    }
}

/// An OperatorRevision as the catalog-operator keeps it: its name, labels,
/// number and CSV, not the manifests it holds (read from the API server when
/// a revision is installed again).
pub fn revision(revision: &mut OperatorRevision) {
    revision.spec.objects = Vec::new();
    revision.metadata.managed_fields = None;
}

/// A bundle unpack Job as the catalog-operator keeps it: its name, labels,
/// creation and status, which decide the unpack's next step; not its Pod
/// template, which the catalog-operator builds and never reads back.
pub fn unpack_job(job: &mut Job) {
    job.spec = None;
    job.metadata.annotations = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(phase: InstallPlanPhase) -> InstallPlan {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "InstallPlan",
            "metadata": {"name": "install-1", "namespace": "team"},
            "spec": {"clusterServiceVersionNames": ["db.v1.0.0"], "approval": "Automatic", "approved": true},
            "status": {
                "phase": phase,
                "catalogSources": ["cat"],
                "plan": [{
                    "resolving": "db.v1.0.0",
                    "status": "Created",
                    "resource": {
                        "sourceName": "cat",
                        "sourceNamespace": "olm",
                        "group": "apiextensions.k8s.io",
                        "version": "v1",
                        "kind": "CustomResourceDefinition",
                        "name": "dbs.demo.io",
                        "manifest": "{\"kind\":\"CustomResourceDefinition\"}",
                    },
                }],
            },
        }))
        .expect("a valid InstallPlan")
    }

    fn manifests(plan: &InstallPlan) -> Vec<Option<String>> {
        plan.status
            .iter()
            .flat_map(|s| s.plan.iter().flatten())
            .map(|s| s.resource.manifest.clone())
            .collect()
    }

    #[test]
    fn a_done_plan_keeps_its_steps_but_not_their_manifests() {
        for phase in [InstallPlanPhase::Complete, InstallPlanPhase::Failed] {
            let mut done = plan(phase);
            install_plan(&mut done);
            assert_eq!(manifests(&done), vec![None]);
            let step = &done.status.as_ref().unwrap().plan.as_ref().unwrap()[0];
            assert_eq!(step.resource.name, "dbs.demo.io");
            assert_eq!(step.resolving, "db.v1.0.0");
        }
    }

    #[test]
    fn a_plan_still_to_run_keeps_its_manifests() {
        for phase in [
            InstallPlanPhase::Planning,
            InstallPlanPhase::RequiresApproval,
            InstallPlanPhase::Installing,
        ] {
            let mut pending = plan(phase);
            install_plan(&mut pending);
            assert!(manifests(&pending)[0].is_some(), "{phase:?}");
        }
    }
}
