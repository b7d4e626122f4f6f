//! The agent's state directory: what it must remember across restarts.
//!
//! ```text
//! <state-dir>/                 0711: hooks pass through to their unit, list nothing
//!   identity.json          the Machine this agent is (namespace, pool, name, node or external id)
//!   endpoints.json         every API server endpoint learned, and the one in use
//!   credentials/token      an external machine's own token, received at join
//!   agent.sock             the hook tool's socket (see `hook_tool`), 0660 with the hook user's group
//!   units/<unit>/unit.json the unit's record: hooks done, version, config applied, error
//!   units/<unit>/relations.json  what its relation hooks did: per relation, the remote
//!                          units joined and the data their last `-changed` saw
//!   units/<unit>/hooks/    the hook scripts last read, kept to stop and remove a unit
//!                          whose CSV and hooks ConfigMap are gone
//!   units/<unit>/run/      the running hook's script and config.json, readable by its group
//!   units/<unit>/sandbox/  the hooks' working directory, owned by the user they run as
//! ```
//!
//! Everything is private to the agent (0600 files, 0700 directories) but for what
//! a hook running as another user needs: see `units::privilege`.
//!
//! Every file is written whole to a temporary name and renamed, so a crash never
//! leaves half a file.

use std::{
    io,
    path::{Path, PathBuf},
};

use serde::{Serialize, de::DeserializeOwned};

/// A failure to read or write the state directory.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A file could not be read or written.
    #[error("cannot {action} {path}: check that the state directory is writable by the agent")]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A file holds something that is not what the agent wrote.
    #[error("{path} is not valid agent state: remove it to start afresh")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// The agent's state directory.
#[derive(Clone, Debug)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// Opens (and creates, private to the agent) the state directory at `root`.
    /// The directory and `units/` let others pass through (hooks that run as
    /// another user reach their unit's sandbox), not list.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StateError> {
        let root = root.into();
        create_dir(&root, PASS_THROUGH)?;
        create_dir(&root.join("units"), PASS_THROUGH)?;
        Ok(StateDir { root })
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The machine's identity file.
    pub fn identity_file(&self) -> PathBuf {
        self.root.join("identity.json")
    }

    /// The endpoints file.
    pub fn endpoints_file(&self) -> PathBuf {
        self.root.join("endpoints.json")
    }

    /// The token an external machine received when it joined.
    pub fn token_file(&self) -> PathBuf {
        self.root.join("credentials").join("token")
    }

    /// The hook tool's socket.
    pub fn socket_path(&self) -> PathBuf {
        self.root.join("agent.sock")
    }

    /// The directory of unit `unit`.
    pub fn unit_dir(&self, unit: &str) -> PathBuf {
        self.root.join("units").join(unit)
    }

    /// The record of unit `unit`.
    pub fn unit_file(&self, unit: &str) -> PathBuf {
        self.unit_dir(unit).join("unit.json")
    }

    /// What unit `unit`'s relation hooks did (see `relations::sequence`).
    pub fn relations_file(&self, unit: &str) -> PathBuf {
        self.unit_dir(unit).join("relations.json")
    }

    /// Where unit `unit`'s hook scripts are kept.
    pub fn hooks_dir(&self, unit: &str) -> PathBuf {
        self.unit_dir(unit).join("hooks")
    }

    /// What the running hook of unit `unit` reads: a copy of its script, its config.
    pub fn run_dir(&self, unit: &str) -> PathBuf {
        self.unit_dir(unit).join("run")
    }

    /// Unit `unit`'s sandbox, the working directory of its hooks.
    pub fn sandbox_dir(&self, unit: &str) -> PathBuf {
        self.unit_dir(unit).join("sandbox")
    }

    /// The names of the units recorded in the state directory.
    pub fn unit_names(&self) -> Result<Vec<String>, StateError> {
        let dir = self.root.join("units");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(io_error("list", &dir, source)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| io_error("list", &dir, source))?;
            if entry.path().join("unit.json").is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Forgets unit `unit` (after its `remove` hook), sandbox included.
    pub fn remove_unit(&self, unit: &str) -> Result<(), StateError> {
        let dir = self.unit_dir(unit);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(io_error("remove", &dir, source)),
        }
    }
}

/// Reads a JSON file the agent wrote; `None` when there is none.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StateError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(io_error("read", path, source)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| StateError::Corrupt {
            path: path.to_owned(),
            source,
        })
}

/// Writes `value` as JSON to `path`, whole or not at all.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StateError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|source| StateError::Corrupt {
        path: path.to_owned(),
        source,
    })?;
    write_file(path, &bytes)
}

/// Writes `bytes` to `path` through a temporary file and a rename, creating the
/// parent directory; the file is readable by the agent only.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    if let Some(parent) = path.parent() {
        create_private_dir(parent)?;
    }
    let tmp = path.with_extension("tmp");
    write_private(&tmp, bytes).map_err(|source| io_error("write", &tmp, source))?;
    std::fs::rename(&tmp, path).map_err(|source| io_error("rename into", path, source))
}

fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// The mode of the directories that others may pass through but not list.
pub const PASS_THROUGH: u32 = 0o711;

/// Creates `dir` (and its parents, with the same mode) and gives it `mode`, also
/// when it was there already.
pub fn create_dir(dir: &Path, mode: u32) -> Result<(), StateError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(|source| io_error("create directory", dir, source))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
        .map_err(|source| io_error("set the mode of", dir, source))
}

/// Writes `bytes` to `path` (whose directory exists) through a temporary file and
/// a rename, with `mode` and, when given, group `gid`, set before the rename.
pub fn write_shared(path: &Path, bytes: &[u8], mode: u32, gid: Option<u32>) -> Result<(), StateError> {
    use std::os::unix::fs::PermissionsExt;
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    write_private(&tmp, bytes).map_err(|source| io_error("write", &tmp, source))?;
    if gid.is_some() {
        std::os::unix::fs::chown(&tmp, None, gid)
            .map_err(|source| io_error("change the group of", &tmp, source))?;
    }
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .map_err(|source| io_error("set the mode of", &tmp, source))?;
    std::fs::rename(&tmp, path).map_err(|source| io_error("rename into", path, source))
}

/// Creates `dir` (and its parents) readable by the agent only.
pub fn create_private_dir(dir: &Path) -> Result<(), StateError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|source| io_error("create directory", dir, source))
}

fn io_error(action: &'static str, path: &Path, source: io::Error) -> StateError {
    StateError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A fresh directory under the system's temporary directory.
    pub(crate) fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "machine-agent-test-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn json_round_trips_and_missing_files_read_as_none() {
        let state = StateDir::open(temp_dir("json")).unwrap();
        let path = state.unit_file("demo");
        assert_eq!(read_json::<BTreeMap<String, String>>(&path).unwrap(), None);
        let value = BTreeMap::from([("port".to_owned(), "8080".to_owned())]);
        write_json(&path, &value).unwrap();
        assert_eq!(read_json::<BTreeMap<String, String>>(&path).unwrap(), Some(value));
        assert_eq!(state.unit_names().unwrap(), vec!["demo".to_owned()]);
        state.remove_unit("demo").unwrap();
        assert!(state.unit_names().unwrap().is_empty());
        std::fs::remove_dir_all(state.root()).unwrap();
    }

    #[test]
    fn a_corrupt_file_is_named_in_the_error() {
        let state = StateDir::open(temp_dir("corrupt")).unwrap();
        let path = state.identity_file();
        std::fs::write(&path, b"{not json").unwrap();
        let error = read_json::<BTreeMap<String, String>>(&path).unwrap_err();
        assert!(error.to_string().contains("identity.json"), "{error}");
        std::fs::remove_dir_all(state.root()).unwrap();
    }
}
