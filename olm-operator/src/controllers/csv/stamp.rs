//! Stamped writes: every object a CSV's install or OperatorCondition applies
//! carries the hash of its content ([`DESIRED_HASH`], computed as the one
//! applier does, [`Desired::owned`]), and is not written when its live copy
//! in the shared stores ([`LiveCopies`]) already carries that hash and no
//! other writer has taken over a field it sets ([`crate::fields`]). So a new
//! leader sends nothing for an install that is already right, a resync of a
//! settled CSV writes nothing either, and an object someone edited is still
//! put back.

use std::fmt::Debug;

use kube::{Api, Resource};
use olm_runtime::{
    apply::WriteError,
    effects::{DESIRED_HASH, Desired},
};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    context::Context,
    fields::{self, LiveCopies},
};

/// Why a stamped write failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object could not be encoded to hash it (a bug: every object built
    /// is plain JSON).
    #[error("failed to encode {kind} {name} to hash it")]
    Encode {
        /// The kind.
        kind: &'static str,
        /// The name (namespace/name for namespaced objects).
        name: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The API server refused or failed the write, or this replica stopped leading.
    #[error("failed to apply {kind} {name}")]
    Write {
        /// The kind.
        kind: &'static str,
        /// The name (namespace/name for namespaced objects).
        name: String,
        /// The cause.
        #[source]
        source: Box<WriteError>,
    },
}

/// Server-side applies objects stamped with the hash of their content,
/// unless their live copy carries it already.
#[derive(Clone, Copy)]
pub struct Applier<'a> {
    /// Where the writes go through (fenced, counted).
    pub ctx: &'a Context,
    /// The live copies of the objects applied.
    pub live: &'a dyn LiveCopies,
}

impl Applier<'_> {
    /// Applies `obj` stamped with its hash and returns what the API server
    /// stored; `None`, having written nothing, when its live copy carries that
    /// hash already.
    pub async fn apply<K>(&self, api: &Api<K>, obj: &K, kind: &'static str) -> Result<Option<K>, Error>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        let (stamped, current) = stamp(obj, kind, self.live)?;
        if current {
            return Ok(None);
        }
        self.write(api, &stamped, kind).await.map(Some)
    }

    /// Applies `obj` stamped with its hash, whatever its live copy carries.
    pub async fn force<K>(&self, api: &Api<K>, obj: &K, kind: &'static str) -> Result<K, Error>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        let (stamped, _) = stamp(obj, kind, self.live)?;
        self.write(api, &stamped, kind).await
    }

    async fn write<K>(&self, api: &Api<K>, obj: &K, kind: &'static str) -> Result<K, Error>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        self.ctx.apply(api, obj).await.map_err(|source| Error::Write {
            kind,
            name: display_name(obj.meta()),
            source: Box::new(source),
        })
    }
}

/// `obj` stamped with the hash of its content, and whether its copy in
/// `live` is current: it carries that hash and no other writer owns a field
/// `obj` sets. Pure.
pub fn stamp<K>(obj: &K, kind: &'static str, live: &dyn LiveCopies) -> Result<(K, bool), Error>
where
    K: Resource<DynamicType = ()> + Serialize + Clone,
{
    let (desired, current) = desired(obj, kind, live)?;
    let mut stamped = obj.clone();
    stamped.meta_mut().annotations.get_or_insert_default().insert(
        DESIRED_HASH.to_owned(),
        desired.hash().unwrap_or_default().to_owned(),
    );
    Ok((stamped, current))
}

/// `obj` as the one applier writes it (owned whole, stamped with the hash
/// of its content), and whether its copy in `live` is current: it carries
/// that hash and no other writer owns a field `obj` sets. Pure.
pub fn desired<K>(obj: &K, kind: &'static str, live: &dyn LiveCopies) -> Result<(Desired, bool), Error>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let encode = |source| Error::Encode {
        kind,
        name: display_name(obj.meta()),
        source,
    };
    let desired = Desired::owned(obj).map_err(encode)?;
    let hash = desired.hash().unwrap_or_default();
    let (resource, namespace, name) = (&desired.resource, desired.namespace(), desired.name());
    let carried = live.desired_hash(resource, namespace, name);
    let current = carried.as_deref() == Some(hash) && {
        let foreign = live.foreign_fields(resource, namespace, name);
        let value = serde_json::to_value(&desired.object).map_err(encode)?;
        !fields::overlaps(&fields::set_paths(&value), &foreign)
    };
    Ok((desired, current))
}

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn display_name(meta: &kube::api::ObjectMeta) -> String {
    match (&meta.namespace, &meta.name) {
        (Some(namespace), Some(name)) => format!("{namespace}/{name}"),
        (_, name) => name.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::ServiceAccount};
    use kube::{ResourceExt, core::PartialObjectMeta};
    use olm_runtime::live::LiveStores;
    use olm_testkit::stores::listed;

    use super::*;

    fn account(name: &str) -> ServiceAccount {
        ServiceAccount {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ops".to_owned()),
                ..Default::default()
            },
            ..ServiceAccount::default()
        }
    }

    fn live_copy(stamped: &ServiceAccount) -> PartialObjectMeta<ServiceAccount> {
        PartialObjectMeta {
            types: None,
            metadata: stamped.metadata.clone(),
            _phantom: std::marker::PhantomData,
        }
    }

    #[test]
    fn an_object_whose_live_copy_carries_its_hash_is_current() {
        let (stamped, current) = stamp(&account("demo"), "ServiceAccount", &()).expect("stamps");
        assert!(!current, "no store: always written");
        let hash = stamped.annotations().get(DESIRED_HASH).cloned().expect("a hash");
        assert_eq!(hash.len(), 16);

        let live = LiveStores::new().with(listed([live_copy(&stamped)]));
        let (again, current) = stamp(&account("demo"), "ServiceAccount", &live).expect("stamps");
        assert!(current, "the live copy carries the hash");
        assert_eq!(again, stamped, "the same object, the same hash");

        let mut changed = account("demo");
        changed.automount_service_account_token = Some(false);
        let (_, current) = stamp(&changed, "ServiceAccount", &live).expect("stamps");
        assert!(!current, "another content, another hash");
        let (_, current) = stamp(&account("other"), "ServiceAccount", &live).expect("stamps");
        assert!(!current, "no live copy");
        let deployment = Deployment {
            metadata: stamped.metadata.clone(),
            ..Deployment::default()
        };
        let (_, current) = stamp(&deployment, "Deployment", &live).expect("stamps");
        assert!(!current, "another kind");
    }
}
