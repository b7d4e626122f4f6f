//! The API server endpoints the `kubernetes` EndpointSlices list (pure): read
//! by olm-operator, which publishes them in each MachinePool's status, and by
//! machine-agent, which fails over between them.

use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The namespace of the `kubernetes` Service and its EndpointSlices.
pub const NAMESPACE: &str = "default";

/// The label selector of the `kubernetes` Service's EndpointSlices.
pub const SELECTOR: &str = "kubernetes.io/service-name=kubernetes";

/// The endpoints `slices` list, as `https://host:port`: each address not
/// marked unready, with each port named `https` (or unnamed); IPv6 addresses
/// in brackets.
pub fn from_slices<'a>(slices: impl IntoIterator<Item = &'a EndpointSlice>) -> Vec<String> {
    let mut endpoints = Vec::new();
    for slice in slices {
        let ports: Vec<i32> = slice
            .ports
            .iter()
            .flatten()
            .filter(|p| p.name.as_deref().is_none_or(|n| n == "https"))
            .filter_map(|p| p.port)
            .collect();
        let ready = slice
            .endpoints
            .iter()
            .flatten()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false));
        for address in ready.flat_map(|e| &e.addresses) {
            let host = if address.contains(':') {
                format!("[{address}]")
            } else {
                address.clone()
            };
            endpoints.extend(ports.iter().map(|port| format!("https://{host}:{port}")));
        }
    }
    endpoints
}

/// `https://host:port` without a trailing slash, so one endpoint is written one way.
pub fn normalize(endpoint: &str) -> String {
    endpoint.trim().trim_end_matches('/').to_owned()
}

/// `first` then `then`, normalized, without duplicates or empty ones, in that order.
pub fn merge(first: Vec<String>, then: &[String]) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for endpoint in first.iter().chain(then) {
        let endpoint = normalize(endpoint);
        if !endpoint.is_empty() && !all.contains(&endpoint) {
            all.push(endpoint);
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(value: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(value).expect("an EndpointSlice")
    }

    #[test]
    fn each_ready_address_comes_with_each_https_port() {
        let slices = [
            slice(serde_json::json!({
                "addressType": "IPv4",
                "endpoints": [
                    {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
                    {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                    {"addresses": ["10.0.0.3"]},
                ],
                "ports": [{"name": "https", "port": 6443}, {"name": "metrics", "port": 9090}],
            })),
            slice(serde_json::json!({
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.4"]}],
                "ports": [{"port": 443}],
            })),
        ];
        assert_eq!(
            from_slices(&slices),
            [
                "https://10.0.0.1:6443",
                "https://10.0.0.3:6443",
                "https://10.0.0.4:443"
            ]
        );
    }

    #[test]
    fn ipv6_addresses_are_bracketed() {
        let slices = [slice(serde_json::json!({
            "addressType": "IPv6",
            "endpoints": [{"addresses": ["fd00::1"]}],
            "ports": [{"name": "https", "port": 443}],
        }))];
        assert_eq!(from_slices(&slices), ["https://[fd00::1]:443"]);
    }

    #[test]
    fn no_slice_or_no_port_gives_nothing() {
        let none: [EndpointSlice; 0] = [];
        assert!(from_slices(&none).is_empty());
        let no_port = [slice(serde_json::json!({
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}],
        }))];
        assert!(from_slices(&no_port).is_empty());
    }

    #[test]
    fn merging_keeps_the_order_and_drops_duplicates_and_blanks() {
        let merged = merge(
            vec!["https://a:1".to_owned(), "https://b:2/".to_owned()],
            &[
                "https://a:1/".to_owned(),
                " ".to_owned(),
                "https://c:3".to_owned(),
            ],
        );
        assert_eq!(merged, ["https://a:1", "https://b:2", "https://c:3"]);
    }
}
