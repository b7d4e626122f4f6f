//! Relations of operators in pods on a real control plane: `pg` provides
//! `db`; `shop` asks for its `db` data as environment and `web` for it as a
//! mount (the CSV annotation `olm-rs.dev/relation-data`). Once related, each
//! gets a ConfigMap of pg's data and its Deployment the data as asked: with
//! env, a change of pg's data changes the pod template's hash (a roll); with
//! a mount, the template stays as it is. The API server lets shop's
//! ServiceAccount read its ConfigMap and write its own application bag, and
//! refuses it pg's bag.
//!
//! Run with `cargo test -p olm-operator --test pod_relations -- --ignored`.

mod common;

use k8s_openapi::api::{
    apps::v1::Deployment,
    authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
    core::v1::ConfigMap,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::{
    model::{ApplicationEndpoint, Databag, Relation, RelationSpec},
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};

use common::{csv::*, *};

const HASH: &str = "olm-rs.dev/relation-data-hash";

/// A CSV of package `package` (Deployment `package`, ServiceAccount
/// `<package>-operator`) declaring `endpoints` and asking for `relation_data`.
fn pod_csv(package: &str, ns: &str, endpoints: &str, relation_data: Option<&str>) -> ClusterServiceVersion {
    let csv = demo_csv(
        &format!("{package}.v1.0.0"),
        "1.0.0",
        None,
        &[package],
        OWN_NAMESPACE,
        None,
    );
    let text = serde_json::to_string(&csv)
        .expect("JSON")
        .replace("demo-operator", &format!("{package}-operator"));
    let mut csv: ClusterServiceVersion = serde_json::from_str(&text).expect("a CSV");
    csv.metadata.labels = Some([(format!("operators.coreos.com/{package}.{ns}"), String::new())].into());
    let mut annotations = vec![("olm-rs.dev/endpoints".to_owned(), endpoints.to_owned())];
    if let Some(asked) = relation_data {
        annotations.push(("olm-rs.dev/relation-data".to_owned(), asked.to_owned()));
    }
    csv.metadata.annotations = Some(annotations.into_iter().collect());
    csv
}

async fn install(client: &Client, ns: &str, package: &str, endpoints: &str, relation_data: Option<&str>) {
    create_csv(client, ns, pod_csv(package, ns, endpoints, relation_data)).await;
    let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), ns);
    wait_for_csv(&api, &format!("{package}.v1.0.0"), CsvPhase::Succeeded).await;
}

async fn relate(client: &Client, ns: &str, name: &str, a: &str, b: &str) {
    let side = |application: &str| ApplicationEndpoint {
        application: application.to_owned(),
        endpoint: None,
        namespace: None,
    };
    let relation = Relation::new(
        name,
        RelationSpec {
            endpoints: vec![side(a), side(b)],
        },
    );
    let api = Api::<Relation>::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &relation)
        .await
        .unwrap_or_else(|e| panic!("create Relation {name}: {e}"));
    wait_for(
        &api,
        name,
        &format!("Relation {name} is Ready"),
        |r: Option<&Relation>| {
            r.and_then(|r| r.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        },
    )
    .await;
}

/// Writes `host` into pg's application bag of `relation`, as pg would.
async fn set_host(client: &Client, ns: &str, relation: &str, host: &str) {
    let bags = Api::<Databag>::namespaced(client.clone(), ns);
    let bag = format!("{relation}.pg");
    wait_for(
        &bags,
        &bag,
        &format!("Databag {bag} exists"),
        |b: Option<&Databag>| b.is_some(),
    )
    .await;
    bags.patch_status(
        &bag,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"data": {"host": host}}})),
    )
    .await
    .unwrap_or_else(|e| panic!("write Databag {bag}: {e}"));
}

/// Waits until ConfigMap `name` holds `host`.
async fn wait_data(client: &Client, ns: &str, name: &str, host: &str) -> ConfigMap {
    let api = Api::<ConfigMap>::namespaced(client.clone(), ns);
    let what = format!("ConfigMap {name} holds host={host}");
    wait_for(&api, name, &what, |cm: Option<&ConfigMap>| {
        cm.and_then(|cm| cm.data.as_ref())
            .and_then(|d| d.get("host"))
            .is_some_and(|h| h == host)
    })
    .await
    .expect("the ConfigMap")
}

fn template_hash(deployment: &Deployment) -> Option<String> {
    let meta = deployment.spec.as_ref()?.template.metadata.as_ref()?;
    meta.annotations.as_ref()?.get(HASH).cloned()
}

/// Waits until Deployment `name` satisfies `check`.
async fn wait_deployment(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    check: impl Fn(&Deployment) -> bool + Send + 'static,
) -> Deployment {
    let api = Api::<Deployment>::namespaced(client.clone(), ns);
    wait_for(&api, name, what, move |d: Option<&Deployment>| {
        d.is_some_and(&check)
    })
    .await
    .expect("the Deployment")
}

/// Whether ServiceAccount `account` of `ns` may `verb` `resource` `name`, as the API server decides.
async fn may(
    client: &Client,
    ns: &str,
    account: &str,
    verb: &str,
    resource: (&str, &str, Option<&str>),
    name: &str,
) -> bool {
    let (group, resource, subresource) = resource;
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{ns}:{account}")),
            groups: Some(vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{ns}"),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.to_owned()),
                verb: Some(verb.to_owned()),
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource: subresource.map(str::to_owned),
                name: Some(name.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("a SubjectAccessReview")
        .status
        .is_some_and(|s| s.allowed)
}

/// A client that acts as ServiceAccount `account` of `ns`.
async fn as_account(ns: &str, account: &str) -> Client {
    let mut config = olm_testkit::config().await;
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:{account}"));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{ns}"),
        "system:authenticated".to_owned(),
    ]);
    Client::try_from(config).expect("an impersonating client")
}

const PG: &str = "provides: {db: {interface: postgresql}}";
const NEEDS_DB: &str = "requires: {db: {interface: postgresql}}";

#[tokio::test]
#[ignore = "needs a cluster"]
async fn related_data_reaches_a_deployment_as_env_or_as_a_mount() {
    with_namespace("pod-relations", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        install(&client, &ns, "pg", PG, None).await;
        install(&client, &ns, "shop", NEEDS_DB, Some(r#"{"db": {"env": true}}"#)).await;
        install(
            &client,
            &ns,
            "web",
            NEEDS_DB,
            Some(r#"{"db": {"mount": "/var/run/olm-rs/relations/db"}}"#),
        )
        .await;
        relate(&client, &ns, "shop-pg", "shop", "pg").await;
        relate(&client, &ns, "web-pg", "web", "pg").await;

        // env: envFrom the ConfigMap, and the data's hash on the template.
        set_host(&client, &ns, "shop-pg", "pg-1.local").await;
        wait_data(&client, &ns, "shop-pg.shop.remote", "pg-1.local").await;
        let shop = wait_deployment(
            &client,
            &ns,
            "shop",
            "shop gets envFrom shop-pg.shop.remote",
            |d| {
                let pod = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
                let from = pod.and_then(|p| p.containers[0].env_from.as_ref());
                from.is_some_and(|f| {
                    f.iter().any(|s| {
                        s.config_map_ref
                            .as_ref()
                            .is_some_and(|c| c.name == "shop-pg.shop.remote")
                    })
                }) && template_hash(d).is_some()
            },
        )
        .await;
        let first = template_hash(&shop).expect("a hash");

        // mount: the ConfigMap as a volume at <mount>/<relation>, no hash.
        set_host(&client, &ns, "web-pg", "pg-1.local").await;
        wait_data(&client, &ns, "web-pg.web.remote", "pg-1.local").await;
        let web = wait_deployment(&client, &ns, "web", "web mounts web-pg.web.remote", |d| {
            let pod = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
            let volume = pod.and_then(|p| p.volumes.as_ref()).and_then(|v| {
                v.iter().find(|v| {
                    v.config_map
                        .as_ref()
                        .is_some_and(|c| c.name == "web-pg.web.remote")
                })
            });
            let mounted =
                volume.zip(pod).is_some_and(|(volume, pod)| {
                    pod.containers[0].volume_mounts.iter().flatten().any(|m| {
                        m.name == volume.name && m.mount_path == "/var/run/olm-rs/relations/db/web-pg"
                    })
                });
            mounted && template_hash(d).is_none()
        })
        .await;

        // A change of pg's data: shop's template hash changes (its pods roll).
        set_host(&client, &ns, "web-pg", "pg-2.local").await;
        wait_data(&client, &ns, "web-pg.web.remote", "pg-2.local").await;
        set_host(&client, &ns, "shop-pg", "pg-2.local").await;
        wait_data(&client, &ns, "shop-pg.shop.remote", "pg-2.local").await;
        let expected = first.clone();
        wait_deployment(&client, &ns, "shop", "shop's template hash changes", move |d| {
            template_hash(d).is_some_and(|h| h != expected)
        })
        .await;
        // Every CSV of the namespace was reconciled after web's data changed
        // (shop's roll came after it): web's template is as it was.
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let after = deployments.get("web").await.expect("web's Deployment");
        assert_eq!(
            after.spec.as_ref().map(|s| &s.template),
            web.spec.as_ref().map(|s| &s.template),
            "a mounted change must not change web's pod template"
        );
        assert_eq!(after.metadata.generation, web.metadata.generation);

        // A deleted data ConfigMap is made again at once, not at a later resync.
        let admin_configmaps = Api::<ConfigMap>::namespaced(client.clone(), &ns);
        admin_configmaps
            .delete("web-pg.web.remote", &Default::default())
            .await
            .expect("delete web's ConfigMap");
        olm_testkit::wait_for_within(
            std::time::Duration::from_secs(20),
            &admin_configmaps,
            "web-pg.web.remote",
            "web's ConfigMap is back with pg's data",
            |cm: Option<&ConfigMap>| {
                cm.and_then(|cm| cm.data.as_ref()?.get("host"))
                    .is_some_and(|h| h == "pg-2.local")
            },
        )
        .await;

        // shop's ServiceAccount reads its ConfigMap and writes its own bag, not pg's.
        let account = "shop-operator";
        let core = ("", "configmaps", None);
        let bag_status = ("model.olm-rs.dev", "databags", Some("status"));
        assert!(may(&client, &ns, account, "get", core, "shop-pg.shop.remote").await);
        assert!(may(&client, &ns, account, "patch", bag_status, "shop-pg.shop").await);
        assert!(!may(&client, &ns, account, "patch", bag_status, "shop-pg.pg").await);
        let shop_client = as_account(&ns, account).await;
        let configmaps = Api::<ConfigMap>::namespaced(shop_client.clone(), &ns);
        let data = configmaps
            .get("shop-pg.shop.remote")
            .await
            .expect("shop reads its data");
        assert_eq!(data.data.unwrap()["host"], "pg-2.local");
        let bags = Api::<Databag>::namespaced(shop_client, &ns);
        let patch = Patch::Merge(serde_json::json!({"status": {"data": {"user": "shop"}}}));
        bags.patch_status("shop-pg.shop", &PatchParams::default(), &patch)
            .await
            .expect("shop writes its own bag");
        let refused = bags
            .patch_status("shop-pg.pg", &PatchParams::default(), &patch)
            .await
            .expect_err("shop may not write pg's bag");
        assert!(
            matches!(&refused, kube::Error::Api(status) if status.code == 403),
            "{refused}"
        );

        // Removing the relation removes shop's ConfigMap (owned by it).
        let relations = Api::<Relation>::namespaced(client.clone(), &ns);
        relations
            .delete("shop-pg", &Default::default())
            .await
            .expect("delete shop-pg");
        let configmaps = Api::<ConfigMap>::namespaced(client.clone(), &ns);
        wait_gone(&configmaps, "shop-pg.shop.remote").await;
    })
    .await;
}
