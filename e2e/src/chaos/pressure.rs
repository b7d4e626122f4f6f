//! The API server under pressure, through API Priority and Fairness: every request of both
//! operators' ServiceAccounts goes, by a FlowSchema of the campaign, to a priority level of its
//! own. That level is generous while the campaign runs; during a pressure fault it is squeezed to
//! the fewest seats a level with a share gets, or starved with no share at all, rejecting (HTTP
//! 429) what does not fit at once. The API
//! server's flow-control counters of the FlowSchema give the operators' request rate, in normal
//! times and under 429s: an operator that hot-loops on 429s shows a rate far above the normal.

use std::time::{Duration, Instant};

use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind},
};
use olm_testkit::identity::{self, Binary};
use serde_json::{Value, json};

/// The FlowSchema and priority level of the operators' requests.
pub const NAME: &str = "olm-rs-chaos-operators";

/// The shape of the operators' priority level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// As many seats as the busiest default level (workload-low), queued when full.
    Normal,
    /// One share (a few seats), nothing borrowed, and a 429 for what does not fit.
    Squeezed,
    /// No share at all, nothing borrowed: the API server still serves about one request of
    /// theirs at a time, and answers the rest with 429.
    Starved,
}

/// The PriorityLevelConfiguration `level` describes.
pub fn priority_level(level: Level) -> Value {
    let limited = match level {
        Level::Normal => json!({
            "nominalConcurrencyShares": 100, "lendablePercent": 0,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 6, "queueLengthLimit": 50}},
        }),
        Level::Squeezed => json!({
            "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Reject"},
        }),
        Level::Starved => json!({
            "nominalConcurrencyShares": 0, "lendablePercent": 0, "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Reject"},
        }),
    };
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": NAME},
        "spec": {"type": "Limited", "limited": limited},
    })
}

/// The FlowSchema that sends every request of both operators' ServiceAccounts (as
/// `manifests/` names them) to the campaign's priority level, ahead of the default schemas.
pub fn flow_schema() -> Value {
    let subjects: Vec<Value> = [Binary::OlmOperator, Binary::CatalogOperator]
        .into_iter()
        .map(identity::deployment)
        .map(|d| {
            json!({"kind": "ServiceAccount",
                   "serviceAccount": {"name": d.service_account, "namespace": d.namespace}})
        })
        .collect();
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": NAME},
        "spec": {
            "priorityLevelConfiguration": {"name": NAME},
            "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": subjects,
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                   "clusterScope": true, "namespaces": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            }],
        },
    })
}

fn api(client: &Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("flowcontrol.apiserver.k8s.io", "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural))
}

async fn apply(api: &Api<DynamicObject>, object: Value) {
    olm_testkit::apply(api, &olm_testkit::dynamic(object, "a flow-control object")).await;
}

/// Shapes the operators' priority level as `level`, making it and the FlowSchema if needed.
pub async fn set(client: &Client, level: Level) {
    apply(
        &api(
            client,
            "PriorityLevelConfiguration",
            "prioritylevelconfigurations",
        ),
        priority_level(level),
    )
    .await;
    apply(&api(client, "FlowSchema", "flowschemas"), flow_schema()).await;
}

/// Removes the FlowSchema and its priority level: the operators' requests go back to the
/// default schemas.
pub async fn remove(client: &Client) {
    for (kind, plural) in [
        ("FlowSchema", "flowschemas"),
        ("PriorityLevelConfiguration", "prioritylevelconfigurations"),
    ] {
        let _ = api(client, kind, plural)
            .delete(NAME, &DeleteParams::default())
            .await;
    }
}

/// The requests the API server dispatched and rejected for the campaign's FlowSchema, from its
/// `/metrics` text (summed over priority levels and reasons).
pub fn counts(metrics: &str) -> (u64, u64) {
    let sum = |name: &str| -> u64 {
        metrics
            .lines()
            .filter(|line| line.starts_with(name) && line[name.len()..].starts_with('{'))
            .filter(|line| line.contains(&format!(r#"flow_schema="{NAME}""#)))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    (
        sum("apiserver_flowcontrol_dispatched_requests_total"),
        sum("apiserver_flowcontrol_rejected_requests_total"),
    )
}

/// The operators' requests over some time: how many, how many were rejected, and how long.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Span {
    /// Requests (dispatched and rejected).
    pub requests: u64,
    /// Requests rejected with 429.
    pub rejected: u64,
    /// The time they were counted over.
    pub time: Duration,
}

impl Span {
    /// Requests per second, or 0 over no time.
    pub fn rate(&self) -> f64 {
        let secs = self.time.as_secs_f64();
        if secs > 0.0 {
            self.requests as f64 / secs
        } else {
            0.0
        }
    }
}

/// Counts the operators' requests in normal times and while squeezed, from successive readings
/// of the API server's counters.
#[derive(Debug, Default)]
pub struct Meter {
    last: Option<(Instant, u64, u64)>,
    /// Outside pressure faults.
    pub normal: Span,
    /// While squeezed to a few seats.
    pub squeezed: Span,
    /// While starved of seats.
    pub starved: Span,
}

impl Meter {
    /// Adds what the counters say happened since the last reading to the span of `level`. A
    /// counter lower than at the last reading was reset (the API server restarted): its new
    /// value is what happened since.
    pub fn add(&mut self, level: Level, at: Instant, (dispatched, rejected): (u64, u64)) {
        if let Some((before, last_dispatched, last_rejected)) = self.last {
            let delta = |now: u64, last: u64| if now >= last { now - last } else { now };
            let span = match level {
                Level::Normal => &mut self.normal,
                Level::Squeezed => &mut self.squeezed,
                Level::Starved => &mut self.starved,
            };
            let rejected_now = delta(rejected, last_rejected);
            span.requests += delta(dispatched, last_dispatched) + rejected_now;
            span.rejected += rejected_now;
            span.time += at.saturating_duration_since(before);
        }
        self.last = Some((at, dispatched, rejected));
    }

    /// Reads the API server's counters and adds them to the span of `level`; a failed read
    /// (the API server restarting) is skipped.
    pub async fn read(&mut self, client: &Client, level: Level) {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .expect("a request");
        if let Ok(text) = client.request_text(request).await {
            self.add(level, Instant::now(), counts(&text));
        }
    }

    /// The figures' lines: the operators' request rate squeezed and starved, against the
    /// normal one.
    pub fn summary(&self) -> String {
        let line = |what: &str, span: &Span| {
            format!(
                "operators' requests {what}: {:.1}/s ({} of {} rejected with 429 over {:.1?})",
                span.rate(),
                span.rejected,
                span.requests,
                span.time
            )
        };
        [
            line("squeezed to a few seats", &self.squeezed),
            line("starved of seats", &self.starved),
            line("otherwise", &self.normal),
        ]
        .join("\n  ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_are_those_of_the_campaigns_flow_schema_only() {
        let metrics = format!(
            "# TYPE apiserver_flowcontrol_dispatched_requests_total counter\n\
             apiserver_flowcontrol_dispatched_requests_total{{flow_schema=\"{NAME}\",priority_level=\"{NAME}\"}} 1.234e+03\n\
             apiserver_flowcontrol_dispatched_requests_total{{flow_schema=\"exempt\",priority_level=\"exempt\"}} 99\n\
             apiserver_flowcontrol_rejected_requests_total{{flow_schema=\"{NAME}\",priority_level=\"{NAME}\",reason=\"concurrency-limit\"}} 7\n\
             apiserver_flowcontrol_rejected_requests_total{{flow_schema=\"{NAME}\",priority_level=\"{NAME}\",reason=\"queue-full\"}} 3\n\
             apiserver_flowcontrol_dispatched_requests_total_other{{flow_schema=\"{NAME}\"}} 5\n"
        );
        assert_eq!(counts(&metrics), (1234, 10));
    }

    #[test]
    fn a_meter_splits_normal_and_squeezed_time_and_survives_a_counter_reset() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut meter = Meter::default();
        meter.add(Level::Normal, at(0), (100, 0));
        meter.add(Level::Normal, at(10), (200, 0));
        meter.add(Level::Squeezed, at(15), (240, 30));
        // The API server restarted: its counters start again from zero.
        meter.add(Level::Normal, at(25), (50, 0));
        assert_eq!(
            meter.normal,
            Span {
                requests: 150,
                rejected: 0,
                time: Duration::from_secs(20)
            }
        );
        assert_eq!(
            meter.squeezed,
            Span {
                requests: 70,
                rejected: 30,
                time: Duration::from_secs(5)
            }
        );
        assert!((meter.squeezed.rate() - 14.0).abs() < 1e-9);
        assert_eq!(Span::default().rate(), 0.0);
    }

    #[test]
    fn the_squeezed_level_rejects_and_borrows_nothing() {
        let level = priority_level(Level::Squeezed);
        assert_eq!(level["spec"]["limited"]["limitResponse"]["type"], "Reject");
        assert_eq!(level["spec"]["limited"]["borrowingLimitPercent"], 0);
        let schema = flow_schema();
        assert_eq!(
            schema["spec"]["rules"][0]["subjects"].as_array().map(Vec::len),
            Some(2)
        );
    }
}
