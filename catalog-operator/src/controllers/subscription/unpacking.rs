//! The Subscription controller's side of unpacking bundle images
//! ([`crate::images::unpack`]). Building a plan never unpacks an image: a
//! bundle whose image must be pulled in process, or whose unpack Job must be
//! advanced, becomes an [`UnpackRequest`], external work the sync's decision
//! asks for. The sync then sets condition `BundleUnpacking` True (reason
//! `UnpackingInProgress`) on the Subscriptions of a plan waiting for a pull
//! ([`super::decide::unpacking`]), [`perform`]s the requests, and plans again
//! with what they gave ([`Unpacked`]): a bundle, where a Job stands, or why the
//! unpack failed, which becomes this controller's error.

use std::collections::HashMap;

use kube::{ResourceExt, runtime::reflector::ObjectRef};
use olm_api::v1alpha1::{CatalogSource, Subscription};
use olm_catalog::Bundle;
use olm_resolver::model::CatalogId;

use super::error::Error;
use crate::{
    controllers::Context,
    images::{
        bundles::UnpackError,
        unpack::{self, ByJob, Prepared, Pull, Unpack, UnpackPolicy},
    },
};

/// A bundle image to unpack, asked for by the decision of a sync.
#[derive(Debug)]
pub struct UnpackRequest {
    /// The catalog of the bundle.
    pub catalog: CatalogId,
    /// The bundle.
    pub bundle: String,
    /// The Subscriptions of the plan that waits for it.
    pub members: Vec<String>,
    /// How it is unpacked.
    pub work: UnpackWork,
}

/// How a requested bundle image is unpacked.
#[derive(Debug)]
pub enum UnpackWork {
    /// Pulled in process, while the plan's Subscriptions show BundleUnpacking.
    Pull(Pull),
    /// By the Job of its catalog, advanced by a step; the plan's Subscriptions
    /// show where it stands once planned again.
    Job(Box<ByJob>),
}

impl UnpackRequest {
    /// The image to unpack.
    pub fn image(&self) -> &str {
        match &self.work {
            UnpackWork::Pull(pull) => pull.image(),
            UnpackWork::Job(job) => job.image(),
        }
    }

    /// Whether it is pulled in process.
    pub fn is_pull(&self) -> bool {
        matches!(self.work, UnpackWork::Pull(_))
    }
}

/// What the requested unpacks gave, by image, for the next pass of a sync.
#[derive(Debug, Default)]
pub struct Unpacked(HashMap<String, Result<Bundle, UnpackError>>);

impl Unpacked {
    /// The outcome of the unpack of `image`, once: the failure is reported by
    /// the one plan that asked for it.
    fn take(&mut self, image: &str) -> Option<Result<Bundle, UnpackError>> {
        self.0.remove(image)
    }
}

/// `bundle` with its manifests, or the unpack of its image to request: taken
/// from `unpacked` when it was just pulled, else read as far as possible without
/// a pull (its catalog has them, its image was read before, or a Job unpacks it).
/// `members` are the Subscriptions of the plan; `policy` is their namespace's
/// unpack policy.
pub(super) async fn complete(
    shared: &Context,
    policy: &UnpackPolicy,
    members: &[&Subscription],
    unpacked: &mut Unpacked,
    catalog: &CatalogId,
    bundle: Bundle,
) -> Result<Result<Bundle, UnpackRequest>, Error> {
    let name = bundle.name.clone();
    let failed = |source| Error::Unpack {
        catalog: catalog.clone(),
        bundle: name.clone(),
        source,
    };
    if let Some(result) = unpacked.take(&bundle.image) {
        return result.map(Ok).map_err(failed);
    }
    let source = shared
        .stores
        .catalog_sources
        .get(&ObjectRef::<CatalogSource>::new(&catalog.name).within(&catalog.namespace));
    let unpack = Unpack {
        client: &shared.client,
        writer: &shared.writer,
        stores: &shared.stores.unpack,
        catalog,
        source: source.as_deref(),
        extractor_image: &shared.options.unpack_job_image,
        policy,
    };
    let work = match unpack::prepare(&unpack, bundle).await {
        Prepared::Done(result) => return result.map(Ok).map_err(failed),
        Prepared::Pull(pull) => UnpackWork::Pull(pull),
        Prepared::Job(job) => UnpackWork::Job(job),
    };
    Ok(Err(UnpackRequest {
        catalog: catalog.clone(),
        bundle: name.clone(),
        members: members.iter().map(|s| s.name_any()).collect(),
        work,
    }))
}

/// Performs the unpacks the decision requested, for the next pass of the sync:
/// pulls an image in process (within the namespace's unpack timeout), or
/// advances its unpack Job by a step.
pub(super) async fn perform(
    shared: &Context,
    policy: &UnpackPolicy,
    requests: Vec<UnpackRequest>,
) -> Unpacked {
    let mut unpacked = Unpacked::default();
    for request in requests {
        let image = request.image().to_owned();
        let unpack = Unpack {
            client: &shared.client,
            writer: &shared.writer,
            stores: &shared.stores.unpack,
            catalog: &request.catalog,
            source: None,
            extractor_image: &shared.options.unpack_job_image,
            policy,
        };
        let result = match request.work {
            UnpackWork::Pull(pull) => unpack::pull(&unpack, pull).await,
            UnpackWork::Job(job) => unpack::advance_job(&unpack, job).await,
        };
        unpacked.0.insert(image, result);
    }
    unpacked
}
