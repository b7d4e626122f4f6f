//! The registry credentials an image of a catalog is pulled with: the Secrets
//! the CatalogSource names in `spec.secrets`, then the `imagePullSecrets` of
//! the `default` ServiceAccount of its namespace (what a Pod in that namespace,
//! such as OLM's unpack Job, would be given by the ServiceAccount admission).
//! For one registry, the first Secret named wins.

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{Api, Client};
use olm_oci::DockerConfig;
use olm_resolver::model::CatalogId;

/// The ServiceAccount whose `imagePullSecrets` also apply.
pub const SERVICE_ACCOUNT: &str = "default";

/// Why the pull secrets could not be read.
#[derive(Debug, thiserror::Error)]
#[error("reading pull secret {namespace}/{name} of catalog {catalog}: {message}")]
pub struct PullSecretError {
    /// The catalog.
    pub catalog: String,
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// Why.
    pub message: String,
}

/// The names of the pull secrets for catalog `catalog` whose CatalogSource names
/// `named`, in order: those, then the `default` ServiceAccount's (a ServiceAccount
/// that cannot be read adds none).
pub async fn secret_names(client: &Client, catalog: &CatalogId, named: &[String]) -> Vec<String> {
    let mut names = named.to_vec();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &catalog.namespace);
    match accounts.get_opt(SERVICE_ACCOUNT).await {
        Ok(Some(account)) => {
            for reference in account.image_pull_secrets.unwrap_or_default() {
                if !names.contains(&reference.name) {
                    names.push(reference.name);
                }
            }
        }
        Ok(None) => {}
        Err(error) => tracing::debug!(
            catalog = %catalog,
            %error,
            "cannot read the default ServiceAccount; its imagePullSecrets are not used"
        ),
    }
    names
}

/// The credentials of the pull secrets of `catalog` ([`secret_names`]); Secrets
/// that do not exist are skipped, as a kubelet skips missing image pull secrets.
pub async fn pull_secrets(
    client: &Client,
    catalog: &CatalogId,
    named: &[String],
) -> Result<DockerConfig, PullSecretError> {
    let mut config = DockerConfig::default();
    let api: Api<Secret> = Api::namespaced(client.clone(), &catalog.namespace);
    for name in secret_names(client, catalog, named).await {
        let fail = |message: String| PullSecretError {
            catalog: catalog.to_string(),
            namespace: catalog.namespace.clone(),
            name: name.clone(),
            message,
        };
        let Some(secret) = api.get_opt(&name).await.map_err(|e| fail(e.to_string()))? else {
            tracing::warn!(catalog = %catalog, secret = %name, "pull secret not found; skipped");
            continue;
        };
        let data = secret.data.unwrap_or_default();
        let Some(json) = data.get(".dockerconfigjson").or_else(|| data.get(".dockercfg")) else {
            continue;
        };
        config.merge(DockerConfig::parse(&json.0).map_err(|e| fail(e.to_string()))?);
    }
    Ok(config)
}

/// The credentials of the pull secrets of `catalog` ([`pull_secrets`]), or none
/// when they cannot be read: the pull then says what the registry answered.
pub async fn pull_secrets_or_none(client: &Client, catalog: &CatalogId, named: &[String]) -> DockerConfig {
    match pull_secrets(client, catalog, named).await {
        Ok(config) => config,
        Err(error) => {
            tracing::warn!(catalog = %catalog, error = %error, "pull secrets not read; pulling without them");
            DockerConfig::default()
        }
    }
}
