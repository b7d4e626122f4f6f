//! Whether the hook user can reach the state directory, checked when the agent
//! starts rather than at the first hook.
//!
//! An unprivileged hook runs in `<state-dir>/units/<unit>/run/` and
//! `.../sandbox/`, so every directory from `/` down to the state directory must
//! let the hook user pass (search permission). A state directory under a
//! private home (`/root` is 0700 on Debian) fails every hook; the agent refuses
//! to start instead, naming the directory in the way and what to change.

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use super::privilege::{Ids, Users};

/// One directory on the way to the state directory: its path, mode and owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The directory.
    pub path: PathBuf,
    /// Its permission bits.
    pub mode: u32,
    /// Its owner.
    pub uid: u32,
    /// Its group.
    pub gid: u32,
}

/// Why the agent does not start.
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    /// A directory above the state directory does not let the hook user pass.
    #[error(
        "the hook user (uid {hook_uid}, gid {hook_gid}) cannot reach the state directory {state_dir}: {blocked} (mode {mode:04o}, owner uid {owner}) does not let it pass, so every unprivileged hook would fail. Choose a --state-dir under directories that others may pass (the agent DaemonSet uses /var/lib/olm-rs-agent), let others pass {blocked} (chmod o+x), or set --hook-uid/--hook-gid to a user that may pass"
    )]
    Blocked {
        /// The state directory.
        state_dir: PathBuf,
        /// The directory in the way.
        blocked: PathBuf,
        /// Its mode.
        mode: u32,
        /// Its owner.
        owner: u32,
        /// The hook user.
        hook_uid: u32,
        /// The hook user's group.
        hook_gid: u32,
    },
    /// A directory on the way could not be inspected.
    #[error("cannot inspect {path} on the way to the state directory: {source}")]
    Inspect {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Whether `user` (with `user.gid` as its only group) may pass through `step` (pure).
pub fn may_pass(step: &Step, user: Ids) -> bool {
    if user.uid == 0 {
        return true;
    }
    let shift = if step.uid == user.uid {
        6
    } else if step.gid == user.gid {
        3
    } else {
        0
    };
    (step.mode >> shift) & 0o1 == 1
}

/// The first directory of `path` (from `/` down) that `user` may not pass (pure).
pub fn first_blocked(path: &[Step], user: Ids) -> Option<&Step> {
    path.iter().find(|step| !may_pass(step, user))
}

/// Every directory from `/` down to `dir`, with its mode and owner.
pub fn steps_to(dir: &Path) -> Result<Vec<Step>, ReachError> {
    let dir = dir.canonicalize().map_err(|source| ReachError::Inspect {
        path: dir.to_owned(),
        source,
    })?;
    let mut chain: Vec<&Path> = dir.ancestors().collect();
    chain.reverse();
    chain
        .into_iter()
        .map(|path| {
            let meta = std::fs::metadata(path).map_err(|source| ReachError::Inspect {
                path: path.to_owned(),
                source,
            })?;
            Ok(Step {
                path: path.to_owned(),
                mode: meta.mode() & 0o7777,
                uid: meta.uid(),
                gid: meta.gid(),
            })
        })
        .collect()
}

/// Fails when hooks would run as the hook user and that user cannot reach
/// `state_dir`. An agent that is not root runs hooks as itself: nothing to check.
pub fn check(state_dir: &Path, users: &Users) -> Result<(), ReachError> {
    if !users.agent.is_root() {
        return Ok(());
    }
    let steps = steps_to(state_dir)?;
    match first_blocked(&steps, users.hook) {
        None => Ok(()),
        Some(step) => Err(ReachError::Blocked {
            state_dir: state_dir.to_owned(),
            blocked: step.path.clone(),
            mode: step.mode,
            owner: step.uid,
            hook_uid: users.hook.uid,
            hook_gid: users.hook.gid,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOBODY: Ids = Ids {
        uid: 65534,
        gid: 65534,
    };

    fn step(path: &str, mode: u32, uid: u32, gid: u32) -> Step {
        Step {
            path: PathBuf::from(path),
            mode,
            uid,
            gid,
        }
    }

    #[test]
    fn who_may_pass_follows_the_owner_group_and_other_bits() {
        let cases = [
            // (mode, owner, group, passes for nobody)
            (0o755, 0, 0, true),
            (0o711, 0, 0, true),
            (0o700, 0, 0, false),
            (0o750, 0, 65534, true),
            (0o701, 0, 65534, false), // the group class applies, not other
            (0o100, 65534, 0, true),
            (0o077, 65534, 0, false), // the owner class applies
            (0o1777, 0, 0, true),
        ];
        for (mode, uid, gid, passes) in cases {
            assert_eq!(
                may_pass(&step("/d", mode, uid, gid), NOBODY),
                passes,
                "mode {mode:o} owner {uid}:{gid}"
            );
        }
        assert!(may_pass(&step("/d", 0o700, 1000, 1000), Ids { uid: 0, gid: 0 }));
    }

    #[test]
    fn a_private_home_blocks_the_state_directory_under_it() {
        let debian_root = [
            step("/", 0o755, 0, 0),
            step("/root", 0o700, 0, 0),
            step("/root/.cache", 0o755, 0, 0),
            step("/root/.cache/olm-rs/agent", 0o711, 0, 0),
        ];
        let blocked = first_blocked(&debian_root, NOBODY).expect("blocked");
        assert_eq!(blocked.path, PathBuf::from("/root"));

        let var_lib = [
            step("/", 0o755, 0, 0),
            step("/var", 0o755, 0, 0),
            step("/var/lib", 0o755, 0, 0),
            step("/var/lib/olm-rs-agent", 0o711, 0, 0),
        ];
        assert_eq!(first_blocked(&var_lib, NOBODY), None);
    }

    #[test]
    fn an_agent_that_is_not_root_checks_nothing() {
        let users = Users {
            agent: Ids { uid: 1000, gid: 1000 },
            hook: NOBODY,
        };
        check(Path::new("/nonexistent/state"), &users).expect("nothing to check");
    }

    #[test]
    fn the_refusal_names_the_directory_and_what_to_do() {
        let error = ReachError::Blocked {
            state_dir: PathBuf::from("/root/.cache/olm-rs/demo/agent-a"),
            blocked: PathBuf::from("/root"),
            mode: 0o700,
            owner: 0,
            hook_uid: 65534,
            hook_gid: 65534,
        };
        let text = error.to_string();
        for part in [
            "/root (mode 0700, owner uid 0)",
            "uid 65534",
            "--state-dir",
            "chmod o+x",
        ] {
            assert!(text.contains(part), "{part} not in: {text}");
        }
    }
}
