//! Catalog images served from memory, pulled from a real registry
//! (hack/registry.sh): a CatalogSource with `image:` becomes READY with no
//! registry Pod, installs kube-green and rabbitmq-messaging-topology-operator
//! (with its dependency rabbitmq-cluster-operator) from bundle images, picks up
//! a new digest behind its tag within its poll interval, and an image larger
//! than the pull limit falls back to a registry Pod with a condition that says why.

use std::{collections::BTreeSet, path::Path, time::Duration};

use e2e::images::{image_catalog, push_catalog_image, test_registry};
use k8s_openapi::{
    api::core::v1::Pod, apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, Client, api::ListParams};
use olm_api::v1alpha1::{
    Approval, CatalogSource, ClusterServiceVersion, CsvPhase, InstallPlan, Subscription,
};
use olm_catalog::{Catalog, Property, render::render_package_dir};
use olm_oci::{PullOptions, Puller};
use olm_registry::server::RegistryIndex;
use olm_testkit::{
    corpus_dir, install_crds,
    objects::{apply_json, catalog_is_ready, csv_in, global_operator_group, subscribe, subscription_at},
    process::{FAST_LEASE, Process},
    wait_for_within, with_namespace,
};
use serde_json::json;

/// Time an install from bundle images may take on a shared machine.
const INSTALL: Duration = Duration::from_secs(240);

/// The image catalog of the corpus packages `packages`, its bundle images pushed
/// under `<registry>/bundles`.
async fn corpus_catalog(puller: &Puller, registry: &str, packages: &[&str]) -> Catalog {
    let secrets = test_registry().secrets;
    let mut catalog = Catalog::default();
    for package in packages {
        let dir = corpus_dir().join("bundles").join(package);
        catalog.extend(
            image_catalog(puller, &dir, &format!("{registry}/bundles"), &secrets)
                .await
                .unwrap_or_else(|e| panic!("the bundle images of {package} are pushed: {e}")),
        );
    }
    catalog
}

/// A CatalogSource `name` for `image`, polled every `poll` if given.
async fn image_catalog_source(client: &Client, ns: &str, name: &str, image: &str, poll: Option<&str>) {
    let sources: Api<CatalogSource> = Api::namespaced(client.clone(), ns);
    let mut spec = json!({"sourceType": "grpc", "image": image, "displayName": name});
    if let Some(interval) = poll {
        spec["updateStrategy"] = json!({"registryPoll": {"interval": interval}});
    }
    apply_json(
        &sources,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
               "metadata": {"name": name}, "spec": spec}),
    )
    .await;
}

/// The `ServedFromMemory` condition of a CatalogSource: status, reason, message.
fn served_from_memory(source: &CatalogSource) -> Option<(String, String, String)> {
    source
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "ServedFromMemory")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The registry Pods of catalog `name`.
async fn registry_pods(client: &Client, ns: &str, name: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.list(&ListParams::default().labels(&format!("olm.catalogSource={name}")))
        .await
        .expect("list Pods")
        .items
}

/// The (kind, name) of every object a bundle directory of `package` holds for `csv`.
fn directory_objects(package: &Path, csv: &str) -> BTreeSet<(String, String)> {
    let catalog = render_package_dir(package).expect("the package renders").catalog;
    let bundle = catalog
        .bundles
        .iter()
        .find(|b| b.name == csv)
        .unwrap_or_else(|| panic!("{csv} is among the directories of {}", package.display()));
    bundle
        .properties
        .iter()
        .filter_map(|p| match p {
            Property::BundleObject(o) => {
                let v = o.decode().ok()?;
                Some((
                    v["kind"].as_str()?.to_owned(),
                    v["metadata"]["name"].as_str()?.to_owned(),
                ))
            }
            _ => None,
        })
        .collect()
}

/// The (kind, name) of every object the InstallPlans of the namespace created
/// for `csv`'s bundle.
async fn planned_objects(client: &Client, ns: &str, csv: &str) -> BTreeSet<(String, String)> {
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    plans
        .list(&ListParams::default())
        .await
        .expect("list InstallPlans")
        .items
        .into_iter()
        .flat_map(|p| p.status.and_then(|s| s.plan).unwrap_or_default())
        .filter(|s| s.resolving == csv && s.resource.kind != "Subscription")
        .map(|s| (s.resource.kind.clone(), s.resource.name.clone()))
        .collect()
}

#[tokio::test]
async fn a_catalog_image_is_served_from_memory_and_installs_operators_from_bundle_images() {
    with_namespace("catimg", |client, ns| async move {
        install_crds(&client).await;
        let registry = test_registry();
        let puller = Puller::new(PullOptions::default());
        let packages = [
            "kube-green",
            "rabbitmq-cluster-operator",
            "rabbitmq-messaging-topology-operator",
        ];
        let catalog = corpus_catalog(&puller, &registry.address, &packages).await;
        let image = format!("{}/catalogs/{ns}:v1", registry.address);
        let digest = push_catalog_image(&puller, &catalog, &image, &registry.secrets)
            .await
            .expect("the catalog image is pushed");

        let operator = Process::catalog_operator("catimg", "catalog-operator", &ns, Some(&ns), &ns);
        let olm = Process::olm_operator("catimg-olm", "olm-operator", &ns);
        for replica in [&operator, &olm] {
            assert!(replica.wait_ready(INSTALL).await, "{} is ready", replica.label);
        }
        global_operator_group(&Api::namespaced(client.clone(), &ns), "global").await;

        let created = std::time::Instant::now();
        image_catalog_source(&client, &ns, "community", &image, None).await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        let source = wait_for_within(
            Duration::from_secs(60),
            &sources,
            "community",
            "the image CatalogSource is READY",
            catalog_is_ready,
        )
        .await
        .expect("the CatalogSource");
        println!(
            "catalog image: READY {:?} after the CatalogSource was created",
            created.elapsed()
        );
        let (status, reason, message) = served_from_memory(&source).expect("condition ServedFromMemory");
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("True", "FileBasedCatalog"),
            "{message}"
        );
        assert!(
            message.contains(&digest),
            "the message names the digest: {message}"
        );
        assert!(
            registry_pods(&client, &ns, "community").await.is_empty(),
            "no registry Pod for a catalog served from memory"
        );

        let index = RegistryIndex::new(catalog.clone());
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let wanted = [
            ("kube-green", "alpha"),
            ("rabbitmq-messaging-topology-operator", "stable"),
        ];
        for (package, channel) in wanted {
            subscribe(
                &subs,
                package,
                ("community", &ns),
                package,
                channel,
                Approval::Automatic,
            )
            .await;
        }
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        for (package, channel) in wanted {
            let head = index
                .get_bundle_for_channel(package, channel)
                .expect("the package has a channel head");
            wait_for_within(
                INSTALL,
                &subs,
                package,
                &format!("Subscription {package} installs {}", head.csv_name),
                subscription_at(&head.csv_name),
            )
            .await;
        }
        // The dependency came with it; every CSV succeeds, with the objects its
        // bundle directory holds.
        let installed: Vec<String> = csvs
            .list(&ListParams::default())
            .await
            .expect("list CSVs")
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        assert!(
            installed
                .iter()
                .any(|n| n.starts_with("rabbitmq-cluster-operator")),
            "the dependency rabbitmq-cluster-operator is installed: {installed:?}"
        );
        for csv in &installed {
            wait_for_within(
                INSTALL,
                &csvs,
                csv,
                &format!("CSV {csv} is Succeeded"),
                csv_in(CsvPhase::Succeeded),
            )
            .await;
            let package = packages
                .iter()
                .filter(|p| csv.starts_with(*p))
                .max_by_key(|p| p.len())
                .expect("the CSV belongs to a package");
            let from_dir = directory_objects(&corpus_dir().join("bundles").join(package), csv);
            assert_eq!(
                planned_objects(&client, &ns, csv).await,
                from_dir,
                "the plan for {csv} creates what its bundle directory holds"
            );
        }
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in [
            "sleepinfos.kube-green.com",
            "rabbitmqclusters.rabbitmq.com",
            "queues.rabbitmq.com",
        ] {
            crds.get(crd)
                .await
                .unwrap_or_else(|e| panic!("CRD {crd} is created: {e}"));
        }
        assert!(
            registry_pods(&client, &ns, "community").await.is_empty(),
            "still no registry Pod"
        );
        drop(olm);
        drop(operator);
    })
    .await;
}

#[tokio::test]
async fn a_new_digest_behind_the_tag_is_picked_up_within_the_poll_interval_and_upgrades() {
    with_namespace("catpoll", |client, ns| async move {
        install_crds(&client).await;
        let registry = test_registry();
        let puller = Puller::new(PullOptions::default());
        let full = corpus_catalog(&puller, &registry.address, &["kube-green"]).await;
        let head = RegistryIndex::new(full.clone())
            .get_bundle_for_channel("kube-green", "alpha")
            .expect("kube-green has a head in alpha");
        // The first catalog ends one version before the head.
        let mut older = full.clone();
        older.bundles.retain(|b| b.name != head.csv_name);
        for channel in &mut older.channels {
            channel.entries.retain(|e| e.name != head.csv_name);
        }
        let previous = RegistryIndex::new(older.clone())
            .get_bundle_for_channel("kube-green", "alpha")
            .expect("kube-green has an older head");
        let image = format!("{}/catalogs/{ns}:latest", registry.address);
        push_catalog_image(&puller, &older, &image, &registry.secrets)
            .await
            .expect("the first catalog image is pushed");

        let _operator = Process::catalog_operator("catpoll", "catalog-operator", &ns, Some(&ns), &ns);
        global_operator_group(&Api::namespaced(client.clone(), &ns), "global").await;
        image_catalog_source(&client, &ns, "community", &image, Some("5s")).await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        wait_for_within(
            Duration::from_secs(60),
            &sources,
            "community",
            "the image CatalogSource is READY",
            catalog_is_ready,
        )
        .await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        subscribe(
            &subs,
            "kube-green",
            ("community", &ns),
            "kube-green",
            "alpha",
            Approval::Automatic,
        )
        .await;
        wait_for_within(
            INSTALL,
            &subs,
            "kube-green",
            &format!("Subscription kube-green installs {}", previous.csv_name),
            subscription_at(&previous.csv_name),
        )
        .await;

        // The same tag now points at the full catalog.
        let pushed = std::time::Instant::now();
        push_catalog_image(&puller, &full, &image, &registry.secrets)
            .await
            .expect("the new catalog image is pushed");
        wait_for_within(
            Duration::from_secs(30),
            &subs,
            "kube-green",
            &format!("Subscription kube-green upgrades to {}", head.csv_name),
            |s: Option<&Subscription>| {
                s.and_then(|s| s.status.as_ref()?.current_csv.clone()) == Some(head.csv_name.clone())
            },
        )
        .await;
        println!(
            "catalog image: a new digest behind the tag reached the Subscription in {:?} (poll 5s)",
            pushed.elapsed()
        );
        let source = sources.get("community").await.expect("the CatalogSource");
        assert!(
            source.status.and_then(|s| s.latest_image_registry_poll).is_some(),
            "latestImageRegistryPoll is set"
        );
        assert!(registry_pods(&client, &ns, "community").await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn an_image_larger_than_the_limit_is_served_by_a_registry_pod_with_a_condition_that_says_so() {
    with_namespace("catbig", |client, ns| async move {
        install_crds(&client).await;
        let registry = test_registry();
        let puller = Puller::new(PullOptions::default());
        let catalog = corpus_catalog(&puller, &registry.address, &["kube-green"]).await;
        let image = format!("{}/catalogs/{ns}:v1", registry.address);
        push_catalog_image(&puller, &catalog, &image, &registry.secrets)
            .await
            .expect("the catalog image is pushed");
        let mut args = FAST_LEASE.to_vec();
        args.extend([
            "--global-catalog-namespace",
            &ns,
            "--watch-namespace",
            &ns,
            "--catalog-health-interval",
            "1s",
            "--image-max-bytes",
            "1000",
        ]);
        let _operator = Process::catalog_operator_with("catbig", "catalog-operator", &ns, &args);
        image_catalog_source(&client, &ns, "community", &image, None).await;
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        let source = wait_for_within(
            Duration::from_secs(60),
            &sources,
            "community",
            "the CatalogSource says why it is not served from memory",
            |s: Option<&CatalogSource>| s.and_then(served_from_memory).is_some(),
        )
        .await
        .expect("the CatalogSource");
        let (status, reason, message) = served_from_memory(&source).expect("the condition");
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "ImageTooLarge"),
            "{message}"
        );
        assert!(
            message.contains(&image) && message.contains("1000"),
            "the message names the image and the limit: {message}"
        );
        println!("catalog image: too large: {message}");
        wait_for_within(
            Duration::from_secs(30),
            &sources,
            "community",
            "the registry Service is reported",
            |s: Option<&CatalogSource>| {
                s.and_then(|s| s.status.as_ref()?.registry_service.as_ref())
                    .is_some()
            },
        )
        .await;
        assert_eq!(
            registry_pods(&client, &ns, "community").await.len(),
            1,
            "a registry Pod serves the image instead"
        );
    })
    .await;
}
