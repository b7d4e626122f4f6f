//! The shared watches: each kind is watched once, keeping only what its
//! readers need, and its store handed to the controllers that read it
//! ([`Shared::stores`] and the like).

use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        apps::v1::{DaemonSet, Deployment},
        batch::v1::Job,
        core::v1::{ConfigMap, Namespace, Node, Pod, Secret, Service, ServiceAccount},
        discovery::v1::EndpointSlice,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{Api, Resource, core::PartialObjectMeta, runtime::watcher};
use olm_api::{
    labels,
    model::{Action, Databag, Relation},
    substrate::{Machine, MachinePool},
    v1::{OLMConfig, OperatorGroup},
    v1alpha1::{ClusterServiceVersion, Subscription},
    v2::OperatorCondition,
};
use olm_runtime::{Parts, Reflector};
use serde::de::DeserializeOwned;

use crate::{
    controllers::{
        action, copiedcsv,
        csv::{self, build::OWNER_KIND, crd_summary::CrdSummary},
        machinepool,
    },
    stores::{Cache, InstallStores, PoolStores, Stores, trim_deployment, trim_install_object},
};

/// How many copied CSVs one list request of the copies' watch asks for (the
/// watcher's default is 500). RSS after a restart with the 5,020 copies of
/// `hack/bench-copies.sh` (release build): 59-62 MiB with pages of 500, 42 MiB
/// with 100, 39.5 MiB with 50, 39 MiB with 20 (and a slower start).
pub(super) const COPIES_PAGE: u32 = 50;

/// How many CRDs one list request of the CRDs' watch asks for: each is read
/// whole (schemas of hundreds of kilobytes) before it is summed up.
pub(super) const CRDS_PAGE: u32 = 20;

/// The shared watches, each driven once for every controller that reads it.
pub(super) struct Shared {
    pub(super) csvs: Reflector<ClusterServiceVersion>,
    pub(super) groups: Reflector<OperatorGroup>,
    pub(super) namespaces: Reflector<PartialObjectMeta<Namespace>>,
    pub(super) copies: Reflector<ClusterServiceVersion>,
    pub(super) configs: Reflector<OLMConfig>,
    pub(super) subscriptions: Reflector<Subscription>,
    pub(super) machines: Reflector<Machine>,
    pub(super) relations: Reflector<Relation>,
    pub(super) databags: Reflector<Databag>,
    pub(super) relation_data: Reflector<PartialObjectMeta<ConfigMap>>,
    pub(super) actions: Reflector<Action>,
    pub(super) action_jobs: Reflector<Job>,
    pub(super) action_pods: Reflector<Pod>,
    pub(super) pool_objects: PoolObjects,
    pub(super) install_objects: InstallObjects,
}

/// The shared watches of what CSV installs write ([`InstallStores`]): each
/// triggers the CSV that owns the object, and its store tells the applier
/// which objects are already as desired.
pub(super) struct InstallObjects {
    pub(super) deployments: Reflector<Deployment>,
    pub(super) service_accounts: Reflector<PartialObjectMeta<ServiceAccount>>,
    pub(super) roles: Reflector<PartialObjectMeta<Role>>,
    pub(super) role_bindings: Reflector<PartialObjectMeta<RoleBinding>>,
    pub(super) cluster_roles: Reflector<PartialObjectMeta<ClusterRole>>,
    pub(super) cluster_role_bindings: Reflector<PartialObjectMeta<ClusterRoleBinding>>,
    pub(super) condition_roles: Reflector<PartialObjectMeta<Role>>,
    pub(super) condition_role_bindings: Reflector<PartialObjectMeta<RoleBinding>>,
    pub(super) operator_conditions: Reflector<OperatorCondition>,
    pub(super) api_services: Reflector<APIService>,
    pub(super) machine_pools: Reflector<MachinePool>,
    pub(super) crds: Reflector<CrdSummary>,
    pub(super) serving: ServingObjects,
}

/// The shared watches of what serving Deployments of CSVs need (certificate
/// Secrets, Services, webhook configurations), as trimmed metadata: each
/// triggers the CSV that owns it, and its store tells the applier which are
/// already as desired and which the CSV no longer has.
pub(super) struct ServingObjects {
    pub(super) secrets: Reflector<PartialObjectMeta<Secret>>,
    pub(super) services: Reflector<PartialObjectMeta<Service>>,
    pub(super) validating_webhooks: Reflector<PartialObjectMeta<ValidatingWebhookConfiguration>>,
    pub(super) mutating_webhooks: Reflector<PartialObjectMeta<MutatingWebhookConfiguration>>,
}

impl InstallObjects {
    /// The watches, each of the objects labelled for CSVs (or, for the
    /// OperatorConditions' RBAC, `olm.managed=true`), as trimmed metadata.
    pub(super) fn new(parts: &Parts) -> Self {
        fn labelled<K>(parts: &Parts, selector: &str) -> Reflector<PartialObjectMeta<K>>
        where
            K: Resource<DynamicType = ()>
                + Clone
                + DeserializeOwned
                + std::fmt::Debug
                + Send
                + Sync
                + 'static,
        {
            let config = watcher::Config::default().labels(selector);
            parts
                .reflector(Api::all(parts.client.clone()), config)
                .modify_with_managed_fields(trim_install_object::<K>)
        }
        let owned = format!("{}={OWNER_KIND}", labels::OWNER_KIND);
        let managed = format!("{}=true", csv::operator_condition::OLM_MANAGED);
        Self {
            deployments: parts
                .reflector(
                    Api::all(parts.client.clone()),
                    watcher::Config::default().labels(&owned),
                )
                .modify_with_managed_fields(trim_deployment),
            service_accounts: labelled(parts, &owned),
            roles: labelled(parts, &owned),
            role_bindings: labelled(parts, &owned),
            cluster_roles: labelled(parts, &owned),
            cluster_role_bindings: labelled(parts, &owned),
            condition_roles: labelled(parts, &managed),
            condition_role_bindings: labelled(parts, &managed),
            operator_conditions: parts
                .reflector(Api::all(parts.client.clone()), watcher::Config::default())
                .modify_with_managed_fields(|condition: &mut OperatorCondition| {
                    crate::fields::keep_foreign_fields(&mut condition.metadata);
                }),
            // The CA bundle is for the aggregator: a requirement reads the
            // status, the applier the stamp and the fields others own.
            api_services: parts
                .reflector(Api::all(parts.client.clone()), watcher::Config::default())
                .modify_with_managed_fields(|service: &mut APIService| {
                    if let Some(spec) = service.spec.as_mut() {
                        spec.ca_bundle = None;
                    }
                    crate::fields::keep_foreign_fields(&mut service.metadata);
                }),
            machine_pools: parts.reflector(Api::all(parts.client.clone()), watcher::Config::default()),
            // Summaries (no schemas), listed a few at a time: a page of whole
            // CRDs is read before it is summed up.
            crds: parts.reflector(
                Api::all(parts.client.clone()),
                watcher::Config::default().page_size(CRDS_PAGE),
            ),
            serving: ServingObjects {
                secrets: labelled(parts, &owned),
                services: labelled(parts, &owned),
                validating_webhooks: labelled(parts, &owned),
                mutating_webhooks: labelled(parts, &owned),
            },
        }
    }

    /// The stores the CSV reconcile reads.
    pub(super) fn stores(&self) -> InstallStores {
        InstallStores {
            deployments: cache(&self.deployments),
            service_accounts: cache(&self.service_accounts),
            roles: cache(&self.roles),
            role_bindings: cache(&self.role_bindings),
            cluster_roles: cache(&self.cluster_roles),
            cluster_role_bindings: cache(&self.cluster_role_bindings),
            condition_roles: cache(&self.condition_roles),
            condition_role_bindings: cache(&self.condition_role_bindings),
            operator_conditions: cache(&self.operator_conditions),
            api_services: cache(&self.api_services),
            machine_pools: cache(&self.machine_pools),
            crds: cache(&self.crds),
            secrets: cache(&self.serving.secrets),
            services: cache(&self.serving.services),
            validating_webhooks: cache(&self.serving.validating_webhooks),
            mutating_webhooks: cache(&self.serving.mutating_webhooks),
        }
    }

    /// Drives every watch; never ends on its own.
    pub(super) async fn run(self) {
        futures::future::join4(
            futures::future::join3(
                self.deployments.run(),
                self.service_accounts.run(),
                self.roles.run(),
            ),
            futures::future::join3(
                self.role_bindings.run(),
                self.cluster_roles.run(),
                self.cluster_role_bindings.run(),
            ),
            futures::future::join3(
                self.condition_roles.run(),
                self.condition_role_bindings.run(),
                self.operator_conditions.run(),
            ),
            futures::future::join(
                futures::future::join3(self.api_services.run(), self.machine_pools.run(), self.crds.run()),
                futures::future::join4(
                    self.serving.secrets.run(),
                    self.serving.services.run(),
                    self.serving.validating_webhooks.run(),
                    self.serving.mutating_webhooks.run(),
                ),
            ),
        )
        .await;
    }
}

/// The shared watches only the MachinePool controller reads: the nodes, and
/// what it makes for its pools (labelled with the pool).
pub(super) struct PoolObjects {
    pub(super) nodes: Reflector<PartialObjectMeta<Node>>,
    pub(super) daemonsets: Reflector<DaemonSet>,
    pub(super) service_accounts: Reflector<PartialObjectMeta<ServiceAccount>>,
    pub(super) roles: Reflector<PartialObjectMeta<Role>>,
    pub(super) role_bindings: Reflector<PartialObjectMeta<RoleBinding>>,
    pub(super) secrets: Reflector<PartialObjectMeta<Secret>>,
    pub(super) endpoint_slices: Reflector<EndpointSlice>,
}

impl PoolObjects {
    /// The watches, each of what the pools' objects need only.
    pub(super) fn new(parts: &Parts) -> Self {
        let client = &parts.client;
        let pooled = || watcher::Config::default().labels(machinepool::agent::POOL_LABEL);
        // Names and labels are all a node selector reads.
        let nodes = parts
            .reflector::<PartialObjectMeta<Node>>(Api::all(client.clone()), watcher::Config::default())
            .modify(|node| node.metadata.annotations = None);
        let slices = Api::namespaced(client.clone(), olm_runtime::endpoints::NAMESPACE);
        Self {
            nodes,
            daemonsets: parts.reflector(Api::all(client.clone()), pooled()),
            service_accounts: parts.reflector(Api::all(client.clone()), pooled()),
            roles: parts.reflector(Api::all(client.clone()), pooled()),
            role_bindings: parts.reflector(Api::all(client.clone()), pooled()),
            secrets: parts.reflector(Api::all(client.clone()), pooled()),
            endpoint_slices: parts.reflector(
                slices,
                watcher::Config::default().labels(olm_runtime::endpoints::SELECTOR),
            ),
        }
    }

    /// Drives every watch; never ends on its own.
    pub(super) async fn run(self) {
        futures::future::join(
            futures::future::join4(
                self.nodes.run(),
                self.daemonsets.run(),
                self.service_accounts.run(),
                self.roles.run(),
            ),
            futures::future::join3(
                self.role_bindings.run(),
                self.secrets.run(),
                self.endpoint_slices.run(),
            ),
        )
        .await;
    }
}

impl Shared {
    /// The shared watches, each keeping only what its readers need.
    pub(super) fn new(parts: &Parts) -> Self {
        let (client, all) = (&parts.client, watcher::Config::default);
        // Icons and descriptions are for people: no controller reads them.
        // Copies in target namespaces stay out of the store: only their originals are reconciled.
        let not_copies = all().labels(&format!("!{}", labels::COPIED_FROM));
        let csvs = parts
            .reflector::<ClusterServiceVersion>(Api::all(client.clone()), not_copies)
            .modify(ClusterServiceVersion::drop_presentation);
        let groups = parts.reflector::<OperatorGroup>(Api::all(client.clone()), all());
        // Names and labels are all a selector reads.
        let namespaces = parts
            .reflector::<PartialObjectMeta<Namespace>>(Api::all(client.clone()), all())
            .modify(|namespace| namespace.metadata.annotations = None);
        // Copies trimmed to what keeping them needs: metadata and status, no spec.
        // Listed 50 at a time: each carries its original's spec, annotations and
        // managed fields, and the heap a list page needs before `trim` stays with
        // the process.
        let copies = parts
            .reflector::<ClusterServiceVersion>(
                Api::all(client.clone()),
                all().labels(labels::COPIED_FROM).page_size(COPIES_PAGE),
            )
            .modify(copiedcsv::trim);
        // The OLMConfig `cluster`: whether copies are switched off.
        let configs = parts.reflector::<OLMConfig>(Api::all(client.clone()), all());
        // The config and CSVs of each Subscription are all the CSV reconcile reads.
        let subscriptions = parts
            .reflector::<Subscription>(Api::all(client.clone()), all())
            .modify(crate::stores::trim_subscription);
        // One watch of Machines for the CSV and MachinePool controllers.
        let machines = parts.reflector::<Machine>(Api::all(client.clone()), all());
        let relations = parts.reflector::<Relation>(Api::all(client.clone()), all());
        let databags = parts.reflector::<Databag>(Api::all(client.clone()), all());
        // The ConfigMaps of remote data of relations' sides in pods, by their label.
        let relation_data = parts.reflector::<PartialObjectMeta<ConfigMap>>(
            Api::all(client.clone()),
            all().labels(olm_api::model::RELATION_LABEL),
        );
        let actions = parts.reflector::<Action>(Api::all(client.clone()), all());
        // Only the Jobs that run actions, and their Pods: by their label.
        let action_jobs =
            parts.reflector::<Job>(Api::all(client.clone()), all().labels(action::job::ACTION_LABEL));
        let action_pods = parts
            .reflector::<Pod>(Api::all(client.clone()), all().labels(action::job::ACTION_LABEL))
            .modify(|pod| pod.spec = None);
        Self {
            csvs,
            groups,
            namespaces,
            copies,
            configs,
            subscriptions,
            machines,
            relations,
            databags,
            relation_data,
            actions,
            action_jobs,
            action_pods,
            pool_objects: PoolObjects::new(parts),
            install_objects: InstallObjects::new(parts),
        }
    }

    /// The stores the CSV and OperatorGroup reconciles read.
    pub(super) fn stores(&self) -> Stores {
        Stores {
            csvs: cache(&self.csvs),
            operator_groups: cache(&self.groups),
            namespaces: cache(&self.namespaces),
            subscriptions: cache(&self.subscriptions),
            machines: cache(&self.machines),
            copies: cache(&self.copies),
            installs: self.install_objects.stores(),
            relation_data: cache(&self.relation_data),
        }
    }

    /// The stores the MachinePool reconcile reads.
    pub(super) fn pool_stores(&self) -> PoolStores {
        let objects = &self.pool_objects;
        PoolStores {
            machines: cache(&self.machines),
            nodes: cache(&objects.nodes),
            daemonsets: cache(&objects.daemonsets),
            service_accounts: cache(&objects.service_accounts),
            roles: cache(&objects.roles),
            role_bindings: cache(&objects.role_bindings),
            secrets: cache(&objects.secrets),
            endpoint_slices: cache(&objects.endpoint_slices),
        }
    }

    /// The stores the copied-CSV reconcile reads.
    pub(super) fn copy_sources(&self) -> copiedcsv::Sources {
        copiedcsv::Sources {
            csvs: cache(&self.csvs),
            copies: cache(&self.copies),
            groups: cache(&self.groups),
            namespaces: cache(&self.namespaces),
            configs: cache(&self.configs),
            subscriptions: cache(&self.subscriptions),
            live: olm_runtime::live::LiveStores::new().with(self.copies.store()),
        }
    }

    /// Drives every shared watch; never ends on its own.
    pub(super) async fn run(self) {
        futures::future::join3(
            futures::future::join3(self.csvs.run(), self.groups.run(), self.namespaces.run()),
            futures::future::join4(
                self.subscriptions.run(),
                self.machines.run(),
                self.copies.run(),
                self.configs.run(),
            ),
            futures::future::join5(
                self.pool_objects.run(),
                self.install_objects.run(),
                self.relations.run(),
                futures::future::join(self.databags.run(), self.relation_data.run()),
                futures::future::join3(self.actions.run(), self.action_jobs.run(), self.action_pods.run()),
            ),
        )
        .await;
    }
}

pub(super) fn cache<K>(reflector: &Reflector<K>) -> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    Cache {
        store: reflector.store(),
        synced: reflector.synced(),
    }
}
