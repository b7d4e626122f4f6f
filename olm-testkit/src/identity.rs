//! The identity each operator runs as in the tests: the ServiceAccount its Deployment in
//! `manifests/` names, with the RBAC of `manifests/`, never the tests' own (cluster-admin)
//! credentials, so that a permission missing from `manifests/` fails a test instead of a user.
//!
//! - [`Binary`]: olm-operator or catalog-operator, and what its Deployment says: namespace,
//!   ServiceAccount, arguments ([`deployment`]).
//! - [`kubeconfig`]: applies the RBAC objects of `manifests/` (parsed from the files that
//!   `manifests/kustomization.yaml` lists) once per test process, grants the binary's
//!   leader-election Role in a test's lease namespace, requests a token for the ServiceAccount
//!   (TokenRequest API) and writes a kubeconfig with it; [`config`] gives it as a client
//!   configuration. The `_blocking` variants serve the synchronous harness ([`crate::process`]).
//! - [`forbidden_lines`]: the lines of a log in which the API server refused the binary a
//!   request: what the tests fail on.

use std::{
    collections::HashMap,
    future::Future,
    path::{Path, PathBuf},
    sync::{Mutex, OnceLock},
};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use kube::{
    Api, Client, Config,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::{Value, json};

use crate::{FIELD_MANAGER, repo_root};

/// An olm-rs binary that runs with an identity of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binary {
    /// `olm-operator`.
    OlmOperator,
    /// `catalog-operator` (its `run` subcommand).
    CatalogOperator,
}

impl Binary {
    /// The binary's (and its Deployment's) name.
    pub fn name(self) -> &'static str {
        match self {
            Binary::OlmOperator => "olm-operator",
            Binary::CatalogOperator => "catalog-operator",
        }
    }

    /// The file of `manifests/` that holds its Deployment.
    fn deployment_file(self) -> PathBuf {
        manifests_dir().join(format!("{}.yaml", self.name()))
    }
}

/// What a binary's Deployment in `manifests/` says about how it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deployment {
    /// The Deployment's namespace, which is its ServiceAccount's.
    pub namespace: String,
    /// `spec.template.spec.serviceAccountName`.
    pub service_account: String,
    /// The container's `args`.
    pub args: Vec<String>,
}

impl Deployment {
    /// The user the API server sees: `system:serviceaccount:<namespace>:<name>`.
    pub fn user(&self) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace, self.service_account
        )
    }
}

/// The directory `manifests/` of the repository.
pub fn manifests_dir() -> PathBuf {
    repo_root().join("manifests")
}

/// Every document of the files that `dir/kustomization.yaml` lists, in order, with its file;
/// bases (directories, such as `../crds`) are left out.
pub fn kustomization_files(dir: &Path) -> Vec<(PathBuf, Value)> {
    let file = dir.join("kustomization.yaml");
    let kustomization = crate::yaml_file(&file);
    let resources = kustomization["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{} lists no resources", file.display()));
    let mut out = Vec::new();
    for resource in resources {
        let path = dir.join(resource.as_str().expect("a resource is a path"));
        if path.is_dir() {
            continue;
        }
        out.extend(yaml_documents(&path).into_iter().map(|d| (path.clone(), d)));
    }
    out
}

/// The documents of a YAML file of several documents.
fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let docs: Vec<Option<Value>> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()));
    docs.into_iter().flatten().filter(|d| !d.is_null()).collect()
}

/// The Deployment of `binary` in `manifests/`.
pub fn deployment(binary: Binary) -> Deployment {
    let file = binary.deployment_file();
    let doc = yaml_documents(&file)
        .into_iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == binary.name())
        .unwrap_or_else(|| panic!("{} has no Deployment {}", file.display(), binary.name()));
    let text = |v: &Value, what: &str| {
        v.as_str()
            .unwrap_or_else(|| panic!("the Deployment in {} has no {what}", file.display()))
            .to_owned()
    };
    let pod = &doc["spec"]["template"]["spec"];
    let container = pod["containers"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == binary.name()))
        .unwrap_or_else(|| {
            panic!(
                "the Deployment in {} has no container {}",
                file.display(),
                binary.name()
            )
        });
    let args = container["args"]
        .as_array()
        .map(|args| args.iter().map(|a| text(a, "string args")).collect())
        .unwrap_or_default();
    Deployment {
        namespace: text(&doc["metadata"]["namespace"], "metadata.namespace"),
        service_account: text(&pod["serviceAccountName"], "serviceAccountName"),
        args,
    }
}

/// The kinds of `manifests/` that make up an identity and its permissions.
const RBAC_KINDS: [&str; 5] = [
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
];

/// The RBAC objects of `manifests/`, in the order of its files.
pub fn manifest_rbac() -> Vec<Value> {
    kustomization_files(&manifests_dir())
        .into_iter()
        .map(|(_, doc)| doc)
        .filter(|doc| RBAC_KINDS.iter().any(|k| doc["kind"] == *k))
        .collect()
}

/// The leader-election Role of `binary` and its RoleBinding, from `manifests/`: the Roles that a
/// RoleBinding in the Deployment's namespace grants its ServiceAccount.
fn lease_role(binary: Binary) -> Vec<(Value, Value)> {
    let deployment = deployment(binary);
    let rbac = manifest_rbac();
    let in_namespace = |doc: &Value| doc["metadata"]["namespace"] == deployment.namespace.as_str();
    rbac.iter()
        .filter(|doc| doc["kind"] == "RoleBinding" && in_namespace(doc) && doc["roleRef"]["kind"] == "Role")
        .filter(|binding| {
            binding["subjects"].as_array().is_some_and(|subjects| {
                subjects.iter().any(|s| {
                    s["kind"] == "ServiceAccount"
                        && s["name"] == deployment.service_account.as_str()
                        && s["namespace"] == deployment.namespace.as_str()
                })
            })
        })
        .map(|binding| {
            let role = rbac
                .iter()
                .find(|doc| {
                    doc["kind"] == "Role"
                        && in_namespace(doc)
                        && doc["metadata"]["name"] == binding["roleRef"]["name"]
                })
                .unwrap_or_else(|| {
                    panic!(
                        "manifests/ binds Role {} but does not define it",
                        binding["roleRef"]["name"]
                    )
                });
            (role.clone(), binding.clone())
        })
        .collect()
}

/// The API resource of a kind of `manifests/` that the tests apply.
fn api_resource(doc: &Value) -> ApiResource {
    let api_version = doc["apiVersion"].as_str().expect("an apiVersion");
    let kind = doc["kind"].as_str().expect("a kind");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let plural = match kind {
        "Namespace" => "namespaces",
        "ServiceAccount" => "serviceaccounts",
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "APIService" => "apiservices",
        other => panic!("the tests do not apply {other} objects of manifests/"),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Server-side applies one object of `manifests/` (or a copy of one).
pub async fn apply_manifest_object(client: &Client, doc: &Value) {
    let resource = api_resource(doc);
    let name = doc["metadata"]["name"].as_str().expect("a name").to_owned();
    let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let object: DynamicObject = crate::dynamic(doc.clone(), &format!("{} {name}", resource.kind));
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {} {name} of manifests/: {e}", resource.kind));
}

/// Applies the namespaces of the operators' ServiceAccounts and every RBAC object of
/// `manifests/`, once per test process.
pub async fn apply_manifest_rbac(client: &Client) {
    static APPLIED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    APPLIED
        .get_or_init(|| async {
            let namespaces = [
                deployment(Binary::OlmOperator),
                deployment(Binary::CatalogOperator),
            ]
            .map(|d| d.namespace);
            let namespace_docs = kustomization_files(&manifests_dir())
                .into_iter()
                .map(|(_, doc)| doc)
                .filter(|doc| {
                    doc["kind"] == "Namespace"
                        && namespaces.iter().any(|n| doc["metadata"]["name"] == n.as_str())
                });
            for doc in namespace_docs {
                apply_manifest_object(client, &doc).await;
            }
            for doc in manifest_rbac() {
                apply_manifest_object(client, &doc).await;
            }
        })
        .await;
}

/// Grants `binary`'s leader-election Role of `manifests/` in `namespace` too: the same Role and
/// RoleBinding, copied there. Tests hold their Leases in a namespace of their own, which the
/// test deletes with the copies.
pub async fn grant_lease_role(client: &Client, binary: Binary, namespace: &str) {
    if deployment(binary).namespace == namespace {
        return;
    }
    for (mut role, mut binding) in lease_role(binary) {
        for doc in [&mut role, &mut binding] {
            doc["metadata"]["namespace"] = namespace.into();
            doc["metadata"]["annotations"] =
                json!({"olm-rs.dev/copied-from": "manifests/ (the binary's leader-election Role)"});
        }
        apply_manifest_object(client, &role).await;
        apply_manifest_object(client, &binding).await;
    }
}

/// How long the tests' tokens live: longer than any test process.
const TOKEN_SECONDS: i64 = 24 * 3600;

/// A token of `binary`'s ServiceAccount, from the TokenRequest API.
async fn request_token(client: &Client, binary: Binary) -> String {
    let deployment = deployment(binary);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(TOKEN_SECONDS),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), &deployment.namespace);
    let answer: TokenRequest = accounts
        .create_subresource(
            "token",
            &deployment.service_account,
            &PostParams::default(),
            &request,
        )
        .await
        .unwrap_or_else(|e| panic!("request a token for {}: {e}", deployment.user()));
    answer
        .status
        .and_then(|s| s.token)
        .unwrap_or_else(|| panic!("the TokenRequest for {} returned no token", deployment.user()))
}

/// The kubeconfig of the cluster in `KUBECONFIG` with `token` as the only credentials.
fn kubeconfig_with_token(binary: Binary, token: &str) -> Value {
    let path = std::env::var_os("KUBECONFIG").expect("KUBECONFIG names the cluster under test");
    let admin = Kubeconfig::read_from(&path)
        .unwrap_or_else(|e| panic!("read KUBECONFIG={}: {e}", Path::new(&path).display()));
    let context = admin
        .contexts
        .iter()
        .find(|c| Some(&c.name) == admin.current_context.as_ref())
        .and_then(|c| c.context.as_ref())
        .expect("KUBECONFIG has a current context");
    let cluster = admin
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .expect("KUBECONFIG has the current context's cluster");
    let deployment = deployment(binary);
    let user = deployment.user();
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "cluster", "user": user, "namespace": deployment.namespace}}],
        "current-context": user,
    })
}

/// The kubeconfig files written so far in this test process, one per binary.
static KUBECONFIGS: OnceLock<Mutex<HashMap<Binary, PathBuf>>> = OnceLock::new();

/// A kubeconfig (its path) that gives `binary` exactly what `manifests/` grants its
/// ServiceAccount, and its leader-election Role in `lease_namespace` too (when given). The RBAC is
/// applied and the token requested once per test process.
pub async fn kubeconfig(client: &Client, binary: Binary, lease_namespace: Option<&str>) -> PathBuf {
    apply_manifest_rbac(client).await;
    if let Some(namespace) = lease_namespace {
        grant_lease_role(client, binary, namespace).await;
    }
    let written = KUBECONFIGS.get_or_init(Default::default);
    if let Some(path) = written.lock().unwrap_or_else(|e| e.into_inner()).get(&binary) {
        return path.clone();
    }
    let token = request_token(client, binary).await;
    let dir = std::env::temp_dir().join("olm-rs-e2e-identities");
    std::fs::create_dir_all(&dir).expect("a directory for the operators' kubeconfigs");
    let path = dir.join(format!("{}-{}.kubeconfig", binary.name(), std::process::id()));
    // Written aside and renamed: another test of this process may be reading it.
    let partial = path.with_extension(format!("{}.partial", crate::random_suffix()));
    let text = serde_json::to_string_pretty(&kubeconfig_with_token(binary, &token)).expect("JSON");
    write_private(&partial, &text);
    std::fs::rename(&partial, &path).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    written
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(binary, path.clone());
    path
}

/// Writes `text` to a new file that only this user may read (it holds a token).
fn write_private(path: &Path, text: &str) {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    file.write_all(text.as_bytes())
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// [`kubeconfig`] as a client configuration.
pub async fn config(client: &Client, binary: Binary, lease_namespace: Option<&str>) -> Config {
    let path = kubeconfig(client, binary, lease_namespace).await;
    let kubeconfig = Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("use {}: {e}", path.display()))
}

/// Runs `work` with a client of the cluster in `KUBECONFIG` on a runtime of its own, in a thread
/// of its own, and waits for it: for synchronous callers, also inside another runtime.
fn blocking<T: Send + 'static, F: Future<Output = T> + Send>(
    work: impl FnOnce(Client) -> F + Send + 'static,
) -> T {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(async move { work(crate::client().await).await })
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// [`kubeconfig`], from synchronous code.
pub fn kubeconfig_blocking(binary: Binary, lease_namespace: Option<&str>) -> PathBuf {
    let lease_namespace = lease_namespace.map(str::to_owned);
    blocking(move |client| async move { kubeconfig(&client, binary, lease_namespace.as_deref()).await })
}

/// [`config`], from synchronous code.
pub fn config_blocking(binary: Binary, lease_namespace: Option<&str>) -> Config {
    let lease_namespace = lease_namespace.map(str::to_owned);
    blocking(move |client| async move { config(&client, binary, lease_namespace.as_deref()).await })
}

/// The lines of `log` in which the API server refused `user` a request: its answer names the
/// user (`... is forbidden: User "system:serviceaccount:olm:olm-operator" cannot create
/// resource ...`). Refusals for other users (an install scoped to an OperatorGroup's service
/// account, which impersonates it) and for other reasons (a namespace being deleted) are not
/// the binary's missing permissions, and are left out.
pub fn forbidden_lines(log: &str, user: &str) -> Vec<String> {
    log.lines()
        .filter(|line| line.to_ascii_lowercase().contains("forbidden") && line.contains(user))
        .map(str::to_owned)
        .collect()
}

/// Panics, listing `lines`, when the API server refused `who` anything.
pub fn assert_no_forbidden(who: &str, user: &str, lines: &[String]) {
    assert!(
        lines.is_empty(),
        "the API server refused {who} (as {user}) {} request(s): manifests/ lacks a permission \
         it needs (or it asks for more than it should):\n{}",
        lines.len(),
        lines.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_binary_runs_as_the_service_account_of_its_deployment() {
        let olm = deployment(Binary::OlmOperator);
        assert_eq!(olm.user(), "system:serviceaccount:olm:olm-operator");
        let catalog = deployment(Binary::CatalogOperator);
        assert_eq!(catalog.user(), "system:serviceaccount:olm:catalog-operator");
        assert_eq!(catalog.args.first().map(String::as_str), Some("run"));
    }

    #[test]
    fn the_rbac_of_manifests_binds_each_service_account() {
        let rbac = manifest_rbac();
        for binary in [Binary::OlmOperator, Binary::CatalogOperator] {
            let account = deployment(binary).service_account;
            assert!(
                rbac.iter()
                    .any(|d| d["kind"] == "ServiceAccount" && d["metadata"]["name"] == account.as_str()),
                "manifests/ defines ServiceAccount {account}"
            );
            let leases = lease_role(binary);
            assert!(!leases.is_empty(), "{account} has a leader-election Role");
            assert!(
                leases.iter().all(|(role, _)| role["rules"]
                    .as_array()
                    .is_some_and(|rules| rules.iter().any(|r| r["resources"][0] == "leases"))),
                "{account}'s Role in its namespace grants Leases"
            );
        }
    }

    #[test]
    fn only_the_binarys_own_refusals_count() {
        let user = "system:serviceaccount:olm:olm-operator";
        let log = [
            r#"WARN the API server refused a request (403 forbidden): roles.rbac.authorization.k8s.io is forbidden: User "system:serviceaccount:olm:olm-operator" cannot create resource "roles""#,
            r#"WARN reconcile failed error=cannot apply Deployment: ApiError: deployments.apps is forbidden: User "system:serviceaccount:ns:scoped" cannot create resource"#,
            r#"WARN events "x" is forbidden: unable to create new content in namespace e2e-a because it is being terminated"#,
            "INFO reconciled",
        ]
        .join("\n");
        let lines = forbidden_lines(&log, user);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("cannot create resource \"roles\""));
        let panic = std::panic::catch_unwind(|| assert_no_forbidden("olm-operator", user, &lines));
        assert!(panic.is_err(), "a refusal fails the test");
        assert_no_forbidden("olm-operator", user, &[]);
    }
}
