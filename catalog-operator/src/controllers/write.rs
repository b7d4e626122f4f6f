//! Fenced writes that [`olm_runtime::apply::Writer`] does not offer: creating an
//! object with `generateName` (InstallPlans), and server-side applying objects
//! whose kind is only known at run time (the steps of an InstallPlan).
//!
//! Both follow the runtime's fencing rule: nothing is sent unless this replica
//! leads, and a request still in flight when leadership ends is abandoned.

use std::fmt::Debug;

use kube::{
    Api, Resource,
    api::{DynamicObject, Patch, PatchParams, PostParams},
};
use olm_runtime::{
    apply::{WriteError, Writer},
    leader::{LeaderState, holds_at},
};
use serde::{Serialize, de::DeserializeOwned};
use tokio::time::Instant;

/// The deadline of a write: `None` for a standalone replica (no limit).
fn fence(writer: &Writer, kind: &str, name: &str) -> Result<Option<Instant>, WriteError> {
    match writer.leadership().state() {
        LeaderState::Standalone => Ok(None),
        LeaderState::Leading { until } if holds_at(until, Instant::now()) => Ok(Some(until)),
        _ => Err(WriteError::NotLeader {
            kind: kind.to_owned(),
            name: name.to_owned(),
        }),
    }
}

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

/// Creates `obj` (which may use `metadata.generateName`) as the writer's field manager.
pub async fn create<K>(writer: &Writer, api: &Api<K>, obj: &K) -> Result<K, WriteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let kind = K::kind(&()).into_owned();
    let name = obj
        .meta()
        .name
        .clone()
        .or_else(|| obj.meta().generate_name.clone())
        .unwrap_or_default();
    let deadline = fence(writer, &kind, &name)?;
    let params = PostParams {
        field_manager: Some(writer.manager().to_owned()),
        ..PostParams::default()
    };
    fenced(deadline, &kind, &name, api.create(&params, obj))
        .await?
        .map_err(|source| WriteError::Apply { kind, name, source })
}

/// Server-side applies a dynamically typed object as the writer's field manager,
/// forcing ownership of the fields it sets.
pub async fn apply_dynamic(
    writer: &Writer,
    api: &Api<DynamicObject>,
    kind: &str,
    name: &str,
    obj: &DynamicObject,
) -> Result<DynamicObject, WriteError> {
    let deadline = fence(writer, kind, name)?;
    let params = PatchParams::apply(writer.manager()).force();
    fenced(deadline, kind, name, api.patch(name, &params, &Patch::Apply(obj)))
        .await?
        .map_err(|source| WriteError::Apply {
            kind: kind.to_owned(),
            name: name.to_owned(),
            source,
        })
}
