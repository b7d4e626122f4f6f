//! Running one hook: its environment, its sandbox, its timeout.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use tokio::io::AsyncReadExt;

use super::{privilege::Ids, sequence::Config};

/// The most of a hook's stderr kept for its error message (bytes, the tail).
const STDERR_TAIL: usize = 1024;

/// Who a hook runs for: the parts of its environment that are not the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookContext {
    /// The Machine's name.
    pub machine: String,
    /// The pool.
    pub pool: String,
    /// The namespace of the pool and the CSV.
    pub namespace: String,
    /// The CSV the hook serves.
    pub csv: String,
    /// Its version.
    pub version: String,
    /// The hook's name (a relation hook's is `<endpoint>-relation-<event>`).
    pub hook: String,
    /// The JSON file of the effective config.
    pub config_file: PathBuf,
    /// The hook tool's socket.
    pub socket: PathBuf,
    /// The id that ties the hook tool's calls to this run.
    pub run_id: String,
}

/// The environment of a hook: who it runs for, where its config is, how to reach
/// the agent, and each config key as `CONFIG_<KEY>` (upper-cased, every other
/// character than a letter or digit as `_`).
pub fn hook_env(context: &HookContext, config: &Config) -> Vec<(String, String)> {
    let mut env = vec![
        ("OLM_RS_MACHINE".to_owned(), context.machine.clone()),
        ("OLM_RS_POOL".to_owned(), context.pool.clone()),
        ("OLM_RS_NAMESPACE".to_owned(), context.namespace.clone()),
        ("OLM_RS_CSV".to_owned(), context.csv.clone()),
        ("OLM_RS_VERSION".to_owned(), context.version.clone()),
        ("OLM_RS_HOOK".to_owned(), context.hook.clone()),
        (
            "OLM_RS_CONFIG_FILE".to_owned(),
            context.config_file.display().to_string(),
        ),
        (
            crate::hook_tool::SOCKET_ENV.to_owned(),
            context.socket.display().to_string(),
        ),
        (crate::hook_tool::RUN_ENV.to_owned(), context.run_id.clone()),
    ];
    for (key, value) in config {
        env.push((config_env_name(key), value.clone()));
    }
    env
}

/// `CONFIG_<KEY>`: upper-cased, non-alphanumerics as `_`.
pub fn config_env_name(key: &str) -> String {
    let key: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("CONFIG_{key}")
}

/// How a hook run ended, when not in success.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The script could not be started.
    #[error("{hook} hook could not start: {reason}")]
    Spawn {
        /// The hook.
        hook: String,
        /// Why.
        reason: String,
    },
    /// It exited with a failure.
    #[error("{hook} hook failed ({exit}){}", tail_suffix(.stderr))]
    Failed {
        /// The hook.
        hook: String,
        /// The exit status, as the OS says it.
        exit: String,
        /// The end of its stderr.
        stderr: String,
    },
    /// It ran past its timeout and was killed.
    #[error("{hook} hook ran past its timeout of {timeout:?} and was killed")]
    TimedOut {
        /// The hook.
        hook: String,
        /// The timeout.
        timeout: Duration,
    },
}

fn tail_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

/// Runs `script` as `context.hook` in `sandbox` with `env`, as the agent's own
/// user, killing it (and its process group) past `timeout`. The script is the
/// file itself (it starts with `#!`).
pub async fn run_hook(
    script: &Path,
    sandbox: &Path,
    env: &[(String, String)],
    hook: impl std::fmt::Display,
    timeout: Duration,
) -> Result<(), HookError> {
    run_hook_as(script, sandbox, env, hook, timeout, None).await
}

/// [`run_hook`], as `user` when given: that uid and gid, and no supplementary
/// group (the agent must be root).
pub async fn run_hook_as(
    script: &Path,
    sandbox: &Path,
    env: &[(String, String)],
    hook: impl std::fmt::Display,
    timeout: Duration,
    user: Option<Ids>,
) -> Result<(), HookError> {
    let hook = hook.to_string();
    let ran = run_script(script, sandbox, env, timeout, user)
        .await
        .map_err(|error| match error {
            ScriptError::Spawn(reason) => HookError::Spawn {
                hook: hook.clone(),
                reason,
            },
            ScriptError::TimedOut => HookError::TimedOut {
                hook: hook.clone(),
                timeout,
            },
        })?;
    for line in String::from_utf8_lossy(&ran.stdout).lines() {
        tracing::info!(hook = hook.as_str(), "{line}");
    }
    if ran.status.success() {
        return Ok(());
    }
    Err(HookError::Failed {
        hook,
        exit: ran.status.to_string(),
        stderr: tail(&String::from_utf8_lossy(&ran.stderr), STDERR_TAIL),
    })
}

/// How a script that ran to its end ended: its exit status and output.
#[derive(Debug)]
pub struct Ran {
    /// The exit status.
    pub status: std::process::ExitStatus,
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
}

/// Why a script did not run to its end.
#[derive(Debug, PartialEq, Eq)]
pub enum ScriptError {
    /// It could not be started (or waited for): why.
    Spawn(String),
    /// It ran past its timeout and was killed, with its process group.
    TimedOut,
}

/// Runs `script` in `sandbox` with `env` (and nothing of the agent's own
/// environment), as `user` when given, killing it and its process group past
/// `timeout`; what it wrote and how it exited. Hooks and actions run this way.
pub async fn run_script(
    script: &Path,
    sandbox: &Path,
    env: &[(String, String)],
    timeout: Duration,
    user: Option<Ids>,
) -> Result<Ran, ScriptError> {
    let mut command = tokio::process::Command::new(script);
    if let Some(user) = user {
        // With a uid to switch to and no groups given, the child also drops every
        // supplementary group of the agent's before it runs the script.
        command.uid(user.uid).gid(user.gid);
    }
    command
        .current_dir(sandbox)
        // Nothing of the agent's own environment (its kubeconfig, the in-cluster
        // API server address, its flags' variables): only what the hook needs.
        .env_clear()
        .envs(inherited_env())
        .env("HOME", sandbox)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("PATH", hook_path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group, so a timeout kills what it started too.
        .process_group(0);
    let mut child = command.spawn().map_err(|error| {
        ScriptError::Spawn(match user {
            Some(user) if error.kind() == std::io::ErrorKind::PermissionDenied => format!(
                "{}: {error}: uid {} cannot reach it or its sandbox {}: every directory above the state directory must let others pass (mode o+x)",
                script.display(),
                user.uid,
                sandbox.display()
            ),
            _ => format!("{}: {error}", script.display()),
        })
    })?;
    let pid = child.id();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out_task = tokio::spawn(async move { read_all(stdout).await });
    let err_task = tokio::spawn(async move { read_all(stderr).await });
    let status = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => status.map_err(|error| ScriptError::Spawn(error.to_string()))?,
        Err(_) => {
            kill_group(pid).await;
            let _ = child.kill().await;
            out_task.abort();
            err_task.abort();
            return Err(ScriptError::TimedOut);
        }
    };
    // A child the script left behind may hold the pipes open: do not wait for it.
    let stdout = tokio::time::timeout(Duration::from_secs(1), out_task)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let stderr = tokio::time::timeout(Duration::from_secs(1), err_task)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    Ok(Ran {
        status,
        stdout,
        stderr,
    })
}

/// The variables a hook keeps from the agent's environment: locale, time zone
/// and proxies (hooks that fetch software need them). Everything else is left
/// out, so that no credential or API server address of the agent reaches a hook.
pub const INHERITED_ENV: &[&str] = &[
    "LANG",
    "LC_ALL",
    "TZ",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
];

fn inherited_env() -> Vec<(String, String)> {
    INHERITED_ENV
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|value| ((*name).to_owned(), value)))
        .collect()
}

/// The PATH of hooks: the agent's own directory first (for `machine-agent hook ...`),
/// then the agent's PATH.
fn hook_path() -> String {
    let own = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf));
    let inherited = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".to_owned());
    match own {
        Some(dir) => format!("{}:{inherited}", dir.display()),
        None => inherited,
    }
}

async fn read_all(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_end(&mut out).await;
    }
    out
}

/// Kills the process group the hook leads (`kill -KILL -<pgid>`).
async fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid {
        let _ = tokio::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .status()
            .await;
    }
}

/// The last `max` bytes of `text` (on a character boundary), trimmed.
pub fn tail(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::MachineHook as Hook;

    use super::*;
    use crate::state::tests::temp_dir;

    fn context() -> HookContext {
        HookContext {
            machine: "edge-node-1".into(),
            pool: "edge".into(),
            namespace: "apps".into(),
            csv: "demo.v1.0.0".into(),
            version: "1.0.0".into(),
            hook: Hook::ConfigChanged.to_string(),
            config_file: "/state/units/demo/config.json".into(),
            socket: "/state/agent.sock".into(),
            run_id: "7".into(),
        }
    }

    #[test]
    fn the_environment_names_the_unit_and_each_config_key() {
        let config = Config::from([("listen-port".to_owned(), "8080".to_owned())]);
        let env = hook_env(&context(), &config);
        let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("OLM_RS_MACHINE"), Some("edge-node-1"));
        assert_eq!(get("OLM_RS_HOOK"), Some("config-changed"));
        assert_eq!(get("OLM_RS_VERSION"), Some("1.0.0"));
        assert_eq!(get("OLM_RS_CONFIG_FILE"), Some("/state/units/demo/config.json"));
        assert_eq!(get("CONFIG_LISTEN_PORT"), Some("8080"));
        assert_eq!(config_env_name("a.b/c9"), "CONFIG_A_B_C9");
    }

    #[test]
    fn tails_keep_the_end_on_a_character_boundary() {
        assert_eq!(tail("  short \n", 10), "short");
        assert_eq!(tail("abcdéfgh", 4), "...fgh");
    }

    async fn script(dir: &Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join("hook");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[tokio::test]
    async fn hooks_run_in_their_sandbox_and_failures_carry_stderr() {
        let dir = temp_dir("hooks");
        let ok = script(&dir, "echo \"$CONFIG_PORT\" > marker").await;
        let env = vec![("CONFIG_PORT".to_owned(), "8080".to_owned())];
        run_hook(&ok, &dir, &env, Hook::Install, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("marker")).unwrap(), "8080\n");

        let failing = script(&dir, "echo 'port is not a number' >&2; exit 3").await;
        let error = run_hook(&failing, &dir, &[], Hook::ConfigChanged, Duration::from_secs(10))
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("config-changed hook failed (exit status: 3): port is not a number"),
            "{error}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn hooks_get_none_of_the_agents_own_environment() {
        let dir = temp_dir("env");
        let dump = script(&dir, "env > env.txt").await;
        let env = vec![("OLM_RS_HOOK".to_owned(), "install".to_owned())];
        // The test process has a PATH, a HOME, CARGO_* and maybe KUBECONFIG: a
        // hook sees only its own variables, PATH, HOME and the allowed few.
        run_hook(&dump, &dir, &env, Hook::Install, Duration::from_secs(10))
            .await
            .unwrap();
        let seen = std::fs::read_to_string(dir.join("env.txt")).unwrap();
        for line in seen.lines() {
            let name = line.split('=').next().unwrap_or_default();
            assert!(
                ["OLM_RS_HOOK", "PATH", "HOME", "PWD", "SHLVL", "_", "OLDPWD"].contains(&name)
                    || INHERITED_ENV.contains(&name),
                "a hook inherited {name}: {seen}"
            );
        }
        assert!(seen.contains(&format!("HOME={}", dir.display())), "{seen}");
        assert!(seen.contains("OLM_RS_HOOK=install"), "{seen}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_hook_that_hangs_is_killed_at_its_timeout() {
        let dir = temp_dir("hang");
        let hang = script(&dir, "sleep 60 & sleep 60").await;
        let started = std::time::Instant::now();
        let error = run_hook(&hang, &dir, &[], Hook::Install, Duration::from_millis(300))
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "install hook ran past its timeout of 300ms and was killed"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
