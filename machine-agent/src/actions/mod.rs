//! Actions on this machine's units: the agent runs the tasks that Actions
//! (`model.olm-rs.dev`, checked and queued by olm-operator) give its units,
//! and writes each task's end onto the Action.
//!
//! - [`task`]: which tasks are this machine's to run, and what a run leaves on its task (pure).
//! - [`tool`]: `action-get`, `action-set`, `action-log`, `action-fail`, answered by the agent.
//! - [`exec`]: running one action: its script (key `actions.<name>` of the unit's
//!   hooks ConfigMap) in the unit's sandbox, as its hooks run, with their timeout.
//! - [`report`]: writing this machine's task onto the Action's shared status.
//!
//! The tasks of one unit run one at a time, oldest Action first, each in the
//! unit's turn ([`crate::units::turns`]): never during a hook of the unit, as
//! Juju serialises a unit's actions with its hooks. A task is marked running
//! when its turn comes (a task the user cancelled meanwhile is left
//! cancelled), its results and log are written while it runs every few
//! seconds when they changed, and its end once. A task still marked running
//! when the agent starts was cut short by the agent's stop: it is aborted.

pub mod exec;
pub mod report;
pub mod task;
pub mod tool;

use std::{
    collections::{BTreeMap, HashSet},
    sync::Arc,
};

use futures::StreamExt;
use kube::{Api, runtime::watcher};
use olm_api::model::Action;
use olm_runtime::{Runtime, Shutdown, reflector::Reflector};
use tokio::sync::mpsc;

use self::task::Due;
use crate::units::Units;

/// The agent's part that runs actions.
pub struct Actions {
    api: Api<Action>,
    reflector: Reflector<Action>,
    units: Arc<Units>,
    sources: exec::Sources,
    shutdown: Shutdown,
}

impl Actions {
    /// Watches the Actions of the agent's namespace; runs their tasks on
    /// `units`, reading `sources`.
    pub fn new(runtime: &Runtime, units: Arc<Units>, sources: exec::Sources) -> Self {
        let api: Api<Action> = Api::namespaced(runtime.client().clone(), &units.namespace);
        Actions {
            reflector: runtime.reflector(api.clone(), watcher::Config::default()),
            api,
            units,
            sources,
            shutdown: runtime.shutdown().clone(),
        }
    }

    /// Runs until shutdown: each pending task of this machine goes to its
    /// unit's queue, once.
    pub async fn run(self) {
        let Actions {
            api,
            mut reflector,
            units,
            sources,
            shutdown,
        } = self;
        let mut changes =
            futures::stream::select(reflector.subscribe().map(|_| ()), reflector.deleted().map(|_| ()));
        let (store, synced) = (reflector.store(), reflector.synced());
        let watch = reflector.run();
        tokio::pin!(watch);
        let mut unit_changes = units.statuses.subscribe();
        let mut queues: BTreeMap<String, mpsc::UnboundedSender<Due>> = BTreeMap::new();
        let mut queued: HashSet<String> = HashSet::new();
        let mut started = false;
        loop {
            if synced.get() {
                let actions = store.state();
                if !started {
                    started = true;
                    abort_interrupted(&api, &units.machine, &actions).await;
                }
                let statuses = units.statuses.borrow().clone();
                for due in task::due(actions.iter().map(AsRef::as_ref), &units.machine) {
                    let Some(unit) = task::local_unit(&statuses, &due) else {
                        continue;
                    };
                    if !queued.insert(due.uid.clone()) {
                        continue;
                    }
                    let queue = queues.entry(unit.clone()).or_insert_with(|| {
                        let (send, receive) = mpsc::unbounded_channel();
                        let worker = Worker {
                            api: api.clone(),
                            units: units.clone(),
                            sources: sources.clone(),
                            unit,
                        };
                        tokio::spawn(worker.run(receive, shutdown.clone()));
                        send
                    });
                    let _ = queue.send(due);
                }
                // Forget what no Action names any more.
                let present: HashSet<&str> =
                    actions.iter().filter_map(|a| a.metadata.uid.as_deref()).collect();
                queued.retain(|uid| present.contains(uid.as_str()));
            }
            tokio::select! {
                () = &mut watch => return,
                Some(()) = changes.next() => {}
                changed = unit_changes.changed() => if changed.is_err() { return },
                () = shutdown.signaled() => return,
            }
        }
    }
}

/// Aborts the tasks of `machine` that say running: the agent just started, so
/// none runs; its stop cut them short.
async fn abort_interrupted(api: &Api<Action>, machine: &str, actions: &[Arc<Action>]) {
    for name in task::interrupted(actions.iter().map(AsRef::as_ref), machine) {
        let now = olm_runtime::conditions::now();
        let aborted = report::write_task(api, &name, machine, |task| {
            (task.state == olm_api::model::TaskState::Running).then(|| exec::stopped(task, &now))
        })
        .await;
        match aborted {
            Ok(_) => tracing::warn!(
                action = name,
                "the agent stopped while the action ran: task aborted"
            ),
            Err(error) => tracing::warn!(action = name, %error, "cannot abort the interrupted task"),
        }
    }
}

/// Runs the tasks of one unit, one at a time, in the order they come.
struct Worker {
    api: Api<Action>,
    units: Arc<Units>,
    sources: exec::Sources,
    unit: String,
}

impl Worker {
    async fn run(self, mut queue: mpsc::UnboundedReceiver<Due>, shutdown: Shutdown) {
        loop {
            let due = tokio::select! {
                due = queue.recv() => match due { Some(due) => due, None => return },
                () = shutdown.signaled() => return,
            };
            let turn = tokio::select! {
                turn = self.units.turns.take(&self.unit) => turn,
                () = shutdown.signaled() => return,
            };
            tokio::select! {
                () = self.one(&due) => {}
                // Dropping the run kills the script; the next start aborts the task.
                () = shutdown.signaled() => return,
            }
            drop(turn);
        }
    }

    /// Runs one task: marks it running (unless it was cancelled or ended
    /// meanwhile), runs it, writes its end.
    async fn one(&self, due: &Due) {
        let machine = &self.units.machine;
        let now = olm_runtime::conditions::now();
        let start = report::write_task(&self.api, &due.object, machine, |task| {
            (task.state == olm_api::model::TaskState::Pending).then(|| task::started(task, &now))
        })
        .await;
        let running = match start {
            Ok(Some(task)) => task,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(action = due.object, %error, "cannot start the task");
                return;
            }
        };
        let (progress, mut progressed) = tokio::sync::watch::channel(tool::Recorded::default());
        // Progress is written while the run lasts (it drops `progress` when it ends).
        let write_progress = async {
            while progressed.changed().await.is_ok() {
                let recorded = progressed.borrow_and_update().clone();
                let write = report::write_task(&self.api, &due.object, machine, |task| {
                    (task.state == olm_api::model::TaskState::Running)
                        .then(|| task::progressed(task, &recorded))
                });
                if let Err(error) = write.await {
                    tracing::debug!(action = due.object, %error, "cannot write the task's progress");
                }
            }
        };
        let run = exec::run(&self.units, &self.sources, &self.unit, due, progress);
        let ((recorded, outcome), ()) = tokio::join!(run, write_progress);
        let now = olm_runtime::conditions::now();
        let ended = task::ended(&running, recorded, outcome, &now);
        tracing::info!(
            unit = self.unit,
            action = due.action,
            object = due.object,
            state = ended.state.as_str(),
            message = ended.message.as_deref().unwrap_or(""),
            "action ended"
        );
        let end = report::write_task(&self.api, &due.object, machine, |task| {
            (task.state == olm_api::model::TaskState::Running).then(|| ended.clone())
        });
        if let Err(error) = end.await {
            tracing::error!(action = due.object, %error, "cannot write the task's end");
        }
    }
}
