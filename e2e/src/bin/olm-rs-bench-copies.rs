//! What copied CSVs cost olm-operator, measured on the cluster in
//! `KUBECONFIG` with olm-operator run as it ships (default flags, the binary
//! `hack/bench-copies.sh` builds in release mode; this driver only drives):
//!
//! - the scene: `--namespaces` namespaces (1,000 by default), then the
//!   AllNamespaces operators of `--packages` (by default the five of the scale
//!   bench), each the highest version of its package in the corpus, its CSV
//!   created directly (with its CRDs) in one namespace with a global
//!   OperatorGroup: one copy per operator and namespace;
//! - while the operators install and their copies are written: how long until
//!   olm-operator stops writing CSVs, its API requests by verb and resource
//!   (from its own `olm_kube_requests_total`), the phases each original went
//!   through, and the writes per copy;
//! - at rest (`--idle-seconds`, 60 by default): requests per minute and RSS;
//! - a restart: the time to `/readyz`, RSS and peak RSS (`VmHWM`) once
//!   settled, and every request the new process made until then (no copy
//!   should be written);
//! - what the copies weigh as the metadata olm-operator lists: bytes per copy,
//!   and how much of it is managed fields and annotations.
//!
//! A bench, not a test: it prints what it measures and asserts nothing, but
//! that the operators succeed. It deletes what it created when it ends, unless
//! `--keep` is given.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use e2e::bench::{mib, request_counts, uptime};
use futures::{StreamExt, stream};
use k8s_openapi::{
    api::core::v1::Namespace, apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use olm_api::{
    labels, manifest,
    v1::{OLMConfig, OperatorGroup},
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};
use olm_testkit::{
    NAMESPACE_LABEL, client, corpus_dir, create_namespace, install_crd, install_crds,
    objects::{apply_json, global_operator_group},
    process::Process,
};
use serde_json::json;

/// The AllNamespaces operators of the scale bench.
const PACKAGES: [&str; 5] = [
    "argocd-operator",
    "cockroachdb",
    "debezium-operator",
    "dns-operator",
    "limitador-operator",
];

/// How long olm-operator must write no CSV before its copies count as settled.
const QUIET: Duration = Duration::from_secs(20);

/// How long a restarted olm-operator is watched before its figures are taken.
const SETTLE: Duration = Duration::from_secs(30);

/// How many API requests the bench itself has in flight.
const PARALLEL: usize = 16;

/// How many copies are read back to check their phase, per operator.
const SPOT_CHECKS: usize = 10;

struct Options {
    namespaces: usize,
    packages: Vec<String>,
    idle: Duration,
    /// How long the operators and their copies may take to settle.
    timeout: Duration,
    /// `--keep`: leave the scene in place (to measure more restarts on it).
    keep: bool,
}

impl Options {
    fn parse() -> Options {
        let value = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
        let number = |name: &str| {
            value(name).map(|n| {
                n.parse::<u64>()
                    .unwrap_or_else(|e| panic!("{name} takes a number: {e}"))
            })
        };
        Options {
            namespaces: number("--namespaces").unwrap_or(1000) as usize,
            packages: value("--packages")
                .map(|list| list.split(',').map(str::to_owned).collect())
                .unwrap_or_else(|| PACKAGES.map(str::to_owned).to_vec()),
            idle: Duration::from_secs(number("--idle-seconds").unwrap_or(60)),
            timeout: Duration::from_secs(number("--timeout-seconds").unwrap_or(1200)),
            keep: std::env::args().any(|a| a == "--keep"),
        }
    }
}

/// olm-operator's request counters by (verb, resource), its RSS and peak RSS (KiB).
#[derive(Clone, Default)]
struct Sample {
    requests: BTreeMap<(String, String), f64>,
    rss: Option<u64>,
    peak: Option<u64>,
    /// CSV reconciles run.
    reconciles: f64,
    /// Whether the process leads (`olm_leader`).
    leader: bool,
}

impl Sample {
    fn of(process: &Process) -> Sample {
        let body = process
            .admin_get("/metrics")
            .map(|(_, body)| body)
            .unwrap_or_default();
        Sample {
            requests: request_counts(&body),
            rss: process.rss_kib(),
            peak: status_kib(process, "VmHWM:"),
            reconciles: metric(&body, "olm_reconcile_total{controller=\"clusterserviceversion\"}"),
            leader: metric(&body, "olm_leader{lease=\"olm-operator\"}") == 1.0,
        }
    }

    /// The CSV writes (create, patch, update, delete) counted so far.
    fn csv_writes(&self) -> f64 {
        self.requests
            .iter()
            .filter(|((verb, resource), _)| {
                resource.starts_with("clusterserviceversions.")
                    && matches!(verb.as_str(), "create" | "patch" | "update" | "delete")
            })
            .map(|(_, count)| count)
            .sum()
    }

    /// The requests of `verb` on `resource` since `before`.
    fn since(&self, before: &Sample, verb: &str, resource: &str) -> f64 {
        let key = (verb.to_owned(), resource.to_owned());
        self.requests.get(&key).unwrap_or(&0.0) - before.requests.get(&key).unwrap_or(&0.0)
    }
}

const CSVS: &str = "clusterserviceversions.operators.coreos.com";
const CSV_STATUS: &str = "clusterserviceversions.operators.coreos.com/status";

#[tokio::main]
async fn main() {
    let options = Options::parse();
    let client = client().await;
    let (home, mut namespaces) = set_up(&client, &options).await;
    namespaces.push(home.clone());
    let olm = Process::olm_operator_with("olm-operator-a", "olm-operator", &home, &[]);
    assert!(
        olm.wait_ready(Duration::from_secs(120)).await,
        "olm-operator is ready"
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    let empty = Sample::of(&olm);
    let fan_out = fan_out(&client, &olm, &home, &namespaces, &options).await;
    let rest = at_rest(&olm, options.idle).await;
    let (_olm, restart) = restart(olm, &home).await;
    let weight = metadata_weight(&client).await;

    report_fan_out(&options, &fan_out);
    report_rest_and_restart(&options, &empty, &fan_out.after, &rest, &restart);
    println!("  {weight}");
    if options.keep {
        println!("  kept: the originals in {home}, the namespaces labelled {NAMESPACE_LABEL}=bench");
    } else {
        cleanup(&client, &home, &fan_out.originals, namespaces).await;
    }
}

/// The scene: the CRDs, copied CSVs enabled, the operators' namespace and the
/// `--namespaces` others. Returns the operators' namespace and the others.
async fn set_up(client: &Client, options: &Options) -> (String, Vec<String>) {
    install_crds(client).await;
    apply_json(
        &Api::<OLMConfig>::all(client.clone()),
        json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
            "metadata": {"name": "cluster"},
            "spec": {"features": {"disableCopiedCSVs": false}},
        }),
    )
    .await;
    let run = format!("copies-{:x}", std::process::id());
    let home = format!("{run}-ops");
    create_namespace(client, &home, &[(NAMESPACE_LABEL, "bench")]).await;
    let started = Instant::now();
    let namespaces = create_namespaces(client, &run, options.namespaces).await;
    eprintln!(
        "{} namespaces created in {:.1?}",
        namespaces.len(),
        started.elapsed()
    );
    (home, namespaces)
}

/// What the fan-out of the operators' copies did.
struct FanOut {
    /// The originals' names.
    originals: Vec<String>,
    /// Whether olm-operator stopped writing CSVs within `--timeout-seconds`.
    settled: bool,
    /// The last CSV write, after the CSVs were created.
    last_write: Duration,
    /// olm-operator's figures before the CSVs were created, and once settled.
    before: Sample,
    after: Sample,
    /// How long after the CSVs were created the last original reached Succeeded.
    succeeded_after: Option<Duration>,
    /// The copies, the phases each original went through, and a spot check of copies.
    copies: usize,
    phases: String,
    spot: String,
}

/// Creates the operators all at once in `home` (with a global OperatorGroup);
/// their copies follow their phases. Waits until olm-operator stops writing CSVs.
async fn fan_out(
    client: &Client,
    olm: &Process,
    home: &str,
    namespaces: &[String],
    options: &Options,
) -> FanOut {
    global_operator_group(&Api::<OperatorGroup>::namespaced(client.clone(), home), "global").await;
    let bundles: Vec<PathBuf> = options.packages.iter().map(|p| highest_bundle(p)).collect();
    let mut originals = Vec::new();
    for bundle in &bundles {
        install_crds_of(client, bundle).await;
    }
    let before = Sample::of(olm);
    let started = Instant::now();
    let succeeded = tokio::spawn(all_succeeded(
        client.clone(),
        home.to_owned(),
        bundles.len(),
        started,
    ));
    for bundle in &bundles {
        originals.push(create_csv_of(client, bundle, home).await);
    }
    eprintln!("created {}", originals.join(", "));
    let (settled, last_write) = settle(client, olm, home, &originals, started + options.timeout).await;
    let after = Sample::of(olm);
    let succeeded_after = tokio::time::timeout(Duration::from_secs(1), succeeded)
        .await
        .ok()
        .and_then(Result::ok);
    FanOut {
        succeeded_after,
        copies: copy_count(client).await,
        phases: phases_of(client, home, &originals).await,
        spot: spot_check(client, namespaces, &originals).await,
        originals,
        settled,
        last_write,
        before,
        after,
    }
}

/// How long after `started` the `count` CSVs of `namespace` were all seen
/// Succeeded, as a watch of them tells (no polling).
async fn all_succeeded(client: Client, namespace: String, count: usize, started: Instant) -> Duration {
    let api = Api::<ClusterServiceVersion>::namespaced(client, &namespace);
    use kube::runtime::WatchStreamExt;
    let mut seen = std::collections::BTreeSet::new();
    let mut csvs = std::pin::pin!(
        kube::runtime::watcher(api, kube::runtime::watcher::Config::default()).applied_objects()
    );
    while let Some(Ok(csv)) = csvs.next().await {
        if csv.status.as_ref().and_then(|s| s.phase) == Some(CsvPhase::Succeeded) {
            seen.insert(csv.metadata.name.clone().unwrap_or_default());
            if seen.len() >= count {
                break;
            }
        }
    }
    started.elapsed()
}

/// olm-operator's figures before and after `idle` at rest.
async fn at_rest(olm: &Process, idle: Duration) -> (Sample, Sample) {
    let before = Sample::of(olm);
    tokio::time::sleep(idle).await;
    (before, Sample::of(olm))
}

/// A restart of olm-operator: how long until `/readyz`, and its figures `SETTLE` later.
struct Restart {
    ready_in: Duration,
    after: Sample,
}

/// Stops `olm` (SIGTERM) and starts a new process, timed until `/readyz`; returns
/// the new process.
async fn restart(mut olm: Process, home: &str) -> (Process, Restart) {
    olm.terminate(Duration::from_secs(30));
    let restarted = Instant::now();
    let olm = Process::olm_operator_with("olm-operator-b", "olm-operator", home, &[]);
    assert!(
        olm.wait_ready(Duration::from_secs(120)).await,
        "olm-operator is ready again"
    );
    let ready_in = restarted.elapsed();
    tokio::time::sleep(SETTLE).await;
    let after = Sample::of(&olm);
    (olm, Restart { ready_in, after })
}

/// Prints the scene, the copies and the writes of the fan-out.
fn report_fan_out(options: &Options, fan_out: &FanOut) {
    let FanOut {
        originals,
        settled,
        last_write,
        before,
        after,
        copies,
        phases,
        spot,
        succeeded_after,
    } = fan_out;
    println!(
        "olm-rs copied CSV bench: {} namespaces, {} AllNamespaces operators ({}), olm-operator from {}",
        options.namespaces,
        originals.len(),
        originals.join(", "),
        olm_testkit::process::binary("olm-operator").display(),
    );
    println!("  machine load (uptime): {}", uptime());
    println!("  copies: {copies}; spot check: {spot}");
    println!("  phases of the originals: {phases}");
    match succeeded_after {
        Some(after) => println!("  every original Succeeded {after:.2?} after the CSVs were created"),
        None => println!("  the originals were NOT all seen Succeeded"),
    }
    if !settled {
        println!("  NOT SETTLED within {:?}", options.timeout);
    }
    println!(
        "  fan-out: last CSV write {:.1?} after the CSVs were created",
        last_write
    );
    let status = after.since(before, "patch", CSV_STATUS);
    let patches = after.since(before, "patch", CSVS);
    let creates = after.since(before, "create", CSVS);
    let per_copy = |n: f64| if *copies > 0 { n / *copies as f64 } else { 0.0 };
    println!(
        "  CSV writes during the fan-out: create {creates}, patch {patches}, status patch {status} \
         ({:.2} patches and {:.2} status patches per copy)",
        per_copy(patches),
        per_copy(status),
    );
    println!("  requests during the fan-out, by verb (resource):");
    print_rates(before, after, 1.0);
}

/// Prints the requests at rest, RSS along the way (`empty`: with the namespaces
/// only; `fanned`: after the fan-out), and the restart.
fn report_rest_and_restart(
    options: &Options,
    empty: &Sample,
    fanned: &Sample,
    (rest_before, rest_after): &(Sample, Sample),
    restart: &Restart,
) {
    let minutes = options.idle.as_secs_f64() / 60.0;
    println!(
        "  requests per minute at rest over {:.0?} ({} CSV reconciles):",
        options.idle,
        rest_after.reconciles - rest_before.reconciles
    );
    print_rates(rest_before, rest_after, minutes);
    println!(
        "  RSS: with the namespaces, no copies {}; after the fan-out {}; after {:.0?} at rest {} (peak {})",
        mib(empty.rss),
        mib(fanned.rss),
        options.idle,
        mib(rest_after.rss),
        mib(rest_after.peak),
    );
    println!(
        "  restart: /readyz after {:.2?}; {SETTLE:?} later RSS {} (peak {})",
        restart.ready_in,
        mib(restart.after.rss),
        mib(restart.after.peak)
    );
    println!(
        "  the restarted process: leader {}, {} CSV reconciles; its requests until {SETTLE:?} after /readyz:",
        restart.after.leader, restart.after.reconciles
    );
    print_rates(&Sample::default(), &restart.after, 1.0);
}

/// The manifests directory of the highest version of `package` in the corpus.
fn highest_bundle(package: &str) -> PathBuf {
    let dir = corpus_dir().join("bundles").join(package);
    let versions = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("list {}: {e}", dir.display()));
    let highest = versions
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("manifests").is_dir())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            Some((semver::Version::parse(&name).ok()?, path))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .unwrap_or_else(|| panic!("{} holds no versioned bundle", dir.display()));
    highest.1.join("manifests")
}

/// The objects of the bundle in `dir` of kind `kind`.
fn bundle_objects(dir: &Path, kind: &str) -> Vec<serde_json::Value> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("list {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(documents) = manifest::documents(&path, &text) else {
            continue;
        };
        found.extend(documents.into_iter().filter(|doc| doc["kind"] == kind));
    }
    found
}

async fn install_crds_of(client: &Client, dir: &Path) {
    for crd in bundle_objects(dir, "CustomResourceDefinition") {
        let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("a valid CRD");
        install_crd(client, &crd).await;
    }
}

/// Creates the CSV of the bundle in `dir` in `namespace`; returns its name.
async fn create_csv_of(client: &Client, dir: &Path, namespace: &str) -> String {
    let csv = bundle_objects(dir, "ClusterServiceVersion")
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{} holds a CSV", dir.display()));
    let mut csv: ClusterServiceVersion = serde_json::from_value(csv).expect("a valid CSV");
    csv.metadata.namespace = Some(namespace.to_owned());
    Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &csv)
        .await
        .unwrap_or_else(|e| panic!("create CSV {}: {e}", csv.name_any()))
        .name_any()
}

/// Waits until every original is Succeeded and olm-operator has written no
/// CSV for [`QUIET`], or `deadline`. Returns whether it settled and how long
/// after the start the last CSV write was seen.
async fn settle(
    client: &Client,
    olm: &Process,
    namespace: &str,
    originals: &[String],
    deadline: Instant,
) -> (bool, Duration) {
    let started = Instant::now();
    let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace);
    let mut writes = Sample::of(olm).csv_writes();
    let mut last_write = Instant::now();
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = Sample::of(olm).csv_writes();
        if now != writes {
            writes = now;
            last_write = Instant::now();
            continue;
        }
        if last_write.elapsed() < QUIET {
            continue;
        }
        let mut succeeded = true;
        for name in originals {
            let phase = api
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|csv| csv.status.and_then(|s| s.phase));
            succeeded &= phase == Some(CsvPhase::Succeeded);
        }
        if succeeded {
            return (true, last_write - started);
        }
    }
    (false, last_write - started)
}

/// How many copied CSVs the cluster holds.
async fn copy_count(client: &Client) -> usize {
    let mut count = 0;
    let mut params = ListParams::default().labels(labels::COPIED_FROM).limit(500);
    loop {
        let page = Api::<ClusterServiceVersion>::all(client.clone())
            .list_metadata(&params)
            .await
            .unwrap_or_else(|e| panic!("list the copied CSVs: {e}"));
        count += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => return count,
        }
    }
}

/// The phases each original went through (its condition history).
async fn phases_of(client: &Client, namespace: &str, originals: &[String]) -> String {
    let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace);
    let mut out = Vec::new();
    for name in originals {
        let csv = api.get(name).await.unwrap_or_else(|e| panic!("get {name}: {e}"));
        let history: Vec<String> = csv
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .map(|c| format!("{}/{}", enum_name(c.phase), enum_name(c.reason)))
            .collect();
        out.push(format!("{name}: {}", history.join(" > ")));
    }
    out.join("; ")
}

/// A phase or reason as the API spells it.
fn enum_name<T: serde::Serialize>(value: Option<T>) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Reads the copies of each original in [`SPOT_CHECKS`] namespaces spread over
/// `namespaces`; says how many are Succeeded with reason Copied.
async fn spot_check(client: &Client, namespaces: &[String], originals: &[String]) -> String {
    let step = (namespaces.len() / SPOT_CHECKS).max(1);
    let (mut good, mut read) = (0, 0);
    for namespace in namespaces.iter().step_by(step).take(SPOT_CHECKS) {
        let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace);
        for name in originals {
            read += 1;
            if let Ok(Some(copy)) = api.get_opt(name).await
                && copy.labels().contains_key(labels::COPIED_FROM)
                && copy.status.as_ref().is_some_and(|s| {
                    s.phase == Some(CsvPhase::Succeeded)
                        && s.reason == Some(olm_api::v1alpha1::CsvReason::Copied)
                })
            {
                good += 1;
            }
        }
    }
    format!("{good} of {read} copies read back are Succeeded/Copied")
}

/// What one page of copies weighs as the metadata olm-operator lists: bytes
/// per copy, of which managed fields and annotations.
async fn metadata_weight(client: &Client) -> String {
    let request = http::Request::get(
        "/apis/operators.coreos.com/v1alpha1/clusterserviceversions?labelSelector=olm.copiedFrom&limit=500",
    )
    .header(
        "Accept",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    )
    .body(Vec::new())
    .expect("a request");
    let text = match client.request_text(request).await {
        Ok(text) => text,
        Err(e) => return format!("the copies' metadata could not be read: {e}"),
    };
    let list: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let items = list["items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        return "no copies to weigh".to_owned();
    }
    let size = |v: &serde_json::Value| serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
    let managed: usize = items.iter().map(|i| size(&i["metadata"]["managedFields"])).sum();
    let annotations: usize = items.iter().map(|i| size(&i["metadata"]["annotations"])).sum();
    let n = items.len();
    format!(
        "a page of {n} copies as metadata: {:.1} MiB, {:.1} KiB per copy, of which managed fields {:.1} KiB and annotations {:.1} KiB",
        text.len() as f64 / 1048576.0,
        text.len() as f64 / 1024.0 / n as f64,
        managed as f64 / 1024.0 / n as f64,
        annotations as f64 / 1024.0 / n as f64,
    )
}

/// Deletes the originals (olm-operator deletes their copies), then every namespace.
async fn cleanup(client: &Client, home: &str, originals: &[String], namespaces: Vec<String>) {
    let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), home);
    for name in originals {
        let _ = api.delete(name, &DeleteParams::background()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline {
        let left = api
            .list_metadata(&ListParams::default())
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    stream::iter(namespaces)
        .for_each_concurrent(PARALLEL, |ns| {
            let namespaces: Api<Namespace> = Api::all(client.clone());
            async move {
                let _ = namespaces.delete(&ns, &DeleteParams::background()).await;
            }
        })
        .await;
}

/// Creates `count` namespaces `<run>-0000` ... in parallel; returns their names.
async fn create_namespaces(client: &Client, run: &str, count: usize) -> Vec<String> {
    let names: Vec<String> = (0..count).map(|i| format!("{run}-{i:04}")).collect();
    stream::iter(names.clone())
        .for_each_concurrent(PARALLEL, |name| async move {
            create_namespace(client, &name, &[(NAMESPACE_LABEL, "bench")]).await;
        })
        .await;
    names
}

/// Prints the requests between two samples, by verb, each with its resources,
/// divided by `minutes` (1 for plain counts).
fn print_rates(before: &Sample, after: &Sample, minutes: f64) {
    let mut by_verb: BTreeMap<&str, Vec<(&str, f64)>> = BTreeMap::new();
    for ((verb, resource), count) in &after.requests {
        let delta = count
            - before
                .requests
                .get(&(verb.clone(), resource.clone()))
                .unwrap_or(&0.0);
        if delta > 0.0 {
            by_verb.entry(verb).or_default().push((resource, delta / minutes));
        }
    }
    if by_verb.is_empty() {
        println!("    none");
    }
    for (verb, resources) in by_verb {
        let total: f64 = resources.iter().map(|(_, n)| n).sum();
        let spelled = resources
            .iter()
            .map(|(resource, n)| format!("{resource} {n:.1}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!("    {verb:<8} {total:>9.1}  ({spelled})");
    }
}

/// The value of the series `series` (name and labels as printed) in a `/metrics` body, or 0.
fn metric(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A `kB` figure of /proc/<pid>/status.
fn status_kib(process: &Process, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", process.pid())).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
