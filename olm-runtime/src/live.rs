//! [`LiveStores`]: the applier's view of live objects, read from the binary's
//! shared stores, so that [`Writer::perform`](crate::apply::Writer::perform)
//! skips an owned object whose live copy already carries the desired hash.
//!
//! A binary registers the store of every kind its reconciles apply
//! ([`LiveStores::with`]); a kind with no store registered is always applied.
//! A store that has not synced yet holds nothing, so everything is applied
//! until it has: the skip can only save writes, never lose one.

use std::{fmt, sync::Arc};

use kube::{
    Resource,
    api::ApiResource,
    runtime::reflector::{ObjectRef, Store},
};

use crate::effects::{DESIRED_HASH, Live};

/// Reads the [`DESIRED_HASH`] of one kind's objects from its store.
type Lookup = Arc<dyn Fn(Option<&str>, &str) -> Option<String> + Send + Sync>;

/// The shared stores the applier reads live copies from, one per kind.
#[derive(Clone, Default)]
pub struct LiveStores {
    kinds: Vec<(Kind, Lookup)>,
}

/// A kind, as the applier names it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Kind {
    group: String,
    kind: String,
}

impl Kind {
    fn of(resource: &ApiResource) -> Kind {
        Kind {
            group: resource.group.clone(),
            kind: resource.kind.clone(),
        }
    }
}

impl LiveStores {
    /// No stores: every object is applied.
    pub fn new() -> LiveStores {
        LiveStores::default()
    }

    /// Adds the store of kind `K` (replacing one added before).
    #[must_use]
    pub fn with<K>(mut self, store: Store<K>) -> LiveStores
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        let kind = Kind::of(&ApiResource::erase::<K>(&()));
        let lookup: Lookup = Arc::new(move |namespace, name| {
            let key = match namespace {
                Some(ns) => ObjectRef::new(name).within(ns),
                None => ObjectRef::new(name),
            };
            let object = store.get(&key)?;
            object.meta().annotations.as_ref()?.get(DESIRED_HASH).cloned()
        });
        self.kinds.retain(|(known, _)| *known != kind);
        self.kinds.push((kind, lookup));
        self
    }
}

impl Live for LiveStores {
    fn desired_hash(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Option<String> {
        let kind = Kind::of(resource);
        let (_, lookup) = self.kinds.iter().find(|(known, _)| *known == kind)?;
        lookup(namespace, name)
    }
}

impl fmt::Debug for LiveStores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<&str> = self.kinds.iter().map(|(kind, _)| kind.kind.as_str()).collect();
        f.debug_struct("LiveStores").field("kinds", &kinds).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    use kube::api::ObjectMeta;
    use olm_testkit::stores::listed;

    use super::*;

    fn config_map(namespace: &str, name: &str, hash: Option<&str>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                annotations: hash.map(|h| BTreeMap::from([(DESIRED_HASH.to_owned(), h.to_owned())])),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_hash_comes_from_the_store_of_the_objects_kind() {
        let live = LiveStores::new().with(listed([
            config_map("a", "x", Some("h1")),
            config_map("a", "plain", None),
        ]));
        let config_maps = ApiResource::erase::<ConfigMap>(&());
        let deployments = ApiResource::erase::<Deployment>(&());
        assert_eq!(
            live.desired_hash(&config_maps, Some("a"), "x").as_deref(),
            Some("h1")
        );
        assert_eq!(
            live.desired_hash(&config_maps, Some("b"), "x"),
            None,
            "another namespace"
        );
        assert_eq!(
            live.desired_hash(&config_maps, Some("a"), "plain"),
            None,
            "no hash"
        );
        assert_eq!(live.desired_hash(&config_maps, Some("a"), "gone"), None);
        assert_eq!(live.desired_hash(&deployments, Some("a"), "x"), None, "no store");
    }

    #[test]
    fn a_later_store_of_the_same_kind_replaces_the_first() {
        let live = LiveStores::new()
            .with(listed([config_map("a", "x", Some("old"))]))
            .with(listed([config_map("a", "x", Some("new"))]));
        let config_maps = ApiResource::erase::<ConfigMap>(&());
        assert_eq!(
            live.desired_hash(&config_maps, Some("a"), "x").as_deref(),
            Some("new")
        );
        assert_eq!(format!("{live:?}"), r#"LiveStores { kinds: ["ConfigMap"] }"#);
    }
}
