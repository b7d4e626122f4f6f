//! The API server endpoints a pool publishes for its agents
//! (`status.apiServerEndpoints`): those the `kubernetes` EndpointSlices in
//! `default` list ([`olm_runtime::endpoints::from_slices`], as the agents
//! read them), then those given to olm-operator with `--apiserver-endpoints`,
//! for servers the slices do not list (two servers on one address with
//! different ports, as on the test control plane).

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, Client, api::ListParams};
use olm_runtime::endpoints::{NAMESPACE, SELECTOR, from_slices, merge};

/// The endpoints to publish: the `kubernetes` EndpointSlices (when they can be
/// read; otherwise only `configured`, with a log line), then `configured`.
pub async fn discover(client: &Client, configured: &[String]) -> Vec<String> {
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(SELECTOR))
        .await;
    let discovered = match slices {
        Ok(list) => from_slices(&list.items),
        Err(error) => {
            tracing::debug!(
                error = &error as &dyn std::error::Error,
                "cannot read the kubernetes EndpointSlices"
            );
            Vec::new()
        }
    };
    merge(discovered, configured)
}
