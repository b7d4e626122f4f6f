//! Shared reflectors: one watch per kind, one store that every controller reads,
//! and the readiness gate of that store.
//!
//! A [`Reflector`] watches one kind (in one namespace or all), keeps its store
//! (without managed fields, which nothing reads, unless its modifier keeps
//! some: [`Reflector::modify_with_managed_fields`]), hands out streams of the objects
//! it applies ([`Reflector::subscribe`], for `Controller::for_shared_stream` and
//! friends) and of those it sees deleted ([`Reflector::deleted`]; shared streams
//! carry no deletions), says whether its store holds a complete list
//! ([`Reflector::synced`]), and opens its readiness gate when
//! the first full list has been applied to the store (the watcher's `InitDone`),
//! seen in its own event stream. No task waits on `Store::wait_until_ready`, which
//! wakes only the last of several concurrent waiters.

use std::{
    fmt::Debug,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use futures::{
    FutureExt, Stream, StreamExt,
    channel::mpsc::{UnboundedSender, unbounded},
    future::BoxFuture,
};
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

/// A change made to each object before the store keeps it.
type Modify<K> = Box<dyn FnMut(&mut K) + Send>;

/// Whether a store has received its first complete list; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Synced(Arc<AtomicBool>);

impl Synced {
    /// Not synced yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the store synced (it stays synced across watch restarts: the
    /// store keeps its objects until the new list replaces them).
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether the store has synced.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// One shared watch of kind `K` and its store. See the [module docs](self).
pub struct Reflector<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    api: Api<K>,
    config: watcher::Config,
    store: Store<K>,
    writer: reflector::store::Writer<K>,
    modify: Option<Modify<K>>,
    /// Whether `modify` sees the managed fields and the store keeps what it leaves of them.
    keep_managed_fields: bool,
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
            modify: None,
            keep_managed_fields: false,
            observer: Observer {
                gate: Some(readiness.gate(plural.clone())),
                plural,
                deleted: Vec::new(),
                synced: Synced::new(),
            },
        }
    }

    /// The store (cheap to clone), filled as the watch runs.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// A new stream of the objects this watch applies (after the store has them).
    /// Take every subscription before [`run`](Self::run): a subscriber that is never
    /// read holds the watch back once it lags 1024 events.
    pub fn subscribe(&self) -> ReflectHandle<K> {
        self.writer
            .subscribe()
            .expect("a shared store always hands out subscriptions")
    }

    /// Whether the store holds a complete list yet (an empty store before then
    /// would look like "no objects").
    pub fn synced(&self) -> Synced {
        self.observer.synced.clone()
    }

    /// A new stream of the objects the watch sees deleted.
    pub fn deleted(&mut self) -> impl Stream<Item = Arc<K>> + Send + use<K> {
        let (tx, rx) = unbounded();
        self.observer.deleted.push(tx);
        rx
    }

    /// Changes each object with `modify` before the store keeps it (e.g. drops
    /// what nothing reads).
    pub fn modify(mut self, modify: impl FnMut(&mut K) + Send + 'static) -> Self {
        self.modify = Some(Box::new(modify));
        self.keep_managed_fields = false;
        self
    }

    /// Like [`modify`](Self::modify), but `modify` also sees the object's
    /// managed fields, and the store keeps whatever it leaves of them (e.g.
    /// whether some manager ever wrote the status subresource).
    pub fn modify_with_managed_fields(mut self, modify: impl FnMut(&mut K) + Send + 'static) -> Self {
        self.modify = Some(Box::new(modify));
        self.keep_managed_fields = true;
        self
    }

    /// The watch: runs until dropped, retrying failures with [`TriggerBackoff`].
    pub fn run(self) -> BoxFuture<'static, ()> {
        let mut observer = self.observer;
        let mut modify = self.modify;
        let keep_managed_fields = self.keep_managed_fields;
        watcher(self.api, self.config)
            .modify(move |object| {
                if !keep_managed_fields {
                    object.meta_mut().managed_fields = None;
                }
                if let Some(modify) = modify.as_mut() {
                    modify(object);
                }
            })
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
    deleted: Vec<UnboundedSender<Arc<K>>>,
    synced: Synced,
}

impl<K: Clone> Observer<K> {
    fn observe(&mut self, event: &Result<watcher::Event<K>, watcher::Error>) {
        match event {
            Ok(watcher::Event::InitDone) => {
                self.synced.set();
                if let Some(gate) = self.gate.take() {
                    tracing::debug!(kind = %self.plural, "store synced");
                    gate.ready();
                }
            }
            Ok(watcher::Event::Delete(object)) => {
                if !self.deleted.is_empty() {
                    let object = Arc::new(object.clone());
                    for subscriber in &self.deleted {
                        // A controller that stopped has dropped its receiver.
                        let _ = subscriber.unbounded_send(object.clone());
                    }
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
            Arc,
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
        let (tx, mut rx) = unbounded();
        let synced = Synced::new();
        let mut observer = Observer::<ConfigMap> {
            plural: "configmaps".into(),
            gate: Some(readiness.gate("configmaps")),
            deleted: vec![tx],
            synced: synced.clone(),
        };
        observer.observe(&Ok(watcher::Event::Init));
        observer.observe(&Ok(watcher::Event::InitApply(config_map("a"))));
        assert!(!readiness.is_ready(), "the list is not complete");
        assert!(!synced.get());
        observer.observe(&Ok(watcher::Event::InitDone));
        assert!(readiness.is_ready());
        assert!(synced.get());
        observer.observe(&Ok(watcher::Event::Delete(config_map("a"))));
        observer.observe(&Ok(watcher::Event::InitDone));
        let streamed = rx.try_recv().unwrap();
        assert_eq!(streamed.name_any(), "a", "the deletion stream hears of it");
        assert!(rx.try_recv().is_err(), "once");
    }

    /// A client whose list of config maps holds one, `a`, with managed fields,
    /// and whose watches stay open with nothing to say (which the mocked API
    /// server of olm-testkit, answering at once, cannot play). Counts the lists.
    fn one_config_map(lists: Arc<AtomicUsize>) -> Client {
        let service = tower::service_fn(move |request: Request<Body>| {
            let watch = request.uri().query().unwrap_or_default().contains("watch=true");
            if !watch {
                lists.fetch_add(1, Ordering::SeqCst);
            }
            async move {
                if watch {
                    // An open watch with nothing to say.
                    std::future::pending::<()>().await;
                }
                let list = serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMapList",
                    "metadata": {"resourceVersion": "7"},
                    "items": [{"metadata": {"name": "a", "namespace": "default",
                        "managedFields": [{"manager": "kubectl", "operation": "Apply"}]}}],
                });
                Ok::<_, std::convert::Infallible>(Response::new(Body::from(
                    serde_json::to_vec(&list).unwrap(),
                )))
            }
        });
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn a_watch_fills_its_store_and_opens_its_gate() {
        let lists = Arc::new(AtomicUsize::new(0));
        let client = one_config_map(lists.clone());
        let readiness = Readiness::new();
        let reflector = Reflector::<ConfigMap>::new(Api::all(client), watcher::Config::default(), &readiness)
            .modify(|cm| cm.metadata.labels = Some([("seen".to_owned(), "yes".to_owned())].into()));
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
        let stored = store.state();
        assert_eq!(stored.len(), 1);
        assert_eq!(
            stored[0].metadata.managed_fields, None,
            "managed fields are dropped"
        );
        assert_eq!(stored[0].labels().get("seen").map(String::as_str), Some("yes"));
        assert_eq!(lists.load(Ordering::SeqCst), 1);
        driver.abort();
    }

    #[tokio::test]
    async fn a_modifier_may_keep_some_managed_fields() {
        let client = one_config_map(Arc::new(AtomicUsize::new(0)));
        let readiness = Readiness::new();
        let seen = Arc::new(AtomicUsize::new(0));
        let counted = seen.clone();
        let reflector = Reflector::<ConfigMap>::new(Api::all(client), watcher::Config::default(), &readiness)
            .modify_with_managed_fields(move |cm| {
                let entries = cm.metadata.managed_fields.as_mut().expect("the managed fields");
                counted.fetch_add(entries.len(), Ordering::SeqCst);
                entries.retain(|e| e.manager.as_deref() == Some("kubectl"));
            });
        let store = reflector.store();
        let driver = tokio::spawn(reflector.run());
        for _ in 0..100 {
            if readiness.is_ready() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(readiness.is_ready());
        assert_eq!(
            seen.load(Ordering::SeqCst),
            1,
            "the modifier saw the managed fields"
        );
        let kept = store.state()[0].metadata.managed_fields.clone().expect("kept");
        assert_eq!(kept[0].manager.as_deref(), Some("kubectl"));
        driver.abort();
    }
}
