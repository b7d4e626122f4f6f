//! Completing a resolved bundle from its bundle image when its catalog carries
//! only its metadata ([`crate::bundle_images`]), with the CatalogSource's pull
//! secrets.

use kube::runtime::reflector::ObjectRef;
use olm_api::v1alpha1::CatalogSource;
use olm_catalog::Bundle;
use olm_resolver::model::CatalogId;

use super::Error;
use crate::{bundle_images::BundleImages, controllers::Context};

/// `bundle` with its manifests, pulled from its image when its catalog has none.
pub(super) async fn complete(shared: &Context, catalog: &CatalogId, bundle: Bundle) -> Result<Bundle, Error> {
    if !crate::bundle_images::needs_unpacking(&bundle) {
        return Ok(bundle);
    }
    let secrets = shared
        .stores
        .catalog_sources
        .get(&ObjectRef::<CatalogSource>::new(&catalog.name).within(&catalog.namespace))
        .and_then(|source| source.spec.secrets.clone())
        .unwrap_or_default();
    let name = bundle.name.clone();
    BundleImages::global()
        .complete(&shared.client, catalog, &secrets, bundle)
        .await
        .map_err(|source| Error::Unpack {
            catalog: catalog.clone(),
            bundle: name,
            source,
        })
}
