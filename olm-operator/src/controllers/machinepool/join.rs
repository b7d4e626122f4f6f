//! Machines that join a pool from outside the cluster (`spec.external`):
//! the pool's join token, and each joined machine's own credentials. The
//! contract with the agent is in [`olm_api::substrate`]'s `join` module.
//!
//! A join token admits one machine. It is a token of the pool's joining
//! ServiceAccount, bound to the join Secret that holds it, so deleting the
//! Secret revokes it. The API server lets the joining account do one thing:
//! create a new Machine of its pool, stamped with the id of the very token it
//! used (`manifests/machine-agent-policy.yaml`). So olm-operator knows which
//! token registered which machine, and [`plan`] decides, from what the reconcile reads:
//! - the first machine stamped with the current token is admitted: it gets its
//!   own ServiceAccount `machine.<machine>`, a Role limited to its own Machine
//!   and Lease (plus the reads an agent needs, no Secrets), and a token in the
//!   Secret `<machine>-credentials`, which the joining account may read, and
//!   only that one Secret; the token is marked used by that machine;
//! - any other machine stamped with the current token, or with a token that
//!   was used or replaced, is refused: no credentials, its `Ready` condition
//!   False with reason `JoinTokenUsed`, named in the pool's `Degraded`
//!   condition, until someone deletes it;
//! - the token is renewed (the Secret deleted, so the token stops working, and
//!   made again with a new token) once the admitted machine heartbeats on its
//!   own credentials, is gone, or did not pick them up within
//!   [`ADMIT_WINDOW`]; and also when the Secret is missing or the token
//!   nears its expiry unused.
//!
//! Everything made for a joined machine is owned by its Machine, so deleting
//! the Machine revokes its credentials.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    ByteString,
    api::{
        authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec},
        core::v1::{Secret, ServiceAccount},
        rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time},
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, PostParams, Preconditions},
};
use olm_api::substrate::{
    JOIN_TOKEN_EXPIRES, JOIN_TOKEN_ID, JOIN_TOKEN_KEY, JOIN_TOKEN_SECRET_TYPE, JOIN_TOKEN_USED_AT,
    JOIN_TOKEN_USED_BY, Machine, MachinePool, REASON_JOIN_TOKEN_USED, credentials_secret, joiner_account,
    machine_account, token_claims,
};
use olm_runtime::conditions::{ConditionReason, Status, set_condition};

use super::{
    agent::{self, Account},
    error::{Error, read_error, write_error},
    status::MachineReady,
};
use crate::context::Context;

/// How long a join token is valid when nobody uses it.
pub const TOKEN_LIFETIME: SignedDuration = SignedDuration::from_hours(24);
/// How long before its expiry an unused join token is replaced.
pub const RENEW_BEFORE_EXPIRY: SignedDuration = SignedDuration::from_hours(1);
/// How long an admitted machine has to pick up its credentials and heartbeat
/// on them before its join token is revoked all the same.
pub const ADMIT_WINDOW: SignedDuration = SignedDuration::from_mins(10);
/// Label on a joined machine's credentials Secret: the machine.
pub const MACHINE_LABEL: &str = "substrate.olm-rs.dev/machine";

/// The join token the pool's Secret holds, as its annotations say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// The token's id (JWT `jti`).
    pub id: String,
    /// When it expires.
    pub expires: Timestamp,
    /// The machine it admitted, once used.
    pub used_by: Option<String>,
    /// When it was used.
    pub used_at: Option<Timestamp>,
}

impl Issued {
    /// The token in `secret`, if it holds a usable one.
    pub fn from_secret(secret: &Secret) -> Option<Issued> {
        let claims = token_claims(&token_of(secret)?)?;
        let annotations = secret.metadata.annotations.as_ref();
        let annotation = |key: &str| annotations.and_then(|a| a.get(key)).cloned();
        if annotation(JOIN_TOKEN_ID).as_deref() != Some(claims.id.as_str()) {
            return None;
        }
        Some(Issued {
            id: claims.id,
            expires: Timestamp::from_second(claims.expires).ok()?,
            used_by: annotation(JOIN_TOKEN_USED_BY),
            used_at: annotation(JOIN_TOKEN_USED_AT).and_then(|t| t.parse().ok()),
        })
    }
}

/// A Machine of the pool that registered with a join token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    /// The Machine's name.
    pub name: String,
    /// The id of the join token it registered with.
    pub token_id: String,
    /// When it registered.
    pub created: Option<Timestamp>,
    /// Whether its credentials Secret exists.
    pub has_credentials: bool,
    /// Whether its agent heartbeats (its Lease exists): it runs on its own
    /// credentials, since the join token cannot write a Lease.
    pub heartbeats: bool,
}

impl Joined {
    /// The machine as the plan sees it, if it registered with a join token.
    pub fn of(
        machine: &Machine,
        credentials: &BTreeSet<String>,
        leases: &BTreeSet<String>,
    ) -> Option<Joined> {
        machine.spec.external_id.as_ref()?;
        let token_id = machine.annotations().get(JOIN_TOKEN_ID)?.clone();
        let name = machine.name_any();
        Some(Joined {
            has_credentials: credentials.contains(&credentials_secret(&name)),
            heartbeats: leases.contains(&name),
            created: machine.metadata.creation_timestamp.as_ref().map(|t| t.0),
            token_id,
            name,
        })
    }
}

/// Why the join token is replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// The Secret is missing or holds no usable token.
    Missing,
    /// The token nears its expiry unused.
    Expiring,
    /// The token admitted its machine.
    Used,
}

/// What to do about a pool's joins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The machine to give its credentials (it has none yet).
    pub admit: Option<String>,
    /// Whether the admission is new: the token is to be marked used by it.
    pub mark_used: bool,
    /// The machine whose credentials the joining account may read.
    pub readable: Option<String>,
    /// Replace the join token.
    pub renew: Option<Renewal>,
    /// Machines refused, with the message their `Ready` condition gets.
    pub refused: BTreeMap<String, String>,
}

/// What to do, given the token the pool's Secret (`secret`) holds and the
/// machines that registered with a join token, at `now`.
pub fn plan(secret: &str, issued: Option<&Issued>, machines: &[Joined], now: Timestamp) -> Plan {
    let mut plan = Plan::default();
    let mut waiting: Vec<&Joined> = machines.iter().filter(|m| !m.has_credentials).collect();
    waiting.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    let current = issued.map(|i| i.id.as_str());
    let user = issued.and_then(|i| i.used_by.clone());
    for machine in &waiting {
        if current != Some(machine.token_id.as_str()) {
            plan.refused.insert(
                machine.name.clone(),
                format!(
                    "Machine {} registered with a join token that was used or replaced: delete it and join again with the token in Secret {secret}",
                    machine.name
                ),
            );
            continue;
        }
        match (&user, &plan.admit) {
            (Some(user), _) if *user == machine.name => plan.admit = Some(machine.name.clone()),
            (None, None) => {
                plan.admit = Some(machine.name.clone());
                plan.mark_used = true;
            }
            (Some(first), _) | (None, Some(first)) => {
                plan.refused.insert(
                    machine.name.clone(),
                    format!(
                        "Machine {} registered with a join token that had already admitted Machine {first}: delete it and join again with the token in Secret {secret}",
                        machine.name
                    ),
                );
            }
        }
    }
    plan.renew = match issued {
        None => Some(Renewal::Missing),
        // Just used: revoked once its machine runs on its own credentials.
        Some(_) if plan.mark_used => None,
        Some(issued) => match &issued.used_by {
            Some(user) => {
                let admitted = machines.iter().find(|m| &m.name == user);
                let window_over = issued
                    .used_at
                    .and_then(|at| at.checked_add(ADMIT_WINDOW).ok())
                    .is_none_or(|end| end <= now);
                (admitted.is_none_or(|m| m.heartbeats) || window_over).then_some(Renewal::Used)
            }
            None => issued
                .expires
                .checked_sub(RENEW_BEFORE_EXPIRY)
                .is_ok_and(|renew_at| renew_at <= now)
                .then_some(Renewal::Expiring),
        },
    };
    // While the token lives, its joining account may read the credentials of
    // the machine it admitted; a token being revoked reads nothing more.
    plan.readable = match plan.renew {
        Some(_) => None,
        None => plan.admit.clone().or(user),
    };
    plan
}

fn rule(group: &str, resources: &[&str], verbs: &[&str], names: Option<&[String]>) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        resource_names: names.map(<[String]>::to_vec),
        ..PolicyRule::default()
    }
}

/// The rules of a pool's joining account: register a Machine (server-side
/// apply creates it, so `patch` too; the admission policy allows creation
/// only), read Machines (to learn a refusal), and read the credentials of the
/// machine being admitted, if any.
pub fn joiner_rules(admitting: Option<&str>) -> Vec<PolicyRule> {
    let group = olm_api::substrate::GROUP;
    let mut rules = vec![rule(group, &["machines"], &["get", "create", "patch"], None)];
    if let Some(machine) = admitting {
        rules.push(rule(
            "",
            &["secrets"],
            &["get"],
            Some(&[credentials_secret(machine)]),
        ));
    }
    rules
}

/// The rules of one joined machine: its own Machine and Lease (by name; a
/// Lease is created before it has a name RBAC can check, which the admission
/// policy checks instead), and the reads of an agent.
pub fn machine_rules(machine: &str) -> Vec<PolicyRule> {
    let group = olm_api::substrate::GROUP;
    let own = [machine.to_owned()];
    let mut rules = vec![
        rule(
            group,
            &["machines"],
            &["get", "list", "watch", "update", "patch"],
            Some(&own),
        ),
        rule(
            group,
            &["machines/status"],
            &["get", "update", "patch"],
            Some(&own),
        ),
        // Its own Lease, and the leader Leases of its pool's applications,
        // whose names RBAC cannot know: the admission policy checks both.
        rule(
            "coordination.k8s.io",
            &["leases"],
            &["get", "create", "update"],
            None,
        ),
        rule(
            "coordination.k8s.io",
            &["leases"],
            &["patch", "delete"],
            Some(&own),
        ),
    ];
    rules.extend(agent::read_rules());
    rules.push(agent::bag_rule());
    rules.push(agent::task_rule());
    rules
}

fn owned_by_machine(pool: &MachinePool, machine: &Machine, name: String) -> ObjectMeta {
    let mut labels = agent::labels(pool);
    labels.insert(MACHINE_LABEL.to_owned(), machine.name_any());
    ObjectMeta {
        name: Some(name),
        namespace: machine.namespace(),
        labels: Some(labels),
        owner_references: Some(vec![OwnerReference {
            api_version: Machine::api_version(&()).into_owned(),
            kind: Machine::kind(&()).into_owned(),
            name: machine.name_any(),
            uid: machine.uid().unwrap_or_default(),
            ..OwnerReference::default()
        }]),
        ..ObjectMeta::default()
    }
}

fn binding(meta: ObjectMeta, account: &str, namespace: Option<String>) -> RoleBinding {
    RoleBinding {
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: meta.name.clone().unwrap_or_default(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: account.to_owned(),
            namespace,
            ..Subject::default()
        }]),
        metadata: meta,
    }
}

/// The joining account of `pool`, its Role and RoleBinding.
pub fn joiner_objects(pool: &MachinePool, admitting: Option<&str>) -> Account {
    let name = joiner_account(&pool.name_any());
    let account = ServiceAccount {
        metadata: agent::meta(pool, name.clone()),
        ..ServiceAccount::default()
    };
    let role = Role {
        metadata: agent::meta(pool, name.clone()),
        rules: Some(joiner_rules(admitting)),
    };
    let binding = binding(agent::meta(pool, name.clone()), &name, pool.namespace());
    (account, role, binding)
}

/// A joined machine's account (with its Role and RoleBinding) and the Secret
/// the ServiceAccount token controller fills with the account's token.
pub fn machine_objects(pool: &MachinePool, machine: &Machine) -> (Account, Secret) {
    let name = machine.name_any();
    let account_name = machine_account(&name);
    let account = ServiceAccount {
        metadata: owned_by_machine(pool, machine, account_name.clone()),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    };
    let role = Role {
        metadata: owned_by_machine(pool, machine, account_name.clone()),
        rules: Some(machine_rules(&name)),
    };
    let binding = binding(
        owned_by_machine(pool, machine, account_name.clone()),
        &account_name,
        machine.namespace(),
    );
    let mut meta = owned_by_machine(pool, machine, credentials_secret(&name));
    meta.annotations = Some(BTreeMap::from([(
        "kubernetes.io/service-account.name".to_owned(),
        account_name,
    )]));
    let secret = Secret {
        metadata: meta,
        type_: Some("kubernetes.io/service-account-token".to_owned()),
        ..Secret::default()
    };
    ((account, role, binding), secret)
}

/// How soon a pool with a machine being admitted is looked at again.
pub const ADMITTING_RECHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// Replaces the join token (work the decision requests, done with live
/// requests: the token is issued for a Secret that must exist first): deletes the Secret (revoking the token bound to
/// it), makes it again, and fills it with a new token bound to the new Secret.
pub async fn renew(
    ctx: &Context,
    pool: &MachinePool,
    secret_name: &str,
    old: Option<&Secret>,
    renewal: Renewal,
) -> Result<(), Error> {
    let namespace = pool.namespace().unwrap_or_default();
    let name = pool.name_any();
    let read = |what: &str| read_error(&name, what);
    let write = |what: &str| write_error(&name, what);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    if let Some(old) = old {
        let params = DeleteParams {
            preconditions: old.uid().map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        ctx.writer
            .delete(&secrets, secret_name, &params)
            .await
            .map_err(write("the old join token Secret"))?;
    }
    let mut meta = agent::meta(pool, secret_name.to_owned());
    meta.annotations = None;
    let created = ctx
        .writer
        .create(
            &secrets,
            &Secret {
                metadata: meta,
                type_: Some(JOIN_TOKEN_SECRET_TYPE.to_owned()),
                ..Secret::default()
            },
        )
        .await
        .map_err(write("the join token Secret"))?;
    let request = TokenRequest {
        metadata: ObjectMeta::default(),
        spec: Some(TokenRequestSpec {
            audiences: Some(Vec::new()),
            expiration_seconds: Some(TOKEN_LIFETIME.as_secs()),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Secret".to_owned()),
                name: Some(secret_name.to_owned()),
                uid: created.uid(),
            }),
        }),
        status: None,
    };
    let token = Api::<ServiceAccount>::namespaced(ctx.client.clone(), &namespace)
        .create_token_request(&joiner_account(&name), &PostParams::default(), &request)
        .await
        .map_err(read("a join token for its joining ServiceAccount"))?
        .status
        .and_then(|s| s.token)
        .unwrap_or_default();
    let unreadable = || Error::UnreadableToken { pool: name.clone() };
    let claims = token_claims(&token).ok_or_else(unreadable)?;
    let issued = Issued {
        id: claims.id,
        expires: Timestamp::from_second(claims.expires).map_err(|_| unreadable())?,
        used_by: None,
        used_at: None,
    };
    ctx.apply(&secrets, &join_secret_body(pool, secret_name, &token, &issued))
        .await
        .map_err(write("the join token"))?;
    tracing::info!(pool = %name, %namespace, secret = secret_name, ?renewal, "join token issued");
    Ok(())
}

/// The join token in `secret`, as text.
pub fn token_of(secret: &Secret) -> Option<String> {
    let token = secret.data.as_ref()?.get(JOIN_TOKEN_KEY)?;
    String::from_utf8(token.0.clone()).ok()
}

/// The join Secret `name` of `pool` holding `token`, whose claims and use
/// `issued` tells. Written whole each time: one field manager owns it all.
pub fn join_secret_body(pool: &MachinePool, name: &str, token: &str, issued: &Issued) -> Secret {
    let mut meta = agent::meta(pool, name.to_owned());
    let mut annotations = BTreeMap::from([
        (JOIN_TOKEN_ID.to_owned(), issued.id.clone()),
        (JOIN_TOKEN_EXPIRES.to_owned(), issued.expires.to_string()),
    ]);
    if let (Some(by), Some(at)) = (&issued.used_by, issued.used_at) {
        annotations.insert(JOIN_TOKEN_USED_BY.to_owned(), by.clone());
        annotations.insert(JOIN_TOKEN_USED_AT.to_owned(), at.to_string());
    }
    meta.annotations = Some(annotations);
    Secret {
        metadata: meta,
        type_: Some(JOIN_TOKEN_SECRET_TYPE.to_owned()),
        data: Some(BTreeMap::from([(
            JOIN_TOKEN_KEY.to_owned(),
            ByteString(token.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

struct JoinTokenUsed;

impl ConditionReason for JoinTokenUsed {
    fn as_str(&self) -> &'static str {
        REASON_JOIN_TOKEN_USED
    }
}

/// The `Ready` condition of a refused machine, or `None` when it has it already.
pub fn refused_condition(
    machine: &Machine,
    message: &str,
    now: &Time,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    let mut conditions = machine
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let changed = set_condition(
        &mut conditions,
        MachineReady,
        Status::False,
        JoinTokenUsed,
        message,
        machine.metadata.generation,
        now,
    );
    changed
        .then(|| conditions.into_iter().find(|c| c.type_ == "Ready"))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "edge-join";

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).expect("a time")
    }

    fn issued(id: &str, used_by: Option<&str>, used_at: Option<i64>) -> Issued {
        Issued {
            id: id.to_owned(),
            expires: at(24 * 3600),
            used_by: used_by.map(str::to_owned),
            used_at: used_at.map(at),
        }
    }

    fn joined(name: &str, token: &str, created: i64, credentials: bool, heartbeats: bool) -> Joined {
        Joined {
            name: name.to_owned(),
            token_id: token.to_owned(),
            created: Some(at(created)),
            has_credentials: credentials,
            heartbeats,
        }
    }

    #[test]
    fn the_first_machine_of_a_fresh_token_is_admitted_and_the_second_refused() {
        let machines = [
            joined("edge-b", "t1", 2, false, false),
            joined("edge-a", "t1", 1, false, false),
        ];
        let plan = plan(SECRET, Some(&issued("t1", None, None)), &machines, at(3));
        assert_eq!(plan.admit.as_deref(), Some("edge-a"));
        assert!(plan.mark_used);
        assert_eq!(plan.renew, None);
        assert_eq!(
            plan.refused.get("edge-b").map(String::as_str),
            Some(
                "Machine edge-b registered with a join token that had already admitted Machine edge-a: delete it and join again with the token in Secret edge-join"
            )
        );
    }

    #[test]
    fn a_used_token_keeps_admitting_its_machine_until_it_heartbeats_then_is_renewed() {
        let waiting = [joined("edge-a", "t1", 1, true, false)];
        let plan_waiting = plan(
            SECRET,
            Some(&issued("t1", Some("edge-a"), Some(2))),
            &waiting,
            at(3),
        );
        assert_eq!(plan_waiting.renew, None);
        assert_eq!(plan_waiting.admit, None, "it has its credentials");
        assert_eq!(plan_waiting.readable.as_deref(), Some("edge-a"));
        assert!(plan_waiting.refused.is_empty());

        let running = [joined("edge-a", "t1", 1, true, true)];
        let plan_running = plan(
            SECRET,
            Some(&issued("t1", Some("edge-a"), Some(2))),
            &running,
            at(4),
        );
        assert_eq!(plan_running.renew, Some(Renewal::Used));
        assert_eq!(plan_running.readable, None);
    }

    #[test]
    fn an_admitted_machine_that_never_comes_loses_its_token_after_the_window() {
        let machines = [joined("edge-a", "t1", 1, true, false)];
        let used = issued("t1", Some("edge-a"), Some(2));
        let before = plan(SECRET, Some(&used), &machines, at(2 + 599));
        assert_eq!(before.renew, None);
        let after = plan(SECRET, Some(&used), &machines, at(2 + 600));
        assert_eq!(after.renew, Some(Renewal::Used));
        // The machine deleted meanwhile: renewed too.
        assert_eq!(plan(SECRET, Some(&used), &[], at(3)).renew, Some(Renewal::Used));
    }

    #[test]
    fn a_machine_of_a_replaced_token_is_refused_and_a_missing_token_is_issued() {
        let machines = [
            joined("edge-old", "t0", 1, false, false),
            joined("edge-fine", "t0", 0, true, true),
        ];
        let plan_current = plan(SECRET, Some(&issued("t1", None, None)), &machines, at(5));
        assert_eq!(plan_current.admit, None);
        assert_eq!(
            plan_current.refused.keys().collect::<Vec<_>>(),
            ["edge-old"],
            "a machine with credentials is never refused"
        );
        assert!(plan_current.refused["edge-old"].contains("used or replaced"));
        let plan_missing = plan(SECRET, None, &machines, at(5));
        assert_eq!(plan_missing.renew, Some(Renewal::Missing));
        assert_eq!(plan_missing.refused.len(), 1);
    }

    #[test]
    fn an_unused_token_is_renewed_before_it_expires() {
        let token = issued("t1", None, None);
        assert_eq!(plan(SECRET, Some(&token), &[], at(22 * 3600)).renew, None);
        assert_eq!(
            plan(SECRET, Some(&token), &[], at(23 * 3600)).renew,
            Some(Renewal::Expiring)
        );
        // Used in its last hour: kept until its machine picked up its credentials.
        let late = plan(
            SECRET,
            Some(&token),
            &[joined("edge-a", "t1", 23 * 3600, false, false)],
            at(23 * 3600 + 1),
        );
        assert_eq!((late.admit.as_deref(), late.renew), (Some("edge-a"), None));
        assert_eq!(late.readable.as_deref(), Some("edge-a"));
    }

    #[test]
    fn the_join_secret_says_its_tokens_id_expiry_and_use_whole() {
        // jti "t1", exp 1800086400 (at(24 h)).
        const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJqdGkiOiAidDEiLCAiZXhwIjogMTgwMDA4NjQwMH0.c2ln";
        let mut pool = MachinePool::new(
            "edge",
            serde_json::from_value(serde_json::json!({
                "agent": {"image": "agent", "version": "1"},
                "external": {"tokenSecretName": SECRET},
            }))
            .expect("a spec"),
        );
        pool.metadata.namespace = Some("ops".to_owned());
        for token in [issued("t1", None, None), issued("t1", Some("edge-a"), Some(2))] {
            let secret = join_secret_body(&pool, SECRET, TOKEN, &token);
            assert_eq!(secret.type_.as_deref(), Some(JOIN_TOKEN_SECRET_TYPE));
            assert_eq!(Issued::from_secret(&secret), Some(token));
        }
        let mut other = join_secret_body(&pool, SECRET, TOKEN, &issued("t1", None, None));
        other
            .metadata
            .annotations
            .as_mut()
            .expect("annotations")
            .insert(JOIN_TOKEN_ID.to_owned(), "t0".to_owned());
        assert_eq!(Issued::from_secret(&other), None, "an id that is not the token's");
    }

    #[test]
    fn the_joining_account_reads_only_the_admitted_machines_credentials() {
        let rules = joiner_rules(Some("edge-a"));
        let secrets: Vec<_> = rules
            .iter()
            .filter(|r| r.resources.as_deref() == Some(&["secrets".to_owned()][..]))
            .collect();
        assert_eq!(secrets.len(), 1);
        assert_eq!(
            secrets[0].resource_names.as_deref(),
            Some(&["edge-a-credentials".to_owned()][..])
        );
        assert_eq!(secrets[0].verbs, ["get"]);
        assert!(
            joiner_rules(None)
                .iter()
                .all(|r| r.resources.as_deref() != Some(&["secrets".to_owned()][..]))
        );
    }

    #[test]
    fn a_joined_machine_writes_only_its_own_machine_and_lease_and_reads_no_secret() {
        let rules = machine_rules("edge-a");
        for rule in &rules {
            let writes = rule
                .verbs
                .iter()
                .any(|v| matches!(v.as_str(), "update" | "patch" | "delete"));
            let resources = rule.resources.clone().unwrap_or_default();
            // Leases it creates or updates by any name (its own and leader Leases)
            // and the data of Databags: the admission policies check those
            // (deleting and patching Leases are by name). The tasks of
            // Actions too are written by any name: no policy checks them yet.
            let by_policy = (resources == ["leases"]
                && rule
                    .verbs
                    .iter()
                    .all(|v| matches!(v.as_str(), "get" | "create" | "update")))
                || resources == ["databags/status"]
                || resources == ["actions/status"];
            if writes && !resources.iter().any(|r| r == "events") && !by_policy {
                assert_eq!(
                    rule.resource_names.as_deref(),
                    Some(&["edge-a".to_owned()][..]),
                    "{resources:?}"
                );
            }
            assert!(!resources.iter().any(|r| r == "secrets"), "{resources:?}");
        }
    }
}
