//! Decide: from the components found by an Operator's label, the Operator's
//! status and whether it is created, updated, deleted or left alone. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, Time};
use olm_api::{
    labels::OPERATOR_LABEL_PREFIX,
    v1::{ComponentCondition, Components, Operator, OperatorSpec, OperatorStatus, RichReference},
};
use olm_runtime::effects::{Desired, Effects, Removal, StatusWrite};
use serde_json::Value;

/// One object that carries an Operator's label.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Component {
    /// Its `apiVersion`.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its namespace; none when cluster-scoped.
    pub namespace: Option<String>,
    /// Its `status.conditions`, as [`conditions_of`] reads them.
    pub conditions: Option<Vec<ComponentCondition>>,
}

/// What to do with the Operator.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// It is as it should be.
    Nothing,
    /// It does not exist and no component carries its label: nothing to do, and
    /// nothing to remember.
    Gone,
    /// It is missing while components carry its label: create it with this status.
    Create(OperatorStatus),
    /// Its status is out of date.
    UpdateStatus(OperatorStatus),
    /// No component carries its label any more.
    Delete,
}

impl Effect {
    /// The writes this decision takes for the Operator `name`, as the runtime's
    /// applier performs them: the (empty-spec) Operator, its removal, its status.
    pub fn effects(&self, name: &str) -> Effects<OperatorStatus> {
        let mut effects = Effects::none();
        match self {
            Effect::Nothing | Effect::Gone => {}
            Effect::Create(status) => {
                let operator = Operator::new(name, OperatorSpec {});
                effects
                    .objects
                    .push(Desired::fields(&operator).expect("an Operator serializes"));
                effects.status = Some(StatusWrite {
                    name: name.to_owned(),
                    status: status.clone(),
                });
            }
            Effect::UpdateStatus(status) => {
                effects.status = Some(StatusWrite {
                    name: name.to_owned(),
                    status: status.clone(),
                });
            }
            Effect::Delete => effects.removals.push(Removal::of::<Operator>(None, name)),
        }
        effects
    }
}

/// The label key of the Operator `name`.
pub fn label_key(name: &str) -> String {
    format!("{OPERATOR_LABEL_PREFIX}{name}")
}

/// The selector of the components of the Operator `name`: its label exists,
/// whatever its value (OLM sets an empty one).
pub fn label_selector(name: &str) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: label_key(name),
            operator: "Exists".to_owned(),
            values: None,
        }]),
        match_labels: None,
    }
}

/// The status of the Operator `name` with `components`: the selector, and one
/// reference per component ordered as OLM orders them (kind, apiVersion,
/// namespace, name).
pub fn status(name: &str, components: &[Component]) -> OperatorStatus {
    let mut sorted: Vec<&Component> = components.iter().collect();
    sorted.sort_by(|a, b| {
        (&a.kind, &a.api_version, &a.namespace, &a.name).cmp(&(
            &b.kind,
            &b.api_version,
            &b.namespace,
            &b.name,
        ))
    });
    sorted.dedup_by(|a, b| {
        (&a.kind, &a.api_version, &a.namespace, &a.name) == (&b.kind, &b.api_version, &b.namespace, &b.name)
    });
    let refs: Vec<RichReference> = sorted
        .into_iter()
        .map(|component| RichReference {
            api_version: Some(component.api_version.clone()),
            kind: Some(component.kind.clone()),
            name: Some(component.name.clone()),
            namespace: component.namespace.clone(),
            conditions: component.conditions.clone(),
            ..RichReference::default()
        })
        .collect();
    OperatorStatus {
        components: Some(Components {
            label_selector: label_selector(name),
            refs: (!refs.is_empty()).then_some(refs),
        }),
    }
}

/// What to do with the Operator `name`, `current` as read (none when it does
/// not exist), given the `components` that carry its label.
pub fn decide(name: &str, current: Option<&Operator>, components: &[Component]) -> Effect {
    let deleting = current.is_some_and(|op| op.metadata.deletion_timestamp.is_some());
    match (current, components.is_empty()) {
        // Going already: its deletion brings it back here, to be created again if need be.
        (Some(_), _) if deleting => Effect::Nothing,
        (None, true) => Effect::Gone,
        (Some(_), true) => Effect::Delete,
        (None, false) => Effect::Create(status(name, components)),
        (Some(op), false) => {
            let next = status(name, components);
            if op.status.as_ref() == Some(&next) {
                Effect::Nothing
            } else {
                Effect::UpdateStatus(next)
            }
        }
    }
}

/// The `status.conditions` of a component's `status`, copied field by field
/// as OLM copies them: `type`, `status`, `reason`, `message`,
/// `lastUpdateTime`, `lastTransitionTime`. An entry that lacks `type` or
/// `status` (a CSV's phase history has neither) gets them empty, as in OLM.
/// None when the component has no conditions.
pub fn conditions_of(status: Option<&Value>) -> Option<Vec<ComponentCondition>> {
    let list = status?.get("conditions")?.as_array()?;
    let conditions: Vec<ComponentCondition> = list.iter().filter_map(condition_of).collect();
    (!conditions.is_empty()).then_some(conditions)
}

fn condition_of(entry: &Value) -> Option<ComponentCondition> {
    let entry = entry.as_object()?;
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_owned);
    let time = |key: &str| {
        entry
            .get(key)
            .and_then(|value| serde_json::from_value::<Time>(value.clone()).ok())
    };
    Some(ComponentCondition {
        type_: text("type").unwrap_or_default(),
        status: text("status").unwrap_or_default(),
        reason: text("reason").filter(|r| !r.is_empty()),
        message: text("message").filter(|m| !m.is_empty()),
        last_update_time: time("lastUpdateTime"),
        last_transition_time: time("lastTransitionTime"),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    use super::*;

    const NAME: &str = "demo-db.ops";

    fn component(kind: &str, api_version: &str, name: &str, namespace: Option<&str>) -> Component {
        Component {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: namespace.map(str::to_owned),
            conditions: None,
        }
    }

    fn operator(status: Option<OperatorStatus>) -> Operator {
        Operator {
            metadata: ObjectMeta {
                name: Some(NAME.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Default::default(),
            status,
        }
    }

    fn install() -> Vec<Component> {
        vec![
            component(
                "Subscription",
                "operators.coreos.com/v1alpha1",
                "demo-db",
                Some("ops"),
            ),
            component("Deployment", "apps/v1", "demo-db", Some("ops")),
            component(
                "CustomResourceDefinition",
                "apiextensions.k8s.io/v1",
                "databases.demo.olm-rs.dev",
                None,
            ),
            component(
                "ClusterServiceVersion",
                "operators.coreos.com/v1alpha1",
                "demo-db.v1.1.0",
                Some("ops"),
            ),
            component(
                "InstallPlan",
                "operators.coreos.com/v1alpha1",
                "install-abcde",
                Some("ops"),
            ),
        ]
    }

    fn kinds(status: &OperatorStatus) -> Vec<String> {
        status
            .components
            .as_ref()
            .and_then(|c| c.refs.as_ref())
            .into_iter()
            .flatten()
            .map(|r| r.kind.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn components_become_references_in_olms_order() {
        let status = status(NAME, &install());
        assert_eq!(
            kinds(&status),
            vec![
                "ClusterServiceVersion",
                "CustomResourceDefinition",
                "Deployment",
                "InstallPlan",
                "Subscription"
            ]
        );
        let components = status.components.expect("components");
        let crd = &components.refs.as_ref().expect("refs")[1];
        assert_eq!(crd.namespace, None, "a cluster-scoped component has no namespace");
        assert_eq!(crd.api_version.as_deref(), Some("apiextensions.k8s.io/v1"));
        assert_eq!(crd.name.as_deref(), Some("databases.demo.olm-rs.dev"));
        assert_eq!(
            serde_json::to_value(&components.label_selector).expect("a selector"),
            json!({"matchExpressions": [{"key": "operators.coreos.com/demo-db.ops", "operator": "Exists"}]})
        );
    }

    #[test]
    fn the_same_object_is_referenced_once() {
        let mut twice = install();
        twice.push(twice[0].clone());
        assert_eq!(kinds(&status(NAME, &twice)).len(), 5);
    }

    #[test]
    fn conditions_are_copied_as_the_component_reports_them() {
        let deployment = json!({"conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability.",
             "lastUpdateTime": "2026-11-26T10:00:00Z", "lastTransitionTime": "2026-11-26T09:59:00Z"},
            {"type": "Progressing", "status": "True"}
        ]});
        let conditions = conditions_of(Some(&deployment)).expect("conditions");
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0].type_, "Available");
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].reason.as_deref(), Some("MinimumReplicasAvailable"));
        assert_eq!(
            serde_json::to_value(&conditions[0].last_transition_time).expect("a time"),
            json!("2026-11-26T09:59:00Z")
        );
        assert_eq!(
            (
                conditions[1].reason.as_ref(),
                conditions[1].last_update_time.as_ref()
            ),
            (None, None)
        );

        let mut with_conditions = install();
        with_conditions[1].conditions = Some(conditions.clone());
        let status = status(NAME, &with_conditions);
        let refs = status.components.and_then(|c| c.refs).expect("refs");
        let deployment_ref = refs
            .iter()
            .find(|r| r.kind.as_deref() == Some("Deployment"))
            .expect("the Deployment");
        assert_eq!(deployment_ref.conditions.as_ref(), Some(&conditions));
    }

    #[test]
    fn a_csvs_phase_history_gets_empty_types_as_in_olm() {
        let csv = json!({"phase": "Succeeded", "conditions": [
            {"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed with no errors",
             "lastTransitionTime": "2026-11-26T10:00:00Z", "lastUpdateTime": "2026-11-26T10:00:00Z"}
        ]});
        let conditions = conditions_of(Some(&csv)).expect("conditions");
        assert_eq!(
            (conditions[0].type_.as_str(), conditions[0].status.as_str()),
            ("", "")
        );
        assert_eq!(conditions[0].reason.as_deref(), Some("InstallSucceeded"));
    }

    #[test]
    fn no_conditions_means_none() {
        assert_eq!(conditions_of(None), None);
        assert_eq!(conditions_of(Some(&json!({}))), None);
        assert_eq!(conditions_of(Some(&json!({"conditions": []}))), None);
        assert_eq!(conditions_of(Some(&json!({"conditions": "nonsense"}))), None);
    }

    #[test]
    fn when_to_create_update_delete_or_leave_alone() {
        let components = install();
        let current = status(NAME, &components);
        let mut deleting = operator(Some(current.clone()));
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let cases: Vec<(&str, Option<Operator>, Vec<Component>, Effect)> = vec![
            ("gone, no components", None, vec![], Effect::Gone),
            (
                "gone (deleted by a user) while components remain",
                None,
                components.clone(),
                Effect::Create(current.clone()),
            ),
            (
                "the last component went",
                Some(operator(Some(current.clone()))),
                vec![],
                Effect::Delete,
            ),
            (
                "up to date",
                Some(operator(Some(current.clone()))),
                components.clone(),
                Effect::Nothing,
            ),
            (
                "a new Operator without status",
                Some(operator(None)),
                components.clone(),
                Effect::UpdateStatus(current.clone()),
            ),
            (
                "a component went",
                Some(operator(Some(current.clone()))),
                components[1..].to_vec(),
                Effect::UpdateStatus(status(NAME, &components[1..])),
            ),
            (
                "being deleted",
                Some(deleting),
                components.clone(),
                Effect::Nothing,
            ),
        ];
        for (case, current, components, wanted) in cases {
            assert_eq!(decide(NAME, current.as_ref(), &components), wanted, "{case}");
        }
    }

    #[test]
    fn each_decision_maps_to_the_writes_the_applier_performs() {
        let status = status(NAME, &[component("Deployment", "apps/v1", "db", Some("ops"))]);
        let created = Effect::Create(status.clone()).effects(NAME);
        assert_eq!(created.objects.len(), 1);
        let object = &created.objects[0].object;
        assert_eq!(object.types.as_ref().unwrap().kind, "Operator");
        assert_eq!(object.metadata.name.as_deref(), Some(NAME));
        assert!(
            object.metadata.annotations.is_none(),
            "an Operator is not owned whole"
        );
        assert_eq!(created.status.as_ref().map(|w| &w.status), Some(&status));

        let updated = Effect::UpdateStatus(status.clone()).effects(NAME);
        assert!(updated.objects.is_empty() && updated.removals.is_empty());
        assert_eq!(updated.status.map(|w| w.name), Some(NAME.to_owned()));

        let deleted = Effect::Delete.effects(NAME);
        assert_eq!(deleted.removals, [Removal::of::<Operator>(None, NAME)]);
        assert!(deleted.status.is_none());

        assert!(Effect::Nothing.effects(NAME).is_empty());
        assert!(Effect::Gone.effects(NAME).is_empty());
    }
}
