//! The CatalogSource step for image catalogs served from memory: catalog-operator
//! pulls the catalog image itself and is told how to serve it
//! ([`crate::images::catalogs`]: the pull, the digest poll, the decision; the
//! credentials from [`crate::images::pull_secrets`]); this step keeps the
//! result in the store ([`super::decide`] removes the registry Pods it
//! replaces). The file-based
//! catalog inside the image is served with no registry Pod and no Service. The image is pulled again only when
//! its digest changed: with `updateStrategy.registryPoll`, a tag is re-checked
//! every interval (a digest never changes).
//!
//! An image without a file-based catalog (an old SQLite index image), one too
//! large for the pull limits, or one catalog-operator cannot pull (only the
//! nodes may reach its registry) is served by a registry Pod as OLM does
//! ([`super::registry_pod`]); condition `ServedFromMemory` says which path is
//! used and why. A catalog served by a Pod for a failed pull tries in process
//! again after [`PULL_RETRY`] (or its poll interval, if shorter).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::v1alpha1::CatalogSource;
use olm_catalog::Catalog;
use olm_resolver::model::CatalogId;
use tokio::time::Instant;

use super::{
    context::{CatalogSourceContext, ImagePath, ImageState},
    error::chain,
    observed::Observed,
    status::{Serving, ServingReason},
    validate::SourceSpec,
};
use crate::{
    bundles::BundleSource,
    catalogs::CatalogContent,
    images::catalogs::{self, PodReason, PullOutcome, configs_dir},
    images::pull_secrets::pull_secrets_or_none,
};

/// How soon a catalog served by a Pod because its image could not be pulled
/// tries in process again.
pub const PULL_RETRY: Duration = Duration::from_secs(60);

/// What reading a catalog image found.
#[derive(Clone, Debug, PartialEq)]
pub enum ImageRead {
    /// Served from memory, or by nothing (an invalid catalog): what was found.
    Found {
        /// What reading it found.
        observed: Box<Observed>,
        /// When the image was polled now, if it was.
        polled: Option<Time>,
        /// How it is served.
        serving: Serving,
    },
    /// Served by a registry Pod, read through it once one serves.
    ByPod {
        /// When the image was polled now (by a pull), if it was.
        polled: Option<Time>,
        /// How it is served, and why by a Pod.
        serving: Serving,
    },
}

/// Reads the catalog image `image` of `source`: into memory when it holds a
/// file-based catalog, else it is left to a registry Pod.
pub(super) async fn read(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
    image: &str,
    spec: &SourceSpec,
    now: &Time,
) -> ImageRead {
    let mut runtime = ctx.clients.get(id);
    let state = runtime.image.clone().filter(|s| s.image == image);
    let loaded = ctx.shared.catalogs.get(id).is_some_and(|s| s.content.is_some());
    let pinned = image.contains("@sha256:");
    let poll_due =
        |state: &ImageState| spec.polls && !pinned && state.checked_at.elapsed() >= spec.poll_interval;

    match state {
        Some(state) if loaded && matches!(state.path, ImagePath::Memory { .. }) => {
            let ImagePath::Memory { digest, message } = state.path.clone() else {
                return pull_and_serve(ctx, source, id, image, now, false).await;
            };
            let serving = Serving::memory(message);
            if !poll_due(&state) {
                let changed = ctx.shared.catalogs.set_healthy(id, now);
                return found(ready(changed), None, serving);
            }
            let secrets = secrets_of(ctx, source, id).await;
            let polled = catalogs::digest_of(image, &secrets).await;
            if let Ok(current) = &polled
                && *current != digest
            {
                tracing::info!(catalog = %id, image, old = %digest, new = %current, "catalog image changed");
                return pull_and_serve(ctx, source, id, image, now, true).await;
            }
            if let Err(error) = &polled {
                // Keep serving what was loaded; the next poll tries again.
                tracing::warn!(catalog = %id, image, error = %chain(error), "polling the catalog image failed");
            }
            runtime.image = Some(ImageState {
                checked_at: Instant::now(),
                ..state
            });
            ctx.clients.put(id, runtime);
            let changed = ctx.shared.catalogs.set_healthy(id, now);
            found(ready(changed), polled.is_ok().then(|| now.clone()), serving)
        }
        Some(ImageState {
            path: ImagePath::Pod { reason, message },
            checked_at,
            ..
        }) if !(reason == ServingReason::PullFailed
            && checked_at.elapsed() >= PULL_RETRY.min(spec.poll_interval)) =>
        {
            ImageRead::ByPod {
                polled: None,
                serving: Serving::pod(reason, message),
            }
        }
        _ => pull_and_serve(ctx, source, id, image, now, false).await,
    }
}

/// What was found, for a catalog served from memory or by nothing.
fn found(observed: Observed, polled: Option<Time>, serving: Serving) -> ImageRead {
    ImageRead::Found {
        observed: Box::new(observed),
        polled,
        serving,
    }
}

/// A catalog served from memory, read now or before.
fn ready(changed: bool) -> Observed {
    Observed::Ready {
        address: None,
        config_map: None,
        registry_service: None,
        changed,
        left_out: None,
    }
}

/// The pull secrets of the catalog (none when they cannot be read): read
/// live, as part of the image pull (the Secrets a CatalogSource names are no
/// objects of catalog-operator's, and a store of every Secret would keep them
/// all in memory).
async fn secrets_of(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
) -> olm_oci::DockerConfig {
    let named = source.spec.secrets.clone().unwrap_or_default();
    pull_secrets_or_none(&ctx.shared.client, id, &named).await
}

/// Pulls the image and serves it from memory, or hands it to a registry Pod.
async fn pull_and_serve(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
    image: &str,
    now: &Time,
    polled: bool,
) -> ImageRead {
    let secrets = secrets_of(ctx, source, id).await;
    let started = Instant::now();
    let outcome = catalogs::pull_catalog(image, &secrets).await;
    let polled = polled.then(|| now.clone());
    match outcome {
        PullOutcome::Memory {
            catalog,
            image: pulled,
        } => {
            let (packages, bundles) = (catalog.packages.len(), catalog.bundles.len());
            tracing::info!(
                catalog = %id,
                image,
                digest = %pulled.digest,
                packages,
                bundles,
                bytes = pulled.files.total_bytes(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "catalog image loaded into memory"
            );
            let (observed, serving) = serve_from_memory(ctx, source, id, image, *catalog, &pulled, now);
            found(observed, polled, serving)
        }
        PullOutcome::Invalid { message } => {
            // A broken catalog is reported, not handed to a Pod that would fail the same way.
            let priority = source.spec.priority.unwrap_or(0);
            let changed = ctx
                .shared
                .catalogs
                .set_unhealthy(id, priority, message.clone(), now);
            let mut runtime = ctx.clients.get(id);
            runtime.image = None;
            ctx.clients.put(id, runtime);
            let observed = Observed::Unreachable {
                address: None,
                config_map: None,
                registry_service: None,
                reason: olm_api::v1alpha1::CatalogSourceReason::RegistryServer,
                message: message.clone(),
                changed,
            };
            found(
                observed,
                polled,
                Serving::failed(ServingReason::InvalidCatalog, message),
            )
        }
        PullOutcome::Pod { reason, message } => {
            let reason = serving_reason(reason);
            tracing::info!(catalog = %id, image, reason = ?reason, "{message}");
            remember(
                ctx,
                id,
                image,
                ImagePath::Pod {
                    reason,
                    message: message.clone(),
                },
            );
            ImageRead::ByPod {
                polled,
                serving: Serving::pod(reason, message),
            }
        }
    }
}

/// The reason of condition `ServedFromMemory` for a catalog a Pod serves.
fn serving_reason(reason: PodReason) -> ServingReason {
    match reason {
        PodReason::NoFileBasedCatalog => ServingReason::NoFileBasedCatalog,
        PodReason::ImageTooLarge => ServingReason::ImageTooLarge,
        PodReason::PullFailed => ServingReason::PullFailed,
    }
}

/// Puts the catalog of `pulled` in the store, to be served from memory.
fn serve_from_memory(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
    image: &str,
    catalog: Catalog,
    pulled: &olm_oci::Image,
    now: &Time,
) -> (Observed, Serving) {
    let priority = source.spec.priority.unwrap_or(0);
    let describe = ctx.shared.options.describe();
    let content = CatalogContent::described(id.clone(), catalog, Vec::new(), BundleSource::Memory, describe);
    let changed = ctx.shared.catalogs.set_loaded(id, priority, content, now);
    let message = format!(
        "image {image} (digest {}) holds a file-based catalog under /{}: catalog-operator serves it \
         from memory, with no registry Pod",
        pulled.digest,
        configs_dir(&pulled.labels).display()
    );
    remember(
        ctx,
        id,
        image,
        ImagePath::Memory {
            digest: pulled.digest.clone(),
            message: message.clone(),
        },
    );
    (ready(changed), Serving::memory(message))
}

/// Remembers how `image` is served now.
fn remember(ctx: &CatalogSourceContext, id: &CatalogId, image: &str, path: ImagePath) {
    let mut runtime = ctx.clients.get(id);
    runtime.image = Some(ImageState {
        image: image.to_owned(),
        path,
        checked_at: Instant::now(),
    });
    ctx.clients.put(id, runtime);
}
