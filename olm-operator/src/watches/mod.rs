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
//! | ConfigMaps of relations' remote data (labelled `model.olm-rs.dev/relation`), metadata only | store: the Relation controller's live copies; the CSV reconcile reads their hashes ([`csv::relation_data::related`]) | [`csv::in_namespace`] | - |
//! | Actions | store: the Action controller reads it | - | - |
//! | Jobs and Pods labelled `olm-rs.dev/action` (Pods without their spec) | store: the Action controller reads them | - | - |
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
//! namespace, deleted ones included ([`relation::in_namespace`]), and by
//! the ConfigMaps of remote data it keeps ([`relation::of_labelled`]).
//!
//! The Action controller ([`action`]) reconciles the Actions from their
//! store, and is triggered by the CSVs and Machines of their namespace,
//! deleted ones included, for the Actions that have not finished
//! ([`action::unfinished_in_namespace`]), and by another Action of the
//! namespace that finished, for all of them ([`action::in_namespace`]: it may
//! push older ones past the retention count); and by the Jobs that run
//! actions and their Pods, for the Action they are labelled with
//! ([`action::of_labelled`]).
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
//!
//! [`InstallStores`]: crate::stores::InstallStores
//! [`PoolStores`]: crate::stores::PoolStores
//! [`CrdSummary`]: crate::controllers::csv::crd_summary::CrdSummary
//! [`Reflector`]: olm_runtime::Reflector

use std::{pin::pin, sync::Arc};

use futures::{StreamExt, stream};
use kube::{
    Api, Resource, ResourceExt,
    api::DynamicObject,
    core::PartialObjectMeta,
    runtime::{Controller, WatchStreamExt, reflector::Store, watcher},
};
use olm_api::{labels, v1::Operator, v1alpha1::ClusterServiceVersion};
use olm_runtime::{Parts, backoff::TriggerBackoff};

use crate::{
    context::Context,
    controllers::{action, copiedcsv, csv, machinepool, operator, operatorgroup, relation},
    stores::Stores,
};

mod crd_changes;
mod shared;

use self::{
    crd_changes::crd_changes,
    shared::{InstallObjects, Shared, cache},
};

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
    let by_relation_data = store.clone();
    let controller = controller.watches_shared_stream(shared.relation_data.subscribe(), move |configmap| {
        csv::in_namespace(&by_relation_data, &configmap.namespace().unwrap_or_default())
    });
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
            if let Ok((object, action)) = &result {
                tracing::debug!(%object, ?action, "reconciled");
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
        configmaps: cache(&shared.relation_data),
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
        .watches_shared_stream(shared.relation_data.subscribe(), |configmap| {
            relation::of_labelled(configmap.as_ref())
        })
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
        // A deleted remote-data ConfigMap of a pod operator is made again at once.
        .reconcile_on(
            shared
                .relation_data
                .deleted()
                .flat_map(|configmap| stream::iter(relation::of_labelled(configmap.as_ref()))),
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
/// the other Actions of the namespace once one finishes, for all of them;
/// and the Jobs that run actions, and their Pods, for their Action.
fn action_controller(
    ctx: Arc<Context>,
    parts: &Parts,
    shared: &mut Shared,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let sources = action::Sources {
        csvs: cache(&shared.csvs),
        machines: cache(&shared.machines),
        actions: cache(&shared.actions),
        jobs: cache(&shared.action_jobs),
        pods: cache(&shared.action_pods),
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
        .watches_shared_stream(shared.action_jobs.subscribe(), |job| {
            action::of_labelled(job.as_ref())
        })
        .watches_shared_stream(shared.action_pods.subscribe(), |pod| {
            action::of_labelled(pod.as_ref())
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
