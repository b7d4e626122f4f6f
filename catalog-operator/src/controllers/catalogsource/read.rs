//! Reading a catalog into the store, by its kind of source: a registry at an
//! address ([`super::grpc`]), a catalog image ([`super::image`]), or a ConfigMap
//! ([`super::config_map`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{CatalogSource, CatalogSourceReason};
use olm_resolver::model::CatalogId;

use super::{
    config_map::read_config_map,
    context::CatalogSourceContext,
    error::Error,
    grpc::read_registry,
    image,
    observed::Observed,
    status::Serving,
    validate::{SourceKind, SourceSpec},
};

/// What [`read`] returns: what was found, when the image was polled now (image
/// catalogs), and how an image catalog is served.
pub(super) type ReadResult = (Observed, Option<Time>, Option<Serving>);

/// Reads the catalog `id` as `spec` says and records the result in the store.
pub(super) async fn read(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
    spec: &SourceSpec,
    now: &Time,
) -> Result<ReadResult, Error> {
    let priority = source.spec.priority.unwrap_or(0);
    match &spec.kind {
        SourceKind::Invalid(message) => {
            ctx.shared
                .catalogs
                .set_unhealthy(id, priority, message.clone(), now);
            let invalid = Observed::Invalid {
                reason: CatalogSourceReason::SpecInvalid,
                message: message.clone(),
            };
            Ok((invalid, None, None))
        }
        SourceKind::Address(address) => {
            let observed = read_registry(ctx, id, priority, address, spec, None, now).await;
            Ok((observed, None, None))
        }
        SourceKind::Image(image) => {
            let (observed, polled, serving) = image::read(ctx, source, id, image, spec, now).await?;
            Ok((observed, polled, Some(serving)))
        }
        SourceKind::ConfigMap(name) => Ok((read_config_map(ctx, id, priority, name, now).await?, None, None)),
    }
}
