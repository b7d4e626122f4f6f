//! Kubernetes Events, published off the reconcile's path.
//!
//! An Event is a record for people, not a step of an install: a reconcile that
//! waited for its Event to be created (one request, 5-15 ms on a busy API
//! server) held back the next reconcile of the same object by as much. An
//! [`Outbox`] takes the Event and returns at once; one task per outbox
//! publishes them in the order they were given, so that the Events of one
//! object read in the order its reconciles made them.
//!
//! What is not published is lost, never retried: an Event given when the
//! outbox holds [`CAPACITY`] unpublished ones (an API server that does not
//! answer), or when the process stops. A failed publication is logged at
//! debug level (typically a namespace being deleted).

use std::sync::OnceLock;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder};
use tokio::sync::mpsc;

/// How many Events may wait for publication; more are dropped.
pub const CAPACITY: usize = 1024;

/// Publishes Events through a [`Recorder`], in order, in the background.
pub struct Outbox {
    recorder: Recorder,
    sender: OnceLock<mpsc::Sender<(Event, ObjectReference)>>,
}

impl Outbox {
    /// An outbox publishing through `recorder`. Its task starts with the
    /// first Event, on the runtime that Event was given on.
    pub fn new(recorder: Recorder) -> Self {
        Outbox {
            recorder,
            sender: OnceLock::new(),
        }
    }

    /// Queues `event` about the object `reference` for publication. Must be
    /// called within a tokio runtime.
    pub fn send(&self, event: Event, reference: ObjectReference) {
        let sender = self.sender.get_or_init(|| spawn(self.recorder.clone()));
        if let Err(error) = sender.try_send((event, reference)) {
            tracing::debug!(%error, "event not published: the outbox is full or stopped");
        }
    }
}

/// The task that publishes what the returned sender is given, in order.
fn spawn(recorder: Recorder) -> mpsc::Sender<(Event, ObjectReference)> {
    let (sender, mut receiver) = mpsc::channel::<(Event, ObjectReference)>(CAPACITY);
    tokio::spawn(async move {
        while let Some((event, reference)) = receiver.recv().await {
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::debug!(error = &error as &dyn std::error::Error, "cannot publish event");
            }
        }
    });
    sender
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::runtime::events::{EventType, Reporter};
    use olm_testkit::mock_api::MockApi;

    use super::*;

    fn event(reason: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.to_owned(),
            note: None,
            action: "Reconcile".to_owned(),
            secondary: None,
        }
    }

    /// The reasons of the Events `api` received, once there are `count`.
    async fn reasons(api: &MockApi, count: usize) -> Vec<String> {
        for _ in 0..500 {
            let requests = api.requests();
            if requests.len() >= count {
                return requests
                    .iter()
                    .map(|r| r.body["reason"].as_str().unwrap_or_default().to_owned())
                    .collect();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{count} Events were not published within 5 s: {:?}", api.lines());
    }

    #[tokio::test]
    async fn events_are_published_in_the_order_given() {
        let (client, api) = MockApi::echo();
        let reporter = Reporter {
            controller: "test".to_owned(),
            instance: None,
        };
        let outbox = Outbox::new(Recorder::new(client, reporter));
        let reference = ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("ConfigMap".to_owned()),
            namespace: Some("ns".to_owned()),
            name: Some("a".to_owned()),
            ..ObjectReference::default()
        };
        for reason in ["First", "Second", "Third"] {
            outbox.send(event(reason), reference.clone());
        }
        assert_eq!(reasons(&api, 3).await, ["First", "Second", "Third"]);
        assert!(
            api.lines()
                .iter()
                .all(|line| line == "POST /apis/events.k8s.io/v1/namespaces/ns/events"),
            "{:?}",
            api.lines()
        );
    }
}
