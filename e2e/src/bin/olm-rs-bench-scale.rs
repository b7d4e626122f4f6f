//! The figures of the scale targets, measured on the cluster in `KUBECONFIG`
//! with both binaries run as they ship (default flags, the profile this bench
//! is built with; `hack/bench-scale.sh` builds release and brings up a local
//! control plane of its own):
//!
//! - the scene: `--namespaces` namespaces (1,000 by default), 5 CatalogSources
//!   serving the corpus's bundle packages (split five ways, each served by
//!   `catalog-operator serve`), and 20 operators from them: 5 AllNamespaces
//!   operators in one namespace, 15 OwnNamespace operators each in a namespace
//!   of its own, each with its OperatorGroup;
//! - for each binary: the API writes from the Subscriptions until both stop
//!   writing (copied CSVs follow their originals through the install), and
//!   how long that took;
//! - for each binary: RSS once everything is installed and settled, CPU
//!   seconds and API requests per minute (by verb and resource, from the
//!   binary's own `olm_kube_requests_total`) over `--idle-seconds` at rest
//!   (600 by default), the time from a restart to `/readyz` and the RSS after
//!   it, and the RSS after as many more empty namespaces are added;
//! - the machine load (`uptime`) while it measured: the machine may be shared;
//! - how many copied CSVs the AllNamespaces operators have (one per operator
//!   and namespace, as in OLM), or none with `--disable-copied-csvs`.
//!
//! A bench, not a test: it prints what it measures and asserts nothing.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use e2e::bench::{mib, request_counts, uptime};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};
use olm_api::{
    v1::{OLMConfig, OperatorGroup},
    v1alpha1::{Approval, ClusterServiceVersion, CsvPhase, Subscription},
};
use olm_catalog::Catalog;
use olm_registry::server::RegistryIndex;
use olm_testkit::{
    NAMESPACE_LABEL, client, corpus_dir, create_namespace, install_crds,
    objects::{STEP, apply_json, global_operator_group, ready_catalog_source, subscribe},
    process::{Process, free_port},
};
use serde_json::json;

/// How many CatalogSources serve the corpus.
const CATALOGS: usize = 5;

/// Operators installed for all namespaces, together in one namespace.
const ALL_NAMESPACES: [&str; 5] = [
    "argocd-operator",
    "cockroachdb",
    "debezium-operator",
    "dns-operator",
    "limitador-operator",
];

/// Operators installed for their own namespace, each in a namespace of its own.
const OWN_NAMESPACE: [&str; 15] = [
    "3scale-community-operator",
    "aqua",
    "assisted-service-operator",
    "etcd",
    "gitlab-runner-operator",
    "grafana-operator",
    "ibm-block-csi-operator-community",
    "konveyor-operator",
    "lbconfig-operator",
    "oadp-operator",
    "prometheus",
    "silicom-sts-operator",
    "skupper-operator",
    "stolostron",
    "t8c",
];

/// How long the binaries are left alone before a figure is taken.
const SETTLE: Duration = Duration::from_secs(30);

/// The longest the bench waits for the binaries to stop writing after the installs.
const QUIET_LIMIT: Duration = Duration::from_secs(900);

/// How long without a write counts as quiet.
const QUIET_FOR: Duration = Duration::from_secs(15);

/// The verbs that write.
const WRITES: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// How many API requests the bench itself has in flight.
const PARALLEL: usize = 16;

/// The bench's options.
struct Options {
    namespaces: usize,
    idle: Duration,
    /// `--disable-copied-csvs`: the OLMConfig switches copied CSVs off (on by default, as in OLM).
    disable_copies: bool,
}

impl Options {
    fn parse() -> Options {
        let arg = |name: &str| {
            std::env::args().skip_while(|a| a != name).nth(1).map(|n| {
                n.parse::<u64>()
                    .unwrap_or_else(|e| panic!("{name} takes a number: {e}"))
            })
        };
        Options {
            namespaces: arg("--namespaces").unwrap_or(1000) as usize,
            idle: Duration::from_secs(arg("--idle-seconds").unwrap_or(600)),
            disable_copies: std::env::args().any(|a| a == "--disable-copied-csvs"),
        }
    }
}

/// One operator to install: its package, the catalog serving it, the
/// namespace it goes to and the CSV the Subscription must reach.
struct Install {
    package: &'static str,
    catalog: String,
    channel: String,
    csv: String,
    namespace: String,
}

/// What one binary's figures are taken from.
#[derive(Clone, Default)]
struct Sample {
    cpu_ticks: u64,
    requests: BTreeMap<(String, String), f64>,
}

#[tokio::main]
async fn main() {
    let options = Options::parse();
    let client = client().await;
    let run = format!("scale-{:x}", std::process::id());
    let home = run.clone();
    set_up(&client, &options, &home).await;
    let mut namespaces = vec![home.clone()];
    let catalogs = Catalogs::serve(&run);
    let mut operators = Operators::start(&home, "a");
    operators.wait_ready().await;
    catalogs.ready(&client, &home).await;

    let (installs, placed) = place(&client, &run, &options, &catalogs.heads).await;
    namespaces.extend(placed);
    let installed = install_all(&client, &home, &installs, &operators).await;
    let rest = at_rest(&client, &operators, options.idle).await;
    let restarted = restart_both(&mut operators, &home).await;

    // As many namespaces again, empty.
    let started = Instant::now();
    let more = create_namespaces(&client, &run, options.namespaces, options.namespaces).await;
    eprintln!(
        "{} more namespaces created in {:.1?}",
        more.len(),
        started.elapsed()
    );
    namespaces.extend(more);
    tokio::time::sleep(SETTLE).await;
    let more_rss = operators.rss();
    let load_end = uptime();

    report_install(&options, &installs, &installed, &rest);
    report_rest(&options, &rest, &restarted, more_rss, &load_end);
    // Stopped before their namespace goes: with it go the Role and RoleBinding that let them
    // renew their Leases, and a refused renewal fails the run.
    drop(operators);
    cleanup(&client, &run, namespaces).await;
}

/// The CRDs, copied CSVs as `--disable-copied-csvs` says, and the bench's own namespace `home`.
async fn set_up(client: &Client, options: &Options, home: &str) {
    install_crds(client).await;
    // Copied CSVs: said explicitly, so that runs are comparable whatever the cluster had.
    apply_json(
        &Api::<OLMConfig>::all(client.clone()),
        json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
            "metadata": {"name": "cluster"},
            "spec": {"features": {"disableCopiedCSVs": options.disable_copies}},
        }),
    )
    .await;
    create_namespace(client, home, &[(NAMESPACE_LABEL, "bench")]).await;
}

/// The catalogs: the corpus's bundle packages, split five ways, each served by a
/// registry server of its own.
struct Catalogs {
    /// For each package installed: its catalog, default channel and that channel's head.
    heads: BTreeMap<&'static str, (String, String, String)>,
    /// The registry servers and their ports.
    registries: Vec<(Process, u16)>,
}

impl Catalogs {
    fn serve(run: &str) -> Catalogs {
        let split = split_corpus(run);
        let mut registries = Vec::new();
        let mut heads = BTreeMap::new();
        for (i, dir) in split.iter().enumerate() {
            let name = format!("corpus-{i}");
            let (catalog, _) = catalog_operator::source::load(dir)
                .unwrap_or_else(|e| panic!("the corpus catalog {} loads: {e}", dir.display()));
            for package in ALL_NAMESPACES.iter().chain(&OWN_NAMESPACE) {
                if let Some((channel, csv)) = default_head(&catalog, package) {
                    heads.insert(*package, (name.clone(), channel, csv));
                }
            }
            let port = free_port();
            registries.push((Process::registry(&format!("{name}-registry"), dir, port), port));
        }
        Catalogs { heads, registries }
    }

    /// A READY CatalogSource in `home` for each registry server.
    async fn ready(&self, client: &Client, home: &str) {
        for (i, (_, port)) in self.registries.iter().enumerate() {
            ready_catalog_source(client, home, &format!("corpus-{i}"), &format!("127.0.0.1:{port}")).await;
        }
    }
}

/// Both binaries, as they ship.
struct Operators {
    catalog: Process,
    olm: Process,
}

impl Operators {
    /// Replica `replica` of each, with `home` as the global catalog namespace.
    fn start(home: &str, replica: &str) -> Operators {
        Operators {
            catalog: catalog_operator(home, replica),
            olm: Process::olm_operator_with(&format!("olm-operator-{replica}"), "olm-operator", home, &[]),
        }
    }

    async fn wait_ready(&self) {
        for process in [&self.catalog, &self.olm] {
            assert!(process.wait_ready(STEP).await, "{} is ready", process.label);
        }
    }

    fn sample(&self) -> (Sample, Sample) {
        (sample(&self.catalog), sample(&self.olm))
    }

    fn rss(&self) -> (Option<u64>, Option<u64>) {
        (self.catalog.rss_kib(), self.olm.rss_kib())
    }
}

/// Replica `replica` of catalog-operator, with `home` as the global catalog namespace.
fn catalog_operator(home: &str, replica: &str) -> Process {
    Process::catalog_operator_with(
        &format!("catalog-operator-{replica}"),
        "catalog-operator",
        home,
        &["--global-catalog-namespace", home],
    )
}

/// The namespaces, then the operators placed in some of them: the AllNamespaces
/// ones together in a namespace with a global OperatorGroup, each OwnNamespace
/// one in a namespace of its own. Returns the installs and the namespaces made.
async fn place(
    client: &Client,
    run: &str,
    options: &Options,
    heads: &BTreeMap<&'static str, (String, String, String)>,
) -> (Vec<Install>, Vec<String>) {
    let started = Instant::now();
    let created = create_namespaces(client, run, 0, options.namespaces).await;
    eprintln!(
        "{} namespaces created in {:.1?}",
        created.len(),
        started.elapsed()
    );
    let global = format!("{run}-global");
    create_namespace(client, &global, &[(NAMESPACE_LABEL, "bench")]).await;
    global_operator_group(
        &Api::<OperatorGroup>::namespaced(client.clone(), &global),
        "global",
    )
    .await;
    let mut installs = Vec::new();
    for package in ALL_NAMESPACES {
        installs.push(install(heads, package, &global));
    }
    for (package, namespace) in OWN_NAMESPACE.into_iter().zip(&created) {
        own_namespace_group(client, namespace).await;
        installs.push(install(heads, package, namespace));
    }
    let mut namespaces = vec![global];
    namespaces.extend(created);
    (installs, namespaces)
}

/// What the installs did.
struct Installed {
    /// The binaries' figures when the Subscriptions were created, and once they stopped writing.
    start: (Sample, Sample),
    end: (Sample, Sample),
    /// The installs whose CSV did not succeed once the writes stopped.
    failed: Vec<String>,
    /// Whether (`Some`) the writes stopped within [`QUIET_LIMIT`], and when after the Subscriptions.
    quiet_after: Option<Duration>,
    quiet_in: Duration,
}

/// Subscribes to every install at once, waits for their CSVs, then until both
/// binaries stop writing (copied CSVs follow their originals' phases), so that
/// the window at rest is at rest.
async fn install_all(client: &Client, home: &str, installs: &[Install], operators: &Operators) -> Installed {
    let start = operators.sample();
    let started = Instant::now();
    for install in installs {
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &install.namespace);
        subscribe(
            &subs,
            install.package,
            (&install.catalog, home),
            install.package,
            &install.channel,
            Approval::Automatic,
        )
        .await;
    }
    // All at once, so that an install that never succeeds costs one STEP, not one each.
    let succeeded = futures::future::join_all(installs.iter().map(|i| csv_succeeds(client, i, STEP))).await;
    let failed = installs.iter().zip(succeeded).filter(|(_, ok)| !ok).count();
    eprintln!(
        "{} of {} operators installed in {:.1?}",
        installs.len() - failed,
        installs.len(),
        started.elapsed()
    );
    let quiet_after = until_quiet(&[&operators.catalog, &operators.olm], QUIET_LIMIT).await;
    let quiet_in = started.elapsed();
    let end = operators.sample();
    let mut failed = Vec::new();
    for install in installs {
        if !csv_succeeds(client, install, Duration::from_secs(1)).await {
            failed.push(format!(
                "{} ({} in {}): {}",
                install.package,
                install.csv,
                install.namespace,
                standing(client, install).await
            ));
        }
    }
    eprintln!(
        "{} of {} operators Succeeded; writes stopped {} after the Subscriptions",
        installs.len() - failed.len(),
        installs.len(),
        match quiet_after {
            Some(_) => format!("{quiet_in:.1?}"),
            None => format!("not within {QUIET_LIMIT:?}"),
        }
    );
    Installed {
        start,
        end,
        failed,
        quiet_after,
        quiet_in,
    }
}

/// The figures at rest.
struct Rest {
    /// RSS `SETTLE` after the installs, and after `--idle-seconds` at rest.
    idle_rss: (Option<u64>, Option<u64>),
    rested_rss: (Option<u64>, Option<u64>),
    /// The copied CSVs once settled.
    copies: usize,
    /// The machine's load before and after the rest.
    load_before: String,
    load_after: String,
    /// The binaries' figures before and after the rest.
    before: (Sample, Sample),
    after: (Sample, Sample),
}

/// Leaves the binaries alone `SETTLE`, then measures them over `idle`.
async fn at_rest(client: &Client, operators: &Operators, idle: Duration) -> Rest {
    tokio::time::sleep(SETTLE).await;
    let idle_rss = operators.rss();
    let copies = copied_csvs(client).await;
    let load_before = uptime();
    let before = operators.sample();
    eprintln!("measuring {idle:?} at rest");
    tokio::time::sleep(idle).await;
    let after = operators.sample();
    let load_after = uptime();
    Rest {
        idle_rss,
        rested_rss: operators.rss(),
        copies,
        load_before,
        load_after,
        before,
        after,
    }
}

/// A restart of each binary: how long until `/readyz`, and RSS `SETTLE` later.
struct Restarted {
    catalog_ready: Duration,
    olm_ready: Duration,
    rss: (Option<u64>, Option<u64>),
}

/// A restart of each: SIGTERM, then a new process, timed until /readyz.
async fn restart_both(operators: &mut Operators, home: &str) -> Restarted {
    let catalog_ready = restart(&mut operators.catalog, || catalog_operator(home, "b")).await;
    let olm_ready = restart(&mut operators.olm, || {
        Process::olm_operator_with("olm-operator-b", "olm-operator", home, &[])
    })
    .await;
    tokio::time::sleep(SETTLE).await;
    Restarted {
        catalog_ready,
        olm_ready,
        rss: operators.rss(),
    }
}

/// Prints the scene, the installs and their writes, and the copies.
fn report_install(options: &Options, installs: &[Install], installed: &Installed, rest: &Rest) {
    println!(
        "olm-rs scale bench ({} build): {} namespaces, {} CatalogSources (corpus bundles), {} of {} operators installed ({} AllNamespaces in one namespace, {} OwnNamespace)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        options.namespaces,
        CATALOGS,
        installs.len() - installed.failed.len(),
        installs.len(),
        ALL_NAMESPACES.len(),
        OWN_NAMESPACE.len(),
    );
    if !installed.failed.is_empty() {
        println!(
            "  not Succeeded once the writes stopped: {}",
            installed.failed.join(", ")
        );
    }
    println!(
        "  install: from the Subscriptions until both binaries stopped writing: {}",
        match installed.quiet_after {
            Some(_) => format!("{:.1?}", installed.quiet_in),
            None => format!("still writing after {QUIET_LIMIT:?}"),
        }
    );
    for (label, b, a) in [
        ("catalog-operator", &installed.start.0, &installed.end.0),
        ("olm-operator", &installed.start.1, &installed.end.1),
    ] {
        println!("  {label}: API writes during the install, by verb (resource):");
        let counts = rates(b, a, 1.0);
        let writes: Vec<_> = counts
            .into_iter()
            .filter(|(verb, _, _)| WRITES.contains(&verb.as_str()))
            .collect();
        if writes.is_empty() {
            println!("    none");
        }
        for (verb, total, resources) in writes {
            println!("    {verb:<8} {total:>9.0}  ({resources})");
        }
    }
    println!(
        "  copied CSVs: {} ({} once settled)",
        if options.disable_copies {
            "disabled by the OLMConfig"
        } else {
            "enabled"
        },
        rest.copies
    );
}

/// Prints the figures at rest, of the restarts, and with `more_rss` as many namespaces again.
fn report_rest(
    options: &Options,
    rest: &Rest,
    restarted: &Restarted,
    more_rss: (Option<u64>, Option<u64>),
    load_end: &str,
) {
    let minutes = options.idle.as_secs_f64() / 60.0;
    let ticks = clock_ticks();
    let cpu = |b: &Sample, a: &Sample| a.cpu_ticks.saturating_sub(b.cpu_ticks) as f64 / ticks;
    let (before, after) = (&rest.before, &rest.after);
    println!(
        "  machine load (uptime): before the rest {}; after it {}; at the end {load_end}",
        rest.load_before, rest.load_after
    );
    println!("  {:<34} {:>18} {:>18}", "", "catalog-operator", "olm-operator");
    let row = |what: &str, pair: (String, String)| println!("  {what:<34} {:>18} {:>18}", pair.0, pair.1);
    row("RSS idle", (mib(rest.idle_rss.0), mib(rest.idle_rss.1)));
    row(
        &format!("RSS after {:.0} min at rest", minutes),
        (mib(rest.rested_rss.0), mib(rest.rested_rss.1)),
    );
    row(
        &format!("CPU seconds over {:.0} min at rest", minutes),
        (
            format!("{:.2}", cpu(&before.0, &after.0)),
            format!("{:.2}", cpu(&before.1, &after.1)),
        ),
    );
    row(
        "restart: time until /readyz",
        (
            format!("{:.2?}", restarted.catalog_ready),
            format!("{:.2?}", restarted.olm_ready),
        ),
    );
    row(
        "RSS after the restart",
        (mib(restarted.rss.0), mib(restarted.rss.1)),
    );
    row(
        &format!("RSS with {} more namespaces", options.namespaces),
        (mib(more_rss.0), mib(more_rss.1)),
    );
    for (label, b, a) in [
        ("catalog-operator", &before.0, &after.0),
        ("olm-operator", &before.1, &after.1),
    ] {
        println!("  {label}: API requests per minute at rest, by verb (resource):");
        let rates = rates(b, a, minutes);
        if rates.is_empty() {
            println!("    none");
        }
        for (verb, total, resources) in rates {
            println!("    {verb:<8} {total:>7.2}  ({resources})");
        }
    }
}

/// Deletes the bench's namespaces and its split of the corpus.
async fn cleanup(client: &Client, run: &str, namespaces: Vec<String>) {
    stream::iter(namespaces)
        .for_each_concurrent(PARALLEL, |ns| {
            let namespaces: Api<Namespace> = Api::all(client.clone());
            async move {
                let _ = namespaces.delete(&ns, &DeleteParams::background()).await;
            }
        })
        .await;
    let _ = std::fs::remove_dir_all(split_root(run));
}

/// The corpus's bundle packages, split round-robin into [`CATALOGS`]
/// directories under the temporary directory.
fn split_corpus(run: &str) -> Vec<PathBuf> {
    let bundles = corpus_dir().join("bundles");
    let mut packages: Vec<PathBuf> = std::fs::read_dir(&bundles)
        .unwrap_or_else(|e| panic!("list {}: {e}", bundles.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_dir())
        .collect();
    packages.sort();
    let root = split_root(run);
    let dirs: Vec<PathBuf> = (0..CATALOGS).map(|i| root.join(format!("corpus-{i}"))).collect();
    for dir in &dirs {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    }
    for (i, package) in packages.iter().enumerate() {
        let copy = dirs[i % CATALOGS].join(package.file_name().expect("a package directory has a name"));
        copy_dir(package, &copy)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", package.display(), copy.display()));
    }
    dirs
}

/// Copies the directory tree `from` to `to` (catalog loading does not follow symbolic links).
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn split_root(run: &str) -> PathBuf {
    std::env::temp_dir().join(format!("olm-rs-bench-{run}"))
}

/// The default channel of `package` and the CSV at its head, if `catalog` has the package.
fn default_head(catalog: &Catalog, package: &str) -> Option<(String, String)> {
    let channel = catalog.package(package)?.default_channel.clone()?;
    let head = RegistryIndex::new(catalog.clone())
        .get_bundle_for_channel(package, &channel)
        .unwrap_or_else(|e| panic!("{package} has a head in its default channel {channel}: {e}"));
    Some((channel, head.csv_name))
}

fn install(
    heads: &BTreeMap<&'static str, (String, String, String)>,
    package: &'static str,
    namespace: &str,
) -> Install {
    let (catalog, channel, csv) = heads
        .get(package)
        .unwrap_or_else(|| panic!("no corpus catalog has the package {package}"))
        .clone();
    Install {
        package,
        catalog,
        channel,
        csv,
        namespace: namespace.to_owned(),
    }
}

/// How many copied CSVs the cluster holds (`olm.copiedFrom`).
async fn copied_csvs(client: &Client) -> usize {
    let params = ListParams::default().labels(olm_api::labels::COPIED_FROM);
    Api::<ClusterServiceVersion>::all(client.clone())
        .list_metadata(&params)
        .await
        .map(|list| list.items.len())
        .unwrap_or_else(|e| panic!("list the copied CSVs: {e}"))
}

/// Creates `count` namespaces `<run>-<first>` ... in parallel; returns their names.
async fn create_namespaces(client: &Client, run: &str, first: usize, count: usize) -> Vec<String> {
    let names: Vec<String> = (first..first + count).map(|i| format!("{run}-{i:04}")).collect();
    stream::iter(names.clone())
        .for_each_concurrent(PARALLEL, |name| async move {
            create_namespace(client, &name, &[(NAMESPACE_LABEL, "bench")]).await;
        })
        .await;
    names
}

/// An OperatorGroup `own` targeting its own namespace.
async fn own_namespace_group(client: &Client, namespace: &str) {
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), namespace);
    apply_json(
        &groups,
        json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": "own"},
            "spec": {"targetNamespaces": [namespace]},
        }),
    )
    .await;
}

/// Whether the CSV of `install` is Succeeded within `within`.
async fn csv_succeeds(client: &Client, install: &Install, within: Duration) -> bool {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &install.namespace);
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(csv)) = csvs.get_opt(&install.csv).await
            && csv
                .status
                .as_ref()
                .is_some_and(|s| s.phase == Some(CsvPhase::Succeeded))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    false
}

/// Where an install that did not succeed stands, in its objects' own words: the CSV's phase,
/// reason and message; without a CSV, the Subscription's state and its conditions' messages.
async fn standing(client: &Client, install: &Install) -> String {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &install.namespace);
    if let Ok(Some(csv)) = csvs.get_opt(&install.csv).await {
        let status = csv.status.unwrap_or_default();
        return format!(
            "CSV {:?} ({:?}): {}",
            status.phase,
            status.reason,
            status.message.unwrap_or_default()
        );
    }
    let subs: Api<Subscription> = Api::namespaced(client.clone(), &install.namespace);
    let Ok(Some(sub)) = subs.get_opt(install.package).await else {
        return "no CSV and no Subscription".to_string();
    };
    let status = sub.status.unwrap_or_default();
    let messages: Vec<String> = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.message.map(|m| format!("{:?}: {m}", c.type_)))
        .collect();
    format!("no CSV; Subscription {:?}; {}", status.state, messages.join("; "))
}

/// The writes `process` has sent, Lease renewals and Events left out.
fn writes(process: &Process) -> f64 {
    sample(process)
        .requests
        .iter()
        .filter(|((verb, resource), _)| {
            WRITES.contains(&verb.as_str())
                && !resource.starts_with("leases")
                && !resource.starts_with("events")
        })
        .map(|(_, count)| count)
        .sum()
}

/// Waits until none of `processes` has written for [`QUIET_FOR`]; the time
/// it waited, or `None` after `limit`.
async fn until_quiet(processes: &[&Process], limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let count = || processes.iter().map(|p| writes(p)).sum::<f64>();
    let mut last = count();
    let mut still_since = Instant::now();
    while started.elapsed() < limit {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = count();
        if now != last {
            last = now;
            still_since = Instant::now();
        } else if still_since.elapsed() >= QUIET_FOR {
            return Some(started.elapsed());
        }
    }
    None
}

/// Stops `process` (SIGTERM, as a rollout does), starts its replacement and
/// returns how long the replacement took to answer `/readyz` with 200.
async fn restart(process: &mut Process, start: impl FnOnce() -> Process) -> Duration {
    process.terminate(Duration::from_secs(30));
    let started = Instant::now();
    *process = start();
    assert!(process.wait_ready(STEP).await, "{} is ready", process.label);
    started.elapsed()
}

/// The CPU time and request counts of `process` now.
fn sample(process: &Process) -> Sample {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", process.pid())).unwrap_or_default();
    // Fields after the command name (in parentheses): utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    let body = process
        .admin_get("/metrics")
        .map(|(_, body)| body)
        .unwrap_or_default();
    Sample {
        cpu_ticks: tick(11) + tick(12),
        requests: request_counts(&body),
    }
}

/// Requests per minute between two samples, by verb, each with its
/// resources (and their rates) spelled out.
fn rates(before: &Sample, after: &Sample, minutes: f64) -> Vec<(String, f64, String)> {
    let mut by_verb: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for ((verb, resource), count) in &after.requests {
        let delta = count
            - before
                .requests
                .get(&(verb.clone(), resource.clone()))
                .unwrap_or(&0.0);
        if delta > 0.0 {
            by_verb
                .entry(verb.clone())
                .or_default()
                .push((resource.clone(), delta / minutes));
        }
    }
    by_verb
        .into_iter()
        .map(|(verb, resources)| {
            let total = resources.iter().map(|(_, r)| r).sum();
            let spelled = resources
                .iter()
                .map(|(resource, rate)| format!("{resource} {rate:.2}"))
                .collect::<Vec<_>>()
                .join(", ");
            (verb, total, spelled)
        })
        .collect()
}

/// Clock ticks per second, the unit of /proc/<pid>/stat's CPU times.
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}
