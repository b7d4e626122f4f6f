//! What the agent reads of a ClusterServiceVersion: a partial, typed view with
//! only the fields of the `machine` install strategy and the upgrade chain, so the
//! agent neither depends on nor breaks with the rest of the CSV's shape.

use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use olm_api::v1alpha1::{InstallStrategyName, StrategyDetailsMachine};

/// The parts of a CSV's spec the agent reads.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    plural = "clusterserviceversions",
    root = "MachineCsv",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct CsvView {
    /// The operator's version.
    #[serde(default)]
    pub version: Option<String>,
    /// The CSV this one upgrades.
    #[serde(default)]
    pub replaces: Option<String>,
    /// Other CSVs this one upgrades.
    #[serde(default)]
    pub skips: Option<Vec<String>>,
    /// The install strategy.
    #[serde(default)]
    pub install: Option<InstallView>,
}

/// `spec.install`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallView {
    /// The strategy's name.
    #[serde(default)]
    pub strategy: String,
    /// The strategy's details; for `deployment` these are left alone.
    #[serde(default)]
    pub spec: Option<serde_json::Value>,
}

/// A machine CSV of the agent's pool, as the planner sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolCsv {
    /// The CSV's name.
    pub name: String,
    /// The application it is of ([`olm_api::model::application_of`]).
    pub application: String,
    /// Its version (`spec.version`, or empty).
    pub version: String,
    /// The CSVs it upgrades (`spec.replaces` and `spec.skips`).
    pub upgrades_from: Vec<String>,
    /// The CSV a rollback brought it back from (annotation
    /// `olm-rs.dev/rolled-back-from`): its units move to it with `upgrade`,
    /// as to a successor, and that CSV no longer upgrades it
    /// ([`crate::units::plan`]).
    pub rolled_back_from: Option<String>,
    /// The strategy's details.
    pub strategy: StrategyDetailsMachine,
    /// olm-operator has admitted it: it wrote the CSV's effective-config
    /// ConfigMap, which it does only once the CSV is installing (a CSV that
    /// replaces another installs only after the replaced one stepped aside).
    /// Units move to a successor only once it is admitted.
    pub admitted: bool,
}

/// The CSV as a machine CSV of `pool`, or `None` when it is not one (another
/// strategy, another pool, a copy, or being deleted).
pub fn pool_csv(csv: &MachineCsv, pool: &str) -> Option<PoolCsv> {
    if csv.metadata.deletion_timestamp.is_some() || csv.labels().contains_key(olm_api::labels::COPIED_FROM) {
        return None;
    }
    let install = csv.spec.install.as_ref()?;
    if install.strategy != InstallStrategyName::Machine.as_str() {
        return None;
    }
    let strategy: StrategyDetailsMachine = serde_json::from_value(install.spec.clone()?).ok()?;
    if strategy.pool != pool {
        return None;
    }
    let mut upgrades_from: Vec<String> = csv.spec.replaces.iter().cloned().collect();
    upgrades_from.extend(csv.spec.skips.iter().flatten().cloned());
    let name = csv.name_any();
    let application =
        olm_api::model::application_of(&name, &csv.namespace().unwrap_or_default(), csv.labels());
    let rolled_back_from = csv
        .annotations()
        .get(olm_api::labels::revision::ROLLED_BACK_FROM)
        .filter(|from| !from.is_empty() && **from != name)
        .cloned();
    Some(PoolCsv {
        application,
        name,
        version: csv.spec.version.clone().unwrap_or_default(),
        upgrades_from,
        rolled_back_from,
        strategy,
        admitted: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(value: serde_json::Value) -> MachineCsv {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_machine_csv_of_the_pool_is_read_and_others_are_not() {
        let machine = csv(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "demo.v2.0.0", "namespace": "edge",
                         "labels": {"operators.coreos.com/demo.edge": ""}},
            "spec": {"version": "2.0.0", "replaces": "demo.v1.0.0", "skips": ["demo.v1.5.0"],
                     "displayName": "ignored",
                     "install": {"strategy": "machine", "spec": {
                        "pool": "edge", "hooks": {"configMap": "demo-hooks"},
                        "config": {"port": "8080"}, "hookTimeoutSeconds": 30}}}
        }));
        let read = pool_csv(&machine, "edge").unwrap();
        assert_eq!(read.version, "2.0.0");
        assert_eq!(read.application, "demo");
        assert_eq!(read.upgrades_from, ["demo.v1.0.0", "demo.v1.5.0"]);
        assert_eq!(read.rolled_back_from, None);
        assert_eq!(read.strategy.hooks.config_map, "demo-hooks");
        assert_eq!(read.strategy.hook_timeout_seconds, Some(30));
        assert_eq!(pool_csv(&machine, "other"), None);

        // Rolled back to: the CSV it came back from is named.
        let mut rolled_back = machine.clone();
        rolled_back.annotations_mut().insert(
            olm_api::labels::revision::ROLLED_BACK_FROM.to_owned(),
            "demo.v3.0.0".to_owned(),
        );
        let read = pool_csv(&rolled_back, "edge").unwrap();
        assert_eq!(read.rolled_back_from.as_deref(), Some("demo.v3.0.0"));

        let deployment = csv(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "web.v1", "namespace": "edge"},
            "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}}
        }));
        assert_eq!(pool_csv(&deployment, "edge"), None);
    }
}
