//! The harness of the cluster tests: a client for `KUBECONFIG`, OLM's CRDs
//! installed, one olm-operator running in the test process, a fresh namespace
//! per test, waits with deadlines, and the corpus of real bundles.

#![allow(dead_code)]

use std::{
    collections::hash_map::RandomState,
    future::Future,
    hash::{BuildHasher, Hasher},
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
    time::Duration,
};

use k8s_openapi::{
    api::core::v1::Namespace, apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams},
    runtime::wait::{Condition, await_condition, conditions},
};
use olm_operator::{
    context::{Context, Settings},
    metrics::Metrics,
};
use olm_runtime::{
    Leadership, Parts, Readiness, Shutdown,
    apply::{FIELD_MANAGER_OLM, Writer},
};
use serde::{Serialize, de::DeserializeOwned};

pub mod csv;

/// The field manager of the tests' own writes.
pub const FIELD_MANAGER: &str = "olm-operator-e2e";

/// How long a test waits for the cluster to reach a state.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// Label on every test namespace.
pub const NAMESPACE_LABEL: &str = "e2e.olm-rs.dev/test";

const HOW_TO_START: &str = "start the local control plane with `hack/cluster.sh up` and \
    `eval \"$(hack/cluster.sh env)\"`, or point KUBECONFIG at another cluster";

/// A client for the cluster in `KUBECONFIG`; panics with how to get one.
pub async fn client() -> Client {
    if std::env::var_os("KUBECONFIG").is_none() {
        panic!("these tests need a Kubernetes cluster and KUBECONFIG is not set: {HOW_TO_START}");
    }
    let client = Client::try_default()
        .await
        .unwrap_or_else(|e| panic!("cannot build a client from KUBECONFIG: {e}; {HOW_TO_START}"));
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!("the cluster in KUBECONFIG does not answer: {e}; {HOW_TO_START}"),
        Err(_) => panic!("the cluster in KUBECONFIG did not answer within 10s; {HOW_TO_START}"),
    }
}

static METRICS: OnceLock<Arc<Metrics>> = OnceLock::new();

/// The metrics of the operator the tests run.
pub fn operator_metrics() -> Arc<Metrics> {
    METRICS.get().cloned().expect("the operator was started")
}

/// Installs OLM's CRDs (once per test process) and starts one olm-operator
/// in a thread of its own, which lives as long as the test process.
pub async fn start_operator(client: &Client) {
    install_crds(client).await;
    METRICS.get_or_init(|| {
        let runtime_metrics = olm_runtime::metrics::Metrics::new().expect("metrics");
        let metrics = Arc::new(Metrics::register(&runtime_metrics).expect("metrics"));
        let for_operator = metrics.clone();
        std::thread::Builder::new()
            .name("olm-operator".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("a tokio runtime for the operator");
                runtime.block_on(async {
                    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "olm_operator=info".to_owned());
                    let _ = tracing_subscriber::fmt()
                        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                        .try_init();
                    let config = kube::Config::infer().await.expect("a client configuration");
                    let client = Client::try_from(config.clone()).expect("a client");
                    // One replica: it writes without a Lease.
                    let parts = Parts {
                        client,
                        writer: Writer::new(Leadership::standalone(), FIELD_MANAGER_OLM)
                            .with_metrics(&runtime_metrics.writes),
                        metrics: runtime_metrics,
                        readiness: Readiness::new(),
                        shutdown: Shutdown::new(),
                    };
                    let settings = Settings {
                        install_timeout: Duration::from_secs(300),
                        resync: Duration::from_secs(60),
                    };
                    let ctx = Arc::new(Context::new(
                        parts.client.clone(),
                        Some(config),
                        for_operator,
                        parts.writer.clone(),
                        settings,
                    ));
                    olm_operator::controllers(&parts, ctx).await;
                });
            })
            .expect("the operator thread starts");
        metrics
    });
}

/// Server-side applies every CRD of olm-api and waits until each is Established.
pub async fn install_crds(client: &Client) {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    for crd in olm_api::crds::all() {
        apply(&api, &crd).await;
    }
    for crd in olm_api::crds::all() {
        wait_for(&api, &crd.name_any(), conditions::is_crd_established()).await;
    }
}

/// Server-side applies `obj` with the tests' field manager.
pub async fn apply<K>(api: &Api<K>, obj: &K) -> K
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = obj.meta().name.clone().expect("objects to apply have names");
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {name}: {e}"))
}

/// Waits until `condition` holds for `name`, or panics after [`TIMEOUT`]
/// saying what it waited for and what the object looked like.
pub async fn wait_for<K>(api: &Api<K>, name: &str, condition: impl Condition<K>) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    match tokio::time::timeout(TIMEOUT, await_condition(api.clone(), name, condition)).await {
        Ok(Ok(Some(obj))) => obj,
        Ok(Ok(None)) => panic!("{name} is gone while waiting for it"),
        Ok(Err(e)) => panic!("watching {name} failed: {e}"),
        Err(_) => {
            let current = api.get_opt(name).await.ok().flatten();
            panic!("{name} did not reach the expected state within {TIMEOUT:?}; it is now: {current:#?}")
        }
    }
}

/// Waits until `name` no longer exists.
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let gone = await_condition(api.clone(), name, |obj: Option<&K>| obj.is_none());
    match tokio::time::timeout(TIMEOUT, gone).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => panic!("watching {name} failed: {e}"),
        Err(_) => {
            let current = api.get_opt(name).await.ok().flatten();
            panic!("{name} still exists after {TIMEOUT:?}: {current:#?}")
        }
    }
}

/// Runs `test` in a fresh namespace `olm-<prefix>-<random>`, deleted afterwards,
/// or kept (for a look) when the test fails.
pub async fn with_namespace<F, Fut>(prefix: &str, test: F)
where
    F: FnOnce(Client, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let client = client().await;
    start_operator(&client).await;
    let name = format!(
        "olm-{prefix}-{:08x}",
        RandomState::new().build_hasher().finish() as u32
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([(NAMESPACE_LABEL.to_owned(), prefix.to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
    let outcome = tokio::spawn(test(client.clone(), name.clone())).await;
    match outcome {
        Ok(()) => {
            // CSVs carry the operator's finalizer: let the operator, which
            // dies with the test process, release them before the namespace goes.
            delete_csvs(&client, &name).await;
            if let Err(e) = namespaces.delete(&name, &DeleteParams::background()).await {
                eprintln!("warning: could not delete namespace {name}: {e}");
            }
        }
        Err(e) => {
            eprintln!("test failed: keeping namespace {name} for a look");
            match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(e) => panic!("the test in namespace {name} did not finish: {e}"),
            }
        }
    }
}

/// Deletes every CSV of `namespace` and waits until they are gone.
pub async fn delete_csvs(client: &Client, namespace: &str) {
    let api = Api::<olm_api::v1alpha1::ClusterServiceVersion>::namespaced(client.clone(), namespace);
    let names: Vec<String> = list(&api, "").await.iter().map(|csv| csv.name_any()).collect();
    for name in &names {
        if let Err(e) = api.delete(name, &DeleteParams::background()).await {
            eprintln!("warning: could not delete CSV {namespace}/{name}: {e}");
        }
    }
    for name in &names {
        wait_gone(&api, name).await;
    }
}

/// Lists the objects of `api` with `selector`.
pub async fn list<K>(api: &Api<K>, selector: &str) -> Vec<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default().labels(selector))
        .await
        .unwrap_or_else(|e| panic!("list {selector}: {e}"))
        .items
}

/// The corpus of real OLM packaging data: `$OLM_RS_CORPUS`, or
/// `../shared/corpus` beside the workspace.
pub fn corpus_dir() -> PathBuf {
    let dir = match std::env::var_os("OLM_RS_CORPUS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
    };
    assert!(
        dir.join("bundles").is_dir(),
        "the OLM corpus is not at {} (no bundles/ in it); set OLM_RS_CORPUS to the corpus directory",
        dir.display()
    );
    dir
}

/// A short random suffix for names that must not collide between runs.
pub fn random_suffix() -> String {
    format!(
        "{:06x}",
        RandomState::new().build_hasher().finish() as u32 & 0xff_ffff
    )
}

/// Checks `probe` until it returns true, or panics after [`TIMEOUT`] with `what`.
/// For states no single object's watch can tell (lists, absences across kinds).
pub async fn eventually<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        if probe().await {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("{what}: still not so after {TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Creates another namespace `name` with `labels` (tests that span
/// namespaces); it carries [`NAMESPACE_LABEL`] so leftovers are easy to find.
pub async fn create_namespace(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let mut all: std::collections::BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    all.insert(NAMESPACE_LABEL.to_owned(), "extra".to_owned());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(all),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
}

/// Deletes namespace `name` (in the background).
pub async fn delete_namespace(client: &Client, name: &str) {
    if let Err(e) = Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::background())
        .await
    {
        eprintln!("warning: could not delete namespace {name}: {e}");
    }
}
