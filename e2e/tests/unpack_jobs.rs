//! Bundle images unpacked by a Job, OLM's way (CatalogSource annotation
//! `olm-rs.dev/bundle-unpack-method: Job`), on the real control plane.
//!
//! The test cluster's nodes are kwok's: they run no container, and complete a
//! Job's Pod at once. The test stands in for the kubelet of the node that would
//! run the unpack Pod ([`run_unpack_pod`]): it pulls the bundle image with the
//! Pod's pull secrets and runs the Pod's commands in order, with each volume a
//! directory and the extractor image's binary the catalog-operator built here,
//! writing to the cluster as the Job's ServiceAccount.

use std::{
    collections::{BTreeMap, HashSet},
    path::{Path, PathBuf},
    time::Duration,
};

use catalog_operator::images::unpack_jobs::objects;
use e2e::bundle_catalogs::{
    CATALOG_SOURCE, ServedCatalog, create_pull_secret, head_bundle, name_pull_secrets, serve_catalog,
    true_condition, unpack_operator_group, wait_condition,
};
use e2e::images::{TestRegistry, image_catalog, test_registry};
use k8s_openapi::api::{
    batch::v1::Job,
    core::v1::{ConfigMap, Container, Secret},
    rbac::v1::Role,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use olm_api::{
    labels::unpack as keys,
    v1alpha1::{Approval, CatalogSource, ClusterServiceVersion, Subscription, SubscriptionConditionType},
};
use olm_oci::{DockerConfig, PullOptions, Puller};
use olm_testkit::{
    corpus_dir, eventually, install_crds,
    objects::{subscribe, subscription_at},
    process::binary,
    wait_for_within,
};
use serde_json::json;

/// A catalog served for a test, and its head.
struct JobCatalog {
    _served: ServedCatalog,
    /// The CSV at the head of kube-green's channel alpha.
    head: String,
    /// Its bundle image.
    image: String,
}

/// A catalog of kube-green bundle images under `prefix`, served by a registry
/// process, with catalog-operator running for `ns`; the CatalogSource `images`
/// unpacks its bundles in Jobs.
async fn job_catalog(
    client: &Client,
    ns: &str,
    label: &str,
    prefix: &str,
    registry: &TestRegistry,
) -> JobCatalog {
    let puller = Puller::new(PullOptions::default());
    let package = corpus_dir().join("bundles/kube-green");
    let catalog = image_catalog(&puller, &package, prefix, &registry.secrets)
        .await
        .expect("the kube-green bundle images are pushed");
    let served = serve_catalog(client, ns, label, &catalog).await;
    let sources: Api<CatalogSource> = Api::namespaced(client.clone(), ns);
    sources
        .patch(
            CATALOG_SOURCE,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {keys::METHOD: "Job"}}})),
        )
        .await
        .expect("ask for unpack Jobs");
    let head = head_bundle(&catalog, "kube-green", "alpha");
    JobCatalog {
        _served: served,
        head: head.name.clone(),
        image: head.image.clone(),
    }
}

/// The unpack Jobs of `image` in `ns`.
async fn unpack_jobs(client: &Client, ns: &str, image: &str) -> Vec<Job> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let selector = format!("{}={}", keys::REF, objects::unpack_name(image));
    jobs.list(&ListParams::default().labels(&selector))
        .await
        .expect("list the unpack Jobs")
        .items
}

/// A kubeconfig like the test's, acting as ServiceAccount `ns/name`.
fn kubeconfig_as(ns: &str, name: &str, dir: &Path) -> PathBuf {
    let path = std::env::var("KUBECONFIG").expect("the e2e tests run with KUBECONFIG");
    let text = std::fs::read_to_string(&path).expect("read KUBECONFIG");
    let mut config: serde_json::Value = serde_saphyr::from_str(&text).expect("KUBECONFIG is YAML");
    for user in config["users"].as_array_mut().expect("KUBECONFIG has users") {
        user["user"]["as"] = json!(format!("system:serviceaccount:{ns}:{name}"));
        user["user"]["as-groups"] = json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated"
        ]);
    }
    let out = dir.join("kubeconfig");
    std::fs::write(&out, config.to_string()).expect("write the kubeconfig");
    out
}

/// Plays the kubelet for the Pod of unpack Job `job`: pulls the bundle image
/// with the Pod's pull secrets, then runs the Pod's containers (init containers
/// first) with each emptyDir volume a directory, the extractor image standing
/// for this build of catalog-operator and the bundle image's file system for
/// the `pull` container. The extractor writes as the Job's ServiceAccount.
async fn run_unpack_pod(client: &Client, job: &Job) {
    let ns = job.namespace().expect("the Job's namespace");
    let pod = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("the Job's Pod");
    let root = tempfile::tempdir().expect("a directory for the Pod");
    let volumes: BTreeMap<String, PathBuf> = pod
        .volumes
        .iter()
        .flatten()
        .map(|v| (v.name.clone(), root.path().join("volumes").join(&v.name)))
        .collect();
    for dir in volumes.values() {
        std::fs::create_dir_all(dir).expect("a volume directory");
    }
    // The image file system of the bundle image, as the node would pull it.
    let mut secrets = DockerConfig::default();
    let secret_api: Api<Secret> = Api::namespaced(client.clone(), &ns);
    for reference in pod.image_pull_secrets.iter().flatten() {
        let secret = secret_api.get(&reference.name).await.expect("the pull secret");
        let json = secret
            .data
            .as_ref()
            .and_then(|d| d.get(".dockerconfigjson"))
            .expect("a dockerconfigjson Secret");
        secrets.merge(DockerConfig::parse(&json.0).expect("a docker config"));
    }
    let kubeconfig = kubeconfig_as(
        &ns,
        pod.service_account_name.as_deref().expect("a ServiceAccount"),
        root.path(),
    );
    let extractor = binary("catalog-operator");
    let containers: Vec<Container> = pod
        .init_containers
        .iter()
        .flatten()
        .chain(pod.containers.iter())
        .cloned()
        .collect();
    for container in containers {
        let image = container.image.clone().expect("an image");
        let image_root = root.path().join("images").join(&container.name);
        let is_extractor_image = container
            .command
            .as_ref()
            .is_some_and(|c| c[0] == objects::EXTRACTOR_PATH);
        if !is_extractor_image {
            let pulled = Puller::new(PullOptions::default())
                .pull(&image, &secrets)
                .await
                .unwrap_or_else(|e| panic!("the node pulls {image}: {e}"));
            pulled.files.write_to(&image_root, &[]).expect("unpack the image");
        }
        let mounts: Vec<(String, PathBuf)> = container
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| (m.mount_path.clone(), volumes[&m.name].clone()))
            .collect();
        let map = |arg: &str| -> String {
            if arg == objects::EXTRACTOR_PATH {
                return extractor.display().to_string();
            }
            for (path, dir) in &mounts {
                if let Some(rest) = arg.strip_prefix(path.as_str()) {
                    return format!("{}{rest}", dir.display());
                }
            }
            arg.to_owned()
        };
        let command: Vec<String> = container
            .command
            .iter()
            .flatten()
            .chain(container.args.iter().flatten())
            .map(|a| map(a))
            .collect();
        let mut run = std::process::Command::new(&command[0]);
        run.args(&command[1..]);
        if !is_extractor_image {
            // The container's `/` is the image's file system.
            run.arg("--from").arg(&image_root);
        }
        for env in container.env.iter().flatten() {
            run.env(&env.name, env.value.clone().unwrap_or_default());
        }
        run.env("KUBECONFIG", &kubeconfig);
        let output = tokio::task::spawn_blocking(move || run.output())
            .await
            .expect("the container's command runs")
            .expect("the container's command starts");
        assert!(
            output.status.success(),
            "container {} of Job {}: {}{}",
            container.name,
            job.name_any(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[tokio::test]
async fn a_private_bundle_image_is_unpacked_by_a_job_shaped_as_olms() {
    olm_testkit::with_namespace("unpackjob", |client, ns| async move {
        install_crds(&client).await;
        let registry = test_registry();
        let prefix = format!("{}/private/bundles", registry.address);
        let JobCatalog { head, image, _served } =
            job_catalog(&client, &ns, "unpackjob", &prefix, &registry).await;
        create_pull_secret(&client, &ns, "pull", &registry).await;
        name_pull_secrets(&client, &ns, &["pull"]).await;

        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        let asked = std::time::Instant::now();
        subscribe(
            &subs,
            "kube-green",
            (CATALOG_SOURCE, &ns),
            "kube-green",
            "alpha",
            Approval::Automatic,
        )
        .await;
        let name = objects::unpack_name(&image);
        let message = wait_condition(
            &subs,
            "kube-green",
            SubscriptionConditionType::BundleUnpacking,
            "BundleUnpacking names the unpack Job",
            |_| true,
        )
        .await;
        assert!(
            message.contains(&name),
            "BundleUnpacking names Job {name}: {message}"
        );

        // OLM's objects, in the CatalogSource's namespace.
        let jobs = unpack_jobs(&client, &ns, &image).await;
        assert_eq!(jobs.len(), 1, "one Job for the image");
        let job = &jobs[0];
        assert_eq!(job.name_any(), name);
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let config_map = config_maps.get(&name).await.expect("the bundle's ConfigMap");
        let sources: Api<CatalogSource> = Api::namespaced(client.clone(), &ns);
        let source_uid = sources
            .get(CATALOG_SOURCE)
            .await
            .expect("the CatalogSource")
            .uid();
        assert!(
            config_map
                .owner_references()
                .iter()
                .any(|o| o.kind == "CatalogSource" && Some(&o.uid) == source_uid.as_ref()),
            "the CatalogSource owns the ConfigMap"
        );
        assert!(
            job.owner_references()
                .iter()
                .any(|o| o.kind == "ConfigMap" && o.name == name),
            "the ConfigMap owns the Job"
        );
        let roles: Api<Role> = Api::namespaced(client.clone(), &ns);
        let role = roles.get(&name).await.expect("the unpack Role");
        assert_eq!(
            role.rules.unwrap_or_default()[0].resource_names,
            Some(vec![name.clone()]),
            "the Role writes only the ConfigMap"
        );
        let pod = job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.clone())
            .expect("a Pod");
        assert_eq!(
            pod.image_pull_secrets.unwrap_or_default()[0].name,
            "pull",
            "the node pulls with the CatalogSource's secrets"
        );
        assert_eq!(
            pod.init_containers
                .unwrap_or_default()
                .iter()
                .map(|c| c.image.clone().unwrap_or_default())
                .collect::<Vec<_>>()[1],
            image,
            "the node pulls the bundle image"
        );

        run_unpack_pod(&client, job).await;
        wait_for_within(
            Duration::from_secs(180),
            &subs,
            "kube-green",
            &format!("Subscription kube-green installs {head} unpacked by the Job"),
            subscription_at(&head),
        )
        .await;
        println!(
            "unpack jobs: Subscription to installed plan in {:?}, bundle unpacked by Job {ns}/{name}",
            asked.elapsed()
        );
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns);
        let csv = csvs.get(&head).await.expect("the CSV");
        assert!(
            csv.spec
                .install
                .deployment()
                .is_some_and(|d| !d.deployments.is_empty()),
            "the CSV has its install strategy from the ConfigMap"
        );
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        crds.get("sleepinfos.kube-green.com")
            .await
            .expect("the CRD is created");
        let sub = subs.get("kube-green").await.expect("the Subscription");
        assert_eq!(
            true_condition(&sub, SubscriptionConditionType::BundleUnpacking),
            None,
            "BundleUnpacking is gone once the plan is made"
        );
    })
    .await;
}

#[tokio::test]
async fn an_unpack_job_past_its_timeout_fails_and_is_tried_again_after_the_min_retry_interval() {
    olm_testkit::with_namespace("unpackretry", |client, ns| async move {
        install_crds(&client).await;
        // OLM's annotations, on the namespace's OperatorGroup.
        unpack_operator_group(&client, &ns, "3s", "6s").await;
        let registry = test_registry();
        let prefix = format!("{}/bundles", registry.address);
        let JobCatalog { head, image, _served } =
            job_catalog(&client, &ns, "unpackretry", &prefix, &registry).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
        subscribe(
            &subs,
            "kube-green",
            (CATALOG_SOURCE, &ns),
            "kube-green",
            "alpha",
            Approval::Automatic,
        )
        .await;

        // No node runs the Pod: kwok completes it with nothing written.
        let message = wait_condition(
            &subs,
            "kube-green",
            SubscriptionConditionType::BundleUnpackFailed,
            "BundleUnpackFailed once the unpack timeout has passed",
            |_| true,
        )
        .await;
        let name = objects::unpack_name(&image);
        assert!(
            message.contains(&name) && message.contains(&image),
            "the message names the Job and the image: {message}"
        );
        assert!(
            message.contains("timeout") || message.contains("DeadlineExceeded"),
            "the message gives the cause: {message}"
        );
        println!("unpack jobs: past the timeout: {message}");

        // After the minimum retry interval, a new Job; this time a node runs it.
        let first: HashSet<String> = unpack_jobs(&client, &ns, &image)
            .await
            .iter()
            .map(|j| j.name_any())
            .collect();
        let client_for_node = client.clone();
        let ns_for_node = ns.clone();
        let image_for_node = image.clone();
        let retried = objects::attempt_name(&name, 2);
        eventually("a new unpack Job after the minimum retry interval", || {
            let client = client_for_node.clone();
            let ns = ns_for_node.clone();
            let image = image_for_node.clone();
            let first = first.clone();
            let retried = retried.clone();
            async move {
                let jobs = unpack_jobs(&client, &ns, &image).await;
                match jobs.iter().find(|j| !first.contains(&j.name_any())) {
                    Some(job) => {
                        assert_eq!(job.name_any(), retried, "a retry is named after its attempt");
                        run_unpack_pod(&client, job).await;
                        true
                    }
                    None => false,
                }
            }
        })
        .await;
        let sub = wait_for_within(
            Duration::from_secs(180),
            &subs,
            "kube-green",
            &format!("Subscription kube-green installs {head} after the retry"),
            subscription_at(&head),
        )
        .await
        .expect("the Subscription");
        assert_eq!(
            true_condition(&sub, SubscriptionConditionType::BundleUnpackFailed),
            None,
            "BundleUnpackFailed is gone after the retry"
        );
    })
    .await;
}
