//! Rollback on a real control plane, driven by `kubectl olm rollback`:
//! catalog-operator runs in-process, scoped to the test's namespace, and
//! serves the demo catalog from a registry on loopback. olm-operator does not
//! run: the test marks each CSV Succeeded itself, as olm-operator would once
//! it is installed.
//!
//! The test changes the cluster-wide CRD `databases.demo.olm-rs.dev` (a
//! stored version its revisions lack) and puts it back before it ends, and
//! before it starts should an earlier run have failed half-way.

mod common;

use std::sync::Arc;

use e2e::{
    inprocess::{Registry, demo_catalog},
    rollbacks::{plans_for, rolled_back},
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams},
};
use olm_api::{
    model::OperatorRevision,
    v1alpha1::{Approval, ClusterServiceVersion, ConditionStatus, InstallPlan, Subscription},
};
use olm_catalog::{Catalog, ChannelEntry, Property, property::PackageRequired};
use olm_registry::server::RegistryIndex;
use olm_testkit::{eventually, objects::subscription_at, wait_for, wait_gone, with_namespace};
use serde_json::json;

use common::*;

const CRD: &str = "databases.demo.olm-rs.dev";

/// Marks CSV `name` Succeeded, as olm-operator does once its install is done.
async fn succeed(csvs: &Api<ClusterServiceVersion>, name: &str) {
    let status = json!({"status": {"phase": "Succeeded", "reason": "InstallSucceeded",
                                   "message": "install strategy completed with no errors"}});
    csvs.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("CSV {name} could not be marked Succeeded: {e}"));
}

/// Runs `kubectl olm <args> -n <ns>`; what it printed, or its error.
async fn olm(client: &Client, ns: &str, args: &[&str]) -> Result<String, String> {
    let mut argv = vec!["kubectl-olm".to_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    argv.extend(["-n".to_owned(), ns.to_owned()]);
    let cli = kubectl_olm::Cli::parse_from_args(argv).expect("valid arguments");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = cli.run(client.clone(), &mut out, &mut err, false).await;
    let out = String::from_utf8(out).expect("utf-8");
    result.map(|()| out).map_err(|e| e.to_string())
}

/// The CRD with a second version `v2`, where new objects are stored.
async fn add_stored_version(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get(CRD).await.expect("the demo CRD is installed");
    let mut versions = serde_json::to_value(&crd.spec.versions).unwrap();
    let mut v2 = versions[0].clone();
    v2["name"] = "v2".into();
    versions[0]["storage"] = false.into();
    versions.as_array_mut().unwrap().push(v2);
    let patch = json!({"spec": {"versions": versions}});
    crds.patch(CRD, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("v2 is added to the demo CRD");
}

/// The schema of the demo CRD's v1 as its bundles have it.
fn bundle_schema() -> serde_json::Value {
    json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}})
}

/// The demo CRD's v1 with schema `schema`.
async fn set_v1_schema(client: &Client, schema: serde_json::Value) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get(CRD).await.expect("the demo CRD is installed");
    let mut versions = serde_json::to_value(&crd.spec.versions).unwrap();
    for version in versions.as_array_mut().unwrap() {
        if version["name"] == "v1" {
            version["schema"] = schema.clone();
        }
    }
    let patch = json!({"spec": {"versions": versions}});
    crds.patch(CRD, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the schema of the demo CRD's v1 is set");
}

/// The demo CRD as its bundles have it: v1 only, and only v1 stored, with
/// the bundles' schema. In three steps, as the API server wants them: v1
/// the storage version again, then only v1 stored, then v2 gone.
async fn restore_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let Some(crd) = crds.get_opt(CRD).await.expect("CRDs can be read") else {
        return;
    };
    let v1 = crd.spec.versions.iter().find(|v| v.name == "v1");
    if v1.is_some_and(|v| serde_json::to_value(&v.schema).ok() != Some(bundle_schema())) {
        set_v1_schema(client, bundle_schema()).await;
    }
    if crd.spec.versions.iter().all(|v| v.name == "v1") {
        return;
    }
    let mut versions = serde_json::to_value(&crd.spec.versions).unwrap();
    for version in versions.as_array_mut().unwrap() {
        version["storage"] = (version["name"] == "v1").into();
    }
    let patch = json!({"spec": {"versions": versions}});
    crds.patch(CRD, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("v1 is the storage version of the demo CRD again");
    let status = json!({"status": {"storedVersions": ["v1"]}});
    crds.patch_status(CRD, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("the stored versions of the demo CRD are put back");
    versions.as_array_mut().unwrap().retain(|v| v["name"] == "v1");
    let patch = json!({"spec": {"versions": versions}});
    crds.patch(CRD, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the demo CRD is put back");
}

/// The demo catalog with demo-db 1.2.0 (replacing 1.1.0) in channel stable.
fn catalog_with_db_1_2() -> Catalog {
    let mut catalog = demo_catalog(false);
    let stable = catalog
        .channels
        .iter_mut()
        .find(|c| c.package == "demo-db" && c.name == "stable")
        .expect("demo-db has a stable channel");
    stable.entries.push(ChannelEntry {
        name: "demo-db.v1.2.0".to_owned(),
        replaces: Some("demo-db.v1.1.0".to_owned()),
        skips: Vec::new(),
        skip_range: None,
    });
    catalog
}

/// Both tests change or depend on the cluster-wide demo CRD: one at a time.
static DEMO_CRD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Installs demo-db 1.1.0, then 1.2.0 once the catalog offers it, each
/// marked Succeeded and recorded as a revision; 1.1.0's CSV is then removed,
/// as olm-operator removes a replaced CSV.
async fn install_then_upgrade(client: &Client, ns: &str, registry: &Registry) {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let revisions: Api<OperatorRevision> = Api::namespaced(client.clone(), ns);
    create(&subs, &subscription("db", ns, "demo-db", Approval::Automatic)).await;
    for (csv, number) in [("demo-db.v1.1.0", 1), ("demo-db.v1.2.0", 2)] {
        if number == 2 {
            registry
                .service
                .replace(Arc::new(RegistryIndex::new(catalog_with_db_1_2())));
        }
        wait_for(
            &subs,
            "db",
            &format!("Subscription db is at {csv}"),
            subscription_at(csv),
        )
        .await;
        succeed(&csvs, csv).await;
        let recorded = wait_for(
            &revisions,
            csv,
            &format!("the revision of {csv} is recorded"),
            |r: Option<&OperatorRevision>| r.is_some(),
        )
        .await
        .expect("a revision");
        assert_eq!(recorded.spec.revision, number);
    }
    // olm-operator removes the CSV a Succeeded one replaces.
    csvs.delete("demo-db.v1.1.0", &Default::default())
        .await
        .expect("the replaced CSV is removed");
    wait_gone(&csvs, "demo-db.v1.1.0").await;
}

#[tokio::test]
async fn kubectl_olm_rollback_returns_to_the_revision_before_and_holds_there() {
    let _crd = DEMO_CRD.lock().await;
    with_namespace("rollback", |client, ns| async move {
        restore_crd(&client).await;
        let (registry, operator) = setup_polling(&client, &ns, false, Some("1s")).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        install_then_upgrade(&client, &ns, &registry).await;
        let listed = olm(&client, &ns, &["revisions", "db"]).await.expect("revisions");
        assert!(
            listed.contains("demo-db.v1.1.0") && listed.contains("demo-db.v1.2.0"),
            "{listed}"
        );

        // The dry run prints the Subscription with the annotation, and writes nothing.
        let yaml = olm(&client, &ns, &["rollback", "db", "--dry-run", "-o", "yaml"])
            .await
            .expect("a dry run");
        assert!(yaml.contains("olm-rs.dev/rollback-to: demo-db.v1.1.0"), "{yaml}");
        let sub = subs.get("db").await.unwrap();
        assert!(
            !sub.annotations().contains_key("olm-rs.dev/rollback-to"),
            "a dry run writes nothing"
        );
        let upgrades = plans_for(&plans, "demo-db.v1.2.0").await;

        // Back to the revision before (1.1.0): 1.2.0's CSV goes, 1.1.0's comes back from the revision.
        let said = olm(&client, &ns, &["rollback", "db"]).await.expect("a rollback");
        assert!(said.contains("revision 1 (demo-db.v1.1.0"), "{said}");
        wait_gone(&csvs, "demo-db.v1.2.0").await;
        wait_for(
            &csvs,
            "demo-db.v1.1.0",
            "the CSV of 1.1.0 is back",
            |c: Option<&ClusterServiceVersion>| c.is_some(),
        )
        .await;
        succeed(&csvs, "demo-db.v1.1.0").await;
        let sub = wait_for(
            &subs,
            "db",
            "Subscription db is rolled back to 1.1.0",
            |s: Option<&Subscription>| {
                subscription_at("demo-db.v1.1.0")(s)
                    && rolled_back(s).is_some_and(|(status, reason, _)| {
                        status == ConditionStatus::True && reason == "RolledBack"
                    })
            },
        )
        .await
        .unwrap();
        let csv = csvs.get("demo-db.v1.1.0").await.unwrap();
        assert_eq!(
            csv.annotations()
                .get("olm-rs.dev/rolled-back-from")
                .map(String::as_str),
            Some("demo-db.v1.2.0")
        );
        let (_, _, message) = rolled_back(Some(&sub)).unwrap();
        assert!(
            message.contains("revision 1 (demo-db.v1.1.0, version 1.1.0)"),
            "{message}"
        );
        // Said on the Subscription, counted, and shown by `status`.
        eventually("Events mark the rollback's start and end", || async {
            let said = events_of(&client, &ns, "db").await;
            said.iter().any(|e| e.starts_with("RollbackStarted: "))
                && said.iter().any(|e| e.starts_with("RolledBack: "))
        })
        .await;
        let metrics = operator.metrics_text();
        assert!(
            metrics.contains("olm_rs_rollbacks_total{cause=\"manual\"} 1"),
            "{metrics}"
        );
        let shown = olm(&client, &ns, &["status"]).await.expect("status");
        let hold = shown.lines().skip_while(|l| !l.starts_with("HELD")).nth(1);
        assert!(
            hold.is_some_and(|l| l.starts_with("db ")
                && l.contains("demo-db.v1.1.0")
                && l.contains("user")
                && l.contains("held")),
            "{shown}"
        );
        assert!(
            shown.contains("REVISION") && shown.contains("demo-db.v1.2.0"),
            "{shown}"
        );

        // Held: a sync of the namespace after the rollback (it resolves another Subscription)
        // makes no plan to upgrade db again, though the catalog still offers 1.2.0.
        create(
            &subs,
            &subscription("probe", &ns, "demo-broken", Approval::Automatic),
        )
        .await;
        wait_for(
            &subs,
            "probe",
            "the namespace is synced again",
            |s: Option<&Subscription>| {
                s.and_then(|s| s.status.as_ref())
                    .is_some_and(|s| s.conditions.is_some())
            },
        )
        .await;
        assert_eq!(
            plans_for(&plans, "demo-db.v1.2.0").await,
            upgrades,
            "no new upgrade plan"
        );
        assert!(csvs.get_opt("demo-db.v1.2.0").await.unwrap().is_none());
        let sub = subs.get("db").await.unwrap();
        assert_eq!(
            sub.status.unwrap().installed_csv.as_deref(),
            Some("demo-db.v1.1.0")
        );

        // Lifting the hold lets it upgrade again.
        olm(&client, &ns, &["rollback", "db", "--lift"])
            .await
            .expect("the hold is lifted");
        wait_for(
            &subs,
            "db",
            "the RolledBack condition goes with the hold",
            |s: Option<&Subscription>| s.is_some() && rolled_back(s).is_none(),
        )
        .await;
        wait_for(
            &subs,
            "db",
            "Subscription db upgrades to 1.2.0 again",
            subscription_at("demo-db.v1.2.0"),
        )
        .await;
        succeed(&csvs, "demo-db.v1.2.0").await;

        // A rollback that would drop a stored CRD version is refused, and 1.2.0 keeps running.
        add_stored_version(&client).await;
        let databases: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &ns,
            &ApiResource::from_gvk(&GroupVersionKind::gvk("demo.olm-rs.dev", "v2", "Database")),
        );
        let database: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "demo.olm-rs.dev/v2", "kind": "Database",
            "metadata": {"name": "stored-in-v2"}, "spec": {"size": 1}}))
        .unwrap();
        // The API server serves a version added to a CRD a moment after the
        // CRD says so: until then, the version's path answers 404.
        create_once_served(&databases, &database, 404, "a Database in v2").await;
        let message = refused_rollback(&client, &ns, &["--to", "1.1.0"], "StoredVersionsDropped").await;
        assert!(message.contains(CRD) && message.contains("v2"), "{message}");
        let shown = olm(&client, &ns, &["revisions", "db"]).await.expect("revisions");
        assert!(shown.contains("StoredVersionsDropped"), "{shown}");

        databases
            .delete("stored-in-v2", &Default::default())
            .await
            .expect("the Database goes");
        restore_crd(&client).await;
        operator.stop().await;
        registry.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_rollback_refused_because_objects_do_not_fit_the_old_schema_names_them() {
    let _crd = DEMO_CRD.lock().await;
    with_namespace("rollback-schema", |client, ns| async move {
        restore_crd(&client).await;
        let (registry, operator) = setup_polling(&client, &ns, false, Some("1s")).await;
        install_then_upgrade(&client, &ns, &registry).await;

        // The CRD as a newer version could leave it: v1's spec a string
        // (the revision of 1.1.0 wants an object), and a Database so.
        set_v1_schema(
            &client,
            json!({"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "string"},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}),
        )
        .await;
        let databases: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &ns,
            &ApiResource::from_gvk(&GroupVersionKind::gvk("demo.olm-rs.dev", "v1", "Database")),
        );
        let database: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "demo.olm-rs.dev/v1", "kind": "Database",
            "metadata": {"name": "spec-as-text"}, "spec": "large"}))
        .unwrap();
        // The API server validates with a CRD's new schema a moment after
        // the CRD says so: until then, the Database is refused.
        create_once_served(&databases, &database, 422, "a Database with a text spec").await;

        let message = refused_rollback(&client, &ns, &["--to", "1.1.0"], "CustomResourcesInvalid").await;
        assert!(
            message.contains(CRD)
                && message.contains("version v1")
                && message.contains(&format!("{ns}/spec-as-text")),
            "{message}"
        );

        databases
            .delete("spec-as-text", &Default::default())
            .await
            .expect("the Database goes");
        restore_crd(&client).await;
        operator.stop().await;
        registry.stop().await;
    })
    .await;
}

/// Creates `object` through `api`, sending it again while the API server
/// answers `code` (for up to the harness's timeout): a change to a CRD takes
/// effect a moment after the CRD says so.
async fn create_once_served(api: &Api<DynamicObject>, object: &DynamicObject, code: u16, what: &str) {
    let deadline = std::time::Instant::now() + olm_testkit::TIMEOUT;
    loop {
        match api.create(&Default::default(), object).await {
            Ok(_) => return,
            Err(kube::Error::Api(status)) if status.code == code && std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(error) => panic!("{what}: {error:?}"),
        }
    }
}

/// Asks `kubectl olm rollback db` (with `args`) for a rollback, waits until it
/// is refused with `reason`, and checks what a refusal leaves: the condition
/// False, 1.2.0 still installed and its CSV not being deleted. Returns the
/// condition's message.
async fn refused_rollback(client: &Client, ns: &str, args: &[&str], reason: &'static str) -> String {
    let mut argv = vec!["rollback", "db"];
    argv.extend_from_slice(args);
    olm(client, ns, &argv).await.expect("a rollback asked for");
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let sub = wait_for(
        &subs,
        "db",
        &format!("the rollback is refused with {reason}"),
        move |s: Option<&Subscription>| rolled_back(s).is_some_and(|(_, found, _)| found == reason),
    )
    .await
    .unwrap();
    let (status, _, message) = rolled_back(Some(&sub)).unwrap();
    assert_eq!(status, ConditionStatus::False);
    assert_eq!(
        sub.status.as_ref().unwrap().installed_csv.as_deref(),
        Some("demo-db.v1.2.0")
    );
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let csv = csvs.get("demo-db.v1.2.0").await.expect("1.2.0 keeps running");
    assert!(csv.metadata.deletion_timestamp.is_none());
    message
}

/// The Events of `ns` about Subscription `name`, as `reason: note`.
async fn events_of(client: &Client, ns: &str, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    events
        .list(&Default::default())
        .await
        .expect("Events can be listed")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| format!("{}: {}", e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn a_rollback_refused_because_of_a_dependent_operator_explains_which_one() {
    let _crd = DEMO_CRD.lock().await;
    with_namespace("rollback-deps", |client, ns| async move {
        restore_crd(&client).await;
        let (registry, operator) = setup_polling(&client, &ns, false, Some("1s")).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        install_then_upgrade(&client, &ns, &registry).await;

        // demo-app 0.2.0, made here to need demo-db 1.2.0 or later, is installed beside it.
        let mut catalog = catalog_with_db_1_2();
        for bundle in catalog.bundles.iter_mut().filter(|b| b.name == "demo-app.v0.2.0") {
            bundle
                .properties
                .retain(|p| !matches!(p, Property::PackageRequired(r) if r.package_name == "demo-db"));
            bundle.properties.push(Property::PackageRequired(PackageRequired {
                package_name: "demo-db".to_owned(),
                version_range: ">=1.2.0".to_owned(),
            }));
        }
        registry.service.replace(Arc::new(RegistryIndex::new(catalog)));
        create(&subs, &subscription("app", &ns, "demo-app", Approval::Automatic)).await;
        wait_for(
            &subs,
            "app",
            "Subscription app is at demo-app.v0.2.0",
            subscription_at("demo-app.v0.2.0"),
        )
        .await;
        succeed(&csvs, "demo-app.v0.2.0").await;

        // Rolling demo-db back to 1.1.0 would leave demo-app without what it needs: refused.
        let message = refused_rollback(&client, &ns, &[], "RollbackBreaksDependents").await;
        assert!(
            message.contains("installed operator demo-app.v0.2.0")
                && message.contains("requires package demo-db in range >=1.2.0"),
            "{message}"
        );
        assert!(
            csvs.get_opt("demo-db.v1.1.0").await.unwrap().is_none(),
            "1.1.0 is not installed again"
        );
        eventually("an Event says the rollback was refused", || async {
            events_of(&client, &ns, "db")
                .await
                .iter()
                .any(|e| e.starts_with("RollbackRefused: ") && e.contains("demo-app.v0.2.0"))
        })
        .await;

        operator.stop().await;
        registry.stop().await;
    })
    .await;
}
