//! Metrics: OLM's `csv_*` series with OLM's names and labels, registered on
//! the registry of [`olm_runtime::metrics::Metrics`], which also carries the
//! reconcile, leader and write metrics (no per-object labels on those).

use olm_api::v1alpha1::{ClusterServiceVersion, CsvPhase};
use olm_runtime::metrics::{Metrics as RuntimeMetrics, ReconcileTimer, register};
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// Every metric of olm-operator, in one registry.
#[derive(Clone, Debug)]
pub struct Metrics {
    runtime: RuntimeMetrics,
    /// `csv_count`: the number of ClusterServiceVersions.
    pub csv_count: IntGauge,
    /// `csv_succeeded{namespace,name,version}`: 1 when the CSV is Succeeded, else 0.
    pub csv_succeeded: IntGaugeVec,
    /// `csv_abnormal{namespace,name,version,phase,reason}`: 1 for a CSV that is not Succeeded.
    pub csv_abnormal: IntGaugeVec,
    /// `csv_upgrade_count`: how many CSVs went Replacing.
    pub csv_upgrade_count: IntCounter,
    /// `olm_rs_actions_total{operator,action,outcome}`: Actions ended.
    pub actions: IntCounterVec,
    /// `olm_rs_action_duration_seconds{operator,action}`: how long Actions
    /// ran, from their first task's start to their end.
    pub action_duration: HistogramVec,
}

impl Metrics {
    /// OLM's CSV metrics, registered beside the runtime's on its registry.
    pub fn register(runtime: &RuntimeMetrics) -> Result<Self, prometheus::Error> {
        let registry = runtime.registry();
        let csv_count = register(
            registry,
            IntGauge::new("csv_count", "Number of CSVs successfully registered")?,
        )?;
        let csv_succeeded = register(
            registry,
            IntGaugeVec::new(
                Opts::new("csv_succeeded", "Successful CSV install"),
                &["namespace", "name", "version"],
            )?,
        )?;
        let csv_abnormal = register(
            registry,
            IntGaugeVec::new(
                Opts::new("csv_abnormal", "CSV is not installed"),
                &["namespace", "name", "version", "phase", "reason"],
            )?,
        )?;
        let csv_upgrade_count = register(
            registry,
            IntCounter::new("csv_upgrade_count", "Monotonic count of CSV upgrades")?,
        )?;
        let (actions, action_duration) = register_actions(registry)?;
        Ok(Self {
            runtime: runtime.clone(),
            csv_count,
            csv_succeeded,
            csv_abnormal,
            csv_upgrade_count,
            actions,
            action_duration,
        })
    }

    /// Counts an ended Action of `operator`'s `action`, and how long it ran
    /// when it ran at all.
    pub fn action_ended(&self, operator: &str, action: &str, outcome: &str, seconds: Option<f64>) {
        self.actions.with_label_values(&[operator, action, outcome]).inc();
        if let Some(seconds) = seconds {
            self.action_duration
                .with_label_values(&[operator, action])
                .observe(seconds);
        }
    }

    /// The runtime's metrics (leader election and writes register there).
    pub fn runtime(&self) -> &RuntimeMetrics {
        &self.runtime
    }

    /// The registry, for the admin server to serve.
    pub fn registry(&self) -> &Registry {
        self.runtime.registry()
    }

    /// Every metric in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        // Encoding into a Vec cannot fail on I/O; a metric family the encoder
        // rejects would be a programming error, and then the page is empty.
        if TextEncoder::new()
            .encode(&self.registry().gather(), &mut buffer)
            .is_err()
        {
            return String::new();
        }
        String::from_utf8(buffer).unwrap_or_default()
    }

    /// Counts a reconcile of `controller` and times it until the guard drops.
    pub fn reconcile_started(&self, controller: &'static str) -> ReconcileTimer {
        self.runtime.reconcile.start(controller)
    }

    /// Moves a CSV's `csv_succeeded` and `csv_abnormal` series from its old
    /// phase and reason to its new ones, as OLM does on every status change.
    pub fn csv_status_changed(&self, old: &ClusterServiceVersion, new: &ClusterServiceVersion) {
        let (namespace, name, version) = csv_labels(old);
        let (old_phase, old_reason) = phase_labels(old);
        // The series may not exist (first status); removing nothing is fine.
        let _ =
            self.csv_abnormal
                .remove_label_values(&[&namespace, &name, &version, &old_phase, &old_reason]);
        let (namespace, name, version) = csv_labels(new);
        let succeeded = self
            .csv_succeeded
            .with_label_values(&[&namespace, &name, &version]);
        let phase = new.status.as_ref().and_then(|s| s.phase);
        if phase == Some(CsvPhase::Succeeded) {
            succeeded.set(1);
        } else {
            succeeded.set(0);
            let (new_phase, new_reason) = phase_labels(new);
            self.csv_abnormal
                .with_label_values(&[&namespace, &name, &version, &new_phase, &new_reason])
                .set(1);
        }
    }

    /// Drops every series of a deleted CSV.
    pub fn csv_deleted(&self, csv: &ClusterServiceVersion) {
        let (namespace, name, version) = csv_labels(csv);
        let (phase, reason) = phase_labels(csv);
        let _ = self
            .csv_succeeded
            .remove_label_values(&[&namespace, &name, &version]);
        let _ = self
            .csv_abnormal
            .remove_label_values(&[&namespace, &name, &version, &phase, &reason]);
    }
}

fn csv_labels(csv: &ClusterServiceVersion) -> (String, String, String) {
    (
        csv.metadata.namespace.clone().unwrap_or_default(),
        csv.metadata.name.clone().unwrap_or_default(),
        csv.spec.version.clone().unwrap_or_default(),
    )
}

fn phase_labels(csv: &ClusterServiceVersion) -> (String, String) {
    let status = csv.status.as_ref();
    (
        status.and_then(|s| s.phase).map(enum_string).unwrap_or_default(),
        status.and_then(|s| s.reason).map(enum_string).unwrap_or_default(),
    )
}

/// The wire string of a serde enum (`CsvPhase::Succeeded` → `Succeeded`).
pub fn enum_string<T: serde::Serialize>(value: T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The Action metrics, registered on `registry`.
fn register_actions(registry: &Registry) -> Result<(IntCounterVec, HistogramVec), prometheus::Error> {
    let actions = register(
        registry,
        IntCounterVec::new(
            Opts::new(
                "olm_rs_actions_total",
                "Actions ended, by operator, action and outcome",
            ),
            &["operator", "action", "outcome"],
        )?,
    )?;
    let duration = register(
        registry,
        HistogramVec::new(
            HistogramOpts::new(
                "olm_rs_action_duration_seconds",
                "How long Actions ran, from their first task's start to their end",
            )
            .buckets(vec![0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0]),
            &["operator", "action"],
        )?,
    )?;
    Ok((actions, duration))
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::{ClusterServiceVersionStatus, CsvReason};

    use super::*;

    fn csv(phase: CsvPhase, reason: CsvReason) -> ClusterServiceVersion {
        let mut csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "demo.v1.0.0", "namespace": "ops"},
            "spec": {"displayName": "Demo", "version": "1.0.0", "install": {"strategy": "deployment"}},
        }))
        .expect("a valid CSV");
        csv.status = Some(ClusterServiceVersionStatus {
            phase: Some(phase),
            reason: Some(reason),
            ..Default::default()
        });
        csv
    }

    #[test]
    fn abnormal_series_follow_the_phase_and_disappear_on_success() {
        let metrics =
            Metrics::register(&RuntimeMetrics::new().expect("runtime metrics")).expect("metrics register");
        let pending = csv(CsvPhase::Pending, CsvReason::RequirementsNotMet);
        let succeeded = csv(CsvPhase::Succeeded, CsvReason::InstallSuccessful);
        metrics.csv_status_changed(&pending, &pending);
        let text = metrics.render();
        assert!(text.contains(r#"csv_abnormal{name="demo.v1.0.0",namespace="ops",phase="Pending",reason="RequirementsNotMet",version="1.0.0"} 1"#), "{text}");
        metrics.csv_status_changed(&pending, &succeeded);
        let text = metrics.render();
        assert!(!text.contains("csv_abnormal{"), "{text}");
        assert!(
            text.contains(r#"csv_succeeded{name="demo.v1.0.0",namespace="ops",version="1.0.0"} 1"#),
            "{text}"
        );
        metrics.csv_deleted(&succeeded);
        assert!(!metrics.render().contains("csv_succeeded{"));
    }
}
