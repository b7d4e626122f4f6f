//! Webhooks of a ClusterServiceVersion, as OLM registers them: one
//! ValidatingWebhookConfiguration or MutatingWebhookConfiguration per
//! `webhookdefinitions` entry, calling the Service of its Deployment with the
//! CA of that Deployment's certificate as `caBundle`; and, for conversion
//! webhooks, the `spec.conversion` of the CRDs they convert.
//!
//! Configurations carry the CSV's `olm.owner*` labels and OLM's
//! `olm.webhook-description-generate-name` and `olm.webhook-description-hash`
//! labels. An operator that serves only some namespaces (OwnNamespace,
//! SingleNamespace, MultiNamespace) gets a `namespaceSelector` that matches
//! its target namespaces only; one that serves all namespaces gets none.
//! Everything here is pure.

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString,
    api::admissionregistration::v1::{
        MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
        ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, CustomResourceDefinition,
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta},
};
use kube::{
    api::{ApiResource, DynamicObject, GroupVersionKind},
    core::TypeMeta,
};
use olm_api::v1alpha1::{ClusterServiceVersion, InstallModeType, WebhookAdmissionType, WebhookDescription};

use super::{certs, naming::generate_name, validate::Targets};

/// The label with the `generateName` of the webhook description.
pub const DESCRIPTION_LABEL: &str = "olm.webhook-description-generate-name";
/// The label with a hash of the webhook description.
pub const HASH_LABEL: &str = "olm.webhook-description-hash";
/// The label every namespace carries with its own name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Why the webhooks of a CSV cannot be registered (OLM's `InvalidWebhookDescription`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// Two webhooks have the same `generateName`.
    #[error("CSV contains repeated WebhookDescription name")]
    Repeated(String),
    /// A rule of the named webhook matches every API group.
    #[error("webhook rules cannot include all groups")]
    AllGroups(String),
    /// A rule of the named webhook matches OLM's own API group.
    #[error("webhook rules cannot include the OLM group")]
    OlmGroup(String),
    /// A rule of the named webhook matches webhook configurations.
    #[error(
        "webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources"
    )]
    WebhookResources(String),
    /// The webhook names no Deployment of the install strategy.
    #[error("webhook {name}: deployment {deployment:?} is not in the install strategy")]
    UnknownDeployment {
        /// The webhook.
        name: String,
        /// The Deployment it names.
        deployment: String,
    },
    /// A conversion webhook on an operator that supports more than AllNamespaces.
    #[error(
        "webhook {0}: unable to manage conversion webhook: CSVs with conversion webhooks must support only AllNamespaces"
    )]
    ConversionNotAllNamespaces(String),
    /// A conversion webhook that names no CRD.
    #[error("webhook {0}: conversion webhook must have at least one CRD specified")]
    NoConversionCrds(String),
    /// A conversion webhook for a CRD the CSV does not own.
    #[error("webhook {name}: the ClusterServiceVersion does not own CRD {crd}")]
    NotOwned {
        /// The webhook.
        name: String,
        /// The CRD.
        crd: String,
    },
}

/// Checks the webhook descriptions of `csv` as OLM does, given the names of
/// the install strategy's Deployments. The messages of repeated names and bad
/// rules are OLM's.
pub fn check(csv: &ClusterServiceVersion, deployments: &[String]) -> Result<(), Invalid> {
    let mut names = std::collections::BTreeSet::new();
    let owned: Vec<&str> = csv
        .spec
        .custom_resource_definitions
        .as_ref()
        .and_then(|c| c.owned.as_ref())
        .into_iter()
        .flatten()
        .map(|crd| crd.name.as_str())
        .collect();
    for desc in csv.spec.webhook_definitions.iter().flatten() {
        let name = &desc.generate_name;
        if !names.insert(name.as_str()) {
            return Err(Invalid::Repeated(name.clone()));
        }
        check_rules(name, desc.rules.iter().flatten())?;
        let deployment = desc.deployment_name.clone().unwrap_or_default();
        if !deployments.contains(&deployment) {
            return Err(Invalid::UnknownDeployment {
                name: name.clone(),
                deployment,
            });
        }
        if desc.type_ == WebhookAdmissionType::ConversionWebhook {
            check_conversion(csv, name, desc.conversion_crds.iter().flatten(), &owned)?;
        }
    }
    for desc in csv.spec.conversion_webhook_definitions.iter().flatten() {
        let name = &desc.generate_name;
        if desc.url.is_none() && !deployments.contains(&desc.deployment_name) {
            return Err(Invalid::UnknownDeployment {
                name: name.clone(),
                deployment: desc.deployment_name.clone(),
            });
        }
        check_conversion(csv, name, desc.conversion_crds.iter(), &owned)?;
    }
    Ok(())
}

fn check_rules<'a>(name: &str, rules: impl Iterator<Item = &'a RuleWithOperations>) -> Result<(), Invalid> {
    for rule in rules {
        let groups = rule.api_groups.as_deref().unwrap_or_default();
        if groups.iter().any(|g| g == "*") {
            return Err(Invalid::AllGroups(name.to_owned()));
        }
        if groups.iter().any(|g| g == "operators.coreos.com") {
            return Err(Invalid::OlmGroup(name.to_owned()));
        }
        if groups.iter().any(|g| g == "admissionregistration.k8s.io") {
            let resources = rule.resources.as_deref().unwrap_or_default();
            if resources.iter().any(|r| {
                matches!(
                    r.as_str(),
                    "*" | "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"
                )
            }) {
                return Err(Invalid::WebhookResources(name.to_owned()));
            }
        }
    }
    Ok(())
}

fn check_conversion<'a>(
    csv: &ClusterServiceVersion,
    name: &str,
    crds: impl Iterator<Item = &'a String>,
    owned: &[&str],
) -> Result<(), Invalid> {
    if !supports_only_all_namespaces(csv) {
        return Err(Invalid::ConversionNotAllNamespaces(name.to_owned()));
    }
    let mut any = false;
    for crd in crds {
        any = true;
        if !owned.contains(&crd.as_str()) {
            return Err(Invalid::NotOwned {
                name: name.to_owned(),
                crd: crd.clone(),
            });
        }
    }
    if !any {
        return Err(Invalid::NoConversionCrds(name.to_owned()));
    }
    Ok(())
}

/// Whether the CSV supports AllNamespaces and no other install mode (OLM's
/// condition for conversion webhooks).
pub fn supports_only_all_namespaces(csv: &ClusterServiceVersion) -> bool {
    csv.spec
        .install_modes
        .iter()
        .flatten()
        .all(|mode| (mode.type_ == InstallModeType::AllNamespaces) == mode.supported)
}

/// The namespaces a webhook sees: none selected (all) for an operator of all
/// namespaces, otherwise exactly its target namespaces.
pub fn namespace_selector(targets: &Targets) -> Option<LabelSelector> {
    match targets {
        Targets::All => None,
        Targets::Namespaces(namespaces) => Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.to_owned(),
                operator: "In".to_owned(),
                values: Some(namespaces.clone()),
            }]),
            match_labels: None,
        }),
    }
}

/// The name of the configuration of `desc` for the CSV `csv_name` in
/// `namespace`: the description's `generateName` and a hash.
pub fn configuration_name(desc: &WebhookDescription, csv_name: &str, namespace: &str) -> String {
    generate_name(&desc.generate_name, &[namespace, csv_name, &desc.generate_name])
}

/// The validating webhook `desc` describes.
fn validating(
    desc: &WebhookDescription,
    namespace_selector: Option<LabelSelector>,
    client_config: WebhookClientConfig,
) -> ValidatingWebhook {
    ValidatingWebhook {
        name: desc.generate_name.clone(),
        rules: desc.rules.clone(),
        failure_policy: desc.failure_policy.clone(),
        match_policy: desc.match_policy.clone(),
        namespace_selector,
        object_selector: desc.object_selector.clone(),
        side_effects: desc.side_effects.clone().unwrap_or_default(),
        timeout_seconds: desc.timeout_seconds,
        admission_review_versions: desc.admission_review_versions.clone().unwrap_or_default(),
        client_config,
        match_conditions: None,
    }
}

/// The mutating webhook `desc` describes.
fn mutating(
    desc: &WebhookDescription,
    namespace_selector: Option<LabelSelector>,
    client_config: WebhookClientConfig,
) -> MutatingWebhook {
    MutatingWebhook {
        name: desc.generate_name.clone(),
        rules: desc.rules.clone(),
        failure_policy: desc.failure_policy.clone(),
        match_policy: desc.match_policy.clone(),
        namespace_selector,
        object_selector: desc.object_selector.clone(),
        side_effects: desc.side_effects.clone().unwrap_or_default(),
        timeout_seconds: desc.timeout_seconds,
        admission_review_versions: desc.admission_review_versions.clone().unwrap_or_default(),
        client_config,
        reinvocation_policy: desc.reinvocation_policy.clone(),
        match_conditions: None,
    }
}

/// A hash of a webhook description (the `olm.webhook-description-hash` label).
pub fn description_hash(desc: &WebhookDescription) -> String {
    let text = serde_json::to_string(desc).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// What the configurations of one CSV are made from.
#[derive(Clone, Debug)]
pub struct Registration<'a> {
    /// The CSV's name.
    pub csv_name: &'a str,
    /// The CSV's namespace (and of the webhook Services).
    pub namespace: &'a str,
    /// The CSV's `olm.owner*` labels.
    pub owner_labels: &'a BTreeMap<String, String>,
    /// The namespaces the operator serves.
    pub targets: &'a Targets,
    /// The CA (PEM) of each served Deployment.
    pub ca_bundles: &'a BTreeMap<String, String>,
}

/// The webhook configurations of a CSV.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Configurations {
    /// ValidatingWebhookConfigurations.
    pub validating: Vec<ValidatingWebhookConfiguration>,
    /// MutatingWebhookConfigurations.
    pub mutating: Vec<MutatingWebhookConfiguration>,
    /// CRDs to point at their conversion webhook: partial CRDs with only `spec.conversion`.
    pub conversions: Vec<DynamicObject>,
}

impl Registration<'_> {
    /// Every configuration of `csv`'s webhooks.
    pub fn configurations(&self, csv: &ClusterServiceVersion) -> Configurations {
        let mut out = Configurations::default();
        let selector = namespace_selector(self.targets);
        for desc in csv.spec.webhook_definitions.iter().flatten() {
            let deployment = desc.deployment_name.clone().unwrap_or_default();
            let ca = self.ca_bundles.get(&deployment).cloned().unwrap_or_default();
            match desc.type_ {
                WebhookAdmissionType::ValidatingAdmissionWebhook => {
                    let client_config = self.client_config(desc, &deployment, &ca);
                    let webhook = validating(desc, selector.clone(), client_config);
                    out.validating.push(ValidatingWebhookConfiguration {
                        metadata: self.metadata(desc),
                        webhooks: Some(vec![webhook]),
                    });
                }
                WebhookAdmissionType::MutatingAdmissionWebhook => {
                    let client_config = self.client_config(desc, &deployment, &ca);
                    let webhook = mutating(desc, selector.clone(), client_config);
                    out.mutating.push(MutatingWebhookConfiguration {
                        metadata: self.metadata(desc),
                        webhooks: Some(vec![webhook]),
                    });
                }
                WebhookAdmissionType::ConversionWebhook => {
                    for crd in desc.conversion_crds.iter().flatten() {
                        out.conversions.push(conversion(
                            crd,
                            self.namespace,
                            &deployment,
                            desc.webhook_path.as_deref(),
                            port(desc.container_port),
                            &ca,
                            desc.admission_review_versions.clone().unwrap_or_default(),
                        ));
                    }
                }
            }
        }
        out.conversions.extend(self.conversion_definitions(csv));
        out
    }

    /// How the API server reaches the webhook of `desc`: the Service of
    /// `deployment`, trusting `ca`.
    fn client_config(&self, desc: &WebhookDescription, deployment: &str, ca: &str) -> WebhookClientConfig {
        WebhookClientConfig {
            ca_bundle: Some(ByteString(ca.as_bytes().to_vec())),
            service: Some(ServiceReference {
                name: certs::service_name(deployment),
                namespace: self.namespace.to_owned(),
                path: desc.webhook_path.clone(),
                port: Some(port(desc.container_port)),
            }),
            url: None,
        }
    }

    /// The CRDs pointed at the conversion webhooks of the CSV's
    /// `conversionWebhookDefinitions`.
    fn conversion_definitions(&self, csv: &ClusterServiceVersion) -> Vec<DynamicObject> {
        let mut conversions = Vec::new();
        for desc in csv.spec.conversion_webhook_definitions.iter().flatten() {
            let ca = self
                .ca_bundles
                .get(&desc.deployment_name)
                .cloned()
                .unwrap_or_default();
            for crd in &desc.conversion_crds {
                conversions.push(conversion(
                    crd,
                    self.namespace,
                    &desc.deployment_name,
                    desc.webhook_path.as_deref(),
                    port(desc.container_port),
                    &ca,
                    desc.conversion_review_versions.clone(),
                ));
            }
        }
        conversions
    }

    fn metadata(&self, desc: &WebhookDescription) -> ObjectMeta {
        let mut labels = self.owner_labels.clone();
        labels.insert(DESCRIPTION_LABEL.to_owned(), desc.generate_name.clone());
        labels.insert(HASH_LABEL.to_owned(), description_hash(desc));
        labels.insert(certs::MANAGED_LABEL.to_owned(), "true".to_owned());
        ObjectMeta {
            name: Some(configuration_name(desc, self.csv_name, self.namespace)),
            labels: Some(labels),
            ..ObjectMeta::default()
        }
    }
}

fn port(container_port: Option<i32>) -> i32 {
    container_port.filter(|p| *p > 0).unwrap_or(certs::DEFAULT_PORT)
}

/// The CRDs resource.
pub fn crd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    )
}

/// A partial CRD that sets only `spec.conversion` to call the webhook of
/// `deployment` (OLM's path default is `/`).
fn conversion(
    crd: &str,
    namespace: &str,
    deployment: &str,
    path: Option<&str>,
    port: i32,
    ca_pem: &str,
    review_versions: Vec<String>,
) -> DynamicObject {
    let ca = serde_json::to_value(ByteString(ca_pem.as_bytes().to_vec())).unwrap_or_default();
    let resource = crd_resource();
    let mut object = DynamicObject::new(crd, &resource);
    object.types = Some(TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    object.data = serde_json::json!({
        "spec": {
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {
                        "service": {
                            "namespace": namespace,
                            "name": certs::service_name(deployment),
                            "path": path.unwrap_or("/"),
                            "port": port,
                        },
                        "caBundle": ca,
                    },
                    "conversionReviewVersions": review_versions,
                }
            }
        }
    });
    object
}

/// Whether the live CRD `live` (as the read step found it, [`super::crd_summary`])
/// already has exactly the `spec.conversion` that `wanted` (made by
/// [`Registration::configurations`]) sets, so that patching it would change
/// nothing. A missing CRD, or a wanted conversion that does not parse, is not
/// current.
pub fn conversion_current(wanted: &DynamicObject, live: Option<&CustomResourceDefinition>) -> bool {
    let Some(live) = live.and_then(|crd| crd.spec.conversion.as_ref()) else {
        return false;
    };
    serde_json::from_value::<CustomResourceConversion>(wanted.data["spec"]["conversion"].clone())
        .is_ok_and(|wanted| &wanted == live)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(modes: &[(&str, bool)], webhooks: serde_json::Value) -> ClusterServiceVersion {
        let modes: Vec<_> = modes
            .iter()
            .map(|(t, s)| serde_json::json!({"type": t, "supported": s}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "demo.v1.0.0", "namespace": "ops"},
            "spec": {
                "displayName": "demo",
                "install": {"strategy": "deployment"},
                "installModes": modes,
                "customresourcedefinitions": {"owned": [
                    {"name": "widgets.example.com", "version": "v1", "kind": "Widget"}
                ]},
                "webhookdefinitions": webhooks,
            }
        }))
        .expect("a CSV")
    }

    fn webhook(type_: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut value = serde_json::json!({
            "generateName": "vwidget.example.com",
            "type": type_,
            "deploymentName": "demo",
            "containerPort": 443,
            "targetPort": 9443,
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "admissionReviewVersions": ["v1"],
            "webhookPath": "/validate",
            "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"],
                       "operations": ["CREATE"], "resources": ["widgets"]}],
        });
        if let (Some(target), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
            target.extend(extra.clone());
        }
        value
    }

    const ALL: &[(&str, bool)] = &[
        ("OwnNamespace", false),
        ("SingleNamespace", false),
        ("MultiNamespace", false),
        ("AllNamespaces", true),
    ];

    #[test]
    fn rules_that_reach_olm_or_every_group_are_refused() {
        let deployments = ["demo".to_owned()];
        let rule = |groups: serde_json::Value, resources: serde_json::Value| {
            csv(
                ALL,
                serde_json::json!([webhook(
                    "ValidatingAdmissionWebhook",
                    serde_json::json!({"rules": [{"apiGroups": groups, "apiVersions": ["*"],
                        "operations": ["*"], "resources": resources}]})
                )]),
            )
        };
        assert_eq!(
            check(
                &rule(serde_json::json!(["*"]), serde_json::json!(["pods"])),
                &deployments
            ),
            Err(Invalid::AllGroups("vwidget.example.com".to_owned()))
        );
        assert_eq!(
            check(
                &rule(
                    serde_json::json!(["operators.coreos.com"]),
                    serde_json::json!(["*"])
                ),
                &deployments
            ),
            Err(Invalid::OlmGroup("vwidget.example.com".to_owned()))
        );
        assert_eq!(
            check(
                &rule(
                    serde_json::json!(["admissionregistration.k8s.io"]),
                    serde_json::json!(["ValidatingWebhookConfiguration"])
                ),
                &deployments
            ),
            Err(Invalid::WebhookResources("vwidget.example.com".to_owned()))
        );
        assert_eq!(
            check(
                &rule(serde_json::json!([""]), serde_json::json!(["pods"])),
                &deployments
            ),
            Ok(())
        );
        assert!(matches!(
            check(&rule(serde_json::json!([""]), serde_json::json!(["pods"])), &[]),
            Err(Invalid::UnknownDeployment { .. })
        ));
        let twice = csv(
            ALL,
            serde_json::json!([
                webhook("ValidatingAdmissionWebhook", serde_json::json!({})),
                webhook("MutatingAdmissionWebhook", serde_json::json!({}))
            ]),
        );
        let repeated = check(&twice, &deployments).unwrap_err();
        assert_eq!(
            repeated.to_string(),
            "CSV contains repeated WebhookDescription name"
        );
    }

    #[test]
    fn conversion_webhooks_need_an_all_namespaces_only_operator_and_owned_crds() {
        let deployments = ["demo".to_owned()];
        let conversion = |crds: serde_json::Value| {
            serde_json::json!([webhook(
                "ConversionWebhook",
                serde_json::json!({"conversionCRDs": crds})
            )])
        };
        let good = conversion(serde_json::json!(["widgets.example.com"]));
        assert_eq!(check(&csv(ALL, good.clone()), &deployments), Ok(()));
        let own = [("OwnNamespace", true), ("AllNamespaces", true)];
        assert!(matches!(
            check(&csv(&own, good), &deployments),
            Err(Invalid::ConversionNotAllNamespaces(_))
        ));
        assert!(matches!(
            check(
                &csv(ALL, conversion(serde_json::json!(["gadgets.example.com"]))),
                &deployments
            ),
            Err(Invalid::NotOwned { .. })
        ));
        assert!(matches!(
            check(&csv(ALL, conversion(serde_json::json!([]))), &deployments),
            Err(Invalid::NoConversionCrds(_))
        ));
    }

    fn registration_for<'a>(
        targets: &'a Targets,
        labels: &'a BTreeMap<String, String>,
        cas: &'a BTreeMap<String, String>,
    ) -> Registration<'a> {
        Registration {
            csv_name: "demo.v1.0.0",
            namespace: "ops",
            owner_labels: labels,
            targets,
            ca_bundles: cas,
        }
    }

    #[test]
    fn configurations_call_the_deployments_service_with_its_ca() {
        let csv = csv(
            ALL,
            serde_json::json!([
                webhook("ValidatingAdmissionWebhook", serde_json::json!({})),
                webhook(
                    "MutatingAdmissionWebhook",
                    serde_json::json!({"generateName": "mwidget.example.com", "reinvocationPolicy": "IfNeeded"})
                ),
                webhook(
                    "ConversionWebhook",
                    serde_json::json!({"generateName": "cwidget.example.com", "webhookPath": null,
                                       "conversionCRDs": ["widgets.example.com"]})
                ),
            ]),
        );
        let labels = BTreeMap::from([("olm.owner".to_owned(), "demo.v1.0.0".to_owned())]);
        let cas = BTreeMap::from([("demo".to_owned(), "CA PEM".to_owned())]);
        let all = Targets::All;
        let made = registration_for(&all, &labels, &cas).configurations(&csv);

        assert_eq!(made.validating.len(), 1);
        let validating = &made.validating[0];
        let name = validating.metadata.name.clone().expect("a name");
        assert!(name.starts_with("vwidget.example.com-"), "{name}");
        let labels = validating.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("olm.owner").map(String::as_str), Some("demo.v1.0.0"));
        assert_eq!(
            labels.get(DESCRIPTION_LABEL).map(String::as_str),
            Some("vwidget.example.com")
        );
        assert!(labels.contains_key(HASH_LABEL));
        let hook = &validating.webhooks.as_ref().expect("webhooks")[0];
        assert_eq!(hook.name, "vwidget.example.com");
        assert_eq!(
            hook.namespace_selector, None,
            "an AllNamespaces operator sees every namespace"
        );
        assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(hook.side_effects, "None");
        let service = hook.client_config.service.clone().expect("a service");
        assert_eq!(
            (
                service.name.as_str(),
                service.namespace.as_str(),
                service.path.as_deref(),
                service.port
            ),
            ("demo-service", "ops", Some("/validate"), Some(443))
        );
        assert_eq!(hook.client_config.ca_bundle, Some(ByteString(b"CA PEM".to_vec())));

        assert_eq!(made.mutating.len(), 1);
        let hook = &made.mutating[0].webhooks.as_ref().expect("webhooks")[0];
        assert_eq!(hook.reinvocation_policy.as_deref(), Some("IfNeeded"));

        assert_eq!(made.conversions.len(), 1);
        let crd = &made.conversions[0];
        assert_eq!(crd.metadata.name.as_deref(), Some("widgets.example.com"));
        let conversion = &crd.data["spec"]["conversion"];
        assert_eq!(conversion["strategy"], "Webhook");
        assert_eq!(conversion["webhook"]["clientConfig"]["service"]["path"], "/");
        assert_eq!(
            conversion["webhook"]["clientConfig"]["service"]["name"],
            "demo-service"
        );
        assert_eq!(conversion["webhook"]["clientConfig"]["caBundle"], "Q0EgUEVN");
        assert_eq!(
            conversion["webhook"]["conversionReviewVersions"],
            serde_json::json!(["v1"])
        );
    }

    #[test]
    fn an_operator_of_some_namespaces_sees_only_those() {
        let csv = csv(
            &[("OwnNamespace", true), ("MultiNamespace", true)],
            serde_json::json!([webhook("ValidatingAdmissionWebhook", serde_json::json!({}))]),
        );
        let labels = BTreeMap::new();
        let cas = BTreeMap::new();
        let targets = Targets::Namespaces(vec!["a".to_owned(), "b".to_owned()]);
        let made = registration_for(&targets, &labels, &cas).configurations(&csv);
        let hook = &made.validating[0].webhooks.as_ref().expect("webhooks")[0];
        let selector = hook.namespace_selector.clone().expect("a selector");
        let requirement = &selector.match_expressions.expect("expressions")[0];
        assert_eq!(requirement.key, NAMESPACE_NAME_LABEL);
        assert_eq!(requirement.operator, "In");
        assert_eq!(requirement.values, Some(vec!["a".to_owned(), "b".to_owned()]));
    }
    #[test]
    fn a_crd_already_calling_the_conversion_webhook_is_not_patched() {
        let csv = csv(
            ALL,
            serde_json::json!([webhook(
                "ConversionWebhook",
                serde_json::json!({"generateName": "cwidget.example.com",
                                   "conversionCRDs": ["widgets.example.com"]})
            )]),
        );
        let labels = BTreeMap::new();
        let cas = BTreeMap::from([("demo".to_owned(), "CA PEM".to_owned())]);
        let all = Targets::All;
        let wanted = registration_for(&all, &labels, &cas)
            .configurations(&csv)
            .conversions[0]
            .clone();
        let live = |conversion: serde_json::Value| -> CustomResourceDefinition {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced",
                         "names": {"plural": "widgets", "kind": "Widget"}, "versions": [],
                         "conversion": conversion},
            }))
            .expect("a CRD")
        };
        let same = wanted.data["spec"]["conversion"].clone();
        assert!(conversion_current(&wanted, Some(&live(same.clone()))));
        assert!(!conversion_current(&wanted, None), "no CRD");
        assert!(
            !conversion_current(&wanted, Some(&live(serde_json::json!({"strategy": "None"})))),
            "no webhook yet"
        );
        let mut other_ca = same.clone();
        other_ca["webhook"]["clientConfig"]["caBundle"] = "T1RIRVI=".into();
        assert!(!conversion_current(&wanted, Some(&live(other_ca))), "another CA");
        let mut other_versions = same;
        other_versions["webhook"]["conversionReviewVersions"] = serde_json::json!(["v1", "v1beta1"]);
        assert!(
            !conversion_current(&wanted, Some(&live(other_versions))),
            "other review versions"
        );
    }
}
