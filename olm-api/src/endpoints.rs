//! The relation endpoints a CSV declares, as Juju's charms declare them: in
//! three roles, `provides`, `requires` and `peers`, each endpoint with an
//! interface, an optional limit on how many relations it takes, and a scope.
//! The first step toward relations between operators: bundles, catalogs and
//! the PackageManifest API carry the declaration; nothing relates yet.
//!
//! The declaration is the CSV annotation [`ANNOTATION`] (`olm-rs.dev/endpoints`),
//! YAML or JSON, a map per role from endpoint name to its details:
//!
//! ```yaml
//! olm-rs.dev/endpoints: |
//!   provides:
//!     db: {interface: postgresql}
//!   requires:
//!     logs: {interface: loki, limit: 1, scope: container}
//!   peers:
//!     cluster: {interface: demo-db-peers}
//! ```
//!
//! OLM ignores the annotation. A catalog render carries it on as the bundle
//! property [`PROPERTY`] (`olm-rs.endpoints`), whose value is the declaration
//! as JSON; OLM ignores property types it does not know.

use std::{collections::BTreeMap, fmt};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The CSV annotation that declares the endpoints.
pub const ANNOTATION: &str = crate::labels::ENDPOINTS;

/// The bundle property a catalog carries the declaration in.
pub const PROPERTY: &str = "olm-rs.endpoints";

/// The longest endpoint name: a DNS label, so that it can name objects.
const MAX_NAME: usize = 63;

/// The role of an endpoint in a relation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The endpoint offers its interface to `requires` endpoints.
    Provides,
    /// The endpoint needs a `provides` endpoint of its interface.
    Requires,
    /// The endpoint relates the units of the application among themselves;
    /// every application is related to itself on each of its peers endpoints.
    Peers,
}

impl Role {
    /// Every role, in the order a declaration lists them.
    pub const ALL: [Role; 3] = [Role::Provides, Role::Requires, Role::Peers];

    /// The role's name in a declaration.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Provides => "provides",
            Role::Requires => "requires",
            Role::Peers => "peers",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which units of the two sides of a relation see each other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Every unit sees every remote unit (the default).
    #[default]
    Global,
    /// A unit sees only the remote unit on its own machine.
    Container,
}

impl Scope {
    /// The scope's name in a declaration.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Container => "container",
        }
    }

    fn parse(text: &str) -> Option<Scope> {
        match text {
            "global" => Some(Scope::Global),
            "container" => Some(Scope::Container),
            _ => None,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One endpoint of one role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    /// The endpoint's name, unique across the roles of its CSV.
    pub name: String,
    /// The interface it speaks: a relation joins endpoints of one interface.
    pub interface: String,
    /// How many relations it takes at most; `None` for no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Which units of the two sides see each other.
    pub scope: Scope,
}

/// Every endpoint a CSV declares, by role, each role's sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Endpoints {
    /// Endpoints that offer their interface.
    pub provides: Vec<Endpoint>,
    /// Endpoints that need an interface.
    pub requires: Vec<Endpoint>,
    /// Endpoints among the application's own units.
    pub peers: Vec<Endpoint>,
}

impl Endpoints {
    /// The endpoints of `role`.
    pub fn of(&self, role: Role) -> &[Endpoint] {
        match role {
            Role::Provides => &self.provides,
            Role::Requires => &self.requires,
            Role::Peers => &self.peers,
        }
    }

    /// Every endpoint with its role, provides first, then requires, then peers.
    pub fn iter(&self) -> impl Iterator<Item = (Role, &Endpoint)> {
        Role::ALL
            .into_iter()
            .flat_map(move |role| self.of(role).iter().map(move |e| (role, e)))
    }

    /// Whether no endpoint is declared.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The endpoint named `name`, with its role.
    pub fn get(&self, name: &str) -> Option<(Role, &Endpoint)> {
        self.iter().find(|(_, e)| e.name == name)
    }

    /// The declaration of `csv`'s annotations, `None` when they carry none.
    pub fn of_annotations<'a, I>(csv: &str, annotations: I) -> Result<Option<Endpoints>, EndpointsError>
    where
        I: IntoIterator<Item = (&'a String, &'a String)>,
    {
        annotations
            .into_iter()
            .find(|(key, _)| key.as_str() == ANNOTATION)
            .map(|(_, text)| Endpoints::parse(csv, text))
            .transpose()
    }

    /// Parses the annotation's text (YAML or JSON) of CSV `csv`.
    pub fn parse(csv: &str, text: &str) -> Result<Endpoints, EndpointsError> {
        Endpoints::from_value(csv, Declared::Annotation, Value::String(text.to_owned()))
    }

    /// Reads a declaration from JSON, from the annotation or the catalog
    /// property (`declared`) of CSV `csv`: a map of roles, or a string of
    /// YAML or JSON text that holds one (as a render carries an annotation
    /// that does not parse); `null` or empty text declares nothing.
    pub fn from_value(csv: &str, declared: Declared, value: Value) -> Result<Endpoints, EndpointsError> {
        let fail = |cause| EndpointsError {
            csv: csv.to_owned(),
            declared,
            cause,
        };
        let value = match value {
            Value::String(text) => declaration(&text).map_err(fail)?,
            value => value,
        };
        if value.is_null() {
            return Ok(Endpoints::default());
        }
        if !value.is_object() {
            return Err(fail(EndpointsCause::Shape {
                field: ".".to_owned(),
                message: format!("expected a map, found {value}"),
            }));
        }
        let wire: Wire = serde_path_to_error::deserialize(value).map_err(|e| {
            fail(EndpointsCause::Shape {
                field: e.path().to_string(),
                message: e.inner().to_string(),
            })
        })?;
        wire.check().map_err(fail)
    }
}

/// The declaration's text (YAML or JSON) as JSON; `null` when it is empty.
/// A name repeated in one role is refused, never silently dropped.
pub fn declaration(text: &str) -> Result<Value, EndpointsCause> {
    crate::declaration::parse(text).map_err(EndpointsCause::Syntax)
}

/// The value of the catalog property [`PROPERTY`] that carries the
/// annotation's text unchanged ([`crate::declaration::property_value`]).
pub use crate::declaration::property_value;

/// Where a declaration was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declared {
    /// The CSV annotation [`ANNOTATION`].
    Annotation,
    /// The bundle property [`PROPERTY`] of a catalog.
    Property,
}

impl fmt::Display for Declared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Declared::Annotation => write!(f, "annotation {ANNOTATION}"),
            Declared::Property => write!(f, "property {PROPERTY}"),
        }
    }
}

/// A declaration of endpoints that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CSV {csv}: {declared}: {cause}")]
pub struct EndpointsError {
    /// The CSV (bundle) that declares them.
    pub csv: String,
    /// Where the declaration was read from.
    pub declared: Declared,
    /// What is wrong.
    pub cause: EndpointsCause,
}

/// What is wrong with a declaration of endpoints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointsCause {
    /// The text is neither YAML nor JSON.
    #[error("not YAML or JSON ({0}); write a map of provides, requires and peers")]
    Syntax(String),
    /// A field does not fit the declaration's shape.
    #[error(
        "at `{field}`: {message}; each of provides, requires and peers maps endpoint names to {{interface, limit, scope}}"
    )]
    Shape {
        /// The path of the field, e.g. `provides.db.limit`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// An endpoint name that is not a DNS label.
    #[error(
        "{role} endpoint name {name:?} is not valid; use lowercase letters, digits and '-', starting with a letter, at most 63 characters"
    )]
    BadName {
        /// The role.
        role: Role,
        /// The name.
        name: String,
    },
    /// One name in two roles.
    #[error(
        "endpoint {name:?} is declared in both {first} and {second}; endpoint names are unique across provides, requires and peers"
    )]
    Duplicate {
        /// The name.
        name: String,
        /// The first role that declares it.
        first: Role,
        /// The second.
        second: Role,
    },
    /// An endpoint without an interface.
    #[error("{role} endpoint {name:?} has an empty interface; name the interface it speaks")]
    EmptyInterface {
        /// The role.
        role: Role,
        /// The endpoint.
        name: String,
    },
    /// A limit of zero relations.
    #[error("{role} endpoint {name:?} has limit 0; give at least 1, or leave limit out for no limit")]
    ZeroLimit {
        /// The role.
        role: Role,
        /// The endpoint.
        name: String,
    },
    /// A scope that is neither `global` nor `container`.
    #[error("{role} endpoint {name:?} has scope {scope:?}; scope is global (the default) or container")]
    UnknownScope {
        /// The role.
        role: Role,
        /// The endpoint.
        name: String,
        /// The scope given.
        scope: String,
    },
}

/// The declaration as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    #[serde(default)]
    provides: BTreeMap<String, WireEndpoint>,
    #[serde(default)]
    requires: BTreeMap<String, WireEndpoint>,
    #[serde(default)]
    peers: BTreeMap<String, WireEndpoint>,
}

/// One endpoint as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEndpoint {
    interface: String,
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    scope: Option<String>,
}

impl Wire {
    /// The typed endpoints, or the first thing wrong with them.
    fn check(self) -> Result<Endpoints, EndpointsCause> {
        let mut seen: BTreeMap<String, Role> = BTreeMap::new();
        let mut endpoints = Endpoints::default();
        for (role, declared) in [
            (Role::Provides, self.provides),
            (Role::Requires, self.requires),
            (Role::Peers, self.peers),
        ] {
            let mut checked = Vec::with_capacity(declared.len());
            for (name, wire) in declared {
                if let Some(first) = seen.insert(name.clone(), role) {
                    return Err(EndpointsCause::Duplicate {
                        name,
                        first,
                        second: role,
                    });
                }
                checked.push(endpoint(role, name, wire)?);
            }
            match role {
                Role::Provides => endpoints.provides = checked,
                Role::Requires => endpoints.requires = checked,
                Role::Peers => endpoints.peers = checked,
            }
        }
        Ok(endpoints)
    }
}

/// One endpoint checked.
fn endpoint(role: Role, name: String, wire: WireEndpoint) -> Result<Endpoint, EndpointsCause> {
    if !is_dns_label(&name) {
        return Err(EndpointsCause::BadName { role, name });
    }
    if wire.interface.trim().is_empty() {
        return Err(EndpointsCause::EmptyInterface { role, name });
    }
    if wire.limit == Some(0) {
        return Err(EndpointsCause::ZeroLimit { role, name });
    }
    let scope = match wire.scope.as_deref() {
        None => Scope::Global,
        Some(text) => Scope::parse(text).ok_or_else(|| EndpointsCause::UnknownScope {
            role,
            name: name.clone(),
            scope: text.to_owned(),
        })?,
    };
    Ok(Endpoint {
        name,
        interface: wire.interface,
        limit: wire.limit,
        scope,
    })
}

/// Lowercase letters, digits and '-', starting with a letter, not ending
/// with '-', at most 63 characters.
fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    name.len() <= MAX_NAME
        && bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes.last().is_some_and(|b| *b != b'-')
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(name: &str, interface: &str, limit: Option<u32>, scope: Scope) -> Endpoint {
        Endpoint {
            name: name.into(),
            interface: interface.into(),
            limit,
            scope,
        }
    }

    #[test]
    fn declarations_parse_from_yaml_and_json() {
        let cases: &[(&str, &str, Endpoints)] = &[
            ("empty text", "  \n", Endpoints::default()),
            ("empty map", "{}", Endpoints::default()),
            (
                "every role, yaml",
                "provides:\n  db: {interface: postgresql}\nrequires:\n  logs:\n    interface: loki\n    limit: 1\n    scope: container\npeers:\n  cluster: {interface: db-peers}\n",
                Endpoints {
                    provides: vec![endpoint("db", "postgresql", None, Scope::Global)],
                    requires: vec![endpoint("logs", "loki", Some(1), Scope::Container)],
                    peers: vec![endpoint("cluster", "db-peers", None, Scope::Global)],
                },
            ),
            (
                "json, names sorted",
                r#"{"provides": {"web": {"interface": "http", "scope": "global"}, "metrics": {"interface": "prometheus", "limit": 3}}}"#,
                Endpoints {
                    provides: vec![
                        endpoint("metrics", "prometheus", Some(3), Scope::Global),
                        endpoint("web", "http", None, Scope::Global),
                    ],
                    ..Endpoints::default()
                },
            ),
        ];
        for (what, text, want) in cases {
            let got = Endpoints::parse("demo.v1.0.0", text).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(&got, want, "{what}");
        }
    }

    #[test]
    fn bad_declarations_are_named() {
        let cases: &[(&str, &str, &str)] = &[
            ("not yaml", "provides: [", "not YAML or JSON"),
            ("a list", "- db", r#"at `.`: expected a map, found ["db"]"#),
            (
                "unknown role",
                "offers: {db: {interface: x}}",
                "unknown field `offers`",
            ),
            ("role not a map", "provides: [db]", "at `provides`:"),
            (
                "no interface",
                "provides: {db: {limit: 1}}",
                "at `provides.db`: missing field `interface`",
            ),
            (
                "unknown field",
                "provides: {db: {interface: x, optinal: true}}",
                "unknown field `optinal`",
            ),
            (
                "negative limit",
                "provides: {db: {interface: x, limit: -1}}",
                "at `provides.db.limit`",
            ),
            (
                "same name in one role",
                "provides:\n  db: {interface: x}\n  db: {interface: z}\n",
                "not YAML or JSON",
            ),
            (
                "same name in two roles",
                "provides: {db: {interface: x}}\npeers: {db: {interface: z}}",
                r#"endpoint "db" is declared in both provides and peers"#,
            ),
            (
                "empty interface",
                "requires: {db: {interface: ' '}}",
                r#"requires endpoint "db" has an empty interface"#,
            ),
            (
                "limit 0",
                "requires: {db: {interface: x, limit: 0}}",
                r#"requires endpoint "db" has limit 0"#,
            ),
            (
                "unknown scope",
                "peers: {ring: {interface: x, scope: machine}}",
                r#"peers endpoint "ring" has scope "machine"; scope is global"#,
            ),
            (
                "uppercase name",
                "provides: {DB: {interface: x}}",
                r#"provides endpoint name "DB" is not valid"#,
            ),
            (
                "name ends in -",
                "provides: {db-: {interface: x}}",
                r#"name "db-" is not valid"#,
            ),
        ];
        for (what, text, want) in cases {
            let err = Endpoints::parse("demo.v1.0.0", text).expect_err(what).to_string();
            assert!(
                err.starts_with("CSV demo.v1.0.0: annotation olm-rs.dev/endpoints: "),
                "{what}: {err}"
            );
            assert!(err.contains(want), "{what}: {err}");
        }
    }

    #[test]
    fn a_catalog_property_is_read_as_the_annotation_is() {
        let value = serde_json::json!({"provides": {"db": {"interface": "postgresql"}}});
        let endpoints = Endpoints::from_value("demo.v1.0.0", Declared::Property, value.clone()).unwrap();
        assert_eq!(endpoints.get("db").map(|(role, _)| role), Some(Role::Provides));
        let text = "provides: {db: {interface: postgresql}}";
        assert_eq!(property_value(text), Some(value));
        assert_eq!(property_value(" "), None);
        // Text that is not YAML is carried as text, and read as the annotation is.
        assert_eq!(
            property_value("provides: ["),
            Some(Value::String("provides: [".into()))
        );
        let err = Endpoints::from_value(
            "demo.v1.0.0",
            Declared::Property,
            Value::String("provides: [".into()),
        )
        .unwrap_err();
        assert!(matches!(err.cause, EndpointsCause::Syntax(_)), "{err}");
        let err = Endpoints::from_value(
            "demo.v1.0.0",
            Declared::Property,
            serde_json::json!({"provides": {"db": {"interface": ""}}}),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"CSV demo.v1.0.0: property olm-rs.endpoints: provides endpoint "db" has an empty interface; name the interface it speaks"#
        );
    }

    #[test]
    fn annotations_without_the_declaration_declare_nothing() {
        let other: BTreeMap<String, String> = [("olm.skipRange".to_owned(), "<1.0.0".to_owned())].into();
        assert_eq!(Endpoints::of_annotations("demo", &other), Ok(None));
        let declared: BTreeMap<String, String> = [(
            ANNOTATION.to_owned(),
            "peers: {ring: {interface: ring}}".to_owned(),
        )]
        .into();
        let endpoints = Endpoints::of_annotations("demo", &declared).unwrap().unwrap();
        let all: Vec<(Role, &str)> = endpoints.iter().map(|(r, e)| (r, e.name.as_str())).collect();
        assert_eq!(all, [(Role::Peers, "ring")]);
    }
}
