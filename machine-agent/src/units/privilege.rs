//! Who a unit's hooks run as, and the files such a hook may use.
//!
//! When the agent runs as root, the hooks of a unit whose CSV does not say
//! `privileged: true` run as the hook user (`--hook-uid`, `--hook-gid`: nobody
//! and nogroup by default), with that group only. A privileged unit's hooks run
//! as root. An agent that does not run as root runs every hook as its own user,
//! and refuses a privileged unit ([`PrivilegeError::NeedsRoot`]).
//!
//! An unprivileged hook can use what it needs, and nothing else of the state
//! directory:
//!
//! ```text
//! <state-dir>/                 0711: others pass through to a name they know, list nothing
//!   identity.json, endpoints.json, credentials/, units/<unit>/unit.json, units/<unit>/hooks/
//!                              0600 or 0700: the agent's only
//!   agent.sock                 0660, group of the hook user: the hook tool's socket
//!   units/, units/<unit>/      0711
//!   units/<unit>/run/          0750, group of the hook user: the running hook's
//!                              script and config.json, which it can read, not change
//!   units/<unit>/sandbox/      0700, owned by the hook's user: its working directory and HOME
//! ```
//!
//! The agent never writes into a directory a hook's user owns, where a hook could
//! have left a link to a file of the agent's: it creates the sandbox, and when the
//! user of a unit's hooks changes, it hands the sandbox over to a less privileged
//! user (changing the owner of each entry, links not followed) or, for root, starts
//! a fresh one (a sandbox an unprivileged user could write is no place for root).
//!
//! Every unprivileged unit runs as the same hook user: units are kept from the
//! agent's own files, not from each other.

use std::{
    io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use super::sequence::Config;
use crate::state::{self, StateDir, StateError};

/// A numeric user and group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ids {
    /// The uid.
    pub uid: u32,
    /// The gid.
    pub gid: u32,
}

impl Ids {
    /// The agent process's own effective uid and gid.
    pub fn current() -> Self {
        Ids {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
        }
    }

    /// Whether these are root's.
    pub fn is_root(self) -> bool {
        self.uid == 0
    }
}

/// The agent's user and the user of unprivileged hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Users {
    /// The agent's own user.
    pub agent: Ids,
    /// Who unprivileged hooks run as when the agent is root.
    pub hook: Ids,
}

/// Why a unit's hooks cannot run as the unit asks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrivilegeError {
    /// A privileged unit on an agent that is not root.
    #[error(
        "unit {unit} needs root (its CSV's machine strategy says `privileged: true`), but the agent runs as uid {uid}: run the agent as root, or make the hooks work unprivileged and drop `privileged`"
    )]
    NeedsRoot {
        /// The unit.
        unit: String,
        /// The agent's uid.
        uid: u32,
    },
}

/// Who the hooks of `unit` run as (pure).
pub fn hook_ids(users: &Users, unit: &str, privileged: bool) -> Result<Ids, PrivilegeError> {
    match (users.agent.is_root(), privileged) {
        (true, true) => Ok(users.agent),
        (true, false) => Ok(users.hook),
        (false, false) => Ok(users.agent),
        (false, true) => Err(PrivilegeError::NeedsRoot {
            unit: unit.to_owned(),
            uid: users.agent.uid,
        }),
    }
}

/// What to do with a unit's sandbox before a hook runs as `wanted` (pure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxChange {
    /// It is the hook's already (or the agent cannot change owners).
    Keep,
    /// Give every entry to the hook's user (it is less privileged than the owner).
    HandOver,
    /// Remove it and start a fresh one: root must not work in a sandbox an
    /// unprivileged user could write.
    StartAfresh,
}

/// What to do with a sandbox owned by `owner` for a hook running as `wanted`,
/// when the agent is root or not (pure).
pub fn sandbox_change(agent_is_root: bool, owner: u32, wanted: u32) -> SandboxChange {
    if !agent_is_root || owner == wanted {
        SandboxChange::Keep
    } else if wanted == 0 {
        SandboxChange::StartAfresh
    } else {
        SandboxChange::HandOver
    }
}

/// The files of one hook run, made usable by its user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// The copy of the script to run.
    pub script: PathBuf,
    /// The effective config, as JSON.
    pub config_file: PathBuf,
    /// The working directory and HOME.
    pub sandbox: PathBuf,
}

/// Prepares hook `hook` (its name) of unit `unit` to run as `ids`: the unit's directories,
/// a copy of its script and its config in `run/`, readable by `ids`' group, and
/// its sandbox, owned by `ids`.
pub fn prepare(
    state: &StateDir,
    users: &Users,
    unit: &str,
    hook: &str,
    config: &Config,
    ids: Ids,
) -> Result<Prepared, StateError> {
    let source = state.hooks_dir(unit).join(hook);
    let script_text = std::fs::read(&source).map_err(|source_error| StateError::Io {
        action: "read",
        path: source.clone(),
        source: source_error,
    })?;
    prepare_script(state, users, unit, hook, &script_text, config, ids)
}

/// [`prepare`] for any script of unit `unit` (a hook's, an action's): its text
/// `script_text` is copied to `run/<name>`.
pub fn prepare_script(
    state: &StateDir,
    users: &Users,
    unit: &str,
    name: &str,
    script_text: &[u8],
    config: &Config,
    ids: Ids,
) -> Result<Prepared, StateError> {
    let root = users.agent.is_root();
    let unit_dir = state.unit_dir(unit);
    state::create_dir(&unit_dir, state::PASS_THROUGH)?;
    // Where an agent before hook users kept it, private.
    let _ = std::fs::remove_file(unit_dir.join("config.json"));
    let group = root.then_some(ids.gid);
    let run = state.run_dir(unit);
    state::create_dir(&run, 0o750)?;
    set_owner(&run, None, group, false)?;
    let script = run.join(name);
    state::write_shared(&script, script_text, 0o750, group)?;
    let config_file = run.join("config.json");
    let config_json = serde_json::to_vec_pretty(config).map_err(|source| StateError::Corrupt {
        path: config_file.clone(),
        source,
    })?;
    state::write_shared(&config_file, &config_json, 0o640, group)?;
    let sandbox = state.sandbox_dir(unit);
    prepare_sandbox(&sandbox, unit, root, ids)?;
    Ok(Prepared {
        script,
        config_file,
        sandbox,
    })
}

fn prepare_sandbox(sandbox: &Path, unit: &str, root: bool, ids: Ids) -> Result<(), StateError> {
    let owner = match std::fs::symlink_metadata(sandbox) {
        Ok(meta) if meta.is_dir() => Some(meta.uid()),
        Ok(_) => {
            // Not a directory (nothing of the agent's makes one): start afresh.
            remove(sandbox)?;
            None
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(StateError::Io {
                action: "inspect",
                path: sandbox.to_owned(),
                source,
            });
        }
    };
    if let Some(owner) = owner {
        match sandbox_change(root, owner, ids.uid) {
            SandboxChange::Keep => return Ok(()),
            SandboxChange::HandOver => {
                tracing::info!(
                    unit,
                    from = owner,
                    to = ids.uid,
                    "handing the sandbox over to the hooks' user"
                );
                return hand_over(sandbox, ids);
            }
            SandboxChange::StartAfresh => {
                tracing::warn!(
                    unit,
                    owner,
                    "the unit's hooks now run as root: starting a fresh sandbox, since uid {owner} could write the old one"
                );
                remove(sandbox)?;
            }
        }
    }
    state::create_private_dir(sandbox)?;
    if root {
        set_owner(sandbox, Some(ids.uid), Some(ids.gid), false)?;
    }
    Ok(())
}

fn remove(path: &Path) -> Result<(), StateError> {
    // `remove_dir_all` does not follow links.
    let result = if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    result.map_err(|source| StateError::Io {
        action: "remove",
        path: path.to_owned(),
        source,
    })
}

/// Gives `dir` and everything in it to `ids`, children before their directory (so
/// that the directories above an entry stay the old owner's while it is changed),
/// never following a link. A file with more than one link is left as it is: it may
/// be another name of a file outside the sandbox.
fn hand_over(dir: &Path, ids: Ids) -> Result<(), StateError> {
    let entries = std::fs::read_dir(dir).map_err(|source| StateError::Io {
        action: "list",
        path: dir.to_owned(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| StateError::Io {
            action: "list",
            path: dir.to_owned(),
            source,
        })?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).map_err(|source| StateError::Io {
            action: "inspect",
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() {
            hand_over(&path, ids)?;
        } else if meta.nlink() > 1 && !meta.file_type().is_symlink() {
            tracing::warn!(path = %path.display(), "a file with several links is not handed over");
        } else {
            set_owner(&path, Some(ids.uid), Some(ids.gid), true)?;
        }
    }
    set_owner(dir, Some(ids.uid), Some(ids.gid), true)
}

fn set_owner(path: &Path, uid: Option<u32>, gid: Option<u32>, link: bool) -> Result<(), StateError> {
    if uid.is_none() && gid.is_none() {
        return Ok(());
    }
    let result = if link {
        std::os::unix::fs::lchown(path, uid, gid)
    } else {
        std::os::unix::fs::chown(path, uid, gid)
    };
    result.map_err(|source| StateError::Io {
        action: "change the owner of",
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: Ids = Ids { uid: 0, gid: 0 };
    const NOBODY: Ids = Ids {
        uid: 65534,
        gid: 65534,
    };

    #[test]
    fn a_root_agent_runs_unprivileged_units_as_the_hook_user_and_privileged_ones_as_root() {
        let users = Users {
            agent: ROOT,
            hook: NOBODY,
        };
        assert_eq!(hook_ids(&users, "demo.v1", false), Ok(NOBODY));
        assert_eq!(hook_ids(&users, "demo.v1", true), Ok(ROOT));
    }

    #[test]
    fn an_agent_that_is_not_root_runs_hooks_as_itself_and_refuses_privileged_units() {
        let agent = Ids { uid: 1000, gid: 1000 };
        let users = Users { agent, hook: NOBODY };
        assert_eq!(hook_ids(&users, "demo.v1", false), Ok(agent));
        let error = hook_ids(&users, "demo.v1", true).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unit demo.v1 needs root (its CSV's machine strategy says `privileged: true`), but the agent runs as uid 1000: run the agent as root, or make the hooks work unprivileged and drop `privileged`"
        );
    }

    #[test]
    fn a_sandbox_goes_down_to_a_less_privileged_user_and_never_up_to_root() {
        assert_eq!(sandbox_change(true, 65534, 65534), SandboxChange::Keep);
        assert_eq!(sandbox_change(true, 0, 65534), SandboxChange::HandOver);
        assert_eq!(sandbox_change(true, 1000, 65534), SandboxChange::HandOver);
        assert_eq!(sandbox_change(true, 65534, 0), SandboxChange::StartAfresh);
        // Without root the agent cannot change owners: what is there stays.
        assert_eq!(sandbox_change(false, 0, 1000), SandboxChange::Keep);
    }
}
