//! The caches the reconciles read: one store per watched kind, filled by the
//! shared reflectors that [`crate::watches`] sets up.
//!
//! A store is only complete once its first list has arrived; a reconcile that
//! reads a store checks [`Stores::synced`] first, since an empty store before
//! then would look like "no namespaces, no CSVs".

use std::sync::Arc;

use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Namespace, Node, Secret, ServiceAccount},
    discovery::v1::EndpointSlice,
    rbac::v1::{Role, RoleBinding},
};
use kube::{core::PartialObjectMeta, runtime::reflector::Store};
use olm_api::{
    substrate::Machine,
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, Subscription, SubscriptionStatus},
};
use olm_runtime::live::LiveStores;

pub use olm_runtime::reflector::Synced;

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
/// little memory; Subscriptions as trimmed by [`trim_subscription`].
#[derive(Clone)]
pub struct Stores {
    /// Every ClusterServiceVersion.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every OperatorGroup.
    pub operator_groups: Cache<OperatorGroup>,
    /// Every Namespace, as metadata.
    pub namespaces: Cache<PartialObjectMeta<Namespace>>,
    /// Every Subscription, trimmed ([`trim_subscription`]).
    pub subscriptions: Cache<Subscription>,
    /// Every copied CSV, trimmed (`copiedcsv::trim`): for the finalizer, which
    /// removes an original's copies. Not waited for by [`Stores::synced`]:
    /// the finalizer lists the copies while it fills.
    pub copies: Cache<ClusterServiceVersion>,
}

impl Stores {
    /// Whether every store holds a complete list.
    pub fn synced(&self) -> bool {
        self.csvs.synced.get()
            && self.operator_groups.synced.get()
            && self.namespaces.synced.get()
            && self.subscriptions.synced.get()
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

/// The stores the MachinePool reconcile reads. The objects it makes for its
/// pools (labelled with the pool) are kept as metadata, enough for the
/// applier to see that their live copy is as desired ([`PoolStores::live`]),
/// except the agent DaemonSets, whose status says whether they roll out.
#[derive(Clone)]
pub struct PoolStores {
    /// Every Machine (shared with the CSV controller).
    pub machines: Cache<Machine>,
    /// Every Node, as metadata.
    pub nodes: Cache<PartialObjectMeta<Node>>,
    /// The agent DaemonSets.
    pub daemonsets: Cache<DaemonSet>,
    /// The ServiceAccounts made for pools, as metadata.
    pub service_accounts: Cache<PartialObjectMeta<ServiceAccount>>,
    /// The Roles made for pools, as metadata.
    pub roles: Cache<PartialObjectMeta<Role>>,
    /// The RoleBindings made for pools, as metadata.
    pub role_bindings: Cache<PartialObjectMeta<RoleBinding>>,
    /// The Secrets made for pools (join tokens, credentials), as metadata.
    pub secrets: Cache<PartialObjectMeta<Secret>>,
    /// The EndpointSlices of the `kubernetes` Service.
    pub endpoint_slices: Cache<EndpointSlice>,
}

impl PoolStores {
    /// Whether every store holds a complete list.
    pub fn synced(&self) -> bool {
        self.machines.synced.get()
            && self.nodes.synced.get()
            && self.daemonsets.synced.get()
            && self.service_accounts.synced.get()
            && self.roles.synced.get()
            && self.role_bindings.synced.get()
            && self.secrets.synced.get()
            && self.endpoint_slices.synced.get()
    }

    /// The live copies of the kinds the MachinePool reconcile applies.
    pub fn live(&self) -> LiveStores {
        LiveStores::new()
            .with(self.daemonsets.store.clone())
            .with(self.service_accounts.store.clone())
            .with(self.roles.store.clone())
            .with(self.role_bindings.store.clone())
            .with(self.secrets.store.clone())
    }
}

/// Keeps of a Subscription only what olm-operator reads: its name, namespace and
/// `spec` (the `config` its CSV's Deployments take) and the CSVs its status names
/// (`installedCSV`, `currentCSV`). The rest of the status (conditions, catalog
/// health, plan references) changes often and is for the catalog-operator.
pub fn trim_subscription(subscription: &mut Subscription) {
    let meta = &mut subscription.metadata;
    meta.annotations = None;
    meta.labels = None;
    meta.owner_references = None;
    subscription.status = subscription.status.take().map(|status| SubscriptionStatus {
        installed_csv: status.installed_csv,
        current_csv: status.current_csv,
        ..SubscriptionStatus::default()
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trimmed_subscription_keeps_its_config_and_csvs() {
        let mut subscription: Subscription = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": "etcd", "namespace": "ops", "annotations": {"a": "b"}},
            "spec": {"name": "etcd", "source": "community", "sourceNamespace": "olm",
                     "config": {"env": [{"name": "A", "value": "1"}]}},
            "status": {"installedCSV": "etcd.v1", "currentCSV": "etcd.v2", "state": "UpgradePending",
                       "catalogHealth": [], "conditions": [], "lastUpdated": "2026-11-25T10:00:00Z"}
        }))
        .expect("a Subscription");
        let config = subscription.spec.config.clone();
        trim_subscription(&mut subscription);
        assert_eq!(subscription.spec.config, config);
        assert!(subscription.metadata.annotations.is_none());
        let status = subscription.status.expect("a status");
        assert_eq!(status.installed_csv.as_deref(), Some("etcd.v1"));
        assert_eq!(status.current_csv.as_deref(), Some("etcd.v2"));
        assert_eq!(
            (
                status.state,
                status.catalog_health,
                status.conditions,
                status.last_updated
            ),
            (None, None, None, None)
        );
    }
}
