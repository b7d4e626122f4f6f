//! The relation hook tools, served by the agent on the hook tool's socket:
//!
//! - `relation-ids [endpoint]`: the ids (`<endpoint>:<relation>`) of the unit's relations;
//! - `relation-list [-r id]`: the remote units of a relation;
//! - `relation-get [-r id] [--app] [--format json|yaml] [key|-] [unit|app]`:
//!   a value (or, for `-` or no key, every value, as YAML unless `--format
//!   json`) of a remote unit's or application's data, or of the unit's own
//!   side;
//! - `relation-set [-r id] [--app] key=value...`: sets the unit's own data,
//!   or with `--app` its application's (its leader only); an empty value
//!   removes the key.
//!
//! Inside a relation hook, `-r` defaults to the hook's relation and the unit
//! of `relation-get` to the hook's remote unit (the command line fills them
//! in from the hook's environment). Writes go to the Databags at once, by
//! merge patch of their status (keys set or removed, not the whole data), and
//! the API server refuses a write to a bag that is not the unit's to write.
//! A unit reads its own writes at once: `relation-get` of its own bag right
//! after `relation-set` gives the new value, before the watch brings it
//! ([`Written`]).

use std::collections::BTreeMap;

use kube::api::{Patch, PatchParams};
use olm_api::model::{Databag, application_bag, unit_bag, unit_name};
use serde::{Deserialize, Serialize};

use super::{Relations, view::RelationView};
use crate::leadership::Leadership;
use crate::tool_format::{Format, print_map, print_value};

/// The most one side's data in a relation holds, in bytes of keys and values: every agent of
/// the namespace keeps every bag in memory, so a hook that sets more and more must be stopped
/// well before the API server's limit on an object.
pub const MAX_DATA_BYTES: usize = 256 * 1024;

/// A relation tool's call, as the agent receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "tool", rename_all = "kebab-case")]
pub enum RelationTool {
    /// The ids of the unit's relations, of one endpoint or all.
    RelationIds {
        /// The endpoint.
        #[serde(default)]
        endpoint: Option<String>,
    },
    /// The remote units of a relation.
    RelationList {
        /// The relation's id (or name).
        #[serde(default)]
        relation: Option<String>,
    },
    /// Data of one side of a relation.
    RelationGet {
        /// The relation's id (or name).
        #[serde(default)]
        relation: Option<String>,
        /// The key; `None` or `-`: all of them.
        #[serde(default)]
        key: Option<String>,
        /// The unit (`app/machine`) or, with `app`, the application.
        #[serde(default)]
        target: Option<String>,
        /// Read an application's data.
        #[serde(default)]
        app: bool,
        /// How to print (default: a value as it is, all data as YAML).
        #[serde(default)]
        format: Option<Format>,
    },
    /// Sets the unit's (or its application's) data.
    RelationSet {
        /// The relation's id (or name).
        #[serde(default)]
        relation: Option<String>,
        /// Set the application's data (the leader only).
        #[serde(default)]
        app: bool,
        /// Key → value; an empty value removes the key.
        settings: BTreeMap<String, String>,
    },
}

/// The relation tools on the command line (`machine-agent hook relation-...`).
#[derive(clap::Subcommand, Debug)]
pub enum RelationCommand {
    /// Print the ids of the unit's relations (of ENDPOINT, or all), one a line.
    RelationIds {
        /// The endpoint.
        endpoint: Option<String>,
    },
    /// Print the remote units of a relation, one a line.
    RelationList {
        /// The relation's id (default: the relation hook's own).
        #[arg(short = 'r', long = "relation")]
        relation: Option<String>,
    },
    /// Print KEY of a unit's (or with --app an application's) data in a
    /// relation; `-` or no KEY: all of it, as YAML (or as --format asks).
    RelationGet {
        /// The relation's id (default: the relation hook's own).
        #[arg(short = 'r', long = "relation")]
        relation: Option<String>,
        /// Read an application's data (default: the remote application).
        #[arg(long)]
        app: bool,
        /// The key, or `-` for all.
        key: Option<String>,
        /// The unit (`app/machine`; default: the relation hook's remote unit),
        /// or with --app the application.
        target: Option<String>,
        /// Print as JSON or YAML (default: a value as it is, all data as YAML).
        #[arg(long, value_enum)]
        format: Option<Format>,
    },
    /// Set the unit's own data in a relation (with --app, its application's:
    /// the leader only); `key=` removes the key.
    RelationSet {
        /// The relation's id (default: the relation hook's own).
        #[arg(short = 'r', long = "relation")]
        relation: Option<String>,
        /// Set the application's data.
        #[arg(long)]
        app: bool,
        /// `key=value` pairs.
        #[arg(required = true, value_parser = parse_setting)]
        settings: Vec<(String, String)>,
    },
}

fn parse_setting(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{value:?} is not key=value")),
    }
}

impl RelationCommand {
    /// The call, with what the hook's environment gives by default: the
    /// relation of a relation hook, and its remote unit.
    pub fn into_tool(self) -> RelationTool {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let relation = |given: Option<String>| given.or_else(|| env(super::RELATION_ID_ENV));
        match self {
            RelationCommand::RelationIds { endpoint } => RelationTool::RelationIds { endpoint },
            RelationCommand::RelationList { relation: r } => RelationTool::RelationList {
                relation: relation(r),
            },
            RelationCommand::RelationGet {
                relation: r,
                app,
                key,
                target,
                format,
            } => RelationTool::RelationGet {
                relation: relation(r),
                target: target.or_else(|| if app { None } else { env(super::REMOTE_UNIT_ENV) }),
                key,
                app,
                format,
            },
            RelationCommand::RelationSet {
                relation: r,
                app,
                settings,
            } => RelationTool::RelationSet {
                relation: relation(r),
                app,
                settings: settings.into_iter().collect(),
            },
        }
    }
}

/// Who calls: the unit's application and its unit name as hooks see it.
struct Caller<'a> {
    application: &'a str,
    unit: String,
}

impl Relations {
    /// Answers `tool` for a hook of unit `unit` of `application`: what it prints, or why not.
    pub async fn answer(
        &self,
        unit: &str,
        application: Option<&str>,
        leadership: &Leadership,
        tool: RelationTool,
    ) -> Result<Option<String>, String> {
        let application =
            application.ok_or_else(|| format!("unit {unit} names no application: it has no relations"))?;
        let views = self
            .views(application)
            .ok_or("the agent has not read the relations yet: try again")?;
        let caller = Caller {
            application,
            unit: unit_name(application, &self.machine),
        };
        match tool {
            RelationTool::RelationIds { endpoint } => Ok(Some(ids(&views, endpoint.as_deref()))),
            RelationTool::RelationList { relation } => {
                let (_, view) = find(&views, relation.as_deref())?;
                let units: Vec<&str> = view.remote_units.keys().map(String::as_str).collect();
                Ok(Some(units.join("\n")))
            }
            RelationTool::RelationGet {
                relation,
                key,
                target,
                app,
                format,
            } => {
                let (name, view) = find(&views, relation.as_deref())?;
                let data = self.data_of(&caller, name, view, target.as_deref(), app)?;
                get(&data, key.as_deref(), format).map(Some)
            }
            RelationTool::RelationSet {
                relation,
                app,
                settings,
            } => {
                let (name, _) = find(&views, relation.as_deref())?;
                if app && !leadership.confirms(application) {
                    return Err(format!(
                        "only the leader of {application} sets its application data, and {} does not lead (is-leader says False)",
                        caller.unit
                    ));
                }
                self.set(application, name, app, &settings).await?;
                Ok(None)
            }
        }
    }

    /// The data `target` (a unit, or with `app` an application) has in relation `name`.
    fn data_of(
        &self,
        caller: &Caller<'_>,
        name: &str,
        view: &RelationView,
        target: Option<&str>,
        app: bool,
    ) -> Result<BTreeMap<String, String>, String> {
        let own_bag = |bag: String| self.data(&bag);
        let target = match (target, app) {
            (Some(target), true) => target.split('/').next().unwrap_or(target),
            (Some(target), false) => target,
            (None, true) => view.remote_app.as_str(),
            (None, false) => {
                return Err(
                    "relation-get needs a unit (or --app) outside a hook about a remote unit".to_owned(),
                );
            }
        };
        if target == caller.unit {
            Ok(own_bag(unit_bag(name, caller.application, &self.machine)))
        } else if target == caller.application {
            Ok(own_bag(application_bag(name, caller.application)))
        } else if target == view.remote_app {
            Ok(view.remote_app_data.clone())
        } else {
            view.remote_units.get(target).cloned().ok_or_else(|| {
                format!(
                    "{target:?} is in neither side of relation {name}: its remote units are {}",
                    list(view.remote_units.keys())
                )
            })
        }
    }

    /// The data of Databag `bag`: what this machine's units last wrote to it,
    /// else what the watch holds (none when it holds no such bag).
    fn data(&self, bag: &str) -> BTreeMap<String, String> {
        let key = kube::runtime::reflector::ObjectRef::new(bag).within(&self.namespace);
        let seen = self.bags.get(&key);
        let mut written = self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (data, keep) = freshest(seen.as_deref(), written.get(bag));
        if !keep {
            written.remove(bag);
        }
        data
    }

    /// Sets `settings` in the unit's (or with `app` the application's) bag of relation `name`.
    async fn set(
        &self,
        application: &str,
        name: &str,
        app: bool,
        settings: &BTreeMap<String, String>,
    ) -> Result<(), String> {
        let bag = if app {
            application_bag(name, application)
        } else {
            unit_bag(name, application, &self.machine)
        };
        check_settings(&bag, &self.data(&bag), settings)?;
        let data: serde_json::Map<String, serde_json::Value> = settings
            .iter()
            .map(|(k, v)| {
                let value = if v.is_empty() {
                    serde_json::Value::Null
                } else {
                    serde_json::Value::String(v.clone())
                };
                (k.clone(), value)
            })
            .collect();
        let patch = serde_json::json!({"status": {"data": data}});
        let params = PatchParams {
            field_manager: Some(olm_api::substrate::AGENT_FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let stored = self
            .api
            .patch_status(&bag, &params, &Patch::Merge(&patch))
            .await
            .map_err(|error| format!("cannot write Databag {bag}: {error}"))?;
        let written = Written {
            uid: stored.metadata.uid.clone().unwrap_or_default(),
            data: stored.status.map(|s| s.data).unwrap_or_default(),
        };
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(bag, written);
        Ok(())
    }
}

/// What a unit last wrote to one of its bags: the data the API server
/// answered the write with, and the bag's uid. Only the unit (or, for the
/// application bag, its leader on this machine) writes that data, so it is
/// the newest until the watch shows the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The bag's uid: a bag removed and made again is another bag.
    pub uid: String,
    /// Its data after the write.
    pub data: BTreeMap<String, String>,
}

/// The data of a bag the watch holds as `seen`, given what this machine last
/// `written` to it, and whether that write is still to be kept. Pure. The
/// write wins until the watch shows its data; a bag gone, or made again
/// (another uid), drops it.
pub fn freshest(seen: Option<&Databag>, written: Option<&Written>) -> (BTreeMap<String, String>, bool) {
    let seen_data = seen
        .and_then(|b| b.status.as_ref().map(|s| s.data.clone()))
        .unwrap_or_default();
    match (seen, written) {
        (Some(bag), Some(written))
            if bag.metadata.uid.as_deref() == Some(written.uid.as_str()) && seen_data != written.data =>
        {
            (written.data.clone(), true)
        }
        _ => (seen_data, false),
    }
}

/// Whether `settings` may be set in Databag `bag`, which holds `data`: each key not empty and
/// without '=' (what the command line can give: a request sent to the socket by hand may hold
/// anything), and the data no larger than [`MAX_DATA_BYTES`] once set.
fn check_settings(
    bag: &str,
    data: &BTreeMap<String, String>,
    settings: &BTreeMap<String, String>,
) -> Result<(), String> {
    if let Some(key) = settings.keys().find(|k| k.is_empty() || k.contains('=')) {
        return Err(format!(
            "relation-set: key {key:?} is not valid: a key is not empty and has no '='"
        ));
    }
    let mut merged = data.clone();
    for (key, value) in settings {
        if value.is_empty() {
            merged.remove(key);
        } else {
            merged.insert(key.clone(), value.clone());
        }
    }
    let size: usize = merged.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_DATA_BYTES {
        return Err(format!(
            "relation-set: Databag {bag} would hold {size} bytes, more than the {MAX_DATA_BYTES} one side of a relation may: set less, or remove keys with key="
        ));
    }
    Ok(())
}

/// The ids of the relations in view, of `endpoint` or all, one a line.
fn ids(views: &BTreeMap<String, RelationView>, endpoint: Option<&str>) -> String {
    let ids: Vec<String> = views
        .iter()
        .filter(|(_, v)| endpoint.is_none_or(|e| v.endpoint == e))
        .map(|(name, v)| super::sequence::relation_id(&v.endpoint, name))
        .collect();
    ids.join("\n")
}

/// The relation `id` names (`<endpoint>:<relation>`, or the Relation's name).
fn find<'a>(
    views: &'a BTreeMap<String, RelationView>,
    id: Option<&str>,
) -> Result<(&'a str, &'a RelationView), String> {
    let id = id.ok_or("no relation: give -r <id> (relation-ids lists them) outside a relation hook")?;
    let name = id.rsplit(':').next().unwrap_or(id);
    views
        .get_key_value(name)
        .filter(|(_, v)| !id.contains(':') || id == super::sequence::relation_id(&v.endpoint, name))
        .map(|(name, view)| (name.as_str(), view))
        .ok_or_else(|| {
            format!(
                "the unit has no relation {id:?}: its relations are {}",
                list(
                    views
                        .iter()
                        .map(|(n, v)| super::sequence::relation_id(&v.endpoint, n))
                )
            )
        })
}

/// `key`'s value (empty when unset), or every value as a JSON object.
/// `relation-get`: the value of `key` (empty when unset, as Juju), or with
/// no key or `-` all of `data`, printed as `format` asks.
fn get(data: &BTreeMap<String, String>, key: Option<&str>, format: Option<Format>) -> Result<String, String> {
    match key {
        None | Some("-") => print_map(data, format),
        Some(key) => print_value(data.get(key).map_or("", String::as_str), format),
    }
}

fn list(items: impl Iterator<Item = impl AsRef<str>>) -> String {
    let items: Vec<String> = items.map(|i| i.as_ref().to_owned()).collect();
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views() -> BTreeMap<String, RelationView> {
        let view = RelationView {
            uid: "uid-r".into(),
            endpoint: "database".into(),
            remote_app: "db".into(),
            remote_units: BTreeMap::from([(
                "db/dbs-a".to_owned(),
                BTreeMap::from([("host".to_owned(), "10.0.0.1".to_owned())]),
            )]),
            remote_app_data: BTreeMap::new(),
        };
        let mut other = view.clone();
        other.endpoint = "cache".into();
        BTreeMap::from([("r".to_owned(), view), ("s".to_owned(), other)])
    }

    #[test]
    fn a_unit_reads_its_own_write_until_the_watch_shows_it() {
        let bag = |uid: &str, data: &[(&str, &str)]| -> Databag {
            let mut bag = super::super::view::tests::bag("r", "web", Some("m"), data);
            bag.metadata.uid = Some(uid.to_owned());
            bag
        };
        let data = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let written = Written {
            uid: "u1".into(),
            data: data(&[("host", "new")]),
        };
        // The watch still holds the old value: the write wins, and is kept.
        let old = bag("u1", &[("host", "old")]);
        assert_eq!(
            freshest(Some(&old), Some(&written)),
            (data(&[("host", "new")]), true)
        );
        // The watch caught up: its data, and the write is dropped.
        let caught_up = bag("u1", &[("host", "new")]);
        assert_eq!(
            freshest(Some(&caught_up), Some(&written)),
            (data(&[("host", "new")]), false)
        );
        // The bag was made again, or is gone: the write is of another bag.
        let again = bag("u2", &[]);
        assert_eq!(freshest(Some(&again), Some(&written)), (BTreeMap::new(), false));
        assert_eq!(freshest(None, Some(&written)), (BTreeMap::new(), false));
        // Nothing written: what the watch holds.
        assert_eq!(freshest(Some(&old), None), (data(&[("host", "old")]), false));
    }

    #[test]
    fn relations_are_found_by_id_or_name_and_a_wrong_one_lists_the_right_ones() {
        let views = views();
        assert_eq!(ids(&views, None), "database:r\ncache:s");
        assert_eq!(ids(&views, Some("cache")), "cache:s");
        assert_eq!(find(&views, Some("database:r")).unwrap().0, "r");
        assert_eq!(find(&views, Some("r")).unwrap().0, "r");
        let error = find(&views, Some("cache:r")).unwrap_err();
        assert_eq!(
            error,
            "the unit has no relation \"cache:r\": its relations are database:r, cache:s"
        );
        assert!(find(&views, None).unwrap_err().contains("give -r"));
        // An empty id is quoted: unquoted, the refusal named nothing.
        assert_eq!(
            find(&views, Some("")).unwrap_err(),
            "the unit has no relation \"\": its relations are database:r, cache:s"
        );
    }

    #[test]
    fn a_key_reads_its_value_and_no_key_reads_all() {
        let data = BTreeMap::from([("host".to_owned(), "10.0.0.1".to_owned())]);
        let get = |key: Option<&str>, format: Option<Format>| get(&data, key, format).unwrap();
        assert_eq!(get(Some("host"), None), "10.0.0.1");
        assert_eq!(get(Some("port"), None), "");
        assert_eq!(get(Some("host"), Some(Format::Json)), r#""10.0.0.1""#);
        assert_eq!(get(Some("-"), None), "host: \"10.0.0.1\"");
        assert_eq!(get(None, Some(Format::Yaml)), "host: \"10.0.0.1\"");
        assert_eq!(get(None, Some(Format::Json)), r#"{"host":"10.0.0.1"}"#);
    }

    /// A client whose every request fails: no API server.
    fn offline() -> kube::Client {
        let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("no API server here"))
        });
        kube::Client::new(service, "ns")
    }

    /// web's unit on edge-a, related to db (units dbs-a, dbs-b) by `r`.
    fn web_on_edge_a() -> Relations {
        use crate::relations::view::tests::{bag, relation};
        let bags = vec![
            bag("r", "web", None, &[("url", "http://web")]),
            bag("r", "web", Some("edge-a"), &[("user", "edge-a")]),
            bag("r", "db", None, &[("database", "main")]),
            bag("r", "db", Some("dbs-a"), &[("host", "10.0.0.1")]),
            bag("r", "db", Some("dbs-b"), &[]),
        ];
        Relations::of(offline(), "ns", "edge-a", vec![relation("r", true)], bags)
    }

    #[tokio::test]
    async fn hooks_read_either_side_and_write_only_their_own() {
        let relations = web_on_edge_a();
        let leadership = Leadership::new(std::time::Duration::from_secs(30));
        let ask = async |tool: RelationTool| relations.answer("web.v1", Some("web"), &leadership, tool).await;
        let get = |key: &str, target: &str, app: bool| RelationTool::RelationGet {
            relation: Some("database:r".into()),
            key: Some(key.into()),
            target: (!target.is_empty()).then(|| target.to_owned()),
            app,
            format: None,
        };
        let ids = RelationTool::RelationIds { endpoint: None };
        assert_eq!(ask(ids).await, Ok(Some("database:r".into())));
        let list = RelationTool::RelationList {
            relation: Some("r".into()),
        };
        assert_eq!(ask(list).await, Ok(Some("db/dbs-a\ndb/dbs-b".into())));
        assert_eq!(
            ask(get("host", "db/dbs-a", false)).await,
            Ok(Some("10.0.0.1".into()))
        );
        assert_eq!(ask(get("database", "", true)).await, Ok(Some("main".into())));
        assert_eq!(
            ask(get("user", "web/edge-a", false)).await,
            Ok(Some("edge-a".into()))
        );
        assert_eq!(ask(get("url", "web", true)).await, Ok(Some("http://web".into())));
        let stranger = ask(get("host", "db/dbs-z", false)).await.unwrap_err();
        assert!(
            stranger.contains("remote units are db/dbs-a, db/dbs-b"),
            "{stranger}"
        );
        let set = |app: bool| RelationTool::RelationSet {
            relation: None,
            app,
            settings: BTreeMap::from([("user".to_owned(), "x".to_owned())]),
        };
        assert!(ask(set(false)).await.unwrap_err().contains("give -r"));
        let set = |app: bool| RelationTool::RelationSet {
            relation: Some("database:r".into()),
            app,
            settings: BTreeMap::from([("user".to_owned(), "x".to_owned())]),
        };
        // Not the leader: refused before any write.
        let refused = ask(set(true)).await.unwrap_err();
        assert_eq!(
            refused,
            "only the leader of web sets its application data, and web/edge-a does not lead (is-leader says False)"
        );
        // Its own bag: written to the API server (here, none answers).
        let offline = ask(set(false)).await.unwrap_err();
        assert!(
            offline.starts_with("cannot write Databag r.web.edge-a: "),
            "{offline}"
        );
    }

    #[test]
    fn calls_are_one_json_object_tagged_by_tool() {
        let tool = RelationTool::RelationSet {
            relation: Some("database:r".into()),
            app: false,
            settings: BTreeMap::from([("host".to_owned(), "10.0.0.1".to_owned())]),
        };
        let json = serde_json::to_value(&tool).unwrap();
        assert_eq!(json["tool"], "relation-set");
        assert_eq!(serde_json::from_value::<RelationTool>(json).unwrap(), tool);
    }
}
