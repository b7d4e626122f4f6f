//! ConfigMap catalogs read as OLM reads them, on a real control plane: a bundle
//! that another skips is a member of the channel (a `startingCSV` can name it);
//! CRD documents are matched to CSVs by group, version and kind, so one CRD that
//! changes between bundles comes as two documents of the same name; and a bad
//! bundle is reported on the CatalogSource and left out while the rest serves.

mod common;

use k8s_openapi::{
    api::core::v1::ConfigMap, apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::Api;
use olm_api::v1alpha1::{
    Approval, CatalogSource, CatalogSourceReason, ClusterServiceVersion, SourceType, Subscription,
};
use olm_testkit::{
    install_crds,
    objects::{catalog_is_ready, subscription_at},
    wait_for, with_namespace,
};
use serde_json::json;

use common::*;

#[tokio::test]
async fn a_configmap_catalog_is_read_as_olm_reads_it() {
    with_namespace("catcmolm", |client, ns| async move {
        install_crds(&client).await;
        let operator = e2e::inprocess::Operator::start(&client, &ns).await;
        // A CRD group of this test's own: CRDs are cluster-wide.
        let group = format!("{ns}.e2e.olm-rs.dev");
        let crd = format!("things.{group}");

        // cmfoo.v1.2.0 replaces cmfoo.v1.1.0 and skips cmfoo.v1.1.1; the CRD
        // gains v2 in 1.2.0, so it comes twice: [v1] and [v1, v2].
        let v110 = csv_manifest("cmfoo.v1.1.0", "1.1.0", None, Some((&crd, "v1", "Thing")));
        let v111 = csv_manifest("cmfoo.v1.1.1", "1.1.1", None, Some((&crd, "v1", "Thing")));
        let mut v120 = csv_manifest(
            "cmfoo.v1.2.0",
            "1.2.0",
            Some("cmfoo.v1.1.0"),
            Some((&crd, "v2", "Thing")),
        );
        v120["spec"]["skips"] = json!(["cmfoo.v1.1.1"]);
        // A bundle of another package whose CSV has no version.
        let mut bad = csv_manifest("cmbad.v1.0.0", "1.0.0", None, None);
        bad["spec"].as_object_mut().unwrap().remove("version");
        let packages = json!([
            {"packageName": "cmfoo", "defaultChannel": "stable",
             "channels": [{"name": "stable", "currentCSV": "cmfoo.v1.2.0"}]},
            {"packageName": "cmbad", "defaultChannel": "stable",
             "channels": [{"name": "stable", "currentCSV": "cmbad.v1.0.0"}]},
        ]);
        let crds = json!([crd_manifest(&group, &["v1"]), crd_manifest(&group, &["v1", "v2"])]);
        let config_map: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm-catalog"},
            "data": {
                "customResourceDefinitions": crds.to_string(),
                "clusterServiceVersions": json!([v120, v111, v110, bad]).to_string(),
                "packages": packages.to_string(),
            },
        }))
        .unwrap();
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        create(&config_maps, &config_map).await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        let mut source = catalog_source("cm", "");
        source.spec.source_type = SourceType::ConfigMap;
        source.spec.address = None;
        source.spec.config_map = Some("cm-catalog".to_owned());
        create(&sources, &source).await;

        // The bad bundle is named on the CatalogSource, which serves the rest.
        let ready = wait_for(&sources, "cm", "CatalogSource cm is READY", catalog_is_ready)
            .await
            .expect("the catalog serves");
        let status = ready.status.unwrap();
        assert_eq!(status.reason, Some(CatalogSourceReason::ConfigMap));
        let message = status.message.unwrap_or_default();
        assert!(
            message.contains("bundle cmbad.v1.0.0 left out: the CSV has no spec.version"),
            "{message}"
        );
        let conditions = status.conditions.unwrap_or_default();
        let condition = conditions.iter().find(|c| c.type_ == "Ready").expect("Ready");
        assert_eq!(condition.status, "True");
        assert!(
            condition.message.contains("cmbad.v1.0.0"),
            "{}",
            condition.message
        );

        // The skipped bundle can be a startingCSV; the upgrade to the head follows.
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let mut sub = subscription_from("foo", &ns, "cmfoo", Approval::Automatic, Some("cmfoo.v1.1.1"));
        sub.spec.catalog_source = "cm".to_owned();
        create(&subs, &sub).await;
        wait_for(
            &subs,
            "foo",
            "Subscription foo upgrades from cmfoo.v1.1.1 to the head",
            subscription_at("cmfoo.v1.2.0"),
        )
        .await
        .expect("cmfoo installs and upgrades");
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        csvs.get("cmfoo.v1.1.1")
            .await
            .expect("the starting CSV was installed");
        let head = csvs.get("cmfoo.v1.2.0").await.unwrap();
        assert_eq!(head.spec.replaces.as_deref(), Some("cmfoo.v1.1.1"));

        // Each bundle got the CRD document of the version it owns: the CRD now
        // serves v2, the version only the second document has.
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let installed = crds.get(&crd).await.unwrap();
        let versions: Vec<&str> = installed.spec.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(versions, ["v1", "v2"]);
        crds.delete(&crd, &Default::default()).await.ok();

        operator.stop().await;
    })
    .await;
}
