//! One thing at a time on a unit: its hooks and its actions take turns, in
//! the order they asked for one (a fair lock per unit), so that an action
//! never runs while a hook of its unit does, nor two actions at once.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::OwnedMutexGuard;

/// The turns of every unit of the agent.
#[derive(Clone, Debug, Default)]
pub struct Turns(Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

/// A unit's turn: nothing else runs on the unit until it is dropped.
pub type Turn = OwnedMutexGuard<()>;

impl Turns {
    /// Waits for `unit`'s turn, after everything that asked before.
    pub async fn take(&self, unit: &str) -> Turn {
        let lock = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(unit.to_owned())
            .or_default()
            .clone();
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_of_one_unit_come_in_order_and_units_do_not_wait_for_each_other() {
        let turns = Turns::default();
        let first = turns.take("db").await;
        // Another unit has its own turn.
        drop(turns.take("web").await);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for n in 0..3 {
            let (turns, order) = (turns.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let _turn = turns.take("db").await;
                order.lock().unwrap().push(n);
            }));
            // Each asks before the next.
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
        }
        assert!(
            order.lock().unwrap().is_empty(),
            "nothing runs during the first turn"
        );
        drop(first);
        for task in waiting {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2]);
    }
}
