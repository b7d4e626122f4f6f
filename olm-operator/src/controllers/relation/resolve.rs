//! Which endpoints a relation joins, or why it cannot be made (pure): the
//! checks of a Relation against the CSVs of its namespace and the other
//! Relations there.

use std::cmp::Ordering;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use olm_api::{
    endpoints::{Endpoint, Endpoints, Role},
    model::{ApplicationEndpoint, Relation, RelationConditionType, RelationReason, ResolvedEndpoint},
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};

use crate::controllers::csv::naming::package_of;

/// Why a relation cannot be made: the reason and a message in plain words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The reason of the `Ready=False` condition.
    pub reason: RelationReason,
    /// What is wrong and what to do.
    pub message: String,
}

impl Refusal {
    fn new(reason: RelationReason, message: String) -> Refusal {
        Refusal { reason, message }
    }
}

/// An endpoint that one side may relate through, with its role.
type Candidate = (Role, Endpoint);

/// One endpoint of each side.
type Pair<'a> = (&'a Candidate, &'a Candidate);

/// One side, once its application is found installed: the candidates for
/// its endpoint.
struct Side<'a> {
    spec: &'a ApplicationEndpoint,
    csv: String,
    namespace: String,
    candidates: Vec<Candidate>,
}

impl Side<'_> {
    fn resolved(&self, role: Role, endpoint: &Endpoint) -> ResolvedEndpoint {
        ResolvedEndpoint {
            application: self.spec.application.clone(),
            namespace: self.namespace.clone(),
            csv: self.csv.clone(),
            endpoint: endpoint.name.clone(),
            role,
            interface: endpoint.interface.clone(),
        }
    }

    fn name(&self) -> &str {
        &self.spec.application
    }
}

/// The two endpoints `relation` joins, given the CSVs of its namespace and
/// every Relation there (itself included or not), or why it cannot be made.
pub fn resolve(
    relation: &Relation,
    csvs: &[&ClusterServiceVersion],
    relations: &[&Relation],
) -> Result<[ResolvedEndpoint; 2], Refusal> {
    let namespace = relation.namespace().unwrap_or_default();
    let [a, b] = relation.spec.endpoints.as_slice() else {
        return Err(Refusal::new(
            RelationReason::InvalidSpec,
            format!(
                "spec.endpoints has {} entries; a relation joins exactly two applications",
                relation.spec.endpoints.len()
            ),
        ));
    };
    for side in [a, b] {
        offered(side, &namespace)?;
    }
    let held = Held::of(relation);
    if let Some(endpoint) = peer_endpoint(a, b) {
        return peer(a, endpoint, &namespace, csvs, held);
    }
    let a = side(a, &namespace, csvs, held)?;
    let b = side(b, &namespace, csvs, held)?;
    let joined = pair(&a, &b)?;
    for endpoint in &joined {
        within_limit(relation, endpoint, [&a, &b], relations)?;
    }
    Ok(joined)
}

/// The endpoint of a peer relation: both sides name one application and
/// one endpoint of it (olm-operator relates each application on machines to
/// itself that way, on each of its `peers` endpoints).
fn peer_endpoint<'a>(a: &'a ApplicationEndpoint, b: &ApplicationEndpoint) -> Option<&'a str> {
    let endpoint = a.endpoint.as_deref()?;
    (a.application == b.application && b.endpoint.as_deref() == Some(endpoint)).then_some(endpoint)
}

/// The two (equal) sides of the peer relation of `spec`'s application on
/// its endpoint `wanted`, which must be a `peers` endpoint.
fn peer(
    spec: &ApplicationEndpoint,
    wanted: &str,
    namespace: &str,
    csvs: &[&ClusterServiceVersion],
    held: Held,
) -> Result<[ResolvedEndpoint; 2], Refusal> {
    let csv = installed(&spec.application, namespace, csvs, held)?;
    let declared = Endpoints::of_annotations(&csv.name_any(), csv.annotations())
        .map_err(|e| {
            Refusal::new(
                RelationReason::InvalidDeclaration,
                format!("application {}: {e}", spec.application),
            )
        })?
        .unwrap_or_default();
    match declared.get(wanted) {
        Some((Role::Peers, endpoint)) => {
            let side = Side {
                spec,
                csv: csv.name_any(),
                namespace: namespace.to_owned(),
                candidates: Vec::new(),
            };
            let resolved = side.resolved(Role::Peers, endpoint);
            Ok([resolved.clone(), resolved])
        }
        Some((role, _)) => Err(Refusal::new(
            RelationReason::RolesNotComplementary,
            format!(
                "endpoint {wanted} of application {} is a {role} endpoint: an application relates to itself only on a peers endpoint",
                spec.application
            ),
        )),
        None => Err(named(spec, &declared, wanted).err().unwrap_or_else(|| {
            Refusal::new(
                RelationReason::UnknownEndpoint,
                format!("application {} declares no endpoint {wanted}", spec.application),
            )
        })),
    }
}

/// Refuses a side in another namespace: relating across namespaces needs an
/// offer by the providing side, which olm-rs does not make yet.
fn offered(side: &ApplicationEndpoint, namespace: &str) -> Result<(), Refusal> {
    match side.namespace.as_deref() {
        Some(other) if !other.is_empty() && other != namespace => Err(Refusal::new(
            RelationReason::NeedsOffer,
            format!(
                "application {} is in namespace {other}, not {namespace}; relating across namespaces needs an offer by the providing side, which olm-rs does not support yet: relate applications of one namespace",
                side.application
            ),
        )),
        _ => Ok(()),
    }
}

/// The installed CSV of `spec`'s application and the candidates for its endpoint.
fn side<'a>(
    spec: &'a ApplicationEndpoint,
    namespace: &str,
    csvs: &[&ClusterServiceVersion],
    held: Held,
) -> Result<Side<'a>, Refusal> {
    let csv = installed(&spec.application, namespace, csvs, held)?;
    let name = csv.name_any();
    let declared = Endpoints::of_annotations(&name, csv.annotations())
        .map_err(|e| {
            Refusal::new(
                RelationReason::InvalidDeclaration,
                format!("application {}: {e}", spec.application),
            )
        })?
        .unwrap_or_default();
    let candidates = match spec.endpoint.as_deref() {
        Some(wanted) => vec![named(spec, &declared, wanted)?],
        None => declared
            .iter()
            .filter(|(role, _)| *role != Role::Peers)
            .map(|(role, e)| (role, e.clone()))
            .collect(),
    };
    if candidates.is_empty() {
        return Err(Refusal::new(
            RelationReason::UnknownEndpoint,
            format!(
                "application {} (CSV {name}) declares no provides or requires endpoint to relate",
                spec.application
            ),
        ));
    }
    Ok(Side {
        spec,
        csv: name,
        namespace: namespace.to_owned(),
        candidates,
    })
}

/// Whether a relation is already made. A relation is made only between
/// installed applications (their CSVs Succeeded), but once made it holds
/// while the applications are there: a CSV that leaves Succeeded because
/// its application scales, upgrades or fails keeps its relations, as a
/// unit in error keeps its relations in Juju. Breaking it then would run
/// `-broken` and `-created` on every unit for a passing state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Not made yet (or refused): both applications must be installed.
    New,
    /// Made (`Ready=True` with its endpoints): any CSV of each application
    /// keeps it.
    Made,
}

impl Held {
    fn of(relation: &Relation) -> Held {
        let resolved = relation.status.as_ref().is_some_and(|s| !s.endpoints.is_empty());
        if is_ready(relation) && resolved {
            Held::Made
        } else {
            Held::New
        }
    }
}

/// The CSV of `application` in `namespace` (one whose package, or else
/// name, is `application`) that a relation joins: the one that has
/// succeeded; for a relation already made, failing that, the one taking
/// over (not `Replacing` or `Deleting`), or any.
fn installed<'c>(
    application: &str,
    namespace: &str,
    csvs: &[&'c ClusterServiceVersion],
    held: Held,
) -> Result<&'c ClusterServiceVersion, Refusal> {
    let mut of_app: Vec<&ClusterServiceVersion> = csvs
        .iter()
        .copied()
        .filter(|csv| csv.namespace().as_deref() == Some(namespace))
        .filter(|csv| package_of(csv).as_deref() == Some(application) || csv.name_any() == application)
        .collect();
    of_app.sort_by_key(|csv| csv.name_any());
    let phase = |csv: &ClusterServiceVersion| csv.status.as_ref().and_then(|s| s.phase);
    let succeeded = of_app
        .iter()
        .copied()
        .find(|csv| phase(csv) == Some(CsvPhase::Succeeded));
    let incoming = of_app
        .iter()
        .copied()
        .find(|csv| !matches!(phase(csv), Some(CsvPhase::Replacing | CsvPhase::Deleting)));
    match (succeeded, held, incoming.or(of_app.first().copied())) {
        (Some(csv), _, _) => Ok(csv),
        (None, Held::Made, Some(csv)) => Ok(csv),
        (None, Held::New, Some(csv)) => Err(Refusal::new(
            RelationReason::NotInstalled,
            format!(
                "application {application} is not installed yet: its CSV {} is in phase {}, not Succeeded",
                csv.name_any(),
                phase(csv).map_or_else(|| "(none)".to_owned(), |p| format!("{p:?}"))
            ),
        )),
        (None, _, None) => Err(Refusal::new(
            RelationReason::NotInstalled,
            format!(
                "application {application} is not installed in namespace {namespace}: no CSV there has that package or name; install it first (kubectl olm install {application})"
            ),
        )),
    }
}

/// The endpoint `wanted` of `spec`'s application, which must be provides or requires.
fn named(
    spec: &ApplicationEndpoint,
    declared: &Endpoints,
    wanted: &str,
) -> Result<(Role, Endpoint), Refusal> {
    match declared.get(wanted) {
        Some((Role::Peers, _)) => Err(Refusal::new(
            RelationReason::RolesNotComplementary,
            format!(
                "endpoint {wanted} of application {} is a peers endpoint: peers relate an application's own units and are not related by users",
                spec.application
            ),
        )),
        Some((role, endpoint)) => Ok((role, endpoint.clone())),
        None => {
            let known: Vec<&str> = declared.iter().map(|(_, e)| e.name.as_str()).collect();
            Err(Refusal::new(
                RelationReason::UnknownEndpoint,
                format!(
                    "application {} declares no endpoint {wanted}; it declares: {}",
                    spec.application,
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            ))
        }
    }
}

/// The one pair of endpoints, one of each side, that fit: a provides and a
/// requires of one interface.
fn pair(a: &Side, b: &Side) -> Result<[ResolvedEndpoint; 2], Refusal> {
    let all: Vec<Pair> = a
        .candidates
        .iter()
        .flat_map(|x| b.candidates.iter().map(move |y| (x, y)))
        .collect();
    let complementary = |x: &Candidate, y: &Candidate| {
        matches!(
            (x.0, y.0),
            (Role::Provides, Role::Requires) | (Role::Requires, Role::Provides)
        )
    };
    let same_interface = |x: &Candidate, y: &Candidate| x.1.interface == y.1.interface;
    let fits: Vec<_> = all
        .iter()
        .copied()
        .filter(|(x, y)| complementary(x, y) && same_interface(x, y))
        .collect();
    match fits.as_slice() {
        [(x, y)] => Ok([a.resolved(x.0, &x.1), b.resolved(y.0, &y.1)]),
        [] if all.iter().any(|(x, y)| same_interface(x, y)) => Err(Refusal::new(
            RelationReason::RolesNotComplementary,
            format!(
                "{} and {} speak one interface but not as one provides and one requires endpoint: {}",
                a.name(),
                b.name(),
                listing(a, b, &all)
            ),
        )),
        [] => Err(Refusal::new(
            RelationReason::InterfaceMismatch,
            format!(
                "no endpoint of {} speaks the interface of an endpoint of {}: {}",
                a.name(),
                b.name(),
                listing(a, b, &all)
            ),
        )),
        several => Err(Refusal::new(
            RelationReason::AmbiguousEndpoint,
            format!(
                "{} pairs of endpoints fit ({}); name the endpoints, e.g. kubectl olm relate {}:{} {}:{}",
                several.len(),
                listing(a, b, several),
                a.name(),
                several[0].0.1.name,
                b.name(),
                several[0].1.1.name
            ),
        )),
    }
}

/// The pairs, as `A:x (provides i) – B:y (requires j)`.
fn listing(a: &Side, b: &Side, pairs: &[Pair]) -> String {
    let one =
        |side: &Side, (role, e): &Candidate| format!("{}:{} ({role} {})", side.name(), e.name, e.interface);
    pairs
        .iter()
        .map(|(x, y)| format!("{} with {}", one(a, x), one(b, y)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses `endpoint` when it has a limit and as many older Ready Relations
/// use it already: the oldest relations keep an endpoint (by creation time,
/// then name), so that every reader decides alike.
fn within_limit(
    relation: &Relation,
    endpoint: &ResolvedEndpoint,
    sides: [&Side; 2],
    relations: &[&Relation],
) -> Result<(), Refusal> {
    let limit = sides
        .iter()
        .filter(|s| s.csv == endpoint.csv)
        .flat_map(|s| s.candidates.iter())
        .find(|(_, e)| e.name == endpoint.endpoint)
        .and_then(|(_, e)| e.limit);
    let Some(limit) = limit else {
        return Ok(());
    };
    let holders: Vec<String> = relations
        .iter()
        .filter(|other| older(other, relation) == Ordering::Less)
        .filter(|other| is_ready(other) && uses(other, endpoint))
        .map(|other| other.name_any())
        .collect();
    if holders.len() < usize::try_from(limit).unwrap_or(usize::MAX) {
        return Ok(());
    }
    Err(Refusal::new(
        RelationReason::OverLimit,
        format!(
            "endpoint {} of application {} takes at most {limit} relation(s) and is used by {}; remove one of those to relate this one",
            endpoint.endpoint,
            endpoint.application,
            holders.join(", ")
        ),
    ))
}

/// Orders Relations oldest first: by creation time, then by name.
pub fn older(a: &Relation, b: &Relation) -> Ordering {
    let created = |r: &Relation| r.metadata.creation_timestamp.clone().map(|Time(t)| t);
    created(a)
        .cmp(&created(b))
        .then_with(|| a.name_any().cmp(&b.name_any()))
}

/// Whether `relation` reports `Ready=True`.
fn is_ready(relation: &Relation) -> bool {
    relation
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == RelationConditionType::Ready.as_str() && c.status == "True")
        })
}

/// Whether `relation` reports that it joins `endpoint`.
fn uses(relation: &Relation, endpoint: &ResolvedEndpoint) -> bool {
    relation.status.as_ref().is_some_and(|s| {
        s.endpoints.iter().any(|e| {
            e.namespace == endpoint.namespace
                && (e.csv == endpoint.csv || e.application == endpoint.application)
                && e.endpoint == endpoint.endpoint
        })
    })
}
