//! The OLM objects the commands write, built without I/O, and the install-mode
//! checks of the OperatorGroup an install uses.

use kube::api::ObjectMeta;
use olm_api::{
    v1::{OperatorGroup, OperatorGroupSpec},
    v1alpha1::{Approval, InstallModeType, Subscription, SubscriptionSpec},
};
use serde::Serialize;
use serde_json::Value;

use crate::{catalog_id::CatalogId, error::Error};

/// What a Subscription asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionRequest {
    /// The namespace.
    pub namespace: String,
    /// The package.
    pub package: String,
    /// The catalog.
    pub catalog: CatalogId,
    /// The channel; `None` follows the package's default channel.
    pub channel: Option<String>,
    /// The bundle to start from.
    pub starting_csv: Option<String>,
    /// Automatic or Manual.
    pub approval: Approval,
}

/// The Subscription for `request`, named after its package (as OLM's tools name them).
pub fn subscription(request: &SubscriptionRequest) -> Subscription {
    Subscription {
        metadata: ObjectMeta {
            name: Some(request.package.clone()),
            namespace: Some(request.namespace.clone()),
            ..ObjectMeta::default()
        },
        spec: SubscriptionSpec {
            catalog_source: request.catalog.name.clone(),
            catalog_source_namespace: request.catalog.namespace.clone(),
            package: request.package.clone(),
            channel: request.channel.clone(),
            starting_csv: request.starting_csv.clone(),
            install_plan_approval: Some(request.approval),
            config: None,
        },
        status: None,
    }
}

/// An OperatorGroup `name` in `namespace` targeting `targets` (empty: all namespaces).
pub fn operator_group(namespace: &str, name: &str, targets: &[String]) -> OperatorGroup {
    OperatorGroup {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: OperatorGroupSpec {
            target_namespaces: (!targets.is_empty()).then(|| targets.to_vec()),
            ..OperatorGroupSpec::default()
        },
        status: None,
    }
}

/// The install mode an OperatorGroup in `namespace` targeting `targets` (empty: all) needs.
pub fn install_mode(namespace: &str, targets: &[String]) -> InstallModeType {
    match targets {
        [] => InstallModeType::AllNamespaces,
        [only] if only == namespace => InstallModeType::OwnNamespace,
        [_] => InstallModeType::SingleNamespace,
        _ => InstallModeType::MultiNamespace,
    }
}

/// What an OperatorGroup targeting `targets` watches, in words.
pub fn targets_text(targets: &[String]) -> String {
    if targets.is_empty() {
        "all namespaces".to_owned()
    } else {
        targets.join(", ")
    }
}

/// The namespaces an OperatorGroup targets (empty: all); a selector counts as several.
pub fn group_targets(group: &OperatorGroup) -> Vec<String> {
    group.spec.target_namespaces.clone().unwrap_or_default()
}

/// The targets of a new OperatorGroup for a bundle supporting `supported`:
/// `watch` when given, else its own namespace, else all namespaces.
pub fn choose_targets(
    namespace: &str,
    package: &str,
    watch: &[String],
    supported: &[InstallModeType],
) -> Result<Vec<String>, Error> {
    if !watch.is_empty() {
        return Ok(watch.to_vec());
    }
    if supported.contains(&InstallModeType::OwnNamespace) {
        Ok(vec![namespace.to_owned()])
    } else if supported.contains(&InstallModeType::AllNamespaces) {
        Ok(Vec::new())
    } else {
        Err(Error::NoOperatorGroup {
            namespace: namespace.to_owned(),
            package: package.to_owned(),
            supported: supported.iter().map(|m| format!("{m:?}")).collect(),
        })
    }
}

/// Checks that a bundle supporting `supported` runs in an OperatorGroup `group`
/// of `namespace` targeting `targets`.
pub fn check_install_mode(
    bundle: &str,
    namespace: &str,
    group: &str,
    targets: &[String],
    supported: &[InstallModeType],
    group_exists: bool,
) -> Result<(), Error> {
    let mode = install_mode(namespace, targets);
    if supported.contains(&mode) {
        return Ok(());
    }
    let fix = match (group_exists, supported.first()) {
        (true, _) => format!(
            "install it in a namespace whose OperatorGroup fits, or change OperatorGroup {group} (it affects every operator in {namespace})"
        ),
        (false, Some(InstallModeType::OwnNamespace)) => "leave out --watch-namespaces".to_owned(),
        (false, Some(InstallModeType::AllNamespaces)) => {
            "leave out --watch-namespaces, or pass the namespaces it may watch".to_owned()
        }
        (false, _) => "pass --watch-namespaces with namespaces other than its own".to_owned(),
    };
    Err(Error::UnsupportedInstallMode(Box::new(
        crate::error::ModeMismatch {
            bundle: bundle.to_owned(),
            namespace: namespace.to_owned(),
            group: group.to_owned(),
            mode: format!("{mode:?}"),
            targets: targets_text(targets),
            supported: supported.iter().map(|m| format!("{m:?}")).collect(),
            fix,
        },
    )))
}

/// Serializes objects as a YAML stream (`---` between documents), as `kubectl apply -f` reads.
pub fn yaml_stream(objects: &[Value]) -> Result<String, Error> {
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(object).map_err(|e| Error::Render(e.to_string()))?);
    }
    Ok(out)
}

/// Serializes objects as JSON: one object alone, several as a `List`, as kubectl does.
pub fn json_output(objects: &[Value]) -> Result<String, Error> {
    let value = match objects {
        [one] => one.clone(),
        many => serde_json::json!({"apiVersion": "v1", "kind": "List", "items": many}),
    };
    serde_json::to_string_pretty(&value)
        .map(|s| s + "\n")
        .map_err(|e| Error::Render(e.to_string()))
}

/// An object as JSON.
pub fn to_value(object: &impl Serialize) -> Result<Value, Error> {
    serde_json::to_value(object).map_err(|e| Error::Render(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> SubscriptionRequest {
        SubscriptionRequest {
            namespace: "team".into(),
            package: "demo-app".into(),
            catalog: CatalogId::new("demo", "olm"),
            channel: Some("stable".into()),
            starting_csv: None,
            approval: Approval::Manual,
        }
    }

    #[test]
    fn the_subscription_is_a_plain_olm_object() {
        let yaml = yaml_stream(&[to_value(&subscription(&request())).unwrap()]).unwrap();
        assert_eq!(
            yaml,
            "---\napiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: demo-app\n  namespace: team\nspec:\n  channel: stable\n  installPlanApproval: Manual\n  name: demo-app\n  source: demo\n  sourceNamespace: olm\n"
        );
    }

    #[test]
    fn operator_groups_target_what_the_mode_needs() {
        let own = operator_group("team", "team", &["team".into()]);
        assert_eq!(own.spec.target_namespaces, Some(vec!["team".to_owned()]));
        let all = operator_group("team", "team", &[]);
        let json = to_value(&all).unwrap();
        assert_eq!(json["spec"], serde_json::json!({}));
        assert_eq!(install_mode("team", &[]), InstallModeType::AllNamespaces);
        assert_eq!(
            install_mode("team", &["team".into()]),
            InstallModeType::OwnNamespace
        );
        assert_eq!(
            install_mode("team", &["x".into()]),
            InstallModeType::SingleNamespace
        );
        assert_eq!(
            install_mode("team", &["x".into(), "y".into()]),
            InstallModeType::MultiNamespace
        );
    }

    #[test]
    fn a_new_group_prefers_own_namespace_then_all() {
        use InstallModeType::*;
        assert_eq!(
            choose_targets("team", "p", &[], &[OwnNamespace, AllNamespaces]).unwrap(),
            ["team"]
        );
        assert!(
            choose_targets("team", "p", &[], &[AllNamespaces])
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            choose_targets("team", "p", &["a".into()], &[SingleNamespace]).unwrap(),
            ["a"]
        );
        let error = choose_targets("team", "p", &[], &[SingleNamespace]).unwrap_err();
        assert!(error.to_string().contains("--watch-namespaces"), "{error}");
    }

    #[test]
    fn an_unsupported_mode_names_the_group_and_the_fix() {
        use InstallModeType::*;
        assert!(check_install_mode("b", "team", "g", &[], &[AllNamespaces], true).is_ok());
        let error = check_install_mode("b.v1", "team", "g", &[], &[OwnNamespace], true).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("AllNamespaces"), "{text}");
        assert!(text.contains("OperatorGroup g in team"), "{text}");
        assert!(text.contains("supports OwnNamespace"), "{text}");
    }
}
