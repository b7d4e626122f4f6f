//! Joining a pool from outside the cluster with a join token: register the
//! Machine stamped with the token's id, then wait for olm-operator to issue the
//! machine's own credentials.
//!
//! A token that was used or replaced is refused, by the API server (401) or by
//! olm-operator (the Machine's `Ready` condition says `JoinTokenUsed`): the agent
//! stops with that message, since only a new token helps.

use std::{path::Path, time::Duration};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, ResourceExt, config::AuthInfo};
use olm_api::substrate::{
    CREDENTIALS_TOKEN_KEY, JOIN_TOKEN_ID, MACHINE_READY, Machine, REASON_JOIN_TOKEN_USED, credentials_secret,
    token_claims,
};

use crate::{
    machine::{self, Identity},
    state::{self, StateDir, StateError},
};

/// How many times (one second apart) the agent looks for its credentials.
const CREDENTIAL_CHECKS: u32 = 120;

/// Why a machine could not join its pool.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The join token file could not be read.
    #[error("cannot read the join token from {}", path.display())]
    ReadToken {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file holds something else than a join token.
    #[error("{} holds no join token (a ServiceAccount token with an id)", path.display())]
    NotAJoinToken {
        /// The file.
        path: std::path::PathBuf,
    },
    /// The client configuration with the join token did not give a client.
    #[error("cannot build a client with the join token")]
    Client(#[source] kube::Error),
    /// The API server refused the join token, or a request made with it.
    #[error("cannot join Machine {namespace}/{machine} with the join token from {}: {cause}", token_file.display())]
    Refused {
        /// The Machine's namespace.
        namespace: String,
        /// The Machine.
        machine: String,
        /// The join token file.
        token_file: std::path::PathBuf,
        /// What the API server said.
        cause: String,
    },
    /// The Machine exists, registered by another machine or another join.
    #[error(
        "cannot join Machine {namespace}/{machine}: it exists, registered by another machine or another join; delete it to join again"
    )]
    Taken {
        /// The Machine's namespace.
        namespace: String,
        /// The Machine.
        machine: String,
    },
    /// olm-operator refused the Machine (its `Ready` condition says why).
    #[error("olm-operator refused Machine {namespace}/{machine}: {refusal}")]
    RefusedByOperator {
        /// The Machine's namespace.
        namespace: String,
        /// The Machine.
        machine: String,
        /// The condition's message.
        refusal: String,
    },
    /// The credentials did not come in time.
    #[error(
        "Machine {namespace}/{machine} registered, but Secret {secret} with its credentials did not appear within 2 minutes: is olm-operator running?"
    )]
    NoCredentials {
        /// The Machine's namespace.
        namespace: String,
        /// The Machine.
        machine: String,
        /// The Secret olm-operator writes.
        secret: String,
    },
    /// The credentials could not be kept in the state directory.
    #[error(transparent)]
    State(#[from] StateError),
}

/// Joins the pool from outside the cluster: with the join token (in
/// `token_file`), registers the Machine stamped with the token's id, then waits
/// for olm-operator to issue the machine's own credentials (Secret
/// `<machine>-credentials`, key `token`) and keeps them in the state directory.
/// Returns the join token's id. The join token is not used again.
pub async fn join(
    token_file: &Path,
    state: &StateDir,
    identity: &Identity,
    base: &kube::Config,
) -> Result<String, JoinError> {
    let id = read_token_id(token_file)?;
    let client = client_with_token(base, token_file)?;
    let joining = Joining {
        machines: Api::namespaced(client.clone(), &identity.namespace),
        secrets: Api::namespaced(client, &identity.namespace),
        identity,
        token_file,
    };
    joining.register(&id).await?;
    let token = joining.wait_for_credentials().await?;
    state::write_file(&state.token_file(), &token)?;
    tracing::info!(
        machine = identity.machine,
        "credentials received and kept in the state directory"
    );
    Ok(id)
}

/// The id of the join token in `token_file`.
fn read_token_id(token_file: &Path) -> Result<String, JoinError> {
    let token = std::fs::read_to_string(token_file).map_err(|source| JoinError::ReadToken {
        path: token_file.to_owned(),
        source,
    })?;
    token_claims(&token)
        .map(|claims| claims.id)
        .ok_or_else(|| JoinError::NotAJoinToken {
            path: token_file.to_owned(),
        })
}

/// A client of `base`'s server that authenticates with the join token.
fn client_with_token(base: &kube::Config, token_file: &Path) -> Result<Client, JoinError> {
    let mut config = base.clone();
    config.auth_info = AuthInfo {
        token_file: Some(token_file.display().to_string()),
        ..Default::default()
    };
    Client::try_from(config).map_err(JoinError::Client)
}

/// What to do with the Machine found under the joining machine's name.
#[derive(Debug, PartialEq, Eq)]
enum Existing {
    /// None yet: register it.
    Register,
    /// Registered by an earlier run of this agent with this token (it stopped
    /// before its credentials came): wait for them, do not register again.
    Wait,
    /// Registered by another machine or another join.
    Taken,
}

/// What to do, given the Machine that exists (if any) and the join token's id.
fn existing(machine: Option<&Machine>, token_id: &str) -> Existing {
    match machine {
        None => Existing::Register,
        Some(machine) if machine.annotations().get(JOIN_TOKEN_ID).map(String::as_str) == Some(token_id) => {
            Existing::Wait
        }
        Some(_) => Existing::Taken,
    }
}

/// Why olm-operator refused `machine`'s join, if it did.
fn join_refusal(machine: &Machine) -> Option<String> {
    machine
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == MACHINE_READY && c.reason == REASON_JOIN_TOKEN_USED)
        .map(|c| c.message.clone())
}

fn is_unauthorized(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 401)
}

/// What the API server's refusal means for a joining machine.
fn refusal_cause(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.code == 401 => {
            "the API server no longer accepts this join token: it was used, replaced or has expired; ask for the pool's current token".to_owned()
        }
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// One join in progress, with the join token's client.
struct Joining<'a> {
    machines: Api<Machine>,
    secrets: Api<Secret>,
    identity: &'a Identity,
    token_file: &'a Path,
}

impl Joining<'_> {
    /// Registers the Machine stamped with join token `id`, unless this join did already.
    async fn register(&self, id: &str) -> Result<(), JoinError> {
        let found = self
            .machines
            .get_opt(&self.identity.machine)
            .await
            .map_err(|e| self.refused(&e))?;
        match existing(found.as_ref(), id) {
            Existing::Wait => Ok(()),
            Existing::Taken => Err(JoinError::Taken {
                namespace: self.identity.namespace.clone(),
                machine: self.identity.machine.clone(),
            }),
            Existing::Register => {
                let joining = Identity {
                    join_token_id: Some(id.to_owned()),
                    ..self.identity.clone()
                };
                machine::register(&self.machines, &joining)
                    .await
                    .map_err(|e| self.refused(&e))?;
                Ok(())
            }
        }
    }

    /// Waits (up to 2 minutes) for the machine's own token in its credentials
    /// Secret; stops early when the join token or the Machine is refused.
    async fn wait_for_credentials(&self) -> Result<Vec<u8>, JoinError> {
        let secret = credentials_secret(&self.identity.machine);
        tracing::info!(
            machine = self.identity.machine,
            secret,
            "joined: waiting for the machine's credentials"
        );
        for _ in 0..CREDENTIAL_CHECKS {
            match self.secrets.get_opt(&secret).await {
                Ok(Some(found)) => {
                    if let Some(token) = found.data.as_ref().and_then(|d| d.get(CREDENTIALS_TOKEN_KEY)) {
                        return Ok(token.0.clone());
                    }
                }
                Err(error) if is_unauthorized(&error) => return Err(self.refused(&error)),
                // Not readable until olm-operator admits the machine.
                Ok(None) | Err(_) => {}
            }
            self.check_refusal().await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Err(JoinError::NoCredentials {
            namespace: self.identity.namespace.clone(),
            machine: self.identity.machine.clone(),
            secret,
        })
    }

    /// Fails when olm-operator refused the Machine.
    async fn check_refusal(&self) -> Result<(), JoinError> {
        if let Ok(Some(machine)) = self.machines.get_opt(&self.identity.machine).await
            && let Some(refusal) = join_refusal(&machine)
        {
            return Err(JoinError::RefusedByOperator {
                namespace: self.identity.namespace.clone(),
                machine: self.identity.machine.clone(),
                refusal,
            });
        }
        Ok(())
    }

    fn refused(&self, error: &kube::Error) -> JoinError {
        JoinError::Refused {
            namespace: self.identity.namespace.clone(),
            machine: self.identity.machine.clone(),
            token_file: self.token_file.to_owned(),
            cause: refusal_cause(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(token_id: Option<&str>) -> Machine {
        let mut machine = Machine::new(
            "edge-ext-1",
            olm_api::substrate::MachineSpec {
                pool: "edge".into(),
                node_name: None,
                external_id: Some("ext-1".into()),
            },
        );
        if let Some(id) = token_id {
            machine
                .annotations_mut()
                .insert(JOIN_TOKEN_ID.to_owned(), id.to_owned());
        }
        machine
    }

    #[test]
    fn a_machine_registered_by_this_join_is_waited_for_and_any_other_is_taken() {
        assert_eq!(existing(None, "t1"), Existing::Register);
        assert_eq!(existing(Some(&machine(Some("t1"))), "t1"), Existing::Wait);
        assert_eq!(existing(Some(&machine(Some("t0"))), "t1"), Existing::Taken);
        assert_eq!(existing(Some(&machine(None)), "t1"), Existing::Taken);
    }

    #[test]
    fn an_unauthorized_join_token_asks_for_the_current_one() {
        let status = |code: u16| {
            kube::Error::Api(Box::new(kube::core::Status {
                message: "machines is forbidden".into(),
                code,
                ..Default::default()
            }))
        };
        assert!(refusal_cause(&status(401)).contains("no longer accepts this join token"));
        assert_eq!(refusal_cause(&status(403)), "machines is forbidden");
    }
}
