//! How long a controller waits after a watch error before it reads its watches
//! again.
//!
//! A kube-runtime `Controller` merges all of its watches (the primary kind and
//! every `owns`/`watches`) into one trigger stream and backs off that whole
//! stream on any error. Its default (client-go's per-watch backoff: 0.8 s
//! doubling to 30 s, reset only after 2 minutes without errors) is meant for a
//! single watch: shared by ten watches, the errors each of them reports while
//! the API server is away, and the "resource version too old" each gets when it
//! comes back, push every watch to 30 s pauses in turn, and the controller goes
//! deaf for minutes after a short outage. [`TriggerBackoff`] keeps the pauses
//! short instead: one retry at most every second across all watches is still
//! gentle on an API server. The catalog-operator's shared watches use it too,
//! one each, so that they also hear again within a second of the API server's
//! return, whatever the length of the outage.

use std::time::Duration;

use kube::runtime::utils::Backoff;

/// Doubles from 100 ms up to 1 s; reset by the first event that is not an
/// error. Give it to `Controller::trigger_backoff` or `WatchStreamExt::backoff`.
#[derive(Debug, Clone)]
pub struct TriggerBackoff {
    next: Duration,
}

impl TriggerBackoff {
    /// The first pause.
    pub const MIN: Duration = Duration::from_millis(100);
    /// The longest pause.
    pub const MAX: Duration = Duration::from_secs(1);
}

impl Default for TriggerBackoff {
    fn default() -> Self {
        TriggerBackoff { next: Self::MIN }
    }
}

impl Iterator for TriggerBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let pause = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        Some(pause)
    }
}

impl Backoff for TriggerBackoff {
    fn reset(&mut self) {
        self.next = Self::MIN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_a_second_and_resets() {
        let mut backoff = TriggerBackoff::default();
        let pauses: Vec<u128> = backoff.by_ref().take(6).map(|d| d.as_millis()).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.next(), Some(Duration::from_millis(100)));
    }
}
