//! The generated CRDs are served like OLM's: they install, and the API server accepts the objects
//! OLM users write (and real CSVs from the corpus) while its schema rejects malformed ones.

use std::path::{Path, PathBuf};

use kube::{
    Client, ResourceExt,
    api::{DynamicObject, Patch, PatchParams, PostParams},
    discovery::{Discovery, Scope},
};
use olm_testkit::{
    FIELD_MANAGER, OlmKind, client, corpus_dir, dynamic, install_crds, olm, with_namespace, yaml_file,
};
use serde_json::{Value, json};

const OLM_KINDS: [OlmKind; 5] = [
    olm::CSV,
    olm::SUBSCRIPTION,
    olm::CATALOG_SOURCE,
    olm::INSTALL_PLAN,
    olm::OPERATOR_GROUP,
];

/// The real CSV applied in full: a current operator with owned CRDs, a Deployment, RBAC and
/// every install mode declared.
const CORPUS_CSV: &str =
    "bundles/rabbitmq-cluster-operator/2.3.0/manifests/rabbitmq.clusterserviceversion.yaml";

#[tokio::test]
async fn crds_install_and_serve_olm_kinds() {
    let client = client().await;
    let crds = install_crds(&client).await;
    assert!(crds.len() >= OLM_KINDS.len(), "crds/ holds at least OLM's kinds");

    let discovery = Discovery::new(client.clone())
        .filter(&["operators.coreos.com"])
        .run()
        .await
        .expect("discover operators.coreos.com");
    for kind in OLM_KINDS {
        let gvk = kube::api::GroupVersionKind::gvk(kind.group, kind.version, kind.kind);
        let (resource, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("the API server does not serve {gvk:?}"));
        assert_eq!(resource.plural, kind.plural, "plural of {}", kind.kind);
        assert_eq!(caps.scope, Scope::Namespaced, "{} is namespaced", kind.kind);
        assert!(
            caps.subresources.iter().any(|(sub, _)| sub.plural == "status"),
            "{} has a status subresource",
            kind.kind
        );
    }
}

/// Applies `object` with strict field validation, so that a field the schema does not know fails
/// the request instead of being pruned, and checks that everything sent comes back.
async fn apply_strict(client: &Client, ns: &str, kind: OlmKind, object: Value) -> DynamicObject {
    let name = object["metadata"]["name"]
        .as_str()
        .expect("the object has a name")
        .to_string();
    let sent = object.clone();
    let object = dynamic(object, &format!("{} {name}", kind.kind));
    let applied = kind
        .api(client, ns)
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).validation_strict(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("the API server refused {} {name}: {e}", kind.kind));
    let returned = serde_json::to_value(&applied).expect("serialize the applied object");
    assert_contains(
        &sent["spec"],
        &returned["spec"],
        &format!("{} {name} .spec", kind.kind),
    );
    applied
}

/// Every value in `sent` is in `returned` (which may hold more, e.g. defaults).
fn assert_contains(sent: &Value, returned: &Value, path: &str) {
    match (sent, returned) {
        (Value::Object(sent), Value::Object(returned)) => {
            for (key, value) in sent {
                let path = format!("{path}.{key}");
                let back = returned.get(key).unwrap_or_else(|| panic!("{path} was dropped"));
                assert_contains(value, back, &path);
            }
        }
        (Value::Array(sent), Value::Array(returned)) => {
            assert_eq!(sent.len(), returned.len(), "{path} changed length");
            for (i, (s, r)) in sent.iter().zip(returned).enumerate() {
                assert_contains(s, r, &format!("{path}[{i}]"));
            }
        }
        (sent, returned) => assert_eq!(sent, returned, "{path} changed"),
    }
}

#[tokio::test]
async fn olm_objects_are_accepted() {
    with_namespace("accept", |client, ns| async move {
        install_crds(&client).await;

        let catalog = json!({
            "apiVersion": olm::CATALOG_SOURCE.api_version(),
            "kind": "CatalogSource",
            "metadata": { "name": "operatorhubio-catalog" },
            "spec": {
                "sourceType": "grpc",
                "image": "quay.io/operatorhubio/catalog:latest",
                "displayName": "Community Operators",
                "publisher": "OperatorHub.io",
                "grpcPodConfig": { "securityContextConfig": "restricted" },
                "updateStrategy": { "registryPoll": { "interval": "60m" } }
            }
        });
        apply_strict(&client, &ns, olm::CATALOG_SOURCE, catalog).await;

        let group = json!({
            "apiVersion": olm::OPERATOR_GROUP.api_version(),
            "kind": "OperatorGroup",
            "metadata": { "name": "operators" },
            "spec": { "targetNamespaces": [ns] }
        });
        apply_strict(&client, &ns, olm::OPERATOR_GROUP, group).await;

        let subscription = json!({
            "apiVersion": olm::SUBSCRIPTION.api_version(),
            "kind": "Subscription",
            "metadata": { "name": "rabbitmq-cluster-operator" },
            "spec": {
                "channel": "stable",
                "name": "rabbitmq-cluster-operator",
                "source": "operatorhubio-catalog",
                "sourceNamespace": ns,
                "installPlanApproval": "Manual",
                "startingCSV": "rabbitmq-cluster-operator.v2.3.0",
                "config": {
                    "env": [{ "name": "LOG_LEVEL", "value": "debug" }],
                    "nodeSelector": { "kubernetes.io/os": "linux" },
                    "resources": { "limits": { "memory": "256Mi" } }
                }
            }
        });
        apply_strict(&client, &ns, olm::SUBSCRIPTION, subscription).await;

        let plan = json!({
            "apiVersion": olm::INSTALL_PLAN.api_version(),
            "kind": "InstallPlan",
            "metadata": { "name": "install-abcde" },
            "spec": {
                "approval": "Manual",
                "approved": false,
                "clusterServiceVersionNames": ["rabbitmq-cluster-operator.v2.3.0"],
                "generation": 1
            }
        });
        apply_strict(&client, &ns, olm::INSTALL_PLAN, plan).await;

        let path = corpus_dir().join(CORPUS_CSV);
        let mut csv = yaml_file(&path);
        csv["metadata"]["namespace"] = json!(ns);
        let applied = apply_strict(&client, &ns, olm::CSV, csv).await;
        assert_eq!(applied.name_any(), "rabbitmq-cluster-operator.v2.3.0");
    })
    .await;
}

/// Posts `object` and expects the schema to reject it (422 Invalid) naming `field`.
async fn assert_rejected(client: &Client, ns: &str, kind: OlmKind, object: Value, field: &str) {
    let name = object["metadata"]["name"]
        .as_str()
        .expect("the object has a name")
        .to_string();
    let object = dynamic(object, &format!("{} {name}", kind.kind));
    match kind.api(client, ns).create(&PostParams::default(), &object).await {
        Ok(_) => panic!("the API server accepted the malformed {} {name}", kind.kind),
        Err(kube::Error::Api(status)) => {
            assert_eq!(
                status.code, 422,
                "{} {name} is rejected as Invalid: {status:?}",
                kind.kind
            );
            assert!(
                status.message.contains(field),
                "the rejection of {} {name} names {field}: {}",
                kind.kind,
                status.message
            );
        }
        Err(e) => panic!("posting {} {name} failed without an API answer: {e}", kind.kind),
    }
}

#[tokio::test]
async fn malformed_objects_are_rejected_by_the_schema() {
    with_namespace("reject", |client, ns| async move {
        install_crds(&client).await;
        let sub = |name: &str, spec: Value| {
            json!({
                "apiVersion": olm::SUBSCRIPTION.api_version(),
                "kind": "Subscription",
                "metadata": { "name": name },
                "spec": spec
            })
        };
        let approval = sub(
            "bad-approval",
            json!({ "name": "etcd", "source": "c", "sourceNamespace": "olm", "installPlanApproval": "Sometimes" }),
        );
        assert_rejected(&client, &ns, olm::SUBSCRIPTION, approval, "spec.installPlanApproval").await;
        let no_source = sub("no-source", json!({ "name": "etcd", "sourceNamespace": "olm" }));
        assert_rejected(&client, &ns, olm::SUBSCRIPTION, no_source, "spec.source").await;

        let group = json!({
            "apiVersion": olm::OPERATOR_GROUP.api_version(),
            "kind": "OperatorGroup",
            "metadata": { "name": "bad-targets" },
            "spec": { "targetNamespaces": ns }
        });
        assert_rejected(&client, &ns, olm::OPERATOR_GROUP, group, "spec.targetNamespaces").await;

        let catalog = json!({
            "apiVersion": olm::CATALOG_SOURCE.api_version(),
            "kind": "CatalogSource",
            "metadata": { "name": "bad-priority" },
            "spec": { "sourceType": "grpc", "image": "example.com/catalog:1", "priority": "high" }
        });
        assert_rejected(&client, &ns, olm::CATALOG_SOURCE, catalog, "spec.priority").await;
    })
    .await;
}

fn corpus_csvs(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("read a corpus directory entry").path();
        if path.is_dir() {
            corpus_csvs(&path, found);
        } else if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            n.contains("clusterserviceversion") && (n.ends_with(".yaml") || n.ends_with(".yml"))
        }) {
            found.push(path);
        }
    }
}

/// Every CSV in the corpus is accepted (dry run) the way OLM creates it from a bundle: a plain
/// create with default field validation, so fields unknown to the schema (real CSVs have typos
/// such as `miniKubeVersion`) are pruned rather than refused. Server-side apply would refuse them.
#[tokio::test]
async fn every_corpus_csv_is_accepted() {
    with_namespace("corpus", |client, ns| async move {
        install_crds(&client).await;
        let corpus = corpus_dir();
        let mut files = Vec::new();
        for sub in ["bundles", "packagemanifests"] {
            if corpus.join(sub).is_dir() {
                corpus_csvs(&corpus.join(sub), &mut files);
            }
        }
        files.sort();
        assert!(!files.is_empty(), "no CSVs found in {}", corpus.display());

        let api = olm::CSV.api(&client, &ns);
        let params = PostParams {
            dry_run: true,
            field_manager: Some(FIELD_MANAGER.to_string()),
        };
        let mut refused = Vec::new();
        for path in &files {
            let shown = path.strip_prefix(&corpus).unwrap_or(path).display().to_string();
            let mut csv = yaml_file(path);
            csv["metadata"]["namespace"] = json!(ns);
            let csv = dynamic(csv, &shown);
            if let Err(e) = api.create(&params, &csv).await {
                refused.push(format!("{shown}: {e}"));
            }
        }
        assert!(
            refused.is_empty(),
            "the API server refused {} of {} corpus CSVs:\n{}",
            refused.len(),
            files.len(),
            refused.join("\n")
        );
    })
    .await;
}
