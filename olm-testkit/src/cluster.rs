//! The cluster under test: the one `KUBECONFIG` names.

use std::{path::PathBuf, time::Duration};

use kube::{Client, Config, config::KubeConfigOptions};

const HOW_TO_START: &str = "Start the local control plane with `hack/cluster.sh up` and then \
     `eval \"$(hack/cluster.sh env)\"`, or point KUBECONFIG at another cluster (e.g. kind); \
     `hack/test.sh` does all of it and stops the control plane afterwards.";

/// The path `KUBECONFIG` names. Panics, saying how to start a cluster, when it is unset.
fn kubeconfig_path() -> PathBuf {
    match std::env::var_os("KUBECONFIG") {
        Some(path) => PathBuf::from(path),
        None => panic!("cluster tests need a Kubernetes cluster, but KUBECONFIG is not set. {HOW_TO_START}"),
    }
}

/// The client configuration of the cluster in `KUBECONFIG`, for tests that build a client of
/// their own (e.g. with a tower layer). Panics, saying how to start a cluster, when `KUBECONFIG`
/// is unset or unusable.
pub async fn config() -> Config {
    let path = kubeconfig_path();
    Config::from_kubeconfig(&KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("cannot use KUBECONFIG={}: {e}. {HOW_TO_START}", path.display()))
}

/// A client for the cluster in `KUBECONFIG`. Panics, saying how to start a cluster, when
/// `KUBECONFIG` is unset or the cluster does not answer: cluster tests never pass without one.
pub async fn client() -> Client {
    let path = kubeconfig_path();
    let config = config().await;
    let server = config.cluster_url.clone();
    let client = Client::try_from(config)
        .unwrap_or_else(|e| panic!("cannot build a client for {server}: {e}. {HOW_TO_START}"));
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!(
            "the cluster in KUBECONFIG={} ({server}) does not answer: {e}. {HOW_TO_START}",
            path.display()
        ),
        Err(_) => panic!(
            "the cluster in KUBECONFIG={} ({server}) did not answer within 10s. {HOW_TO_START}",
            path.display()
        ),
    }
}
