//! Which controller watches what, in one place. Each kind is watched once;
//! the controllers that need it share the watch's store and its stream of
//! changes (olm-runtime's [`Reflector`], over kube-runtime's shared
//! reflectors). The mappers from a changed object to the objects to reconcile
//! stay in each controller's module.
//!
//! | watch | kept in memory | CSV controller | OperatorGroup controller |
//! |---|---|---|---|
//! | ClusterServiceVersions | store (no managed fields) | its objects; [`csv::upgrade_neighbours`] | [`operatorgroup::in_namespace`]; read by the reconcile |
//! | OperatorGroups | store (no managed fields) | [`csv::in_namespace`] | its objects; the other groups of the namespace; read by the reconcile |
//! | Namespaces, metadata only | store of names and labels | - | [`operatorgroup::selecting`]; read by the reconcile |
//! | CRDs, summed up without their schemas ([`CrdSummary`]), listed 20 at a time | store ([`InstallStores`]): the CSV reconcile's requirement checks | [`csv::naming_crd`] (not for a change of labels alone) | - |
//! | Subscriptions | store: spec, `installedCSV` and `currentCSV` ([`crate::stores::trim_subscription`]); read by the reconcile | the CSV its `status.installedCSV` names ([`csv::overrides::installed_csv`]): its config reaches the Deployments; for machine CSVs also its current CSV ([`csv::machine::of_subscription`]) | - |
//! | OperatorConditions | store ([`InstallStores`]): the applier's live copies; the replaced CSV's is read by the reconcile | the CSV of the same name and those replacing it ([`csv::operator_condition::concerned_csvs`]) | - |
//! | APIServices | store without `caBundle`, managed fields as foreign paths ([`InstallStores`]): the requirements read it, and the applier's live copies | [`csv::apiservices::naming_api_service`] | - |
//! | MachinePools | store ([`InstallStores`]): the requirements of machine CSVs read it; the MachinePool controller reconciles from it | - | - |
//! | Deployments labelled `olm.owner.kind=ClusterServiceVersion`, metadata, replicas and status | store ([`InstallStores`], [`crate::stores::trim_deployment`]): the applier's live copies and the CSV's health check | owner references | - |
//! | ServiceAccounts, RBAC labelled `olm.owner.kind=ClusterServiceVersion`, and Roles and RoleBindings labelled `olm.managed=true` (of OperatorConditions), metadata only | store ([`InstallStores`], [`crate::stores::trim_install_object`]): the applier's live copies | owner references; [`csv::labelled_owner`] | - |
//! | Secrets, Services, webhook configurations labelled `olm.owner.kind=ClusterServiceVersion`, metadata only | store ([`InstallStores`], [`crate::stores::trim_install_object`]): the applier's live copies | [`csv::labelled_owner`] | - |
//! | Machines | store (no managed fields), shared with the MachinePool controller | [`csv::machine::of_pool`] | - |
//! | Copied CSVs (`olm.copiedFrom`), listed 50 at a time | store: trimmed to metadata and status ([`copiedcsv::trim`]); the finalizer reads it | - | - |
//! | OLMConfigs | store | - | - |
//! | Relations | store: the Relation controller reads it | - | - |
//! | Actions | store: the Action controller reads it | - | - |
//!
//! The copied-CSV controller ([`copiedcsv`]) reconciles the originals from the
//! same store of CSVs as the CSV controller, and reads the stores of copies,
//! OperatorGroups, namespaces and OLMConfigs. It is triggered by the originals;
//! by their copies, also deleted ones ([`copiedcsv::originals`]); by the
//! OperatorGroups of their namespace, also deleted ones
//! ([`copiedcsv::in_namespace`]); and for operators of all namespaces
//! ([`copiedcsv::serving_all`]) by any namespace, also a deleted one, and by
//! the OLMConfigs.
//!
//! The Operator controller has its own watches ([`operator_controller`]): every
//! kind of [`operator::components::KINDS`] as metadata, kept nowhere, each
//! object mapped to the Operators its `operators.coreos.com/<name>` labels
//! name; and the Operators, as metadata, deletions included (a deleted
//! Operator whose components remain is created again). A label key cannot be
//! selected by prefix, so these watches see every object of their kinds; only
//! the names of the Operators are kept.
//!
//! The Relation controller ([`relation`]) reconciles the Relations from their
//! store, and is triggered by the CSVs and the other Relations of their
//! namespace, deleted ones included ([`relation::in_namespace`]).
//!
//! The Action controller ([`action`]) reconciles the Actions from their
//! store, and is triggered by the CSVs and Machines of their namespace,
//! deleted ones included, for the Actions that have not finished
//! ([`action::unfinished_in_namespace`]), and by another Action of the
//! namespace that finished, for all of them ([`action::in_namespace`]: it may
//! push older ones past the retention count).
//!
//! The MachinePool controller has its own watches ([`machinepool_controller`]):
//! MachinePools (a shared watch, whose store the CSV reconcile reads); Machines
//! (→ their pool; the CSV controller's watch); and shared
//! watches whose stores its reconcile reads ([`PoolStores`]): the agent
//! DaemonSets (→ their pool), the metadata of the ServiceAccounts, Roles,
//! RoleBindings and Secrets labelled with a pool (the applier's live copies),
//! Nodes, metadata only (→ every pool with a node selector, as a node's labels
//! decide which pools it belongs to), and the `kubernetes` EndpointSlices of
//! `default` (→ every pool).
//!
//! CRDs are watched as summaries ([`CrdSummary`]: name, uid, served versions,
//! conversion, conditions), parsed skipping the rest, so that no CRD schema,
//! often hundreds of kilobytes each, stays in memory; the CSV reconcile reads
//! the CRDs it names from that store, and live only those the store does not
//! show as it needs them ([`csv::dereference`]). Namespaces are
//! kept as names and labels only, which is all a selector reads, so that a
//! cluster of thousands of namespaces costs little memory.
//!
//! kube-runtime's shared streams carry created and changed objects, not
//! deleted ones, so each shared watch also hands its deleted objects to the
//! controllers that must hear of them (a deleted OperatorGroup fails the CSVs
//! of its namespace and clears `MultipleOperatorGroup` on the other group; a
//! deleted namespace leaves the groups that selected it; a deleted CSV leaves
//! the `olm.providedAPIs` of its group).
//!
//! Each controller reconciles everything again when this replica starts
//! leading. `/readyz` waits for one gate per shared store, flipped when its
//! first list has arrived, on standbys too.

use std::{pin::pin, sync::Arc};

use futures::{Stream, StreamExt, stream};
use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        apps::v1::{DaemonSet, Deployment},
        core::v1::{Namespace, Node, Secret, Service, ServiceAccount},
        discovery::v1::EndpointSlice,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Resource, ResourceExt,
    api::DynamicObject,
    core::PartialObjectMeta,
    runtime::{Controller, WatchStreamExt, reflector::Store, watcher},
};
use olm_api::{
    labels,
    model::{Action, Databag, Relation},
    substrate::{Machine, MachinePool},
    v1::{OLMConfig, Operator, OperatorGroup},
    v1alpha1::{ClusterServiceVersion, Subscription},
    v2::OperatorCondition,
};
use olm_runtime::{Parts, Reflector, backoff::TriggerBackoff};
use serde::de::DeserializeOwned;

use crate::{
    context::Context,
    controllers::{
        action, copiedcsv,
        csv::{self, build::OWNER_KIND, crd_summary::CrdSummary},
        machinepool, operator, operatorgroup, relation,
    },
    stores::{Cache, InstallStores, PoolStores, Stores, trim_deployment, trim_install_object},
};

/// How many copied CSVs one list request of the copies' watch asks for (the
/// watcher's default is 500). RSS after a restart with the 5,020 copies of
/// `hack/bench-copies.sh` (release build): 59-62 MiB with pages of 500, 42 MiB
/// with 100, 39.5 MiB with 50, 39 MiB with 20 (and a slower start).
const COPIES_PAGE: u32 = 50;

/// How many CRDs one list request of the CRDs' watch asks for: each is read
/// whole (schemas of hundreds of kilobytes) before it is summed up.
const CRDS_PAGE: u32 = 20;

/// Runs the controllers with `ctx` until the shutdown signal of `parts`
/// (reconciles in flight finish first). Every shared watch and every
/// controller is made by `parts` ([`Parts::reflector`], [`Parts::controller`]):
/// each store has its readiness gate, and each controller reconciles
/// everything when this replica starts leading.
pub async fn run(ctx: Arc<Context>, parts: &Parts) {
    let mut shared = Shared::new(parts);
    let stores = shared.stores();

    let csvs = csv_controller(ctx.clone(), parts, &mut shared, stores.clone());
    let copies = copiedcsv_controller(ctx.clone(), parts, &mut shared);
    let groups = operatorgroup_controller(ctx.clone(), parts, &mut shared, stores);
    let pools = machinepool_controller(ctx.clone(), parts, &mut shared);
    let operators = operator_controller(ctx.clone(), parts);
    let relations = relation_controller(ctx.clone(), parts, &mut shared);
    let actions = action_controller(ctx.clone(), parts, &mut shared);
    let controllers = async {
        tokio::join!(csvs, copies, groups, pools, operators, relations, actions);
    };
    // The watches never end on their own; they stop with the controllers.
    let drivers = shared.run();
    let (controllers, drivers) = (pin!(controllers), pin!(drivers));
    futures::future::select(controllers, drivers).await;
}

/// The shared watches, each driven once for every controller that reads it.
struct Shared {
    csvs: Reflector<ClusterServiceVersion>,
    groups: Reflector<OperatorGroup>,
    namespaces: Reflector<PartialObjectMeta<Namespace>>,
    copies: Reflector<ClusterServiceVersion>,
    configs: Reflector<OLMConfig>,
    subscriptions: Reflector<Subscription>,
    machines: Reflector<Machine>,
    relations: Reflector<Relation>,
    databags: Reflector<Databag>,
    actions: Reflector<Action>,
    pool_objects: PoolObjects,
    install_objects: InstallObjects,
}

/// The shared watches of what CSV installs write ([`InstallStores`]): each
/// triggers the CSV that owns the object, and its store tells the applier
/// which objects are already as desired.
struct InstallObjects {
    deployments: Reflector<Deployment>,
    service_accounts: Reflector<PartialObjectMeta<ServiceAccount>>,
    roles: Reflector<PartialObjectMeta<Role>>,
    role_bindings: Reflector<PartialObjectMeta<RoleBinding>>,
    cluster_roles: Reflector<PartialObjectMeta<ClusterRole>>,
    cluster_role_bindings: Reflector<PartialObjectMeta<ClusterRoleBinding>>,
    condition_roles: Reflector<PartialObjectMeta<Role>>,
    condition_role_bindings: Reflector<PartialObjectMeta<RoleBinding>>,
    operator_conditions: Reflector<OperatorCondition>,
    api_services: Reflector<APIService>,
    machine_pools: Reflector<MachinePool>,
    crds: Reflector<CrdSummary>,
    serving: ServingObjects,
}

/// The shared watches of what serving Deployments of CSVs need (certificate
/// Secrets, Services, webhook configurations), as trimmed metadata: each
/// triggers the CSV that owns it, and its store tells the applier which are
/// already as desired and which the CSV no longer has.
struct ServingObjects {
    secrets: Reflector<PartialObjectMeta<Secret>>,
    services: Reflector<PartialObjectMeta<Service>>,
    validating_webhooks: Reflector<PartialObjectMeta<ValidatingWebhookConfiguration>>,
    mutating_webhooks: Reflector<PartialObjectMeta<MutatingWebhookConfiguration>>,
}

impl InstallObjects {
    /// The watches, each of the objects labelled for CSVs (or, for the
    /// OperatorConditions' RBAC, `olm.managed=true`), as trimmed metadata.
    fn new(parts: &Parts) -> Self {
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
    fn stores(&self) -> InstallStores {
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
    async fn run(self) {
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
struct PoolObjects {
    nodes: Reflector<PartialObjectMeta<Node>>,
    daemonsets: Reflector<DaemonSet>,
    service_accounts: Reflector<PartialObjectMeta<ServiceAccount>>,
    roles: Reflector<PartialObjectMeta<Role>>,
    role_bindings: Reflector<PartialObjectMeta<RoleBinding>>,
    secrets: Reflector<PartialObjectMeta<Secret>>,
    endpoint_slices: Reflector<EndpointSlice>,
}

impl PoolObjects {
    /// The watches, each of what the pools' objects need only.
    fn new(parts: &Parts) -> Self {
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
    async fn run(self) {
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
    fn new(parts: &Parts) -> Self {
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
        let actions = parts.reflector::<Action>(Api::all(client.clone()), all());
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
            actions,
            pool_objects: PoolObjects::new(parts),
            install_objects: InstallObjects::new(parts),
        }
    }

    /// The stores the CSV and OperatorGroup reconciles read.
    fn stores(&self) -> Stores {
        Stores {
            csvs: cache(&self.csvs),
            operator_groups: cache(&self.groups),
            namespaces: cache(&self.namespaces),
            subscriptions: cache(&self.subscriptions),
            machines: cache(&self.machines),
            copies: cache(&self.copies),
            installs: self.install_objects.stores(),
        }
    }

    /// The stores the MachinePool reconcile reads.
    fn pool_stores(&self) -> PoolStores {
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
    fn copy_sources(&self) -> copiedcsv::Sources {
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
    async fn run(self) {
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
                self.databags.run(),
                self.actions.run(),
            ),
        )
        .await;
    }
}

/// The CSV controller and its watches.
fn csv_controller(
    ctx: Arc<Context>,
    parts: &Parts,
    shared: &mut Shared,
    stores: Stores,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let store = shared.csvs.store();
    let controller = parts.controller(&shared.csvs);
    let controller = watch_csv_children(controller, &shared.install_objects);
    let controller = watch_csv_requirements(controller, &store, shared);
    let controller = watch_csv_neighbours(controller, &store, shared);
    let metrics = ctx.metrics.clone();
    controller
        .run(
            move |csv, ctx| csv::reconcile(csv, ctx, stores.clone()),
            csv::error_policy,
            ctx,
        )
        .for_each(move |result| {
            metrics
                .csv_count
                .set(i64::try_from(store.state().len()).unwrap_or(i64::MAX));
            if let Ok((object, _)) = result {
                tracing::debug!(%object, "reconciled");
            }
            futures::future::ready(())
        })
}

/// The CSV controller watches the objects of its installs: owned Deployments
/// and ServiceAccounts, and by their `olm.owner` labels the RBAC, and the
/// certificates, Services and webhooks of serving Deployments.
fn watch_csv_children(
    controller: Controller<ClusterServiceVersion>,
    installs: &InstallObjects,
) -> Controller<ClusterServiceVersion> {
    controller
        .owns_shared_stream(installs.deployments.subscribe())
        .owns_shared_stream(installs.service_accounts.subscribe())
        .watches_shared_stream(installs.roles.subscribe(), |meta| {
            csv::labelled_owner(&meta.metadata)
        })
        .watches_shared_stream(installs.role_bindings.subscribe(), |meta| {
            csv::labelled_owner(&meta.metadata)
        })
        .watches_shared_stream(installs.cluster_roles.subscribe(), |meta| {
            csv::labelled_owner(&meta.metadata)
        })
        .watches_shared_stream(installs.cluster_role_bindings.subscribe(), |meta| {
            csv::labelled_owner(&meta.metadata)
        })
        .watches_shared_stream(installs.serving.secrets.subscribe(), |meta| {
            csv::labelled_owner(&meta.metadata)
        })
        .watches_shared_stream(installs.serving.services.subscribe(), |meta| {
            csv::labelled_owner(&meta.metadata)
        })
        .watches_shared_stream(installs.serving.validating_webhooks.subscribe(), |meta| {
            csv::labelled_owner(&meta.metadata)
        })
        .watches_shared_stream(installs.serving.mutating_webhooks.subscribe(), |meta| {
            csv::labelled_owner(&meta.metadata)
        })
}

/// The CSV controller watches what a CSV requires or is configured by: the
/// CRDs it names, its Subscription, its OperatorCondition and the APIServices
/// it provides.
fn watch_csv_requirements(
    controller: Controller<ClusterServiceVersion>,
    store: &Store<ClusterServiceVersion>,
    shared: &Shared,
) -> Controller<ClusterServiceVersion> {
    let (by_crd, by_subscription) = (store.clone(), store.clone());
    let (by_condition, by_api_service) = (store.clone(), store.clone());
    controller
        .watches_shared_stream(crd_changes(&shared.install_objects.crds), move |crd| {
            csv::naming_crd(&by_crd, &crd.name_any())
        })
        .watches_shared_stream(shared.subscriptions.subscribe(), move |subscription| {
            let mut csvs = csv::machine::of_subscription(&by_subscription, &subscription);
            csvs.extend(csv::overrides::installed_csv(&subscription));
            csvs.dedup();
            csvs
        })
        .watches_shared_stream(
            shared.install_objects.operator_conditions.subscribe(),
            move |condition| {
                csv::operator_condition::concerned_csvs(
                    &by_condition,
                    &condition.namespace().unwrap_or_default(),
                    &condition.name_any(),
                )
            },
        )
        .watches_shared_stream(shared.install_objects.api_services.subscribe(), move |service| {
            csv::apiservices::naming_api_service(&by_api_service, &service.name_any())
        })
}

/// The copied-CSV controller and its watches (see the table above).
fn copiedcsv_controller(
    ctx: Arc<Context>,
    parts: &Parts,
    shared: &mut Shared,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let store = shared.csvs.store();
    let sources = shared.copy_sources();
    let (by_copy, by_deleted_copy, by_group, by_deleted_group) =
        (store.clone(), store.clone(), store.clone(), store.clone());
    let (by_config, by_namespace, by_deleted_namespace) = (store.clone(), store.clone(), store.clone());
    let by_subscription = store.clone();
    parts
        .controller(&shared.csvs)
        .watches_shared_stream(shared.copies.subscribe(), move |copy| {
            copiedcsv::originals(&by_copy, &copy)
        })
        .reconcile_on(
            shared
                .copies
                .deleted()
                .flat_map(move |copy| stream::iter(copiedcsv::originals(&by_deleted_copy, &copy))),
        )
        .watches_shared_stream(shared.groups.subscribe(), move |group| {
            copiedcsv::in_namespace(&by_group, &group.namespace().unwrap_or_default())
        })
        .reconcile_on(shared.groups.deleted().flat_map(move |group| {
            stream::iter(copiedcsv::in_namespace(
                &by_deleted_group,
                &group.namespace().unwrap_or_default(),
            ))
        }))
        .watches_shared_stream(shared.configs.subscribe(), move |_| {
            copiedcsv::serving_all(&by_config)
        })
        .watches_shared_stream(shared.subscriptions.subscribe(), move |subscription| {
            copiedcsv::named_by(&by_subscription, &subscription)
        })
        .watches_shared_stream(shared.namespaces.subscribe(), move |_| {
            copiedcsv::serving_all(&by_namespace)
        })
        .reconcile_on(
            shared
                .namespaces
                .deleted()
                .flat_map(move |_| stream::iter(copiedcsv::serving_all(&by_deleted_namespace))),
        )
        .run(
            move |csv, ctx| copiedcsv::reconcile(csv, ctx, sources.clone()),
            copiedcsv::error_policy,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
}

/// The CSV controller watches the objects a CSV's phase depends on beside its
/// own: the OperatorGroups of its namespace, the Machines of its pool, and the
/// CSVs it replaces or that replace it, deletions included.
fn watch_csv_neighbours(
    controller: Controller<ClusterServiceVersion>,
    store: &Store<ClusterServiceVersion>,
    shared: &mut Shared,
) -> Controller<ClusterServiceVersion> {
    let (by_group, by_deleted_group) = (store.clone(), store.clone());
    let (by_csv, by_deleted_csv, by_machine) = (store.clone(), store.clone(), store.clone());
    controller
        .watches_shared_stream(shared.groups.subscribe(), move |group| {
            csv::in_namespace(&by_group, &group.namespace().unwrap_or_default())
        })
        .watches_shared_stream(shared.machines.subscribe(), move |machine| {
            csv::machine::of_pool(
                &by_machine,
                &machine.namespace().unwrap_or_default(),
                &machine.spec.pool,
            )
        })
        .watches_shared_stream(shared.csvs.subscribe(), move |other| {
            csv::upgrade_neighbours(&by_csv, &other)
        })
        .reconcile_on(shared.groups.deleted().flat_map(move |group| {
            stream::iter(csv::in_namespace(
                &by_deleted_group,
                &group.namespace().unwrap_or_default(),
            ))
        }))
        .reconcile_on(
            shared
                .csvs
                .deleted()
                .flat_map(move |other| stream::iter(csv::upgrade_neighbours(&by_deleted_csv, &other))),
        )
}

/// The OperatorGroup controller and its watches: the namespaces it may
/// select, the CSVs and the other groups of its namespace, deletions
/// included.
fn operatorgroup_controller(
    ctx: Arc<Context>,
    parts: &Parts,
    shared: &mut Shared,
    stores: Stores,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let store = shared.groups.store();
    let (by_namespace, by_csv, by_group) = (store.clone(), store.clone(), store.clone());
    let (by_deleted_namespace, by_deleted_csv, by_deleted_group) =
        (store.clone(), store.clone(), store.clone());
    parts
        .controller(&shared.groups)
        .watches_shared_stream(shared.namespaces.subscribe(), move |_| {
            operatorgroup::selecting(&by_namespace)
        })
        .watches_shared_stream(shared.csvs.subscribe(), move |csv| {
            operatorgroup::in_namespace(&by_csv, &csv.namespace().unwrap_or_default())
        })
        .watches_shared_stream(shared.groups.subscribe(), move |group| {
            operatorgroup::in_namespace(&by_group, &group.namespace().unwrap_or_default())
        })
        .reconcile_on(
            shared
                .namespaces
                .deleted()
                .flat_map(move |_| stream::iter(operatorgroup::selecting(&by_deleted_namespace))),
        )
        .reconcile_on(shared.csvs.deleted().flat_map(move |csv| {
            stream::iter(operatorgroup::in_namespace(
                &by_deleted_csv,
                &csv.namespace().unwrap_or_default(),
            ))
        }))
        .reconcile_on(shared.groups.deleted().flat_map(move |group| {
            stream::iter(operatorgroup::in_namespace(
                &by_deleted_group,
                &group.namespace().unwrap_or_default(),
            ))
        }))
        .run(
            move |group, ctx| operatorgroup::reconcile(group, ctx, stores.clone()),
            operatorgroup::error_policy,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
}

/// The Relation controller and its watches: the Relations, the CSVs,
/// Machines and other Relations of their namespace, deletions included, and
/// their Databags.
fn relation_controller(
    ctx: Arc<Context>,
    parts: &Parts,
    shared: &mut Shared,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let sources = relation::Sources {
        csvs: cache(&shared.csvs),
        relations: cache(&shared.relations),
        machines: cache(&shared.machines),
        databags: cache(&shared.databags),
    };
    let store = shared.relations.store();
    let in_namespace_of = move |object: &dyn ResourceLike| {
        relation::in_namespace(&store, &object.namespace_of().unwrap_or_default())
    };
    let [
        by_csv,
        by_relation,
        by_machine,
        by_deleted_csv,
        by_deleted_relation,
        by_deleted_machine,
    ] = std::array::from_fn(|_| in_namespace_of.clone());
    parts
        .controller(&shared.relations)
        .watches_shared_stream(shared.csvs.subscribe(), move |csv| by_csv(csv.as_ref()))
        .watches_shared_stream(shared.relations.subscribe(), move |other| {
            by_relation(other.as_ref())
        })
        .watches_shared_stream(shared.machines.subscribe(), move |machine| {
            by_machine(machine.as_ref())
        })
        .watches_shared_stream(shared.databags.subscribe(), |bag| relation::of_bag(&bag))
        .reconcile_on(
            shared
                .csvs
                .deleted()
                .flat_map(move |csv| stream::iter(by_deleted_csv(csv.as_ref()))),
        )
        .reconcile_on(
            shared
                .relations
                .deleted()
                .flat_map(move |other| stream::iter(by_deleted_relation(other.as_ref()))),
        )
        .reconcile_on(
            shared
                .machines
                .deleted()
                .flat_map(move |machine| stream::iter(by_deleted_machine(machine.as_ref()))),
        )
        .reconcile_on(
            shared
                .databags
                .deleted()
                .flat_map(|bag| stream::iter(relation::of_bag(&bag))),
        )
        .run(
            move |relation, ctx| relation::reconcile(relation, ctx, sources.clone()),
            relation::error_policy,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
}

/// The Action controller and its watches: the Actions; the CSVs and
/// Machines of their namespace, deletions included, for the unfinished ones;
/// and the other Actions of the namespace once one finishes, for all of them.
fn action_controller(
    ctx: Arc<Context>,
    parts: &Parts,
    shared: &mut Shared,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let sources = action::Sources {
        csvs: cache(&shared.csvs),
        machines: cache(&shared.machines),
        actions: cache(&shared.actions),
    };
    let store = shared.actions.store();
    let (by_csv, by_machine, by_action) = (store.clone(), store.clone(), store.clone());
    let (by_deleted_csv, by_deleted_machine) = (store.clone(), store);
    parts
        .controller(&shared.actions)
        .watches_shared_stream(shared.csvs.subscribe(), move |csv| {
            action::unfinished_in_namespace(&by_csv, &csv.namespace().unwrap_or_default())
        })
        .watches_shared_stream(shared.machines.subscribe(), move |machine| {
            action::unfinished_in_namespace(&by_machine, &machine.namespace().unwrap_or_default())
        })
        .watches_shared_stream(shared.actions.subscribe(), move |other| {
            let finished = other
                .status
                .as_ref()
                .and_then(|s| s.phase)
                .is_some_and(|phase| phase.is_finished());
            if finished {
                action::in_namespace(&by_action, &other.namespace().unwrap_or_default())
            } else {
                Vec::new()
            }
        })
        .reconcile_on(shared.csvs.deleted().flat_map(move |csv| {
            stream::iter(action::unfinished_in_namespace(
                &by_deleted_csv,
                &csv.namespace().unwrap_or_default(),
            ))
        }))
        .reconcile_on(shared.machines.deleted().flat_map(move |machine| {
            stream::iter(action::unfinished_in_namespace(
                &by_deleted_machine,
                &machine.namespace().unwrap_or_default(),
            ))
        }))
        .run(
            move |action, ctx| action::reconcile(action, ctx, sources.clone()),
            action::error_policy,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
}

/// Any object, for the mappers that only need its namespace.
trait ResourceLike {
    fn namespace_of(&self) -> Option<String>;
}

impl<K: Resource> ResourceLike for K {
    fn namespace_of(&self) -> Option<String> {
        self.meta().namespace.clone()
    }
}

/// The MachinePool controller and its watches: the pools, their agent
/// DaemonSets, their Machines (deletions included), the nodes (→ every pool
/// with a node selector, as a node's labels decide which pools it belongs
/// to) and the `kubernetes` EndpointSlices (→ every pool).
fn machinepool_controller(
    ctx: Arc<Context>,
    parts: &Parts,
    shared: &mut Shared,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let stores = shared.pool_stores();
    let pools = &shared.install_objects.machine_pools;
    let controller = parts.controller(pools);
    let (by_node, by_slice) = (controller.store(), controller.store());
    let objects = &shared.pool_objects;
    controller
        .owns_shared_stream(objects.daemonsets.subscribe())
        .watches_shared_stream(shared.machines.subscribe(), |machine| {
            machinepool::of_machine(&machine)
        })
        .reconcile_on(
            shared
                .machines
                .deleted()
                .filter_map(|machine| futures::future::ready(machinepool::of_machine(&machine))),
        )
        .watches_shared_stream(objects.nodes.subscribe(), move |_| {
            machinepool::with_selector(&by_node)
        })
        .watches_shared_stream(objects.endpoint_slices.subscribe(), move |_| {
            machinepool::all(&by_slice)
        })
        .run(
            move |pool, ctx| machinepool::reconcile(pool, ctx, stores.clone()),
            machinepool::error_policy,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
}

/// The Operator controller and its watches: the names of the Operators that
/// each component and each Operator (also a deleted one) names.
fn operator_controller(
    ctx: Arc<Context>,
    parts: &Parts,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let client = ctx.client.clone();
    let mut names: Vec<futures::stream::BoxStream<'static, String>> = operator::components::KINDS
        .iter()
        .map(|kind| {
            let api = Api::<PartialObjectMeta<DynamicObject>>::all_with(client.clone(), &kind.resource());
            watcher(api, watcher::Config::default())
                .backoff(TriggerBackoff::default())
                .touched_objects()
                .filter_map(|object| futures::future::ready(object.ok()))
                .flat_map(|object| stream::iter(labels::operator_names(object.labels().keys())))
                .boxed()
        })
        .collect();
    names.push(
        watcher(
            Api::<PartialObjectMeta<Operator>>::all(client),
            watcher::Config::default(),
        )
        .backoff(TriggerBackoff::default())
        .touched_objects()
        .filter_map(|object| futures::future::ready(object.ok().map(|o| o.name_any())))
        .boxed(),
    );
    let (terms, stopped) = (parts.leadership().terms(), parts.shutdown.signaled());
    operator::run(ctx, stream::select_all(names), terms, stopped)
}

/// The changes of CRDs a CSV can see, as summaries ([`CrdSummary`]): a
/// write that changed only a CRD's labels or annotations is left out
/// ([`labels_only`]). Each install
/// of an operator labels the CRDs it shares with the installs in other
/// namespaces, and hearing it woke every CSV naming them, all at once, ahead
/// of the new install's CSVs. A CSV reads of a CRD only its spec (versions,
/// conversion: a change moves its generation), conditions and uid.
fn crd_changes(crds: &Reflector<CrdSummary>) -> impl Stream<Item = Arc<CrdSummary>> + Send + 'static {
    let mut seen = std::collections::HashMap::new();
    crds.subscribe().filter(move |crd| {
        let key = (crd.name_any(), crd.uid());
        let now = CrdLook::of(crd.meta());
        let keep = !seen
            .insert(key, now)
            .is_some_and(|before| labels_only(&before, &now));
        std::future::ready(keep)
    })
}

/// What a CRD change is told apart by: its generation (its spec) and a hash
/// of its labels and annotations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CrdLook {
    generation: Option<i64>,
    marks: u64,
    deleting: bool,
}

impl CrdLook {
    fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> CrdLook {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (&meta.labels, &meta.annotations).hash(&mut hasher);
        CrdLook {
            generation: meta.generation,
            marks: hasher.finish(),
            deleting: meta.deletion_timestamp.is_some(),
        }
    }
}

/// Whether a CRD seen as `before`, then as `now`, changed only its labels or
/// annotations: the same spec and deletion, other marks. A change with the
/// same marks too is of its status (Established) or is a relist: kept.
fn labels_only(before: &CrdLook, now: &CrdLook) -> bool {
    before.generation == now.generation && before.deleting == now.deleting && before.marks != now.marks
}

/// The store of `reflector` and whether it has synced, for the reconciles.
fn cache<K>(reflector: &Reflector<K>) -> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    Cache {
        store: reflector.store(),
        synced: reflector.synced(),
    }
}

#[cfg(test)]
mod crd_change_tests {
    use super::*;

    #[test]
    fn a_crd_change_of_only_its_labels_wakes_no_csv() {
        let look = |generation, marks, deleting| CrdLook {
            generation: Some(generation),
            marks,
            deleting,
        };
        let before = look(1, 7, false);
        assert!(labels_only(&before, &look(1, 8, false)), "labels only");
        assert!(!labels_only(&before, &look(1, 7, false)), "status or relist");
        assert!(!labels_only(&before, &look(2, 8, false)), "spec and labels");
        assert!(!labels_only(&before, &look(1, 8, true)), "being deleted");
    }
}
