//! The InstallPlan controller: runs a plan once it may run.
//!
//! The Subscription controller plans (it writes the steps into the status); this
//! controller moves a plan through its phases:
//! RequiresApproval → (spec.approved) → Installing → Complete, or Failed.
//! Installing applies the steps in order ([`execute::Executor`]) and records
//! progress in the status after each bundle, so a plan resumes where it stopped.
//! A step whose API is not served yet waits (WaitingForApi); transient failures
//! are retried for `install_plan_retry_timeout` (permission errors for ever, as
//! OLM does); anything else fails the plan with a message that names the step.

pub mod execute;

use std::{sync::Arc, time::Duration};

use futures::{Stream, StreamExt, stream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{
    Api, ResourceExt,
    runtime::{
        controller::Action,
        reflector::{ObjectRef, Store},
    },
};
use olm_api::v1alpha1::{
    InstallPlan, InstallPlanConditionReason, InstallPlanPhase, InstallPlanStatus, Step, StepStatus,
};
use olm_runtime::{ErrorClass, ReconcileError, apply::WriteError};

use self::execute::{Executor, StepCause, StepFailure};
use super::{Context, plan::status};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "installplan";

/// How soon a plan that just started waiting or retrying is looked at again.
const RETRY: Duration = Duration::from_secs(3);

/// The longest pause between two looks at a plan that keeps waiting or retrying.
const MAX_RETRY: Duration = Duration::from_secs(60);

/// How long a plan waiting for an API also looks again on a timer. After that
/// only a change of a CRD or an APIService wakes it ([`wake_on_api_changes`]),
/// so a plan that waits for an API that never comes costs nothing at rest.
const WAIT_FOR_API_ON_A_TIMER: Duration = Duration::from_secs(60);

/// After a CRD or APIService changes, the pauses before each look of the plans
/// waiting for an API: at once, then 2, 10 and 30 seconds after the change, as the
/// API server's discovery may serve a new API a little after the change is seen.
const LOOKS_AFTER_AN_API_CHANGE: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_secs(2),
    Duration::from_secs(8),
    Duration::from_secs(20),
];

/// Errors of the InstallPlan controller. A step that fails is not an error of the
/// controller: it is recorded in the plan's status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The InstallPlan has no namespace (never from the API server).
    #[error("the InstallPlan has no namespace")]
    NoNamespace,
    /// The status could not be written.
    #[error("failed to write the status of InstallPlan {namespace}/{name}")]
    WriteStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// This replica stopped leading while applying a step.
    #[error("stopped applying InstallPlan {namespace}/{name}: {message}")]
    NotLeader {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What was being applied.
        message: String,
    },
}

impl ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::NoNamespace => "invalid",
            Error::NotLeader { .. } => olm_runtime::reconcile::NOT_LEADER,
            Error::WriteStatus { .. } => "api",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Error::NoNamespace => ErrorClass::Terminal,
            // The next leadership term applies the plan again.
            Error::NotLeader { .. } => ErrorClass::Transient,
            Error::WriteStatus { source, .. } => source.class(),
        }
    }

    fn is_not_leader(&self) -> bool {
        matches!(self, Error::NotLeader { .. }) || olm_runtime::reconcile::lost_leadership(self)
    }
}

/// Reconciles one InstallPlan.
pub async fn reconcile(plan: Arc<InstallPlan>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.reconciles.start(CONTROLLER);
    let namespace = plan.namespace().ok_or(Error::NoNamespace)?;
    let name = plan.name_any();
    if !ctx.writer.leadership().is_leader() {
        return Ok(Action::await_change());
    }
    let Some(current) = plan.status.clone() else {
        // Not planned yet: the Subscription controller writes the steps.
        return Ok(Action::await_change());
    };
    let now = olm_runtime::conditions::now();
    let writer = StatusWriter {
        ctx: &ctx,
        namespace: &namespace,
        name: &name,
        generation: plan.metadata.generation,
    };
    match current.phase {
        InstallPlanPhase::Complete | InstallPlanPhase::Failed | InstallPlanPhase::Planning => {
            Ok(Action::await_change())
        }
        InstallPlanPhase::RequiresApproval if !plan.spec.approved => Ok(Action::await_change()),
        InstallPlanPhase::RequiresApproval | InstallPlanPhase::Installing => {
            let mut next = current.clone();
            if next.phase == InstallPlanPhase::RequiresApproval {
                tracing::info!(namespace, install_plan = %name, "install plan approved");
                next.phase = InstallPlanPhase::Installing;
            }
            install(&ctx, &writer, &current, next, &now).await
        }
    }
}

/// Writes the status of one plan when it changed.
struct StatusWriter<'a> {
    ctx: &'a Context,
    namespace: &'a str,
    name: &'a str,
    generation: Option<i64>,
}

impl StatusWriter<'_> {
    async fn write(
        &self,
        old: &InstallPlanStatus,
        new: &mut InstallPlanStatus,
        now: &Time,
    ) -> Result<(), Error> {
        new.observed_generation = self.generation;
        status::set_kstatus(new, now);
        if new == old {
            return Ok(());
        }
        let api: Api<InstallPlan> = Api::namespaced(self.ctx.client.clone(), self.namespace);
        self.ctx
            .writer
            .apply_status(&api, self.name, &*new)
            .await
            .map(drop)
            .map_err(|source| Error::WriteStatus {
                namespace: self.namespace.to_owned(),
                name: self.name.to_owned(),
                source,
            })
    }
}

/// Applies the steps not yet done, in order.
async fn install(
    ctx: &Context,
    writer: &StatusWriter<'_>,
    old: &InstallPlanStatus,
    mut status: InstallPlanStatus,
    now: &Time,
) -> Result<Action, Error> {
    if status.start_time.is_none() {
        status.start_time = Some(now.clone());
    }
    let mut written = old.clone();
    let mut steps = status.plan.clone().unwrap_or_default();
    if let Some(message) = unsupported_step(&steps) {
        status::fail(
            &mut status,
            InstallPlanConditionReason::ComponentFailed,
            message,
            now,
        );
        writer.write(&written, &mut status, now).await?;
        return Ok(Action::await_change());
    }
    let mut executor = Executor::new(&ctx.client, &ctx.writer, writer.namespace);
    for i in 0..steps.len() {
        if matches!(steps[i].status, StepStatus::Created | StepStatus::Present) {
            continue;
        }
        match executor.apply(&steps[i]).await {
            Ok(done) => {
                steps[i].status = done;
                status.message = None;
            }
            Err(failure) => {
                let failed = FailedStep {
                    steps,
                    index: i,
                    failure,
                };
                return step_failed(ctx, writer, &written, status, failed, now).await;
            }
        }
        // Record progress at each bundle's last step, so a restart resumes there.
        if ends_bundle(&steps, i) && i + 1 < steps.len() {
            status.plan = Some(steps.clone());
            writer.write(&written, &mut status, now).await?;
            written = status.clone();
        }
    }
    status.plan = Some(steps);
    status::complete(&mut status, now);
    writer.write(&written, &mut status, now).await?;
    tracing::info!(
        namespace = writer.namespace,
        install_plan = writer.name,
        "install plan complete"
    );
    Ok(Action::await_change())
}

/// Why the plan cannot be installed at all: its first step of a kind a plan may
/// not create, in words.
fn unsupported_step(steps: &[Step]) -> Option<String> {
    let step = steps
        .iter()
        .find(|s| s.status == StepStatus::UnsupportedResource)?;
    Some(format!(
        "step {} {} of bundle {}: an install plan may not create objects of kind {}",
        step.resource.kind, step.resource.name, step.resolving, step.resource.kind
    ))
}

/// Whether step `i` is the last of its bundle's steps.
fn ends_bundle(steps: &[Step], i: usize) -> bool {
    steps
        .get(i + 1)
        .is_none_or(|next| next.resolving != steps[i].resolving)
}

/// A step that failed: the plan's steps, which one, and why.
struct FailedStep {
    steps: Vec<Step>,
    index: usize,
    failure: StepFailure,
}

/// Records a failed step as its cause asks (wait for an API, retry, fail the
/// plan, or stop when no longer leading) and says when to look again.
async fn step_failed(
    ctx: &Context,
    writer: &StatusWriter<'_>,
    written: &InstallPlanStatus,
    mut status: InstallPlanStatus,
    failed: FailedStep,
    now: &Time,
) -> Result<Action, Error> {
    let FailedStep {
        mut steps,
        index,
        failure: StepFailure { cause, message },
    } = failed;
    match handling(cause) {
        Handling::Stop => Err(Error::NotLeader {
            namespace: writer.namespace.to_owned(),
            name: writer.name.to_owned(),
            message,
        }),
        Handling::WaitForApi => {
            steps[index].status = StepStatus::WaitingForApi;
            status.plan = Some(steps);
            status.message = Some(message);
            writer.write(written, &mut status, now).await?;
            Ok(match look_again_for_api(waited(&status)) {
                Some(after) => Action::requeue(after),
                None => Action::await_change(),
            })
        }
        Handling::Retry { until_timeout } => {
            status.plan = Some(steps);
            if until_timeout && retry_expired(&status, ctx.options.install_plan_retry_timeout) {
                status::fail(
                    &mut status,
                    InstallPlanConditionReason::ComponentFailed,
                    format!("gave up retrying: {message}"),
                    now,
                );
                writer.write(written, &mut status, now).await?;
                return Ok(Action::await_change());
            }
            status.message = Some(message);
            writer.write(written, &mut status, now).await?;
            Ok(Action::requeue(next_look(waited(&status))))
        }
        Handling::Fail => {
            status.plan = Some(steps);
            status::fail(
                &mut status,
                InstallPlanConditionReason::ComponentFailed,
                message,
                now,
            );
            writer.write(written, &mut status, now).await?;
            tracing::warn!(
                namespace = writer.namespace,
                install_plan = writer.name,
                message = status.message.as_deref().unwrap_or_default(),
                "install plan failed"
            );
            Ok(Action::await_change())
        }
    }
}

/// What the plan does about a step that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handling {
    /// This replica stopped leading: stop without touching the plan.
    Stop,
    /// Mark the step WaitingForApi and look again soon.
    WaitForApi,
    /// Keep the plan Installing and retry soon; give up after the retry timeout
    /// unless `until_timeout` is false (a missing permission may be granted at
    /// any time, so OLM retries it for ever).
    Retry {
        /// Whether the retry timeout applies.
        until_timeout: bool,
    },
    /// Fail the plan: only a new plan can help.
    Fail,
}

/// How the plan handles a step failure of this cause (pure).
fn handling(cause: StepCause) -> Handling {
    match cause {
        StepCause::NotLeader => Handling::Stop,
        StepCause::WaitingForApi => Handling::WaitForApi,
        StepCause::Api(ErrorClass::Forbidden) => Handling::Retry { until_timeout: false },
        StepCause::NotReady
        | StepCause::Api(ErrorClass::Transient | ErrorClass::Conflict | ErrorClass::Gone) => {
            Handling::Retry { until_timeout: true }
        }
        StepCause::Invalid | StepCause::Api(ErrorClass::Terminal) => Handling::Fail,
    }
}

/// How long the plan has been installing (waiting or retrying included).
fn waited(status: &InstallPlanStatus) -> Duration {
    status
        .start_time
        .as_ref()
        .map(|start| k8s_openapi::jiff::Timestamp::now().duration_since(start.0))
        .and_then(|elapsed| Duration::try_from(elapsed).ok())
        .unwrap_or_default()
}

/// How soon a plan that has waited `waited` for an API or a retry is looked at
/// again (pure): every [`RETRY`] at first, so that a CRD created with the plan is
/// used at once, then a tenth of the time waited, at most [`MAX_RETRY`]. A plan
/// waiting for an API that never comes, or retrying a forbidden write, costs a
/// request a minute instead of twenty.
fn next_look(waited: Duration) -> Duration {
    (waited / 10).clamp(RETRY, MAX_RETRY)
}

/// When a plan that has waited `waited` for an API looks again on its own
/// (pure): as [`next_look`] says during the first [`WAIT_FOR_API_ON_A_TIMER`],
/// then never (`None`): a CRD or APIService change wakes it.
fn look_again_for_api(waited: Duration) -> Option<Duration> {
    (waited < WAIT_FOR_API_ON_A_TIMER).then(|| next_look(waited))
}

/// The plans to look at again after each of `changes` (a CRD or an APIService
/// changed): those of `plans` waiting for an API, at once and again over the next
/// half minute ([`LOOKS_AFTER_AN_API_CHANGE`]), read from the store at each look.
pub fn wake_on_api_changes(
    changes: impl Stream<Item = ()> + Send + 'static,
    plans: Store<InstallPlan>,
) -> impl Stream<Item = ObjectRef<InstallPlan>> + Send + 'static {
    changes.flat_map_unordered(None, move |()| {
        let plans = plans.clone();
        stream::iter(LOOKS_AFTER_AN_API_CHANGE)
            .then(move |pause| {
                let plans = plans.clone();
                async move {
                    tokio::time::sleep(pause).await;
                    plans
                        .state()
                        .into_iter()
                        .filter(|plan| waits_for_api(plan))
                        .map(|plan| ObjectRef::from_obj(plan.as_ref()))
                        .collect::<Vec<_>>()
                }
            })
            .flat_map(stream::iter)
            .boxed()
    })
}

/// Whether `plan` is installing and a step waits for its API to be served.
pub fn waits_for_api(plan: &InstallPlan) -> bool {
    plan.status.as_ref().is_some_and(|status| {
        status.phase == InstallPlanPhase::Installing
            && status
                .plan
                .iter()
                .flatten()
                .any(|step| step.status == StepStatus::WaitingForApi)
    })
}

/// Whether the plan has been retrying for longer than `timeout`.
fn retry_expired(status: &InstallPlanStatus, timeout: Duration) -> bool {
    let Some(start) = &status.start_time else {
        return false;
    };
    let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(start.0);
    elapsed.as_secs() >= timeout.as_secs() as i64
}

/// The error policy of the controller.
pub fn error_policy(plan: Arc<InstallPlan>, error: &Error, ctx: Arc<Context>) -> Action {
    olm_runtime::error_policy(CONTROLLER, plan.as_ref(), error, &ctx.reconciles)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(bundle: &str, kind: &str, status: StepStatus) -> Step {
        Step {
            resolving: bundle.into(),
            resource: olm_api::v1alpha1::StepResource {
                catalog_source: "demo".into(),
                catalog_source_namespace: "olm".into(),
                group: String::new(),
                version: "v1".into(),
                kind: kind.into(),
                name: format!("{bundle}-{kind}").to_lowercase(),
                manifest: None,
            },
            status,
            optional: None,
        }
    }

    /// Progress is recorded at the last step of each bundle (table).
    #[test]
    fn a_bundle_ends_where_the_next_step_resolves_another() {
        let steps = [
            step("db.v1", "ConfigMap", StepStatus::NotPresent),
            step("db.v1", "Service", StepStatus::NotPresent),
            step("app.v1", "ConfigMap", StepStatus::NotPresent),
        ];
        let ends: Vec<bool> = (0..steps.len()).map(|i| ends_bundle(&steps, i)).collect();
        assert_eq!(ends, [false, true, true]);
    }

    #[test]
    fn a_plan_with_an_unsupported_step_says_which() {
        let mut steps = vec![step("db.v1", "ConfigMap", StepStatus::Created)];
        assert_eq!(unsupported_step(&steps), None);
        steps.push(step("db.v1", "Pod", StepStatus::UnsupportedResource));
        assert_eq!(
            unsupported_step(&steps).as_deref(),
            Some("step Pod db.v1-pod of bundle db.v1: an install plan may not create objects of kind Pod")
        );
    }

    #[test]
    fn each_cause_has_its_handling() {
        assert_eq!(handling(StepCause::NotLeader), Handling::Stop);
        assert_eq!(handling(StepCause::WaitingForApi), Handling::WaitForApi);
    }

    #[test]
    fn a_plan_that_keeps_waiting_is_looked_at_less_often() {
        assert_eq!(next_look(Duration::ZERO), RETRY);
        assert_eq!(next_look(Duration::from_secs(29)), RETRY);
        assert_eq!(next_look(Duration::from_secs(100)), Duration::from_secs(10));
        assert_eq!(next_look(Duration::from_secs(600)), MAX_RETRY);
        assert_eq!(next_look(Duration::from_secs(86_400)), MAX_RETRY);
        assert_eq!(
            handling(StepCause::Api(ErrorClass::Forbidden)),
            Handling::Retry { until_timeout: false },
            "a missing permission is retried for ever, as OLM does"
        );
        for cause in [
            StepCause::NotReady,
            StepCause::Api(ErrorClass::Transient),
            StepCause::Api(ErrorClass::Conflict),
            StepCause::Api(ErrorClass::Gone),
        ] {
            assert_eq!(
                handling(cause),
                Handling::Retry { until_timeout: true },
                "{cause:?}"
            );
        }
        assert_eq!(handling(StepCause::Invalid), Handling::Fail);
        assert_eq!(handling(StepCause::Api(ErrorClass::Terminal)), Handling::Fail);
    }

    #[test]
    fn a_plan_waiting_for_an_api_stops_looking_on_a_timer() {
        assert_eq!(look_again_for_api(Duration::ZERO), Some(RETRY));
        assert_eq!(
            look_again_for_api(Duration::from_secs(50)),
            Some(Duration::from_secs(5))
        );
        assert_eq!(look_again_for_api(WAIT_FOR_API_ON_A_TIMER), None);
        assert_eq!(look_again_for_api(Duration::from_secs(86_400)), None);
    }

    #[test]
    fn only_an_installing_plan_with_a_step_waiting_for_its_api_waits_for_one() {
        let plan = |phase: &str, step: &str| -> InstallPlan {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "InstallPlan",
                "metadata": {"name": "install-1", "namespace": "team"},
                "spec": {"clusterServiceVersionNames": [], "approval": "Automatic", "approved": true},
                "status": {
                    "phase": phase,
                    "catalogSources": [],
                    "plan": [{
                        "resolving": "db.v1.0.0",
                        "status": step,
                        "resource": {
                            "sourceName": "cat", "sourceNamespace": "olm", "group": "demo.io",
                            "version": "v1", "kind": "Database", "name": "db",
                        },
                    }],
                },
            }))
            .expect("a valid InstallPlan")
        };
        assert!(waits_for_api(&plan("Installing", "WaitingForApi")));
        assert!(!waits_for_api(&plan("Installing", "Created")));
        assert!(!waits_for_api(&plan("Failed", "WaitingForApi")));
    }
}
