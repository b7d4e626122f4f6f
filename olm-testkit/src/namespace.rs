//! A namespace of its own for each test: created labelled, deleted when the test passes, kept and
//! dumped to stderr when it fails.

use std::{
    collections::{BTreeMap, hash_map::RandomState},
    future::Future,
    hash::{BuildHasher, Hasher},
};

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams},
    discovery::{Discovery, Scope, verbs},
};

use crate::client;

/// Label put on every test namespace, so that leftovers are easy to find and delete
/// (`kubectl delete ns -l e2e.olm-rs.dev/test`). Its value says which test or tool made it.
pub const NAMESPACE_LABEL: &str = "e2e.olm-rs.dev/test";

/// The value of [`NAMESPACE_LABEL`] on a namespace that [`create_namespace`] is not told another.
const EXTRA_NAMESPACE: &str = "extra";

/// A short random suffix for names that must not collide between runs.
pub fn random_suffix() -> String {
    format!("{:06x}", random() & 0xff_ffff)
}

fn random() -> u32 {
    RandomState::new().build_hasher().finish() as u32
}

/// The name of a test's namespace: `e2e-<prefix>-<8 random hex digits>`.
fn test_namespace_name(prefix: &str) -> String {
    format!("e2e-{prefix}-{:08x}", random())
}

/// The labels of a namespace [`create_namespace`] makes: `labels`, and [`NAMESPACE_LABEL`] set
/// to `extra` unless `labels` gives it a value.
fn namespace_labels(labels: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut all = BTreeMap::from([(NAMESPACE_LABEL.to_owned(), EXTRA_NAMESPACE.to_owned())]);
    all.extend(labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    all
}

/// Creates the namespace `name` with `labels`, and [`NAMESPACE_LABEL`] (`extra` unless `labels`
/// sets it) so that what the tests and the bench leave behind can be found; panics with the name
/// on error.
pub async fn create_namespace(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(namespace_labels(labels)),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
}

/// Deletes the namespace `name` in the background; a failure is only reported.
pub async fn delete_namespace(client: &Client, name: &str) {
    if let Err(e) = Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::background())
        .await
    {
        eprintln!("warning: could not delete namespace {name}: {e}");
    }
}

/// Runs `test` with a client and the name of a new namespace, `e2e-<prefix>-<random>`, labelled
/// [`NAMESPACE_LABEL`]`=<prefix>`.
///
/// When the test returns, the namespace is deleted. When it panics, the namespace is kept and its
/// objects are written to stderr, then the panic goes on.
pub async fn with_namespace<F, Fut>(prefix: &str, test: F)
where
    F: FnOnce(Client, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    with_namespace_and_cleanup(prefix, test, |_, _| async {}).await;
}

/// [`with_namespace`], running `cleanup` with the client and the namespace after the test passed
/// and before the namespace is deleted: e.g. to delete objects whose finalizers only an operator
/// that ends with the test process releases.
pub async fn with_namespace_and_cleanup<F, Fut, C, CleanupFut>(prefix: &str, test: F, cleanup: C)
where
    F: FnOnce(Client, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
    C: FnOnce(Client, String) -> CleanupFut,
    CleanupFut: Future<Output = ()>,
{
    let client = client().await;
    let name = test_namespace_name(prefix);
    create_namespace(&client, &name, &[(NAMESPACE_LABEL, prefix)]).await;

    // A task of its own, so that a panic is caught here and the namespace can be dumped.
    let outcome = tokio::spawn(test(client.clone(), name.clone())).await;
    match outcome {
        Ok(()) => {
            cleanup(client.clone(), name.clone()).await;
            delete_namespace(&client, &name).await;
        }
        Err(e) => {
            eprintln!("test failed: keeping namespace {name}; the objects in it:");
            dump_namespace(&client, &name).await;
            match e.try_into_panic() {
                Ok(panic) => {
                    // Said again after the dump, which can push the panic's own report out
                    // of a log's tail.
                    eprintln!("test failed in namespace {name}: {}", panic_message(&*panic));
                    std::panic::resume_unwind(panic)
                }
                Err(e) => panic!("the test in namespace {name} did not finish: {e}"),
            }
        }
    }
}

/// The message a panic was raised with, when it is text.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("(a panic without a message)")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_namespace_is_named_after_its_prefix() {
        let name = test_namespace_name("install");
        let suffix = name.strip_prefix("e2e-install-").expect("the prefix");
        assert_eq!(suffix.len(), 8, "{name}");
        assert!(suffix.chars().all(|c| c.is_ascii_hexdigit()), "{name}");
    }

    #[test]
    fn every_namespace_carries_the_test_label() {
        assert_eq!(namespace_labels(&[])[NAMESPACE_LABEL], "extra");
        let labels = namespace_labels(&[("team", "a"), (NAMESPACE_LABEL, "bench")]);
        assert_eq!(labels[NAMESPACE_LABEL], "bench");
        assert_eq!(labels["team"], "a");
    }
}
