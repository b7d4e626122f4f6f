//! The read step of serving: what [`super::plan`] decides from, found before
//! anything is written.
//!
//! The certificate Secrets of the served Deployments are read from the API
//! server (GET): they hold private keys, and a store of them would keep every
//! Secret of the cluster in memory. Who holds the APIServices the CSV owns
//! comes from the shared stores (APIServices and CSVs).

use std::collections::BTreeMap;

use k8s_openapi::{api::core::v1::Secret, kube_aggregator::pkg::apis::apiregistration::v1::APIService};
use kube::{
    Api, ResourceExt,
    runtime::reflector::{ObjectRef, Store},
};
use olm_api::v1alpha1::{ClusterServiceVersion, CsvPhase};

use crate::{
    context::Context,
    controllers::csv::{apiservices, certs},
};

/// Why the read failed: a failed API call, worth a retry.
#[derive(Debug, thiserror::Error)]
#[error("failed to read Secret {name}")]
pub struct Error {
    /// The Secret, as namespace/name.
    pub name: String,
    /// The cause.
    #[source]
    pub source: kube::Error,
}

/// What serving decides from.
#[derive(Clone, Debug, Default)]
pub struct Found {
    /// The certificate Secret of each served Deployment that has one, by Deployment.
    pub secrets: BTreeMap<String, Secret>,
    /// Who holds each existing APIService the CSV owns, by APIService name.
    pub holders: BTreeMap<String, Holding>,
}

/// Who holds an existing APIService.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holding {
    /// No ClusterServiceVersion (no `olm.owner*` labels): the API server's
    /// own, or another tool's.
    Unowned,
    /// The ClusterServiceVersion `namespace/name`, in the state `state`.
    Csv {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Whether it is still there, and whether it is stepping aside.
        state: HolderState,
    },
}

/// The state of a CSV that holds an APIService.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HolderState {
    /// It no longer exists.
    Gone,
    /// It is Replacing or Deleting: it gives its objects up.
    SteppingAside,
    /// Any other phase: it keeps what it holds.
    Active,
}

/// Reads what serving needs for `csv`: its certificate Secrets (live) and
/// the holders of the APIServices it owns (from `api_services` and `csvs`).
pub async fn read(
    ctx: &Context,
    api_services: &Store<APIService>,
    csvs: &Store<ClusterServiceVersion>,
    csv: &ClusterServiceVersion,
) -> Result<Found, Error> {
    let served = certs::served(csv);
    if served.is_empty() {
        return Ok(Found::default());
    }
    let namespace = csv.namespace().unwrap_or_default();
    Ok(Found {
        secrets: secrets(ctx, &namespace, &served).await?,
        holders: holders(api_services, csvs, csv),
    })
}

/// The certificate Secrets stored for the served Deployments, by Deployment.
async fn secrets(
    ctx: &Context,
    namespace: &str,
    served: &[certs::Served],
) -> Result<BTreeMap<String, Secret>, Error> {
    let api = Api::<Secret>::namespaced(ctx.client.clone(), namespace);
    let reads = served.iter().map(|one| {
        let name = certs::secret_name(&certs::service_name(&one.deployment));
        let api = api.clone();
        async move {
            let secret = api.get_opt(&name).await.map_err(|source| Error {
                name: format!("{namespace}/{name}"),
                source,
            })?;
            Ok::<_, Error>(secret.map(|secret| (one.deployment.clone(), secret)))
        }
    });
    let found = futures::future::try_join_all(reads).await?;
    Ok(found.into_iter().flatten().collect())
}

/// Who holds each APIService `csv` owns that exists, as the stores show them.
pub fn holders(
    api_services: &Store<APIService>,
    csvs: &Store<ClusterServiceVersion>,
    csv: &ClusterServiceVersion,
) -> BTreeMap<String, Holding> {
    let mut holders = BTreeMap::new();
    for desc in apiservices::owned(csv) {
        let name = apiservices::name(desc);
        let Some(existing) = api_services.get(&ObjectRef::new(&name)) else {
            continue;
        };
        let holding = match apiservices::holder(&existing.metadata) {
            apiservices::Holder::Unowned => Holding::Unowned,
            apiservices::Holder::Csv(namespace, holder) => {
                let found = csvs.get(&ObjectRef::new(&holder).within(&namespace));
                Holding::Csv {
                    state: state_of(found.as_deref()),
                    namespace,
                    name: holder,
                }
            }
        };
        holders.insert(name, holding);
    }
    holders
}

fn state_of(csv: Option<&ClusterServiceVersion>) -> HolderState {
    let phase = csv.map(|csv| csv.status.as_ref().and_then(|s| s.phase));
    match phase {
        None => HolderState::Gone,
        Some(Some(CsvPhase::Replacing | CsvPhase::Deleting)) => HolderState::SteppingAside,
        Some(_) => HolderState::Active,
    }
}
