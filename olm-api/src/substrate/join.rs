//! How a machine outside the cluster joins a MachinePool: the names and
//! annotations olm-operator and the agent agree on.
//!
//! 1. For a pool with `spec.external`, olm-operator keeps a join token in the
//!    Secret `spec.external.tokenSecretName` (key [`JOIN_TOKEN_KEY`]): a token
//!    of the pool's joining ServiceAccount ([`joiner_account`]) bound to that
//!    Secret, so that deleting the Secret revokes it. The Secret's annotation
//!    [`JOIN_TOKEN_ID`] holds the token's id (its JWT `jti`).
//! 2. The agent creates its Machine with the join token, stamped with the
//!    token's id ([`JOIN_TOKEN_ID`] on the Machine). The API server lets the
//!    joining account create nothing else, and checks the stamp against the
//!    credential the request came with.
//! 3. olm-operator gives the first Machine joined with the current token its
//!    own ServiceAccount ([`machine_account`]) and a token for it in the Secret
//!    [`credentials_secret`], readable by the joining account for that one
//!    Secret only, and records the use ([`JOIN_TOKEN_USED_BY`]). Any other
//!    Machine stamped with a token that was used or replaced gets no
//!    credentials and its `Ready` condition says [`REASON_JOIN_TOKEN_USED`].
//! 4. Once the machine heartbeats on its own credentials, olm-operator deletes
//!    and re-creates the join Secret: the used token stops working and the
//!    next machine gets a fresh one.

use base64::Engine as _;

/// The key of the join token in the join Secret.
pub const JOIN_TOKEN_KEY: &str = "token";
/// The key of the machine's own token in its credentials Secret (as the
/// ServiceAccount token controller writes it).
pub const CREDENTIALS_TOKEN_KEY: &str = "token";
/// The type of the join Secret.
pub const JOIN_TOKEN_SECRET_TYPE: &str = "substrate.olm-rs.dev/join-token";
/// Annotation on the join Secret: the id of the token it holds; on a Machine:
/// the id of the join token it was registered with.
pub const JOIN_TOKEN_ID: &str = "substrate.olm-rs.dev/join-token-id";
/// Annotation on the join Secret: when its token expires (RFC 3339).
pub const JOIN_TOKEN_EXPIRES: &str = "substrate.olm-rs.dev/join-token-expires";
/// Annotation on the join Secret: the Machine its token admitted, once used.
pub const JOIN_TOKEN_USED_BY: &str = "substrate.olm-rs.dev/join-token-used-by";
/// Annotation on the join Secret: when its token was used (RFC 3339).
pub const JOIN_TOKEN_USED_AT: &str = "substrate.olm-rs.dev/join-token-used-at";
/// Reason of a Machine's `Ready=False` (and of its pool's `Degraded=True`)
/// when the machine registered with a join token that had already admitted
/// another machine, or had been replaced.
pub const REASON_JOIN_TOKEN_USED: &str = "JoinTokenUsed";

/// The ServiceAccount whose tokens are a pool's join tokens: `machine-join.<pool>`.
/// (The dot keeps the name apart from every `machine-agent-<pool>` and `machine.<machine>`.)
pub fn joiner_account(pool: &str) -> String {
    format!("machine-join.{pool}")
}

/// The ServiceAccount of one machine joined from outside: `machine.<machine>`.
pub fn machine_account(machine: &str) -> String {
    format!("machine.{machine}")
}

/// The Secret holding a joined machine's own token: `<machine>-credentials`.
pub fn credentials_secret(machine: &str) -> String {
    format!("{machine}-credentials")
}

/// What a ServiceAccount token says of itself: its id and expiry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenClaims {
    /// The token's id (`jti`), which the API server also hands to admission
    /// as the user's `authentication.kubernetes.io/credential-id` (`JTI=<id>`).
    pub id: String,
    /// When it expires, in seconds since the epoch (`exp`).
    pub expires: i64,
}

/// Reads the claims of a JWT without verifying it (the API server verifies
/// it; this only learns which token it is). `None` for anything that is not a
/// JWT with `jti` and `exp`.
pub fn token_claims(token: &str) -> Option<TokenClaims> {
    let payload = token.trim().split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(TokenClaims {
        id: claims.get("jti")?.as_str()?.to_owned(),
        expires: claims.get("exp")?.as_i64()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &serde_json::Value) -> String {
        let encode = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        format!(
            "{}.{}.{}",
            encode(br#"{"alg":"RS256"}"#),
            encode(claims.to_string().as_bytes()),
            encode(b"signature")
        )
    }

    #[test]
    fn a_tokens_id_and_expiry_are_read() {
        let token = jwt(&serde_json::json!({"jti": "5f1c", "exp": 1_800_000_000, "sub": "x"}));
        assert_eq!(
            token_claims(&format!("{token}\n")),
            Some(TokenClaims {
                id: "5f1c".to_owned(),
                expires: 1_800_000_000
            })
        );
        assert_eq!(token_claims(&jwt(&serde_json::json!({"exp": 1}))), None);
        assert_eq!(token_claims("not a token"), None);
        assert_eq!(token_claims("a.%%%.c"), None);
    }

    #[test]
    fn account_names_never_meet() {
        // A pool named `agent-x` and one named `x`: no name of one is a name of the other.
        let names = [
            joiner_account("agent-x"),
            machine_account("agent-x-m"),
            joiner_account("x"),
            machine_account("x-m"),
            "machine-agent-x".to_owned(),
            "machine-agent-agent-x".to_owned(),
        ];
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        assert!(!machine_account("join.x").starts_with("machine-join."));
    }
}
