//! What can go wrong, each naming the object and the fix.

use crate::catalog_id::CatalogId;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No visible catalog has the package.
    #[error(
        "package {package:?} is in no catalog visible from namespace {namespace}{}{}",
        suggestion(suggestions),
        unhealthy_note(unhealthy)
    )]
    UnknownPackage {
        /// The package asked for.
        package: String,
        /// The namespace.
        namespace: String,
        /// The closest package names, best first.
        suggestions: Vec<String>,
        /// Catalogs the catalog-operator does not report READY (the package may be in them).
        unhealthy: Vec<String>,
    },
    /// The catalog named with `--catalog` does not exist.
    #[error("CatalogSource {catalog} does not exist; `kubectl olm catalogs` lists the catalogs visible here")]
    UnknownCatalog {
        /// The catalog asked for.
        catalog: String,
    },
    /// The catalog named serves no packages.
    #[error("CatalogSource {catalog} serves no packages ({message}); fix the catalog (see `kubectl get catsrc -n {} {} -o yaml`) and retry", catalog.namespace, catalog.name)]
    UnhealthyCatalog {
        /// The catalog.
        catalog: CatalogId,
        /// Its state and the catalog-operator's message.
        message: String,
    },
    /// The PackageManifest API cannot be read.
    #[error(
        "cannot list PackageManifests (packages.operators.coreos.com/v1) in namespace {namespace}: {source}; kubectl olm reads packages from the cluster's catalog-operator, which serves them through the API server: check `kubectl get apiservice {api_service}` and that catalog-operator runs with --package-server-address",
        api_service = olm_api::packages::API_SERVICE
    )]
    NoPackageServer {
        /// The namespace.
        namespace: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The plan could not be asked for.
    #[error(
        "cannot ask the cluster's catalog-operator for a plan of {package} in namespace {namespace}: {source}; {fix}"
    )]
    PlanRefused {
        /// The package.
        package: String,
        /// The namespace.
        namespace: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
        /// What to do.
        fix: &'static str,
    },
    /// A channel or version the package does not have.
    #[error("package {package} has no {what} {wanted:?}; it has: {}", available.join(", "))]
    NoSuchEntry {
        /// The package.
        package: String,
        /// "channel", "version" or "bundle".
        what: &'static str,
        /// What was asked for.
        wanted: String,
        /// What exists.
        available: Vec<String>,
    },
    /// The namespace has no OperatorGroup and none can be chosen.
    #[error("namespace {namespace} has no OperatorGroup and {package} supports no install mode that needs no choice ({}); pass --watch-namespaces to create one", supported.join(", "))]
    NoOperatorGroup {
        /// The namespace.
        namespace: String,
        /// The package.
        package: String,
        /// The install modes it supports.
        supported: Vec<String>,
    },
    /// More than one OperatorGroup in the namespace: OLM runs nothing there.
    #[error("namespace {namespace} has {} OperatorGroups ({}); OLM installs nothing in a namespace with more than one: delete all but one", groups.len(), groups.join(", "))]
    TooManyOperatorGroups {
        /// The namespace.
        namespace: String,
        /// Their names.
        groups: Vec<String>,
    },
    /// The OperatorGroup targets namespaces in a way the bundle does not support.
    #[error("{0}")]
    UnsupportedInstallMode(Box<ModeMismatch>),
    /// The resolver found no plan.
    #[error("cannot install {package} in {namespace}: {explanation}")]
    Unsatisfiable {
        /// The package.
        package: String,
        /// The namespace.
        namespace: String,
        /// The resolver's explanation.
        explanation: String,
    },
    /// No Subscription for the package in the namespace.
    #[error(
        "no Subscription for package {package} in namespace {namespace}; `kubectl olm status -n {namespace}` lists what is installed, `kubectl olm install {package}` installs it"
    )]
    NoSubscription {
        /// The package.
        package: String,
        /// The namespace.
        namespace: String,
    },
    /// Nothing waits for approval.
    #[error("{what} has no InstallPlan waiting for approval")]
    NothingToApprove {
        /// The Subscription or InstallPlan.
        what: String,
    },
    /// An argument is wrong.
    #[error("{0}")]
    Usage(String),
    /// An install, upgrade or approval did not finish in time, or failed.
    #[error("{0}")]
    Failed(String),
    /// A call to the API server failed.
    #[error("cannot {what}: {source}")]
    Kube {
        /// What was tried, on which object.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Io(#[from] std::io::Error),
    /// Serializing the output failed.
    #[error("cannot render the output: {0}")]
    Render(String),
}

impl Error {
    /// The error of listing PackageManifests in `namespace`: the API not served
    /// (404, 503) says where packages come from; others are API errors.
    pub fn package_server(namespace: &str, source: kube::Error) -> Error {
        match &source {
            kube::Error::Api(e) if e.code == 404 || e.code == 503 => Error::NoPackageServer {
                namespace: namespace.to_owned(),
                source,
            },
            _ => Error::Kube {
                what: format!("list PackageManifests in namespace {namespace}"),
                source,
            },
        }
    }

    /// The error of asking for a plan of `package` in `namespace`, with the fix.
    pub fn plan(package: &str, namespace: &str, source: kube::Error) -> Error {
        let fix = match &source {
            kube::Error::Api(e) if e.code == 409 => {
                return Error::Usage(format!(
                    "{}; use `kubectl olm upgrade` or `kubectl olm config` on it, or uninstall it first",
                    e.message
                ));
            }
            kube::Error::Api(e) if e.code == 403 => {
                "plans need `create` on packagemanifests/plan (group packages.operators.coreos.com) in the namespace: the ClusterRole olm-rs:packages-plan of manifests/packageserver.yaml grants it (aggregated to admin and edit)"
            }
            kube::Error::Api(e) if e.code == 404 || e.code == 405 || e.code == 503 => {
                "the catalog-operator serving packages.operators.coreos.com must be one that serves packagemanifests/plan; check `kubectl get apiservice v1.packages.operators.coreos.com`"
            }
            _ => "retry; `kubectl olm catalogs` shows the catalogs' state",
        };
        Error::PlanRefused {
            package: package.to_owned(),
            namespace: namespace.to_owned(),
            source: Box::new(source),
            fix,
        }
    }

    /// A [`Error::Kube`] for `what`.
    pub fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let what = what.into();
        move |source| Error::Kube { what, source }
    }
}

fn suggestion(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        "; `kubectl olm packages` lists the packages".to_owned()
    } else {
        format!("; did you mean {}?", suggestions.join(", "))
    }
}

fn unhealthy_note(unhealthy: &[String]) -> String {
    if unhealthy.is_empty() {
        String::new()
    } else {
        format!(
            " (catalogs that are not READY, and may have it: {})",
            unhealthy.join(", ")
        )
    }
}

/// A bundle and an OperatorGroup whose install mode it does not support.
#[derive(Debug, thiserror::Error)]
#[error("{bundle} does not support install mode {mode} (OperatorGroup {group} in {namespace} targets {targets}); it supports {}: {fix}", supported.join(", "))]
pub struct ModeMismatch {
    /// The bundle.
    pub bundle: String,
    /// The namespace.
    pub namespace: String,
    /// The OperatorGroup (or the one to be created).
    pub group: String,
    /// Its install mode.
    pub mode: String,
    /// What it targets, in words.
    pub targets: String,
    /// Supported modes.
    pub supported: Vec<String>,
    /// What to do.
    pub fix: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_object_and_the_fix() {
        let unknown = Error::UnknownPackage {
            package: "demo-ap".into(),
            namespace: "team".into(),
            suggestions: vec!["demo-app".into()],
            unhealthy: vec!["olm/big".into()],
        };
        assert_eq!(
            unknown.to_string(),
            "package \"demo-ap\" is in no catalog visible from namespace team; did you mean demo-app? (catalogs that are not READY, and may have it: olm/big)"
        );
        let none = Error::UnknownPackage {
            package: "x".into(),
            namespace: "team".into(),
            suggestions: Vec::new(),
            unhealthy: Vec::new(),
        };
        assert!(
            none.to_string()
                .contains("`kubectl olm packages` lists the packages"),
            "{none}"
        );
        let unhealthy = Error::UnhealthyCatalog {
            catalog: CatalogId::new("big", "olm"),
            message: "TRANSIENT_FAILURE: the registry at x:50051 does not answer".into(),
        };
        assert!(
            unhealthy
                .to_string()
                .contains("kubectl get catsrc -n olm big -o yaml"),
            "{unhealthy}"
        );
        let groups = Error::TooManyOperatorGroups {
            namespace: "team".into(),
            groups: vec!["a".into(), "b".into()],
        };
        assert!(groups.to_string().contains("delete all but one"), "{groups}");
    }
}
