//! Shared reflectors: one watch per kind, one store that every controller reads,
//! and the readiness gate of that store.
//!
//! A [`Reflector`] watches one kind (in one namespace or all), keeps its store,
//! hands out streams of the objects it applies ([`Reflector::subscribe`], for
//! `Controller::for_shared_stream` and friends), and opens its readiness gate when
//! the first full list has been applied to the store (the watcher's `InitDone`),
//! seen in its own event stream. No task waits on `Store::wait_until_ready`, which
//! wakes only the last of several concurrent waiters.

use std::fmt::Debug;

use futures::{FutureExt, StreamExt, future::BoxFuture};
use kube::{
    Api, Resource,
    runtime::{
        WatchStreamExt,
        reflector::{self, ReflectHandle, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;

use crate::{
    backoff::TriggerBackoff,
    readiness::{Readiness, ReadyGate},
};

/// How many events a slow subscriber may lag behind before the watch waits for it.
const BUFFER: usize = 1024;

/// A callback for each object the watch saw deleted.
type OnDelete<K> = Box<dyn Fn(&K) + Send + Sync>;

/// One shared watch of kind `K` and its store. See the [module docs](self).
pub struct Reflector<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    api: Api<K>,
    config: watcher::Config,
    store: Store<K>,
    writer: reflector::store::Writer<K>,
    observer: Observer<K>,
}

impl<K> Reflector<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// A watch of `api` with `config`, gated in `readiness` under the kind's plural
    /// (`subscriptions`). Nothing is watched until [`run`](Self::run) is driven.
    pub fn new(api: Api<K>, config: watcher::Config, readiness: &Readiness) -> Self {
        let (store, writer) = reflector::store_shared::<K>(BUFFER);
        let plural = K::plural(&()).into_owned();
        Reflector {
            api,
            config,
            store,
            writer,
            observer: Observer {
                gate: Some(readiness.gate(plural.clone())),
                plural,
                on_delete: None,
            },
        }
    }

    /// The store (cheap to clone), filled as the watch runs.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// A new stream of the objects this watch applies (after the store has them).
    /// Take every subscription before [`run`](Self::run): a subscriber that is never
    /// read holds the watch back once it lags [`BUFFER`] events.
    pub fn subscribe(&self) -> ReflectHandle<K> {
        self.writer
            .subscribe()
            .expect("a shared store always hands out subscriptions")
    }

    /// Calls `on_delete` with each object the watch sees deleted (subscribed streams
    /// carry no deletions).
    pub fn on_delete(mut self, on_delete: impl Fn(&K) + Send + Sync + 'static) -> Self {
        self.observer.on_delete = Some(Box::new(on_delete));
        self
    }

    /// The watch: runs until dropped, retrying failures with [`TriggerBackoff`].
    pub fn run(self) -> BoxFuture<'static, ()> {
        let mut observer = self.observer;
        watcher(self.api, self.config)
            .backoff(TriggerBackoff::default())
            .reflect_shared(self.writer)
            .for_each(move |event| {
                observer.observe(&event);
                std::future::ready(())
            })
            .boxed()
    }
}

/// What a reflector does with each event, once the store has applied it.
struct Observer<K> {
    plural: String,
    gate: Option<ReadyGate>,
    on_delete: Option<OnDelete<K>>,
}

impl<K> Observer<K> {
    fn observe(&mut self, event: &Result<watcher::Event<K>, watcher::Error>) {
        match event {
            Ok(watcher::Event::InitDone) => {
                if let Some(gate) = self.gate.take() {
                    tracing::debug!(kind = %self.plural, "store synced");
                    gate.ready();
                }
            }
            Ok(watcher::Event::Delete(object)) => {
                if let Some(on_delete) = &self.on_delete {
                    on_delete(object);
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(
                kind = %self.plural,
                error = error as &dyn std::error::Error,
                "watch failed; retrying"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc, Mutex,
            atomic::{AtomicUsize, Ordering},
        },
        time::Duration,
    };

    use http::{Request, Response};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{Client, ResourceExt, client::Body};

    use super::*;

    fn config_map(name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("default".into());
        cm
    }

    #[test]
    fn the_gate_opens_at_the_end_of_the_first_list_and_deletions_are_reported() {
        let readiness = Readiness::new();
        let deleted = Arc::new(Mutex::new(Vec::new()));
        let seen = deleted.clone();
        let mut observer = Observer::<ConfigMap> {
            plural: "configmaps".into(),
            gate: Some(readiness.gate("configmaps")),
            on_delete: Some(Box::new(move |cm: &ConfigMap| {
                seen.lock().unwrap().push(cm.name_any())
            })),
        };
        observer.observe(&Ok(watcher::Event::Init));
        observer.observe(&Ok(watcher::Event::InitApply(config_map("a"))));
        assert!(!readiness.is_ready(), "the list is not complete");
        observer.observe(&Ok(watcher::Event::InitDone));
        assert!(readiness.is_ready());
        observer.observe(&Ok(watcher::Event::Delete(config_map("a"))));
        observer.observe(&Ok(watcher::Event::InitDone));
        assert_eq!(*deleted.lock().unwrap(), ["a"]);
    }

    #[tokio::test]
    async fn a_watch_fills_its_store_and_opens_its_gate() {
        let lists = Arc::new(AtomicUsize::new(0));
        let counted = lists.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let watch = request.uri().query().unwrap_or_default().contains("watch=true");
            if !watch {
                counted.fetch_add(1, Ordering::SeqCst);
            }
            async move {
                if watch {
                    // An open watch with nothing to say.
                    std::future::pending::<()>().await;
                }
                let list = serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMapList",
                    "metadata": {"resourceVersion": "7"},
                    "items": [{"metadata": {"name": "a", "namespace": "default"}}],
                });
                Ok::<_, std::convert::Infallible>(Response::new(Body::from(
                    serde_json::to_vec(&list).unwrap(),
                )))
            }
        });
        let client = Client::new(service, "default");
        let readiness = Readiness::new();
        let reflector = Reflector::<ConfigMap>::new(Api::all(client), watcher::Config::default(), &readiness);
        let store = reflector.store();
        let mut applied = reflector.subscribe();
        assert_eq!(readiness.pending(), ["configmaps"]);
        let driver = tokio::spawn(reflector.run());
        let first = tokio::time::timeout(Duration::from_secs(10), applied.next())
            .await
            .expect("the listed object is handed to subscribers");
        assert_eq!(first.map(|cm| cm.name_any()).as_deref(), Some("a"));
        // The subscribers hear of the list just before the driver sees its end.
        for _ in 0..100 {
            if readiness.is_ready() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(readiness.is_ready(), "the gate opened with the list");
        assert_eq!(store.state().len(), 1);
        assert_eq!(lists.load(Ordering::SeqCst), 1);
        driver.abort();
    }
}
