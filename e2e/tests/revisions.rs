//! Revisions of installed operators on a real control plane: catalog-operator
//! runs in-process, scoped to the test's namespace, and serves the demo
//! catalog from a registry on loopback. olm-operator does not run: the test
//! marks each CSV Succeeded itself, as olm-operator would once it is installed.

mod common;

use std::sync::Arc;

use e2e::inprocess::demo_catalog;
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use olm_api::{
    model::OperatorRevision,
    v1alpha1::{Approval, ClusterServiceVersion, Subscription},
};
use olm_catalog::ChannelEntry;
use olm_registry::server::RegistryIndex;
use olm_testkit::{objects::subscription_at, wait_for, with_namespace};
use serde_json::json;

use common::*;

/// Marks CSV `name` Succeeded, as olm-operator does once its install is done.
async fn succeed(csvs: &Api<ClusterServiceVersion>, name: &str) {
    let status = json!({"status": {"phase": "Succeeded", "reason": "InstallSucceeded",
                                   "message": "install strategy completed with no errors"}});
    csvs.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("CSV {name} could not be marked Succeeded: {e}"));
}

/// The names of the revisions listed in the namespace, by number.
async fn listed(revisions: &Api<OperatorRevision>) -> Vec<(i64, String)> {
    let mut all: Vec<(i64, String)> = revisions
        .list(&ListParams::default())
        .await
        .expect("OperatorRevisions can be listed")
        .items
        .iter()
        .map(|r| (r.spec.revision, r.name_any()))
        .collect();
    all.sort();
    all
}

#[tokio::test]
async fn each_succeeded_csv_is_kept_as_a_revision_within_the_history_limit() {
    with_namespace("revisions", |client, ns| async move {
        let (registry, operator) = setup_polling(&client, &ns, false, Some("1s")).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        let revisions: Api<OperatorRevision> = Api::namespaced(client.clone(), &ns);
        create(&subs, &subscription("db", &ns, "demo-db", Approval::Automatic)).await;
        wait_for(
            &subs,
            "db",
            "Subscription db is at 1.1.0",
            subscription_at("demo-db.v1.1.0"),
        )
        .await;
        assert!(
            listed(&revisions).await.is_empty(),
            "no revision before the CSV succeeds"
        );

        // 1.1.0 succeeds: its bundle is kept, the CSV and its CRD.
        succeed(&csvs, "demo-db.v1.1.0").await;
        let first = wait_for(
            &revisions,
            "demo-db.v1.1.0",
            "the revision of 1.1.0 is recorded",
            |r: Option<&OperatorRevision>| r.is_some(),
        )
        .await
        .expect("a revision");
        assert_eq!(first.spec.revision, 1);
        assert_eq!(first.spec.package, "demo-db");
        assert_eq!(first.spec.version.as_deref(), Some("1.1.0"));
        assert!(first.spec.omitted.is_empty(), "{:?}", first.spec.omitted);
        let kinds: Vec<(&str, &str)> = first
            .spec
            .objects
            .iter()
            .map(|o| (o.key.kind.as_str(), o.key.name.as_str()))
            .collect();
        assert!(
            kinds.contains(&("ClusterServiceVersion", "demo-db.v1.1.0")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&("CustomResourceDefinition", "databases.demo.olm-rs.dev")),
            "{kinds:?}"
        );
        let csv = first
            .spec
            .objects
            .iter()
            .find(|o| o.key.kind == "ClusterServiceVersion")
            .unwrap();
        assert_eq!(
            csv.manifest.as_ref().and_then(|m| m.pointer("/spec/version")),
            Some(&json!("1.1.0")),
            "the CSV is kept whole, readable"
        );
        assert_eq!(first.owner_references()[0].name, "db");

        // The catalog gets 1.2.0; once it succeeds, it is revision 2, and 1.1.0 stays.
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
        registry.service.replace(Arc::new(RegistryIndex::new(catalog)));
        wait_for(
            &subs,
            "db",
            "Subscription db upgrades to 1.2.0",
            subscription_at("demo-db.v1.2.0"),
        )
        .await;
        succeed(&csvs, "demo-db.v1.2.0").await;
        wait_for(
            &revisions,
            "demo-db.v1.2.0",
            "the revision of 1.2.0 is recorded",
            |r: Option<&OperatorRevision>| r.is_some(),
        )
        .await;
        assert_eq!(
            listed(&revisions).await,
            [(1, "demo-db.v1.1.0".to_owned()), (2, "demo-db.v1.2.0".to_owned())]
        );

        // A history limit of 1 keeps only the current revision.
        let limit = json!({"metadata": {"annotations": {"olm-rs.dev/revision-history-limit": "1"}}});
        subs.patch("db", &PatchParams::default(), &Patch::Merge(&limit))
            .await
            .unwrap();
        wait_for(
            &revisions,
            "demo-db.v1.1.0",
            "the revision of 1.1.0 is removed",
            |r: Option<&OperatorRevision>| r.is_none(),
        )
        .await;
        assert_eq!(listed(&revisions).await, [(2, "demo-db.v1.2.0".to_owned())]);

        operator.stop().await;
        registry.stop().await;
    })
    .await;
}
