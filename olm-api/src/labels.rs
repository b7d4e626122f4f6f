//! Well-known labels and annotations, the strings that OLM, consoles and
//! users' scripts read and write on objects. Every place that sets or reads
//! one of these uses the constant here.

/// Annotation on Deployments and pods: the name of the OperatorGroup of the operator.
pub const OPERATOR_GROUP: &str = "olm.operatorGroup";
/// Annotation on Deployments and pods: the namespace of the operator.
pub const OPERATOR_NAMESPACE: &str = "olm.operatorNamespace";
/// Annotation on CSVs, Deployments and pods: the comma-separated target
/// namespaces (empty for all namespaces).
pub const TARGET_NAMESPACES: &str = "olm.targetNamespaces";
/// Annotation on OperatorGroups: the APIs its operators provide
/// (`Kind.version.group`, comma-separated).
pub const PROVIDED_APIS: &str = "olm.providedAPIs";
/// Prefix of the label that marks the namespaces an OperatorGroup targets,
/// followed by the OperatorGroup's UID.
pub const OPERATOR_GROUP_UID_PREFIX: &str = "olm.operatorgroup.uid/";

/// Subscription annotation (olm-rs's own): how many replicas each
/// Deployment of the installed CSV runs, in place of the CSV's own count
/// (read by [`crate::replicas::replicas`]). OLM ignores it.
pub const REPLICAS: &str = "olm-rs.dev/replicas";

/// Label on objects a CSV owns: the owner's name.
pub const OWNER: &str = "olm.owner";
/// Label on objects a CSV owns: the owner's kind.
pub const OWNER_KIND: &str = "olm.owner.kind";
/// Label on objects a CSV owns: the owner's namespace.
pub const OWNER_NAMESPACE: &str = "olm.owner.namespace";
/// Label on a Deployment: the hash of the deployment spec the CSV asked for,
/// used to detect drift.
pub const DEPLOYMENT_SPEC_HASH: &str = "olm.deployment-spec-hash";
/// Label on copied CSVs: the namespace of the original.
pub const COPIED_FROM: &str = "olm.copiedFrom";
/// Label on objects created for a CatalogSource (its registry Pod and Service).
pub const CATALOG_SOURCE: &str = "olm.catalogSource";
/// Label on objects managed by olm-rs.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// CSV annotation: the range of versions this CSV can upgrade from directly.
pub const SKIP_RANGE: &str = "olm.skipRange";
/// CSV annotation: extra bundle properties, as a JSON list.
pub const PROPERTIES: &str = "olm.properties";
/// CSV annotation written at install: every property of the installed bundle.
pub const INSTALLED_PROPERTIES: &str = "operatorframework.io/properties";
/// CSV annotation: example custom resources, as a JSON list.
pub const ALM_EXAMPLES: &str = "alm-examples";
/// CSV annotation: the namespace the operator suggests to be installed in.
pub const SUGGESTED_NAMESPACE: &str = "operatorframework.io/suggested-namespace";

/// CSV annotation (olm-rs's own): the relation endpoints the operator
/// declares, `provides`, `requires` and `peers`, as YAML or JSON (see
/// [`crate::endpoints`]). OLM ignores it.
pub const ENDPOINTS: &str = "olm-rs.dev/endpoints";

/// CSV annotation (olm-rs's own): the actions (day-2 operations) the
/// operator offers, each with a description and a JSON Schema of its
/// parameters, as YAML or JSON (see [`crate::actions`]). OLM ignores it.
pub const ACTIONS: &str = "olm-rs.dev/actions";

/// Label of objects OLM manages (value `true`).
pub const OLM_MANAGED: &str = "olm.managed";

/// Bundle unpacking in a Job, as OLM does it.
pub mod unpack {
    /// Label on an unpack Job, its Pods and (in olm-rs) the ConfigMap: the name
    /// of the ConfigMap the bundle is written to. catalog-operator watches only
    /// the Jobs and ConfigMaps that carry it.
    pub const REF: &str = "operatorframework.io/bundle-unpack-ref";
    /// ConfigMap annotation: the bundle image whose content the ConfigMap holds.
    pub const SOURCE_IMAGE: &str = "olm.sourceImage";
    /// ConfigMap annotation: how the values are encoded (`gzip+base64`).
    pub const CONTENT_ENCODING: &str = "olm.contentEncoding";
    /// The one content encoding: each file gzipped, then base64, in `binaryData`.
    pub const GZIP_BASE64: &str = "gzip+base64";
    /// The extractor's environment variable with the bundle image.
    pub const CONTAINER_IMAGE_ENV: &str = "CONTAINER_IMAGE";
    /// CatalogSource annotation (olm-rs's own): how bundle images of the catalog
    /// are unpacked, `Pull` (in process, the default) or `Job` (OLM's method: a
    /// Job on a node pulls the image, for clusters where only nodes reach the
    /// registry).
    pub const METHOD: &str = "olm-rs.dev/bundle-unpack-method";
}

/// Environment variable injected into operator containers: the name of the
/// operator's OperatorCondition.
pub const OPERATOR_CONDITION_NAME_ENV: &str = "OPERATOR_CONDITION_NAME";

/// Bundle annotations (in `metadata/annotations.yaml`).
pub mod bundle {
    /// The bundle's media type, `registry+v1`.
    pub const MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";
    /// The directory of the bundle's manifests.
    pub const MANIFESTS: &str = "operators.operatorframework.io.bundle.manifests.v1";
    /// The directory of the bundle's metadata.
    pub const METADATA: &str = "operators.operatorframework.io.bundle.metadata.v1";
    /// The package the bundle belongs to.
    pub const PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";
    /// The channels the bundle is in, comma-separated.
    pub const CHANNELS: &str = "operators.operatorframework.io.bundle.channels.v1";
    /// The package's default channel.
    pub const DEFAULT_CHANNEL: &str = "operators.operatorframework.io.bundle.channel.default.v1";
}

/// The prefix of the label that ties an object to an installed operator.
pub const OPERATOR_LABEL_PREFIX: &str = "operators.coreos.com/";

/// The longest name part of a label key (Kubernetes' limit).
const MAX_LABEL_NAME: usize = 63;

/// The name of the `Operator` of `package` installed in `namespace`:
/// `<package>.<namespace>`, cut to 63 characters as OLM cuts it, so that it
/// fits the name part of a label key.
pub fn operator_name(package: &str, namespace: &str) -> String {
    let mut name = format!("{package}.{namespace}");
    if name.len() > MAX_LABEL_NAME {
        let mut end = MAX_LABEL_NAME;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
    }
    name
}

/// The label that ties an object to an installed operator:
/// `operators.coreos.com/<package>.<namespace>` (see [`operator_name`]), with
/// an empty value, as OLM sets it.
pub fn operator_label(package: &str, namespace: &str) -> String {
    format!("{OPERATOR_LABEL_PREFIX}{}", operator_name(package, namespace))
}

/// The names of the Operators whose label `labels` carry.
pub fn operator_names<'a>(labels: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    labels
        .into_iter()
        .filter_map(|key| key.strip_prefix(OPERATOR_LABEL_PREFIX))
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_label_names_package_and_namespace() {
        assert_eq!(
            operator_label("etcd", "operators"),
            "operators.coreos.com/etcd.operators"
        );
    }

    #[test]
    fn a_long_operator_name_is_cut_to_a_label_name() {
        let package = "a".repeat(60);
        let name = operator_name(&package, "operators");
        assert_eq!(name.len(), 63);
        assert_eq!(
            operator_label(&package, "operators"),
            format!("operators.coreos.com/{name}")
        );
    }

    #[test]
    fn operator_names_come_from_the_label_keys() {
        let keys = [
            "operators.coreos.com/etcd.ops".to_owned(),
            "operators.coreos.com/".to_owned(),
            "olm.owner".to_owned(),
        ];
        assert_eq!(operator_names(&keys), vec!["etcd.ops".to_owned()]);
    }
}

/// Revisions of installed operators (`model.olm-rs.dev` OperatorRevision).
pub mod revision {
    /// Label on an OperatorRevision: the package it is a revision of.
    pub const PACKAGE: &str = "olm-rs.dev/package";
    /// Label on an OperatorRevision: the Subscription it was recorded for.
    pub const SUBSCRIPTION: &str = "olm-rs.dev/subscription";
    /// Subscription annotation (olm-rs's own): how many revisions of its
    /// operator are kept, the current one included (at least 1; 2 when unset
    /// or unreadable). OLM ignores it.
    pub const HISTORY_LIMIT: &str = "olm-rs.dev/revision-history-limit";
    /// Subscription annotation (olm-rs's own): roll the operator back to the
    /// recorded revision of this name (its CSV's) or number, and hold the
    /// Subscription there (no upgrade) until the annotation is removed. OLM
    /// ignores it.
    pub const ROLLBACK_TO: &str = "olm-rs.dev/rollback-to";
    /// CSV annotation: the CSV a rollback replaced with this one.
    pub const ROLLED_BACK_FROM: &str = "olm-rs.dev/rolled-back-from";
    /// Subscription annotation (olm-rs's own): `"true"` rolls a failed
    /// upgrade back to the revision before by itself, `"false"` never does;
    /// unset, OLMConfig `cluster`'s `spec.features.autoRollback` decides
    /// (off when unset). OLM ignores it.
    pub const AUTO_ROLLBACK: &str = "olm-rs.dev/auto-rollback";
    /// Subscription annotation (olm-rs's own): how long a new CSV may take to
    /// reach Succeeded before its upgrade counts as failed (a duration such
    /// as `10m`); unset, OLMConfig `cluster`'s
    /// `spec.features.autoRollbackDeadline`, else 10 minutes. OLM ignores it.
    pub const AUTO_ROLLBACK_DEADLINE: &str = "olm-rs.dev/auto-rollback-deadline";
    /// Subscription annotation, written by catalog-operator beside
    /// [`ROLLBACK_TO`] when it rolls a failed upgrade back by itself: the CSV
    /// whose upgrade failed. The hold lasts until the catalog's channel head
    /// changes ([`FAILED_UPGRADE_HEAD`]), or until the user removes the
    /// annotations.
    pub const FAILED_UPGRADE: &str = "olm-rs.dev/failed-upgrade";
    /// Subscription annotation, written with [`FAILED_UPGRADE`]: why the
    /// upgrade counted as failed, in words.
    pub const FAILED_UPGRADE_CAUSE: &str = "olm-rs.dev/failed-upgrade-cause";
    /// Subscription annotation, written with [`FAILED_UPGRADE`]: the head of
    /// the Subscription's channel when the upgrade failed. The hold ends once
    /// the head is another CSV.
    pub const FAILED_UPGRADE_HEAD: &str = "olm-rs.dev/failed-upgrade-head";
}
