//! Pure computations of the OperatorGroup controller: which namespaces an
//! OperatorGroup selects, and the APIs its operators provide.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::core::{ParseExpressionError, Selector, SelectorExt};
use olm_api::{
    v1::OperatorGroupSpec,
    v1alpha1::{ClusterServiceVersion, CsvPhase},
};

/// How an OperatorGroup selects its namespaces.
#[derive(Clone, Debug, PartialEq)]
pub enum Selection {
    /// Every namespace: `status.namespaces` is `[""]`.
    All,
    /// These namespaces, by name (`spec.targetNamespaces`, which wins).
    Named(BTreeSet<String>),
    /// The namespaces whose labels match (`spec.selector`).
    Selector(LabelSelector),
}

/// How `spec` selects namespaces: `targetNamespaces` when it names any,
/// otherwise `selector` when set, otherwise all namespaces.
pub fn selection(spec: &OperatorGroupSpec) -> Selection {
    let named: BTreeSet<String> = spec
        .target_namespaces
        .iter()
        .flatten()
        .filter(|ns| !ns.is_empty())
        .cloned()
        .collect();
    if !named.is_empty() {
        return Selection::Named(named);
    }
    match &spec.selector {
        Some(selector) => Selection::Selector(selector.clone()),
        None => Selection::All,
    }
}

/// The namespaces `selection` picks among `namespaces` (the cluster's
/// namespaces, as metadata), sorted; `[""]` for all. Named namespaces that do
/// not exist are left out. Fails when the label selector is not a valid one.
pub fn selected_namespaces<'a>(
    selection: &Selection,
    namespaces: impl IntoIterator<Item = &'a ObjectMeta>,
) -> Result<Vec<String>, ParseExpressionError> {
    let picked: BTreeSet<String> = match selection {
        Selection::All => return Ok(vec![String::new()]),
        Selection::Named(names) => namespaces
            .into_iter()
            .filter_map(|ns| ns.name.as_ref())
            .filter(|name| names.contains(*name))
            .cloned()
            .collect(),
        Selection::Selector(selector) => {
            let selector = Selector::try_from(selector.clone())?;
            let no_labels = Default::default();
            namespaces
                .into_iter()
                .filter(|ns| selector.matches(ns.labels.as_ref().unwrap_or(&no_labels)))
                .filter_map(|ns| ns.name.clone())
                .collect()
        }
    };
    Ok(picked.into_iter().collect())
}

/// The `olm.providedAPIs` annotation for the CSVs of an OperatorGroup's
/// namespace: `Kind.version.group` of every owned CRD and APIService, sorted,
/// comma-separated. CSVs being deleted or replaced-and-deleting no longer count.
pub fn provided_apis<'a>(csvs: impl IntoIterator<Item = &'a ClusterServiceVersion>) -> String {
    let mut apis = BTreeSet::new();
    for csv in csvs {
        let deleting = csv.metadata.deletion_timestamp.is_some()
            || csv.status.as_ref().and_then(|s| s.phase) == Some(CsvPhase::Deleting);
        if deleting {
            continue;
        }
        for crd in csv.owned_crds() {
            let group = crd
                .name
                .split_once('.')
                .map(|(_, group)| group)
                .unwrap_or_default();
            apis.insert(format!("{}.{}.{}", crd.kind, crd.version, group));
        }
        let owned_services = csv
            .spec
            .api_service_definitions
            .as_ref()
            .and_then(|d| d.owned.as_ref());
        for service in owned_services.into_iter().flatten() {
            apis.insert(format!("{}.{}.{}", service.kind, service.version, service.group));
        }
    }
    apis.into_iter().collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> OperatorGroupSpec {
        serde_saphyr::from_str(yaml).expect("a valid OperatorGroup spec")
    }

    #[test]
    fn target_namespaces_win_over_the_selector() {
        let spec = spec("targetNamespaces: [b, a, '']\nselector: {matchLabels: {team: x}}\n");
        assert_eq!(
            selection(&spec),
            Selection::Named(["a".to_owned(), "b".to_owned()].into())
        );
    }

    #[test]
    fn a_selector_selects_by_label_and_nothing_selects_all() {
        assert!(matches!(
            selection(&spec("selector: {matchLabels: {team: x}}\n")),
            Selection::Selector(_)
        ));
        assert_eq!(selection(&spec("{}\n")), Selection::All);
        assert_eq!(selection(&spec("targetNamespaces: []\n")), Selection::All);
    }

    fn namespace(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn named_namespaces_that_exist_are_selected_sorted() {
        let cluster = [namespace("b", &[]), namespace("a", &[]), namespace("c", &[])];
        let selection = selection(&spec("targetNamespaces: [c, a, gone]\n"));
        assert_eq!(
            selected_namespaces(&selection, &cluster).unwrap(),
            ["a", "c"],
            "a named namespace that does not exist is left out"
        );
    }

    #[test]
    fn a_selector_selects_matching_labels_and_all_is_the_empty_name() {
        let cluster = [
            namespace("z", &[("team", "x")]),
            namespace("y", &[("team", "y")]),
            namespace("a", &[("team", "x"), ("tier", "1")]),
            ObjectMeta {
                name: Some("unlabelled".to_owned()),
                ..ObjectMeta::default()
            },
        ];
        let by_label = selection(&spec("selector: {matchLabels: {team: x}}\n"));
        assert_eq!(selected_namespaces(&by_label, &cluster).unwrap(), ["a", "z"]);
        let by_expression = selection(&spec(
            "selector: {matchExpressions: [{key: team, operator: NotIn, values: [x]}]}\n",
        ));
        assert_eq!(
            selected_namespaces(&by_expression, &cluster).unwrap(),
            ["unlabelled", "y"]
        );
        assert_eq!(selected_namespaces(&Selection::All, &cluster).unwrap(), [""]);
    }

    #[test]
    fn an_invalid_selector_is_an_error() {
        let invalid = selection(&spec(
            "selector: {matchExpressions: [{key: team, operator: In}]}\n",
        ));
        assert!(selected_namespaces(&invalid, &[namespace("a", &[])]).is_err());
    }

    #[test]
    fn provided_apis_list_owned_crds_and_apiservices_once_sorted() {
        let csv: ClusterServiceVersion = serde_saphyr::from_str(
            r#"
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata: {name: demo.v1.0.0, namespace: ops}
spec:
  displayName: Demo
  install: {strategy: deployment}
  customresourcedefinitions:
    owned:
    - {name: widgets.example.com, version: v1, kind: Widget}
    - {name: gadgets.example.com, version: v1beta1, kind: Gadget}
    required:
    - {name: others.example.com, version: v1, kind: Other}
  apiservicedefinitions:
    owned:
    - {name: v1.metrics.example.com, group: metrics.example.com, version: v1, kind: Metric}
"#,
        )
        .expect("a valid CSV");
        assert_eq!(
            provided_apis([&csv, &csv]),
            "Gadget.v1beta1.example.com,Metric.v1.metrics.example.com,Widget.v1.example.com"
        );
    }
}
