//! What the agent reports of its host: addresses, OS, architecture, kernel, and
//! the default identity of a machine joined from outside the cluster.

use std::net::{IpAddr, UdpSocket};

/// The facts of the host, as written to the Machine's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFacts {
    /// Addresses (the one the host reaches the API server from first).
    pub addresses: Vec<String>,
    /// `linux`, ...
    pub os: String,
    /// Kubernetes' name of the architecture: `amd64`, `arm64`, ...
    pub architecture: String,
    /// The kernel release.
    pub kernel_version: Option<String>,
}

impl HostFacts {
    /// Reads the host's facts; `api_server` is the host (or IP) of the API server,
    /// used to find the address the host reaches it from.
    pub fn read(api_server: Option<&str>) -> Self {
        HostFacts {
            addresses: outbound_address(api_server.unwrap_or("10.255.255.255"))
                .map(|ip| vec![ip.to_string()])
                .unwrap_or_default(),
            os: std::env::consts::OS.to_owned(),
            architecture: kube_architecture(std::env::consts::ARCH).to_owned(),
            kernel_version: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty()),
        }
    }
}

/// The architecture as Kubernetes and Go name it.
pub fn kube_architecture(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "riscv64" => "riscv64",
        other => other,
    }
}

/// The local address the host uses towards `host` (no packet is sent: a UDP
/// socket's connect only picks the route).
fn outbound_address(host: &str) -> Option<IpAddr> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let socket = UdpSocket::bind(if host.contains(':') { "[::]:0" } else { "0.0.0.0:0" }).ok()?;
    socket.connect((host, 443)).ok()?;
    socket.local_addr().ok().map(|a| a.ip())
}

/// The default external id of this host: its machine-id, else its host name, as a
/// lowercase DNS label.
pub fn default_external_id() -> Option<String> {
    ["/etc/machine-id", "/proc/sys/kernel/hostname"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .map(|id| dns_label(&id))
        .find(|id| !id.is_empty())
}

/// `raw` as a DNS label: lowercase letters, digits and `-`, at most 63 characters,
/// starting and ending with a letter or digit.
pub fn dns_label(raw: &str) -> String {
    let label: String = raw
        .trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(63)
        .collect();
    label.trim_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_become_dns_labels() {
        assert_eq!(dns_label("Build_Host.local\n"), "build-host-local");
        assert_eq!(dns_label(&"a".repeat(70)).len(), 63);
        assert_eq!(kube_architecture("x86_64"), "amd64");
    }

    #[test]
    fn the_host_reports_os_and_architecture() {
        let facts = HostFacts::read(Some("127.0.0.1"));
        assert_eq!(facts.os, std::env::consts::OS);
        assert_eq!(facts.addresses, ["127.0.0.1"]);
    }
}
