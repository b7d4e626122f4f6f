//! One shutdown signal per process: every controller, the admin server and the
//! election stop on it.
//!
//! [`Shutdown`] is cheap to clone. [`Shutdown::trigger`] (called by the runtime on
//! SIGTERM or SIGINT, or by a test) wakes every [`Shutdown::signaled`] future, also
//! those created after the trigger.

use std::sync::Arc;

use tokio::sync::watch;

/// The process's shutdown signal; clones share it.
#[derive(Clone, Debug)]
pub struct Shutdown {
    tx: Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A signal not yet triggered.
    pub fn new() -> Self {
        let (tx, _rx) = watch::channel(false);
        Shutdown { tx: Arc::new(tx) }
    }

    /// Starts the shutdown: every [`signaled`](Self::signaled) future resolves.
    /// Triggering twice is harmless.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// Whether shutdown has begun.
    pub fn is_triggered(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once shutdown has begun (at once if it already has). Give it to
    /// `Controller::graceful_shutdown_on`: reconciles in flight then finish and no
    /// new one starts.
    pub fn signaled(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut rx = self.tx.subscribe();
        async move {
            // The sender lives in `self`'s clones; if all are gone nobody can trigger,
            // and stopping is the only sensible answer.
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn every_waiter_wakes_including_late_ones() {
        let shutdown = Shutdown::new();
        let early = tokio::spawn(shutdown.signaled());
        let clone = shutdown.clone();
        assert!(!shutdown.is_triggered());
        clone.trigger();
        assert!(shutdown.is_triggered());
        tokio::time::timeout(Duration::from_secs(5), early)
            .await
            .expect("an early waiter wakes")
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), shutdown.signaled())
            .await
            .expect("a waiter created after the trigger resolves at once");
        shutdown.trigger();
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_resolves_before_the_trigger() {
        let shutdown = Shutdown::new();
        let waited = tokio::time::timeout(Duration::from_secs(3600), shutdown.signaled()).await;
        assert!(waited.is_err());
    }
}
