//! `status`: operators, their workloads, relations, catalogs and pending
//! approvals in one view, in the manner of `juju status --relations`.
//! Gathering reads the cluster; [`report`] and [`render`] are pure.

pub mod relations;
pub mod revisions;

use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client, ResourceExt, api::ListParams};
use olm_api::{
    labels,
    model::{Databag, OperatorRevision, Relation},
    substrate::Machine,
    v1alpha1::{
        CatalogSource, ClusterServiceVersion, ConditionStatus, ConnectivityState, CsvPhase, InstallPlan,
        InstallPlanPhase, Subscription, SubscriptionConditionType, SubscriptionStatus,
    },
};
use serde::Serialize;

use crate::{
    error::Error,
    table::{Cell, Table, Tone},
};

/// What `status` reads.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Subscriptions.
    pub subscriptions: Vec<Subscription>,
    /// CSVs (copies included; they are left out here).
    pub csvs: Vec<ClusterServiceVersion>,
    /// InstallPlans.
    pub plans: Vec<InstallPlan>,
    /// Deployments owned by CSVs.
    pub deployments: Vec<Deployment>,
    /// Machines with units.
    pub machines: Vec<Machine>,
    /// CatalogSources.
    pub catalogs: Vec<CatalogSource>,
    /// The heads of the channels the Subscriptions follow.
    pub heads: Vec<ChannelHead>,
    /// Relations.
    pub relations: Vec<Relation>,
    /// Their Databags (the units of each side).
    pub databags: Vec<Databag>,
    /// The revisions recorded for the Subscriptions.
    pub revisions: Vec<OperatorRevision>,
}

/// The head of a channel in a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelHead {
    /// The catalog's namespace.
    pub catalog_namespace: String,
    /// The catalog.
    pub catalog: String,
    /// The package.
    pub package: String,
    /// The channel.
    pub channel: String,
    /// The head bundle.
    pub bundle: String,
    /// Its version.
    pub version: String,
}

/// One operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorRow {
    /// Namespace.
    pub namespace: String,
    /// Package.
    pub package: String,
    /// Channel.
    pub channel: String,
    /// Installed CSV.
    pub installed: String,
    /// Its version.
    pub version: String,
    /// A newer bundle, if any.
    pub upgrade: String,
    /// The CSV's phase (or the Subscription's state before a CSV exists).
    pub phase: String,
    /// Why, in words.
    pub message: String,
}

/// One Deployment or machine unit of an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRow {
    /// Namespace.
    pub namespace: String,
    /// The CSV it belongs to.
    pub operator: String,
    /// `Deployment` or `Unit`.
    pub kind: String,
    /// The Deployment or Machine.
    pub name: String,
    /// Workload status: `active`, `waiting`, `blocked`, `maintenance` or `error`.
    pub status: String,
    /// Detail.
    pub message: String,
}

/// One catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogRow {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// grpc, configmap or image.
    pub source: String,
    /// The catalog-operator's last observed state.
    pub state: String,
    /// Its message.
    pub message: String,
}

/// One InstallPlan waiting for approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRow {
    /// Namespace.
    pub namespace: String,
    /// The InstallPlan.
    pub install_plan: String,
    /// The CSVs it installs.
    pub csvs: Vec<String>,
    /// The command that approves it.
    pub approve: String,
}

/// The whole view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Operators.
    pub operators: Vec<OperatorRow>,
    /// Their workloads.
    pub workloads: Vec<WorkloadRow>,
    /// Relations.
    pub relations: Vec<relations::RelationRow>,
    /// Catalogs.
    pub catalogs: Vec<CatalogRow>,
    /// Pending approvals.
    pub approvals: Vec<ApprovalRow>,
    /// Recorded revisions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<revisions::RevisionRow>,
    /// Subscriptions held by a rollback.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<revisions::HoldRow>,
}

fn ns_of(object: &impl ResourceExt) -> String {
    object.namespace().unwrap_or_default()
}

fn version_newer(candidate: &str, installed: &str) -> bool {
    match (
        semver::Version::parse(candidate.trim_start_matches('v')),
        semver::Version::parse(installed.trim_start_matches('v')),
    ) {
        (Ok(a), Ok(b)) => a > b,
        _ => false,
    }
}

/// Builds the view from what was read (pure).
pub fn report(inputs: &Inputs) -> Report {
    let own_csvs: Vec<&ClusterServiceVersion> = inputs
        .csvs
        .iter()
        .filter(|c| !c.labels().contains_key(labels::COPIED_FROM))
        .collect();
    let mut report = Report {
        operators: inputs
            .subscriptions
            .iter()
            .map(|sub| operator_row(sub, &own_csvs, &inputs.heads))
            .collect(),
        workloads: inputs.deployments.iter().filter_map(deployment_row).collect(),
        relations: relations::rows(&inputs.relations, &inputs.databags, &inputs.machines),
        catalogs: inputs.catalogs.iter().map(catalog_row).collect(),
        approvals: inputs.plans.iter().filter_map(approval_row).collect(),
        revisions: revisions::revision_rows(&inputs.revisions, &inputs.subscriptions),
        holds: inputs
            .subscriptions
            .iter()
            .filter_map(revisions::hold_row)
            .collect(),
    };
    report
        .workloads
        .extend(inputs.machines.iter().flat_map(unit_rows));
    report
        .operators
        .sort_by(|a, b| (&a.namespace, &a.package).cmp(&(&b.namespace, &b.package)));
    report
        .workloads
        .sort_by(|a, b| (&a.namespace, &a.operator, &a.name).cmp(&(&b.namespace, &b.operator, &b.name)));
    report
}

/// The row of Subscription `sub`, with the CSV it installed (among `own_csvs`,
/// the CSVs that are not copies) and its channel's head in `heads`.
fn operator_row(
    sub: &Subscription,
    own_csvs: &[&ClusterServiceVersion],
    heads: &[ChannelHead],
) -> OperatorRow {
    let namespace = ns_of(sub);
    let status = sub.status.clone().unwrap_or_default();
    let csv_name = status
        .installed_csv
        .clone()
        .or(status.current_csv.clone())
        .unwrap_or_default();
    let csv = own_csvs
        .iter()
        .find(|c| ns_of(**c) == namespace && c.name_any() == csv_name)
        .copied();
    let version = csv.and_then(|c| c.spec.version.clone()).unwrap_or_default();
    let channel = sub.spec.channel.clone().unwrap_or_default();
    let head = heads.iter().find(|h| {
        h.catalog_namespace == sub.spec.catalog_source_namespace
            && h.catalog == sub.spec.catalog_source
            && h.package == sub.spec.package
            && h.channel == channel
    });
    let upgrade = upgrade_of(head, &version, &status);
    let (phase, message) = phase_and_message(csv, &status);
    OperatorRow {
        namespace,
        package: sub.spec.package.clone(),
        channel,
        installed: csv_name,
        version,
        upgrade,
        phase,
        message,
    }
}

/// The upgrade available: the channel's head when newer than `version`, else the
/// CSV being installed when it is not the installed one; empty when none.
fn upgrade_of(head: Option<&ChannelHead>, version: &str, status: &SubscriptionStatus) -> String {
    match head {
        Some(head) if version_newer(&head.version, version) => format!("{} ({})", head.version, head.bundle),
        _ => match (&status.current_csv, &status.installed_csv) {
            (Some(current), Some(installed)) if current != installed => current.clone(),
            _ => String::new(),
        },
    }
}

/// The operator's phase and message: a failure the Subscription reports, else
/// its CSV's phase, else the Subscription's state (or `Resolving`).
fn phase_and_message(csv: Option<&ClusterServiceVersion>, status: &SubscriptionStatus) -> (String, String) {
    let failed_condition = status.conditions.iter().flatten().find(|c| {
        c.status == ConditionStatus::True
            && matches!(
                c.type_,
                SubscriptionConditionType::ResolutionFailed
                    | SubscriptionConditionType::CatalogSourcesUnhealthy
                    | SubscriptionConditionType::InstallPlanFailed
                    | SubscriptionConditionType::BundleUnpackFailed
            )
    });
    match (csv.and_then(|c| c.status.as_ref()), failed_condition) {
        (_, Some(condition)) => (
            format!("{:?}", condition.type_),
            condition.message.clone().unwrap_or_default(),
        ),
        (Some(csv_status), None) => (
            csv_status.phase.map(|p| format!("{p:?}")).unwrap_or_default(),
            csv_status.message.clone().unwrap_or_default(),
        ),
        (None, None) => (
            status
                .state
                .map(|s| format!("{s:?}"))
                .unwrap_or_else(|| "Resolving".to_owned()),
            String::new(),
        ),
    }
}

/// The workload row of a Deployment an operator owns (`None` when none does).
fn deployment_row(deployment: &Deployment) -> Option<WorkloadRow> {
    let owner = deployment.labels().get(labels::OWNER).cloned()?;
    let status = deployment.status.clone().unwrap_or_default();
    let desired = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let ready = status.ready_replicas.unwrap_or(0);
    let state = if ready >= desired { "active" } else { "waiting" };
    Some(WorkloadRow {
        namespace: ns_of(deployment),
        operator: owner,
        kind: "Deployment".to_owned(),
        name: deployment.name_any(),
        status: state.to_owned(),
        message: format!("{ready}/{desired} ready"),
    })
}

/// The workload rows of the units on a Machine.
fn unit_rows(machine: &Machine) -> Vec<WorkloadRow> {
    machine
        .status
        .iter()
        .flat_map(|s| s.units.iter().flatten())
        .map(|unit| WorkloadRow {
            namespace: ns_of(machine),
            operator: unit.csv.clone(),
            kind: "Unit".to_owned(),
            name: machine.name_any(),
            status: serde_json::to_value(unit.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            message: format!("{} {}", unit.version, unit.message.clone().unwrap_or_default())
                .trim()
                .to_owned(),
        })
        .collect()
}

fn catalog_row(source: &CatalogSource) -> CatalogRow {
    let status = source.status.clone().unwrap_or_default();
    let state = status
        .connection_state
        .as_ref()
        .map(|s| format!("{:?}", s.last_observed_state).to_uppercase())
        .unwrap_or_default();
    CatalogRow {
        namespace: ns_of(source),
        name: source.name_any(),
        source: crate::catalogs::Origin::of(source).kind().to_owned(),
        state,
        message: status.message.unwrap_or_default(),
    }
}

/// The row of an InstallPlan waiting for approval (`None` for any other).
fn approval_row(plan: &InstallPlan) -> Option<ApprovalRow> {
    let waiting = plan
        .status
        .as_ref()
        .is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval)
        && !plan.spec.approved;
    waiting.then(|| ApprovalRow {
        namespace: ns_of(plan),
        install_plan: plan.name_any(),
        csvs: plan.spec.cluster_service_version_names.clone(),
        approve: format!("kubectl olm approve {} -n {}", plan.name_any(), ns_of(plan)),
    })
}

fn phase_tone(phase: &str) -> Tone {
    match phase {
        "Succeeded" | "AtLatestKnown" => Tone::Good,
        "Failed"
        | "ResolutionFailed"
        | "CatalogSourcesUnhealthy"
        | "InstallPlanFailed"
        | "BundleUnpackFailed" => Tone::Bad,
        _ => Tone::Busy,
    }
}

fn workload_tone(status: &str) -> Tone {
    match status {
        "active" => Tone::Good,
        "error" | "blocked" => Tone::Bad,
        _ => Tone::Busy,
    }
}

/// The view as tables; `colour` for a terminal; `namespaces` shows the namespace column.
pub fn render(report: &Report, colour: bool, namespaces: bool) -> String {
    let columns = Columns { namespaces };
    let mut out = String::new();
    let operators = operators_table(&report.operators, columns);
    if operators.is_empty() {
        out.push_str("No operators.\n");
    } else {
        out.push_str(&operators.render(colour));
    }
    let others = [
        (!report.workloads.is_empty()).then(|| workloads_table(&report.workloads, columns)),
        (!report.relations.is_empty()).then(|| relations::table(&report.relations, namespaces)),
        (!report.catalogs.is_empty()).then(|| catalogs_table(&report.catalogs, columns)),
        (!report.approvals.is_empty()).then(|| approvals_table(&report.approvals, columns)),
        (!report.revisions.is_empty()).then(|| revisions::revisions_table(&report.revisions, namespaces)),
        (!report.holds.is_empty()).then(|| revisions::holds_table(&report.holds, namespaces)),
    ];
    for table in others.into_iter().flatten() {
        out.push('\n');
        out.push_str(&table.render(colour));
    }
    out
}

/// Whether the tables have a namespace column first.
#[derive(Clone, Copy)]
struct Columns {
    namespaces: bool,
}

impl Columns {
    fn table(self, headers: &[&'static str]) -> Table {
        let mut all = if self.namespaces {
            vec!["NAMESPACE"]
        } else {
            Vec::new()
        };
        all.extend_from_slice(headers);
        Table::new(&all)
    }

    fn row(self, namespace: &str, cells: Vec<Cell>) -> Vec<Cell> {
        let mut all = if self.namespaces {
            vec![Cell::from(namespace)]
        } else {
            Vec::new()
        };
        all.extend(cells);
        all
    }
}

fn operators_table(rows: &[OperatorRow], columns: Columns) -> Table {
    let mut table = columns.table(&["OPERATOR", "CHANNEL", "VERSION", "UPGRADE", "PHASE", "MESSAGE"]);
    for row in rows {
        table.row(columns.row(
            &row.namespace,
            vec![
                row.package.as_str().into(),
                row.channel.as_str().into(),
                row.version.as_str().into(),
                Cell::toned(row.upgrade.clone(), Tone::Busy),
                Cell::toned(row.phase.clone(), phase_tone(&row.phase)),
                row.message.as_str().into(),
            ],
        ));
    }
    table
}

fn workloads_table(rows: &[WorkloadRow], columns: Columns) -> Table {
    let mut table = columns.table(&["WORKLOAD", "KIND", "OPERATOR", "STATUS", "MESSAGE"]);
    for row in rows {
        table.row(columns.row(
            &row.namespace,
            vec![
                row.name.as_str().into(),
                row.kind.as_str().into(),
                row.operator.as_str().into(),
                Cell::toned(row.status.clone(), workload_tone(&row.status)),
                row.message.as_str().into(),
            ],
        ));
    }
    table
}

fn catalogs_table(rows: &[CatalogRow], columns: Columns) -> Table {
    let mut table = columns.table(&["CATALOG", "SOURCE", "STATE", "MESSAGE"]);
    for row in rows {
        let tone = if row.state == "READY" {
            Tone::Good
        } else {
            Tone::Bad
        };
        table.row(columns.row(
            &row.namespace,
            vec![
                row.name.as_str().into(),
                row.source.as_str().into(),
                Cell::toned(row.state.clone(), tone),
                row.message.as_str().into(),
            ],
        ));
    }
    table
}

fn approvals_table(rows: &[ApprovalRow], columns: Columns) -> Table {
    let mut table = columns.table(&["PENDING APPROVAL", "INSTALLS", "APPROVE WITH"]);
    for row in rows {
        table.row(columns.row(
            &row.namespace,
            vec![
                Cell::toned(row.install_plan.clone(), Tone::Busy),
                row.csvs.join(",").into(),
                row.approve.as_str().into(),
            ],
        ));
    }
    table
}

async fn list<K>(api: Api<K>, what: &str, optional: bool, params: &ListParams) -> Result<Vec<K>, Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.list(params).await {
        Ok(list) => Ok(list.items),
        // Kinds that may not be installed (Machines) or readable are left out.
        Err(_) if optional => Ok(Vec::new()),
        Err(source) => Err(Error::Kube {
            what: format!("list {what}"),
            source,
        }),
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
    <K as kube::Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Reads what `status` shows from `namespace` (`None`: all namespaces).
pub async fn gather(
    client: &Client,
    namespace: Option<&str>,
    catalog_namespaces: &[String],
) -> Result<Inputs, Error> {
    let all = ListParams::default();
    let where_ = namespace.map_or_else(|| "all namespaces".to_owned(), |n| format!("namespace {n}"));
    let in_namespace = |kind: &str| format!("{kind} in {where_}");
    let subscriptions: Vec<Subscription> = list(
        api(client, namespace),
        &in_namespace("Subscriptions"),
        false,
        &all,
    )
    .await?;
    let csvs: Vec<ClusterServiceVersion> = list(
        api(client, namespace),
        &in_namespace("ClusterServiceVersions"),
        false,
        &all,
    )
    .await?;
    let plans: Vec<InstallPlan> =
        list(api(client, namespace), &in_namespace("InstallPlans"), false, &all).await?;
    let owned = ListParams::default().labels(labels::OWNER);
    let deployments: Vec<Deployment> =
        list(api(client, namespace), &in_namespace("Deployments"), true, &owned).await?;
    let machines: Vec<Machine> = list(api(client, None), "Machines", true, &all).await?;
    let catalogs = catalogs_of(client, namespace, catalog_namespaces).await?;
    let relations: Vec<Relation> =
        list(api(client, namespace), &in_namespace("Relations"), true, &all).await?;
    let databags: Vec<Databag> = list(api(client, namespace), &in_namespace("Databags"), true, &all).await?;
    let revisions: Vec<OperatorRevision> = list(
        api(client, namespace),
        &in_namespace("OperatorRevisions"),
        true,
        &all,
    )
    .await?;
    let csv_names: Vec<String> = csvs.iter().map(ResourceExt::name_any).collect();
    Ok(Inputs {
        subscriptions,
        deployments: owned_by(deployments, &csv_names),
        machines: running_units_of(machines, &csv_names),
        csvs,
        plans,
        catalogs,
        heads: Vec::new(),
        relations,
        databags,
        revisions,
    })
}

/// The CatalogSources of every namespace, or (for one namespace) those of
/// `catalog_namespaces` that can be read.
async fn catalogs_of(
    client: &Client,
    namespace: Option<&str>,
    catalog_namespaces: &[String],
) -> Result<Vec<CatalogSource>, Error> {
    let all = ListParams::default();
    if namespace.is_none() {
        return list(api(client, None), "CatalogSources in all namespaces", false, &all).await;
    }
    let mut namespaces = catalog_namespaces.to_vec();
    namespaces.sort();
    namespaces.dedup();
    let mut catalogs = Vec::new();
    for ns in &namespaces {
        catalogs.extend(
            list::<CatalogSource>(
                api(client, Some(ns)),
                &format!("CatalogSources in namespace {ns}"),
                true,
                &all,
            )
            .await?,
        );
    }
    Ok(catalogs)
}

/// The Deployments owned by one of the CSVs `csv_names`.
fn owned_by(deployments: Vec<Deployment>, csv_names: &[String]) -> Vec<Deployment> {
    deployments
        .into_iter()
        .filter(|d| {
            d.labels()
                .get(labels::OWNER)
                .is_some_and(|o| csv_names.contains(o))
        })
        .collect()
}

/// The Machines running a unit of one of the CSVs `csv_names`.
fn running_units_of(machines: Vec<Machine>, csv_names: &[String]) -> Vec<Machine> {
    machines
        .into_iter()
        .filter(|m| {
            m.status
                .iter()
                .flat_map(|s| s.units.iter().flatten())
                .any(|u| csv_names.contains(&u.csv))
        })
        .collect()
}

/// Whether a catalog is READY according to the catalog-operator.
pub fn is_ready(source: &CatalogSource) -> bool {
    source
        .status
        .as_ref()
        .and_then(|s| s.connection_state.as_ref())
        .is_some_and(|s| s.last_observed_state == ConnectivityState::Ready)
}

/// Whether a CSV has reached `Succeeded`.
pub fn succeeded(csv: &ClusterServiceVersion) -> bool {
    csv.status.as_ref().and_then(|s| s.phase) == Some(CsvPhase::Succeeded)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
        serde_json::from_value(value).expect("a valid object")
    }

    fn inputs() -> Inputs {
        Inputs {
            subscriptions: vec![
                object(
                    json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                    "metadata": {"name": "demo-app", "namespace": "team"},
                    "spec": {"name": "demo-app", "channel": "stable", "source": "demo", "sourceNamespace": "olm"},
                    "status": {"installedCSV": "demo-app.v0.1.0", "currentCSV": "demo-app.v0.1.0", "state": "AtLatestKnown"}}),
                ),
                object(
                    json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                    "metadata": {"name": "demo-db", "namespace": "team"},
                    "spec": {"name": "demo-db", "channel": "stable", "source": "demo", "sourceNamespace": "olm",
                        "installPlanApproval": "Manual"},
                    "status": {"currentCSV": "demo-db.v1.1.0", "state": "UpgradePending",
                        "installPlanRef": {"name": "install-abc", "namespace": "team"}}}),
                ),
            ],
            csvs: vec![object(
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": "demo-app.v0.1.0", "namespace": "team"},
                "spec": {"version": "0.1.0", "displayName": "app",
                    "install": {"strategy": "deployment", "spec": {"deployments": []}}},
                "status": {"phase": "Succeeded", "message": "install strategy completed with no errors"}}),
            )],
            plans: vec![object(
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": "install-abc", "namespace": "team"},
                "spec": {"clusterServiceVersionNames": ["demo-db.v1.1.0"], "approval": "Manual", "approved": false},
                "status": {"phase": "RequiresApproval", "catalogSources": []}}),
            )],
            deployments: vec![object(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "demo-app", "namespace": "team", "labels": {"olm.owner": "demo-app.v0.1.0"}},
                "spec": {"replicas": 1, "selector": {}, "template": {}},
                "status": {"readyReplicas": 1}}))],
            machines: Vec::new(),
            catalogs: vec![object(
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "demo", "namespace": "olm"},
                "spec": {"sourceType": "grpc", "address": "127.0.0.1:50051"},
                "status": {"connectionState": {"lastObservedState": "READY", "address": "127.0.0.1:50051"}}}),
            )],
            heads: vec![ChannelHead {
                catalog_namespace: "olm".into(),
                catalog: "demo".into(),
                package: "demo-app".into(),
                channel: "stable".into(),
                bundle: "demo-app.v0.2.0".into(),
                version: "0.2.0".into(),
            }],
            relations: Vec::new(),
            databags: Vec::new(),
            revisions: Vec::new(),
        }
    }

    #[test]
    fn status_reads_like_juju_status() {
        let report = report(&inputs());
        assert_eq!(
            render(&report, false, false),
            "\
OPERATOR  CHANNEL  VERSION  UPGRADE                  PHASE           MESSAGE
demo-app  stable   0.1.0    0.2.0 (demo-app.v0.2.0)  Succeeded       install strategy completed with no errors
demo-db   stable                                     UpgradePending

WORKLOAD  KIND        OPERATOR         STATUS  MESSAGE
demo-app  Deployment  demo-app.v0.1.0  active  1/1 ready

CATALOG  SOURCE  STATE  MESSAGE
demo     grpc    READY

PENDING APPROVAL  INSTALLS        APPROVE WITH
install-abc       demo-db.v1.1.0  kubectl olm approve install-abc -n team
"
        );
        let coloured = render(&report, true, true);
        assert!(coloured.contains("\x1b[32mSucceeded\x1b[0m"), "{coloured}");
        assert!(coloured.starts_with("\x1b[1mNAMESPACE"), "{coloured}");
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["approvals"][0]["installPlan"], "install-abc");
        assert_eq!(json["operators"][0]["upgrade"], "0.2.0 (demo-app.v0.2.0)");
    }

    #[test]
    fn machine_units_are_workloads_with_their_state() {
        let mut inputs = inputs();
        inputs.machines = vec![object(
            json!({"apiVersion": "substrate.olm-rs.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": "machine-1", "namespace": "pool"},
            "spec": {"pool": "edge"},
            "status": {"units": [{"csv": "demo-machine.v1.1.0", "version": "1.1.0", "state": "blocked",
                "message": "needs a config value"}]}}),
        )];
        let report = report(&inputs);
        let unit = report
            .workloads
            .iter()
            .find(|w| w.kind == "Unit")
            .expect("the unit");
        assert_eq!(unit.name, "machine-1");
        assert_eq!(unit.operator, "demo-machine.v1.1.0");
        assert_eq!(unit.status, "blocked");
        assert_eq!(unit.message, "1.1.0 needs a config value");
        let text = render(&report, true, false);
        assert!(text.contains("\x1b[31mblocked\x1b[0m"), "{text}");
    }

    #[test]
    fn revisions_and_holds_are_shown() {
        let mut inputs = inputs();
        let revision = |name: &str, number: i64, version: &str| -> OperatorRevision {
            object(
                json!({"apiVersion": "model.olm-rs.dev/v1alpha1", "kind": "OperatorRevision",
                "metadata": {"name": name, "namespace": "team", "labels": {"olm-rs.dev/subscription": "demo-app"}},
                "spec": {"package": "demo-app", "subscription": "demo-app", "revision": number, "version": version,
                    "clusterServiceVersion": name, "installPlan": "install-1", "objects": []}}),
            )
        };
        inputs.revisions = vec![
            revision("demo-app.v0.2.0", 2, "0.2.0"),
            revision("demo-app.v0.1.0", 1, "0.1.0"),
        ];
        let app = &mut inputs.subscriptions[0];
        app.metadata.annotations = Some(
            [
                ("olm-rs.dev/rollback-to".to_owned(), "demo-app.v0.1.0".to_owned()),
                (
                    "olm-rs.dev/failed-upgrade".to_owned(),
                    "demo-app.v0.2.0".to_owned(),
                ),
            ]
            .into(),
        );
        app.status.as_mut().unwrap().conditions = Some(vec![object(json!({"type": "RolledBack",
            "status": "True", "reason": "RolledBack", "message": "rolled back to revision 1"}))]);
        inputs.subscriptions[1].metadata.annotations =
            Some([("olm-rs.dev/rollback-to".to_owned(), "3".to_owned())].into());
        let report = report(&inputs);
        let text = render(&report, false, false);
        assert!(
            text.contains(
                "\
SUBSCRIPTION  REVISION  VERSION  CSV              INSTALLED
demo-app      1         0.1.0    demo-app.v0.1.0  *
demo-app      2         0.2.0    demo-app.v0.2.0
"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "\
HELD      AT               BY                                 STATE  REASON      MESSAGE
demo-app  demo-app.v0.1.0  failed upgrade to demo-app.v0.2.0  held   RolledBack  rolled back to revision 1
demo-db   3                user                               asked
"
            ),
            "{text}"
        );
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["holds"][0]["state"], "held");
        assert_eq!(json["revisions"][0]["installed"], true);
        assert!(
            serde_json::to_value(super::report(&super::tests::inputs()))
                .unwrap()
                .get("holds")
                .is_none(),
            "no holds, no key"
        );
    }
}
