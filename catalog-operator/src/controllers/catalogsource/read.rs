//! The read step: everything the decision needs, from the shared stores and
//! from the catalog itself.
//!
//! From the stores: the registry Pods and Services of an image catalog, its
//! namespace's Pod Security enforcement ([`registry_pod::read_objects`]), and
//! the ConfigMap metadata of a ConfigMap catalog ([`super::config_map`]).
//!
//! External reads, the only live requests of a reconcile, each recording what
//! it found in the catalog store (the content this controller keeps for
//! resolution):
//! - a registry at an address: its gRPC health check and, when due, the load
//!   of its content ([`super::grpc`]);
//! - a catalog image: its pull or digest poll, with the pull secrets it names
//!   ([`super::image`]); through a registry Pod, the gRPC read of the Pod
//!   that serves, once it is Ready;
//! - a ConfigMap catalog: the GET of the ConfigMap that loads it, only when it
//!   changed.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use olm_api::v1alpha1::{CatalogSource, CatalogSourceReason};
use olm_resolver::model::CatalogId;

use super::{
    config_map::read_config_map,
    context::CatalogSourceContext,
    error::Error,
    grpc::read_registry,
    image::{self, ImageRead},
    observed::Observed,
    registry_pod::{self, RegistryObjects},
    status::Serving,
    validate::{SourceKind, SourceSpec},
};

/// What a reconcile read: the input of [`super::decide::decide`].
#[derive(Clone, Debug)]
pub struct Read {
    /// The CatalogSource.
    pub source: Arc<CatalogSource>,
    /// Its spec, checked.
    pub spec: SourceSpec,
    /// The time of the reconcile.
    pub now: Time,
    /// Whether this replica leads (only the leader writes).
    pub leading: bool,
    /// What reading the catalog found: `None` for an image a registry Pod is
    /// to serve while no Ready Pod serves it (the decision says why).
    pub observed: Option<Observed>,
    /// When the image was polled now by a pull, if it was.
    pub polled: Option<Time>,
    /// How an image catalog is served.
    pub serving: Option<Serving>,
    /// The registry objects of an image catalog.
    pub registry: Option<Registry>,
}

/// The registry objects of an image catalog, and whether a Pod is to serve it.
#[derive(Clone, Debug)]
pub struct Registry {
    /// The image.
    pub image: String,
    /// Whether a registry Pod serves it (else memory, or nothing).
    pub by_pod: bool,
    /// Its Pods and Services in the stores.
    pub objects: RegistryObjects,
}

/// What [`read`] found of the catalog alone.
struct Found {
    observed: Option<Observed>,
    polled: Option<Time>,
    serving: Option<Serving>,
    registry: Option<Registry>,
}

impl Found {
    fn observed(observed: Observed) -> Found {
        Found {
            observed: Some(observed),
            polled: None,
            serving: None,
            registry: None,
        }
    }
}

/// Reads the catalog of `source` as `spec` says. `None` while a store it
/// needs has not synced yet.
pub(super) async fn read(
    ctx: &CatalogSourceContext,
    source: Arc<CatalogSource>,
    id: &CatalogId,
    spec: SourceSpec,
    now: Time,
) -> Result<Option<Read>, Error> {
    let priority = source.spec.priority.unwrap_or(0);
    ctx.shared.catalogs.register(id, priority, &now);
    let found = match &spec.kind {
        SourceKind::Invalid(message) => {
            ctx.shared
                .catalogs
                .set_unhealthy(id, priority, message.clone(), &now);
            Found::observed(Observed::Invalid {
                reason: CatalogSourceReason::SpecInvalid,
                message: message.clone(),
            })
        }
        SourceKind::Address(address) => {
            Found::observed(read_registry(ctx, id, priority, address, &spec, None, &now).await)
        }
        SourceKind::Image(image) => {
            let Some(found) = read_image(ctx, &source, id, image, &spec, &now).await else {
                return Ok(None);
            };
            found
        }
        SourceKind::ConfigMap(name) => Found::observed(read_config_map(ctx, id, priority, name, &now).await?),
    };
    Ok(Some(Read {
        source,
        spec,
        now,
        leading: ctx.shared.writer.leadership().is_leader(),
        observed: found.observed,
        polled: found.polled,
        serving: found.serving,
        registry: found.registry,
    }))
}

/// Reads a catalog image: into memory, or through the registry Pod that
/// serves it. `None` while the namespace store has not synced.
async fn read_image(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
    image: &str,
    spec: &SourceSpec,
    now: &Time,
) -> Option<Found> {
    let objects = registry_pod::read_objects(ctx, source)?;
    let registry = |by_pod: bool| Registry {
        image: image.to_owned(),
        by_pod,
        objects: objects.clone(),
    };
    match image::read(ctx, source, id, image, spec, now).await {
        ImageRead::Found {
            observed,
            polled,
            serving,
        } => Some(Found {
            observed: Some(*observed),
            polled,
            serving: Some(serving),
            registry: Some(registry(false)),
        }),
        ImageRead::ByPod { polled, serving } => {
            let observed = read_through_pod(ctx, source, id, image, spec, &objects, now).await;
            Some(Found {
                observed,
                polled,
                serving: Some(serving),
                registry: Some(registry(true)),
            })
        }
    }
}

/// Reads the catalog through the registry Pod that serves it, once it is
/// Ready; one that is not Ready yet marks the catalog unhealthy in the store,
/// so that resolution does not wait for it.
async fn read_through_pod(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
    image: &str,
    spec: &SourceSpec,
    objects: &RegistryObjects,
    now: &Time,
) -> Option<Observed> {
    let priority = source.spec.priority.unwrap_or(0);
    let hash = registry_pod::spec_hash(&registry_pod::wanted_pod(source, image, objects));
    let leading = ctx.shared.writer.leadership().is_leader();
    let serving = registry_pod::serving_pod(&objects.pods, &hash, leading)?;
    if !registry_pod::is_ready(&serving) {
        let message = not_ready(&serving.name_any());
        ctx.shared.catalogs.set_unhealthy(id, priority, message, now);
        return None;
    }
    let address = registry_pod::address(id);
    let service = registry_pod::service_status(source, &objects.services);
    Some(read_registry(ctx, id, priority, &address, spec, Some(service), now).await)
}

/// Why a catalog is not read through registry Pod `name` yet.
pub(super) fn not_ready(name: &str) -> String {
    format!("registry pod {name} is not ready yet")
}
