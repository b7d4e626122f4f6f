//! Which relation hook a unit runs next (pure), in Juju's order, from what
//! its relation hooks have done ([`RelationsRecord`], kept in the state
//! directory) and what it sees ([`RelationView`]s):
//!
//! - a relation in view not yet recorded: `<endpoint>-relation-created`;
//! - a remote unit recorded that left: `-departed`;
//! - a remote unit not yet joined: `-joined`, then at once `-changed`;
//! - a joined remote unit whose data differs from what its last `-changed`
//!   saw: `-changed` (with that unit as the remote unit);
//! - the remote application's data differs from what the last `-changed`
//!   for it saw: `-changed` (with no remote unit);
//! - a recorded relation out of view (removed, or no longer Ready): each
//!   joined unit `-departed`, then `-broken`, and it is forgotten.
//!
//! Each hook is recorded only once it succeeded, so a restarted agent runs
//! what it missed and never runs `-created` or `-joined` twice.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::view::{Data, RelationView};

/// What a unit's relation hooks have done, by Relation name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelationsRecord {
    /// Each relation `-created` ran for and `-broken` has not.
    #[serde(default)]
    pub relations: BTreeMap<String, RelationRecord>,
}

/// What the hooks of one relation have done.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelationRecord {
    /// The Relation's uid.
    pub uid: String,
    /// The unit's endpoint.
    pub endpoint: String,
    /// The other side's application.
    pub remote_app: String,
    /// The remote units joined, each with the data its last `-changed` saw
    /// (`None`: joined, its first `-changed` not run yet).
    #[serde(default)]
    pub units: BTreeMap<String, Option<Data>>,
    /// The remote application's data the last `-changed` saw.
    #[serde(default)]
    pub app: Data,
}

/// The event of a relation hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The relation appeared.
    Created,
    /// A remote unit joined.
    Joined,
    /// A remote unit's or the remote application's data changed (or a unit just joined).
    Changed,
    /// A remote unit left.
    Departed,
    /// The relation is gone.
    Broken,
}

impl Event {
    /// The event as in the hook's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Joined => "joined",
            Self::Changed => "changed",
            Self::Departed => "departed",
            Self::Broken => "broken",
        }
    }

    /// Every event.
    pub const ALL: [Event; 5] = [
        Self::Created,
        Self::Joined,
        Self::Changed,
        Self::Departed,
        Self::Broken,
    ];
}

/// One relation hook to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelationHook {
    /// The Relation's name.
    pub relation: String,
    /// Its uid.
    pub uid: String,
    /// The unit's endpoint.
    pub endpoint: String,
    /// The other side's application.
    pub remote_app: String,
    /// The remote unit it is about, if any.
    pub remote_unit: Option<String>,
    /// What happened.
    pub event: Event,
    /// For `-changed`: the data this run sees, recorded when it succeeds.
    pub seen: Data,
}

impl RelationHook {
    /// The hook's name, its key in the hooks ConfigMap: `<endpoint>-relation-<event>`.
    pub fn name(&self) -> String {
        hook_name(&self.endpoint, self.event)
    }

    /// The relation's id as hook tools name it: `<endpoint>:<relation>`.
    pub fn relation_id(&self) -> String {
        relation_id(&self.endpoint, &self.relation)
    }
}

/// `<endpoint>-relation-<event>`.
pub fn hook_name(endpoint: &str, event: Event) -> String {
    format!("{endpoint}-relation-{}", event.as_str())
}

/// Whether `name` is a relation hook's name (`<endpoint>-relation-<event>`).
pub fn is_relation_hook(name: &str) -> bool {
    Event::ALL.iter().any(|event| {
        name.strip_suffix(&format!("-relation-{}", event.as_str()))
            .is_some_and(|endpoint| !endpoint.is_empty())
    })
}

/// A relation's id as hook tools name it: `<endpoint>:<relation>`.
pub fn relation_id(endpoint: &str, relation: &str) -> String {
    format!("{endpoint}:{relation}")
}

/// The next `-relation-created` hook: of the first relation in view not yet
/// recorded. What a unit in setup runs, before it starts.
pub fn next_created(
    record: &RelationsRecord,
    views: &BTreeMap<String, RelationView>,
) -> Option<RelationHook> {
    views
        .iter()
        .find(|(name, _)| !record.relations.contains_key(*name))
        .map(|(name, view)| created(name, view))
}

/// `-relation-created` of relation `name`, seen as `view`.
fn created(name: &str, view: &RelationView) -> RelationHook {
    let recorded = RelationRecord {
        uid: view.uid.clone(),
        endpoint: view.endpoint.clone(),
        remote_app: view.remote_app.clone(),
        ..RelationRecord::default()
    };
    hook(name, &recorded, (Event::Created, None), Data::new())
}

/// The next relation hook, or `None` when every relation is where the unit sees it.
pub fn next(record: &RelationsRecord, views: &BTreeMap<String, RelationView>) -> Option<RelationHook> {
    for (name, recorded) in &record.relations {
        let view = views.get(name).filter(|v| v.uid == recorded.uid);
        if view.is_none() {
            // Gone: every joined unit departs, then the relation breaks.
            let event = match recorded.units.keys().next() {
                Some(unit) => (Event::Departed, Some(unit.clone())),
                None => (Event::Broken, None),
            };
            return Some(hook(name, recorded, event, Data::new()));
        }
    }
    for (name, view) in views {
        let Some(recorded) = record.relations.get(name) else {
            return Some(created(name, view));
        };
        if let Some(unit) = recorded
            .units
            .keys()
            .find(|u| !view.remote_units.contains_key(*u))
        {
            return Some(hook(
                name,
                recorded,
                (Event::Departed, Some(unit.clone())),
                Data::new(),
            ));
        }
        // A unit that joined gets its first `-changed` before anything else.
        if let Some((unit, data)) = view
            .remote_units
            .iter()
            .find(|(unit, _)| matches!(recorded.units.get(*unit), Some(None)))
        {
            return Some(hook(
                name,
                recorded,
                (Event::Changed, Some(unit.clone())),
                data.clone(),
            ));
        }
        for (unit, data) in &view.remote_units {
            let event = match recorded.units.get(unit) {
                None => Event::Joined,
                Some(seen) if seen.as_ref() != Some(data) => Event::Changed,
                Some(_) => continue,
            };
            return Some(hook(name, recorded, (event, Some(unit.clone())), data.clone()));
        }
        if recorded.app != view.remote_app_data {
            return Some(hook(
                name,
                recorded,
                (Event::Changed, None),
                view.remote_app_data.clone(),
            ));
        }
    }
    None
}

fn hook(
    name: &str,
    recorded: &RelationRecord,
    (event, remote_unit): (Event, Option<String>),
    seen: Data,
) -> RelationHook {
    RelationHook {
        relation: name.to_owned(),
        uid: recorded.uid.clone(),
        endpoint: recorded.endpoint.clone(),
        remote_app: recorded.remote_app.clone(),
        remote_unit,
        event,
        seen,
    }
}

impl RelationsRecord {
    /// Records that `hook` succeeded.
    pub fn succeeded(&mut self, hook: &RelationHook) {
        if hook.event == Event::Created {
            self.relations.insert(
                hook.relation.clone(),
                RelationRecord {
                    uid: hook.uid.clone(),
                    endpoint: hook.endpoint.clone(),
                    remote_app: hook.remote_app.clone(),
                    ..RelationRecord::default()
                },
            );
            return;
        }
        if hook.event == Event::Broken {
            self.relations.remove(&hook.relation);
            return;
        }
        let Some(recorded) = self.relations.get_mut(&hook.relation) else {
            return;
        };
        match (hook.event, &hook.remote_unit) {
            (Event::Joined, Some(unit)) => {
                recorded.units.insert(unit.clone(), None);
            }
            (Event::Changed, Some(unit)) => {
                recorded.units.insert(unit.clone(), Some(hook.seen.clone()));
            }
            (Event::Changed, None) => recorded.app = hook.seen.clone(),
            (Event::Departed, Some(unit)) => {
                recorded.units.remove(unit);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> Data {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn view(units: &[(&str, Data)], app: Data) -> RelationView {
        RelationView {
            uid: "uid-r".into(),
            endpoint: "database".into(),
            remote_app: "db".into(),
            remote_units: units.iter().map(|(u, d)| ((*u).to_owned(), d.clone())).collect(),
            remote_app_data: app,
        }
    }

    /// Runs hooks (all succeeding) until none is left; their names and remote units.
    fn settle(record: &mut RelationsRecord, views: &BTreeMap<String, RelationView>) -> Vec<String> {
        let mut ran = Vec::new();
        while let Some(hook) = next(record, views) {
            record.succeeded(&hook);
            let unit = hook.remote_unit.clone().unwrap_or_default();
            ran.push(format!("{} {unit}", hook.name()).trim().to_owned());
            assert!(ran.len() < 20, "relation hooks never settle: {ran:?}");
        }
        ran
    }

    #[test]
    fn a_joined_unit_gets_its_changed_before_another_unit_joins() {
        // db/c joined while it was the only remote unit; db/b (first by name)
        // appeared before db/c's -changed ran.
        let mut record = RelationsRecord::default();
        let alone = BTreeMap::from([("r".to_owned(), view(&[("db/c", data(&[]))], data(&[])))]);
        for _ in 0..2 {
            let hook = next(&record, &alone).expect("created, then joined");
            record.succeeded(&hook);
        }
        let both = BTreeMap::from([(
            "r".to_owned(),
            view(&[("db/b", data(&[])), ("db/c", data(&[]))], data(&[])),
        )]);
        assert_eq!(
            settle(&mut record, &both),
            [
                "database-relation-changed db/c",
                "database-relation-joined db/b",
                "database-relation-changed db/b",
            ]
        );
    }

    #[test]
    fn relating_creates_then_joins_and_changes_each_remote_unit() {
        let mut record = RelationsRecord::default();
        let views = BTreeMap::from([(
            "r".to_owned(),
            view(
                &[("db/a", data(&[])), ("db/b", data(&[("host", "b")]))],
                data(&[]),
            ),
        )]);
        assert_eq!(
            settle(&mut record, &views),
            [
                "database-relation-created",
                "database-relation-joined db/a",
                "database-relation-changed db/a",
                "database-relation-joined db/b",
                "database-relation-changed db/b",
            ]
        );
        assert_eq!(next(&record, &views), None);
    }

    #[test]
    fn setup_creates_every_relation_before_anything_joins() {
        let mut record = RelationsRecord::default();
        let mut second = view(&[("web/a", data(&[]))], data(&[]));
        second.uid = "uid-s".into();
        second.endpoint = "website".into();
        let views = BTreeMap::from([
            ("r".to_owned(), view(&[("db/a", data(&[]))], data(&[]))),
            ("s".to_owned(), second),
        ]);
        let mut created = Vec::new();
        while let Some(hook) = next_created(&record, &views) {
            assert_eq!(hook.event, Event::Created, "{hook:?}");
            record.succeeded(&hook);
            created.push(hook.name());
            assert!(created.len() < 5, "created never ends: {created:?}");
        }
        assert_eq!(created, ["database-relation-created", "website-relation-created"]);
        // What is left, once started, is joining and changing.
        let rest = settle(&mut record, &views);
        assert!(rest.iter().all(|hook| !hook.contains("-created")), "{rest:?}");
        assert_eq!(rest.len(), 4, "{rest:?}");
    }

    #[test]
    fn data_changes_run_changed_for_the_unit_or_the_application() {
        let mut record = RelationsRecord::default();
        let mut views = BTreeMap::from([("r".to_owned(), view(&[("db/a", data(&[]))], data(&[])))]);
        settle(&mut record, &views);
        views.insert("r".into(), view(&[("db/a", data(&[("host", "a")]))], data(&[])));
        assert_eq!(settle(&mut record, &views), ["database-relation-changed db/a"]);
        views.insert(
            "r".into(),
            view(&[("db/a", data(&[("host", "a")]))], data(&[("version", "16")])),
        );
        assert_eq!(settle(&mut record, &views), ["database-relation-changed"]);
    }

    #[test]
    fn a_unit_leaving_departs_and_a_relation_removed_departs_everyone_then_breaks() {
        let mut record = RelationsRecord::default();
        let mut views = BTreeMap::from([(
            "r".to_owned(),
            view(&[("db/a", data(&[])), ("db/b", data(&[]))], data(&[])),
        )]);
        settle(&mut record, &views);
        views.insert("r".into(), view(&[("db/b", data(&[]))], data(&[])));
        assert_eq!(settle(&mut record, &views), ["database-relation-departed db/a"]);
        views.clear();
        assert_eq!(
            settle(&mut record, &views),
            ["database-relation-departed db/b", "database-relation-broken"]
        );
        assert!(record.relations.is_empty());
    }

    #[test]
    fn a_relation_made_again_under_its_name_breaks_the_old_one_first() {
        let mut record = RelationsRecord::default();
        let mut views = BTreeMap::from([("r".to_owned(), view(&[("db/a", data(&[]))], data(&[])))]);
        settle(&mut record, &views);
        let mut again = view(&[("db/a", data(&[]))], data(&[]));
        again.uid = "uid-r2".into();
        views.insert("r".into(), again);
        assert_eq!(
            settle(&mut record, &views),
            [
                "database-relation-departed db/a",
                "database-relation-broken",
                "database-relation-created",
                "database-relation-joined db/a",
                "database-relation-changed db/a",
            ]
        );
    }

    #[test]
    fn a_failed_hook_is_not_recorded_and_the_record_survives_a_restart() {
        let mut record = RelationsRecord::default();
        let views = BTreeMap::from([("r".to_owned(), view(&[("db/a", data(&[]))], data(&[])))]);
        let created = next(&record, &views).unwrap();
        record.succeeded(&created);
        let joined = next(&record, &views).unwrap();
        assert_eq!(joined.event, Event::Joined);
        // The agent restarts before joined succeeded: it reads its record back.
        let json = serde_json::to_string(&record).unwrap();
        let back: RelationsRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(next(&back, &views), Some(joined));
    }

    #[test]
    fn relation_hook_names_are_recognised() {
        assert!(is_relation_hook("db-relation-joined"));
        assert!(is_relation_hook("my-db-relation-broken"));
        assert!(!is_relation_hook("-relation-joined"));
        assert!(!is_relation_hook("db-relation-left"));
        assert!(!is_relation_hook("install"));
        assert_eq!(relation_id("db", "r"), "db:r");
    }
}
