//! Bundles whose manifests are only in their bundle images, pulled from a real
//! registry (hack/registry.sh): a catalog in the community pipeline's shape
//! (`olm.csv.metadata` only, bundle images by digest) installs kube-green, with
//! the same objects as when its bundle directories are read from disk.

use std::collections::BTreeSet;

use e2e::bundle_catalogs::{
    CATALOG_SOURCE, create_pull_secret, head_bundle, name_pull_secrets, serve_catalog, true_condition,
    unpack_operator_group, wait_condition,
};
use e2e::images::{TestRegistry, image_catalog, test_registry};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use olm_api::v1alpha1::{
    Approval, ClusterServiceVersion, InstallPlan, InstallPlanPhase, StepStatus, Subscription,
    SubscriptionConditionType,
};
use olm_catalog::{Property, render::render_package_dir};
use olm_oci::{PullOptions, Puller};
use olm_testkit::{
    corpus_dir, eventually, install_crds,
    objects::{install_plan_of, plan_in, subscribe, subscription_at},
    wait_for, wait_for_within, wait_gone, with_namespace,
};
use serde_json::json;

#[tokio::test]
async fn a_catalog_of_bundle_images_installs_kube_green_from_the_registry() {
    with_namespace("bundleimg", |client, ns| async move {
        install_crds(&client).await;
        let TestRegistry {
            address: registry,
            secrets,
            ..
        } = test_registry();
        let puller = Puller::new(PullOptions::default());
        let package = corpus_dir().join("bundles/kube-green");
        let started = std::time::Instant::now();
        let catalog = image_catalog(&puller, &package, &format!("{registry}/bundles"), &secrets)
            .await
            .expect("the kube-green bundle images are pushed");
        println!(
            "bundle images: pushed {} kube-green bundles in {:?}",
            catalog.bundles.len(),
            started.elapsed()
        );
        for bundle in &catalog.bundles {
            assert!(
                bundle.image.contains("@sha256:"),
                "{} is referenced by digest",
                bundle.name
            );
            assert!(
                !bundle
                    .properties
                    .iter()
                    .any(|p| matches!(p, Property::BundleObject(_))),
                "{} carries no manifests in the catalog",
                bundle.name
            );
        }
        let _served = serve_catalog(&client, &ns, "bundleimg", &catalog).await;

        let head = head_bundle(&catalog, "kube-green", "alpha").clone();
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let asked = std::time::Instant::now();
        subscribe_to_kube_green(&subs, &ns).await;
        let sub = wait_for_within(
            std::time::Duration::from_secs(180),
            &subs,
            "kube-green",
            &format!("Subscription kube-green installs {}", head.name),
            subscription_at(&head.name),
        )
        .await
        .expect("the Subscription exists");
        println!(
            "bundle images: Subscription to installed plan in {:?} (cold)",
            asked.elapsed()
        );
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns);
        let plan = wait_for(
            &plans,
            &install_plan_of(&sub).expect("an InstallPlan"),
            "the InstallPlan is Complete",
            plan_in(InstallPlanPhase::Complete),
        )
        .await
        .expect("the InstallPlan exists");
        let steps = plan.status.and_then(|s| s.plan).unwrap_or_default();
        assert!(
            steps
                .iter()
                .all(|s| matches!(s.status, StepStatus::Created | StepStatus::Present)),
            "every step applied"
        );

        // The same objects as the bundle directory gives.
        let from_dirs = render_package_dir(&package).expect("kube-green renders").catalog;
        let dir_bundle = from_dirs
            .bundles
            .iter()
            .find(|b| b.name == head.name)
            .expect("the head is among the directories");
        let dir_objects: BTreeSet<(String, String)> = dir_bundle
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
            .collect();
        let plan_objects: BTreeSet<(String, String)> = steps
            .iter()
            .filter(|s| s.resource.kind != "Subscription")
            .map(|s| (s.resource.kind.clone(), s.resource.name.clone()))
            .collect();
        assert_eq!(
            plan_objects, dir_objects,
            "the plan creates what the bundle directory holds"
        );

        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = crds
            .get("sleepinfos.kube-green.com")
            .await
            .expect("the CRD is created");
        assert_eq!(crd.spec.names.kind, "SleepInfo");
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        let csv = csvs.get(&head.name).await.expect("the CSV is created");
        assert!(
            csv.spec
                .install
                .deployment()
                .is_some_and(|d| !d.deployments.is_empty()),
            "the CSV has its install strategy from the image"
        );

        // Subscribed again once the first install is gone: the bundle now comes from
        // the catalog-operator's cache (by digest), not from the registry.
        subs.delete("kube-green", &DeleteParams::default())
            .await
            .expect("delete the Subscription");
        csvs.delete(&head.name, &DeleteParams::default())
            .await
            .expect("delete the CSV");
        wait_gone(&subs, "kube-green").await;
        wait_gone(&csvs, &head.name).await;
        let asked = std::time::Instant::now();
        subscribe_to_kube_green(&subs, &ns).await;
        wait_for_within(
            std::time::Duration::from_secs(180),
            &subs,
            "kube-green",
            &format!("Subscription kube-green installs {} again", head.name),
            subscription_at(&head.name),
        )
        .await;
        println!(
            "bundle images: Subscription to installed plan in {:?} (cached)",
            asked.elapsed()
        );
    })
    .await;
}

/// Subscribes to kube-green (channel alpha, automatic approval) from the
/// CatalogSource `images` in `namespace`.
async fn subscribe_to_kube_green(subs: &Api<Subscription>, namespace: &str) {
    subscribe(
        subs,
        "kube-green",
        (CATALOG_SOURCE, namespace),
        "kube-green",
        "alpha",
        Approval::Automatic,
    )
    .await;
}

/// Subscribes to kube-green (channel alpha) from the CatalogSource `images` in
/// `namespace`, waits until the Subscription says `BundleUnpackFailed`, and
/// returns that condition's message. `what` names the wait in a timeout.
async fn subscribe_until_unpack_failed(subs: &Api<Subscription>, namespace: &str, what: &str) -> String {
    subscribe_to_kube_green(subs, namespace).await;
    wait_condition(
        subs,
        "kube-green",
        SubscriptionConditionType::BundleUnpackFailed,
        what,
        |_| true,
    )
    .await
}

/// Where the pull secret of a private bundle image is named.
#[derive(Clone, Copy, Debug)]
enum Grant {
    /// The CatalogSource's `spec.secrets`.
    CatalogSource,
    /// The `imagePullSecrets` of the namespace's `default` ServiceAccount.
    DefaultServiceAccount,
}

#[tokio::test]
async fn a_private_bundle_image_fails_clearly_without_its_pull_secret_and_installs_with_it() {
    private_bundle_image("privimg", Grant::CatalogSource).await;
}

#[tokio::test]
async fn a_private_bundle_image_installs_with_the_pull_secret_of_the_default_service_account() {
    private_bundle_image("privsa", Grant::DefaultServiceAccount).await;
}

/// Subscribes to kube-green from a private repository: BundleUnpackFailed names
/// the image and the registry's answer; once the pull secret is named where
/// `grant` says, the operator installs.
async fn private_bundle_image(label: &'static str, grant: Grant) {
    with_namespace(label, move |client, ns| async move {
        install_crds(&client).await;
        let registry = test_registry();
        let puller = Puller::new(PullOptions::default());
        let package = corpus_dir().join("bundles/kube-green");
        let prefix = format!("{}/private/bundles", registry.address);
        let catalog = image_catalog(&puller, &package, &prefix, &registry.secrets)
            .await
            .expect("the kube-green bundle images are pushed to the private repository");
        let _served = serve_catalog(&client, &ns, label, &catalog).await;
        let head = head_bundle(&catalog, "kube-green", "alpha").clone();
        let image = head.image.clone();

        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let message = subscribe_until_unpack_failed(
            &subs,
            &ns,
            "BundleUnpackFailed names the image and the registry's answer",
        )
        .await;
        assert!(
            message.contains(&image),
            "the message names the image {image}: {message}"
        );
        assert!(
            message.to_ascii_lowercase().contains("authoriz"),
            "the message gives the registry's answer: {message}"
        );
        println!("bundle images: without a pull secret: {message}");

        create_pull_secret(&client, &ns, "pull", &registry).await;
        match grant {
            Grant::CatalogSource => name_pull_secrets(&client, &ns, &["pull"]).await,
            Grant::DefaultServiceAccount => {
                let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
                eventually("the namespace's default ServiceAccount exists", || async {
                    accounts.get_opt("default").await.ok().flatten().is_some()
                })
                .await;
                accounts
                    .patch(
                        "default",
                        &PatchParams::default(),
                        &Patch::Merge(json!({"imagePullSecrets": [{"name": "pull"}]})),
                    )
                    .await
                    .expect("name the pull secret on the default ServiceAccount");
            }
        }
        let sub = wait_for_within(
            std::time::Duration::from_secs(180),
            &subs,
            "kube-green",
            &format!(
                "Subscription kube-green installs {} with the pull secret on the {grant:?}",
                head.name
            ),
            subscription_at(&head.name),
        )
        .await
        .expect("the Subscription");
        assert_eq!(
            true_condition(&sub, SubscriptionConditionType::BundleUnpackFailed),
            None,
            "BundleUnpackFailed is gone once the image is pulled"
        );
    })
    .await;
}

#[tokio::test]
async fn an_image_that_is_not_a_bundle_gives_bundle_unpack_failed() {
    with_namespace("notbundle", |client, ns| async move {
        install_crds(&client).await;
        let registry = test_registry();
        let puller = Puller::new(PullOptions::default());
        let (layer, diff_id) =
            olm_oci::tar_gz_layer(&[(std::path::PathBuf::from("etc/motd"), b"not a bundle".to_vec())])
                .expect("a layer");
        let repository = format!("{}/bundles/not-a-bundle", registry.address);
        let digest = puller
            .push_one_layer(
                &format!("{repository}:v1"),
                layer,
                &diff_id,
                &Default::default(),
                &registry.secrets,
            )
            .await
            .expect("push the image");
        let not_a_bundle = format!("{repository}@{digest}");
        let package = corpus_dir().join("bundles/kube-green");
        let mut catalog = image_catalog(
            &puller,
            &package,
            &format!("{}/bundles", registry.address),
            &registry.secrets,
        )
        .await
        .expect("the kube-green bundle images are pushed");
        let head = head_bundle(&catalog, "kube-green", "alpha").clone();
        for bundle in catalog.bundles.iter_mut().filter(|b| b.name == head.name) {
            bundle.image = not_a_bundle.clone();
        }
        let _served = serve_catalog(&client, &ns, "notbundle", &catalog).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let message =
            subscribe_until_unpack_failed(&subs, &ns, "BundleUnpackFailed names the image and the cause")
                .await;
        assert!(
            message.contains(&not_a_bundle),
            "the message names the image: {message}"
        );
        assert!(
            message.contains("is not a bundle"),
            "the message gives the cause: {message}"
        );
        println!("bundle images: not a bundle: {message}");
    })
    .await;
}

#[tokio::test]
async fn an_unpack_past_the_operator_group_timeout_fails_and_waits_for_the_min_retry_interval() {
    with_namespace("unpacktimeout", |client, ns| async move {
        install_crds(&client).await;
        // OLM's annotations, on the namespace's OperatorGroup.
        unpack_operator_group(&client, &ns, "2s", "1h").await;
        // A registry that accepts connections and never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
        let silent_address = silent.local_addr().expect("its address");
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in silent.incoming().flatten() {
                held.push(stream);
            }
        });
        let registry = test_registry();
        let puller = Puller::new(PullOptions::default());
        let package = corpus_dir().join("bundles/kube-green");
        let mut catalog = image_catalog(
            &puller,
            &package,
            &format!("{}/bundles", registry.address),
            &registry.secrets,
        )
        .await
        .expect("the kube-green bundle images are pushed");
        let head = head_bundle(&catalog, "kube-green", "alpha").clone();
        let mut silent_image = String::new();
        for bundle in catalog.bundles.iter_mut().filter(|b| b.name == head.name) {
            let digest = bundle.image.split('@').nth(1).expect("by digest").to_owned();
            silent_image = format!("{silent_address}/bundles/kube-green@{digest}");
            bundle.image = silent_image.clone();
        }
        let _served = serve_catalog(&client, &ns, "unpacktimeout", &catalog).await;

        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        subscribe_to_kube_green(&subs, &ns).await;
        let message = wait_condition(
            &subs,
            "kube-green",
            SubscriptionConditionType::BundleUnpacking,
            "BundleUnpacking while the image is pulled",
            |_| true,
        )
        .await;
        assert!(
            message.contains(&silent_image),
            "BundleUnpacking names the image: {message}"
        );

        let message = wait_condition(
            &subs,
            "kube-green",
            SubscriptionConditionType::BundleUnpackFailed,
            "BundleUnpackFailed once the OperatorGroup's timeout has passed",
            |_| true,
        )
        .await;
        assert!(
            message.contains(&silent_image)
                && message.contains("2s")
                && message.contains("bundle-unpack-timeout of OperatorGroup og"),
            "the message names the image, the timeout and where it is set: {message}"
        );
        println!("bundle images: past the timeout: {message}");
        // Synced again (with backoff), the image is not pulled before the interval.
        let held = wait_condition(
            &subs,
            "kube-green",
            SubscriptionConditionType::BundleUnpackFailed,
            "BundleUnpackFailed says the image waits for the minimum retry interval",
            |m| m.contains("bundle-unpack-min-retry-interval"),
        )
        .await;
        println!("bundle images: held back: {held}");
    })
    .await;
}
