//! OLM's catalog-operator metrics, with OLM's names and labels, on the binary's
//! registry (the runtime's reconcile, leader and write metrics sit beside them).
//!
//! - `catalog_source_count`, `install_plan_count`, `subscription_count`: gauges.
//! - `catalogsource_ready{namespace,name}`: 1 while the catalog is healthy.
//! - `subscription_sync_total{name,installed,channel,package,approval}`: syncs of
//!   each Subscription.
//! - `olm_resolution_duration_seconds{outcome}`: how long resolving a namespace
//!   took. OLM exports a summary; the Rust client has no summaries, so this is a
//!   histogram of the same name (its `_count` and `_sum` match the summary's).
//! - `olm_rs_rollbacks_total{cause}` (olm-rs's own): rollbacks started, by
//!   cause: `manual` (asked for), `failed` (an upgrade's CSV went Failed) or
//!   `deadline` (it was not Succeeded in time).

use olm_runtime::metrics::register;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

const RESOLUTION_BUCKETS: &[f64] = &[0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0];

/// The catalog-operator's OLM-named metrics.
#[derive(Clone, Debug)]
pub struct CatalogMetrics {
    /// `catalog_source_count`.
    pub catalog_source_count: IntGauge,
    /// `catalogsource_ready{namespace,name}`.
    pub catalogsource_ready: IntGaugeVec,
    /// `install_plan_count`.
    pub install_plan_count: IntGauge,
    /// `subscription_count`.
    pub subscription_count: IntGauge,
    /// `subscription_sync_total{name,installed,channel,package,approval}`.
    pub subscription_sync_total: IntCounterVec,
    /// `olm_resolution_duration_seconds{outcome}`.
    pub resolution_duration: HistogramVec,
    /// `olm_rs_rollbacks_total{cause}`.
    pub rollbacks_total: IntCounterVec,
}

impl CatalogMetrics {
    /// Registers the metrics on `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(CatalogMetrics {
            catalog_source_count: register(
                registry,
                IntGauge::new("catalog_source_count", "Number of catalog sources")?,
            )?,
            catalogsource_ready: register(
                registry,
                IntGaugeVec::new(
                    Opts::new(
                        "catalogsource_ready",
                        "State of a CatalogSource. 1 indicates that the CatalogSource is in a READY state. 0 indicates CatalogSource is in a Non READY state.",
                    ),
                    &["namespace", "name"],
                )?,
            )?,
            install_plan_count: register(
                registry,
                IntGauge::new("install_plan_count", "Number of install plans")?,
            )?,
            subscription_count: register(
                registry,
                IntGauge::new("subscription_count", "Number of subscriptions")?,
            )?,
            subscription_sync_total: register(
                registry,
                IntCounterVec::new(
                    Opts::new("subscription_sync_total", "Monotonic count of subscription syncs"),
                    &["name", "installed", "channel", "package", "approval"],
                )?,
            )?,
            resolution_duration: register(
                registry,
                HistogramVec::new(
                    HistogramOpts::new(
                        "olm_resolution_duration_seconds",
                        "The duration of a dependency resolution attempt",
                    )
                    .buckets(RESOLUTION_BUCKETS.to_vec()),
                    &["outcome"],
                )?,
            )?,
            rollbacks_total: register(
                registry,
                IntCounterVec::new(
                    Opts::new("olm_rs_rollbacks_total", "Rollbacks started, by cause"),
                    &["cause"],
                )?,
            )?,
        })
    }

    /// Records whether a catalog is ready.
    pub fn set_catalog_ready(&self, namespace: &str, name: &str, ready: bool) {
        self.catalogsource_ready
            .with_label_values(&[namespace, name])
            .set(i64::from(ready));
    }

    /// Counts a rollback started for `cause` (`manual`, `failed` or `deadline`).
    pub fn count_rollback(&self, cause: &str) {
        self.rollbacks_total.with_label_values(&[cause]).inc();
    }

    /// Drops the series of a deleted catalog.
    pub fn forget_catalog(&self, namespace: &str, name: &str) {
        let _ = self.catalogsource_ready.remove_label_values(&[namespace, name]);
    }
}

#[cfg(test)]
mod tests {
    use prometheus::TextEncoder;

    use super::*;

    #[test]
    fn metrics_carry_olm_names() {
        let registry = Registry::new();
        let metrics = CatalogMetrics::register(&registry).unwrap();
        metrics.set_catalog_ready("olm", "demo", true);
        metrics.catalog_source_count.set(1);
        metrics
            .subscription_sync_total
            .with_label_values(&["app", "app.v1", "stable", "app", "Automatic"])
            .inc();
        metrics
            .resolution_duration
            .with_label_values(&["succeeded"])
            .observe(0.01);
        metrics.count_rollback("manual");
        metrics.count_rollback("deadline");
        metrics.count_rollback("deadline");
        let text = TextEncoder::new().encode_to_string(&registry.gather()).unwrap();
        for wanted in [
            "catalog_source_count 1",
            "catalogsource_ready{name=\"demo\",namespace=\"olm\"} 1",
            "subscription_sync_total{approval=\"Automatic\",channel=\"stable\",installed=\"app.v1\",name=\"app\",package=\"app\"} 1",
            "olm_resolution_duration_seconds_count{outcome=\"succeeded\"} 1",
            "olm_rs_rollbacks_total{cause=\"manual\"} 1",
            "olm_rs_rollbacks_total{cause=\"deadline\"} 2",
            "install_plan_count 0",
            "subscription_count 0",
        ] {
            assert!(text.contains(wanted), "{wanted} missing from\n{text}");
        }
        metrics.forget_catalog("olm", "demo");
        let text = TextEncoder::new().encode_to_string(&registry.gather()).unwrap();
        assert!(!text.contains("catalogsource_ready{"));
    }
}
