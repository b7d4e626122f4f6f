//! The Prometheus registry of a binary and the metrics every controller shares.
//!
//! One [`Metrics`] is built in `main` and passed down; binaries register their own
//! OLM-named metrics (`csv_count`, `subscription_sync_total`, ...) on
//! [`Metrics::registry`]. Labels are low-cardinality by construction: controller
//! names, error categories and outcomes are `&'static str`, never object names.

use std::time::Instant;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, core::Collector,
};

/// Buckets of reconcile durations, in seconds: from a cache hit to a slow install.
const RECONCILE_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A binary's registry and the runtime's own metrics on it.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    /// Reconcile runs, errors and durations by controller.
    pub reconcile: ReconcileMetrics,
    /// Leadership of this replica.
    pub leader: LeaderMetrics,
    /// Writes through [`crate::apply::Writer`], by verb and outcome.
    pub writes: WriteMetrics,
}

impl Metrics {
    /// A fresh registry with the runtime's metrics registered on it.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        Ok(Metrics {
            reconcile: ReconcileMetrics::register(&registry)?,
            leader: LeaderMetrics::register(&registry)?,
            writes: WriteMetrics::register(&registry)?,
            registry,
        })
    }

    /// The registry, to register a binary's own metrics and to serve `/metrics`.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// Registers `collector` on `registry` and hands it back, for a binary's own metrics.
pub fn register<C: Collector + Clone + 'static>(
    registry: &Registry,
    collector: C,
) -> Result<C, prometheus::Error> {
    registry.register(Box::new(collector.clone()))?;
    Ok(collector)
}

/// `olm_reconcile_total{controller}`, `olm_reconcile_errors_total{controller,category}`
/// and `olm_reconcile_duration_seconds{controller}`.
#[derive(Clone, Debug)]
pub struct ReconcileMetrics {
    runs: IntCounterVec,
    errors: IntCounterVec,
    duration: HistogramVec,
}

impl ReconcileMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(ReconcileMetrics {
            runs: register(
                registry,
                IntCounterVec::new(
                    Opts::new("olm_reconcile_total", "Reconciles run, by controller."),
                    &["controller"],
                )?,
            )?,
            errors: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "olm_reconcile_errors_total",
                        "Reconciles that failed, by controller and error category.",
                    ),
                    &["controller", "category"],
                )?,
            )?,
            duration: register(
                registry,
                HistogramVec::new(
                    HistogramOpts::new(
                        "olm_reconcile_duration_seconds",
                        "How long reconciles took, by controller.",
                    )
                    .buckets(RECONCILE_BUCKETS.to_vec()),
                    &["controller"],
                )?,
            )?,
        })
    }

    /// Counts a reconcile of `controller` and times it until the guard is dropped.
    pub fn start(&self, controller: &'static str) -> ReconcileTimer {
        self.runs.with_label_values(&[controller]).inc();
        ReconcileTimer {
            histogram: self.duration.with_label_values(&[controller]),
            started: Instant::now(),
        }
    }

    /// Counts a failed reconcile of `controller` (`category` from the error's
    /// `category()`).
    pub fn error(&self, controller: &'static str, category: &'static str) {
        self.errors.with_label_values(&[controller, category]).inc();
    }
}

/// Observes a reconcile's duration when dropped.
#[derive(Debug)]
#[must_use = "the reconcile is timed until this guard is dropped"]
pub struct ReconcileTimer {
    histogram: Histogram,
    started: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

/// `olm_leader{lease}` (1 while this replica leads) and
/// `olm_leader_transitions_total{lease}` (times it started or stopped leading).
#[derive(Clone, Debug)]
pub struct LeaderMetrics {
    pub(crate) leader: IntGaugeVec,
    pub(crate) transitions: IntCounterVec,
}

impl LeaderMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(LeaderMetrics {
            leader: register(
                registry,
                IntGaugeVec::new(
                    Opts::new(
                        "olm_leader",
                        "1 while this replica holds the lease and may write, else 0.",
                    ),
                    &["lease"],
                )?,
            )?,
            transitions: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "olm_leader_transitions_total",
                        "Times this replica started or stopped leading.",
                    ),
                    &["lease"],
                )?,
            )?,
        })
    }
}

/// `olm_writes_total{verb,outcome}`: writes to the API server, with
/// outcome `ok`, `error` or `not_leader` (refused by fencing).
#[derive(Clone, Debug)]
pub struct WriteMetrics {
    pub(crate) writes: IntCounterVec,
}

impl WriteMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(WriteMetrics {
            writes: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "olm_writes_total",
                        "Writes to the API server, by verb and outcome.",
                    ),
                    &["verb", "outcome"],
                )?,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use prometheus::{IntGauge, TextEncoder};

    use super::*;

    fn text(registry: &Registry) -> String {
        TextEncoder::new().encode_to_string(&registry.gather()).unwrap()
    }

    #[test]
    fn reconciles_are_counted_and_timed() {
        let metrics = Metrics::new().unwrap();
        drop(metrics.reconcile.start("subscription"));
        drop(metrics.reconcile.start("subscription"));
        metrics.reconcile.error("subscription", "catalog");
        let out = text(metrics.registry());
        assert!(
            out.contains("olm_reconcile_total{controller=\"subscription\"} 2"),
            "{out}"
        );
        assert!(
            out.contains("olm_reconcile_errors_total{category=\"catalog\",controller=\"subscription\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("olm_reconcile_duration_seconds_count{controller=\"subscription\"} 2"),
            "{out}"
        );
    }

    #[test]
    fn binaries_add_their_own_metrics() {
        let metrics = Metrics::new().unwrap();
        let csv_count = IntGauge::new("csv_count", "CSVs").unwrap();
        metrics.registry().register(Box::new(csv_count.clone())).unwrap();
        csv_count.inc();
        assert!(text(metrics.registry()).contains("csv_count 1"));
    }
}
