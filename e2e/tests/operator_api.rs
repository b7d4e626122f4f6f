//! OLM's Operator API (`operators.coreos.com/v1`, `operators`), as OLM's own
//! clients use it: a Subscription to demo-db gives an `Operator`
//! `demo-db.<namespace>` whose `status.components` references the install
//! (Subscription, InstallPlan, CSV, CRD, Deployment, ...) with their
//! conditions; deleted by hand it comes back; then the install is removed the
//! way `kubectl operator uninstall --delete-all` does it (its
//! `internal/pkg/action/operator_uninstall.go`): operands listed through the
//! Operator's CSV reference and the CSV's owned CRDs, the Subscription, the
//! operands and the CSV deleted, then every object the Operator references,
//! then the Operator and the OperatorGroup. Nothing labelled for the package
//! remains, and the Operator is gone.

use std::time::Duration;

use e2e::inprocess::DemoStack;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, GroupVersionKind, ListParams},
    discovery::Scope,
};
use olm_api::{
    labels,
    v1::{Operator, OperatorGroup, RichReference},
    v1alpha1::{ClusterServiceVersion, CsvPhase, Subscription},
};
use olm_operator::controllers::operator::components;
use olm_testkit::{
    dynamic, eventually, install_crds,
    objects::{STEP, apply_json, wait_installed},
    wait_for_within, wait_gone, with_namespace,
};
use serde_json::json;

const PACKAGE: &str = "demo-db";

#[tokio::test]
async fn an_operator_lists_its_install_and_uninstalls_through_it() {
    with_namespace("operator-api", |client: Client, ns: String| async move {
        install_crds(&client).await;
        let stack = DemoStack::start(&client, &ns).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        apply_json(
            &subs,
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "my-db", "namespace": ns},
            "spec": {"name": PACKAGE, "channel": "stable", "source": "demo", "sourceNamespace": ns}}),
        )
        .await;
        wait_installed(&client, &ns, &[("demo-db.v1.1.0", "demo-db")], STEP).await;

        let name = labels::operator_name(PACKAGE, &ns);
        let operators: Api<Operator> = Api::all(client.clone());
        let operator = wait_for_components(&operators, &name).await;
        check_status(&operator, &ns);
        let sub = subs.get("my-db").await.expect("the Subscription");
        assert!(
            sub.labels().contains_key(&labels::operator_label(PACKAGE, &ns)),
            "the user's Subscription is adopted: {:?}",
            sub.labels()
        );

        // Deleted by hand while its components remain, it comes back.
        let uid = operator.uid().expect("a UID");
        operators
            .delete(&name, &DeleteParams::default())
            .await
            .expect("delete the Operator");
        let back = wait_for_within(
            STEP,
            &operators,
            &name,
            "the Operator is created again",
            |o: Option<&Operator>| o.is_some_and(|o| o.uid().as_deref() != Some(uid.as_str())),
        )
        .await
        .expect("the Operator");
        assert!(back.uid() != Some(uid), "a new Operator");
        wait_for_components(&operators, &name).await;

        // One operand to list and delete.
        let databases = database_api(&client, &ns);
        databases
            .create(
                &Default::default(),
                &dynamic(
                    json!({"apiVersion": "demo.olm-rs.dev/v1", "kind": "Database",
                    "metadata": {"name": "orders", "namespace": ns}, "spec": {"size": 1}}),
                    "Database orders",
                ),
            )
            .await
            .expect("create an operand");

        uninstall(&client, &ns).await;

        // Nothing labelled for the package remains, and the Operator is gone.
        let key = labels::operator_label(PACKAGE, &ns);
        let left = components::list(&client, &key)
            .await
            .expect("list what carries the label");
        assert!(left.is_empty(), "objects labelled {key} remain: {left:?}");
        wait_gone(&operators, &name).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            operators
                .get_opt(&name)
                .await
                .expect("read the Operator")
                .is_none(),
            "the Operator does not come back once its components are gone"
        );
        stack.stop().await;
    })
    .await;
}

/// Waits until the Operator `name` references at least the Subscription,
/// InstallPlan, CSV, CRD and Deployment of the install; returns it.
async fn wait_for_components(operators: &Api<Operator>, name: &str) -> Operator {
    wait_for_within(
        STEP,
        operators,
        name,
        &format!("Operator {name} lists the install"),
        |o: Option<&Operator>| {
            let kinds: Vec<String> = refs(o).into_iter().filter_map(|r| r.kind).collect();
            [
                "Subscription",
                "InstallPlan",
                "ClusterServiceVersion",
                "CustomResourceDefinition",
                "Deployment",
            ]
            .iter()
            .all(|kind| kinds.iter().any(|k| k == kind))
        },
    )
    .await
    .expect("the Operator")
}

fn refs(operator: Option<&Operator>) -> Vec<RichReference> {
    operator
        .and_then(|o| o.status.as_ref()?.components.as_ref()?.refs.clone())
        .unwrap_or_default()
}

/// The selector, the references and the conditions copied into them.
fn check_status(operator: &Operator, ns: &str) {
    let components = operator
        .status
        .as_ref()
        .and_then(|s| s.components.as_ref())
        .expect("components");
    assert_eq!(
        serde_json::to_value(&components.label_selector).expect("a selector"),
        json!({"matchExpressions": [{"key": labels::operator_label(PACKAGE, ns), "operator": "Exists"}]})
    );
    let all = refs(Some(operator));
    let find = |kind: &str, name: &str| {
        all.iter()
            .find(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no reference to {kind} {name} in {all:?}"))
    };
    let deployment = find("Deployment", "demo-db");
    assert_eq!(
        (deployment.api_version.as_deref(), deployment.namespace.as_deref()),
        (Some("apps/v1"), Some(ns))
    );
    let available = deployment
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Available")
        .expect("the Deployment's conditions are copied");
    assert_eq!(available.status, "True");
    let crd = find("CustomResourceDefinition", "databases.demo.olm-rs.dev");
    assert_eq!(crd.namespace, None, "a CRD is cluster-scoped");
    assert!(
        crd.conditions.iter().flatten().any(|c| c.type_ == "Established"),
        "the CRD's conditions are copied"
    );
    find("ClusterServiceVersion", "demo-db.v1.1.0");
    find("Subscription", "my-db");
    assert!(
        all.iter().any(|r| r.kind.as_deref() == Some("ServiceAccount")),
        "the CSV's RBAC is listed too"
    );
}

fn database_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let resource = kube::core::ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("demo.olm-rs.dev", "v1", "Database"),
        "databases",
    );
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// `kubectl operator uninstall demo-db --delete-all`, step by step.
async fn uninstall(client: &Client, ns: &str) {
    // The Subscription of the package, and the CSV it installed.
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let sub = subs
        .list(&ListParams::default())
        .await
        .expect("list Subscriptions")
        .items
        .into_iter()
        .find(|s| s.spec.package == PACKAGE)
        .expect("the package's Subscription");
    let status = sub.status.clone().unwrap_or_default();
    let csv_name = status
        .installed_csv
        .or(status.current_csv)
        .expect("the Subscription names its CSV");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let csv = csvs.get(&csv_name).await.expect("the CSV");

    let operands = list_operands(client, ns).await;
    let names: Vec<String> = operands.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, ["orders"], "the operand is listed through the Operator");

    // Subscription, operands, CSV; each waited for.
    delete_and_wait(client, &typed_reference(&sub), "the Subscription").await;
    for operand in &operands {
        delete_and_wait(client, &reference_of(operand), "an operand").await;
    }
    delete_and_wait(client, &typed_reference(&csv), "the CSV").await;

    // The Operator and everything it references; then it is waited on until
    // its references are gone, and deleted.
    let operators: Api<Operator> = Api::all(client.clone());
    let name = labels::operator_name(PACKAGE, ns);
    if let Some(operator) = operators.get_opt(&name).await.expect("read the Operator") {
        for reference in refs(Some(&operator)) {
            delete_and_wait(client, &reference, "a component").await;
        }
        eventually("the Operator references nothing, or is gone", || {
            let operators = operators.clone();
            let name = name.clone();
            async move {
                let operator = operators.get_opt(&name).await.expect("read the Operator");
                refs(operator.as_ref()).is_empty()
            }
        })
        .await;
        let _ = operators.delete(&name, &DeleteParams::default()).await;
    }

    // The OperatorGroup, now that no Subscription is left in the namespace.
    let left = subs
        .list(&ListParams::default())
        .await
        .expect("list Subscriptions");
    assert!(left.items.is_empty(), "no Subscription is left");
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), ns);
    for group in groups
        .list(&ListParams::default())
        .await
        .expect("list OperatorGroups")
    {
        delete_and_wait(client, &typed_reference(&group), "the OperatorGroup").await;
    }
}

/// `kubectl operator list-operands`: the CSV the Operator references, its
/// owned CRDs, and their objects in the namespaces of the one OperatorGroup.
async fn list_operands(client: &Client, ns: &str) -> Vec<DynamicObject> {
    let operators: Api<Operator> = Api::all(client.clone());
    let operator = operators
        .get(&labels::operator_name(PACKAGE, ns))
        .await
        .expect("the Operator");
    let csv_ref = refs(Some(&operator))
        .into_iter()
        .find(|r| r.kind.as_deref() == Some("ClusterServiceVersion"))
        .expect("the Operator references its CSV");
    let csvs: Api<ClusterServiceVersion> =
        Api::namespaced(client.clone(), csv_ref.namespace.as_deref().expect("a namespace"));
    let csv = csvs
        .get(csv_ref.name.as_deref().expect("a name"))
        .await
        .expect("the CSV");
    assert_eq!(
        csv.status.as_ref().and_then(|s| s.phase),
        Some(CsvPhase::Succeeded)
    );
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), ns);
    let groups = groups
        .list(&ListParams::default())
        .await
        .expect("list OperatorGroups");
    assert_eq!(groups.items.len(), 1, "one OperatorGroup in the namespace");
    let targets = groups.items[0]
        .status
        .as_ref()
        .and_then(|s| s.namespaces.clone())
        .unwrap_or_default();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut operands = Vec::new();
    let owned = csv
        .spec
        .custom_resource_definitions
        .as_ref()
        .and_then(|c| c.owned.clone());
    for description in owned.into_iter().flatten() {
        let crd = crds.get(&description.name).await.expect("an owned CRD");
        let resource = kube::core::ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&crd.spec.group, &description.version, &crd.spec.names.kind),
            &crd.spec.names.plural,
        );
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let listed = api.list(&ListParams::default()).await.expect("list operands");
        operands.extend(listed.items.into_iter().filter(|object| {
            let namespace = object.namespace().unwrap_or_default();
            targets.is_empty()
                || namespace.is_empty()
                || targets.iter().any(|t| t.is_empty() || *t == namespace)
        }));
    }
    operands
}

fn typed_reference<K: kube::Resource<DynamicType = ()>>(object: &K) -> RichReference {
    RichReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: object.meta().name.clone(),
        namespace: object.meta().namespace.clone(),
        ..RichReference::default()
    }
}

fn reference_of(object: &DynamicObject) -> RichReference {
    let types = object.types.clone().unwrap_or_default();
    RichReference {
        api_version: Some(types.api_version),
        kind: Some(types.kind),
        name: Some(object.name_any()),
        namespace: object.namespace(),
        ..RichReference::default()
    }
}

/// Deletes the object `reference` names (gone already is fine) and waits until it is gone.
async fn delete_and_wait(client: &Client, reference: &RichReference, what: &str) {
    let api_version = reference.api_version.clone().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version.as_str()));
    let kind = reference.kind.clone().unwrap_or_default();
    let name = reference.name.clone().unwrap_or_default();
    let (resource, caps) =
        kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, &kind))
            .await
            .unwrap_or_else(|e| panic!("discover {kind} for {what}: {e}"));
    let api: Api<DynamicObject> = match (&reference.namespace, caps.scope) {
        (Some(namespace), Scope::Namespaced) => Api::namespaced_with(client.clone(), namespace, &resource),
        _ => Api::all_with(client.clone(), &resource),
    };
    match api.delete(&name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_not_found() => {}
        Err(e) => panic!("delete {kind} {name} ({what}): {e}"),
    }
    eventually(&format!("{kind} {name} ({what}) is gone"), || {
        let api = api.clone();
        let name = name.clone();
        async move { api.get_opt(&name).await.expect("read it").is_none() }
    })
    .await;
}
