//! Relations on machine units: the relation hooks, in Juju's order, and the
//! hook tools that read and write relation data.
//!
//! - [`view`]: what a unit sees of its relations, from the namespace's
//!   Relations and Databags (pure).
//! - [`sequence`]: which relation hook a unit runs next, and what it records
//!   once it ran (pure).
//!
//! The unit's task runs the hooks (`units::relation_hooks`), between its
//! other hooks, never beside them.
//! - [`tools`]: `relation-ids`, `relation-list`, `relation-get`, `relation-set`.
//!
//! [`Relations`] is what the units and the hook tool share: the watches of
//! the namespace's Relations and Databags, the Databags' API (a unit writes its
//! own bag, its leader its application's bag: the API server enforces it), and
//! a signal that wakes the units when either changes.

pub mod sequence;
pub mod tools;
#[cfg(test)]
mod tools_props;
pub mod view;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{FutureExt, StreamExt};
use kube::{Api, Client, runtime::reflector::Store, runtime::watcher};
use olm_api::model::{Databag, Relation};
use olm_runtime::{Runtime, reflector::Synced};
use tokio::sync::watch;

use self::{sequence::RelationsRecord, view::RelationView};
use crate::state::{self, StateDir};

/// The environment variable with the endpoint of a relation hook's relation.
pub const RELATION_ENV: &str = "OLM_RS_RELATION";
/// The environment variable with the relation's id (`<endpoint>:<relation>`),
/// the default of the relation tools' `-r`.
pub const RELATION_ID_ENV: &str = "OLM_RS_RELATION_ID";
/// The environment variable with the remote unit the hook is about, if any,
/// the default unit of `relation-get`.
pub const REMOTE_UNIT_ENV: &str = "OLM_RS_REMOTE_UNIT";
/// The environment variable with the remote application.
pub const REMOTE_APP_ENV: &str = "OLM_RS_REMOTE_APP";

/// The relations of this machine's units, shared by the unit tasks and the hook tool.
#[derive(Clone)]
pub struct Relations {
    relations: Store<Relation>,
    bags: Store<Databag>,
    synced: [Synced; 2],
    api: Api<Databag>,
    namespace: String,
    machine: String,
    changes: watch::Sender<u64>,
    /// When each unit's failed relation hook is retried (in memory: after a
    /// restart it is retried at once).
    retries: Arc<Mutex<BTreeMap<String, Instant>>>,
    /// What this machine's units last wrote to each of their bags, by bag
    /// name, until the watch shows it ([`tools::Written`]).
    written: Arc<Mutex<BTreeMap<String, tools::Written>>>,
}

impl Relations {
    /// Watches the Relations and Databags of `namespace` for the units of
    /// Machine `machine`; the future runs the watches and wakes the units on
    /// every change.
    pub fn watch(
        runtime: &Runtime,
        client: &Client,
        namespace: &str,
        machine: &str,
    ) -> (Relations, impl Future<Output = ()> + use<>) {
        let mut relations = runtime.reflector(
            Api::<Relation>::namespaced(client.clone(), namespace),
            watcher::Config::default(),
        );
        let mut bags = runtime.reflector(
            Api::<Databag>::namespaced(client.clone(), namespace),
            watcher::Config::default(),
        );
        let handle = Relations {
            relations: relations.store(),
            bags: bags.store(),
            synced: [relations.synced(), bags.synced()],
            api: Api::namespaced(client.clone(), namespace),
            namespace: namespace.to_owned(),
            machine: machine.to_owned(),
            changes: watch::Sender::new(0),
            retries: Arc::default(),
            written: Arc::default(),
        };
        let mut events = futures::stream::select_all([
            relations.subscribe().map(|_| ()).boxed(),
            relations.deleted().map(|_| ()).boxed(),
            bags.subscribe().map(|_| ()).boxed(),
            bags.deleted().map(|_| ()).boxed(),
        ]);
        let wake = {
            let handle = handle.clone();
            async move {
                // The units look once both watches are synced, then on every change.
                while !handle.synced() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                handle.wake();
                while events.next().await.is_some() {
                    handle.wake();
                }
            }
        };
        let run = futures::future::join3(relations.run(), bags.run(), wake).map(|_| ());
        (handle, run)
    }

    /// Relations read from `relations` and `bags` (as synced watches would
    /// hold them), writing through `client`, for Machine `machine` of `namespace`.
    #[cfg(test)]
    pub(crate) fn of(
        client: Client,
        namespace: &str,
        machine: &str,
        relations: Vec<Relation>,
        bags: Vec<Databag>,
    ) -> Self {
        fn store<K>(objects: Vec<K>) -> Store<K>
        where
            K: kube::Resource<DynamicType = ()> + Clone + 'static,
        {
            let mut writer = kube::runtime::reflector::store::Writer::<K>::default();
            for object in objects {
                writer.apply_watcher_event(&watcher::Event::Apply(object));
            }
            writer.as_reader()
        }
        let synced = [Synced::new(), Synced::new()];
        synced.iter().for_each(Synced::set);
        Relations {
            relations: store(relations),
            bags: store(bags),
            synced,
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            machine: machine.to_owned(),
            changes: watch::Sender::new(0),
            retries: Arc::default(),
            written: Arc::default(),
        }
    }

    /// Whether both watches have listed what there is.
    fn synced(&self) -> bool {
        self.synced.iter().all(Synced::get)
    }

    /// Wakes every unit to look at its relations again.
    pub fn wake(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes whenever the relations may have changed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The relations in view of this machine's unit of `application`; `None`
    /// until the watches have synced (an unsynced store would read as every
    /// relation gone).
    pub fn views(&self, application: &str) -> Option<BTreeMap<String, RelationView>> {
        self.read(|relations, bags| view::views(application, &self.machine, relations, bags))
    }

    /// The Ready relations of `application` where this machine's unit has
    /// no bag yet ([`view::awaited`]); `None` until the watches have synced.
    pub fn awaited(&self, application: &str) -> Option<Vec<String>> {
        self.read(|relations, bags| view::awaited(application, &self.machine, relations, bags))
    }

    /// `read` of the Relations and Databags in the stores; `None` until the
    /// watches have synced.
    fn read<T>(&self, read: impl FnOnce(&[&Relation], &[&Databag]) -> T) -> Option<T> {
        if !self.synced() {
            return None;
        }
        let relations = self.relations.state();
        let bags = self.bags.state();
        let relations: Vec<&Relation> = relations.iter().map(AsRef::as_ref).collect();
        let bags: Vec<&Databag> = bags.iter().map(AsRef::as_ref).collect();
        Some(read(&relations, &bags))
    }

    /// When the failed relation hook of `unit` is retried, if it waits.
    pub fn retry_at(&self, unit: &str) -> Option<Instant> {
        self.lock_retries().get(unit).copied()
    }

    /// Retries the failed relation hook of `unit` after `delay` (or forgets the retry).
    pub fn set_retry(&self, unit: &str, delay: Option<Duration>) {
        let Some(delay) = delay else {
            self.lock_retries().remove(unit);
            return;
        };
        self.lock_retries()
            .insert(unit.to_owned(), Instant::now() + delay);
        let handle = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            handle.wake();
        });
    }

    fn lock_retries(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Instant>> {
        self.retries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The relations record of unit `unit` (empty when there is none, or it is unreadable).
pub fn read_record(state: &StateDir, unit: &str) -> RelationsRecord {
    match state::read_json::<RelationsRecord>(&state.relations_file(unit)) {
        Ok(record) => record.unwrap_or_default(),
        Err(error) => {
            tracing::error!(unit, %error, "cannot read the unit's relations record: starting it afresh");
            RelationsRecord::default()
        }
    }
}

/// Saves the relations record of unit `unit`.
pub fn save_record(state: &StateDir, unit: &str, record: &RelationsRecord) {
    if let Err(error) = state::write_json(&state.relations_file(unit), record) {
        tracing::error!(unit, %error, "cannot save the unit's relations record");
    }
}
