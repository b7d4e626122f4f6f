//! The caches the reconciles read: one store per watched kind, filled by the
//! shared reflectors that [`crate::watches`] sets up.
//!
//! A store is only complete once its first list has arrived; a reconcile that
//! reads a store checks [`Stores::synced`] first, since an empty store before
//! then would look like "no namespaces, no CSVs".

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use k8s_openapi::api::core::v1::Namespace;
use kube::{core::PartialObjectMeta, runtime::reflector::Store};
use olm_api::{v1::OperatorGroup, v1alpha1::ClusterServiceVersion};

/// Whether a store has received its first complete list; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Synced(Arc<AtomicBool>);

impl Synced {
    /// Not synced yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the store synced (it stays synced across watch restarts: the
    /// store keeps its objects until the new list replaces them).
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether the store has synced.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A store and whether it has synced.
#[derive(Clone)]
pub struct Cache<K: kube::Resource<DynamicType = ()> + Clone + 'static> {
    /// The objects.
    pub store: Store<K>,
    /// Whether `store` holds a complete list.
    pub synced: Synced,
}

/// The stores shared by the controllers. Namespaces are kept as metadata
/// only (name and labels), so that a cluster of thousands of namespaces costs
/// little memory.
#[derive(Clone)]
pub struct Stores {
    /// Every ClusterServiceVersion.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every OperatorGroup.
    pub operator_groups: Cache<OperatorGroup>,
    /// Every Namespace, as metadata.
    pub namespaces: Cache<PartialObjectMeta<Namespace>>,
}

impl Stores {
    /// Whether every store holds a complete list.
    pub fn synced(&self) -> bool {
        self.csvs.synced.get() && self.operator_groups.synced.get() && self.namespaces.synced.get()
    }

    /// The CSVs of `namespace`.
    pub fn csvs_in(&self, namespace: &str) -> Vec<Arc<ClusterServiceVersion>> {
        in_namespace(&self.csvs.store, namespace)
    }

    /// The OperatorGroups of `namespace`.
    pub fn operator_groups_in(&self, namespace: &str) -> Vec<Arc<OperatorGroup>> {
        in_namespace(&self.operator_groups.store, namespace)
    }
}

/// The objects of `store` in `namespace`.
pub fn in_namespace<K>(store: &Store<K>, namespace: &str) -> Vec<Arc<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .state()
        .into_iter()
        .filter(|object| object.meta().namespace.as_deref() == Some(namespace))
        .collect()
}
