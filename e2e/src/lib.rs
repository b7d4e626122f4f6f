//! End-to-end tests of olm-rs; they need the cluster named by `KUBECONFIG` (see `hack/cluster.sh`).
//!
//! The harness every test uses:
//! - [`client`] connects to the cluster in `KUBECONFIG`, or fails saying how to start one;
//! - [`with_namespace`] runs a test in a fresh namespace, deleted afterwards, or kept, with its
//!   objects dumped to stderr, when the test fails;
//! - [`wait_for`] waits for a condition on one object, with a deadline;
//! - [`install_crds`] server-side applies the generated `crds/` and waits until they are Established;
//! - [`corpus_dir`] finds the corpus of real OLM packaging data.

use std::{
    collections::hash_map::RandomState,
    fmt::Debug,
    future::Future,
    hash::{BuildHasher, Hasher},
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::{
    api::{apps::v1::Deployment, core::v1::Namespace},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, Config, Resource, ResourceExt,
    api::{
        DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
    },
    config::KubeConfigOptions,
    core::ApiResource,
    discovery::{Discovery, Scope, verbs},
    runtime::wait::{Condition, await_condition, conditions},
};
use serde::de::DeserializeOwned;

/// The field manager of every write the tests make.
pub const FIELD_MANAGER: &str = "olm-rs-e2e";

/// How long a test waits for the cluster to reach a state before it fails.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Label put on every test namespace, so that leftovers are easy to find and delete.
pub const NAMESPACE_LABEL: &str = "e2e.olm-rs.dev/test";

/// Environment variable that overrides where the corpus is.
pub const CORPUS_ENV: &str = "OLM_RS_CORPUS";

const HOW_TO_START: &str = "Start the local control plane with `hack/cluster.sh up` and then \
     `eval \"$(hack/cluster.sh env)\"`, or point KUBECONFIG at another cluster (e.g. kind); \
     `hack/test.sh` does all of it and stops the control plane afterwards.";

/// The root of the repository.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the e2e crate lives in the repository root")
        .to_path_buf()
}

/// The corpus of real OLM packaging data: `$OLM_RS_CORPUS`, or `../shared/corpus` next to the
/// repository. Panics with an explanation when it is absent.
pub fn corpus_dir() -> PathBuf {
    let dir = match std::env::var_os(CORPUS_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => repo_root().join("../shared/corpus"),
    };
    assert!(
        dir.join("bundles").is_dir(),
        "the OLM corpus is not at {} (no bundles/ in it); set {CORPUS_ENV} to the corpus directory",
        dir.display()
    );
    dir
}

/// A client for the cluster in `KUBECONFIG`. Panics, saying how to start a cluster, when
/// `KUBECONFIG` is unset or the cluster does not answer: e2e tests never pass without one.
pub async fn client() -> Client {
    let Some(path) = std::env::var_os("KUBECONFIG") else {
        panic!("e2e tests need a Kubernetes cluster, but KUBECONFIG is not set. {HOW_TO_START}");
    };
    let path = PathBuf::from(path);
    let config = Config::from_kubeconfig(&KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("cannot use KUBECONFIG={}: {e}. {HOW_TO_START}", path.display()));
    let server = config.cluster_url.clone();
    let client = Client::try_from(config)
        .unwrap_or_else(|e| panic!("cannot build a client for {server}: {e}. {HOW_TO_START}"));
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!(
            "the cluster in KUBECONFIG={} ({server}) does not answer: {e}. {HOW_TO_START}",
            path.display()
        ),
        Err(_) => panic!(
            "the cluster in KUBECONFIG={} ({server}) did not answer within 10s. {HOW_TO_START}",
            path.display()
        ),
    }
}

/// Creates the namespace `name`, labelled [`NAMESPACE_LABEL`]`=<kind>` so that what the tests and
/// the bench leave behind can be found; panics with the name on error.
pub async fn create_namespace(client: &Client, name: &str, kind: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([(NAMESPACE_LABEL.to_owned(), kind.to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
}

/// Runs `test` with a client and the name of a new namespace, `e2e-<prefix>-<random>`.
///
/// When the test returns, the namespace is deleted. When it panics, the namespace is kept and its
/// objects are written to stderr, then the panic goes on.
pub async fn with_namespace<F, Fut>(prefix: &str, test: F)
where
    F: FnOnce(Client, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let client = client().await;
    let name = format!(
        "e2e-{prefix}-{:08x}",
        RandomState::new().build_hasher().finish() as u32
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    create_namespace(&client, &name, prefix).await;

    // A task of its own, so that a panic is caught here and the namespace can be dumped.
    let outcome = tokio::spawn(test(client.clone(), name.clone())).await;
    match outcome {
        Ok(()) => {
            if let Err(e) = namespaces.delete(&name, &DeleteParams::background()).await {
                eprintln!("warning: could not delete namespace {name}: {e}");
            }
        }
        Err(e) => {
            eprintln!("test failed: keeping namespace {name}; the objects in it:");
            dump_namespace(&client, &name).await;
            match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(e) => panic!("the test in namespace {name} did not finish: {e}"),
            }
        }
    }
}

/// Writes every object of every listable namespaced resource in `namespace` to stderr, without
/// managed fields.
pub async fn dump_namespace(client: &Client, namespace: &str) {
    let discovery = match Discovery::new(client.clone()).run().await {
        Ok(discovery) => discovery,
        Err(e) => {
            eprintln!("(cannot discover the API resources: {e})");
            return;
        }
    };
    for group in discovery.groups() {
        // Events appear in two groups; the core one is enough.
        if group.name() == "events.k8s.io" {
            continue;
        }
        for (resource, caps) in group.recommended_resources() {
            if caps.scope != Scope::Namespaced || !caps.supports_operation(verbs::LIST) {
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
            let list = match api.list(&ListParams::default()).await {
                Ok(list) => list,
                Err(e) => {
                    eprintln!("(cannot list {}: {e})", resource.plural);
                    continue;
                }
            };
            for mut object in list.items {
                object.metadata.managed_fields = None;
                let text = serde_json::to_string_pretty(&object).unwrap_or_else(|e| e.to_string());
                eprintln!(
                    "--- {} {}/{}\n{text}",
                    resource.kind,
                    namespace,
                    object.name_any()
                );
            }
        }
    }
}

/// Waits until `condition` holds for the object `name`, and returns the object (`None` if the
/// condition holds for a missing object, as with [`conditions::is_deleted`]).
///
/// Panics after [`TIMEOUT`], saying what it waited for (`what`, e.g. "Deployment web is
/// Available") and showing the object as it was then.
pub async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, condition: impl Condition<K>) -> Option<K>
where
    K: Clone + Debug + Send + DeserializeOwned + Resource + serde::Serialize + 'static,
{
    wait_for_within(TIMEOUT, api, name, what, condition).await
}

/// [`wait_for`] with a deadline of its own, for what is known to be slow.
pub async fn wait_for_within<K>(
    timeout: Duration,
    api: &Api<K>,
    name: &str,
    what: &str,
    condition: impl Condition<K>,
) -> Option<K>
where
    K: Clone + Debug + Send + DeserializeOwned + Resource + serde::Serialize + 'static,
{
    match tokio::time::timeout(timeout, await_condition(api.clone(), name, condition)).await {
        Ok(Ok(object)) => object,
        Ok(Err(e)) => panic!("error while waiting until {what}: {e}"),
        Err(_) => {
            let seen = match api.get_opt(name).await {
                Ok(Some(mut object)) => {
                    object.meta_mut().managed_fields = None;
                    serde_json::to_string_pretty(&object).unwrap_or_else(|e| e.to_string())
                }
                Ok(None) => "it does not exist".to_string(),
                Err(e) => format!("cannot read it: {e}"),
            };
            panic!(
                "gave up after {}s waiting until {what}; it is now:\n{seen}",
                timeout.as_secs()
            )
        }
    }
}

/// A condition: the Deployment's controller has seen its latest spec and reports it Available.
pub fn is_deployment_available() -> impl Condition<Deployment> {
    |deployment: Option<&Deployment>| {
        let Some(deployment) = deployment else {
            return false;
        };
        let Some(status) = &deployment.status else {
            return false;
        };
        status.observed_generation >= deployment.metadata.generation
            && status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Available" && c.status == "True")
    }
}

/// Reads the CRDs the repository ships in `crds/`.
pub fn repo_crds() -> Vec<CustomResourceDefinition> {
    let dir = repo_root().join("crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("read crds/").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .filter(|path| !path.ends_with("kustomization.yaml"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no CRDs in {}; generate them with `make crds`",
        dir.display()
    );
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).expect("read a CRD file");
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{} is not a CRD: {e}", path.display()))
        })
        .collect()
}

/// Server-side applies every CRD in `crds/` and waits until each is Established. Idempotent, so
/// every test that needs the CRDs calls it.
pub async fn install_crds(client: &Client) -> Vec<CustomResourceDefinition> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let crds = repo_crds();
    for crd in &crds {
        let name = crd.name_any();
        api.patch(&name, &params, &Patch::Apply(crd))
            .await
            .unwrap_or_else(|e| panic!("apply CRD {name}: {e}"));
    }
    for crd in &crds {
        let name = crd.name_any();
        wait_for(
            &api,
            &name,
            &format!("CRD {name} is Established"),
            conditions::is_crd_established(),
        )
        .await;
    }
    crds
}

/// An OLM kind as served on the wire: group, version, kind and plural are part of the API that
/// olm-rs must serve unchanged.
#[derive(Clone, Copy, Debug)]
pub struct OlmKind {
    /// API group.
    pub group: &'static str,
    /// The version the tests write.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Resource name in URLs.
    pub plural: &'static str,
}

impl OlmKind {
    /// The `ApiResource` for dynamic clients.
    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }

    /// An API for this kind in `namespace`.
    pub fn api(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &self.resource())
    }

    /// `apiVersion` of this kind.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }
}

pub mod inprocess;
pub mod objects;
pub mod process;

/// OLM's kinds, as operator-framework's OLM serves them.
pub mod olm {
    use super::OlmKind;

    /// ClusterServiceVersion.
    pub const CSV: OlmKind = OlmKind {
        group: "operators.coreos.com",
        version: "v1alpha1",
        kind: "ClusterServiceVersion",
        plural: "clusterserviceversions",
    };
    /// Subscription.
    pub const SUBSCRIPTION: OlmKind = OlmKind {
        group: "operators.coreos.com",
        version: "v1alpha1",
        kind: "Subscription",
        plural: "subscriptions",
    };
    /// CatalogSource.
    pub const CATALOG_SOURCE: OlmKind = OlmKind {
        group: "operators.coreos.com",
        version: "v1alpha1",
        kind: "CatalogSource",
        plural: "catalogsources",
    };
    /// InstallPlan.
    pub const INSTALL_PLAN: OlmKind = OlmKind {
        group: "operators.coreos.com",
        version: "v1alpha1",
        kind: "InstallPlan",
        plural: "installplans",
    };
    /// OperatorGroup.
    pub const OPERATOR_GROUP: OlmKind = OlmKind {
        group: "operators.coreos.com",
        version: "v1",
        kind: "OperatorGroup",
        plural: "operatorgroups",
    };
}

/// Parses YAML (one document) into a JSON value, panicking with the file name on error.
///
/// A repeated mapping key keeps its last value, as in the Go YAML decoding OLM and kubectl use
/// (sigs.k8s.io/yaml): real CSVs have such keys, and OLM installs them.
pub fn yaml_file(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
    };
    serde_saphyr::from_str_with_options(&text, options)
        .unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// Turns a JSON value into a `DynamicObject`, panicking with `what` on error.
pub fn dynamic(value: serde_json::Value, what: &str) -> DynamicObject {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{what} is not a Kubernetes object: {e}"))
}
