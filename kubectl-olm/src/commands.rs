//! The commands that resolve and write: `install`, `plan`, `status`,
//! `approve`, `upgrade`, `uninstall`, `config`.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{
        Approval, ClusterServiceVersion, ConditionStatus, CsvPhase, InstallPlan, InstallPlanPhase,
        Subscription, SubscriptionConditionType,
    },
};
use serde_json::{Value, json};

use olm_api::packages::PackageManifest;

use crate::{
    DryRunArgs, Env, FIELD_MANAGER, Output, TargetArgs, WaitArgs,
    catalogs::{self, CatalogId},
    config,
    error::Error,
    objects, plan, status,
};

/// How often progress is polled.
const POLL: Duration = Duration::from_secs(1);

fn say(env: &mut Env<'_>, text: impl AsRef<str>) -> Result<(), Error> {
    writeln!(env.err, "{}", text.as_ref())?;
    Ok(())
}

fn print_objects(env: &mut Env<'_>, output: Option<Output>, objects: &[Value]) -> Result<(), Error> {
    let text = match output {
        Some(Output::Json) => objects::json_output(objects)?,
        _ => objects::yaml_stream(objects)?,
    };
    env.out.write_all(text.as_bytes())?;
    Ok(())
}

/// `plan`.
pub async fn plan(env: &mut Env<'_>, target: &TargetArgs, output: Output) -> Result<(), Error> {
    let prepared = plan::prepare(env, target).await?;
    let text = match output {
        Output::Table => plan::render(&prepared.view),
        Output::Yaml => serde_saphyr::to_string(&prepared.view).map_err(|e| Error::Render(e.to_string()))?,
        Output::Json => {
            serde_json::to_string_pretty(&prepared.view).map_err(|e| Error::Render(e.to_string()))? + "\n"
        }
    };
    env.out.write_all(text.as_bytes())?;
    Ok(())
}

async fn apply<K>(api: &Api<K>, object: &K, what: &str) -> Result<K, Error>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        &object.name_any(),
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Apply(object),
    )
    .await
    .map_err(Error::kube(format!("apply {what}")))
}

/// `install`.
pub async fn install(
    env: &mut Env<'_>,
    target: &TargetArgs,
    dry_run: &DryRunArgs,
    wait: &WaitArgs,
) -> Result<(), Error> {
    let prepared = plan::prepare(env, target).await?;
    if dry_run.is_dry_run() {
        if dry_run.output.is_some() {
            return print_objects(env, dry_run.output, &prepared.objects);
        }
        env.out.write_all(plan::render(&prepared.view).as_bytes())?;
        for object in &prepared.objects {
            writeln!(
                env.out,
                "{} {} would be created (dry run)",
                object["kind"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default()
            )?;
        }
        return Ok(());
    }
    env.out.write_all(plan::render(&prepared.view).as_bytes())?;
    let namespace = env.namespace.clone();
    if let Some(group) = &prepared.new_group {
        let api: Api<OperatorGroup> = Api::namespaced(env.client.clone(), &namespace);
        apply(
            &api,
            group,
            &format!("OperatorGroup {} in {namespace}", group.name_any()),
        )
        .await?;
        writeln!(env.out, "OperatorGroup {} created", group.name_any())?;
    }
    let api: Api<Subscription> = Api::namespaced(env.client.clone(), &namespace);
    let name = prepared.subscription.name_any();
    apply(
        &api,
        &prepared.subscription,
        &format!("Subscription {name} in {namespace}"),
    )
    .await?;
    writeln!(env.out, "Subscription {name} created")?;
    if let Some(output) = dry_run.output {
        print_objects(env, Some(output), &prepared.objects)?;
    }
    if wait.no_wait {
        return Ok(());
    }
    let expected: Vec<String> = prepared.view.steps.iter().map(|s| s.bundle.clone()).collect();
    wait_for_subscription(env, &target.package, &name, &expected, wait.duration()).await
}

/// Waits until the Subscription's InstallPlan is done and its CSVs succeeded,
/// printing each change; stops at a plan waiting for approval or a failure.
async fn wait_for_subscription(
    env: &mut Env<'_>,
    package: &str,
    name: &str,
    expected: &[String],
    timeout: Duration,
) -> Result<(), Error> {
    let namespace = env.namespace.clone();
    let subs: Api<Subscription> = Api::namespaced(env.client.clone(), &namespace);
    let plans: Api<InstallPlan> = Api::namespaced(env.client.clone(), &namespace);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let sub = subs
            .get(name)
            .await
            .map_err(Error::kube(format!("read Subscription {name} in {namespace}")))?;
        let status = sub.status.clone().unwrap_or_default();
        if let Some(failed) = status.conditions.iter().flatten().find(|c| {
            c.status == ConditionStatus::True && c.type_ == SubscriptionConditionType::ResolutionFailed
        }) {
            return Err(Error::Unsatisfiable {
                package: package.to_owned(),
                namespace,
                explanation: failed.message.clone().unwrap_or_default(),
            });
        }
        let plan_name = status.install_plan_ref.as_ref().and_then(|r| r.name.clone());
        let plan = match &plan_name {
            Some(plan_name) => plans.get_opt(plan_name).await.map_err(Error::kube(format!(
                "read InstallPlan {plan_name} in {namespace}"
            )))?,
            None => None,
        };
        let csv_names: Vec<String> = match &plan {
            Some(plan) => plan.spec.cluster_service_version_names.clone(),
            None => expected.to_vec(),
        };
        let (line, done) = progress(env, plan.as_ref(), &csv_names).await?;
        if line != last {
            say(env, &line)?;
            last = line;
        }
        match done {
            Progress::Done => {
                writeln!(env.out, "{package} is installed: {}", csv_names.join(", "))?;
                return Ok(());
            }
            Progress::NeedsApproval(plan) => {
                writeln!(
                    env.out,
                    "InstallPlan {plan} waits for approval: run `kubectl olm approve {package} -n {namespace}`"
                )?;
                return Ok(());
            }
            Progress::Failed(message) => return Err(Error::Failed(message)),
            Progress::Working => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Failed(format!(
                "{package} is not installed after {}s (last: {last}); `kubectl olm status -n {namespace}` shows where it stands",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

enum Progress {
    Working,
    Done,
    NeedsApproval(String),
    Failed(String),
}

async fn progress(
    env: &Env<'_>,
    plan: Option<&InstallPlan>,
    csv_names: &[String],
) -> Result<(String, Progress), Error> {
    let Some(plan) = plan else {
        return Ok(("resolving...".to_owned(), Progress::Working));
    };
    let phase = plan.status.as_ref().map(|s| s.phase);
    if phase == Some(InstallPlanPhase::RequiresApproval) && !plan.spec.approved {
        return Ok((
            format!("InstallPlan {}: RequiresApproval", plan.name_any()),
            Progress::NeedsApproval(plan.name_any()),
        ));
    }
    if phase == Some(InstallPlanPhase::Failed) {
        let message = plan
            .status
            .as_ref()
            .and_then(|s| s.message.clone())
            .unwrap_or_default();
        return Ok((
            format!("InstallPlan {}: Failed", plan.name_any()),
            Progress::Failed(format!("InstallPlan {} failed: {message}", plan.name_any())),
        ));
    }
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(env.client.clone(), &env.namespace);
    let mut parts = vec![format!(
        "InstallPlan {}: {}",
        plan.name_any(),
        phase
            .map(|p| format!("{p:?}"))
            .unwrap_or_else(|| "Planning".to_owned())
    )];
    let mut all_succeeded = !csv_names.is_empty();
    for name in csv_names {
        let csv = csvs.get_opt(name).await.map_err(Error::kube(format!(
            "read ClusterServiceVersion {name} in {}",
            env.namespace
        )))?;
        let (phase, message) = csv
            .as_ref()
            .and_then(|c| c.status.as_ref())
            .map(|s| (s.phase, s.message.clone().unwrap_or_default()))
            .unwrap_or((None, String::new()));
        if phase != Some(CsvPhase::Succeeded) {
            all_succeeded = false;
        }
        let phase_text = phase
            .map(|p| format!("{p:?}"))
            .unwrap_or_else(|| "not created yet".to_owned());
        if phase == Some(CsvPhase::Failed) {
            parts.push(format!("{name}: Failed ({message})"));
            let line = parts.join("; ");
            return Ok((
                line,
                Progress::Failed(format!("ClusterServiceVersion {name} failed: {message}")),
            ));
        }
        parts.push(format!("{name}: {phase_text}"));
    }
    let done = if all_succeeded {
        Progress::Done
    } else {
        Progress::Working
    };
    Ok((parts.join("; "), done))
}

/// `status`.
pub async fn status(env: &mut Env<'_>, all_namespaces: bool, output: Output) -> Result<(), Error> {
    let namespace = (!all_namespaces).then(|| env.namespace.clone());
    let catalog_namespaces = vec![env.namespace.clone(), env.global_namespace.clone()];
    let mut inputs = status::gather(&env.client, namespace.as_deref(), &catalog_namespaces).await?;
    // Channel heads for "available upgrade": from the catalogs the Subscriptions name.
    let mut wanted: Vec<String> = inputs
        .subscriptions
        .iter()
        .map(|s| s.spec.catalog_source_namespace.clone())
        .collect();
    wanted.sort();
    wanted.dedup();
    if !wanted.is_empty() {
        // Channel heads for "available upgrade", from the PackageManifests of the
        // catalogs the Subscriptions name; without them the report just has none.
        match catalogs::manifests_of_catalog_namespaces(&env.client, &wanted).await {
            Ok(manifests) => inputs.heads = channel_heads(&inputs.subscriptions, &manifests),
            Err(e) => say(env, format!("warning: available upgrades are not shown: {e}"))?,
        }
    }
    let report = status::report(&inputs);
    let text = match output {
        Output::Table => status::render(&report, env.colour, all_namespaces),
        Output::Yaml => serde_saphyr::to_string(&report).map_err(|e| Error::Render(e.to_string()))?,
        Output::Json => {
            serde_json::to_string_pretty(&report).map_err(|e| Error::Render(e.to_string()))? + "\n"
        }
    };
    env.out.write_all(text.as_bytes())?;
    Ok(())
}

/// The PackageManifest of the package `subscription` follows, in its catalog.
fn manifest_of<'a>(
    subscription: &Subscription,
    manifests: &'a [PackageManifest],
) -> Option<&'a PackageManifest> {
    let id = CatalogId::new(
        subscription.spec.catalog_source.clone(),
        subscription.spec.catalog_source_namespace.clone(),
    );
    manifests
        .iter()
        .find(|m| m.status.package_name == subscription.spec.package && CatalogId::of_manifest(m) == id)
}

/// The head of the channel each Subscription follows, from its package's PackageManifest (pure).
pub fn channel_heads(
    subscriptions: &[Subscription],
    manifests: &[PackageManifest],
) -> Vec<status::ChannelHead> {
    subscriptions
        .iter()
        .filter_map(|sub| {
            let manifest = manifest_of(sub, manifests)?;
            let channel_name = sub
                .spec
                .channel
                .clone()
                .unwrap_or_else(|| manifest.status.default_channel.clone());
            let channel = catalogs::channel(manifest, &channel_name)?;
            Some(status::ChannelHead {
                catalog_namespace: sub.spec.catalog_source_namespace.clone(),
                catalog: sub.spec.catalog_source.clone(),
                package: sub.spec.package.clone(),
                channel: channel_name,
                bundle: channel.current_csv.clone(),
                version: catalogs::head_version(channel),
            })
        })
        .collect()
}

/// The Subscription of `package` in the namespace (by `spec.name`, else by its own name).
async fn subscription_of(env: &Env<'_>, package: &str) -> Result<Subscription, Error> {
    find_subscription(env, package, Named::PackageFirst).await
}

/// What a name given on the command line is matched against first: a
/// Subscription's package (`spec.name`) or its own name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Named {
    /// The package, else the Subscription's name.
    PackageFirst,
    /// The Subscription's name, else the package.
    NameFirst,
}

/// The Subscription of the namespace that `key` names, matched in `order`.
pub(crate) async fn find_subscription(env: &Env<'_>, key: &str, order: Named) -> Result<Subscription, Error> {
    let api: Api<Subscription> = Api::namespaced(env.client.clone(), &env.namespace);
    let subs = api
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!(
            "list Subscriptions in namespace {}",
            env.namespace
        )))?
        .items;
    let by_package = |s: &&Subscription| s.spec.package == key;
    let by_name = |s: &&Subscription| s.name_any() == key;
    let found = match order {
        Named::PackageFirst => subs.iter().find(by_package).or_else(|| subs.iter().find(by_name)),
        Named::NameFirst => subs.iter().find(by_name).or_else(|| subs.iter().find(by_package)),
    };
    found.cloned().ok_or_else(|| Error::NoSubscription {
        package: key.to_owned(),
        namespace: env.namespace.clone(),
    })
}

/// The InstallPlan `subscription` waits on for approval, if any.
async fn pending_plan(env: &Env<'_>, subscription: &Subscription) -> Result<Option<InstallPlan>, Error> {
    let Some(name) = subscription
        .status
        .as_ref()
        .and_then(|s| s.install_plan_ref.as_ref())
        .and_then(|r| r.name.clone())
    else {
        return Ok(None);
    };
    let api: Api<InstallPlan> = Api::namespaced(env.client.clone(), &env.namespace);
    let plan = api.get_opt(&name).await.map_err(Error::kube(format!(
        "read InstallPlan {name} in {}",
        env.namespace
    )))?;
    Ok(plan.filter(|p| {
        !p.spec.approved
            && p.status
                .as_ref()
                .is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval)
    }))
}

async fn approve_plan(env: &mut Env<'_>, plan: &InstallPlan) -> Result<(), Error> {
    let api: Api<InstallPlan> = Api::namespaced(env.client.clone(), &env.namespace);
    let name = plan.name_any();
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"approved": true}})),
    )
    .await
    .map_err(Error::kube(format!(
        "approve InstallPlan {name} in {}",
        env.namespace
    )))?;
    writeln!(
        env.out,
        "InstallPlan {name} approved: installs {}",
        plan.spec.cluster_service_version_names.join(", ")
    )?;
    Ok(())
}

async fn wait_for_csvs(env: &mut Env<'_>, plan: &InstallPlan, wait: &WaitArgs) -> Result<(), Error> {
    if wait.no_wait {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + wait.duration();
    let mut last = String::new();
    loop {
        let (line, done) = progress(
            env,
            Some(&approved(plan)),
            &plan.spec.cluster_service_version_names,
        )
        .await?;
        if line != last {
            say(env, &line)?;
            last = line;
        }
        match done {
            Progress::Done => {
                writeln!(
                    env.out,
                    "Installed: {}",
                    plan.spec.cluster_service_version_names.join(", ")
                )?;
                return Ok(());
            }
            Progress::Failed(message) => return Err(Error::Failed(message)),
            Progress::Working | Progress::NeedsApproval(_) => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Failed(format!(
                "{} not Succeeded after {}s (last: {last})",
                plan.spec.cluster_service_version_names.join(", "),
                wait.timeout
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `plan` as approved (its phase is read again by the CSV checks only).
fn approved(plan: &InstallPlan) -> InstallPlan {
    let mut plan = plan.clone();
    plan.spec.approved = true;
    if let Some(status) = plan.status.as_mut()
        && status.phase == InstallPlanPhase::RequiresApproval
    {
        status.phase = InstallPlanPhase::Installing;
    }
    plan
}

/// `approve`.
pub async fn approve(env: &mut Env<'_>, target: &str, wait: &WaitArgs) -> Result<(), Error> {
    let api: Api<InstallPlan> = Api::namespaced(env.client.clone(), &env.namespace);
    let by_name = api.get_opt(target).await.map_err(Error::kube(format!(
        "read InstallPlan {target} in {}",
        env.namespace
    )))?;
    let plan = match by_name {
        Some(plan) => {
            if plan.spec.approved {
                writeln!(env.out, "InstallPlan {target} is already approved")?;
                return Ok(());
            }
            plan
        }
        None => {
            let sub = subscription_of(env, target).await?;
            pending_plan(env, &sub)
                .await?
                .ok_or_else(|| Error::NothingToApprove {
                    what: format!("Subscription {} in {}", sub.name_any(), env.namespace),
                })?
        }
    };
    approve_plan(env, &plan).await?;
    wait_for_csvs(env, &plan, wait).await
}

/// `upgrade`.
pub async fn upgrade(
    env: &mut Env<'_>,
    package: &str,
    to: Option<&str>,
    channel: Option<&str>,
    dry_run: &DryRunArgs,
    wait: &WaitArgs,
) -> Result<(), Error> {
    let mut sub = subscription_of(env, package).await?;
    if let Some(channel) = channel
        && sub.spec.channel.as_deref() != Some(channel)
    {
        match change_channel(env, sub, channel, dry_run).await? {
            Some(changed) => sub = changed,
            None => return Ok(()),
        }
    } else if dry_run.is_dry_run() {
        return Err(Error::Usage(
            "upgrade --dry-run shows a channel change (--channel); approving an InstallPlan is not an object to commit".to_owned(),
        ));
    }
    let installed = sub
        .status
        .as_ref()
        .and_then(|s| s.installed_csv.clone())
        .unwrap_or_default();
    wait_for_upgrade(env, package, to, channel.is_some(), &installed, wait).await
}

/// Moves `sub` to `channel` (checked against the package's PackageManifest first,
/// when it can be read) and returns it; `None` when it was only shown (dry run).
async fn change_channel(
    env: &mut Env<'_>,
    mut sub: Subscription,
    channel: &str,
    dry_run: &DryRunArgs,
) -> Result<Option<Subscription>, Error> {
    let namespace = env.namespace.clone();
    let catalog_namespace = vec![sub.spec.catalog_source_namespace.clone()];
    match catalogs::manifests_of_catalog_namespaces(&env.client, &catalog_namespace).await {
        Ok(manifests) => {
            if let Some(manifest) = manifest_of(&sub, &manifests) {
                plan::channel_of(manifest, Some(channel))?;
            }
        }
        Err(e) => say(env, format!("warning: channel {channel} is not checked: {e}"))?,
    }
    sub.spec.channel = Some(channel.to_owned());
    if dry_run.is_dry_run() {
        let object = clean(objects::to_value(&sub)?);
        print_objects(env, dry_run.output.or(Some(Output::Yaml)), &[object])?;
        return Ok(None);
    }
    let api: Api<Subscription> = Api::namespaced(env.client.clone(), &namespace);
    let what = format!(
        "move Subscription {} in {namespace} to channel {channel}",
        sub.name_any()
    );
    let wanted = channel.to_owned();
    let sub = update(&api, &sub.name_any(), &what, |s| {
        s.spec.channel = Some(wanted.clone())
    })
    .await?;
    writeln!(
        env.out,
        "Subscription {} now follows channel {channel}",
        sub.name_any()
    )?;
    Ok(Some(sub))
}

/// Waits for the catalog-operator to resolve the upgrade of `package` (installed
/// at `installed`): approves its pending InstallPlan (which must reach version
/// `to`, when given) and waits for its CSVs, or says that it upgraded by itself,
/// is up to date, or has no upgrade waiting yet.
async fn wait_for_upgrade(
    env: &mut Env<'_>,
    package: &str,
    to: Option<&str>,
    channel_changed: bool,
    installed: &str,
    wait: &WaitArgs,
) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + wait.duration();
    loop {
        let current = subscription_of(env, package).await?;
        if let Some(plan) = pending_plan(env, &current).await? {
            if let Some(to) = to {
                let versions = versions_of(env, &current, &plan.spec.cluster_service_version_names).await?;
                if !upgrade_matches(&versions, to) {
                    return Err(Error::Failed(format!(
                        "the pending upgrade of {package} (InstallPlan {}) installs {}, not version {to}: upgrades follow the channel's upgrade graph; approve it with `kubectl olm approve {package}` and run upgrade again",
                        plan.name_any(),
                        plan.spec.cluster_service_version_names.join(", ")
                    )));
                }
            }
            approve_plan(env, &plan).await?;
            return wait_for_csvs(env, &plan, wait).await;
        }
        match upgrade_progress(&current, installed, channel_changed) {
            Some(UpgradeProgress::Upgraded(csv)) => {
                writeln!(env.out, "{package} upgraded to {csv}")?;
                return Ok(());
            }
            Some(UpgradeProgress::UpToDate) => {
                writeln!(env.out, "{package} is up to date at {installed}")?;
                return Ok(());
            }
            None => {}
        }
        if wait.no_wait || tokio::time::Instant::now() >= deadline {
            writeln!(
                env.out,
                "No upgrade of {package} is waiting yet (installed: {installed}); `kubectl olm status -n {}` shows its state",
                env.namespace
            )?;
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Where an upgrade with no InstallPlan pending stands.
#[derive(Debug, PartialEq, Eq)]
pub enum UpgradeProgress {
    /// An automatic Subscription upgraded by itself to this CSV.
    Upgraded(String),
    /// Nothing newer in the channel (and the channel was not changed).
    UpToDate,
}

/// Where the upgrade of `sub`, installed at `installed` when it began, stands;
/// `None` while it may still come.
pub fn upgrade_progress(
    sub: &Subscription,
    installed: &str,
    channel_changed: bool,
) -> Option<UpgradeProgress> {
    let status = sub.status.clone().unwrap_or_default();
    let automatic = sub.spec.install_plan_approval != Some(Approval::Manual);
    if let (Some(current_csv), Some(installed_csv)) = (&status.current_csv, &status.installed_csv)
        && automatic
        && current_csv != installed
        && current_csv == installed_csv
    {
        return Some(UpgradeProgress::Upgraded(current_csv.clone()));
    }
    let up_to_date = status.state == Some(olm_api::v1alpha1::SubscriptionState::AtLatestKnown)
        && status.installed_csv.as_deref() == Some(installed)
        && status.current_csv.as_deref() == Some(installed);
    (up_to_date && !channel_changed).then_some(UpgradeProgress::UpToDate)
}

/// The version of each of `csvs` that is a bundle of `subscription`'s package in its catalog
/// (`None` when its PackageManifest cannot be read or does not list it).
async fn versions_of(
    env: &Env<'_>,
    subscription: &Subscription,
    csvs: &[String],
) -> Result<Vec<(String, Option<String>)>, Error> {
    let catalog_namespace = vec![subscription.spec.catalog_source_namespace.clone()];
    let manifests = catalogs::manifests_of_catalog_namespaces(&env.client, &catalog_namespace)
        .await
        .unwrap_or_default();
    let manifest = manifest_of(subscription, &manifests);
    Ok(csvs
        .iter()
        .map(|csv| {
            let version = manifest.and_then(|m| {
                m.status
                    .channels
                    .iter()
                    .flat_map(|c| &c.entries)
                    .find(|e| &e.name == csv)
                    .map(|e| e.version.clone())
            });
            (csv.clone(), version)
        })
        .collect())
}

/// Whether a plan installing `versions` (CSV, version of the package) upgrades to `to`:
/// by the catalog's version when known, else by the CSV name's `v<version>` suffix.
pub fn upgrade_matches(versions: &[(String, Option<String>)], to: &str) -> bool {
    let wanted = to.trim_start_matches('v');
    versions.iter().any(|(csv, version)| match version {
        Some(version) => version == wanted,
        None => csv.ends_with(&format!(".v{wanted}")),
    })
}

/// Reads Subscription `name`, changes it with `change` and writes it back, again from
/// a fresh read when the catalog-operator wrote its status in between (a conflict).
async fn update(
    api: &Api<Subscription>,
    name: &str,
    what: &str,
    change: impl Fn(&mut Subscription),
) -> Result<Subscription, Error> {
    let mut attempts = 0;
    loop {
        let mut sub = api.get(name).await.map_err(Error::kube(what))?;
        change(&mut sub);
        match api.replace(name, &PostParams::default(), &sub).await {
            Ok(sub) => return Ok(sub),
            Err(kube::Error::Api(e)) if e.code == 409 && attempts < 10 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(100 * attempts)).await;
            }
            Err(source) => {
                return Err(Error::Kube {
                    what: what.to_owned(),
                    source,
                });
            }
        }
    }
}

/// An object reduced to what a user writes: no status, no server-set metadata.
fn clean(mut object: Value) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let keep = ["name", "namespace", "labels", "annotations"];
        metadata.retain(|key, _| keep.contains(&key.as_str()));
    }
    object
}

/// `uninstall`.
pub async fn uninstall(
    env: &mut Env<'_>,
    package: &str,
    delete_crds: bool,
    yes: bool,
    dry_run: &DryRunArgs,
) -> Result<(), Error> {
    let sub = subscription_of(env, package).await?;
    let csv = installed_csv(env, &sub).await?;
    let crds: Vec<String> = csv
        .as_ref()
        .map(|c| c.owned_crds().iter().map(|d| d.name.clone()).collect())
        .unwrap_or_default();
    if delete_crds && !crds.is_empty() {
        say(
            env,
            format!(
                "WARNING: deleting CRD(s) {} deletes every custom resource of these kinds, in every namespace; they cannot be recovered.",
                crds.join(", ")
            ),
        )?;
        if !yes && !dry_run.is_dry_run() {
            return Err(Error::Usage(
                "--delete-crds loses data: run again with --yes to confirm".to_owned(),
            ));
        }
    }
    if dry_run.is_dry_run() {
        let csv_name = csv.as_ref().map(ResourceExt::name_any);
        for (kind, name) in uninstall_deletions(&sub.name_any(), csv_name.as_deref(), &crds, delete_crds) {
            writeln!(env.out, "{kind} {name} would be deleted (dry run)")?;
        }
        return Ok(());
    }
    delete_subscription_and_csv(env, &sub, csv.as_ref()).await?;
    if delete_crds {
        delete_crds_named(env, &crds).await?;
    } else if !crds.is_empty() {
        writeln!(
            env.out,
            "CRDs kept (with their custom resources): {}; `--delete-crds` removes them",
            crds.join(", ")
        )?;
    }
    Ok(())
}

/// The CSV `sub` installed (or is installing), if it exists.
async fn installed_csv(env: &Env<'_>, sub: &Subscription) -> Result<Option<ClusterServiceVersion>, Error> {
    let namespace = &env.namespace;
    let status = sub.status.clone().unwrap_or_default();
    let Some(name) = status.installed_csv.or(status.current_csv) else {
        return Ok(None);
    };
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(env.client.clone(), namespace);
    csvs.get_opt(&name).await.map_err(Error::kube(format!(
        "read ClusterServiceVersion {name} in {namespace}"
    )))
}

/// What uninstalling deletes, in order, as (kind, name): the Subscription, its
/// CSV, and with `delete_crds` the CRDs the CSV owns.
pub fn uninstall_deletions(
    subscription: &str,
    csv: Option<&str>,
    crds: &[String],
    delete_crds: bool,
) -> Vec<(String, String)> {
    let mut deletions = vec![("Subscription".to_owned(), subscription.to_owned())];
    if let Some(csv) = csv {
        deletions.push(("ClusterServiceVersion".to_owned(), csv.to_owned()));
    }
    if delete_crds {
        deletions.extend(
            crds.iter()
                .map(|c| ("CustomResourceDefinition".to_owned(), c.clone())),
        );
    }
    deletions
}

/// Deletes Subscription `sub` and then its CSV `csv`, saying so.
async fn delete_subscription_and_csv(
    env: &mut Env<'_>,
    sub: &Subscription,
    csv: Option<&ClusterServiceVersion>,
) -> Result<(), Error> {
    let namespace = env.namespace.clone();
    let subs: Api<Subscription> = Api::namespaced(env.client.clone(), &namespace);
    subs.delete(&sub.name_any(), &DeleteParams::default())
        .await
        .map_err(Error::kube(format!(
            "delete Subscription {} in {namespace}",
            sub.name_any()
        )))?;
    writeln!(env.out, "Subscription {} deleted", sub.name_any())?;
    if let Some(csv) = csv {
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(env.client.clone(), &namespace);
        csvs.delete(&csv.name_any(), &DeleteParams::default())
            .await
            .map_err(Error::kube(format!(
                "delete ClusterServiceVersion {} in {namespace}",
                csv.name_any()
            )))?;
        writeln!(env.out, "ClusterServiceVersion {} deleted", csv.name_any())?;
    }
    Ok(())
}

/// Deletes the CRDs `crds` (those already gone are skipped), saying so.
async fn delete_crds_named(env: &mut Env<'_>, crds: &[String]) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    for crd in crds {
        match api.delete(crd, &DeleteParams::default()).await {
            Ok(_) => writeln!(env.out, "CustomResourceDefinition {crd} deleted")?,
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(Error::Kube {
                    what: format!("delete CustomResourceDefinition {crd}"),
                    source,
                });
            }
        }
    }
    Ok(())
}

/// `config`.
pub async fn config(
    env: &mut Env<'_>,
    package: &str,
    settings: &[String],
    dry_run: &DryRunArgs,
) -> Result<(), Error> {
    let mut sub = subscription_of(env, package).await?;
    if settings.is_empty() {
        let config = objects::to_value(&sub.spec.config)?;
        let text = match dry_run.output {
            Some(Output::Json) => {
                serde_json::to_string_pretty(&config).map_err(|e| Error::Render(e.to_string()))? + "\n"
            }
            _ if config.is_null() => format!("Subscription {} has no config\n", sub.name_any()),
            _ => serde_saphyr::to_string(&config).map_err(|e| Error::Render(e.to_string()))?,
        };
        env.out.write_all(text.as_bytes())?;
        return Ok(());
    }
    let parsed = settings
        .iter()
        .map(|s| config::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    sub.spec.config = config::apply(sub.spec.config.take(), &parsed);
    if dry_run.is_dry_run() {
        let object = clean(objects::to_value(&sub)?);
        return print_objects(env, dry_run.output.or(Some(Output::Yaml)), &[object]);
    }
    let namespace = env.namespace.clone();
    let api: Api<Subscription> = Api::namespaced(env.client.clone(), &namespace);
    let name = sub.name_any();
    let what = format!("update the config of Subscription {name} in {namespace}");
    update(&api, &name, &what, |s| {
        s.spec.config = config::apply(s.spec.config.take(), &parsed)
    })
    .await?;
    let env_vars: BTreeMap<String, String> = sub
        .spec
        .config
        .iter()
        .flat_map(|c| c.env.iter().flatten())
        .map(|v| (v.name.clone(), v.value.clone().unwrap_or_default()))
        .collect();
    writeln!(
        env.out,
        "Subscription {name} config updated (env: {}); olm-operator rolls the operator's Deployments",
        env_vars
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrade_to_matches_the_catalog_version_else_the_name() {
        let known = [("demo-db.v1.1.0".to_owned(), Some("1.1.0".to_owned()))];
        assert!(upgrade_matches(&known, "1.1.0"));
        assert!(upgrade_matches(&known, "v1.1.0"));
        assert!(!upgrade_matches(&known, "1.2.0"));
        let unknown = [("demo-db.v1.1.0".to_owned(), None)];
        assert!(upgrade_matches(&unknown, "1.1.0"));
        assert!(!upgrade_matches(&unknown, "1.1"));
    }

    #[test]
    fn cleaned_objects_keep_what_a_user_writes() {
        let object = json!({"apiVersion": "v1", "kind": "X",
            "metadata": {"name": "a", "namespace": "b", "uid": "u", "resourceVersion": "1", "labels": {"l": "v"}},
            "spec": {"k": 1}, "status": {"s": 2}});
        assert_eq!(
            clean(object),
            json!({"apiVersion": "v1", "kind": "X",
                "metadata": {"name": "a", "namespace": "b", "labels": {"l": "v"}}, "spec": {"k": 1}})
        );
    }

    #[test]
    fn channel_heads_come_from_the_package_manifest_of_the_subscriptions_catalog() {
        let manifest: PackageManifest = serde_json::from_value(json!({
            "status": {"catalogSource": "demo", "catalogSourceNamespace": "olm", "packageName": "demo-db",
                       "defaultChannel": "stable",
                       "channels": [{"name": "stable", "currentCSV": "demo-db.v1.1.0",
                                     "currentCSVDesc": {"version": "1.1.0"}, "entries": []}]}
        }))
        .unwrap();
        let sub = |catalog: &str| -> Subscription {
            serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "demo-db", "namespace": "team"},
                "spec": {"source": catalog, "sourceNamespace": "olm", "name": "demo-db", "channel": "stable"},
            }))
            .unwrap()
        };
        let heads = channel_heads(&[sub("demo"), sub("other")], &[manifest]);
        assert_eq!(heads.len(), 1, "{heads:?}");
        assert_eq!(
            (heads[0].bundle.as_str(), heads[0].version.as_str()),
            ("demo-db.v1.1.0", "1.1.0")
        );
    }

    fn subscription(approval: Approval, status: serde_json::Value) -> Subscription {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "demo-db", "namespace": "team"},
            "spec": {"source": "demo", "sourceNamespace": "olm", "name": "demo-db",
                     "installPlanApproval": approval},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn an_upgrade_is_done_when_an_automatic_subscription_installed_a_newer_csv() {
        let upgraded =
            json!({"currentCSV": "demo-db.v1.1.0", "installedCSV": "demo-db.v1.1.0", "lastUpdated": null});
        let progress = upgrade_progress(
            &subscription(Approval::Automatic, upgraded.clone()),
            "demo-db.v1.0.0",
            false,
        );
        assert_eq!(progress, Some(UpgradeProgress::Upgraded("demo-db.v1.1.0".into())));
        // A manual Subscription upgrades only through an approved InstallPlan.
        assert_eq!(
            upgrade_progress(&subscription(Approval::Manual, upgraded), "demo-db.v1.0.0", false),
            None
        );
        let installing =
            json!({"currentCSV": "demo-db.v1.1.0", "installedCSV": "demo-db.v1.0.0", "lastUpdated": null});
        assert_eq!(
            upgrade_progress(
                &subscription(Approval::Automatic, installing),
                "demo-db.v1.0.0",
                false
            ),
            None
        );
    }

    #[test]
    fn an_upgrade_is_up_to_date_at_the_latest_known_unless_the_channel_changed() {
        let latest = json!({"state": "AtLatestKnown", "currentCSV": "demo-db.v1.0.0",
                            "installedCSV": "demo-db.v1.0.0", "lastUpdated": null});
        let sub = subscription(Approval::Automatic, latest);
        assert_eq!(
            upgrade_progress(&sub, "demo-db.v1.0.0", false),
            Some(UpgradeProgress::UpToDate)
        );
        assert_eq!(upgrade_progress(&sub, "demo-db.v1.0.0", true), None);
    }

    #[test]
    fn uninstall_deletes_the_subscription_then_its_csv_then_crds_when_asked() {
        let crds = ["dbs.demo.io".to_owned()];
        let kinds = |deletions: Vec<(String, String)>| {
            deletions.into_iter().map(|(kind, _)| kind).collect::<Vec<_>>()
        };
        assert_eq!(
            kinds(uninstall_deletions(
                "demo-db",
                Some("demo-db.v1.0.0"),
                &crds,
                true
            )),
            [
                "Subscription",
                "ClusterServiceVersion",
                "CustomResourceDefinition"
            ]
        );
        assert_eq!(
            kinds(uninstall_deletions(
                "demo-db",
                Some("demo-db.v1.0.0"),
                &crds,
                false
            )),
            ["Subscription", "ClusterServiceVersion"]
        );
        assert_eq!(
            kinds(uninstall_deletions("demo-db", None, &crds, false)),
            ["Subscription"]
        );
    }
}
