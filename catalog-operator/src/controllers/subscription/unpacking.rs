//! The Subscription controller's side of unpacking bundle images
//! ([`crate::images::unpack`]): the plan's Subscriptions get condition
//! `BundleUnpacking` True (reason `UnpackingInProgress`) while an image is
//! pulled, and a failed unpack becomes this controller's error.

use std::collections::HashSet;

use kube::{Api, ResourceExt, runtime::reflector::ObjectRef};
use olm_api::v1alpha1::{
    CatalogSource, Subscription, SubscriptionConditionReason as Reason, SubscriptionConditionType as Type,
};
use olm_catalog::Bundle;
use olm_resolver::model::CatalogId;

use super::error::Error;
use crate::{
    controllers::{Context, conditions::set_subscription_condition},
    images::unpack::{self, Prepared, Unpack},
};

/// `bundle` with its manifests, pulled from its image when its catalog has none.
/// `members` are the Subscriptions of the plan: they get BundleUnpacking while
/// the image is pulled, and their names go into `marked`.
pub(super) async fn complete(
    shared: &Context,
    namespace: &str,
    members: &[&Subscription],
    marked: &mut HashSet<String>,
    catalog: &CatalogId,
    bundle: Bundle,
) -> Result<Bundle, Error> {
    let name = bundle.name.clone();
    let source = shared
        .stores
        .catalog_sources
        .get(&ObjectRef::<CatalogSource>::new(&catalog.name).within(&catalog.namespace));
    let unpack = Unpack {
        client: &shared.client,
        writer: &shared.writer,
        catalog,
        source: source.as_deref(),
        extractor_image: &shared.options.unpack_job_image,
        namespace,
    };
    let result = match unpack::prepare(&unpack, bundle).await {
        Prepared::Done(result) => result,
        Prepared::Pull(pull) => {
            mark_unpacking(shared, namespace, members, marked, pull.image()).await;
            unpack::pull(&unpack, pull).await
        }
    };
    result.map_err(|source| Error::Unpack {
        catalog: catalog.clone(),
        bundle: name,
        source,
    })
}

/// Sets BundleUnpacking True on the plan's Subscriptions while `image` is pulled
/// (best effort: a failed write only loses the transient condition).
async fn mark_unpacking(
    shared: &Context,
    namespace: &str,
    members: &[&Subscription],
    marked: &mut HashSet<String>,
    image: &str,
) {
    if !shared.writer.leadership().is_leader() {
        return;
    }
    let api: Api<Subscription> = Api::namespaced(shared.client.clone(), namespace);
    let now = olm_runtime::conditions::now();
    for subscription in members {
        let name = subscription.name_any();
        let mut status = subscription.status.clone().unwrap_or_default();
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        set_subscription_condition(
            conditions,
            Type::BundleUnpacking,
            true,
            Reason::UnpackingInProgress,
            &format!("unpacking bundle image {image}"),
            &now,
        );
        match shared.writer.apply_status(&api, &name, &status).await {
            Ok(_) => {
                marked.insert(name);
            }
            Err(error) => {
                tracing::debug!(namespace, subscription = %name, %error, "BundleUnpacking not written")
            }
        }
    }
}
