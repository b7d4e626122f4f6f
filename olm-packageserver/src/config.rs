//! The package server's settings: its command-line flags, and what they come to.

use std::{net::SocketAddr, time::Duration};

/// How the package server is run (`catalog-operator run --package-server-address ...`).
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct PackageServerArgs {
    /// Serve the PackageManifest API on this address (e.g. `0.0.0.0:5443`);
    /// not served when unset.
    #[arg(long, env = "OLM_PACKAGE_SERVER_ADDRESS")]
    pub package_server_address: Option<SocketAddr>,
    /// The Service the APIService names (its DNS names are in the certificate).
    #[arg(long, default_value = "packageserver")]
    pub package_server_service: String,
    /// The namespace of that Service and of the certificate's Secret.
    #[arg(long, env = "POD_NAMESPACE", default_value = "olm")]
    pub package_server_namespace: String,
    /// The Service port the APIService names [default: the port served on].
    #[arg(long)]
    pub package_server_service_port: Option<u16>,
    /// The Secret holding the serving certificate (made when absent).
    #[arg(long, default_value = "packageserver-serving-cert")]
    pub package_server_secret: String,
    /// Apply the APIService `v1.packages.operators.coreos.com` with the certificate's CA.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub package_server_register: bool,
    /// How long a serving certificate is valid (renewed at two thirds of it;
    /// its CA lives ten times longer). Short values are for tests.
    #[arg(long, default_value = "8760h", value_parser = olm_runtime::leader::parse_duration, hide = true)]
    pub package_server_cert_lifetime: Duration,
}

/// The package server's settings, once enabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where to serve.
    pub address: SocketAddr,
    /// The Service the APIService names.
    pub service: String,
    /// Its namespace, and the Secret's.
    pub namespace: String,
    /// The Service's port.
    pub service_port: u16,
    /// The certificate's Secret.
    pub secret: String,
    /// Whether to apply the APIService.
    pub register: bool,
    /// How long a serving certificate is valid.
    pub cert_lifetime: Duration,
}

impl PackageServerArgs {
    /// The settings, when the server is enabled.
    pub fn config(&self) -> Option<Config> {
        let address = self.package_server_address?;
        Some(Config {
            address,
            service: self.package_server_service.clone(),
            namespace: self.package_server_namespace.clone(),
            service_port: self.package_server_service_port.unwrap_or(address.port()),
            secret: self.package_server_secret.clone(),
            register: self.package_server_register,
            cert_lifetime: self.package_server_cert_lifetime,
        })
    }
}
