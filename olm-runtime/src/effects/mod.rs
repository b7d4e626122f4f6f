//! What a reconcile decided, and the one applier that carries it out.
//!
//! Every reconciler has the same three steps: *read* what the decision needs
//! (from the shared stores), *decide* in a pure function what the cluster
//! should hold, *apply* it. The decision is an [`Effects`]: the objects to
//! apply, the objects to remove, and the status to write. [`Writer::perform`]
//! applies them in that fixed order, each write fenced on leadership and
//! counted, with the binary's field manager:
//!
//! 1. [`Desired`] objects, by server-side apply, each once the one before it
//!    is written (or with it: [`Desired::alongside_previous`]), in the
//!    order decided. An object the controller owns
//!    whole ([`Desired::owned`]) carries the hash of its desired content in
//!    [`DESIRED_HASH`]; when the live copy in a store ([`Live`]) already carries
//!    that hash the write is skipped, so a new leader sends nothing for an
//!    install that is already right. Fields set on an object that others own
//!    ([`Desired::fields`], e.g. one annotation) are applied as decided: the
//!    decision compares them with the live object itself.
//!    An object the controller must never merge into one that appeared
//!    under its name ([`Desired::create_only`]) is created instead; when the
//!    name is taken (HTTP 409) it is left alone, and so is its status. An
//!    object the decision saw in a store is written only onto that very
//!    object ([`Desired::with_uid`]): one that took the name since is left
//!    alone, and so is its status.
//! 2. [`StatusOf`]: the status of other objects the reconcile keeps (e.g. the
//!    copies of a CSV), as decided: the decision compares them with the
//!    stores itself. A status of an object that does not exist (HTTP 404), or
//!    whose create or bound write was refused, is not written. A status bound
//!    to its object ([`StatusOf::with_uid`], [`StatusOf::if_labelled`]) is
//!    written only onto that object; the status of an object created or
//!    written bound in the same perform, only onto the object that write
//!    returned. A status that refers to an object of the same perform
//!    ([`StatusOf::refers_to`]) is written only if that object's write was not
//!    refused, with the UID the write returned.
//! 3. [`Removal`]s, by name, and with [`Removal::with_uid`] only that very
//!    object; one already gone, or replaced by another of the name, is not an
//!    error.
//! 4. The status of the reconciled object, last, so that it reports what was
//!    written.

use std::fmt::Debug;

use kube::{
    Api, Client, Resource,
    api::{ApiResource, DeleteParams, DynamicObject, Preconditions},
};
use serde::{Serialize, de::DeserializeOwned};

use crate::apply::{Guard, Guarded, WriteError, Writer};

/// The annotation holding the hash of what a controller last applied to an
/// object it owns whole.
pub const DESIRED_HASH: &str = "olm-rs.dev/desired-hash";

/// One object, or some fields of one, that a reconcile wants the cluster to hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// Its kind's API resource.
    pub resource: ApiResource,
    /// What is applied: `apiVersion`, `kind`, `metadata.name` (and namespace), and
    /// only the fields this controller owns.
    pub object: DynamicObject,
    /// The hash of `object` when the controller owns it whole.
    hash: Option<String>,
    /// Created (never applied) when no live copy carries the hash: see
    /// [`Desired::create_only`].
    create: bool,
    /// Written at the same time as the object before it: see
    /// [`Desired::alongside_previous`].
    together: bool,
}

impl Desired {
    /// An object the controller owns whole, stamped with the hash of its content.
    pub fn owned<K>(object: &K) -> Result<Desired, serde_json::Error>
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        let mut desired = Desired::fields(object)?;
        let hash = content_hash(&desired.object)?;
        desired
            .object
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(DESIRED_HASH.to_owned(), hash.clone());
        desired.hash = Some(hash);
        Ok(desired)
    }

    /// Created rather than applied: for an object the decision saw no live
    /// copy of, which must not be merged into another object that took its
    /// name since (the create fails with 409 and the object is left alone).
    #[must_use]
    pub fn create_only(mut self) -> Desired {
        self.create = true;
        self
    }

    /// Written at the same time as the object before it in
    /// [`Effects::objects`], rather than once that one is written: for objects
    /// that do not depend on one another (a ServiceAccount and a Role).
    #[must_use]
    pub fn alongside_previous(mut self) -> Desired {
        self.together = true;
        self
    }

    /// Fields that the controller sets on an object others own: always applied.
    pub fn fields<K>(object: &K) -> Result<Desired, serde_json::Error>
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        let resource = ApiResource::erase::<K>(&());
        let mut value = serde_json::to_value(object)?;
        value["apiVersion"] = resource.api_version.clone().into();
        value["kind"] = resource.kind.clone().into();
        Ok(Desired {
            resource,
            object: serde_json::from_value(value)?,
            hash: None,
            create: false,
            together: false,
        })
    }

    /// Fields that the controller sets on an object of `resource`'s kind that
    /// others own, given as a dynamic object (for a kind without a Rust type
    /// that fits a partial object, such as some fields of a CRD): always applied.
    pub fn dynamic_fields(resource: &ApiResource, object: &DynamicObject) -> Desired {
        let mut object = object.clone();
        object.types = Some(kube::api::TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        });
        Desired {
            resource: resource.clone(),
            object,
            hash: None,
            create: false,
            together: false,
        }
    }

    /// The hash of its content ([`DESIRED_HASH`]), when the controller owns it
    /// whole: a decision may compare it with a live copy itself, e.g. to
    /// keep only the objects that need a write.
    pub fn hash(&self) -> Option<&str> {
        self.hash.as_deref()
    }

    /// Applied only onto the object with UID `uid`, the one the decision saw
    /// under its name: `metadata.uid` rides in the apply body, and the API
    /// server refuses the apply when no object holds the name (HTTP 409) or
    /// another one does (HTTP 422, `metadata.uid` is immutable). A refused
    /// write counts as [`Performed::refused`]: the name is taken, the object
    /// and its status are left alone. (The hash stays that of the content.)
    #[must_use]
    pub fn with_uid(mut self, uid: &str) -> Desired {
        self.object.metadata.uid = Some(uid.to_owned());
        self
    }

    /// Whether it is written at the same time as the object before it
    /// ([`Desired::alongside_previous`]).
    pub fn is_alongside_previous(&self) -> bool {
        self.together
    }

    /// Whether it is created rather than applied ([`Desired::create_only`]).
    pub fn creates(&self) -> bool {
        self.create
    }

    /// The UID of the only object it is applied onto ([`Desired::with_uid`]).
    pub fn uid(&self) -> Option<&str> {
        self.object.metadata.uid.as_deref()
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        self.object.metadata.name.as_deref().unwrap_or_default()
    }

    /// The object's namespace, for namespaced kinds.
    pub fn namespace(&self) -> Option<&str> {
        self.object.metadata.namespace.as_deref()
    }
}

/// `objects` as one wave, written at the same time: each but the first
/// [alongside the one before it](Desired::alongside_previous).
pub fn at_once(objects: impl IntoIterator<Item = Desired>) -> Vec<Desired> {
    objects
        .into_iter()
        .enumerate()
        .map(|(index, desired)| {
            if index == 0 {
                desired
            } else {
                desired.alongside_previous()
            }
        })
        .collect()
}

/// The hash of an object's content, without the hash annotation itself.
fn content_hash(object: &DynamicObject) -> Result<String, serde_json::Error> {
    let mut object = object.clone();
    if let Some(annotations) = object.metadata.annotations.as_mut() {
        annotations.remove(DESIRED_HASH);
    }
    Ok(fnv1a(&serde_json::to_vec(&object)?))
}

/// FNV-1a, 64 bits, as 16 hex digits: stable across releases and platforms
/// (unlike `std`'s hasher), for names and annotations that must outlive an upgrade.
pub fn fnv1a(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        h ^= u64::from(*byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// An object a reconcile wants gone.
#[derive(Clone, Debug, PartialEq)]
pub struct Removal {
    /// Its kind's API resource.
    pub resource: ApiResource,
    /// Its namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its UID, when only that very object may go (see [`Removal::with_uid`]).
    pub uid: Option<String>,
}

impl Removal {
    /// Removes `K` `name` (of `namespace`, for namespaced kinds).
    pub fn of<K: Resource<DynamicType = ()>>(namespace: Option<&str>, name: &str) -> Removal {
        Removal {
            resource: ApiResource::erase::<K>(&()),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            uid: None,
        }
    }

    /// Removes only the object with UID `uid`: one that took the name since
    /// the decision is left alone.
    #[must_use]
    pub fn with_uid(mut self, uid: &str) -> Removal {
        self.uid = Some(uid.to_owned());
        self
    }
}

/// The status of an object other than the reconciled one, written whole
/// through its status subresource.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusOf {
    /// Its kind's API resource.
    pub resource: ApiResource,
    /// Its namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The whole status this controller owns on it.
    pub status: serde_json::Value,
    /// What the object must be for the status to be written
    /// ([`StatusOf::with_uid`], [`StatusOf::if_labelled`]).
    pub guard: Guard,
    /// An object of [`Effects::objects`] the status refers to ([`StatusOf::refers_to`]).
    pub refers_to: Option<Reference>,
}

/// An object of the same [`Effects`] that a status refers to: the status is
/// written only if that object's write was not refused, and carries the UID
/// of the object when it was created or written bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// Its kind's API resource.
    pub resource: ApiResource,
    /// Its namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The JSON Pointers, into the status, of the fields that hold its UID.
    pub uid_at: Vec<String>,
}

impl Reference {
    /// Whether it names `desired`.
    fn names(&self, desired: &Desired) -> bool {
        self.resource == desired.resource
            && self.namespace.as_deref() == desired.namespace()
            && self.name == desired.name()
    }

    /// `status` with `uid` set at every pointer of [`Reference::uid_at`]
    /// (missing fields added, when their parent object exists).
    fn stamped(&self, status: &serde_json::Value, uid: &str) -> serde_json::Value {
        let mut status = status.clone();
        for pointer in &self.uid_at {
            let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
            if let Some(serde_json::Value::Object(fields)) = status.pointer_mut(parent) {
                fields.insert(key.replace("~1", "/").replace("~0", "~"), uid.into());
            }
        }
        status
    }
}

impl StatusOf {
    /// The status `status` of `K` `name` (of `namespace`, for namespaced kinds).
    pub fn of<K, S>(namespace: Option<&str>, name: &str, status: &S) -> Result<StatusOf, serde_json::Error>
    where
        K: Resource<DynamicType = ()>,
        S: Serialize,
    {
        Ok(StatusOf {
            resource: ApiResource::erase::<K>(&()),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            status: serde_json::to_value(status)?,
            guard: Guard::default(),
            refers_to: None,
        })
    }

    /// Written only after `desired` (one of the same [`Effects::objects`]), and
    /// only if its write was not refused: a status never refers to an object
    /// that another one holding the name stands in for. When `desired` is
    /// created (or written bound to its UID), its UID is set in the status at
    /// the JSON Pointers `uid_at` (e.g. `/objectRef/uid`), which the decision
    /// could not know.
    #[must_use]
    pub fn refers_to(mut self, desired: &Desired, uid_at: &[&str]) -> StatusOf {
        self.refers_to = Some(Reference {
            resource: desired.resource.clone(),
            namespace: desired.namespace().map(str::to_owned),
            name: desired.name().to_owned(),
            uid_at: uid_at.iter().map(|p| (*p).to_owned()).collect(),
        });
        self
    }

    /// Written only onto the object with UID `uid` (by a JSON Patch that tests
    /// it); under a name another object took since, it is refused
    /// ([`Performed::refused`]), not an error.
    #[must_use]
    pub fn with_uid(mut self, uid: &str) -> StatusOf {
        self.guard.uid = Some(uid.to_owned());
        self
    }

    /// Written only while the object is at `resource_version` (the copy the
    /// decision read); once another writer changed it, refused
    /// ([`Performed::refused`]), not an error: the next reconcile decides
    /// again from the newer copy.
    #[must_use]
    pub fn at_version(mut self, resource_version: &str) -> StatusOf {
        self.guard.resource_version = Some(resource_version.to_owned());
        self
    }

    /// Written only onto an object labelled `key=value`; otherwise refused
    /// ([`Performed::refused`]), not an error.
    #[must_use]
    pub fn if_labelled(mut self, key: &str, value: &str) -> StatusOf {
        self.guard.label = Some((key.to_owned(), value.to_owned()));
        self
    }
}

/// The status a reconcile writes to the object it reconciles.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusWrite<S> {
    /// The object's name.
    pub name: String,
    /// The whole status this controller owns.
    pub status: S,
}

/// Everything one reconcile decided: performed by [`Writer::perform`] in the order
/// objects, statuses of other objects, removals, status.
#[derive(Clone, Debug, PartialEq)]
pub struct Effects<S> {
    /// Objects (or fields of objects) to apply.
    pub objects: Vec<Desired>,
    /// Statuses of other objects to write.
    pub statuses: Vec<StatusOf>,
    /// Objects to remove.
    pub removals: Vec<Removal>,
    /// The status to write, when it changed.
    pub status: Option<StatusWrite<S>>,
}

impl<S> Default for Effects<S> {
    fn default() -> Self {
        Effects {
            objects: Vec::new(),
            statuses: Vec::new(),
            removals: Vec::new(),
            status: None,
        }
    }
}

impl<S> Effects<S> {
    /// Nothing to do.
    pub fn none() -> Self {
        Effects::default()
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
            && self.statuses.is_empty()
            && self.removals.is_empty()
            && self.status.is_none()
    }
}

/// Where the applier finds the live copies of the objects it applies: the
/// hash they carry in [`DESIRED_HASH`]. Backed by the binary's shared stores.
pub trait Live: Sync {
    /// The [`DESIRED_HASH`] of the live object, if a store holds it.
    fn desired_hash(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Option<String>;
}

/// No store: every object is applied.
impl Live for () {
    fn desired_hash(&self, _: &ApiResource, _: Option<&str>, _: &str) -> Option<String> {
        None
    }
}

/// What [`Writer::perform`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Performed {
    /// Objects applied.
    pub applied: usize,
    /// Objects whose live copy already carried the desired hash.
    pub unchanged: usize,
    /// Writes left undone because the name is taken: creates refused with
    /// HTTP 409, and objects and statuses bound to an object
    /// ([`Desired::with_uid`], [`StatusOf::with_uid`]) that no longer holds
    /// the name, and statuses referring to an object whose write was refused
    /// ([`StatusOf::refers_to`]).
    pub refused: usize,
    /// Statuses of other objects written.
    pub statuses: usize,
    /// Objects deleted (already gone or replaced ones are not counted).
    pub removed: usize,
    /// Whether the status was written.
    pub status: bool,
}

/// What became of one of the objects written by [`Writer::write_objects`].
#[derive(Clone, Debug, PartialEq)]
pub enum ObjectOutcome {
    /// Its live copy already carried the desired hash: nothing sent.
    Unchanged,
    /// Written: the object as the API server stored it.
    Written(Box<DynamicObject>),
    /// Its name is taken: neither it nor its status is written.
    Refused,
}

impl ObjectOutcome {
    /// The UID that a status of the object written as `desired` is bound to:
    /// that of the object created, or written bound to its UID.
    fn bound_uid(&self, desired: &Desired) -> Option<&str> {
        match self {
            ObjectOutcome::Written(object) if desired.create || desired.uid().is_some() => {
                object.metadata.uid.as_deref()
            }
            _ => None,
        }
    }
}

/// `objects` cut into the groups written at the same time: each starts at an
/// object not written [alongside the previous one](Desired::alongside_previous).
fn waves(objects: &[Desired]) -> Vec<&[Desired]> {
    let mut waves = Vec::new();
    let mut start = 0;
    for (index, desired) in objects.iter().enumerate().skip(1) {
        if !desired.together {
            waves.push(&objects[start..index]);
            start = index;
        }
    }
    if start < objects.len() {
        waves.push(&objects[start..]);
    }
    waves
}

impl Writer {
    /// Performs `effects` of a reconcile of a `K` (whose status `S` is written
    /// last, through `reconciled`, the API of its kind and namespace), skipping
    /// owned objects whose live copy in `live` is already as desired.
    pub async fn perform<K, S>(
        &self,
        client: &Client,
        reconciled: &Api<K>,
        effects: &Effects<S>,
        live: &(dyn Live + Sync),
    ) -> Result<Performed, WriteError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
        S: Serialize,
    {
        let mut done = Performed::default();
        let written = self.write_objects(client, &effects.objects, live).await?;
        let outcomes: Vec<(&Desired, ObjectOutcome)> = effects.objects.iter().zip(written).collect();
        for (_, outcome) in &outcomes {
            match outcome {
                ObjectOutcome::Unchanged => done.unchanged += 1,
                ObjectOutcome::Written(_) => done.applied += 1,
                ObjectOutcome::Refused => done.refused += 1,
            }
        }
        for write in &effects.statuses {
            match self.write_status(client, write, &outcomes).await? {
                Some(Guarded::Written) => done.statuses += 1,
                Some(Guarded::Taken) => done.refused += 1,
                Some(Guarded::Gone) | None => {}
            }
        }
        done.removed = self.remove(client, &effects.removals).await?;
        if let Some(write) = &effects.status {
            self.apply_status(reconciled, &write.name, &write.status).await?;
            done.status = true;
        }
        Ok(done)
    }

    /// Writes `objects` in their order, the objects of a wave
    /// ([`Desired::alongside_previous`]) at the same time, through `client`
    /// (the binary's own, or one acting as an account whose permissions bound
    /// the writes), skipping owned objects whose live copy in `live` already
    /// carries the desired hash. Returns what became of each, in their order.
    /// The first write that fails ends it: the waves after it are not sent.
    pub async fn write_objects(
        &self,
        client: &Client,
        objects: &[Desired],
        live: &(dyn Live + Sync),
    ) -> Result<Vec<ObjectOutcome>, WriteError> {
        let mut outcomes = Vec::with_capacity(objects.len());
        for wave in waves(objects) {
            let writes = wave
                .iter()
                .map(|desired| self.write_object(client, desired, live));
            outcomes.extend(futures::future::try_join_all(writes).await?);
        }
        Ok(outcomes)
    }

    /// Writes one object: skipped when its live copy carries the desired hash,
    /// created, or applied (bound to its UID when it names one).
    async fn write_object(
        &self,
        client: &Client,
        desired: &Desired,
        live: &(dyn Live + Sync),
    ) -> Result<ObjectOutcome, WriteError> {
        let current = live.desired_hash(&desired.resource, desired.namespace(), desired.name());
        if desired.hash.is_some() && current == desired.hash {
            return Ok(ObjectOutcome::Unchanged);
        }
        let api = dynamic_api(client, &desired.resource, desired.namespace());
        if desired.create {
            let created = self.create_dynamic(&api, &desired.object).await?;
            return Ok(created.map_or(ObjectOutcome::Refused, |object| {
                ObjectOutcome::Written(Box::new(object))
            }));
        }
        match self.apply_dynamic(&api, desired.name(), &desired.object).await {
            Ok(applied) => Ok(ObjectOutcome::Written(Box::new(applied))),
            Err(error) if desired.uid().is_some() && refused_uid(&error) => Ok(ObjectOutcome::Refused),
            Err(error) => Err(error),
        }
    }

    /// Writes the status of another object, unless the write of that object
    /// in `outcomes` was refused; bound to the UID that write returned, or to
    /// the status's own guard. `None` when nothing was sent.
    async fn write_status(
        &self,
        client: &Client,
        write: &StatusOf,
        outcomes: &[(&Desired, ObjectOutcome)],
    ) -> Result<Option<Guarded>, WriteError> {
        let of_object = outcomes.iter().find(|(d, _)| {
            d.resource == write.resource
                && d.namespace() == write.namespace.as_deref()
                && d.name() == write.name
        });
        let mut guard = write.guard.clone();
        match of_object {
            Some((_, ObjectOutcome::Refused)) => return Ok(None),
            Some((desired, outcome)) => {
                if let Some(uid) = outcome.bound_uid(desired) {
                    guard.uid = Some(uid.to_owned());
                }
            }
            None => {}
        }
        let status = match referred(write, outcomes) {
            Referred::Refused => return Ok(Some(Guarded::Taken)),
            Referred::Uid(reference, uid) => reference.stamped(&write.status, uid),
            Referred::Unknown => write.status.clone(),
        };
        let api = dynamic_api(client, &write.resource, write.namespace.as_deref());
        if guard.is_empty() {
            let written = self
                .apply_status_dynamic(&api, &write.resource, &write.name, &status)
                .await?;
            return Ok(Some(if written { Guarded::Written } else { Guarded::Gone }));
        }
        let guarded = self
            .patch_status_if_dynamic(&api, &write.resource, &write.name, &status, &guard)
            .await?;
        Ok(Some(guarded))
    }

    /// Deletes `removals` through `client`, each only as the UID it names;
    /// returns how many went (one already gone, or replaced by another of
    /// the name, is not an error).
    pub async fn remove(&self, client: &Client, removals: &[Removal]) -> Result<usize, WriteError> {
        let mut removed = 0;
        for removal in removals {
            let api = dynamic_api(client, &removal.resource, removal.namespace.as_deref());
            let params = DeleteParams {
                preconditions: removal.uid.clone().map(|uid| Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::background()
            };
            match self
                .delete_dynamic(&api, &removal.resource.kind, &removal.name, &params)
                .await
            {
                Ok(gone) => removed += usize::from(gone),
                // The UID precondition failed: another object took the name.
                Err(error) if is_status(&error, 409) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(removed)
    }
}

/// What became of the object a status refers to ([`StatusOf::refers_to`]).
enum Referred<'a> {
    /// Its write was refused: the status is not written.
    Refused,
    /// It was created or written bound, as this UID.
    Uid(&'a Reference, &'a str),
    /// No reference, or no UID known: the status is written as decided.
    Unknown,
}

fn referred<'a>(write: &'a StatusOf, outcomes: &'a [(&Desired, ObjectOutcome)]) -> Referred<'a> {
    let Some(reference) = &write.refers_to else {
        return Referred::Unknown;
    };
    match outcomes.iter().find(|(d, _)| reference.names(d)) {
        Some((_, ObjectOutcome::Refused)) => Referred::Refused,
        Some((desired, outcome)) => outcome
            .bound_uid(desired)
            .map_or(Referred::Unknown, |uid| Referred::Uid(reference, uid)),
        None => Referred::Unknown,
    }
}

/// Whether the API server refused an apply that carried `metadata.uid`
/// because the name is not held by that object: none holds it (HTTP 409,
/// "uid mismatch"), or another one does (HTTP 422 on `metadata.uid`, which is
/// immutable).
fn refused_uid(error: &WriteError) -> bool {
    match error.api_error() {
        Some(kube::Error::Api(status)) if status.code == 409 => true,
        Some(kube::Error::Api(status)) if status.code == 422 => status
            .details
            .as_ref()
            .is_some_and(|details| details.causes.iter().any(|cause| cause.field == "metadata.uid")),
        _ => false,
    }
}

/// Whether the API server answered `error` with HTTP `code`.
pub(crate) fn is_status(error: &WriteError, code: u16) -> bool {
    matches!(error.api_error(), Some(kube::Error::Api(status)) if status.code == code)
}

fn dynamic_api(client: &Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

#[cfg(test)]
mod tests;
