//! What olm-operator's cluster tests add to the harness of `olm-testkit` (a client for
//! `KUBECONFIG`, OLM's CRDs, a namespace per test, waits with deadlines, the corpus): one
//! olm-operator running in the test process, and CSVs deleted before a test's namespace goes.
//!
//! The operator acts as olm-operator's ServiceAccount of `manifests/`, with the RBAC of
//! `manifests/` (`olm_testkit::identity`), not as the test: every request the API server refuses
//! it is recorded, and [`with_namespace`] fails the test that sees one
//! ([`assert_no_refusals`]).

#![allow(dead_code)]

use std::{
    future::Future,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use kube::{Api, Client, ResourceExt, api::DeleteParams, client::ClientBuilder};
use olm_operator::{
    context::{Context, Settings},
    metrics::Metrics,
};
use olm_runtime::{
    Leadership, Parts, Readiness, Shutdown,
    apply::{FIELD_MANAGER_OLM, Writer},
    refusals::{Refusal, RefusalLayer},
};
use olm_testkit::identity::{self, Binary};
// The harness the tests use, in one import with what this module adds; each test binary uses
// some of it.
#[allow(unused_imports)]
pub use olm_testkit::{
    NAMESPACE_LABEL, TIMEOUT, apply, client, corpus_dir, create_namespace, delete_namespace, eventually,
    install_crd, install_crds,
    objects::{csv_in, list, wait_for_csv},
    random_suffix, wait_for, wait_gone,
};

pub mod csv;
pub mod machines;

static METRICS: OnceLock<Arc<Metrics>> = OnceLock::new();

/// The requests the API server refused the operator, not yet reported.
static REFUSALS: Mutex<Vec<Refusal>> = Mutex::new(Vec::new());

/// Panics, listing them, when the API server refused the operator's ServiceAccount any request
/// since the last call: `manifests/` lacks a permission the operator needs.
pub fn assert_no_refusals() {
    let refused: Vec<Refusal> = std::mem::take(&mut *REFUSALS.lock().unwrap_or_else(|e| e.into_inner()));
    let text = refused
        .iter()
        .map(|r| format!("{} {}: {}", r.method, r.path, r.message))
        .collect::<Vec<_>>()
        .join("\n");
    let user = identity::deployment(Binary::OlmOperator).user();
    identity::assert_no_forbidden(
        "olm-operator (in-process)",
        &user,
        &identity::forbidden_lines(&text, &user),
    );
}

/// The metrics of the operator the tests run.
pub fn operator_metrics() -> Arc<Metrics> {
    METRICS.get().cloned().expect("the operator was started")
}

/// The settings of the operator the tests run.
pub fn test_settings() -> Settings {
    Settings {
        install_timeout: Duration::from_secs(300),
        resync: Duration::from_secs(60),
        apiserver_endpoints: std::env::var("OLM_RS_APISERVER_ENDPOINTS")
            .map(|list| list.split(',').map(str::to_owned).collect())
            .unwrap_or_default(),
        ..Settings::default()
    }
}

/// Installs OLM's CRDs and starts one olm-operator (once per test process) in a thread of its
/// own, which lives as long as the test process.
pub async fn start_operator(client: &Client) {
    start_operator_with(client, test_settings()).await;
}

/// [`start_operator`] with `settings`, for a test binary whose operator needs other settings
/// (the first call in a test process decides).
pub async fn start_operator_with(client: &Client, settings: Settings) {
    install_crds(client).await;
    // Tests install the same all-namespaces operator in parallel namespaces; copies of one would
    // take the name of another's CSV. Copies are switched off here; tests/copied.rs turns them on.
    // Once per process, so that a test that turns them on is not overridden.
    static COPIES_OFF: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    COPIES_OFF
        .get_or_init(|| async {
            olm_testkit::objects::apply_json(
                &Api::<olm_api::v1::OLMConfig>::all(client.clone()),
                serde_json::json!({
                    "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
                    "metadata": {"name": "cluster"},
                    "spec": {"features": {"disableCopiedCSVs": true}},
                }),
            )
            .await;
        })
        .await;
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
                    // Plain text: the test's output ends up in files (CI's log).
                    let _ = tracing_subscriber::fmt()
                        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                        .with_ansi(false)
                        .try_init();
                    // olm-operator's ServiceAccount, with the RBAC of manifests/.
                    let admin = olm_testkit::client().await;
                    let config = identity::config(&admin, Binary::OlmOperator, None).await;
                    let record = RefusalLayer::new(Arc::new(|refusal: Refusal| {
                        REFUSALS.lock().unwrap_or_else(|e| e.into_inner()).push(refusal);
                    }));
                    let client = ClientBuilder::try_from(config.clone())
                        .expect("a client")
                        .with_layer(&record)
                        .build();
                    // One replica: it writes without a Lease.
                    let parts = Parts {
                        client,
                        writer: Writer::new(Leadership::standalone(), FIELD_MANAGER_OLM)
                            .with_metrics(&runtime_metrics.writes),
                        metrics: runtime_metrics,
                        readiness: Readiness::new(),
                        shutdown: Shutdown::new(),
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

/// Runs `test` in a fresh namespace with the in-process operator running, as
/// [`olm_testkit::with_namespace`] does; before the namespace is deleted, its CSVs are.
pub async fn with_namespace<F, Fut>(prefix: &str, test: F)
where
    F: FnOnce(Client, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    start_operator(&client().await).await;
    // CSVs carry the operator's finalizer: let the operator, which dies with the test process,
    // release them before the namespace goes.
    olm_testkit::with_namespace_and_cleanup(prefix, test, |client, namespace| async move {
        delete_csvs(&client, &namespace).await;
        assert_no_refusals();
    })
    .await;
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
