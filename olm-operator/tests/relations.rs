//! Relations with olm-operator on a real control plane: two small operators
//! that declare endpoints succeed in one namespace; a Relation that fits
//! becomes Ready, and those that cannot be made say why.
//!
//! Run with `cargo test -p olm-operator --test relations -- --ignored`.

mod common;

use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use olm_api::{
    model::{ApplicationEndpoint, Relation, RelationSpec},
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};

use common::{csv::*, *};

/// A small CSV of package `package` (its label) that declares `endpoints`,
/// with a Deployment and service account of its own.
fn endpoint_csv(package: &str, ns: &str, endpoints: &str) -> ClusterServiceVersion {
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
    csv.metadata.annotations = Some([("olm-rs.dev/endpoints".to_owned(), endpoints.to_owned())].into());
    csv
}

fn side(text: &str) -> ApplicationEndpoint {
    let (application, endpoint) = match text.split_once(':') {
        Some((a, e)) => (a.to_owned(), Some(e.to_owned())),
        None => (text.to_owned(), None),
    };
    ApplicationEndpoint {
        application,
        endpoint,
        namespace: None,
    }
}

async fn relate(api: &Api<Relation>, name: &str, a: &str, b: &str) {
    let relation = Relation::new(
        name,
        RelationSpec {
            endpoints: vec![side(a), side(b)],
        },
    );
    api.create(&PostParams::default(), &relation)
        .await
        .unwrap_or_else(|e| panic!("create Relation {name}: {e}"));
}

/// Waits until Relation `name` reports `Ready` with `status` and `reason`.
async fn wait_ready(api: &Api<Relation>, name: &str, status: &str, reason: &str) -> Relation {
    let what = format!("Relation {name} is Ready={status} ({reason})");
    wait_for(api, name, &what, |relation: Option<&Relation>| {
        relation
            .and_then(|r| r.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == status && c.reason == reason)
    })
    .await
    .expect("the Relation")
}

fn message(relation: &Relation) -> String {
    relation.status.as_ref().unwrap().conditions.as_ref().unwrap()[0]
        .message
        .clone()
}

async fn install(client: &Client, ns: &str, package: &str, endpoints: &str) {
    create_csv(client, ns, endpoint_csv(package, ns, endpoints)).await;
    let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), ns);
    wait_for_csv(&api, &format!("{package}.v1.0.0"), CsvPhase::Succeeded).await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn relations_are_made_or_refused_with_the_reason() {
    with_namespace("relations", |client, ns| async move {
        operator_group(&client, &ns, own_namespace_group(&ns)).await;
        install(
            &client,
            &ns,
            "shop",
            "requires: {db: {interface: postgresql}, cache: {interface: redis}}",
        )
        .await;
        install(
            &client,
            &ns,
            "pg",
            "provides: {db: {interface: postgresql, limit: 1}}",
        )
        .await;
        install(&client, &ns, "audit", "requires: {sink: {interface: postgresql}}").await;
        let api = Api::<Relation>::namespaced(client.clone(), &ns);

        relate(&api, "shop-pg", "shop", "pg:db").await;
        let made = wait_ready(&api, "shop-pg", "True", "Related").await;
        let endpoints = &made.status.as_ref().unwrap().endpoints;
        assert_eq!(endpoints.len(), 2, "{endpoints:?}");
        assert_eq!(
            (endpoints[0].endpoint.as_str(), endpoints[0].csv.as_str()),
            ("db", "shop.v1.0.0")
        );

        // pg:db takes one relation, and shop-pg, the older, has it. Creation
        // times count in seconds (ties go by name): let one pass.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        relate(&api, "audit-pg", "audit", "pg").await;
        let over = wait_ready(&api, "audit-pg", "False", "OverLimit").await;
        assert!(message(&over).contains("used by shop-pg"), "{}", message(&over));

        relate(&api, "unknown", "shop:nope", "pg").await;
        wait_ready(&api, "unknown", "False", "UnknownEndpoint").await;
        relate(&api, "mismatch", "shop:cache", "pg:db").await;
        wait_ready(&api, "mismatch", "False", "InterfaceMismatch").await;
        relate(&api, "ghost", "shop", "ghost").await;
        wait_ready(&api, "ghost", "False", "NotInstalled").await;
        let mut remote = Relation::new(
            "remote",
            RelationSpec {
                endpoints: vec![side("shop"), side("pg")],
            },
        );
        remote.spec.endpoints[1].namespace = Some("elsewhere".into());
        api.create(&PostParams::default(), &remote)
            .await
            .expect("create Relation remote");
        wait_ready(&api, "remote", "False", "NeedsOffer").await;

        // Freeing pg:db lets the next relation have it.
        api.delete("shop-pg", &DeleteParams::default())
            .await
            .expect("delete shop-pg");
        wait_ready(&api, "audit-pg", "True", "Related").await;

        // Removing a side while related: the relation is no longer made.
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        csvs.delete("pg.v1.0.0", &DeleteParams::default())
            .await
            .expect("delete CSV pg");
        let gone = wait_ready(&api, "audit-pg", "False", "NotInstalled").await;
        assert!(gone.status.as_ref().unwrap().endpoints.is_empty());
    })
    .await;
}
