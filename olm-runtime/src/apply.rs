//! Fenced writes: server-side apply, create, status apply, delete and dynamic apply
//! that refuse to run unless this replica leads.
//!
//! Every write of a controller goes through a [`Writer`], which bundles the
//! leadership handle, the field manager and the write metrics (every write is
//! counted by verb and outcome); the free functions are its building blocks. This is the one
//! place where fencing is enforced: [`Leadership::is_leader`] is checked immediately
//! before each request, and a replica that is not the leader gets
//! [`WriteError::NotLeader`] without anything being sent. A request still in flight
//! when leadership ends is abandoned ([`WriteError::LeadershipLapsed`]).

use std::fmt::Debug;

use kube::{
    Api, Resource,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
};
use serde::{Serialize, de::DeserializeOwned};

use tokio::time::Instant;

use crate::{
    errors::{ErrorClass, classify},
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
    /// The API server refused or failed the create.
    #[error("failed to create {kind} {name}")]
    Create {
        /// Kind of the object.
        kind: String,
        /// Name (or `generateName` prefix) of the object.
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
            WriteError::Apply { .. }
            | WriteError::Create { .. }
            | WriteError::ApplyStatus { .. }
            | WriteError::Delete { .. } => "api",
        }
    }

    /// What kind of failure this is: the [`classify`] class of the API error, and
    /// `Transient` for a write that fencing refused (the leader will make it).
    pub fn class(&self) -> ErrorClass {
        self.api_error().map_or(ErrorClass::Transient, classify)
    }

    /// Whether fencing refused or abandoned the write.
    pub fn is_not_leader(&self) -> bool {
        matches!(
            self,
            WriteError::NotLeader { .. } | WriteError::LeadershipLapsed { .. }
        )
    }

    /// The kind and name of the object the write was for.
    pub fn object(&self) -> (&str, &str) {
        match self {
            WriteError::NotLeader { kind, name }
            | WriteError::LeadershipLapsed { kind, name }
            | WriteError::Apply { kind, name, .. }
            | WriteError::Create { kind, name, .. }
            | WriteError::ApplyStatus { kind, name, .. }
            | WriteError::Delete { kind, name, .. } => (kind, name),
        }
    }

    /// The API error, if the API server answered.
    pub fn api_error(&self) -> Option<&kube::Error> {
        match self {
            WriteError::NotLeader { .. } | WriteError::LeadershipLapsed { .. } => None,
            WriteError::Apply { source, .. }
            | WriteError::Create { source, .. }
            | WriteError::ApplyStatus { source, .. }
            | WriteError::Delete { source, .. } => Some(source),
        }
    }
}

fn kind_of<K: Resource<DynamicType = ()>>() -> String {
    K::kind(&()).into_owned()
}

/// How long a write of `kind` `name` may take: until leadership ends (`Some`), or
/// without limit for a standalone replica (`None`). Refuses when this replica does
/// not lead.
fn fence(leadership: &Leadership, kind: &str, name: &str) -> Result<Option<Instant>, WriteError> {
    // One snapshot of the state, so the check and the deadline agree.
    match leadership.state() {
        LeaderState::Standalone => Ok(None),
        LeaderState::Leading { until } if holds_at(until, Instant::now()) => Ok(Some(until)),
        _ => Err(WriteError::NotLeader {
            kind: kind.to_owned(),
            name: name.to_owned(),
        }),
    }
}

/// Runs `request`, abandoning it if leadership ends first, so that a write stuck on a
/// slow connection is not left to land long after another replica took over.
async fn fenced<T>(
    deadline: Option<Instant>,
    kind: &str,
    name: &str,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, WriteError> {
    match deadline {
        None => Ok(request.await),
        Some(deadline) => {
            tokio::time::timeout_at(deadline, request)
                .await
                .map_err(|_| WriteError::LeadershipLapsed {
                    kind: kind.to_owned(),
                    name: name.to_owned(),
                })
        }
    }
}

/// The fenced server-side apply behind [`apply`] and [`apply_dynamic`]: `kind`
/// names the object in errors.
async fn apply_as<K>(
    leadership: &Leadership,
    api: &Api<K>,
    kind: String,
    name: &str,
    obj: &K,
    manager: &str,
) -> Result<K, WriteError>
where
    K: Clone + DeserializeOwned + Serialize + Debug,
{
    let deadline = fence(leadership, &kind, name)?;
    let params = PatchParams::apply(manager).force();
    fenced(
        deadline,
        &kind,
        name,
        api.patch(name, &params, &Patch::Apply(obj)),
    )
    .await?
    .map_err(|source| WriteError::Apply {
        kind,
        name: name.to_owned(),
        source,
    })
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
    apply_as(leadership, api, kind_of::<K>(), name, obj, manager).await
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
    apply_status_at(leadership, api, (name, None), status, manager).await
}

/// [`apply_status()`] of `name` only while the object is at
/// `resource_version`, when given: the API server refuses the write (HTTP
/// 409) once the object changed since it was read, so that a status decided
/// from an object older than the last write cannot overwrite that write.
pub async fn apply_status_at<K, S>(
    leadership: &Leadership,
    api: &Api<K>,
    (name, resource_version): (&str, Option<&str>),
    status: &S,
    manager: &str,
) -> Result<K, WriteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize,
{
    let kind = kind_of::<K>();
    let deadline = fence(leadership, &kind, name)?;
    let body = status_body::<K, S>(name, resource_version, status);
    let params = PatchParams::apply(manager).force();
    fenced(
        deadline,
        &kind,
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

fn status_body<K: Resource<DynamicType = ()>, S: Serialize>(
    name: &str,
    resource_version: Option<&str>,
    status: &S,
) -> serde_json::Value {
    let mut metadata = serde_json::json!({ "name": name });
    if let Some(version) = resource_version {
        metadata["resourceVersion"] = version.into();
    }
    serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": metadata,
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
    delete_as(leadership, api, kind_of::<K>(), name, params).await
}

/// [`delete()`] for a kind known only at run time (`kind` names it in errors).
pub async fn delete_dynamic(
    leadership: &Leadership,
    api: &Api<DynamicObject>,
    kind: &str,
    name: &str,
    params: &DeleteParams,
) -> Result<bool, WriteError> {
    delete_as(leadership, api, kind.to_owned(), name, params).await
}

async fn delete_as<K>(
    leadership: &Leadership,
    api: &Api<K>,
    kind: String,
    name: &str,
    params: &DeleteParams,
) -> Result<bool, WriteError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let deadline = fence(leadership, &kind, name)?;
    match fenced(deadline, &kind, name, api.delete(name, params)).await? {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(false),
        Err(source) => Err(WriteError::Delete {
            kind,
            name: name.to_owned(),
            source,
        }),
    }
}

/// Creates `obj`, which may name itself by `metadata.generateName`, as field manager
/// `manager`. An object that exists already is an error (HTTP 409).
pub async fn create<K>(leadership: &Leadership, api: &Api<K>, obj: &K, manager: &str) -> Result<K, WriteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let kind = kind_of::<K>();
    let meta = obj.meta();
    let name = meta
        .name
        .clone()
        .or_else(|| meta.generate_name.clone())
        .unwrap_or_default();
    let deadline = fence(leadership, &kind, &name)?;
    let params = PostParams {
        field_manager: Some(manager.to_owned()),
        ..PostParams::default()
    };
    fenced(deadline, &kind, &name, api.create(&params, obj))
        .await?
        .map_err(|source| WriteError::Create { kind, name, source })
}

/// Server-side applies `obj`, whose kind is known only at run time (its `types`
/// say it; `api` is made from its `ApiResource`), as `name` with field manager
/// `manager`, forcing ownership of the fields it sets.
pub async fn apply_dynamic(
    leadership: &Leadership,
    api: &Api<DynamicObject>,
    name: &str,
    obj: &DynamicObject,
    manager: &str,
) -> Result<DynamicObject, WriteError> {
    let kind = obj
        .types
        .as_ref()
        .map_or_else(|| "object".to_owned(), |types| types.kind.clone());
    apply_as(leadership, api, kind, name, obj, manager).await
}

/// Creates `obj`, whose kind is known only at run time (its `types` say it), as
/// field manager `manager`, and returns the object created. Returns `None`,
/// having written nothing, when an object of its name exists already (HTTP 409).
pub async fn create_dynamic(
    leadership: &Leadership,
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    manager: &str,
) -> Result<Option<DynamicObject>, WriteError> {
    let kind = obj
        .types
        .as_ref()
        .map_or_else(|| "object".to_owned(), |types| types.kind.clone());
    let name = obj.metadata.name.clone().unwrap_or_default();
    let deadline = fence(leadership, &kind, &name)?;
    let params = PostParams {
        field_manager: Some(manager.to_owned()),
        ..PostParams::default()
    };
    match fenced(deadline, &kind, &name, api.create(&params, obj)).await? {
        Ok(created) => Ok(Some(created)),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
        Err(source) => Err(WriteError::Create { kind, name, source }),
    }
}

/// Server-side applies `status` to the status subresource of `name`, whose kind
/// (`resource`) is known only at run time. Returns `false`, having written
/// nothing, when the object does not exist (HTTP 404).
pub async fn apply_status_dynamic(
    leadership: &Leadership,
    api: &Api<DynamicObject>,
    resource: &kube::api::ApiResource,
    name: &str,
    status: &serde_json::Value,
    manager: &str,
) -> Result<bool, WriteError> {
    let kind = resource.kind.clone();
    let deadline = fence(leadership, &kind, name)?;
    let body = serde_json::json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": { "name": name },
        "status": status,
    });
    let params = PatchParams::apply(manager).force();
    match fenced(
        deadline,
        &kind,
        name,
        api.patch_status(name, &params, &Patch::Apply(&body)),
    )
    .await?
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(source) => Err(WriteError::ApplyStatus {
            kind,
            name: name.to_owned(),
            source,
        }),
    }
}

/// What the object under a name must be for a guarded write
/// ([`patch_status_if_dynamic`]) to land on it: the object of a UID, carrying a
/// label. An object that took the name since the write was decided is left alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Guard {
    /// The UID the object must have.
    pub uid: Option<String>,
    /// A label (key, value) the object must carry.
    pub label: Option<(String, String)>,
    /// The resource version the object must be at: the write is refused once
    /// another writer changed the object since it was read, so that a status
    /// two writers share is never decided from a stale copy.
    pub resource_version: Option<String>,
}

impl Guard {
    /// Whether it checks nothing.
    pub fn is_empty(&self) -> bool {
        self.uid.is_none() && self.label.is_none() && self.resource_version.is_none()
    }

    /// The JSON Patch `test` operations that fail unless the object is the one guarded.
    fn tests(&self) -> Vec<serde_json::Value> {
        let uid = self
            .uid
            .iter()
            .map(|uid| serde_json::json!({"op": "test", "path": "/metadata/uid", "value": uid}));
        let label = self.label.iter().map(|(key, value)| {
            let key = key.replace('~', "~0").replace('/', "~1");
            serde_json::json!({"op": "test", "path": format!("/metadata/labels/{key}"), "value": value})
        });
        let version = self.resource_version.iter().map(
            |version| serde_json::json!({"op": "test", "path": "/metadata/resourceVersion", "value": version}),
        );
        uid.chain(label).chain(version).collect()
    }
}

/// What became of a guarded write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guarded {
    /// Written.
    Written,
    /// No object of the name (HTTP 404): nothing written.
    Gone,
    /// The object of the name is not the one guarded: nothing written.
    Taken,
}

/// Replaces the whole status of `name`, whose kind (`resource`) is known only
/// at run time, only if the object under that name is the one `guard`
/// describes: one JSON Patch whose `test` operations the API server checks
/// against the stored object in the same update. (A server-side apply of the
/// status subresource carrying `metadata.uid` would not do: the API server
/// keeps the stored metadata for a status write and never compares the UID.)
/// Returns [`Guarded::Taken`] when a test fails (HTTP 422 without field
/// causes, which a failed validation always names).
pub async fn patch_status_if_dynamic(
    leadership: &Leadership,
    api: &Api<DynamicObject>,
    resource: &kube::api::ApiResource,
    name: &str,
    status: &serde_json::Value,
    guard: &Guard,
    manager: &str,
) -> Result<Guarded, WriteError> {
    let kind = resource.kind.clone();
    let deadline = fence(leadership, &kind, name)?;
    let mut operations = guard.tests();
    operations.push(serde_json::json!({"op": "add", "path": "/status", "value": status}));
    let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(operations))
        .expect("test and add operations are a JSON Patch");
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    match fenced(
        deadline,
        &kind,
        name,
        api.patch_status(name, &params, &Patch::<()>::Json(patch)),
    )
    .await?
    {
        Ok(_) => Ok(Guarded::Written),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Guarded::Gone),
        Err(kube::Error::Api(status)) if failed_test(&status) => Ok(Guarded::Taken),
        Err(source) => Err(WriteError::ApplyStatus {
            kind,
            name: name.to_owned(),
            source,
        }),
    }
}

/// Whether the API server refused a JSON Patch because one of its `test`
/// operations failed: HTTP 422 naming no invalid field.
fn failed_test(status: &kube::core::Status) -> bool {
    status.code == 422
        && status
            .details
            .as_ref()
            .is_none_or(|details| details.causes.is_empty())
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

    /// See [`create()`].
    pub async fn create<K>(&self, api: &Api<K>, obj: &K) -> Result<K, WriteError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
    {
        self.record("create", create(&self.leadership, api, obj, self.manager).await)
    }

    /// See [`apply_dynamic()`]; counted as verb `apply`.
    pub async fn apply_dynamic(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        obj: &DynamicObject,
    ) -> Result<DynamicObject, WriteError> {
        self.record(
            "apply",
            apply_dynamic(&self.leadership, api, name, obj, self.manager).await,
        )
    }

    /// See [`create_dynamic()`]; counted as verb `create`.
    pub async fn create_dynamic(
        &self,
        api: &Api<DynamicObject>,
        obj: &DynamicObject,
    ) -> Result<Option<DynamicObject>, WriteError> {
        self.record(
            "create",
            create_dynamic(&self.leadership, api, obj, self.manager).await,
        )
    }

    /// See [`apply_status_dynamic()`]; counted as verb `apply_status`.
    pub async fn apply_status_dynamic(
        &self,
        api: &Api<DynamicObject>,
        resource: &kube::api::ApiResource,
        name: &str,
        status: &serde_json::Value,
    ) -> Result<bool, WriteError> {
        self.record(
            "apply_status",
            apply_status_dynamic(&self.leadership, api, resource, name, status, self.manager).await,
        )
    }

    /// See [`patch_status_if_dynamic()`]; counted as verb `patch_status`.
    pub async fn patch_status_if_dynamic(
        &self,
        api: &Api<DynamicObject>,
        resource: &kube::api::ApiResource,
        name: &str,
        status: &serde_json::Value,
        guard: &Guard,
    ) -> Result<Guarded, WriteError> {
        let result =
            patch_status_if_dynamic(&self.leadership, api, resource, name, status, guard, self.manager).await;
        self.record("patch_status", result)
    }

    /// See [`apply_status()`].
    pub async fn apply_status<K, S>(&self, api: &Api<K>, name: &str, status: &S) -> Result<K, WriteError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
        S: Serialize,
    {
        self.apply_status_at(api, (name, None), status).await
    }

    /// See [`apply_status_at()`]; counted as verb `apply_status`.
    pub async fn apply_status_at<K, S>(
        &self,
        api: &Api<K>,
        at: (&str, Option<&str>),
        status: &S,
    ) -> Result<K, WriteError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
        S: Serialize,
    {
        self.record(
            "apply_status",
            apply_status_at(&self.leadership, api, at, status, self.manager).await,
        )
    }

    /// See [`delete_dynamic()`]; counted as verb `delete`.
    pub async fn delete_dynamic(
        &self,
        api: &Api<DynamicObject>,
        kind: &str,
        name: &str,
        params: &DeleteParams,
    ) -> Result<bool, WriteError> {
        self.record(
            "delete",
            delete_dynamic(&self.leadership, api, kind, name, params).await,
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
    use std::time::Duration;

    use http::{Request, Response};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{Client, api::ObjectMeta, client::Body};
    use olm_testkit::mock_api::{Answer, MockApi};
    use tokio::{sync::watch, time::Instant};

    use super::*;
    use crate::metrics::Metrics;

    /// The answer of the mocked API servers below: a ConfigMap named `c`.
    fn named_c() -> Option<Answer> {
        Some(Answer::ok(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
        })))
    }

    /// A client whose every request is recorded and answered with a ConfigMap named `c`.
    fn counting_client() -> (Client, MockApi) {
        MockApi::new(|_| named_c())
    }

    /// The requests `api` received, each checked to apply as olm-operator, by force.
    fn applies(api: &MockApi) -> usize {
        let requests = api.requests();
        for request in &requests {
            let query = request.query.as_deref().unwrap_or_default();
            assert!(query.contains("fieldManager=olm-operator"), "{request:?}");
            assert!(query.contains("force=true"), "{request:?}");
        }
        requests.len()
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
        assert_eq!(applies(&calls), 1);
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
        assert_eq!(applies(&calls), 0);

        // Leading: writes go out, until the renew deadline passes without a renewal.
        tx.send_replace(LeaderState::Leading {
            until: Instant::now() + Duration::from_secs(10),
        });
        writer.apply(&api, "c", &config_map()).await.unwrap();
        assert_eq!(applies(&calls), 1);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(
            writer
                .apply(&api, "c", &config_map())
                .await
                .unwrap_err()
                .is_not_leader()
        );
        assert_eq!(applies(&calls), 1);

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
        // An API server that never answers: more than the mocked one can play.
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

    fn dynamic_config_map() -> (kube::discovery::ApiResource, DynamicObject) {
        let resource = kube::discovery::ApiResource::erase::<ConfigMap>(&());
        let obj = DynamicObject::new("c", &resource).data(serde_json::json!({"data": {"k": "v"}}));
        (resource, obj)
    }

    #[tokio::test]
    async fn create_and_dynamic_apply_are_fenced_and_counted() {
        let (client, seen) = MockApi::new(|_| named_c());
        let typed: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let (resource, obj) = dynamic_config_map();
        let dynamic: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
        let metrics = Metrics::new().unwrap();
        let (_tx, rx) = watch::channel(LeaderState::Following { holder: None });
        let follower =
            Writer::new(Leadership::from_receiver(rx), FIELD_MANAGER_CATALOG).with_metrics(&metrics.writes);
        let generated = ConfigMap {
            metadata: ObjectMeta {
                generate_name: Some("c-".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let error = follower.create(&typed, &generated).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "not writing ConfigMap c-: this replica does not hold the leader lease"
        );
        let error = follower.apply_dynamic(&dynamic, "c", &obj).await.unwrap_err();
        assert!(error.is_not_leader(), "{error}");
        assert_eq!(error.class(), ErrorClass::Transient);
        assert!(seen.requests().is_empty(), "nothing was sent");

        let leader =
            Writer::new(Leadership::standalone(), FIELD_MANAGER_CATALOG).with_metrics(&metrics.writes);
        leader.create(&typed, &generated).await.unwrap();
        leader.apply_dynamic(&dynamic, "c", &obj).await.unwrap();
        let requests = seen.requests();
        assert_eq!(requests.len(), 2, "{requests:?}");
        let query = |i: usize| requests[i].query.as_deref().unwrap_or_default();
        assert_eq!(requests[0].line, "POST /api/v1/namespaces/default/configmaps");
        assert!(query(0).contains("fieldManager=catalog-operator"), "{requests:?}");
        assert_eq!(requests[1].line, "PATCH /api/v1/namespaces/default/configmaps/c");
        assert!(
            query(1).contains("fieldManager=catalog-operator") && query(1).contains("force=true"),
            "{requests:?}"
        );
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&metrics.registry().gather())
            .unwrap();
        for series in [
            "olm_writes_total{outcome=\"not_leader\",verb=\"create\"} 1",
            "olm_writes_total{outcome=\"not_leader\",verb=\"apply\"} 1",
            "olm_writes_total{outcome=\"ok\",verb=\"create\"} 1",
            "olm_writes_total{outcome=\"ok\",verb=\"apply\"} 1",
        ] {
            assert!(text.contains(series), "{series} in {text}");
        }
    }

    #[test]
    fn write_errors_carry_the_class_of_the_api_answer() {
        let forbidden = WriteError::Create {
            kind: "Pod".into(),
            name: "p".into(),
            source: kube::Error::Api(Box::new(kube::core::Status {
                code: 403,
                ..Default::default()
            })),
        };
        assert_eq!(forbidden.class(), ErrorClass::Forbidden);
        assert_eq!(forbidden.category(), "api");
        assert_eq!(forbidden.to_string(), "failed to create Pod p");
    }

    #[test]
    fn status_bodies_carry_only_identity_and_status() {
        let body = status_body::<ConfigMap, _>("c", None, &serde_json::json!({"phase": "Ready"}));
        assert_eq!(
            body,
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c"},
                "status": {"phase": "Ready"},
            })
        );
        // Bound to the version read: the API server refuses it once the object changed.
        let bound = status_body::<ConfigMap, _>("c", Some("42"), &serde_json::json!({}));
        assert_eq!(
            bound["metadata"],
            serde_json::json!({"name": "c", "resourceVersion": "42"})
        );
    }
}
