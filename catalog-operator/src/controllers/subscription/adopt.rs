//! Adoption: a Subscription carries the label
//! `operators.coreos.com/<package>.<namespace>` (its `spec.name` and its own
//! namespace), which makes it a component of its package's `Operator`, as OLM
//! labels the Subscriptions users create.

use std::collections::BTreeMap;

use kube::{
    Api, ResourceExt,
    api::ObjectMeta,
    core::{PartialObjectMeta, PartialObjectMetaExt},
};
use olm_api::{labels, v1alpha1::Subscription};

use super::error::Error;
use crate::controllers::Context;

/// The label `subscription` should carry and does not, if any.
pub fn missing_label(subscription: &Subscription) -> Option<String> {
    if subscription.metadata.deletion_timestamp.is_some() {
        // Going: an apply racing its removal could create it again.
        return None;
    }
    let namespace = subscription.namespace()?;
    let package = subscription.spec.package.as_str();
    if package.is_empty() {
        return None;
    }
    let key = labels::operator_label(package, &namespace);
    (!subscription.labels().contains_key(&key)).then_some(key)
}

/// Adds the label [`missing_label`] names to `subscription`, by server-side
/// apply of that one label.
pub async fn adopt(shared: &Context, subscription: &Subscription) -> Result<(), Error> {
    let (Some(key), Some(namespace)) = (missing_label(subscription), subscription.namespace()) else {
        return Ok(());
    };
    let name = subscription.name_any();
    let api = Api::<PartialObjectMeta<Subscription>>::namespaced(shared.client.clone(), &namespace);
    let body = ObjectMeta {
        name: Some(name.clone()),
        labels: Some(BTreeMap::from([(key, String::new())])),
        ..ObjectMeta::default()
    }
    .into_request_partial::<Subscription>();
    shared
        .writer
        .apply(&api, &name, &body)
        .await
        .map_err(|source| Error::Write {
            what: format!("the operator label of Subscription {namespace}/{name}"),
            source,
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::SubscriptionSpec;

    use super::*;

    fn subscription(package: &str) -> Subscription {
        let mut subscription = Subscription::new(
            "my-sub",
            SubscriptionSpec {
                catalog_source: "demo".into(),
                catalog_source_namespace: "olm".into(),
                package: package.into(),
                channel: None,
                starting_csv: None,
                install_plan_approval: None,
                config: None,
            },
        );
        subscription.metadata.namespace = Some("team".into());
        subscription
    }

    #[test]
    fn the_label_names_the_package_and_the_namespace() {
        let mut sub = subscription("demo-db");
        assert_eq!(
            missing_label(&sub).as_deref(),
            Some("operators.coreos.com/demo-db.team")
        );
        sub.labels_mut()
            .insert("operators.coreos.com/demo-db.team".into(), String::new());
        assert_eq!(missing_label(&sub), None, "labelled already");
        assert_eq!(missing_label(&subscription("")), None, "no package, no label");
    }
}
