//! The caches the reconciles read: one store per watched kind, filled by the
//! shared reflectors that [`crate::watches`] sets up.
//!
//! A store is only complete once its first list has arrived; a reconcile that
//! reads a store checks [`Stores::synced`] first, since an empty store before
//! then would look like "no namespaces, no CSVs".

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        apps::v1::{DaemonSet, Deployment},
        core::v1::{ConfigMap, Namespace, Node, Secret, Service, ServiceAccount},
        discovery::v1::EndpointSlice,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    api::ApiResource,
    core::PartialObjectMeta,
    runtime::reflector::{ObjectRef, Store},
};
use olm_api::{
    substrate::{Machine, MachinePool},
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, Subscription, SubscriptionStatus},
    v2::OperatorCondition,
};
use olm_runtime::{
    effects::{DESIRED_HASH, Live},
    live::LiveStores,
};

use crate::{
    controllers::csv::crd_summary::CrdSummary,
    fields::{Key, LiveCopies, Path},
};

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
    /// Every Machine (shared with the MachinePool controller): the units of
    /// machine CSVs.
    pub machines: Cache<Machine>,
    /// Every copied CSV, trimmed (`copiedcsv::trim`): for the finalizer, which
    /// removes an original's copies. Not waited for by [`Stores::synced`]:
    /// the finalizer lists the copies while it fills.
    pub copies: Cache<ClusterServiceVersion>,
    /// What CSV installs write, as the applier needs it ([`InstallStores`]).
    pub installs: InstallStores,
    /// The ConfigMaps of relations' remote data (labelled with their
    /// Relation), as metadata: delivered into the Deployments of CSVs.
    pub relation_data: Cache<PartialObjectMeta<ConfigMap>>,
}

impl Stores {
    /// Whether every store holds a complete list.
    pub fn synced(&self) -> bool {
        self.csvs.synced.get()
            && self.operator_groups.synced.get()
            && self.namespaces.synced.get()
            && self.subscriptions.synced.get()
            && self.machines.synced.get()
            && self.relation_data.synced.get()
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

/// The stores only the CSV reconcile reads: every APIService (its
/// requirements) and MachinePool (of machine CSVs), and the live copies of
/// the objects CSV installs write, so that the CSV reconcile skips those
/// already as desired ([`InstallStores::live`]): the
/// Deployments (with their status, [`trim_deployment`]), ServiceAccounts and
/// RBAC labelled `olm.owner.kind=ClusterServiceVersion`, and the Roles and
/// RoleBindings labelled `olm.managed=true` of the OperatorConditions, as
/// metadata trimmed by [`trim_install_object`]; and every OperatorCondition,
/// whole (small, and their spec and status are read).
#[derive(Clone)]
pub struct InstallStores {
    /// The Deployments of CSVs, trimmed ([`trim_deployment`]): metadata,
    /// replicas and status.
    pub deployments: Cache<Deployment>,
    /// The ServiceAccounts of CSVs, as metadata.
    pub service_accounts: Cache<PartialObjectMeta<ServiceAccount>>,
    /// The Roles of CSVs, as metadata.
    pub roles: Cache<PartialObjectMeta<Role>>,
    /// The RoleBindings of CSVs, as metadata.
    pub role_bindings: Cache<PartialObjectMeta<RoleBinding>>,
    /// The ClusterRoles of CSVs, as metadata.
    pub cluster_roles: Cache<PartialObjectMeta<ClusterRole>>,
    /// The ClusterRoleBindings of CSVs, as metadata.
    pub cluster_role_bindings: Cache<PartialObjectMeta<ClusterRoleBinding>>,
    /// The Roles of OperatorConditions (`olm.managed=true`), as metadata.
    pub condition_roles: Cache<PartialObjectMeta<Role>>,
    /// The RoleBindings of OperatorConditions (`olm.managed=true`), as metadata.
    pub condition_role_bindings: Cache<PartialObjectMeta<RoleBinding>>,
    /// Every OperatorCondition.
    pub operator_conditions: Cache<OperatorCondition>,
    /// Every APIService, without its `caBundle` and with its managed fields
    /// kept as the paths of the foreign ones ([`crate::fields::keep_foreign_fields`]).
    pub api_services: Cache<APIService>,
    /// Every MachinePool (shared with the MachinePool controller).
    pub machine_pools: Cache<MachinePool>,
    /// Every CRD, summed up: no schemas ([`CrdSummary`]).
    pub crds: Cache<CrdSummary>,
    /// The certificate Secrets of CSVs, as metadata.
    pub secrets: Cache<PartialObjectMeta<Secret>>,
    /// The Services of CSVs' serving Deployments, as metadata.
    pub services: Cache<PartialObjectMeta<Service>>,
    /// The validating webhook configurations of CSVs, as metadata.
    pub validating_webhooks: Cache<PartialObjectMeta<ValidatingWebhookConfiguration>>,
    /// The mutating webhook configurations of CSVs, as metadata.
    pub mutating_webhooks: Cache<PartialObjectMeta<MutatingWebhookConfiguration>>,
}

impl InstallStores {
    /// Whether every store holds a complete list.
    pub fn synced(&self) -> bool {
        self.deployments.synced.get()
            && self.service_accounts.synced.get()
            && self.roles.synced.get()
            && self.role_bindings.synced.get()
            && self.cluster_roles.synced.get()
            && self.cluster_role_bindings.synced.get()
            && self.condition_roles.synced.get()
            && self.condition_role_bindings.synced.get()
            && self.operator_conditions.synced.get()
            && self.api_services.synced.get()
            && self.machine_pools.synced.get()
            && self.crds.synced.get()
            && self.secrets.synced.get()
            && self.services.synced.get()
            && self.validating_webhooks.synced.get()
            && self.mutating_webhooks.synced.get()
    }

    /// The live copies of the kinds a CSV install applies.
    pub fn live(&self) -> InstallLive {
        InstallLive::default()
            .with(self.deployments.store.clone())
            .with(self.service_accounts.store.clone())
            .with(self.roles.store.clone())
            .with(self.role_bindings.store.clone())
            .with(self.cluster_roles.store.clone())
            .with(self.cluster_role_bindings.store.clone())
            .with(self.condition_roles.store.clone())
            .with(self.condition_role_bindings.store.clone())
            .with(self.operator_conditions.store.clone())
            .with(self.secrets.store.clone())
            .with(self.services.store.clone())
            .with(self.validating_webhooks.store.clone())
            .with(self.mutating_webhooks.store.clone())
            .with(self.api_services.store.clone())
    }
}

#[cfg(test)]
impl<K: kube::Resource<DynamicType = ()> + Clone + 'static> Cache<K> {
    /// A synced store holding `objects` (for tests).
    pub fn listed(objects: impl IntoIterator<Item = K>) -> Self {
        let synced = Synced::new();
        synced.set();
        Cache {
            store: olm_testkit::stores::listed(objects),
            synced,
        }
    }
}

#[cfg(test)]
impl Stores {
    /// Synced stores holding nothing but `installs` (for tests).
    pub fn with_installs(installs: InstallStores) -> Self {
        Stores {
            csvs: Cache::listed([]),
            operator_groups: Cache::listed([]),
            namespaces: Cache::listed([]),
            subscriptions: Cache::listed([]),
            machines: Cache::listed([]),
            copies: Cache::listed([]),
            installs,
            relation_data: Cache::listed([]),
        }
    }
}

#[cfg(test)]
impl InstallStores {
    /// Synced stores holding nothing (for tests).
    pub fn empty() -> Self {
        InstallStores {
            deployments: Cache::listed([]),
            service_accounts: Cache::listed([]),
            roles: Cache::listed([]),
            role_bindings: Cache::listed([]),
            cluster_roles: Cache::listed([]),
            cluster_role_bindings: Cache::listed([]),
            condition_roles: Cache::listed([]),
            condition_role_bindings: Cache::listed([]),
            operator_conditions: Cache::listed([]),
            api_services: Cache::listed([]),
            machine_pools: Cache::listed([]),
            crds: Cache::listed([]),
            secrets: Cache::listed([]),
            services: Cache::listed([]),
            validating_webhooks: Cache::listed([]),
            mutating_webhooks: Cache::listed([]),
        }
    }
}

/// Reads the metadata of one kind's object from a store.
type Lookup = Arc<dyn Fn(Option<&str>, &str) -> Option<ObjectMeta> + Send + Sync>;

/// Reads the metadata of every object of one kind from a store.
type All = Arc<dyn Fn() -> Vec<ObjectMeta> + Send + Sync>;

/// One store of [`InstallLive`]: its kind, and how to read it.
#[derive(Clone)]
struct KindStore {
    group: String,
    kind: String,
    lookup: Lookup,
    all: All,
}

/// The applier's view of what CSV installs write: the desired hash and the
/// fields other writers own ([`crate::fields`]) of each live copy, and which
/// objects carry a CSV's owner labels (what pruning removes). Roles and
/// RoleBindings are watched twice (those of the installs and those of the
/// OperatorConditions carry different labels): both stores are asked.
#[derive(Clone, Default)]
pub struct InstallLive {
    kinds: Vec<KindStore>,
}

impl InstallLive {
    /// Adds the store of kind `K` (beside any of the same kind).
    #[must_use]
    pub fn with<K>(mut self, store: Store<K>) -> InstallLive
    where
        K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        let resource = ApiResource::erase::<K>(&());
        let reader = store.clone();
        let lookup: Lookup = Arc::new(move |namespace, name| {
            let key = match namespace {
                Some(ns) => ObjectRef::new(name).within(ns),
                None => ObjectRef::new(name),
            };
            Some(reader.get(&key)?.meta().clone())
        });
        let all: All = Arc::new(move || store.state().iter().map(|o| o.meta().clone()).collect());
        self.kinds.push(KindStore {
            group: resource.group,
            kind: resource.kind,
            lookup,
            all,
        });
        self
    }

    /// The stores of `resource`'s kind.
    fn of<'a>(&'a self, resource: &'a ApiResource) -> impl Iterator<Item = &'a KindStore> + 'a {
        self.kinds
            .iter()
            .filter(|store| store.group == resource.group && store.kind == resource.kind)
    }

    /// The metadata of the live copy, from the first store of its kind that holds it.
    fn meta(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Option<ObjectMeta> {
        self.of(resource)
            .find_map(|store| (store.lookup)(namespace, name))
    }
}

impl Live for InstallLive {
    fn desired_hash(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Option<String> {
        let meta = self.meta(resource, namespace, name)?;
        meta.annotations?.get(DESIRED_HASH).cloned()
    }
}

impl LiveCopies for InstallLive {
    fn foreign_fields(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Vec<Path> {
        self.meta(resource, namespace, name)
            .map(|meta| crate::fields::recorded(&meta))
            .unwrap_or_default()
    }

    fn labelled(&self, resource: &ApiResource, labels: &BTreeMap<String, String>) -> Vec<Key> {
        let carries = |meta: &ObjectMeta| {
            let own = meta.labels.as_ref();
            labels
                .iter()
                .all(|(key, value)| own.and_then(|l| l.get(key)) == Some(value))
        };
        let keys: BTreeSet<Key> = self
            .of(resource)
            .flat_map(|store| (store.all)())
            .filter(|meta| carries(meta))
            .map(|meta| (meta.namespace, meta.name.unwrap_or_default()))
            .collect();
        keys.into_iter().collect()
    }
}

impl std::fmt::Debug for InstallLive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<&str> = self.kinds.iter().map(|store| store.kind.as_str()).collect();
        f.debug_struct("InstallLive").field("kinds", &kinds).finish()
    }
}

/// Keeps of an object a CSV install writes what the CSV controller reads:
/// its name, namespace, labels (its owner), owner references, of its
/// annotations only [`DESIRED_HASH`], and the paths of the fields other
/// writers own ([`crate::fields::keep_foreign_fields`]) instead of its
/// managed fields.
pub fn trim_install_object<K>(object: &mut PartialObjectMeta<K>) {
    trim_install_meta(&mut object.metadata);
}

fn trim_install_meta(meta: &mut ObjectMeta) {
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, _| key == DESIRED_HASH);
    }
    crate::fields::keep_foreign_fields(meta);
}

/// Keeps of a Deployment a CSV install writes what the CSV controller reads:
/// its metadata as [`trim_install_object`] keeps it, its replicas and its
/// status (whether it is rolled out and available, [`deployment_health`]),
/// not its pod template.
///
/// [`deployment_health`]: crate::controllers::csv::phase::deployment_health
pub fn trim_deployment(deployment: &mut Deployment) {
    trim_install_meta(&mut deployment.metadata);
    if let Some(spec) = deployment.spec.as_mut() {
        spec.template = Default::default();
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

/// Keeps of a Subscription only what olm-operator reads: its name, namespace,
/// `spec` (the `config` its CSV's Deployments take), its annotation
/// `olm-rs.dev/replicas`, and the CSVs its status names
/// (`installedCSV`, `currentCSV`). The rest of the status (conditions, catalog
/// health, plan references) changes often and is for the catalog-operator.
pub fn trim_subscription(subscription: &mut Subscription) {
    let meta = &mut subscription.metadata;
    // The one annotation the CSV reconcile reads: the replicas asked.
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, _| key == olm_api::labels::REPLICAS);
    }
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

    fn role(namespace: &str, name: &str, labels: &[(&str, &str)]) -> PartialObjectMeta<Role> {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": labels.iter().copied().collect::<BTreeMap<_, _>>()},
        }))
        .expect("a Role")
    }

    #[test]
    fn the_objects_of_an_owner_are_read_from_every_store_of_their_kind_once() {
        let owner = [("olm.owner", "demo.v1"), ("olm.owner.namespace", "ops")];
        let installs = olm_testkit::stores::listed(vec![
            role("ops", "a", &owner),
            role(
                "ops",
                "other",
                &[("olm.owner", "other.v1"), ("olm.owner.namespace", "ops")],
            ),
            role("ops", "unlabelled", &[]),
        ]);
        // The OperatorConditions' store holds one of them too.
        let conditions = olm_testkit::stores::listed(vec![
            role("ops", "a", &owner),
            role(
                "dev",
                "b",
                &[
                    ("olm.owner", "demo.v1"),
                    ("olm.owner.namespace", "ops"),
                    ("x", "y"),
                ],
            ),
        ]);
        let live = InstallLive::default().with(installs).with(conditions);
        let labels: BTreeMap<String, String> = owner
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(
            live.labelled(&ApiResource::erase::<Role>(&()), &labels),
            [
                (Some("dev".to_owned()), "b".to_owned()),
                (Some("ops".to_owned()), "a".to_owned())
            ]
        );
        assert!(
            live.labelled(&ApiResource::erase::<RoleBinding>(&()), &labels)
                .is_empty(),
            "no store of the kind: nothing"
        );
    }

    #[test]
    fn a_trimmed_deployment_keeps_what_its_health_and_the_applier_read() {
        let mut deployment: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web", "namespace": "ops", "generation": 3,
                "labels": {"olm.owner.kind": "ClusterServiceVersion"},
                "annotations": {DESIRED_HASH: "abc", "deployment.kubernetes.io/revision": "3"},
            },
            "spec": {
                "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "web", "image": "web:1"}]}},
            },
            "status": {"observedGeneration": 3, "replicas": 2, "availableReplicas": 2},
        }))
        .expect("a Deployment");
        trim_deployment(&mut deployment);
        let annotations = deployment.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), [DESIRED_HASH]);
        assert_eq!(deployment.metadata.generation, Some(3));
        assert!(deployment.metadata.labels.is_some());
        let spec = deployment.spec.as_ref().expect("a spec");
        assert_eq!(spec.replicas, Some(2));
        assert_eq!(spec.template, Default::default(), "no pod template");
        let status = deployment.status.as_ref().expect("a status");
        assert_eq!(status.available_replicas, Some(2));
    }

    #[test]
    fn a_trimmed_subscription_keeps_its_config_and_csvs() {
        let mut subscription: Subscription = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": "etcd", "namespace": "ops",
                         "annotations": {"a": "b", "olm-rs.dev/replicas": "2"}},
            "spec": {"name": "etcd", "source": "community", "sourceNamespace": "olm",
                     "config": {"env": [{"name": "A", "value": "1"}]}},
            "status": {"installedCSV": "etcd.v1", "currentCSV": "etcd.v2", "state": "UpgradePending",
                       "catalogHealth": [], "conditions": [], "lastUpdated": "2026-11-25T10:00:00Z"}
        }))
        .expect("a Subscription");
        let config = subscription.spec.config.clone();
        trim_subscription(&mut subscription);
        assert_eq!(subscription.spec.config, config);
        assert_eq!(
            subscription.metadata.annotations,
            Some([("olm-rs.dev/replicas".to_owned(), "2".to_owned())].into()),
            "only the replicas asked are kept"
        );
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
