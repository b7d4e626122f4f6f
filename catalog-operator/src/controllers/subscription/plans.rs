//! Step 3 of a sync, planning: every group with bundles to install gets an
//! InstallPlan, the existing one that covers its bundles or a new one (built by
//! [`crate::controllers::plan`], named after what it installs), unless a bundle
//! image of it must be unpacked first: then the group asks for the unpack
//! ([`UnpackRequest`]) and gets its plan in the next pass. Nothing is written
//! here: the new plans and the statuses of plans whose steps were never written
//! are [`PlanWrite`]s, which [`super::decide::closing`] makes effects of, with
//! the Subscription statuses and the oldest plans beyond the limit to remove
//! ([`plans_to_delete`]).

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
use crate::images::{bundles::UnpackError, unpack::UnpackPolicy};

/// The plans of a namespace once planned.
pub struct GroupPlans {
    /// Per group (in the order of the decisions), its plan when it has bundles
    /// to install (a new one as it will be created, with its status).
    pub by_group: Vec<Option<Arc<InstallPlan>>>,
    /// Every plan of the namespace, the new ones included.
    pub all: Vec<Arc<InstallPlan>>,
    /// The plans to write: the new ones, and those whose steps were never written.
    pub writes: Vec<PlanWrite>,
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

/// A plan to write, with the status it gets (its steps).
#[derive(Clone, Debug, PartialEq)]
pub struct PlanWrite {
    /// The plan, its status included.
    pub plan: Arc<InstallPlan>,
    /// What is written: the whole plan, or its status only.
    pub kind: PlanWriteKind,
}

/// What a [`PlanWrite`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanWriteKind {
    /// A new plan: created, then its status written.
    Create,
    /// A plan created before whose steps were never written (a crash in
    /// between): its status only, onto that very plan.
    Status,
}

/// What a group with bundles to install gets in one pass.
enum Ensured {
    /// Its plan, found as it is.
    Plan(Arc<InstallPlan>),
    /// Its plan, to be written.
    Write(PlanWrite),
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

impl GroupPlans {
    /// Whether a group waits for a bundle image being unpacked.
    pub fn unpacking(&self) -> bool {
        self.unpack
            .iter()
            .any(|s| matches!(s, Some(UnpackState::Unpacking(_))))
    }

    /// Adds the plan `write` writes (once), in place of the one of its name.
    fn add(&mut self, write: PlanWrite) {
        let name = write.plan.name_any();
        self.all.retain(|p| p.name_any() != name);
        self.all.push(write.plan.clone());
        self.writes.retain(|w| w.plan.name_any() != name);
        self.writes.push(write);
    }
}

/// The plan of every group that has bundles to install, found among `plans`
/// (the plans of `earlier`, a pass before this one, still to be written) or
/// new, with the bundles `unpacked` gave; a group whose bundle image must be
/// unpacked asks for it instead (and shows as unpacking, should it be asked
/// again in the pass after the unpacks).
pub(super) async fn plan_groups(
    ctx: &SubscriptionContext,
    inputs: &NamespaceInputs,
    plans: &[Arc<InstallPlan>],
    earlier: &[PlanWrite],
    decisions: &[GroupDecision],
    unpacked: &mut Unpacked,
) -> Result<GroupPlans, Error> {
    let mut out = GroupPlans {
        by_group: Vec::with_capacity(decisions.len()),
        all: plans.to_vec(),
        writes: Vec::new(),
        unpack: Vec::with_capacity(decisions.len()),
        unpack_error: None,
        marked_unpacking: HashSet::new(),
        requests: Vec::new(),
    };
    for group in decisions {
        let mut state = None;
        let plan = match &group.decision {
            Decision::Install(steps) => {
                match ensure_plan(ctx, inputs, group, steps, &out.all, earlier, unpacked).await {
                    Ok(Ensured::Plan(plan)) => Some(plan),
                    Ok(Ensured::Write(write)) => {
                        let plan = write.plan.clone();
                        out.add(write);
                        Some(plan)
                    }
                    Ok(Ensured::Unpack(asked)) => {
                        let image = asked.first().map(|r| r.image().to_owned()).unwrap_or_default();
                        state = Some(UnpackState::Unpacking(format!("unpacking bundle image {image}")));
                        out.requests.extend(asked);
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
                        out.unpack_error.get_or_insert(error);
                        None
                    }
                    Err(error) => return Err(error),
                }
            }
            Decision::UpToDate | Decision::Unsatisfiable(_) => None,
        };
        out.by_group.push(plan);
        out.unpack.push(state);
    }
    Ok(out)
}

/// The InstallPlan of a group that has bundles to install: the existing plan for
/// the same bundles (with its status to write if its steps never were), or a
/// new one.
async fn ensure_plan(
    ctx: &SubscriptionContext,
    inputs: &NamespaceInputs,
    group: &GroupDecision,
    steps: &[ResolvedStep],
    plans: &[Arc<InstallPlan>],
    earlier: &[PlanWrite],
    unpacked: &mut Unpacked,
) -> Result<Ensured, Error> {
    let namespace = inputs.namespace.as_str();
    let policy = &inputs.unpack_policy;
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
        if let Some(write) = earlier.iter().find(|w| w.plan.name_any() == plan.name_any()) {
            // Planned in the pass before the unpacks, and not written yet.
            return Ok(Ensured::Write(write.clone()));
        }
        let planned = plan.status.as_ref().is_some_and(|s| s.plan.is_some());
        if !planned {
            // Created, but its steps were never written (a crash in between).
            let status =
                match plan_status(&ctx.shared, &plan, group, steps, &members, policy, unpacked).await? {
                    Ok(status) => status,
                    Err(requests) => return Ok(Ensured::Unpack(requests)),
                };
            let mut plan = Arc::unwrap_or_clone(plan);
            plan.status = Some(status);
            return Ok(Ensured::Write(PlanWrite {
                plan: Arc::new(plan),
                kind: PlanWriteKind::Status,
            }));
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
    let name = plan::install_plan_name(namespace, &members, steps, group.approval, generation, plans);
    let mut plan = plan::new_install_plan(name, namespace, &members, steps, group.approval, generation);
    // The manifests first, so that a registry that is down leaves no half-made plan behind.
    let mut status = match plan_status(&ctx.shared, &plan, group, steps, &members, policy, unpacked).await? {
        Ok(status) => status,
        Err(requests) => return Ok(Ensured::Unpack(requests)),
    };
    // The generation the API server gives a created object.
    status.observed_generation = Some(1);
    plan.status = Some(status);
    Ok(Ensured::Write(PlanWrite {
        plan: Arc::new(plan),
        kind: PlanWriteKind::Create,
    }))
}

/// Whether some CSV of a complete plan is gone from the namespace. A live read
/// stays here: a CSV the plan just created may not be in the CSV store yet, and
/// reading it as gone would plan it again.
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

/// The status of a freshly planned InstallPlan, from the bundles' manifests
/// (fetched from their registry when the catalog listing left them out), or
/// the pulls of bundle images it needs first (unpacked by `policy`).
async fn plan_status(
    shared: &Context,
    plan: &InstallPlan,
    group: &GroupDecision,
    steps: &[ResolvedStep],
    members: &[&Subscription],
    policy: &UnpackPolicy,
    unpacked: &mut Unpacked,
) -> Result<Result<InstallPlanStatus, Vec<UnpackRequest>>, Error> {
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
        match unpacking::complete(shared, policy, members, unpacked, &step.catalog, bundle).await? {
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
