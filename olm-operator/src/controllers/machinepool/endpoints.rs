//! The API server endpoints a pool publishes for its agents
//! (`status.apiServerEndpoints`): those the `kubernetes` EndpointSlices in
//! `default` list, then those given to olm-operator with
//! `--apiserver-endpoints`, for servers the slices do not list (two servers
//! on one address with different ports, as on the test control plane).

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, Client, api::ListParams};

/// The label the API server puts on the EndpointSlices of the `kubernetes` Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The endpoints `slices` list, as `https://host:port`.
pub fn from_slices(slices: &[EndpointSlice]) -> Vec<String> {
    let mut endpoints = Vec::new();
    for slice in slices {
        let ports: Vec<i32> = slice
            .ports
            .iter()
            .flatten()
            .filter(|p| p.name.as_deref().is_none_or(|n| n == "https"))
            .filter_map(|p| p.port)
            .collect();
        for endpoint in slice.endpoints.iter().flatten() {
            if endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            for address in &endpoint.addresses {
                for port in &ports {
                    let host = if address.contains(':') {
                        format!("[{address}]")
                    } else {
                        address.clone()
                    };
                    endpoints.push(format!("https://{host}:{port}"));
                }
            }
        }
    }
    endpoints
}

/// `discovered` then `configured`, without duplicates, in that order.
pub fn merge(discovered: Vec<String>, configured: &[String]) -> Vec<String> {
    let mut all = Vec::new();
    for endpoint in discovered.into_iter().chain(configured.iter().cloned()) {
        let endpoint = endpoint.trim().trim_end_matches('/').to_owned();
        if !endpoint.is_empty() && !all.contains(&endpoint) {
            all.push(endpoint);
        }
    }
    all
}

/// The endpoints to publish: the `kubernetes` EndpointSlices (when they can be
/// read; otherwise only `configured`, with a log line), then `configured`.
pub async fn discover(client: &Client, configured: &[String]) -> Vec<String> {
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("{SERVICE_NAME_LABEL}=kubernetes")))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_and_flags_merge_without_duplicates() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
        }))
        .expect("a slice");
        let found = from_slices(&[slice]);
        assert_eq!(found, ["https://127.0.0.1:6443"]);
        let all = merge(
            found,
            &[
                "https://127.0.0.1:6443/".to_owned(),
                "https://127.0.0.1:6444".to_owned(),
            ],
        );
        assert_eq!(all, ["https://127.0.0.1:6443", "https://127.0.0.1:6444"]);
    }

    #[test]
    fn ipv6_addresses_are_bracketed() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "addressType": "IPv6",
            "endpoints": [{"addresses": ["fd00::1"]}],
            "ports": [{"name": "https", "port": 443}],
        }))
        .expect("a slice");
        assert_eq!(from_slices(&[slice]), ["https://[fd00::1]:443"]);
    }
}
