//! Fenced writes: server-side apply (and delete) that refuse to run unless this
//! replica leads.
//!
//! Every write of a controller goes through these functions, or through a [`Writer`]
//! that bundles the leadership handle, the field manager and metrics. This is the one
//! place where fencing is enforced: [`Leadership::is_leader`] is checked immediately
//! before each request, and a replica that is not the leader gets
//! [`WriteError::NotLeader`] without anything being sent. A request still in flight
//! when leadership ends is abandoned ([`WriteError::LeadershipLapsed`]).

use std::fmt::Debug;

use kube::{
    Api, Resource,
    api::{DeleteParams, Patch, PatchParams},
};
use serde::{Serialize, de::DeserializeOwned};

use tokio::time::Instant;

use crate::{
    leader::{LeaderState, Leadership, holds_at},
    metrics::WriteMetrics,
};

/// The field manager of olm-operator's writes.
pub const FIELD_MANAGER_OLM: &str = "olm-operator";
/// The field manager of catalog-operator's writes.
pub const FIELD_MANAGER_CATALOG: &str = "catalog-operator";

/// Errors of fenced writes.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// This replica does not hold the leader lease (or its renewal lapsed): nothing was
    /// sent. Not a failure of the object: requeue, the leader will do the write.
    #[error("not writing {kind} {name}: this replica does not hold the leader lease")]
    NotLeader {
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
    },
    /// Leadership ended while the request was in flight; the request was abandoned
    /// and may or may not have been applied. Requeue: the leader will converge.
    #[error("abandoned the write of {kind} {name}: this replica stopped leading while it was in flight")]
    LeadershipLapsed {
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
    },
    /// The API server refused or failed the apply.
    #[error("failed to apply {kind} {name}")]
    Apply {
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The API server refused or failed the status apply.
    #[error("failed to apply the status of {kind} {name}")]
    ApplyStatus {
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The API server refused or failed the delete.
    #[error("failed to delete {kind} {name}")]
    Delete {
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

impl WriteError {
    /// A low-cardinality label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            WriteError::NotLeader { .. } | WriteError::LeadershipLapsed { .. } => "not_leader",
            WriteError::Apply { .. } | WriteError::ApplyStatus { .. } | WriteError::Delete { .. } => "api",
        }
    }

    /// Whether fencing refused or abandoned the write.
    pub fn is_not_leader(&self) -> bool {
        matches!(
            self,
            WriteError::NotLeader { .. } | WriteError::LeadershipLapsed { .. }
        )
    }

    /// The API error, if the API server answered.
    pub fn api_error(&self) -> Option<&kube::Error> {
        match self {
            WriteError::NotLeader { .. } | WriteError::LeadershipLapsed { .. } => None,
            WriteError::Apply { source, .. }
            | WriteError::ApplyStatus { source, .. }
            | WriteError::Delete { source, .. } => Some(source),
        }
    }
}

fn kind_of<K: Resource<DynamicType = ()>>() -> String {
    K::kind(&()).into_owned()
}

/// How long a write may take: until leadership ends (`Some`), or without limit for a
/// standalone replica (`None`). Refuses when this replica does not lead.
fn fence<K: Resource<DynamicType = ()>>(
    leadership: &Leadership,
    name: &str,
) -> Result<Option<Instant>, WriteError> {
    // One snapshot of the state, so the check and the deadline agree.
    match leadership.state() {
        LeaderState::Standalone => Ok(None),
        LeaderState::Leading { until } if holds_at(until, Instant::now()) => Ok(Some(until)),
        _ => Err(WriteError::NotLeader {
            kind: kind_of::<K>(),
            name: name.to_owned(),
        }),
    }
}

/// Runs `request`, abandoning it if leadership ends first, so that a write stuck on a
/// slow connection is not left to land long after another replica took over.
async fn fenced<K, T>(
    deadline: Option<Instant>,
    name: &str,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, WriteError>
where
    K: Resource<DynamicType = ()>,
{
    match deadline {
        None => Ok(request.await),
        Some(deadline) => {
            tokio::time::timeout_at(deadline, request)
                .await
                .map_err(|_| WriteError::LeadershipLapsed {
                    kind: kind_of::<K>(),
                    name: name.to_owned(),
                })
        }
    }
}

/// Server-side applies `obj` as `name` with field manager `manager`, forcing
/// ownership of the fields it sets. `obj` must carry `apiVersion` and `kind` (typed
/// objects do) and only the fields this manager owns.
pub async fn apply<K>(
    leadership: &Leadership,
    api: &Api<K>,
    name: &str,
    obj: &K,
    manager: &str,
) -> Result<K, WriteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let deadline = fence::<K>(leadership, name)?;
    let params = PatchParams::apply(manager).force();
    fenced::<K, _>(deadline, name, api.patch(name, &params, &Patch::Apply(obj)))
        .await?
        .map_err(|source| WriteError::Apply {
            kind: kind_of::<K>(),
            name: name.to_owned(),
            source,
        })
}

/// Server-side applies `status` to the status subresource of `name`, with field
/// manager `manager` (forced). The body sent is `apiVersion`, `kind`, `metadata.name`
/// and `status` only, so this manager owns no spec field through it.
pub async fn apply_status<K, S>(
    leadership: &Leadership,
    api: &Api<K>,
    name: &str,
    status: &S,
    manager: &str,
) -> Result<K, WriteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize,
{
    let deadline = fence::<K>(leadership, name)?;
    let body = status_body::<K, S>(name, status);
    let params = PatchParams::apply(manager).force();
    fenced::<K, _>(
        deadline,
        name,
        api.patch_status(name, &params, &Patch::Apply(&body)),
    )
    .await?
    .map_err(|source| WriteError::ApplyStatus {
        kind: kind_of::<K>(),
        name: name.to_owned(),
        source,
    })
}

fn status_body<K: Resource<DynamicType = ()>, S: Serialize>(name: &str, status: &S) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": { "name": name },
        "status": status,
    })
}

/// Deletes `name`; an object already gone is not an error (returns `false`).
/// Returns `true` when the API server accepted the delete.
pub async fn delete<K>(
    leadership: &Leadership,
    api: &Api<K>,
    name: &str,
    params: &DeleteParams,
) -> Result<bool, WriteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let deadline = fence::<K>(leadership, name)?;
    match fenced::<K, _>(deadline, name, api.delete(name, params)).await? {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(false),
        Err(source) => Err(WriteError::Delete {
            kind: kind_of::<K>(),
            name: name.to_owned(),
            source,
        }),
    }
}

/// The writes of one binary: its leadership, its field manager and write metrics.
/// Cheap to clone; put one in each controller's context.
#[derive(Clone, Debug)]
pub struct Writer {
    leadership: Leadership,
    manager: &'static str,
    metrics: Option<WriteMetrics>,
}

impl Writer {
    /// Writes as `manager` (e.g. [`FIELD_MANAGER_OLM`]) while `leadership` leads.
    pub fn new(leadership: Leadership, manager: &'static str) -> Self {
        Writer {
            leadership,
            manager,
            metrics: None,
        }
    }

    /// Counts writes in `olm_writes_total{verb,outcome}`.
    pub fn with_metrics(mut self, metrics: &WriteMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// The leadership writes are fenced on.
    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }

    /// The field manager.
    pub fn manager(&self) -> &'static str {
        self.manager
    }

    /// See [`apply()`].
    pub async fn apply<K>(&self, api: &Api<K>, name: &str, obj: &K) -> Result<K, WriteError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
    {
        self.record(
            "apply",
            apply(&self.leadership, api, name, obj, self.manager).await,
        )
    }

    /// See [`apply_status()`].
    pub async fn apply_status<K, S>(&self, api: &Api<K>, name: &str, status: &S) -> Result<K, WriteError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
        S: Serialize,
    {
        self.record(
            "apply_status",
            apply_status(&self.leadership, api, name, status, self.manager).await,
        )
    }

    /// See [`delete()`].
    pub async fn delete<K>(&self, api: &Api<K>, name: &str, params: &DeleteParams) -> Result<bool, WriteError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        self.record("delete", delete(&self.leadership, api, name, params).await)
    }

    fn record<T>(&self, verb: &'static str, result: Result<T, WriteError>) -> Result<T, WriteError> {
        if let Some(metrics) = &self.metrics {
            let outcome = match &result {
                Ok(_) => "ok",
                Err(error) if error.is_not_leader() => "not_leader",
                Err(_) => "error",
            };
            metrics.writes.with_label_values(&[verb, outcome]).inc();
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        },
        time::Duration,
    };

    use http::{Request, Response};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{Client, api::ObjectMeta, client::Body};
    use tokio::{sync::watch, time::Instant};

    use super::*;
    use crate::metrics::Metrics;

    /// A client whose every request is counted and answered with the object applied.
    fn counting_client() -> (Client, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let seen = seen.clone();
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                let uri = request.uri().to_string();
                assert!(uri.contains("fieldManager=olm-operator"), "{uri}");
                assert!(uri.contains("force=true"), "{uri}");
                let body = serde_json::to_vec(&ConfigMap {
                    metadata: ObjectMeta {
                        name: Some("c".into()),
                        ..ObjectMeta::default()
                    },
                    ..ConfigMap::default()
                })
                .unwrap();
                Ok::<_, std::convert::Infallible>(Response::new(Body::from(body)))
            }
        });
        (Client::new(service, "default"), calls)
    }

    fn config_map() -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[tokio::test]
    async fn a_leader_writes() {
        let (client, calls) = counting_client();
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let written = apply(
            &Leadership::standalone(),
            &api,
            "c",
            &config_map(),
            FIELD_MANAGER_OLM,
        )
        .await
        .unwrap();
        assert_eq!(written.metadata.name.as_deref(), Some("c"));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_or_a_lapsed_leader_sends_nothing() {
        let (client, calls) = counting_client();
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let (tx, rx) = watch::channel(LeaderState::Following {
            holder: Some("other".into()),
        });
        let metrics = Metrics::new().unwrap();
        let writer =
            Writer::new(Leadership::from_receiver(rx), FIELD_MANAGER_OLM).with_metrics(&metrics.writes);

        let error = writer.apply(&api, "c", &config_map()).await.unwrap_err();
        assert!(error.is_not_leader());
        assert_eq!(
            error.to_string(),
            "not writing ConfigMap c: this replica does not hold the leader lease"
        );
        let error = writer
            .apply_status(&api, "c", &serde_json::json!({}))
            .await
            .unwrap_err();
        assert!(error.is_not_leader());
        let error = writer
            .delete(&api, "c", &DeleteParams::default())
            .await
            .unwrap_err();
        assert_eq!(error.category(), "not_leader");
        assert_eq!(calls.load(Ordering::SeqCst), 0);

        // Leading: writes go out, until the renew deadline passes without a renewal.
        tx.send_replace(LeaderState::Leading {
            until: Instant::now() + Duration::from_secs(10),
        });
        writer.apply(&api, "c", &config_map()).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(
            writer
                .apply(&api, "c", &config_map())
                .await
                .unwrap_err()
                .is_not_leader()
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let text = prometheus::TextEncoder::new()
            .encode_to_string(&metrics.registry().gather())
            .unwrap();
        assert!(
            text.contains("olm_writes_total{outcome=\"not_leader\",verb=\"apply\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("olm_writes_total{outcome=\"ok\",verb=\"apply\"} 1"),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_in_flight_when_leadership_ends_is_abandoned() {
        let hanging = tower::service_fn(|_request: Request<Body>| {
            std::future::pending::<Result<Response<Body>, std::convert::Infallible>>()
        });
        let api: Api<ConfigMap> = Api::namespaced(Client::new(hanging, "default"), "default");
        let start = Instant::now();
        let (_tx, rx) = watch::channel(LeaderState::Leading {
            until: start + Duration::from_secs(10),
        });
        let writer = Writer::new(Leadership::from_receiver(rx), FIELD_MANAGER_OLM);
        let error = writer.apply(&api, "c", &config_map()).await.unwrap_err();
        assert!(matches!(error, WriteError::LeadershipLapsed { .. }), "{error:?}");
        assert!(error.is_not_leader());
        assert_eq!(Instant::now() - start, Duration::from_secs(10));
    }

    #[test]
    fn status_bodies_carry_only_identity_and_status() {
        let body = status_body::<ConfigMap, _>("c", &serde_json::json!({"phase": "Ready"}));
        assert_eq!(
            body,
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c"},
                "status": {"phase": "Ready"},
            })
        );
    }
}
