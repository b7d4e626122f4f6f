//! The olm-rs binaries as child processes, for the tests and the bench that
//! need the real thing: its flags, its leader election, its admin server, its
//! identity (the ServiceAccount and RBAC of `manifests/`), and a process that
//! can be killed outright.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Mutex, OnceLock},
    thread::JoinHandle,
    time::Duration,
};

use crate::identity::{self, Binary};

/// The path of the binary `name` of the workspace package of the same name
/// (`olm-operator`, `catalog-operator`), never stale: the one cargo built for
/// the running test when it is a test of that package (cargo names it in
/// `CARGO_BIN_EXE_<name>`), or else built first (once per process): `cargo
/// build` from inside a test is cheap when nothing changed.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    if let Some(path) = std::env::var_os(format!("CARGO_BIN_EXE_{name}")) {
        return PathBuf::from(path);
    }
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    // A test binary is target/<profile>/deps/<test>, a binary of this crate
    // target/<profile>/<name>; the operators go to target/<profile>.
    let exe = std::env::current_exe().expect("the running binary's path");
    let mut profile_dir = exe
        .parent()
        .expect("the running binary's directory")
        .to_path_buf();
    if profile_dir.file_name().is_some_and(|d| d == "deps") {
        profile_dir.pop();
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut build = Command::new(cargo);
    build
        .current_dir(crate::repo_root())
        .args(["build", "-q", "-p", name, "--bin", name]);
    if profile_dir.file_name().is_some_and(|p| p == "release") {
        build.arg("--release");
    }
    let status = build
        .status()
        .unwrap_or_else(|e| panic!("run cargo build -p {name}: {e}"));
    assert!(status.success(), "cargo build -p {name} failed ({status})");
    let path = profile_dir.join(name);
    assert!(
        path.is_file(),
        "cargo built {name} but {} is missing",
        path.display()
    );
    built.insert(name.to_owned(), path.clone());
    path
}

/// A port nothing listens on right now, and that this process has not
/// handed out before. The port is free only until someone binds it: a test
/// that asks for two ports before starting what listens on them would
/// otherwise get the same one twice (the kernel may offer a port again once
/// its probe socket is closed).
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<std::collections::BTreeSet<u16>> = Mutex::new(std::collections::BTreeSet::new());
    let mut handed_out = HANDED_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("a free local port");
        if handed_out.insert(port) {
            return port;
        }
    }
}

/// A running olm-rs binary, killed when dropped (also when a test fails).
///
/// Its output goes to a log file (its path is printed at start), and is also
/// shown when `E2E_LOG` is set; `RUST_LOG` is passed through (default `info`).
///
/// olm-operator and catalog-operator ([`Process::olm_operator`],
/// [`Process::catalog_operator`] and their `_with` variants) run as the
/// ServiceAccounts of their Deployments in `manifests/`, with the RBAC of
/// `manifests/` and the arguments of those Deployments ([`identity`]). When
/// such a process is dropped, its log is read, and any request the API server
/// refused it fails the test, naming the permission: a permission missing from
/// `manifests/` is a test failure, not a user's. [`Process::assert_no_forbidden`]
/// checks the same while it runs.
pub struct Process {
    /// What the tests call it (`catalog-operator-a`, `registry` ...).
    pub label: String,
    /// Its admin server port (`/metrics`, `/healthz`, `/readyz`), if it has one.
    pub admin: Option<u16>,
    child: Child,
    log: PathBuf,
    /// The threads copying its output to the log and to stderr (with `E2E_LOG`).
    copies: Vec<JoinHandle<()>>,
    /// The user it acts as, when it runs as a ServiceAccount of `manifests/`.
    user: Option<String>,
}

impl Process {
    /// Starts `binary` with `args` and the credentials of `KUBECONFIG`. `admin` is the admin port
    /// the arguments give it, if any.
    pub fn spawn(label: &str, binary: &Path, args: &[String], admin: Option<u16>) -> Process {
        Process::spawn_with_env(label, binary, args, admin, &[])
    }

    /// [`Process::spawn`] with `env` added to the environment.
    fn spawn_with_env(
        label: &str,
        binary: &Path,
        args: &[String],
        admin: Option<u16>,
        env: &[(&str, &Path)],
    ) -> Process {
        let mut command = Command::new(binary);
        command
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            // Outside a pod: the lease holder's identity comes from the arguments.
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .stdin(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let dir = std::env::temp_dir().join("olm-rs-e2e-logs");
        std::fs::create_dir_all(&dir).expect("a directory for process logs");
        let log = dir.join(format!("{label}-{}.log", std::process::id()));
        let file =
            std::fs::File::create(&log).unwrap_or_else(|e| panic!("create log {}: {e}", log.display()));
        let shown = std::env::var_os("E2E_LOG").is_some();
        if shown {
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
        } else {
            let err = file.try_clone().expect("a second handle on the log file");
            command
                .stdout(file.try_clone().expect("a handle on the log file"))
                .stderr(err);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("start {label} ({}): {e}", binary.display()));
        let mut copies = Vec::new();
        if shown {
            let out = child.stdout.take().map(|o| Box::new(o) as Box<dyn Read + Send>);
            let err = child.stderr.take().map(|e| Box::new(e) as Box<dyn Read + Send>);
            for stream in [out, err].into_iter().flatten() {
                let file = file.try_clone().expect("a handle on the log file");
                copies.push(std::thread::spawn(move || show_and_log(stream, file)));
            }
        }
        eprintln!("started {label} (pid {}), log {}", child.id(), log.display());
        Process {
            label: label.to_owned(),
            admin,
            child,
            log,
            copies,
            user: None,
        }
    }

    /// Starts `which` as the ServiceAccount of its Deployment in `manifests/`, with that
    /// Deployment's arguments as a local process can take them ([`local_args`]), leader election
    /// on Lease `lease` in `lease_namespace` (where its leader-election Role is granted), an
    /// admin port of its own, and `extra` arguments.
    fn spawn_operator(
        which: Binary,
        identity: &str,
        lease: &str,
        lease_namespace: &str,
        extra: &[&str],
    ) -> Process {
        let deployment = identity::deployment(which);
        let kubeconfig = identity::kubeconfig_blocking(which, Some(lease_namespace));
        let admin = free_port();
        let mut args = without_flags(&local_args(&deployment.args), extra);
        args.extend(election_args(identity, lease, lease_namespace, admin));
        args.extend(extra.iter().map(|a| a.to_string()));
        let mut process = Process::spawn_with_env(
            identity,
            &binary(which.name()),
            &args,
            Some(admin),
            &[("KUBECONFIG", kubeconfig.as_path())],
        );
        process.user = Some(deployment.user());
        process
    }

    /// A replica of `olm-operator` with leader election on the Lease
    /// `lease` in `lease_namespace`, with [`FAST_LEASE`] timings so that
    /// failover is quick in tests.
    pub fn olm_operator(identity: &str, lease: &str, lease_namespace: &str) -> Process {
        let mut extra = FAST_LEASE.to_vec();
        extra.extend(["--resync-seconds", "30"]);
        Process::olm_operator_with(identity, lease, lease_namespace, &extra)
    }

    /// A replica of `olm-operator` leading through the Lease `lease` in
    /// `lease_namespace`, with an admin port of its own and `extra` arguments
    /// (the defaults otherwise, as it ships).
    pub fn olm_operator_with(identity: &str, lease: &str, lease_namespace: &str, extra: &[&str]) -> Process {
        Process::spawn_operator(Binary::OlmOperator, identity, lease, lease_namespace, extra)
    }

    /// A replica of `catalog-operator run` like [`Process::olm_operator`],
    /// watching only `watch_namespace` (all namespaces when `None`) and with
    /// `global_catalog_namespace` as the namespace of shared catalogs.
    pub fn catalog_operator(
        identity: &str,
        lease: &str,
        lease_namespace: &str,
        watch_namespace: Option<&str>,
        global_catalog_namespace: &str,
    ) -> Process {
        let mut extra = FAST_LEASE.to_vec();
        extra.extend([
            "--global-catalog-namespace",
            global_catalog_namespace,
            "--catalog-health-interval",
            "1s",
        ]);
        if let Some(namespace) = watch_namespace {
            extra.extend(["--watch-namespace", namespace]);
        }
        Process::catalog_operator_with(identity, lease, lease_namespace, &extra)
    }

    /// A replica of `catalog-operator run` like [`Process::olm_operator_with`]
    /// (`run` comes from its Deployment's arguments).
    pub fn catalog_operator_with(
        identity: &str,
        lease: &str,
        lease_namespace: &str,
        extra: &[&str],
    ) -> Process {
        Process::spawn_operator(Binary::CatalogOperator, identity, lease, lease_namespace, extra)
    }

    /// `catalog-operator serve catalog` on 127.0.0.1:`port`.
    pub fn registry(label: &str, catalog: &Path, port: u16) -> Process {
        let args = [
            "serve".to_owned(),
            catalog.display().to_string(),
            "--address".to_owned(),
            "127.0.0.1".to_owned(),
            "--port".to_owned(),
            port.to_string(),
        ];
        Process::spawn(label, &binary("catalog-operator"), &args, None)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the process outright (SIGKILL), as a crash or an OOM kill would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Asks the process to stop (SIGTERM, as Kubernetes does) and waits up to
    /// `grace` for it, then kills it. Returns whether it exited by itself.
    pub fn terminate(&mut self, grace: Duration) -> bool {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            if !self.is_running() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        false
    }

    /// Resident memory in KiB (`VmRSS` of /proc/<pid>/status), on Linux.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    }

    /// The status code and body of `GET path` on the admin port, if it answers.
    pub fn admin_get(&self, path: &str) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.admin?)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let code = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned())?;
        Some((code, body))
    }

    /// Waits up to `within` until `/readyz` answers 200.
    pub async fn wait_ready(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if self.admin_get("/readyz").is_some_and(|(code, _)| code == 200) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The lines of its log in which the API server refused it a request, when it runs as a
    /// ServiceAccount of `manifests/` ([`identity::forbidden_lines`]).
    pub fn forbidden_lines(&self) -> Vec<String> {
        let Some(user) = &self.user else {
            return Vec::new();
        };
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        identity::forbidden_lines(&text, user)
    }

    /// Checks that the API server refused it nothing so far ([`Process::assert_no_forbidden`]),
    /// then stops checking: for a test that restarts the API server, whose authorizer refuses
    /// what RBAC grants until its caches fill again. Every request is retried, and what the
    /// test checks after the restart is that the install completes.
    pub fn stop_checking_refusals(&mut self) {
        self.assert_no_forbidden();
        self.user = None;
    }

    /// The lines of its log in which the API server refused it a request so far, after which
    /// they are no longer checked: for a campaign that counts refusals (an API server restart
    /// makes some) rather than failing on the first.
    pub fn take_refusals(&mut self) -> Vec<String> {
        let lines = self.forbidden_lines();
        self.user = None;
        lines
    }

    /// Panics when its log carries terminal escape codes: a log written to a file (as
    /// `kubectl logs` shows it) must be plain text.
    pub fn assert_plain_log(&self) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        if let Some(line) = text.lines().find(|line| line.contains('\u{1b}')) {
            panic!(
                "{} (log {}) wrote terminal escape codes to a file: {line:?}",
                self.label,
                self.log.display()
            );
        }
    }

    /// Panics, with the lines, when the API server refused it any request so far.
    pub fn assert_no_forbidden(&self) {
        if let Some(user) = &self.user {
            let lines = self.forbidden_lines();
            let who = format!("{} (log {})", self.label, self.log.display());
            identity::assert_no_forbidden(&who, user, &lines);
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        for copy in self.copies.drain(..) {
            let _ = copy.join();
        }
        // A test that already fails says why first.
        if !std::thread::panicking() {
            self.assert_no_forbidden();
            self.assert_plain_log();
        }
    }
}

/// Copies `stream` line by line to `log` and to stderr.
fn show_and_log(stream: Box<dyn Read + Send>, mut log: std::fs::File) {
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        let _ = writeln!(log, "{line}");
        eprintln!("{line}");
    }
}

/// The arguments of a binary's Deployment in `manifests/`, as a local process can take them:
/// all of them, except
/// - `--package-server-address` (catalog-operator): the Deployment serves the PackageManifest API
///   on every interface of its pod, and `manifests/packageserver.yaml` points the cluster's
///   APIService at it. A test's process serves it on loopback (on a port of its own) and does not
///   register the APIService (`--package-server-register=false`): the cluster has one, and it would
///   point every test's API server requests at one test's process. It still makes its serving
///   certificate and reads the front proxy's CA as the Deployment does;
///   `e2e/tests/package_manifests.rs` registers the APIService against a process of its own.
pub fn local_args(manifest_args: &[String]) -> Vec<String> {
    let mut args = Vec::new();
    for arg in manifest_args {
        let name = arg.split_once('=').map_or(arg.as_str(), |(name, _)| name);
        if name == "--package-server-address" {
            assert!(
                arg.contains('='),
                "manifests/ gives {arg} without `=value`; write it as --package-server-address=ADDRESS"
            );
            args.push(format!("--package-server-address=127.0.0.1:{}", free_port()));
            args.push("--package-server-register=false".to_owned());
        } else {
            args.push(arg.clone());
        }
    }
    args
}

/// `args` without the flags that `extra` sets (the test's own settings win over the
/// manifest's); a flag's value is the rest of its `--name=value` argument. Setting its own
/// `--package-server-address`, a test takes over the package server, registration included.
fn without_flags(args: &[String], extra: &[&str]) -> Vec<String> {
    let name = |arg: &str| arg.split_once('=').map_or(arg, |(name, _)| name).to_owned();
    let overridden: Vec<String> = extra
        .iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| name(a))
        .collect();
    let takes_over_package_server = overridden.iter().any(|f| f == "--package-server-address");
    args.iter()
        .filter(|arg| {
            let flag = name(arg);
            let local_registration = takes_over_package_server && flag == "--package-server-register";
            !overridden.contains(&flag) && !local_registration
        })
        .cloned()
        .collect()
}

/// Lease timings for tests: a 4 s lease, renewed every second, given up after
/// 3 s without renewal.
pub const FAST_LEASE: [&str; 6] = [
    "--lease-duration",
    "4s",
    "--renew-deadline",
    "3s",
    "--retry-period",
    "1s",
];

fn election_args(identity: &str, lease: &str, lease_namespace: &str, admin: u16) -> Vec<String> {
    [
        "--leader-elect=true",
        "--lease-name",
        lease,
        "--lease-namespace",
        lease_namespace,
        "--leader-identity",
        identity,
        "--admin-addr",
        &format!("127.0.0.1:{admin}"),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// How to restart the API server of the cluster under test, if known: the
/// command in `OLM_RS_RESTART_APISERVER` (hack/test.sh sets it to
/// `hack/cluster.sh restart-apiserver` for its own control plane).
pub fn apiserver_restart_command() -> Option<String> {
    std::env::var(RESTART_APISERVER_ENV)
        .ok()
        .filter(|c| !c.trim().is_empty())
}

/// The variable that holds the command restarting the API server.
pub const RESTART_APISERVER_ENV: &str = "OLM_RS_RESTART_APISERVER";

/// Runs the command from [`apiserver_restart_command`] through `sh -c` and
/// waits for it: it must return once the API server serves again.
pub fn restart_apiserver(command: &str) {
    let status = Command::new("sh")
        .args(["-c", command])
        .status()
        .unwrap_or_else(|e| panic!("run `{command}`: {e}"));
    assert!(status.success(), "`{command}` failed ({status})");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_never_handed_out_twice() {
        let ports: Vec<u16> = (0..200).map(|_| free_port()).collect();
        let distinct: std::collections::BTreeSet<&u16> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len());
    }

    #[test]
    fn a_tests_own_package_server_replaces_the_local_one() {
        let local = local_args(&[
            "run".to_owned(),
            "--package-server-address=0.0.0.0:5443".to_owned(),
        ]);
        assert_eq!(local.len(), 3, "{local:?}");
        let kept = without_flags(
            &local,
            &[
                "--package-server-address",
                "127.0.0.1:1",
                "--watch-namespace",
                "ns",
            ],
        );
        assert_eq!(kept, ["run"], "the test's address and registration win");
        let kept = without_flags(&local, &["--watch-namespace", "ns"]);
        assert_eq!(kept, local, "nothing the test sets");
    }
}
