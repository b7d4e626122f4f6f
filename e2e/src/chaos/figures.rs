//! The figures of a campaign: faults by kind and times to converge (p50, p99, max).

use std::{collections::BTreeMap, time::Duration};

/// The `q` quantile (0.0 ..= 1.0) of `times`, nearest rank; `None` when empty.
pub fn quantile(times: &[Duration], q: f64) -> Option<Duration> {
    let mut sorted = times.to_vec();
    sorted.sort();
    let last = sorted.len().checked_sub(1)?;
    let rank = ((q * sorted.len() as f64).ceil() as usize)
        .saturating_sub(1)
        .min(last);
    Some(sorted[rank])
}

/// `p50 X, p99 Y, max Z` of `times`, or `none` when empty.
pub fn summary(times: &[Duration]) -> String {
    match (quantile(times, 0.5), quantile(times, 0.99), quantile(times, 1.0)) {
        (Some(p50), Some(p99), Some(max)) => format!("p50 {p50:.1?}, p99 {p99:.1?}, max {max:.1?}"),
        _ => "none".to_owned(),
    }
}

/// What a campaign counted: per fault kind, how many were injected and their times to converge,
/// and every invariant violation it printed.
#[derive(Default, Debug)]
pub struct Tally {
    /// Per fault kind: the time to converge after each fault of that kind.
    pub converged: BTreeMap<String, Vec<Duration>>,
    /// Invariant violations, each with the round that showed it.
    pub violations: Vec<(usize, String)>,
}

impl Tally {
    /// Notes one fault of `kind` and the time the cluster took to converge after it.
    pub fn fault(&mut self, kind: &str, took: Duration) {
        self.converged.entry(kind.to_owned()).or_default().push(took);
    }

    /// Every time to converge, all kinds together.
    pub fn all_times(&self) -> Vec<Duration> {
        self.converged.values().flatten().copied().collect()
    }

    /// How many faults were injected.
    pub fn faults(&self) -> usize {
        self.converged.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &[u64]) -> Vec<Duration> {
        s.iter().map(|s| Duration::from_secs(*s)).collect()
    }

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let times = secs(&[5, 1, 3, 2, 4]);
        assert_eq!(quantile(&times, 0.5), Some(Duration::from_secs(3)));
        assert_eq!(quantile(&times, 0.99), Some(Duration::from_secs(5)));
        assert_eq!(quantile(&times, 1.0), Some(Duration::from_secs(5)));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(summary(&[]), "none");
    }

    #[test]
    fn a_tally_counts_faults_by_kind() {
        let mut tally = Tally::default();
        tally.fault("sigkill", Duration::from_secs(1));
        tally.fault("sigkill", Duration::from_secs(2));
        tally.fault("apiserver-restart", Duration::from_secs(9));
        assert_eq!(tally.faults(), 3);
        assert_eq!(tally.converged["sigkill"].len(), 2);
        assert_eq!(tally.all_times().len(), 3);
    }
}
