//! Step 3 of a sync, writing plans: every group with bundles to install gets an
//! InstallPlan, the existing one that covers its bundles or a new one (built by
//! [`crate::controllers::plan`]), unless a bundle image of it must be unpacked
//! first: then the group asks for the unpack ([`UnpackRequest`]) and gets its
//! plan in the next pass. After the statuses, the oldest plans beyond the limit go
//! ([`plans_to_delete`], performed with the statuses: [`super::decide`]).

use std::{collections::HashSet, sync::Arc};

use kube::{Api, ResourceExt};
use olm_api::v1alpha1::{
    ClusterServiceVersion, InstallPlan, InstallPlanPhase, InstallPlanStatus, Subscription,
};

use super::{
    context::SubscriptionContext,
    error::Error,
    inputs::NamespaceInputs,
    resolve::{Decision, GroupDecision},
    unpacking::{self, UnpackRequest, Unpacked},
};
use crate::controllers::{
    Context,
    plan::{self, ResolvedStep, steps::PlannedBundle},
};
use crate::images::bundles::UnpackError;

/// The plans of a namespace once written.
pub struct WrittenPlans {
    /// Per group (in the order of the decisions), its plan when it has bundles
    /// to install.
    pub by_group: Vec<Option<Arc<InstallPlan>>>,
    /// Every plan of the namespace, those just created included.
    pub all: Vec<Arc<InstallPlan>>,
    /// Per group (in the order of the decisions), where the unpacking of a
    /// bundle image of its plan stands, if its plan waits for one.
    pub unpack: Vec<Option<UnpackState>>,
    /// The first unpack failure, returned once the statuses are written so that
    /// the namespace is synced again with backoff.
    pub unpack_error: Option<Error>,
    /// The Subscriptions given BundleUnpacking while an image was pulled: their
    /// status is written again, which clears it.
    pub marked_unpacking: HashSet<String>,
    /// The bundle images to pull before the groups that need them get a plan.
    pub requests: Vec<UnpackRequest>,
}

/// What a group with bundles to install gets in one pass.
enum Ensured {
    /// Its plan, found or created.
    Plan(Arc<InstallPlan>),
    /// The pulls of bundle images its plan needs first.
    Unpack(Vec<UnpackRequest>),
}

/// Where the unpacking of a group's bundle image stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnpackState {
    /// Under way (in a Job): what it waits for.
    Unpacking(String),
    /// Failed: why.
    Failed(String),
}

impl WrittenPlans {
    /// Whether a group waits for a bundle image being unpacked.
    pub fn unpacking(&self) -> bool {
        self.unpack
            .iter()
            .any(|s| matches!(s, Some(UnpackState::Unpacking(_))))
    }
}

/// Finds or creates the plan of every group that has bundles to install, with
/// the bundles `unpacked` gave; a group whose bundle image must be unpacked
/// asks for it instead (and shows as unpacking, should it be asked again in the
/// pass after the unpacks).
pub(super) async fn write_plans(
    ctx: &SubscriptionContext,
    inputs: &NamespaceInputs,
    plans: &[Arc<InstallPlan>],
    decisions: &[GroupDecision],
    unpacked: &mut Unpacked,
) -> Result<WrittenPlans, Error> {
    let mut all = plans.to_vec();
    let mut by_group = Vec::with_capacity(decisions.len());
    let mut unpack = Vec::with_capacity(decisions.len());
    let mut unpack_error = None;
    let mut requests = Vec::new();
    for group in decisions {
        let mut state = None;
        let plan = match &group.decision {
            Decision::Install(steps) => {
                match ensure_plan(ctx, inputs, group, steps, &mut all, unpacked).await {
                    Ok(Ensured::Plan(plan)) => Some(plan),
                    Ok(Ensured::Unpack(asked)) => {
                        let image = asked.first().map(|r| r.image().to_owned()).unwrap_or_default();
                        state = Some(UnpackState::Unpacking(format!("unpacking bundle image {image}")));
                        requests.extend(asked);
                        None
                    }
                    Err(Error::Unpack {
                        source: UnpackError::Pending(waiting),
                        ..
                    }) => {
                        state = Some(UnpackState::Unpacking(waiting));
                        None
                    }
                    // One group's bad bundle image must not hold the other groups back.
                    Err(error @ Error::Unpack { .. }) => {
                        state = Some(UnpackState::Failed(error.to_string()));
                        unpack_error.get_or_insert(error);
                        None
                    }
                    Err(error) => return Err(error),
                }
            }
            Decision::UpToDate | Decision::Unsatisfiable(_) => None,
        };
        by_group.push(plan);
        unpack.push(state);
    }
    Ok(WrittenPlans {
        by_group,
        all,
        unpack,
        unpack_error,
        marked_unpacking: HashSet::new(),
        requests,
    })
}

/// The InstallPlan of a group that has bundles to install: the existing plan for
/// the same bundles, or a new one.
async fn ensure_plan(
    ctx: &SubscriptionContext,
    inputs: &NamespaceInputs,
    group: &GroupDecision,
    steps: &[ResolvedStep],
    plans: &mut Vec<Arc<InstallPlan>>,
    unpacked: &mut Unpacked,
) -> Result<Ensured, Error> {
    let namespace = inputs.namespace.as_str();
    let members: Vec<&Subscription> = inputs
        .subscriptions
        .iter()
        .filter(|s| group.subscriptions.contains(&s.name_any()))
        .map(|s| s.as_ref())
        .collect();
    let referenced: HashSet<String> = members
        .iter()
        .filter_map(|s| s.status.as_ref()?.install_plan_ref.as_ref()?.name.clone())
        .collect();
    if let Some(plan) = plan::covering_plan(plans, steps, &referenced) {
        let planned = plan.status.as_ref().is_some_and(|s| s.plan.is_some());
        if !planned {
            // Created, but its steps were never written (a crash in between).
            let status = match plan_status(&ctx.shared, &plan, group, steps, &members, unpacked).await? {
                Ok(status) => status,
                Err(requests) => return Ok(Ensured::Unpack(requests)),
            };
            let written = write_plan_status(&ctx.shared, namespace, &plan.name_any(), &status).await?;
            ctx.state.remember(namespace, written.clone());
            return Ok(Ensured::Plan(written));
        }
        let completed = plan.status.as_ref().map(|s| s.phase) == Some(InstallPlanPhase::Complete);
        if !completed || !csvs_gone(&ctx.shared, inputs, steps).await? {
            return Ok(Ensured::Plan(plan));
        }
        tracing::info!(
            namespace,
            install_plan = %plan.name_any(),
            "CSVs of a complete install plan are gone: planning them again"
        );
    }

    let generation = plans.iter().filter_map(|p| p.spec.generation).max().unwrap_or(0) + 1;
    let plan = plan::new_install_plan(namespace, &members, steps, group.approval, generation);
    // Fetch the manifests first, so that a registry that is down leaves no
    // half-made plan behind.
    let status = match plan_status(&ctx.shared, &plan, group, steps, &members, unpacked).await? {
        Ok(status) => status,
        Err(requests) => return Ok(Ensured::Unpack(requests)),
    };
    let api: Api<InstallPlan> = Api::namespaced(ctx.shared.client.clone(), namespace);
    let created = ctx
        .shared
        .writer
        .create(&api, &plan)
        .await
        .map_err(|source| Error::Write {
            what: format!("a new InstallPlan in namespace {namespace}"),
            source,
        })?;
    let name = created.name_any();
    tracing::info!(
        namespace,
        install_plan = %name,
        csvs = ?created.spec.cluster_service_version_names,
        approval = ?created.spec.approval,
        "created install plan"
    );
    ctx.state.remember(namespace, Arc::new(created.clone()));
    let mut status = status;
    status.observed_generation = created.metadata.generation;
    let written = write_plan_status(&ctx.shared, namespace, &name, &status).await?;
    ctx.state.remember(namespace, written.clone());
    plans.push(written.clone());
    Ok(Ensured::Plan(written))
}

/// Whether some CSV of a complete plan is gone from the namespace (checked with
/// the API server, since the CSV store may lag behind the plan).
async fn csvs_gone(
    shared: &Context,
    inputs: &NamespaceInputs,
    steps: &[ResolvedStep],
) -> Result<bool, Error> {
    let namespace = inputs.namespace.as_str();
    let api: Api<ClusterServiceVersion> = Api::namespaced(shared.client.clone(), namespace);
    let in_store = |name: &str| inputs.csvs.iter().any(|c| c.name_any() == name);
    for step in steps.iter().filter(|s| !in_store(&s.bundle)) {
        let found = api
            .get_metadata_opt(&step.bundle)
            .await
            .map_err(|source| Error::Read {
                what: format!("ClusterServiceVersion {namespace}/{}", step.bundle),
                source,
            })?;
        if found.is_none() {
            return Ok(true);
        }
    }
    Ok(false)
}

async fn write_plan_status(
    shared: &Context,
    namespace: &str,
    name: &str,
    status: &InstallPlanStatus,
) -> Result<Arc<InstallPlan>, Error> {
    let api: Api<InstallPlan> = Api::namespaced(shared.client.clone(), namespace);
    shared
        .writer
        .apply_status(&api, name, status)
        .await
        .map(Arc::new)
        .map_err(|source| Error::Write {
            what: format!("the status of InstallPlan {namespace}/{name}"),
            source,
        })
}

/// The status of a freshly planned InstallPlan, from the bundles' manifests
/// (fetched from their registry when the catalog listing left them out), or
/// the pulls of bundle images it needs first.
async fn plan_status(
    shared: &Context,
    plan: &InstallPlan,
    group: &GroupDecision,
    steps: &[ResolvedStep],
    members: &[&Subscription],
    unpacked: &mut Unpacked,
) -> Result<Result<InstallPlanStatus, Vec<UnpackRequest>>, Error> {
    let namespace = plan.namespace().unwrap_or_default();
    let mut bundles = Vec::with_capacity(steps.len());
    let mut requests = Vec::new();
    for step in steps {
        let unavailable = || Error::CatalogUnavailable {
            catalog: step.catalog.clone(),
            bundle: step.bundle.clone(),
        };
        let bundle = shared
            .catalogs
            .bundle_with_manifests(&step.catalog, &step.package, &step.channel, &step.bundle)
            .await
            .map_err(|source| Error::Fetch {
                catalog: step.catalog.clone(),
                bundle: step.bundle.clone(),
                source,
            })?
            .ok_or_else(unavailable)?;
        let bundle = Arc::unwrap_or_clone(bundle);
        match unpacking::complete(shared, &namespace, members, unpacked, &step.catalog, bundle).await? {
            Ok(bundle) => bundles.push(PlannedBundle {
                step: step.clone(),
                bundle,
            }),
            Err(request) => requests.push(request),
        }
    }
    if !requests.is_empty() {
        return Ok(Err(requests));
    }
    let now = olm_runtime::conditions::now();
    Ok(Ok(plan::planned_status(plan, &bundles, group.approval, &now)))
}

/// The InstallPlans to delete so that at most `max` remain: the oldest first (by
/// generation, then creation), never one that a Subscription refers to.
pub fn plans_to_delete(plans: &[Arc<InstallPlan>], referenced: &HashSet<String>, max: usize) -> Vec<String> {
    let mut live: Vec<&Arc<InstallPlan>> = plans
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    live.sort_by_key(|p| {
        (
            p.spec.generation.unwrap_or(0),
            p.metadata.creation_timestamp.clone().map(|t| t.0),
        )
    });
    live.dedup_by_key(|p| p.name_any());
    let mut excess = live.len().saturating_sub(max);
    let mut out = Vec::new();
    for plan in live {
        if excess == 0 {
            break;
        }
        let name = plan.name_any();
        if referenced.contains(&name) {
            continue;
        }
        out.push(name);
        excess -= 1;
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use olm_api::v1alpha1::{Approval, InstallPlanSpec};

    use super::*;

    /// InstallPlan `name` of namespace `team`, of generation `generation`.
    pub(crate) fn plan(name: &str, generation: i64) -> Arc<InstallPlan> {
        let mut plan = InstallPlan::new(
            name,
            InstallPlanSpec {
                catalog_source: None,
                catalog_source_namespace: None,
                cluster_service_version_names: Vec::new(),
                approval: Approval::Automatic,
                approved: true,
                generation: Some(generation),
            },
        );
        plan.metadata.namespace = Some("team".into());
        Arc::new(plan)
    }

    #[test]
    fn the_oldest_unreferenced_plans_go_beyond_five() {
        let plans: Vec<_> = (1..=8).map(|g| plan(&format!("install-{g}"), g)).collect();
        let referenced = HashSet::from(["install-1".to_owned()]);
        assert_eq!(
            plans_to_delete(&plans, &referenced, 5),
            ["install-2", "install-3", "install-4"],
            "install-1 is still referenced"
        );
        assert!(plans_to_delete(&plans[..5], &HashSet::new(), 5).is_empty());
        let mut with_dup = plans[..6].to_vec();
        with_dup.push(plans[5].clone());
        assert_eq!(plans_to_delete(&with_dup, &HashSet::new(), 5), ["install-1"]);
    }
}
