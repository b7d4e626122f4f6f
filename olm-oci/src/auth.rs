//! Credentials from pull secrets of type `kubernetes.io/dockerconfigjson`
//! (and the older `kubernetes.io/dockercfg`), looked up by registry host.

use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;

/// A user name and password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub username: String,
    /// Password or token.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Why a pull secret could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The secret's JSON does not parse.
    #[error("the pull secret is not valid docker config JSON: {0}")]
    Json(String),
    /// An `auth` field is not base64 of `user:password`.
    #[error("the pull secret's entry for {registry} has an `auth` that is not base64 of user:password")]
    BadAuth {
        /// The registry of the entry.
        registry: String,
    },
}

#[derive(Deserialize)]
struct ConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// The credentials of one or more pull secrets, by registry host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DockerConfig {
    by_registry: BTreeMap<String, Credentials>,
}

/// The host (with port) a docker config key names: keys may be bare hosts or URLs
/// such as `https://index.docker.io/v1/`.
fn host_of(key: &str) -> String {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = rest.split('/').next().unwrap_or(rest).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_owned(),
        _ => host,
    }
}

impl DockerConfig {
    /// Reads the content of a `.dockerconfigjson` (`{"auths": {...}}`) or a
    /// `.dockercfg` (the map alone).
    pub fn parse(json: &[u8]) -> Result<Self, AuthError> {
        let value: serde_json::Value =
            serde_json::from_slice(json).map_err(|e| AuthError::Json(e.to_string()))?;
        let config: ConfigJson = if value.get("auths").is_some() {
            serde_json::from_value(value).map_err(|e| AuthError::Json(e.to_string()))?
        } else {
            ConfigJson {
                auths: serde_json::from_value(value).map_err(|e| AuthError::Json(e.to_string()))?,
            }
        };
        let mut by_registry = BTreeMap::new();
        for (key, entry) in config.auths {
            let registry = host_of(&key);
            let credentials = match (entry.username, entry.password, entry.auth) {
                (Some(username), Some(password), _) => Credentials { username, password },
                (_, _, Some(auth)) => {
                    let bad = || AuthError::BadAuth {
                        registry: registry.clone(),
                    };
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .map_err(|_| bad())?;
                    let text = String::from_utf8(decoded).map_err(|_| bad())?;
                    let (username, password) = text.split_once(':').ok_or_else(bad)?;
                    Credentials {
                        username: username.to_owned(),
                        password: password.to_owned(),
                    }
                }
                _ => continue,
            };
            by_registry.insert(registry, credentials);
        }
        Ok(Self { by_registry })
    }

    /// Adds the entries of another secret; an entry already present stays (the
    /// first secret named wins, as with a Pod's `imagePullSecrets`).
    pub fn merge(&mut self, other: DockerConfig) {
        for (registry, credentials) in other.by_registry {
            self.by_registry.entry(registry).or_insert(credentials);
        }
    }

    /// The credentials for a registry host (e.g. `quay.io`, `127.0.0.1:5000`).
    pub fn credentials_for(&self, registry: &str) -> Option<&Credentials> {
        self.by_registry.get(&host_of(registry))
    }

    /// Whether no credentials are known.
    pub fn is_empty(&self) -> bool {
        self.by_registry.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_auth_and_username_password_entries_by_host() {
        let auth = base64::engine::general_purpose::STANDARD.encode("robot:s3cret:with-colon");
        let json = format!(
            r#"{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{auth}"}},
                "127.0.0.1:5000": {{"username": "u", "password": "p"}},
                "quay.io": {{"email": "nobody"}}}}}}"#
        );
        let config = DockerConfig::parse(json.as_bytes()).unwrap();
        let hub = config.credentials_for("docker.io").unwrap();
        assert_eq!(
            (hub.username.as_str(), hub.password.as_str()),
            ("robot", "s3cret:with-colon")
        );
        assert_eq!(config.credentials_for("127.0.0.1:5000").unwrap().username, "u");
        assert!(
            config.credentials_for("quay.io").is_none(),
            "an entry with no credentials is skipped"
        );
        assert!(
            !format!("{hub:?}").contains("s3cret"),
            "Debug never prints a password"
        );
    }

    #[test]
    fn reads_the_old_dockercfg_shape_and_merges_first_wins() {
        let mut first = DockerConfig::parse(br#"{"quay.io": {"username": "a", "password": "1"}}"#).unwrap();
        let second =
            DockerConfig::parse(br#"{"auths": {"quay.io": {"username": "b", "password": "2"}}}"#).unwrap();
        first.merge(second);
        assert_eq!(first.credentials_for("QUAY.IO").unwrap().username, "a");
    }

    #[test]
    fn a_bad_secret_says_what_is_wrong() {
        assert!(matches!(
            DockerConfig::parse(b"not json"),
            Err(AuthError::Json(_))
        ));
        let error = DockerConfig::parse(br#"{"auths": {"quay.io": {"auth": "bm9jb2xvbg=="}}}"#).unwrap_err();
        assert_eq!(
            error,
            AuthError::BadAuth {
                registry: "quay.io".into()
            }
        );
    }
}
