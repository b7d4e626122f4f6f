//! Applying the steps of an InstallPlan, in order, by server-side apply.
//!
//! Every step is applied whole with the field manager `catalog-operator`, so
//! applying it again is harmless: a plan interrupted at any step (a crash, a lost
//! lease) resumes from its recorded progress and re-applies at most the steps that
//! were in flight. Namespaced objects other than the CSV get the CSV as a
//! (non-controller) owner, so Kubernetes collects them with it.
//!
//! This is the external work of the controller's *apply* step, and reads
//! live what no store can hold: discovery (whether the API server serves a
//! step's kind, and its scope; answers are kept between reconciles, see
//! [`super::discovery`]) and the object a step applies, of any kind a
//! bundle ships. The UID of a bundle's CSV comes from the shared CSV
//! store, or from the apply that created it.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, Preconditions},
    core::{ApiResource, GroupVersion},
    discovery::{ApiCapabilities, Scope},
    runtime::reflector::{ObjectRef, Store},
};
use olm_api::{
    OPERATORS_GROUP,
    v1alpha1::{ClusterServiceVersion, Step, StepStatus},
};
use olm_runtime::{
    apply::{WriteError, Writer},
    errors::{ErrorClass, classify},
};
use serde_json::Value;

use super::discovery::{Discovered, Served};
use crate::controllers::plan::steps::is_supported;

/// What kind of failure a step met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepCause {
    /// The step's API is not served (yet): wait for it.
    WaitingForApi,
    /// Something the step needs is not there yet (the bundle's CSV, which owns
    /// the bundle's other objects).
    NotReady,
    /// The API server refused or failed a request; the class says how.
    Api(ErrorClass),
    /// The step itself cannot be applied (a kind an install plan may not create,
    /// a manifest that is no object, a CRD update that would lose stored data):
    /// only a new plan can help.
    Invalid,
    /// This replica stopped leading: stop, the leader goes on.
    NotLeader,
}

/// Why a step could not be applied: its cause, and a message naming the step
/// for the plan's status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StepFailure {
    /// What kind of failure.
    pub cause: StepCause,
    /// What failed on which object, in words.
    pub message: String,
}

impl StepFailure {
    fn new(cause: StepCause, message: String) -> Self {
        StepFailure { cause, message }
    }

    fn invalid(message: String) -> Self {
        Self::new(StepCause::Invalid, message)
    }

    fn api(error: &kube::Error, message: String) -> Self {
        Self::new(StepCause::Api(classify(error)), message)
    }
}

fn describe(step: &Step) -> String {
    let r = &step.resource;
    if r.group.is_empty() {
        format!("{} {} ({}/{})", r.kind, r.name, r.version, r.kind)
    } else {
        format!("{} {} ({}/{})", r.kind, r.name, r.group, r.version)
    }
}

fn from_write(step: &Step, error: WriteError) -> StepFailure {
    let what = describe(step);
    match error.api_error() {
        _ if error.is_not_leader() => StepFailure::new(StepCause::NotLeader, format!("{what}: {error}")),
        Some(api @ kube::Error::Api(status)) => {
            StepFailure::api(api, format!("{what}: {} ({})", status.message, status.reason))
        }
        Some(other) => StepFailure::api(other, format!("{what}: {other}")),
        // Only a lost lease sends nothing; treat anything else alike as worth a retry.
        None => StepFailure::new(StepCause::Api(ErrorClass::Transient), format!("{what}: {error}")),
    }
}

/// What applying steps needs: discovery answers (by group/version, kept
/// between reconciles, [`Discovered`]) and, for one reconcile, the
/// group/versions read live in it (whose answers are trusted to say that a
/// kind is not served), the objects read ahead and the UIDs of the plan's
/// CSVs. Steps are applied concurrently through a shared
/// reference; the maps are only touched between requests.
pub struct Executor<'a> {
    client: &'a Client,
    writer: &'a Writer,
    csvs: &'a Store<ClusterServiceVersion>,
    namespace: &'a str,
    discovered: &'a Discovered,
    read_now: Mutex<HashSet<(String, String)>>,
    read: Mutex<HashMap<ReadKey, Option<DynamicObject>>>,
    csv_uids: Mutex<HashMap<String, String>>,
}

impl<'a> Executor<'a> {
    /// An executor for the plans of `namespace`, which finds the CSVs that
    /// own a bundle's objects in `csvs` (the shared store, without copies),
    /// and what the API server serves in `discovered`.
    pub fn new(
        client: &'a Client,
        writer: &'a Writer,
        csvs: &'a Store<ClusterServiceVersion>,
        namespace: &'a str,
        discovered: &'a Discovered,
    ) -> Self {
        Executor {
            client,
            writer,
            csvs,
            namespace,
            discovered,
            read_now: Mutex::default(),
            read: Mutex::default(),
            csv_uids: Mutex::default(),
        }
    }

    /// Reads discovery for the group/versions of `steps` whose kinds no kept
    /// answer lists (`all`: for every one of them), all at once, so that the
    /// steps of a stage applied together do not each ask, and see the CRDs
    /// applied by the stages before. A failure is left for the step's own
    /// look to report.
    pub async fn discover(&self, steps: &[&Step], all: bool) {
        let mut wanted: Vec<(String, String)> = steps
            .iter()
            .map(|step| &step.resource)
            .filter(|r| all || self.discovered.find(&r.group, &r.version, &r.kind).is_none())
            .map(|r| (r.group.clone(), r.version.clone()))
            .collect();
        wanted.sort();
        wanted.dedup();
        let reads = wanted.into_iter().map(|(group, version)| async move {
            let served = self.served(&group, &version).await;
            ((group, version), served)
        });
        for ((group, version), served) in futures::future::join_all(reads).await {
            match served {
                Ok(served) => {
                    self.discovered.keep(&group, &version, served);
                    lock(&self.read_now).insert((group, version));
                }
                Err(_) => self.discovered.forget(&group, &version),
            };
        }
    }

    /// The kinds served at `group`/`version`, read live.
    async fn served(&self, group: &str, version: &str) -> Result<Served, kube::Error> {
        let gv = GroupVersion::gv(group, version);
        let found = kube::discovery::pinned_group(self.client, &gv).await?;
        Ok(found.versioned_resources(version))
    }

    /// The step's kind as the API server serves it: from a kept answer that
    /// lists it ([`Executor::discover`] read those missing for the step's
    /// stage), or else read live here.
    async fn resource(&self, step: &Step) -> Result<(ApiResource, ApiCapabilities), StepFailure> {
        let r = &step.resource;
        let not_served = |detail: String| {
            StepFailure::new(
                StepCause::WaitingForApi,
                format!("{}: the API server does not serve it yet{detail}", describe(step)),
            )
        };
        if let Some(found) = self.discovered.find(&r.group, &r.version, &r.kind) {
            return Ok(found);
        }
        if lock(&self.read_now).contains(&(r.group.clone(), r.version.clone())) {
            return Err(not_served(String::new()));
        }
        match self.served(&r.group, &r.version).await {
            Ok(served) => {
                let found = served.iter().find(|(ar, _)| ar.kind == r.kind).cloned();
                self.discovered.keep(&r.group, &r.version, served);
                found.ok_or_else(|| not_served(String::new()))
            }
            Err(kube::Error::Discovery(e)) => Err(not_served(format!(" ({e})"))),
            Err(e) if classify(&e) == ErrorClass::Gone => Err(not_served(String::new())),
            Err(e) => Err(StepFailure::api(
                &e,
                format!("{}: discovery failed: {e}", describe(step)),
            )),
        }
    }

    /// The UID of CSV `name` of the namespace, to own the bundle's other
    /// objects: the one this reconcile applied, or the one in the store (which
    /// holds no copied CSV, so never lends a copy's UID).
    fn csv_uid(&self, name: &str) -> Result<String, StepFailure> {
        if let Some(uid) = lock(&self.csv_uids).get(name) {
            return Ok(uid.clone());
        }
        let stored = self.csvs.get(&ObjectRef::new(name).within(self.namespace));
        match stored.and_then(|csv| csv.uid()) {
            Some(uid) => {
                lock(&self.csv_uids).insert(name.to_owned(), uid.clone());
                Ok(uid)
            }
            None => Err(StepFailure::new(
                StepCause::NotReady,
                format!("ClusterServiceVersion {name} is not there yet to own the objects of its bundle"),
            )),
        }
    }

    /// Where objects of `resource` are read and written: in the namespace, or
    /// cluster-wide.
    fn api(&self, resource: &ApiResource, capabilities: &ApiCapabilities) -> Api<DynamicObject> {
        match capabilities.scope {
            Scope::Namespaced => Api::namespaced_with(self.client.clone(), self.namespace, resource),
            Scope::Cluster => Api::all_with(self.client.clone(), resource),
        }
    }

    /// Reads, all at once, the objects of `steps` whose kinds kept discovery
    /// lists, so that a later stage does not spend a round trip reading
    /// before it writes; [`Executor::apply`] reads those left out, or that
    /// failed, itself.
    pub async fn read_ahead(&self, steps: &[&Step]) {
        let reads = steps.iter().filter_map(|step| {
            let r = &step.resource;
            let (resource, capabilities) = self.discovered.find(&r.group, &r.version, &r.kind)?;
            let api = self.api(&resource, &capabilities);
            Some(async move { (read_key(step), api.get_opt(&r.name).await) })
        });
        for (key, read) in futures::future::join_all(reads).await {
            if let Ok(existing) = read {
                lock(&self.read).insert(key, existing);
            }
        }
    }

    /// The live object `step` applies (`None`: there is none): read ahead,
    /// or read now. Live: a step may be of any kind a bundle ships, which no
    /// store holds.
    async fn existing(
        &self,
        step: &Step,
        api: &Api<DynamicObject>,
    ) -> Result<Option<DynamicObject>, StepFailure> {
        if let Some(existing) = lock(&self.read).remove(&read_key(step)) {
            return Ok(existing);
        }
        api.get_opt(&step.resource.name)
            .await
            .map_err(|e| StepFailure::api(&e, format!("{}: cannot read it: {e}", describe(step))))
    }

    /// Applies one step; returns Created (new) or Present (it existed).
    pub async fn apply(&self, step: &Step) -> Result<StepStatus, StepFailure> {
        let r = &step.resource;
        let manifest = r
            .manifest
            .as_deref()
            .ok_or_else(|| StepFailure::invalid(format!("{}: the step has no manifest", describe(step))))?;
        let mut object = step_object(step)?;
        let is_csv = r.group == OPERATORS_GROUP && r.kind == "ClusterServiceVersion";
        let is_subscription = r.group == OPERATORS_GROUP && r.kind == "Subscription";
        let (resource, capabilities) = self.resource(step).await?;
        let namespaced = capabilities.scope == Scope::Namespaced;
        object.metadata.namespace = namespaced.then(|| self.namespace.to_owned());
        let api = self.api(&resource, &capabilities);
        if namespaced && !is_csv && !is_subscription {
            let uid = self.csv_uid(&step.resolving)?;
            object.metadata.owner_references = Some(vec![csv_owner(&step.resolving, uid)]);
        }
        let mut existing = self.existing(step, &api).await?;
        if is_csv && let Some(copy) = existing.take_if(|o| is_copy(o)) {
            // A copy of the same operator installed elsewhere stands where this one goes: the
            // installed operator takes the name (olm-operator never copies over it).
            self.remove_copy(step, &copy).await?;
        }
        if r.group == "apiextensions.k8s.io"
            && r.kind == "CustomResourceDefinition"
            && let Some(existing) = &existing
        {
            check_stored_versions(step, existing, manifest)?;
        }
        if let Some(existing) = &existing {
            keep_operator_labels(&mut object, existing);
        }
        let applied = if is_csv {
            self.apply_csv(step, &api, &object).await?
        } else {
            self.writer
                .apply_dynamic(&api, &r.name, &object)
                .await
                .map_err(|e| from_write(step, e))?
        };
        if is_csv && let Some(uid) = applied.uid() {
            lock(&self.csv_uids).insert(r.name.clone(), uid);
        }
        Ok(if existing.is_some() {
            StepStatus::Present
        } else {
            StepStatus::Created
        })
    }
}

/// What identifies the object of a step among those read ahead.
type ReadKey = (String, String, String, String);

fn read_key(step: &Step) -> ReadKey {
    let r = &step.resource;
    (r.group.clone(), r.version.clone(), r.kind.clone(), r.name.clone())
}

/// The map behind `mutex`; one poisoned by a panic elsewhere is still a cache.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The object a step applies, from its manifest (pure): refused when a plan may
/// not create its kind or the manifest is no Kubernetes object; a CSV loses the
/// fields its schema does not declare.
fn step_object(step: &Step) -> Result<DynamicObject, StepFailure> {
    let r = &step.resource;
    if !is_supported(&r.group, &r.kind) {
        return Err(StepFailure::invalid(format!(
            "{}: an install plan may not create objects of this kind",
            describe(step)
        )));
    }
    let manifest = r
        .manifest
        .as_deref()
        .ok_or_else(|| StepFailure::invalid(format!("{}: the step has no manifest", describe(step))))?;
    let object: DynamicObject = serde_json::from_str(manifest).map_err(|e| {
        StepFailure::invalid(format!(
            "{}: the manifest is not a Kubernetes object: {e}",
            describe(step)
        ))
    })?;
    if r.group == OPERATORS_GROUP && r.kind == "ClusterServiceVersion" {
        return prune_csv(step, object);
    }
    Ok(object)
}

/// The owner reference to CSV `name` that the namespaced objects of its bundle
/// carry (not a controller: deleting the CSV collects them).
fn csv_owner(name: &str, uid: String) -> OwnerReference {
    OwnerReference {
        api_version: format!("{OPERATORS_GROUP}/v1alpha1"),
        kind: "ClusterServiceVersion".to_owned(),
        name: name.to_owned(),
        uid,
        controller: Some(false),
        block_owner_deletion: Some(false),
    }
}

/// Keeps on `object` the `operators.coreos.com/<package>.<namespace>` labels
/// that `existing` carries: an object shared by installs in several namespaces
/// (a CRD) stays a component of each of their Operators, instead of the last
/// apply taking the others' labels away.
pub fn keep_operator_labels(object: &mut DynamicObject, existing: &DynamicObject) {
    let kept: Vec<(String, String)> = existing
        .labels()
        .iter()
        .filter(|(key, _)| key.starts_with(olm_api::labels::OPERATOR_LABEL_PREFIX))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if kept.is_empty() {
        return;
    }
    let labels = object.labels_mut();
    for (key, value) in kept {
        labels.entry(key).or_insert(value);
    }
}

/// Whether `object` is a copied CSV (labelled `olm.copiedFrom`): the shadow of
/// an operator installed in another namespace, not an installed operator.
fn is_copy(object: &DynamicObject) -> bool {
    object.labels().contains_key(olm_api::labels::COPIED_FROM)
}

/// How many times a CSV step removes a copy that came back before it waits for
/// the next reconcile: olm-operator writes copies into every namespace an
/// operator serves, and one of its writes may land between the removal and the
/// apply.
const COPY_REMOVALS: usize = 5;

impl Executor<'_> {
    /// Applies the step's CSV `object`; when a copy was written again between the
    /// removal of the one that stood there and this apply, removes it and applies
    /// again at once (a wait for the next reconcile cost seconds per install).
    async fn apply_csv(
        &self,
        step: &Step,
        api: &Api<DynamicObject>,
        object: &DynamicObject,
    ) -> Result<DynamicObject, StepFailure> {
        for _ in 0..COPY_REMOVALS {
            let applied = self
                .writer
                .apply_dynamic(api, &step.resource.name, object)
                .await
                .map_err(|e| from_write(step, e))?;
            if !is_copy(&applied) {
                return Ok(applied);
            }
            self.remove_copy(step, &applied).await?;
        }
        Err(StepFailure::new(
            StepCause::Api(ErrorClass::Transient),
            format!(
                "{}: a copied CSV kept coming back in its place ({COPY_REMOVALS} removals); retrying",
                describe(step)
            ),
        ))
    }

    /// Deletes the copied CSV `copy` (that very object, by UID) so that the
    /// step's CSV can be created in its place.
    async fn remove_copy(&self, step: &Step, copy: &DynamicObject) -> Result<(), StepFailure> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: copy.uid(),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        let api: Api<ClusterServiceVersion> = Api::namespaced(self.client.clone(), self.namespace);
        match self.writer.delete(&api, &copy.name_any(), &params).await {
            Ok(_) => Ok(()),
            // The precondition failed: the copy is gone already and another object took the name.
            Err(e) if matches!(e.api_error(), Some(kube::Error::Api(status)) if status.code == 409) => Ok(()),
            Err(e) => Err(from_write(step, e)),
        }
    }
}

/// A bundle's CSV as OLM's schema has it: fields the schema does not declare
/// (authors add some, such as `spec.support`) are dropped, as the API server
/// prunes them on create. Server-side apply would refuse them instead.
pub fn prune_csv(step: &Step, object: DynamicObject) -> Result<DynamicObject, StepFailure> {
    let invalid = |e: serde_json::Error| {
        StepFailure::invalid(format!(
            "{}: the manifest is not a valid ClusterServiceVersion: {e}",
            describe(step)
        ))
    };
    let value = serde_json::to_value(&object).map_err(invalid)?;
    let typed: ClusterServiceVersion = serde_json::from_value(value).map_err(invalid)?;
    serde_json::to_value(&typed)
        .and_then(serde_json::from_value)
        .map_err(invalid)
}

/// OLM's storage check for a CRD update: no version in the existing CRD's
/// `status.storedVersions` may disappear from the new CRD, or objects stored in
/// it could no longer be read.
pub fn check_stored_versions(
    step: &Step,
    existing: &DynamicObject,
    manifest: &str,
) -> Result<(), StepFailure> {
    let new: Value = serde_json::from_str(manifest).unwrap_or(Value::Null);
    let dropped = dropped_stored_versions(&existing.data, &new);
    if dropped.is_empty() {
        return Ok(());
    }
    Err(StepFailure::invalid(format!(
        "{}: the new CRD drops version(s) {} that objects are stored in (status.storedVersions); \
         updating it risks data loss: migrate the stored objects and remove the version from \
         status.storedVersions first",
        describe(step),
        dropped.join(", ")
    )))
}

/// The versions of the live CRD `existing`'s `status.storedVersions` that
/// the CRD manifest `new` does not declare (pure): the storage check of a CRD
/// update, and of a rollback to an older CRD.
pub fn dropped_stored_versions(existing: &Value, new: &Value) -> Vec<String> {
    let mut versions: Vec<&str> = new
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .collect();
    if let Some(version) = new.pointer("/spec/version").and_then(Value::as_str) {
        versions.push(version);
    }
    existing
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|v| !versions.contains(v))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::StepResource;
    use serde_json::json;

    use super::*;

    /// A step whose kind a plan may not create, with no manifest, or whose
    /// manifest is no object, is refused as invalid, naming the object (table).
    #[test]
    fn a_step_that_cannot_be_applied_is_refused_before_any_call() {
        let unsupported = {
            let mut step = crd_step(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}));
            step.resource.group = String::new();
            step.resource.kind = "Pod".into();
            step
        };
        let no_manifest = {
            let mut step = crd_step(&json!({}));
            step.resource.manifest = None;
            step
        };
        let not_an_object = {
            let mut step = crd_step(&json!({}));
            step.resource.manifest = Some("[1, 2]".into());
            step
        };
        let cases = [
            (unsupported, "may not create objects of this kind"),
            (no_manifest, "the step has no manifest"),
            (not_an_object, "the manifest is not a Kubernetes object"),
        ];
        for (step, want) in cases {
            let Err(StepFailure {
                cause: StepCause::Invalid,
                message,
            }) = step_object(&step)
            else {
                panic!("{want}: refused as invalid");
            };
            assert!(message.contains(want), "{message}");
            assert!(message.contains(&step.resource.name), "{message}");
        }
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "dbs.demo.io"}});
        assert_eq!(
            step_object(&crd_step(&crd)).unwrap().metadata.name.as_deref(),
            Some("dbs.demo.io")
        );
    }

    #[test]
    fn a_csv_loses_the_fields_its_schema_does_not_declare() {
        let manifest = json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "db.v2", "annotations": {"kept": "yes"}},
            "spec": {
                "displayName": "DB",
                "support": "someone",
                "install": {"strategy": "deployment", "spec": {"deployments": []}},
                "customresourcedefinitions": {"owned": [{"name": "dbs.demo.io", "version": "v1", "kind": "DB", "Kind": "typo"}]},
            },
        });
        let mut step = crd_step(&manifest);
        step.resource.kind = "ClusterServiceVersion".into();
        let object: DynamicObject = serde_json::from_value(manifest).unwrap();
        let pruned = serde_json::to_value(prune_csv(&step, object).unwrap()).unwrap();
        assert_eq!(pruned.pointer("/metadata/annotations/kept"), Some(&json!("yes")));
        assert_eq!(pruned.pointer("/spec/displayName"), Some(&json!("DB")));
        assert_eq!(pruned.pointer("/spec/support"), None);
        assert_eq!(
            pruned.pointer("/spec/customresourcedefinitions/owned/0/Kind"),
            None
        );
        assert_eq!(
            pruned.pointer("/spec/customresourcedefinitions/owned/0/kind"),
            Some(&json!("DB"))
        );
    }

    #[test]
    fn a_csv_that_is_not_one_is_refused_with_the_cause() {
        let manifest = json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "db.v2"},
            "spec": {"displayName": 7},
        });
        let object: DynamicObject = serde_json::from_value(manifest.clone()).unwrap();
        let Err(StepFailure {
            cause: StepCause::Invalid,
            message,
        }) = prune_csv(&crd_step(&manifest), object)
        else {
            panic!("a CSV whose displayName is a number is refused");
        };
        assert!(message.contains("not a valid ClusterServiceVersion"), "{message}");
    }

    #[test]
    fn a_refused_write_carries_the_class_of_its_error() {
        let step = crd_step(&json!({}));
        let refused = |code: u16, reason: &str| WriteError::Apply {
            kind: "CustomResourceDefinition".into(),
            name: "dbs.demo.io".into(),
            source: kube::Error::Api(Box::new(kube::core::Status {
                code,
                reason: reason.into(),
                message: "denied".into(),
                ..Default::default()
            })),
        };
        let forbidden = from_write(&step, refused(403, "Forbidden"));
        assert_eq!(forbidden.cause, StepCause::Api(ErrorClass::Forbidden));
        assert!(
            forbidden.message.contains("CustomResourceDefinition dbs.demo.io")
                && forbidden.message.contains("denied"),
            "{}",
            forbidden.message
        );
        assert_eq!(
            from_write(&step, refused(422, "Invalid")).cause,
            StepCause::Api(ErrorClass::Terminal)
        );
        assert_eq!(
            from_write(&step, refused(503, "ServiceUnavailable")).cause,
            StepCause::Api(ErrorClass::Transient)
        );
        let lost = WriteError::NotLeader {
            kind: "CustomResourceDefinition".into(),
            name: "dbs.demo.io".into(),
        };
        assert_eq!(from_write(&step, lost).cause, StepCause::NotLeader);
    }

    fn crd_step(manifest: &Value) -> Step {
        Step {
            resolving: "db.v2".into(),
            resource: StepResource {
                catalog_source: "demo".into(),
                catalog_source_namespace: "olm".into(),
                group: "apiextensions.k8s.io".into(),
                version: "v1".into(),
                kind: "CustomResourceDefinition".into(),
                name: "dbs.demo.io".into(),
                manifest: Some(manifest.to_string()),
            },
            status: StepStatus::NotPresent,
            optional: None,
        }
    }

    fn existing(stored: &[&str]) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "dbs.demo.io"},
            "status": {"storedVersions": stored},
        }))
        .unwrap()
    }

    #[test]
    fn a_shared_object_keeps_the_labels_of_other_operators() {
        let mut object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "dbs.demo.io", "labels": {"operators.coreos.com/db.b": ""}},
        }))
        .unwrap();
        let existing: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "dbs.demo.io", "labels": {"operators.coreos.com/db.a": "", "other": "x"}},
        }))
        .unwrap();
        keep_operator_labels(&mut object, &existing);
        let keys: Vec<&String> = object.labels().keys().collect();
        assert_eq!(keys, ["operators.coreos.com/db.a", "operators.coreos.com/db.b"]);
    }

    #[test]
    fn a_stored_version_may_not_disappear() {
        let new = json!({"spec": {"versions": [{"name": "v2"}]}});
        let step = crd_step(&new);
        let manifest = step.resource.manifest.clone().unwrap();
        assert!(check_stored_versions(&step, &existing(&["v2"]), &manifest).is_ok());
        let error = check_stored_versions(&step, &existing(&["v1", "v2"]), &manifest).unwrap_err();
        let StepFailure {
            cause: StepCause::Invalid,
            message,
        } = error
        else {
            panic!("{error:?}")
        };
        assert!(
            message.contains("v1") && message.contains("data loss"),
            "{message}"
        );
    }
}
