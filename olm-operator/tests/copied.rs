//! Copied CSVs on a real control plane: a copy in every namespace an
//! operator serves (chosen namespaces and all namespaces), labelled with the
//! original's namespace, reason `Copied`, in the phase the original rests
//! in; gone from namespaces no longer served, when the OLMConfig switches
//! copies off, and when the original is deleted.
//!
//! Run with `cargo test -p olm-operator --test copied -- --ignored`.

mod common;

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Client, ResourceExt,
    api::DeleteParams,
    runtime::{WatchStreamExt, watcher},
};
use olm_api::{
    labels,
    v1::{DISABLED_COPIED_CSVS, OLMConfig, OperatorGroupSpec},
    v1alpha1::{ClusterServiceVersion, CsvPhase, CsvReason},
};

use common::{csv::*, *};
use olm_operator::controllers::{
    copiedcsv::{
        self,
        copy::Occupant,
        decide::{Decision, Observed, decide},
    },
    csv::{
        copy_hashes as copied,
        validate::{Membership, Targets},
    },
};
use olm_runtime::{
    Leadership,
    apply::{FIELD_MANAGER_OLM, Writer},
};

const ALL_NAMESPACES: &[(&str, bool)] = &[
    ("OwnNamespace", true),
    ("SingleNamespace", true),
    ("MultiNamespace", true),
    ("AllNamespaces", true),
];

/// Waits for the copy of `name` from `from` in `namespace` to be in `phase`.
async fn wait_copy(
    client: &Client,
    namespace: &str,
    name: &str,
    from: &str,
    phase: CsvPhase,
) -> ClusterServiceVersion {
    let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace);
    let what = format!("the copy of {from}/{name} in {namespace} is {phase:?}");
    wait_for(&api, name, &what, |csv: Option<&ClusterServiceVersion>| {
        csv.is_some_and(|c| {
            c.labels().get(labels::COPIED_FROM).map(String::as_str) == Some(from)
                && c.status.as_ref().and_then(|s| s.phase) == Some(phase)
        })
    })
    .await
    .unwrap_or_else(|| panic!("{what}"))
}

async fn wait_no_copy(client: &Client, namespace: &str, name: &str) {
    wait_gone(
        &Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace),
        name,
    )
    .await;
}

fn assert_copy(copy: &ClusterServiceVersion, original: &ClusterServiceVersion) {
    let status = copy.status.as_ref().expect("a status");
    assert_eq!(status.reason, Some(CsvReason::Copied), "{status:?}");
    assert_eq!(
        status.message.as_deref(),
        Some(
            format!(
                "The operator is running in {} but is managing this namespace",
                original.namespace().unwrap_or_default()
            )
            .as_str()
        )
    );
    assert_eq!(copy.spec.version, original.spec.version);
    assert_eq!(copy.spec.install_modes, original.spec.install_modes);
    assert!(copy.finalizers().is_empty(), "a copy holds no finalizer");
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn copies_in_chosen_namespaces_follow_the_group_and_go_with_the_original() {
    with_namespace("copied-multi", |client, ns| async move {
        let (a, b) = (format!("{ns}-a"), format!("{ns}-b"));
        create_namespace(&client, &a, &[]).await;
        create_namespace(&client, &b, &[]).await;
        operator_group(
            &client,
            &ns,
            OperatorGroupSpec {
                target_namespaces: Some(vec![ns.clone(), a.clone(), b.clone()]),
                ..OperatorGroupSpec::default()
            },
        )
        .await;
        // Every phase the copy in `a` is written with, in order.
        let seen: Arc<Mutex<Vec<CsvPhase>>> = Arc::default();
        let recorder = {
            let (seen, api) = (
                seen.clone(),
                Api::<ClusterServiceVersion>::namespaced(client.clone(), &a),
            );
            tokio::spawn(async move {
                let mut copies = std::pin::pin!(watcher(api, watcher::Config::default()).applied_objects());
                while let Some(Ok(copy)) = copies.next().await {
                    let mut seen = seen.lock().expect("the phases");
                    if let Some(phase) = copy.status.and_then(|s| s.phase)
                        && seen.last() != Some(&phase)
                    {
                        seen.push(phase);
                    }
                }
            })
        };
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        create_csv(
            &client,
            &ns,
            demo_csv("multi.v1.0.0", "1.0.0", None, &["multi"], MULTI_NAMESPACE, None),
        )
        .await;
        let original = wait_for_csv(&csvs, "multi.v1.0.0", CsvPhase::Succeeded).await;
        assert!(
            !original.labels().contains_key(labels::COPIED_FROM),
            "the original in its own namespace is no copy"
        );
        for namespace in [&a, &b] {
            let copy = wait_copy(&client, namespace, "multi.v1.0.0", &ns, CsvPhase::Succeeded).await;
            assert_copy(&copy, &original);
        }
        // The copies carry the hash of their spec; nothing records their status on the original
        // (the copies' store shows it), and neither the copies nor the operator's pod template
        // carry such a record (on a template it would roll the Deployment).
        let recorded = csvs.get("multi.v1.0.0").await.expect("the original");
        assert!(
            !recorded.annotations().contains_key(copied::STATUS_HASH),
            "no record of the copies on the original: {:?}",
            recorded.annotations().keys().collect::<Vec<_>>()
        );
        for namespace in [&a, &b] {
            let copy = Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace)
                .get("multi.v1.0.0")
                .await
                .expect("the copy");
            assert!(
                copy.annotations().contains_key(copied::SPEC_HASH)
                    && !copy.annotations().contains_key(copied::STATUS_HASH),
                "a copy carries the hash of its spec, not the original's record: {:?}",
                copy.annotations().keys().collect::<Vec<_>>()
            );
        }
        assert!(
            recorded.annotations().contains_key(labels::OPERATOR_GROUP),
            "the group's annotations stay beside the record"
        );
        // The copy shows only the phases the original rested in: none of one install pass.
        eventually("the recorder saw the copy Succeeded", || {
            let last = seen.lock().expect("the phases").last().copied();
            async move { last == Some(CsvPhase::Succeeded) }
        })
        .await;
        let followed = seen.lock().expect("the phases").clone();
        let original_phases = history(&original);
        assert!(
            followed
                .iter()
                .all(|phase| !matches!(phase, CsvPhase::InstallReady | CsvPhase::Installing)),
            "the copy skipped the passing phases of the install: {followed:?}"
        );
        assert!(
            original_phases
                .iter()
                .any(|phase| matches!(phase, CsvPhase::InstallReady | CsvPhase::Installing)),
            "the original went through the install: {original_phases:?}"
        );
        // (A reconcile on a lagging cache may write a phase twice, so only membership and the end
        // are checked.)
        assert!(
            followed.iter().all(|phase| original_phases.contains(phase)),
            "the copy's phases {followed:?} are the original's {original_phases:?}"
        );
        recorder.abort();

        // A namespace no longer served loses its copy.
        operator_group(
            &client,
            &ns,
            OperatorGroupSpec {
                target_namespaces: Some(vec![ns.clone(), a.clone()]),
                ..OperatorGroupSpec::default()
            },
        )
        .await;
        wait_no_copy(&client, &b, "multi.v1.0.0").await;
        wait_copy(&client, &a, "multi.v1.0.0", &ns, CsvPhase::Succeeded).await;
        // The Deployment was written again for the new targets, from the CSV with its record.
        let template_annotations = |deployment: Option<&Deployment>| {
            deployment
                .and_then(|d| d.spec.as_ref())
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.clone())
                .unwrap_or_default()
        };
        let deployment = wait_for(
            &Api::<Deployment>::namespaced(client.clone(), &ns),
            "multi",
            "the operator's pod template names the new targets",
            |deployment: Option<&Deployment>| {
                template_annotations(deployment)
                    .get(labels::TARGET_NAMESPACES)
                    .is_some_and(|targets| !targets.split(',').any(|t| t == b))
            },
        )
        .await;
        let template = template_annotations(deployment.as_ref());
        assert!(
            !template.contains_key(copied::STATUS_HASH),
            "the record stays off the pod template: {:?}",
            template.keys().collect::<Vec<_>>()
        );

        // Removing the operator removes its copies.
        csvs.delete("multi.v1.0.0", &DeleteParams::background())
            .await
            .expect("delete the CSV");
        wait_no_copy(&client, &a, "multi.v1.0.0").await;
        delete_namespace(&client, &a).await;
        delete_namespace(&client, &b).await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn copies_of_an_all_namespaces_operator_everywhere_until_olmconfig_disables_them() {
    with_namespace("copied-all", |client, ns| async move {
        let configs = Api::<OLMConfig>::all(client.clone());
        // The harness switches copies off; this test turns them on.
        olm_testkit::objects::apply_json(
            &configs,
            serde_json::json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
                "metadata": {"name": "cluster"},
                "spec": {"features": {"disableCopiedCSVs": false}},
            }),
        )
        .await;
        operator_group(&client, &ns, OperatorGroupSpec::default()).await;
        let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        create_csv(
            &client,
            &ns,
            demo_csv("every.v1.0.0", "1.0.0", None, &["every"], ALL_NAMESPACES, None),
        )
        .await;
        let original = wait_for_csv(&csvs, "every.v1.0.0", CsvPhase::Succeeded).await;
        let copy = wait_copy(&client, "default", "every.v1.0.0", &ns, CsvPhase::Succeeded).await;
        assert_copy(&copy, &original);

        // A namespace created later gets one too.
        let later = format!("{ns}-later");
        create_namespace(&client, &later, &[]).await;
        wait_copy(&client, &later, "every.v1.0.0", &ns, CsvPhase::Succeeded).await;

        // Switched off: the copies go, the original stays.
        olm_testkit::objects::apply_json(
            &configs,
            serde_json::json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
                "metadata": {"name": "cluster"},
                "spec": {"features": {"disableCopiedCSVs": true}},
            }),
        )
        .await;
        wait_no_copy(&client, &later, "every.v1.0.0").await;
        wait_no_copy(&client, "default", "every.v1.0.0").await;
        wait_for_csv(&csvs, "every.v1.0.0", CsvPhase::Succeeded).await;
        wait_for(
            &configs,
            "cluster",
            "the OLMConfig says copies are off",
            |c: Option<&OLMConfig>| {
                c.and_then(|c| c.status.as_ref())
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|conditions| {
                        conditions
                            .iter()
                            .any(|c| c.type_ == DISABLED_COPIED_CSVS && c.status == "True")
                    })
            },
        )
        .await;

        // Switched on again: they come back.
        olm_testkit::objects::apply_json(
            &configs,
            serde_json::json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
                "metadata": {"name": "cluster"},
                "spec": {"features": {"disableCopiedCSVs": false}},
            }),
        )
        .await;
        wait_copy(&client, &later, "every.v1.0.0", &ns, CsvPhase::Succeeded).await;

        // Removing the operator removes its copies.
        csvs.delete("every.v1.0.0", &DeleteParams::background())
            .await
            .expect("delete the CSV");
        wait_no_copy(&client, &later, "every.v1.0.0").await;
        wait_no_copy(&client, "default", "every.v1.0.0").await;
        delete_namespace(&client, &later).await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn copies_never_replace_a_csv_and_two_originals_of_one_name_do_not_fight() {
    with_namespace("copied-twins", |client, ns| async move {
        // `ns` and `other` both install twin.v1.0.0, each serving `shared`; `ns` also serves
        // `taken`, which holds a CSV of that name of its own.
        let (other, shared, taken) = (format!("{ns}-o"), format!("{ns}-s"), format!("{ns}-t"));
        for namespace in [&other, &shared, &taken] {
            create_namespace(&client, namespace, &[]).await;
        }
        let twin = || demo_csv("twin.v1.0.0", "1.0.0", None, &["twin"], MULTI_NAMESPACE, None);
        let resident = create_csv(&client, &taken, twin()).await;
        for (namespace, targets) in [
            (&ns, vec![ns.clone(), shared.clone(), taken.clone()]),
            (&other, vec![other.clone(), shared.clone()]),
        ] {
            operator_group(
                &client,
                namespace,
                OperatorGroupSpec {
                    target_namespaces: Some(targets),
                    ..OperatorGroupSpec::default()
                },
            )
            .await;
        }
        let first = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns);
        create_csv(&client, &ns, twin()).await;
        wait_for_csv(&first, "twin.v1.0.0", CsvPhase::Succeeded).await;
        wait_copy(&client, &shared, "twin.v1.0.0", &ns, CsvPhase::Succeeded).await;

        // The second original: its copy does not take the place of the first's.
        let second = Api::<ClusterServiceVersion>::namespaced(client.clone(), &other);
        create_csv(&client, &other, twin()).await;
        wait_for_csv(&second, "twin.v1.0.0", CsvPhase::Succeeded).await;
        let in_taken = Api::<ClusterServiceVersion>::namespaced(client.clone(), &taken)
            .get("twin.v1.0.0")
            .await
            .expect("the CSV of `taken`");
        assert_eq!(
            in_taken.uid(),
            resident.uid(),
            "the CSV of `taken` is the one created there"
        );
        assert!(
            !in_taken.labels().contains_key(labels::COPIED_FROM),
            "no copy was written over the CSV of `taken`: {:?}",
            in_taken.labels()
        );
        let in_shared = Api::<ClusterServiceVersion>::namespaced(client.clone(), &shared)
            .get("twin.v1.0.0")
            .await
            .expect("the copy in `shared`");
        assert_eq!(
            in_shared.labels().get(labels::COPIED_FROM),
            Some(&ns),
            "the first copy keeps its place"
        );

        // The first original goes: the second's copy takes the namespace.
        first
            .delete("twin.v1.0.0", &DeleteParams::background())
            .await
            .expect("delete the first original");
        wait_copy(&client, &shared, "twin.v1.0.0", &other, CsvPhase::Succeeded).await;

        second
            .delete("twin.v1.0.0", &DeleteParams::background())
            .await
            .expect("delete the second original");
        wait_no_copy(&client, &shared, "twin.v1.0.0").await;
        for namespace in [&other, &shared, &taken] {
            delete_csvs(&client, namespace).await;
            delete_namespace(&client, namespace).await;
        }
    })
    .await;
}

/// A decision from stores that lag: `same_name` is what they show under the name of the copy of
/// `original` (serving `target`).
fn stale_decision(original: &ClusterServiceVersion, target: &str, same_name: &[Occupant]) -> Decision {
    let own = original.namespace().unwrap_or_default();
    let membership = Membership {
        operator_group: "operators".to_owned(),
        operator_namespace: own.clone(),
        targets: Targets::Namespaces(vec![own, target.to_owned()]),
        service_account: None,
        fail_forward: false,
    };
    let now = olm_runtime::conditions::now();
    decide(&Observed {
        original,
        membership: Some(&membership),
        namespaces: &[],
        config: None,
        same_name,
        claimed: &Default::default(),
        now: &now,
    })
}

/// What a watch saw of one version of a CSV: its UID, whether it was labelled a copy, its
/// status reason, its spec's version and its resourceVersion.
type Version = (String, bool, Option<CsvReason>, String, String);

/// Records every version of the CSV `name` of `namespace` a watch sees.
fn record_versions(client: &Client, namespace: &str, name: &str) -> Arc<Mutex<Vec<Version>>> {
    let seen: Arc<Mutex<Vec<Version>>> = Arc::default();
    let api = Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let record = seen.clone();
    tokio::spawn(async move {
        let mut versions = std::pin::pin!(watcher(api, config).applied_objects());
        while let Some(Ok(csv)) = versions.next().await {
            let version = (
                csv.uid().unwrap_or_default(),
                csv.labels().contains_key(labels::COPIED_FROM),
                csv.status.as_ref().and_then(|s| s.reason),
                csv.spec.version.clone().unwrap_or_default(),
                csv.resource_version().unwrap_or_default(),
            );
            record.lock().expect("the versions").push(version);
        }
    });
    seen
}

#[tokio::test]
#[ignore = "needs a cluster"]
async fn a_copy_from_a_stale_store_never_writes_over_the_csv_that_took_its_name() {
    with_namespace("copied-stale", |client, ns| async move {
        let target = format!("{ns}-t");
        create_namespace(&client, &target, &[]).await;
        // An original no store of the running operator holds (it is not on the cluster): only
        // the decisions below write its copy, each performed by the controller's apply step.
        let name = "stale.v1.0.0";
        let mut original = demo_csv(name, "1.0.0", None, &["stale"], MULTI_NAMESPACE, None);
        original.metadata.namespace = Some(ns.clone());
        original.metadata.uid = Some("original".to_owned());
        original.status = Some(
            serde_json::from_value(serde_json::json!({
                "phase": "Succeeded", "reason": "InstallSucceeded", "message": "installed",
            }))
            .expect("a status"),
        );
        let writer = Writer::new(Leadership::standalone(), FIELD_MANAGER_OLM);
        let perform = |decision: Decision| {
            let (writer, client, original) = (writer.clone(), client.clone(), original.clone());
            async move {
                copiedcsv::perform(&writer, &client, &original, &decision, &())
                    .await
                    .unwrap_or_else(|e| panic!("a copy refused its place is no error: {e:?}"))
            }
        };
        perform(stale_decision(&original, &target, &[])).await;
        let copy = wait_copy(&client, &target, name, &ns, CsvPhase::Succeeded).await;

        // An InstallPlan installs a CSV of the name in `target`: the copy goes (that very
        // object), a CSV of its own takes the name.
        let in_target = Api::<ClusterServiceVersion>::namespaced(client.clone(), &target);
        let params = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: copy.uid(),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        in_target.delete(name, &params).await.expect("delete the copy");
        wait_gone(&in_target, name).await;
        let resident = create_csv(
            &client,
            &target,
            demo_csv(name, "2.0.0", None, &["stale"], MULTI_NAMESPACE, None),
        )
        .await;
        let seen = record_versions(&client, &target, name);
        let resident_uid = resident.uid().expect("a UID");
        eventually("the watch saw the CSV that took the name", || {
            let seen = seen
                .lock()
                .expect("the versions")
                .iter()
                .any(|v| v.0 == resident_uid);
            async move { seen }
        })
        .await;

        // Stores that still show the copy (its UID): with another hash (the copy is applied again
        // and its status written), with its hash but no status (only its status is written);
        // and stores that saw the copy go but not the CSV come (the copy is created).
        let mut outdated = Occupant::of(&copy).expect("an occupant");
        outdated.status = None;
        let unwritten = outdated.clone();
        outdated.desired_hash = Some("an earlier apply".to_owned());
        let mut performed = Vec::new();
        for same_name in [vec![outdated], vec![unwritten], vec![]] {
            let decision = stale_decision(&original, &target, &same_name);
            assert!(
                !decision.effects.objects.is_empty() || !decision.effects.statuses.is_empty(),
                "the stale decision writes the copy: {same_name:?}"
            );
            performed.push(perform(decision).await);
        }

        // Every version of the name the watch saw since is the CSV that took it, never the copy.
        let last = in_target
            .get(name)
            .await
            .expect("the CSV of `target`")
            .resource_version();
        eventually("the watch saw the last version", || {
            let seen = seen
                .lock()
                .expect("the versions")
                .iter()
                .any(|v| Some(&v.4) == last.as_ref());
            async move { seen }
        })
        .await;
        let versions = seen.lock().expect("the versions").clone();
        for (uid, copied, reason, version, _) in &versions {
            assert!(
                uid == &resident_uid && !copied && *reason != Some(CsvReason::Copied) && version == "2.0.0",
                "the CSV of `target` was written as a copy: {versions:?}"
            );
        }
        for done in &performed {
            assert_eq!(
                (done.applied, done.statuses),
                (0, 0),
                "nothing written: {performed:?}"
            );
            assert!(done.refused > 0, "the place counts as taken: {performed:?}");
        }
        delete_csvs(&client, &target).await;
        delete_namespace(&client, &target).await;
    })
    .await;
}
