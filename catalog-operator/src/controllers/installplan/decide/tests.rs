//! The decisions of the InstallPlan controller, from what was read (tables).

use k8s_openapi::jiff::Timestamp;
use olm_api::v1alpha1::{ConditionStatus, InstallPlanConditionType, StepResource};

use super::*;

/// The reconcile's time.
const NOW: i64 = 1_000_000;

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("a time"))
}

fn step(bundle: &str, kind: &str, status: StepStatus) -> Step {
    let group = match kind {
        "CustomResourceDefinition" => "apiextensions.k8s.io",
        "ClusterServiceVersion" | "Subscription" => olm_api::OPERATORS_GROUP,
        _ => "",
    };
    Step {
        resolving: bundle.into(),
        resource: StepResource {
            catalog_source: "demo".into(),
            catalog_source_namespace: "olm".into(),
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            name: format!("{bundle}-{kind}").to_lowercase(),
            manifest: None,
        },
        status,
        optional: None,
    }
}

/// A plan of two bundles: db.v1 (CRD, CSV) then app.v1 (ConfigMap), its steps in
/// `steps`, started `started` seconds before [`NOW`] (not started: `None`).
fn status(phase: InstallPlanPhase, steps: [StepStatus; 3], started: Option<i64>) -> InstallPlanStatus {
    let [crd, csv, config] = steps;
    InstallPlanStatus {
        observed_generation: Some(1),
        phase,
        conditions: None,
        catalog_sources: vec!["demo".into()],
        plan: Some(vec![
            step("db.v1", "CustomResourceDefinition", crd),
            step("db.v1", "ClusterServiceVersion", csv),
            step("app.v1", "ConfigMap", config),
        ]),
        bundle_lookups: None,
        attenuated_service_account_ref: None,
        start_time: started.map(|ago| at(NOW - ago)),
        message: None,
    }
}

fn ok(index: usize, done: StepStatus) -> Applied {
    Applied {
        index,
        outcome: Ok(done),
    }
}

fn failed(index: usize, cause: StepCause, message: &str) -> Applied {
    Applied {
        index,
        outcome: Err(StepFailure {
            cause,
            message: message.into(),
        }),
    }
}

use InstallPlanPhase::{Complete, Failed, Installing, Planning, RequiresApproval};
use StepStatus::{Created, NotPresent, Present, UnsupportedResource, WaitingForApi};

/// One row: the plan as read, its approval, what applying reported; the
/// decision wanted.
struct Case {
    name: &'static str,
    read: InstallPlanStatus,
    approved: bool,
    applied: Vec<Applied>,
    /// The phase, steps and message of the status written; `None`: no write.
    writes: Option<(InstallPlanPhase, [StepStatus; 3], Option<&'static str>)>,
    next: Next,
    transition: Option<Transition>,
}

/// The decision for `case`, with a retry timeout of a minute.
fn decision(case: &Case) -> Decision {
    let now = at(NOW);
    decide(&Read {
        status: &case.read,
        written: &case.read,
        approved: case.approved,
        generation: Some(1),
        applied: &case.applied,
        now: &now,
        retry_timeout: Duration::from_secs(60),
    })
}

fn check(case: &Case) {
    let decision = decision(case);
    let name = case.name;
    assert_eq!(decision.next, case.next, "{name}: next");
    assert_eq!(decision.transition, case.transition, "{name}: transition");
    let written = decision.status.as_ref().map(|s| {
        let steps: Vec<StepStatus> = s.plan.iter().flatten().map(|s| s.status).collect();
        (s.phase, steps, s.message.as_deref())
    });
    let wanted = case
        .writes
        .as_ref()
        .map(|(phase, steps, message)| (*phase, steps.to_vec(), *message));
    assert_eq!(written, wanted, "{name}: status written");
}

const NOT_SERVED: &str = "ConfigMap app.v1-configmap (v1/ConfigMap): the API server does not serve it yet";
const UNAVAILABLE: &str = "ConfigMap app.v1-configmap (v1/ConfigMap): etcd is down (ServiceUnavailable)";
const GAVE_UP: &str =
    "gave up retrying: ConfigMap app.v1-configmap (v1/ConfigMap): etcd is down (ServiceUnavailable)";
const INVALID: &str = "CustomResourceDefinition db.v1-customresourcedefinition (v1/CustomResourceDefinition): \
                       the new CRD drops version(s) v1 that objects are stored in";

#[test]
fn approval_and_progress() {
    let fresh = [NotPresent, NotPresent, NotPresent];
    let first_done = [Created, Created, NotPresent];
    let cases = [
        Case {
            name: "a Manual plan waits for approval",
            read: status(RequiresApproval, fresh, None),
            approved: false,
            applied: vec![],
            writes: None,
            next: Next::LookAgain(None),
            transition: None,
        },
        Case {
            name: "an approved plan applies its steps in stages, recording nothing yet",
            read: status(RequiresApproval, fresh, None),
            approved: true,
            applied: vec![],
            writes: None,
            next: Next::Apply(vec![vec![0], vec![1], vec![2]]),
            transition: Some(Transition::Approved),
        },
        Case {
            name: "after some steps the plan records them, Installing, and goes on",
            read: status(RequiresApproval, fresh, None),
            approved: true,
            applied: vec![ok(0, Created), ok(1, Created)],
            writes: Some((Installing, first_done, None)),
            next: Next::Apply(vec![vec![2]]),
            transition: None,
        },
        Case {
            name: "all steps done: Complete",
            read: status(Installing, first_done, Some(5)),
            approved: true,
            applied: vec![ok(2, Present)],
            writes: Some((Complete, [Created, Created, Present], None)),
            next: Next::LookAgain(None),
            transition: Some(Transition::Completed),
        },
        Case {
            name: "an approved plan with nothing left to apply completes at once",
            read: status(RequiresApproval, [Present, Present, Present], None),
            approved: true,
            applied: vec![],
            writes: Some((Complete, [Present, Present, Present], None)),
            next: Next::LookAgain(None),
            transition: Some(Transition::Completed),
        },
        Case {
            name: "a plan resumes after the steps already Present or Created",
            read: status(Installing, [Present, Created, NotPresent], Some(5)),
            approved: true,
            applied: vec![],
            writes: None,
            next: Next::Apply(vec![vec![2]]),
            transition: None,
        },
        Case {
            name: "a plan resumes at the step that waited for its API",
            read: status(Installing, [Created, Created, WaitingForApi], Some(5)),
            approved: true,
            applied: vec![ok(2, Created)],
            writes: Some((Complete, [Created, Created, Created], None)),
            next: Next::LookAgain(None),
            transition: Some(Transition::Completed),
        },
    ];
    for case in &cases {
        check(case);
    }
}

#[test]
fn done_plans_and_plans_not_planned_are_left_alone() {
    for phase in [Complete, Failed, Planning] {
        for approved in [false, true] {
            check(&Case {
                name: "a Complete, Failed or Planning plan: nothing to do",
                read: status(phase, [NotPresent, NotPresent, NotPresent], Some(5)),
                approved,
                applied: vec![],
                writes: None,
                next: Next::LookAgain(None),
                transition: None,
            });
        }
    }
}

#[test]
fn failures_wait_retry_or_fail() {
    let first_done = [Created, Created, NotPresent];
    let installing = |started: i64| status(Installing, first_done, Some(started));
    let waiting = [Created, Created, WaitingForApi];
    let transient = StepCause::Api(ErrorClass::Transient);
    let cases = [
        Case {
            name: "a step waiting for its API: WaitingForApi, and a look soon",
            read: installing(0),
            approved: true,
            applied: vec![failed(2, StepCause::WaitingForApi, NOT_SERVED)],
            writes: Some((Installing, waiting, Some(NOT_SERVED))),
            next: Next::LookAgain(Some(RETRY)),
            transition: None,
        },
        Case {
            name: "a step that waited for its API for long: only a change wakes it",
            read: installing(120),
            approved: true,
            applied: vec![failed(2, StepCause::WaitingForApi, NOT_SERVED)],
            writes: Some((Installing, waiting, Some(NOT_SERVED))),
            next: Next::LookAgain(None),
            transition: None,
        },
        Case {
            name: "a transient failure is retried within the retry timeout",
            read: installing(30),
            approved: true,
            applied: vec![failed(2, transient, UNAVAILABLE)],
            writes: Some((Installing, first_done, Some(UNAVAILABLE))),
            next: Next::LookAgain(Some(RETRY)),
            transition: None,
        },
        Case {
            name: "a transient failure at the retry timeout fails the plan",
            read: installing(60),
            approved: true,
            applied: vec![failed(2, transient, UNAVAILABLE)],
            writes: Some((Failed, first_done, Some(GAVE_UP))),
            next: Next::LookAgain(None),
            transition: Some(Transition::Failed),
        },
        Case {
            name: "a missing permission is retried for ever, as OLM does",
            read: installing(600),
            approved: true,
            applied: vec![failed(2, StepCause::Api(ErrorClass::Forbidden), UNAVAILABLE)],
            writes: Some((Installing, first_done, Some(UNAVAILABLE))),
            next: Next::LookAgain(Some(MAX_RETRY)),
            transition: None,
        },
        Case {
            name: "a permanent failure fails the plan, naming the step",
            read: status(Installing, [NotPresent, NotPresent, NotPresent], Some(0)),
            approved: true,
            applied: vec![failed(0, StepCause::Invalid, INVALID)],
            writes: Some((Failed, [NotPresent, NotPresent, NotPresent], Some(INVALID))),
            next: Next::LookAgain(None),
            transition: Some(Transition::Failed),
        },
        Case {
            name: "a step of a kind a plan may not create fails the plan before any apply",
            read: status(Installing, [Created, Created, UnsupportedResource], Some(0)),
            approved: true,
            applied: vec![],
            writes: Some((
                Failed,
                [Created, Created, UnsupportedResource],
                Some(
                    "step ConfigMap app.v1-configmap of bundle app.v1: an install plan may not create objects of kind ConfigMap",
                ),
            )),
            next: Next::LookAgain(None),
            transition: Some(Transition::Failed),
        },
        Case {
            name: "of the steps of a stage that failed, the first in plan order is shown",
            read: status(Installing, [Created, NotPresent, NotPresent], Some(0)),
            approved: true,
            applied: vec![
                failed(1, transient, UNAVAILABLE),
                failed(2, StepCause::WaitingForApi, NOT_SERVED),
            ],
            writes: Some((Installing, [Created, NotPresent, NotPresent], Some(UNAVAILABLE))),
            next: Next::LookAgain(Some(RETRY)),
            transition: None,
        },
        Case {
            name: "a replica that stopped leading stops and writes nothing",
            read: installing(0),
            approved: true,
            applied: vec![failed(2, StepCause::NotLeader, "lost the lease")],
            writes: None,
            next: Next::Stop("lost the lease".into()),
            transition: None,
        },
    ];
    for case in &cases {
        check(case);
    }
}

#[test]
fn a_failed_plan_says_why_in_its_conditions() {
    let read = status(Installing, [NotPresent, NotPresent, NotPresent], Some(0));
    let case = Case {
        name: "permanent",
        read,
        approved: true,
        applied: vec![failed(0, StepCause::Invalid, INVALID)],
        writes: None,
        next: Next::LookAgain(None),
        transition: None,
    };
    let written = decision(&case).status.expect("a status");
    let installed = written
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(InstallPlanConditionType::Installed))
        .expect("an Installed condition");
    assert_eq!(installed.status, Some(ConditionStatus::False));
    assert_eq!(
        installed.reason,
        Some(InstallPlanConditionReason::ComponentFailed)
    );
    assert_eq!(installed.message.as_deref(), Some(INVALID));
    assert_eq!(written.observed_generation, Some(1));
}

#[test]
fn a_status_already_written_is_not_written_again() {
    let now = at(NOW);
    let read = status(Installing, [Created, Created, NotPresent], Some(0));
    let applied = [failed(2, StepCause::WaitingForApi, NOT_SERVED)];
    let decide_after = |written: &InstallPlanStatus| {
        decide(&Read {
            status: &read,
            written,
            approved: true,
            generation: Some(1),
            applied: &applied,
            now: &now,
            retry_timeout: Duration::from_secs(60),
        })
    };
    let first = decide_after(&read).status.expect("the wait is recorded");
    let again = decide_after(&first);
    assert_eq!(again.status, None);
    assert_eq!(again.next, Next::LookAgain(Some(RETRY)));
}

#[test]
fn the_plan_starts_when_it_is_first_installed() {
    let read = status(RequiresApproval, [NotPresent, NotPresent, NotPresent], None);
    let case = Case {
        name: "started",
        read,
        approved: true,
        applied: vec![ok(0, Created), ok(1, Created)],
        writes: None,
        next: Next::Apply(vec![vec![2]]),
        transition: None,
    };
    let written = decision(&case).status.expect("progress");
    assert_eq!(written.start_time, Some(at(NOW)));
}

/// The steps not done are applied in one pass: every CRD of the plan, then
/// every CSV, then the rest, in plan order within each stage (table).
#[test]
fn a_plan_applies_its_crds_then_its_csvs_then_the_rest() {
    let steps = [
        step("db.v1", "CustomResourceDefinition", NotPresent),
        step("db.v1", "ClusterServiceVersion", NotPresent),
        step("db.v1", "Subscription", NotPresent),
        step("app.v1", "CustomResourceDefinition", NotPresent),
        step("app.v1", "ClusterServiceVersion", NotPresent),
        step("app.v1", "ConfigMap", NotPresent),
    ];
    let stages: Vec<Stage> = steps.iter().map(Stage::of).collect();
    use Stage::{Crds, Csvs, Rest};
    assert_eq!(stages, [Crds, Csvs, Rest, Crds, Csvs, Rest]);
    assert_eq!(next_batch(&steps), Some(vec![vec![0, 3], vec![1, 4], vec![2, 5]]));
    let mut resumed = steps.clone();
    for i in [0, 1, 3] {
        resumed[i].status = Present;
    }
    assert_eq!(next_batch(&resumed), Some(vec![vec![4], vec![2, 5]]));
    resumed[5].status = WaitingForApi;
    for i in [2, 4] {
        resumed[i].status = Created;
    }
    assert_eq!(next_batch(&resumed), Some(vec![vec![5]]));
    resumed[5].status = Created;
    assert_eq!(next_batch(&resumed), None);
}

#[test]
fn a_plan_with_an_unsupported_step_says_which() {
    let mut steps = vec![step("db.v1", "ConfigMap", Created)];
    assert_eq!(unsupported_step(&steps), None);
    steps.push(step("db.v1", "Pod", UnsupportedResource));
    assert_eq!(
        unsupported_step(&steps).as_deref(),
        Some("step Pod db.v1-pod of bundle db.v1: an install plan may not create objects of kind Pod")
    );
}

#[test]
fn each_cause_has_its_handling() {
    assert_eq!(handling(StepCause::NotLeader), Handling::Stop);
    assert_eq!(handling(StepCause::WaitingForApi), Handling::WaitForApi);
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
fn a_plan_that_keeps_waiting_is_looked_at_less_often() {
    assert_eq!(next_look(Duration::ZERO), RETRY);
    assert_eq!(next_look(Duration::from_secs(29)), RETRY);
    assert_eq!(next_look(Duration::from_secs(100)), Duration::from_secs(10));
    assert_eq!(next_look(Duration::from_secs(600)), MAX_RETRY);
    assert_eq!(next_look(Duration::from_secs(86_400)), MAX_RETRY);
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
