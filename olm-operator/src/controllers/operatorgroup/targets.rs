//! Pure computations of the OperatorGroup controller: which namespaces an
//! OperatorGroup selects, and the APIs its operators provide.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
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
            apis.insert(format!("{}.{}.{}", crd.kind, crd.version, crd.group()));
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
