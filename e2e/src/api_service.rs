//! The PackageManifest APIService a test registers for its package server.
//!
//! The APIService is cluster-wide. One left behind names a server that has
//! stopped, and the API server then answers discovery with 503 for every later
//! test (and cannot finish deleting namespaces). So a test holds a
//! [`PackageApiService`] while its package server runs; dropping it removes the
//! APIService, also when the test panics.

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::{
    Api,
    api::{DeleteParams, Preconditions},
};

/// Removes the PackageManifest APIService, when it still names Service
/// `packageserver` of this namespace, once dropped.
#[must_use = "the APIService is removed when this is dropped"]
pub struct PackageApiService {
    namespace: String,
}

impl PackageApiService {
    /// The APIService that names the package server of `namespace`.
    pub fn of(namespace: &str) -> PackageApiService {
        PackageApiService {
            namespace: namespace.to_owned(),
        }
    }
}

impl Drop for PackageApiService {
    /// Removes it on a thread of its own: a drop cannot await, and the test's
    /// runtime may be unwinding.
    fn drop(&mut self) {
        let namespace = self.namespace.clone();
        let removed = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(remove(&namespace))
        })
        .join();
        match removed {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!(
                "cannot remove APIService {} of namespace {}: {e}",
                olm_api::packages::API_SERVICE,
                self.namespace
            ),
            Err(_) => eprintln!("removing APIService {} panicked", olm_api::packages::API_SERVICE),
        }
    }
}

/// Deletes the APIService if it names `namespace`'s package server; another
/// test's registration stays.
async fn remove(namespace: &str) -> Result<(), String> {
    let config = kube::Config::infer().await.map_err(|e| e.to_string())?;
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let api: Api<APIService> = Api::all(client);
    let name = olm_api::packages::API_SERVICE;
    let Some(current) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
        return Ok(());
    };
    let names_ours = current
        .spec
        .as_ref()
        .and_then(|s| s.service.as_ref())
        .and_then(|s| s.namespace.as_deref())
        .is_some_and(|n| n == namespace);
    if !names_ours {
        return Ok(());
    }
    let only_this = DeleteParams {
        preconditions: Some(Preconditions {
            uid: current.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &only_this).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}
