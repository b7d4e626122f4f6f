//! The CatalogSource step for image catalogs served from memory: catalog-operator
//! pulls the catalog image itself and is told how to serve it
//! ([`crate::images::catalogs`]: the pull, the digest poll, the decision; the
//! credentials from [`crate::images::pull_secrets`]); this step keeps the
//! result in the store and removes the registry Pods it replaces. The file-based
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

use k8s_openapi::{
    api::core::v1::{Pod, Service},
    apimachinery::pkg::apis::meta::v1::Time,
};
use kube::{Api, ResourceExt, api::DeleteParams};
use olm_api::{labels, v1alpha1::CatalogSource};
use olm_catalog::Catalog;
use olm_resolver::model::CatalogId;
use tokio::time::Instant;

use super::{
    context::{CatalogSourceContext, ImagePath, ImageState},
    error::{Error, chain},
    observed::Observed,
    registry_pod,
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

/// Reads the catalog image `image` of `source`: from memory when it holds a
/// file-based catalog, else through a registry Pod. Returns what was found, when
/// the image was polled now (if it was), and how the catalog is served.
pub(super) async fn read(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
    image: &str,
    spec: &SourceSpec,
    now: &Time,
) -> Result<(Observed, Option<Time>, Serving), Error> {
    let mut runtime = ctx.clients.get(id);
    let state = runtime.image.clone().filter(|s| s.image == image);
    let loaded = ctx.shared.catalogs.get(id).is_some_and(|s| s.content.is_some());
    let pinned = image.contains("@sha256:");
    let poll_due =
        |state: &ImageState| spec.polls && !pinned && state.checked_at.elapsed() >= spec.poll_interval;

    match state {
        Some(state) if loaded && matches!(state.path, ImagePath::Memory { .. }) => {
            let ImagePath::Memory { digest, message } = state.path.clone() else {
                return pull_and_serve(ctx, source, id, image, spec, now, false).await;
            };
            let serving = Serving::memory(message);
            if !poll_due(&state) {
                let changed = ctx.shared.catalogs.set_healthy(id, now);
                return Ok((ready(changed), None, serving));
            }
            let secrets = secrets_of(ctx, source, id).await;
            let polled = catalogs::digest_of(image, &secrets).await;
            if let Ok(current) = &polled
                && *current != digest
            {
                tracing::info!(catalog = %id, image, old = %digest, new = %current, "catalog image changed");
                return pull_and_serve(ctx, source, id, image, spec, now, true).await;
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
            Ok((ready(changed), polled.is_ok().then(|| now.clone()), serving))
        }
        Some(ImageState {
            path: ImagePath::Pod { reason, message },
            checked_at,
            ..
        }) if !(reason == ServingReason::PullFailed
            && checked_at.elapsed() >= PULL_RETRY.min(spec.poll_interval)) =>
        {
            let (observed, polled) = registry_pod::read(ctx, source, id, image, spec, now).await?;
            Ok((observed, polled, Serving::pod(reason, message)))
        }
        _ => pull_and_serve(ctx, source, id, image, spec, now, false).await,
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

/// The pull secrets of the catalog (none when they cannot be read).
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
    spec: &SourceSpec,
    now: &Time,
    polled: bool,
) -> Result<(Observed, Option<Time>, Serving), Error> {
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
            let (observed, serving) =
                serve_from_memory(ctx, source, id, image, *catalog, &pulled, now).await?;
            Ok((observed, polled, serving))
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
            Ok((
                observed,
                polled,
                Serving::failed(ServingReason::InvalidCatalog, message),
            ))
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
            let (observed, pod_polled) = registry_pod::read(ctx, source, id, image, spec, now).await?;
            Ok((observed, pod_polled.or(polled), Serving::pod(reason, message)))
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

/// Puts the catalog of `pulled` in the store, to be served from memory, and
/// removes the registry Pods that served it before.
async fn serve_from_memory(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
    image: &str,
    catalog: Catalog,
    pulled: &olm_oci::Image,
    now: &Time,
) -> Result<(Observed, Serving), Error> {
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
    remove_registry_pods(ctx, source, id).await?;
    Ok((ready(changed), Serving::memory(message)))
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

/// Deletes the registry Pods and Service of a catalog now served from memory
/// (left from before, when a Pod served it). Only the leader writes.
async fn remove_registry_pods(
    ctx: &CatalogSourceContext,
    source: &CatalogSource,
    id: &CatalogId,
) -> Result<(), Error> {
    if !ctx.shared.writer.leadership().is_leader() {
        return Ok(());
    }
    let owned = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.namespace.as_deref() == Some(&id.namespace)
            && meta.labels.as_ref().and_then(|l| l.get(labels::CATALOG_SOURCE)) == Some(&id.name)
            && meta
                .owner_references
                .iter()
                .flatten()
                .any(|o| Some(&o.uid) == source.uid().as_ref())
    };
    let fail = |what: &'static str| {
        let (namespace, name) = (id.namespace.clone(), id.name.clone());
        move |source| Error::Registry {
            what,
            namespace,
            name,
            source,
        }
    };
    let pods: Api<Pod> = Api::namespaced(ctx.shared.client.clone(), &id.namespace);
    for pod in ctx.shared.stores.pods.state() {
        if owned(&pod.metadata) && pod.metadata.deletion_timestamp.is_none() {
            ctx.shared
                .writer
                .delete(&pods, &pod.name_any(), &DeleteParams::background())
                .await
                .map_err(fail("Pod"))?;
        }
    }
    let services: Api<Service> = Api::namespaced(ctx.shared.client.clone(), &id.namespace);
    for service in ctx.shared.stores.services.state() {
        if owned(&service.metadata) && service.metadata.deletion_timestamp.is_none() {
            ctx.shared
                .writer
                .delete(&services, &service.name_any(), &DeleteParams::background())
                .await
                .map_err(fail("Service"))?;
        }
    }
    Ok(())
}
