//! Application leaders, as Juju's: of the units of an application on machines,
//! exactly one leads at a time. Leadership is a Lease in the application's
//! namespace, [`leader_lease`], that the agents of the machines running the
//! application's units hold in turn: the holder (its `holderIdentity`, the
//! Machine's name) renews it; when it stops (its machine is lost), another
//! unit's agent takes it once it expired.
//!
//! The Lease carries the labels [`LEADER_OF_LABEL`] (the application) and
//! [`crate::substrate::POOL_LABEL`] (the pool that runs it); the API server lets
//! an agent write it only as its own holder and only for its own pool (see
//! `manifests/machine-agent-policy.yaml`).

use std::collections::BTreeMap;

use crate::labels::OPERATOR_LABEL_PREFIX;

/// Label on a leader Lease: the application it elects the leader of.
pub const LEADER_OF_LABEL: &str = "model.olm-rs.dev/leader-of";

/// The name of the leader Lease of `application`: `<application>.leader` (the
/// dot keeps it apart from every Machine's heartbeat Lease `<pool>-<id>`).
pub fn leader_lease(application: &str) -> String {
    format!("{application}.leader")
}

/// The application a CSV `csv` of `namespace` with `labels` belongs to: its
/// package, from OLM's label `operators.coreos.com/<package>.<namespace>`, or
/// the CSV's own name when it carries none (a CSV applied by hand).
pub fn application_of(csv: &str, namespace: &str, labels: &BTreeMap<String, String>) -> String {
    let suffix = format!(".{namespace}");
    labels
        .keys()
        .find_map(|key| {
            key.strip_prefix(OPERATOR_LABEL_PREFIX)
                .and_then(|rest| rest.strip_suffix(&suffix))
                .filter(|package| !package.is_empty())
        })
        .unwrap_or(csv)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_application_is_the_package_else_the_csv() {
        let labels = BTreeMap::from([
            ("app".to_owned(), "x".to_owned()),
            ("operators.coreos.com/demo-db.apps".to_owned(), String::new()),
        ]);
        assert_eq!(application_of("demo-db.v1.0.0", "apps", &labels), "demo-db");
        assert_eq!(
            application_of("demo-db.v1.0.0", "other", &labels),
            "demo-db.v1.0.0"
        );
        assert_eq!(application_of("x.v1", "apps", &BTreeMap::new()), "x.v1");
        assert_eq!(leader_lease("demo-db"), "demo-db.leader");
    }
}
